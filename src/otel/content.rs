//! What `--otlp-content` adds to a span: the record's inputs, outputs and
//! errors as text, and a model call's conversation in the GenAI semantic
//! conventions' message shape, each bounded.
//!
//! The text is the record's, as the record holds it: secrets were cut
//! before the row was written, so nothing here redacts again, and nothing
//! is added that the record does not hold.

use serde_json::{json, Map, Value};

/// The most bytes one attribute's value carries; more is cut, with
/// [`marker`] saying how much there was.
pub const LIMIT: usize = 64 * 1024;

/// The note a cut value ends with.
pub fn marker(shown: usize, total: usize) -> String {
    format!("… [cut by sluice: {shown} of {total} bytes]")
}

/// `text`, cut to at most `limit` bytes (at a character's boundary) with
/// the [`marker`] in the room it needs, when it is longer.
pub fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let note = marker(0, text.len());
    // The marker's own length depends on the number it shows: give it
    // room for its longest form.
    let room = limit.saturating_sub(note.len() + 20);
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{}", &text[..end], marker(end, text.len()))
}

/// `value` as compact JSON, cut to [`LIMIT`] as text.
pub fn json_text(value: &Value) -> String {
    cut(&value.to_string(), LIMIT)
}

/// `value` as compact JSON of at most [`LIMIT`] bytes that stays JSON: when
/// it is longer, every string is cut to the longest length that lets the
/// whole fit (each cut string ends with the [`marker`]); only when even
/// short strings do not fit (thousands of messages) is the text cut.
pub fn fitted_json(value: &Value) -> String {
    let whole = value.to_string();
    if whole.len() <= LIMIT {
        return whole;
    }
    let fits = |cap: usize| {
        let text = cut_strings(value, cap).to_string();
        (text.len() <= LIMIT).then_some(text)
    };
    let (mut low, mut high) = (128usize, LIMIT);
    let Some(mut best) = fits(low) else {
        return cut(&whole, LIMIT);
    };
    while low < high {
        let mid = (low + high).div_ceil(2);
        match fits(mid) {
            Some(text) => {
                best = text;
                low = mid;
            }
            None => high = mid - 1,
        }
    }
    best
}

/// `value` with each string longer than `cap` bytes cut to it.
fn cut_strings(value: &Value, cap: usize) -> Value {
    match value {
        Value::String(s) => Value::String(cut(s, cap)),
        Value::Array(items) => Value::Array(items.iter().map(|v| cut_strings(v, cap)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cut_strings(v, cap)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `gen_ai.system_instructions`: a model call's `system` as one text part.
pub fn system_instructions(input: &Value) -> Option<Value> {
    let system = input.get("system")?.as_str()?;
    Some(json!([{"type": "text", "content": system}]))
}

/// `gen_ai.input.messages`: the recorded `messages` in the conventions'
/// shape, `[{role, parts: [...]}]`: text parts as `text`, images as `uri`,
/// an assistant's tool calls as `tool_call`, a tool message as its
/// `tool_call_response`.
pub fn input_messages(input: &Value) -> Option<Value> {
    let messages = input.get("messages")?.as_array()?;
    Some(Value::Array(messages.iter().map(message).collect()))
}

/// One recorded message in the conventions' shape.
fn message(m: &Value) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let mut parts = Vec::new();
    if role == "tool" {
        parts.push(json!({
            "type": "tool_call_response",
            "id": m.get("toolCallId").cloned().unwrap_or(Value::Null),
            "response": text_of(m.get("content")),
        }));
    } else {
        parts.extend(content_parts(m.get("content")));
    }
    if let Some(calls) = m.get("toolCalls").and_then(Value::as_array) {
        parts.extend(calls.iter().map(tool_call));
    }
    json!({"role": role, "parts": parts})
}

/// A message's `content`, a string or a list of parts, as parts.
fn content_parts(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) if !s.is_empty() => vec![json!({"type": "text", "content": s})],
        Some(Value::Array(items)) => items.iter().map(part).collect(),
        _ => Vec::new(),
    }
}

/// One recorded part: `{type = "text", text}` or `{type = "image", url}`.
fn part(p: &Value) -> Value {
    let field = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
    match p.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "content": field("text")}),
        Some("image") => json!({"type": "uri", "modality": "image", "uri": field("url")}),
        _ => p.clone(),
    }
}

/// A message's content as one text: a string, or its text parts joined.
fn text_of(content: Option<&Value>) -> Value {
    match content {
        Some(Value::Array(items)) => Value::String(
            items
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// A recorded tool call, `{id, name, input}`, as a `tool_call` part.
fn tool_call(c: &Value) -> Value {
    let mut part = Map::new();
    part.insert("type".into(), "tool_call".into());
    for (from, to) in [("id", "id"), ("name", "name"), ("input", "arguments")] {
        if let Some(v) = c.get(from) {
            part.insert(to.into(), v.clone());
        }
    }
    Value::Object(part)
}

/// `gen_ai.output.messages`: a model call's recorded output (`text`,
/// `toolCalls`, `stopReason`) as one assistant message.
pub fn output_messages(output: &Value) -> Option<Value> {
    let mut parts = content_parts(output.get("text"));
    if let Some(calls) = output.get("toolCalls").and_then(Value::as_array) {
        parts.extend(calls.iter().map(tool_call));
    }
    let reason = output
        .get("stopReason")
        .and_then(Value::as_str)
        .map_or("stop", finish_reason);
    Some(json!([{"role": "assistant", "parts": parts, "finish_reason": reason}]))
}

/// The conventions' finish reason for the `model` flow's `stopReason`.
pub fn finish_reason(stop: &str) -> &str {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_call",
        "max_tokens" => "length",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_within_the_limit_at_a_character_and_says_how_much_there_was() {
        assert_eq!(cut("short", 10), "short");
        let text = "é".repeat(100_000); // 200,000 bytes
        let got = cut(&text, LIMIT);
        assert!(got.len() <= LIMIT, "{}", got.len());
        let kept = got.split("… [cut by sluice: ").next().unwrap();
        assert!(text.starts_with(kept));
        assert!(
            got.ends_with(&format!(
                "… [cut by sluice: {} of 200000 bytes]",
                kept.len()
            )),
            "{}",
            &got[got.len() - 60..]
        );
    }

    #[test]
    fn a_long_conversation_stays_json_under_the_limit_with_each_long_text_cut() {
        let big = "x".repeat(50_000);
        let messages = json!([
            {"role": "user", "parts": [{"type": "text", "content": big}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "short answer"}]},
            {"role": "user", "parts": [{"type": "text", "content": big}]},
        ]);
        let text = fitted_json(&messages);
        assert!(text.len() <= LIMIT, "{}", text.len());
        let back: Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back[1]["parts"][0]["content"], "short answer");
        let first = back[0]["parts"][0]["content"].as_str().unwrap();
        assert!(first.starts_with("xxxx"));
        assert!(first.ends_with("of 50000 bytes]"), "{first}");
        // Short enough already: the JSON as it is.
        assert_eq!(fitted_json(&json!(["a"])), r#"["a"]"#);
    }

    #[test]
    fn recorded_messages_take_the_conventions_shape_with_their_text_unchanged() {
        let input = json!({
            "provider": "local", "model": "m1", "system": "be brief",
            "messages": [
                {"role": "user", "content": "hi [redacted]"},
                {"role": "assistant", "content": "", "toolCalls": [
                    {"id": "c1", "name": "read", "input": {"path": "a.txt"}}]},
                {"role": "tool", "toolCallId": "c1", "content": "one\ntwo"},
                {"role": "user", "content": [{"type": "text", "text": "look"},
                                              {"type": "image", "url": "https://e.example/i.png"}]},
            ]
        });
        assert_eq!(
            system_instructions(&input).unwrap(),
            json!([{"type": "text", "content": "be brief"}])
        );
        assert_eq!(
            input_messages(&input).unwrap(),
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "hi [redacted]"}]},
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}}]},
                {"role": "tool", "parts": [
                    {"type": "tool_call_response", "id": "c1", "response": "one\ntwo"}]},
                {"role": "user", "parts": [
                    {"type": "text", "content": "look"},
                    {"type": "uri", "modality": "image", "uri": "https://e.example/i.png"}]},
            ])
        );
        let output = json!({"text": "", "stopReason": "tool_use",
                            "toolCalls": [{"id": "c2", "name": "grep", "input": {"pattern": "fn"}}]});
        assert_eq!(
            output_messages(&output).unwrap(),
            json!([{"role": "assistant", "finish_reason": "tool_call", "parts": [
                {"type": "tool_call", "id": "c2", "name": "grep", "arguments": {"pattern": "fn"}}]}])
        );
    }
}
