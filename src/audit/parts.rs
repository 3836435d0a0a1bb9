//! Inputs whose list items the record keeps once each by content: a model
//! call's `messages`, which an agent loop sends whole every turn, so storing
//! each input whole would grow a run's record with the square of its turns.
//!
//! Such a row's `input` column holds the input without that field, its
//! `parts` column `{"FIELD":["<sha256>", ...]}`, and each item's compact
//! JSON is a body of `outputs`, keyed by its SHA-256. The writer splits the
//! redacted input ([`split`]) and the readers put it back together
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
    /// The `parts` column: `{"FIELD":[keys]}`.
    pub column: String,
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
    (assemble(&input, field, bodies).as_deref() == Some(text)).then_some(Split {
        input,
        column,
        items,
    })
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

/// The field a `parts` column names and its items' keys; `None` for text
/// that is not one field's list of keys (the writer writes nothing else).
pub fn keys(column: &str) -> Option<(String, Vec<String>)> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(column) else {
        return None;
    };
    let mut fields = map.into_iter();
    let (Some((field, Value::Array(list))), None) = (fields.next(), fields.next()) else {
        return None;
    };
    let keys: Option<Vec<String>> = list.iter().map(|k| k.as_str().map(String::from)).collect();
    Some((field, keys?))
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
        let (field, keys) = keys(&s.column).unwrap();
        assert_eq!(field, "messages");
        let want: Vec<String> = s.items.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, want);
        assert_eq!(keys[0], sha256_hex(s.items[0].1.as_bytes()));
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
        assert_eq!(keys(r#"{"messages":[1]}"#), None);
        assert_eq!(keys(r#"{"a":[],"b":[]}"#), None);
        assert_eq!(keys("nope"), None);
        assert_eq!(keys(r#"{"m":["k"]}"#), Some(("m".into(), vec!["k".into()])));
    }
}
