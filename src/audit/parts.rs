//! Inputs whose list items the record keeps once each by content: a model
//! call's `messages`, which an agent loop sends whole every turn, so storing
//! each input whole would grow a run's record with the square of its turns.
//!
//! Such a row's `input` column holds the input without that field, its
//! `parts` column the items' keys, and each item's compact JSON is a body
//! of `outputs`, keyed by its SHA-256. The keys are written one of two
//! ways:
//!
//! - `{"FIELD":["<sha256>", ...]}`: every key;
//! - `{"FIELD":{"after":{"task":T,"seq":S},"keep":K,"add":[...]}}`: the
//!   first K keys of the list of the run's call (T, S), then `add`. A
//!   conversation's turn repeats the turn before it and adds a message or
//!   two, so its row names only those; without this, the keys alone would
//!   grow with the square of the turns. The row it names is earlier in the
//!   same run's chain, whose hashes cover both rows.
//!
//! The writer splits the redacted input ([`split`]) and the readers put it back together
//! ([`assemble`]) into the very text the writer redacted: both use this
//! module, and the writer stores an input whole when putting it back would
//! not give the same bytes.

use crate::digest::sha256_hex;
use serde_json::Value;

/// A redacted input taken apart: what its row and `outputs` store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The input without the field, as its `input` column stores it.
    pub input: String,
    /// The `parts` column: every key, until [`Split::after`] says which
    /// earlier list it continues.
    pub column: String,
    /// Every item's key, in order.
    pub keys: Vec<String>,
    /// Each item as (SHA-256 of its text, its compact JSON text), in order.
    pub items: Vec<(String, String)>,
}

/// Takes list field `field` out of `text` (an input's redacted compact
/// JSON), or `None` when the input is not an object holding a list there,
/// or when [`assemble`] would not give `text` back byte for byte (a number
/// JSON cannot carry exactly): such an input is stored whole.
pub fn split(text: &str, field: &str) -> Option<Split> {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    let Some(Value::Array(list)) = map.remove(field) else {
        return None;
    };
    let input = Value::Object(map).to_string();
    let items: Vec<(String, String)> = list
        .iter()
        .map(|item| {
            let body = item.to_string();
            (sha256_hex(body.as_bytes()), body)
        })
        .collect();
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    let column = serde_json::json!({ field: keys }).to_string();
    let bodies: Vec<Value> = items.iter().map(|(_, b)| parse_body(b)).collect();
    let keys = keys.into_iter().map(String::from).collect();
    (assemble(&input, field, bodies).as_deref() == Some(text)).then_some(Split {
        input,
        column,
        keys,
        items,
    })
}

impl Split {
    /// Writes the column as the first `keep` keys of call (`task`, `seq`)'s
    /// list, then the rest of this one's.
    pub fn after(&mut self, field: &str, task: &str, seq: i64, keep: usize) {
        let add = &self.keys[keep..];
        self.column = serde_json::json!({
            field: {"after": {"task": task, "seq": seq}, "keep": keep, "add": add}
        })
        .to_string();
    }
}

/// How a `parts` column gives its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// Every key.
    Keys(Vec<String>),
    /// The first `keep` keys of call (`task`, `seq`)'s list, then `add`.
    After {
        task: String,
        seq: i64,
        keep: usize,
        add: Vec<String>,
    },
}

/// How many leading keys two lists share.
pub fn common_prefix(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The whole input's text: `input` (the column as stored) with `field` set
/// to `bodies`, serialized as the writer's redaction serializes (compact,
/// keys sorted). `None` when the stored input is not a JSON object.
pub fn assemble(input: &str, field: &str, bodies: Vec<Value>) -> Option<String> {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(input) else {
        return None;
    };
    map.insert(field.to_string(), Value::Array(bodies));
    Some(Value::Object(map).to_string())
}

/// An item's stored text as a value; text that does not parse (a damaged
/// body) is kept as a string rather than hidden.
pub fn parse_body(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()))
}

/// The field a `parts` column names and how it lists its keys; `None` for
/// text of another shape (the writer writes nothing else).
pub fn listed(column: &str) -> Option<(String, Listed)> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(column) else {
        return None;
    };
    let mut fields = map.into_iter();
    let (Some((field, value)), None) = (fields.next(), fields.next()) else {
        return None;
    };
    let strings = |v: &Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|k| k.as_str().map(String::from))
            .collect()
    };
    let listed = match &value {
        Value::Array(_) => Listed::Keys(strings(&value)?),
        Value::Object(o) => Listed::After {
            task: o.get("after")?.get("task")?.as_str()?.to_string(),
            seq: o.get("after")?.get("seq")?.as_i64()?,
            keep: usize::try_from(o.get("keep")?.as_u64()?).ok()?,
            add: strings(o.get("add")?)?,
        },
        _ => return None,
    };
    Some((field, listed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::redact::Redaction;
    use serde_json::json;

    fn conversation() -> Value {
        json!({
            "model": "m",
            "temperature": 0.7,
            "messages": [
                {"role": "user", "content": "Fix the bug in \"a.rs\" — ünïcode, \u{1}"},
                {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "name": "read", "input": {"path": "a.rs", "n": 1.5e300}}]},
                {"role": "tool", "toolCallId": "c1", "content": "fn main() {}\n", "isError": true},
            ],
            "zeta": {"b": 1, "a": [1, 2]},
        })
    }

    #[test]
    fn an_input_put_back_together_is_the_redacted_text_byte_for_byte() {
        let (_, text) = Redaction::input(&conversation(), &[]);
        let s = split(&text, "messages").expect("a list field splits");
        assert!(!s.input.contains("messages"), "{}", s.input);
        assert_eq!(s.items.len(), 3);
        let bodies = s.items.iter().map(|(_, b)| parse_body(b)).collect();
        assert_eq!(assemble(&s.input, "messages", bodies).unwrap(), text);
        let (field, listed) = listed(&s.column).unwrap();
        assert_eq!(field, "messages");
        let want: Vec<String> = s.items.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(listed, Listed::Keys(want.clone()));
        assert_eq!(s.keys, want);
        assert_eq!(want[0], sha256_hex(s.items[0].1.as_bytes()));
    }

    #[test]
    fn an_input_without_a_list_there_is_stored_whole() {
        assert_eq!(split(r#"{"messages":"hi"}"#, "messages"), None);
        assert_eq!(split(r#"{"path":"a"}"#, "messages"), None);
        assert_eq!(split("[1]", "messages"), None);
        let empty = split(r#"{"messages":[],"model":"m"}"#, "messages").unwrap();
        assert_eq!(
            (empty.input.as_str(), empty.items.len()),
            (r#"{"model":"m"}"#, 0)
        );
    }

    #[test]
    fn a_parts_column_of_another_shape_names_no_keys() {
        assert_eq!(listed(r#"{"messages":[1]}"#), None);
        assert_eq!(listed(r#"{"a":[],"b":[]}"#), None);
        assert_eq!(listed("nope"), None);
        assert_eq!(
            listed(r#"{"m":{"after":{"task":"0"},"keep":1,"add":[]}}"#),
            None
        );
        assert_eq!(
            listed(r#"{"m":["k"]}"#),
            Some(("m".into(), Listed::Keys(vec!["k".into()])))
        );
    }

    #[test]
    fn a_list_that_continues_another_names_it_and_only_the_new_keys() {
        let mut s = split(r#"{"m":[1,2,3]}"#, "m").unwrap();
        s.after("m", "0.1", 7, 2);
        assert_eq!(
            listed(&s.column),
            Some((
                "m".into(),
                Listed::After {
                    task: "0.1".into(),
                    seq: 7,
                    keep: 2,
                    add: vec![s.keys[2].clone()]
                }
            ))
        );
        assert_eq!(common_prefix(&s.keys, &s.keys[..2]), 2);
        assert_eq!(common_prefix(&s.keys[1..], &s.keys), 0);
    }
}
