//! What the protocol modules' tests share: a request, messages, a tool,
//! and a stream fed through the SSE parser a byte at a time.

use super::providers::Api;
use super::sse::Parser;
use super::transport::Fold;
use super::wire::{Content, Message, Reply, Request, Role, ToolCall, ToolDef, WireError};
use serde_json::{json, Value};

/// A request of `model` with one user message, "Hi", and nothing else.
pub fn request(model: &str) -> Request {
    Request {
        model: model.into(),
        system: None,
        messages: vec![user("Hi")],
        tools: vec![],
        tool_choice: None,
        max_tokens: None,
        temperature: None,
        stop: vec![],
        json_schema: None,
        stream: false,
    }
}

pub fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        content: Content::Text(text.into()),
        tool_calls: vec![],
        tool_call_id: None,
        is_error: false,
    }
}

pub fn assistant(text: &str, calls: Vec<ToolCall>) -> Message {
    Message {
        role: Role::Assistant,
        content: Content::Text(text.into()),
        tool_calls: calls,
        tool_call_id: None,
        is_error: false,
    }
}

pub fn tool_result(id: &str, text: &str, is_error: bool) -> Message {
    Message {
        role: Role::Tool,
        content: Content::Text(text.into()),
        tool_calls: vec![],
        tool_call_id: Some(id.into()),
        is_error,
    }
}

pub fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }
}

pub fn weather_tool() -> ToolDef {
    ToolDef {
        name: "get_weather".into(),
        description: "Current weather for a city.".into(),
        input: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    }
}

/// Feeds `bytes` one byte at a time through the SSE parser into `api`'s
/// stream; the reply, and the pieces of text handed out.
pub fn stream(api: Api, bytes: &str) -> (Result<Reply, WireError>, Vec<String>) {
    let mut parser = Parser::new();
    let mut events = Vec::new();
    for b in bytes.as_bytes() {
        events.extend(parser.feed(std::slice::from_ref(b)));
    }
    events.extend(parser.finish());
    let mut s = Fold::new(api);
    let mut pieces = Vec::new();
    let mut done = false;
    for ev in &events {
        assert!(!done, "an event after the end: {ev:?}");
        let mut on_text = |t: &str| pieces.push(t.to_string());
        match s.event(ev, &mut on_text) {
            Ok(d) => done = d,
            Err(e) => return (Err(e), pieces),
        }
    }
    (s.finish(), pieces)
}
