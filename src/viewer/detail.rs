//! What a call's page shows beyond its fields: a file change as a diff, a
//! command's streams, a model call as its conversation; and every value
//! cut to a bound, so a 10 MB output is a page that loads at once.

use crate::flows::apply_patch::ApplyPatch;
use crate::flows::edit::Edit;
use crate::flows::model::Model;
use crate::flows::update_plan::UpdatePlan;
use crate::flows::write::Write;
use crate::flows::Flow;
use serde_json::{json, Map, Value};

/// Flow `F`'s name, as the record keeps it.
pub fn name<F: Flow>() -> &'static str {
    F::SPEC.name
}

/// The flow whose calls are model calls (their conversation is shown).
pub fn model() -> &'static str {
    name::<Model>()
}

/// The flow whose calls set the run's plan.
pub fn plan() -> &'static str {
    name::<UpdatePlan>()
}

/// The longest string a view holds whole; the rest is said, not sent.
pub const TEXT_BOUND: usize = 64 * 1024;

/// `value` with each string longer than [`TEXT_BOUND`] cut at a character
/// boundary and followed by how much was left out and where it is whole.
pub fn bounded(value: &Value, whole_at: &str) -> Value {
    match value {
        Value::String(s) if s.len() > TEXT_BOUND => Value::String(cut(s, whole_at)),
        Value::Array(items) => Value::Array(items.iter().map(|v| bounded(v, whole_at)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), bounded(v, whole_at)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `s` cut to [`TEXT_BOUND`] bytes, with a note.
pub fn cut(s: &str, whole_at: &str) -> String {
    if s.len() <= TEXT_BOUND {
        return s.to_string();
    }
    let mut end = TEXT_BOUND;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… {} more bytes not shown; {whole_at} shows it whole",
        &s[..end],
        s.len() - end
    )
}

/// A line of a diff: `add`, `del`, `ctx` or `hdr`, and its text.
type Line = (&'static str, String);

/// The change a `write`, `edit` or `apply_patch` call asked for, as files
/// each with diff lines; `None` for another flow's input.
pub fn diff(flow: &str, input: &Value) -> Option<Value> {
    let text = |k: &str| input.get(k).and_then(Value::as_str);
    let files: Vec<(String, Vec<Line>)> = match flow {
        f if f == name::<Write>() => {
            vec![(text("path")?.to_string(), lines_of(text("content")?, "add"))]
        }
        f if f == name::<Edit>() => {
            let new = text("newString")?;
            let old = text("oldString").or_else(|| text("expect"));
            let mut lines = match old {
                Some(old) => replaced(old, new),
                None => lines_of(new, "add"),
            };
            if let (Some(a), Some(b)) = (input.get("startLine"), input.get("endLine")) {
                lines.insert(0, ("hdr", format!("@@ lines {a}-{b}")));
            }
            vec![(text("path")?.to_string(), lines)]
        }
        f if f == name::<ApplyPatch>() => patch(text("input")?),
        _ => return None,
    };
    Some(Value::Array(
        files
            .into_iter()
            .map(|(file, lines)| {
                let lines: Vec<Value> = lines
                    .into_iter()
                    .map(|(k, t)| json!([k, cut(&t, "the call's input")]))
                    .collect();
                json!({"file": file, "lines": lines})
            })
            .collect(),
    ))
}

fn lines_of(text: &str, kind: &'static str) -> Vec<Line> {
    text.lines().map(|l| (kind, l.to_string())).collect()
}

/// `old` replaced by `new`: the lines both begin and end with as context,
/// the rest removed and added.
fn replaced(old: &str, new: &str) -> Vec<Line> {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out: Vec<Line> = a[..head].iter().map(|l| ("ctx", l.to_string())).collect();
    out.extend(
        a[head..a.len() - tail]
            .iter()
            .map(|l| ("del", l.to_string())),
    );
    out.extend(
        b[head..b.len() - tail]
            .iter()
            .map(|l| ("add", l.to_string())),
    );
    out.extend(a[a.len() - tail..].iter().map(|l| ("ctx", l.to_string())));
    out
}

/// A Codex patch's files and lines, as its grammar marks them.
fn patch(text: &str) -> Vec<(String, Vec<Line>)> {
    let mut files: Vec<(String, Vec<Line>)> = Vec::new();
    for line in text.lines() {
        let header = ["*** Add File: ", "*** Delete File: ", "*** Update File: "]
            .iter()
            .find_map(|h| line.strip_prefix(h));
        if let Some(path) = header {
            files.push((path.to_string(), vec![("hdr", line.to_string())]));
            continue;
        }
        let Some((_, lines)) = files.last_mut() else {
            continue;
        };
        let kind = match line.chars().next() {
            Some('+') => "add",
            Some('-') => "del",
            Some(' ') => "ctx",
            _ if line == "*** End Patch" => continue,
            _ => "hdr",
        };
        let body = if kind == "hdr" { line } else { &line[1..] };
        lines.push((kind, body.to_string()));
    }
    files
}

/// A command's standard output and error and how it ended, when `output`
/// has them.
pub fn streams(output: Option<&Value>) -> Option<Value> {
    let o = output?.as_object()?;
    if !o.contains_key("stdout") && !o.contains_key("stderr") {
        return None;
    }
    let mut m = Map::new();
    for k in ["stdout", "stderr", "exitCode", "signal", "timedOut"] {
        if let Some(v) = o.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    Some(Value::Object(m))
}

/// A model call's conversation: the system prompt, each message asked
/// with, and the reply with its tokens and latency.
pub fn conversation(input: &Value, output: Option<&Value>) -> Option<Value> {
    let messages = input.get("messages")?.as_array()?;
    let mut shown: Vec<Value> = Vec::new();
    if let Some(system) = input.get("system").and_then(Value::as_str) {
        shown.push(json!({"role": "system", "text": system}));
    }
    for m in messages {
        shown.push(json!({
            "role": m.get("role").and_then(Value::as_str).unwrap_or("?"),
            "text": message_text(m),
        }));
    }
    let reply = output.map(|o| {
        json!({
            "role": "assistant",
            "text": reply_text(o),
            "toolCalls": o.get("toolCalls").cloned().unwrap_or(Value::Null),
            "stopReason": o.get("stopReason").cloned().unwrap_or(Value::Null),
        })
    });
    Some(json!({
        "provider": input.get("provider"),
        "model": input.get("model"),
        "messages": shown,
        "reply": reply,
        "usage": output.and_then(|o| o.get("usage")),
        "answeredBy": output.and_then(|o| o.get("model")),
        "latencyMs": output.and_then(|o| o.get("latencyMs")),
    }))
}

/// The reply's text; for an output the record capped (kept as its size,
/// SHA-256, head and tail), the head it kept and what was left out.
fn reply_text(o: &Value) -> String {
    if let Some(text) = o.get("text").and_then(Value::as_str) {
        return text.to_string();
    }
    if o.get("capped").and_then(Value::as_bool) == Some(true) {
        let head = o.get("head").and_then(Value::as_str).unwrap_or("");
        let bytes = o.get("bytes").and_then(Value::as_u64).unwrap_or(0);
        return format!(
            "{head}\n… the output was {bytes} bytes of JSON, and the record kept only its head (above) \
             and tail (capped); its SHA-256 is in the output below"
        );
    }
    String::new()
}

/// A message's text: its `content` string, or its parts' JSON.
fn message_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => {
            let calls = m.get("toolCalls").cloned().unwrap_or(Value::Null);
            if calls.is_null() {
                String::new()
            } else {
                calls.to_string()
            }
        }
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_keeps_the_shared_lines_as_context_and_the_rest_as_removed_and_added() {
        let d = diff(
            "edit",
            &json!({"path": "a.txt", "oldString": "a\nb\nc\n", "newString": "a\nB\nc\n"}),
        )
        .unwrap();
        assert_eq!(
            d,
            json!([{"file": "a.txt", "lines": [["ctx", "a"], ["del", "b"], ["add", "B"], ["ctx", "c"]]}])
        );
    }

    #[test]
    fn a_patch_is_split_by_file_with_its_marks() {
        let p = "*** Begin Patch\n*** Update File: x.rs\n@@ fn f\n-old\n+new\n keep\n*** Add File: y\n+hi\n*** End Patch\n";
        let d = diff("apply_patch", &json!({"input": p})).unwrap();
        assert_eq!(
            d,
            json!([
                {"file": "x.rs", "lines": [["hdr", "*** Update File: x.rs"], ["hdr", "@@ fn f"], ["del", "old"], ["add", "new"], ["ctx", "keep"]]},
                {"file": "y", "lines": [["hdr", "*** Add File: y"], ["add", "hi"]]}
            ])
        );
    }

    #[test]
    fn a_long_string_is_cut_at_a_character_and_says_how_much_is_left() {
        let s = "é".repeat(TEXT_BOUND);
        let v = bounded(&json!({"out": s}), "X");
        let got = v["out"].as_str().unwrap();
        assert!(got.len() < TEXT_BOUND + 100);
        assert!(got.ends_with(&format!(
            "… {} more bytes not shown; X shows it whole",
            TEXT_BOUND
        )));
    }
}
