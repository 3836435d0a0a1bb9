//! The openai protocol: request body, JSON reply, stream, error body.
//!
//! OpenAI Chat Completions, as OpenAI and the servers that speak it (vLLM,
//! llama.cpp's server, Ollama, LiteLLM, OpenRouter) take and give it. Where
//! those servers differ from OpenAI (content as parts, no `[DONE]`, tool
//! calls ending with `stop`, an error as a bare string) the reading here
//! accepts both.

use super::sse::Event;
use super::wire::{
    Content, Message, OnText, Part, Reply, Request, Role, StopReason, ToolCall, ToolChoice, Usage,
    WireError,
};
use serde_json::{json, Map, Value};

/// The path under the provider's base URL requests go to.
pub const PATH: &str = "chat/completions";

/// The request body for `req` (`stream` set as `req.stream` says).
pub fn body(req: &Request) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = &req.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(req.messages.iter().map(message));
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                let mut function = Map::new();
                function.insert("name".into(), json!(t.name));
                if !t.description.is_empty() {
                    function.insert("description".into(), json!(t.description));
                }
                function.insert("parameters".into(), t.input.clone());
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        // Without tools a tool choice is an error at OpenAI (even "none").
        if let Some(choice) = &req.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(n) = req.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !req.stop.is_empty() {
        body.insert("stop".into(), json!(req.stop));
    }
    if let Some(schema) = &req.json_schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            }),
        );
    }
    if req.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// One neutral message in the protocol's form.
fn message(m: &Message) -> Value {
    match m.role {
        Role::User => json!({"role": "user", "content": content(&m.content)}),
        Role::Assistant => {
            let text = m.content.text();
            if m.tool_calls.is_empty() {
                return json!({"role": "assistant", "content": text});
            }
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.input.to_string()},
                    })
                })
                .collect();
            let text = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            json!({"role": "assistant", "content": text, "tool_calls": calls})
        }
        Role::Tool => {
            let text = m.content.text();
            let text = if m.is_error {
                format!("Error: {text}")
            } else {
                text
            };
            json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "content": text,
            })
        }
    }
}

/// A user message's content: its text, or its parts.
fn content(c: &Content) -> Value {
    match c {
        Content::Text(t) => json!(t),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => json!({"type": "text", "text": text}),
                Part::Image { url } => json!({"type": "image_url", "image_url": {"url": url}}),
            })
            .collect(),
    }
}

/// A whole (not streamed) reply.
pub fn reply(body: &Value) -> Result<Reply, WireError> {
    if let Some(err) = provider_error(body) {
        return Err(err);
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| malformed("the reply has no choices", body))?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, call) in calls.iter().enumerate() {
            let function = call.get("function").unwrap_or(&Value::Null);
            let name = str_of(function, "name").to_string();
            let input = arguments(&name, function.get("arguments"))?;
            tool_calls.push(ToolCall {
                id: call_id(str_of(call, "id"), i),
                name,
                input,
            });
        }
    }
    // A refusal (structured outputs) is the reply's text: why the model
    // refused.
    let refusal = str_of(message, "refusal");
    text.push_str(refusal);
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let stop = if refusal.is_empty() {
        stop_reason(finish, !tool_calls.is_empty())
    } else {
        StopReason::ContentFilter
    };
    Ok(Reply {
        text,
        stop_reason: Some(stop),
        tool_calls,
        usage: body.get("usage").map(usage).unwrap_or_default(),
        model: str_of(body, "model").to_string(),
    })
}

/// The error an error response's body carries: its type, if given, and its
/// message; `None` when the body is not the protocol's error shape.
///
/// OpenAI's `{"error": {"message", "type", "code"}}`, and the forms other
/// servers use: `{"error": "text"}` (Ollama), `{"message", "type", "code"}`
/// at the top (vLLM), a list holding one of those.
pub fn error(body: &[u8]) -> Option<(Option<String>, String)> {
    let body: Value = serde_json::from_slice(body).ok()?;
    error_of(&body)
}

fn error_of(body: &Value) -> Option<(Option<String>, String)> {
    match body {
        Value::Array(items) => items.first().and_then(error_of),
        Value::Object(map) => match map.get("error") {
            Some(Value::String(message)) => Some((None, message.clone())),
            Some(err @ Value::Object(_)) => {
                let message = match err.get("message") {
                    Some(Value::String(m)) => m.clone(),
                    _ => err.to_string(),
                };
                Some((kind(err), message))
            }
            Some(_) => None,
            None => match map.get("message") {
                Some(Value::String(m)) => Some((kind(body), m.clone())),
                _ => None,
            },
        },
        _ => None,
    }
}

/// An error object's type, else its code (a string, or a number).
fn kind(err: &Value) -> Option<String> {
    ["type", "code"].iter().find_map(|k| match err.get(*k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// The provider's error, when a reply or a chunk is one.
fn provider_error(body: &Value) -> Option<WireError> {
    body.get("error")?;
    let (kind, message) = error_of(body)?;
    Some(WireError::Provider { kind, message })
}

/// The neutral stop reason of a `finish_reason`.
fn stop_reason(finish: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        // Some servers end tool calls with "stop".
        Some("stop") if has_tool_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

fn usage(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n(u.get("prompt_tokens")),
        output_tokens: n(u.get("completion_tokens")),
        cached_tokens: n(u.pointer("/prompt_tokens_details/cached_tokens")),
    }
}

/// A tool call's input from its `arguments`: a JSON text (empty is `{}`),
/// or, from some servers, the object itself.
fn arguments(name: &str, args: Option<&Value>) -> Result<Value, WireError> {
    match args {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::String(s)) => decode_arguments(name, s),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(other) => Err(WireError::Malformed(format!(
            "the arguments of the call to tool `{name}` are not a JSON text: {}",
            excerpt(&other.to_string())
        ))),
    }
}

fn decode_arguments(name: &str, s: &str) -> Result<Value, WireError> {
    if s.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(s).map_err(|e| {
        WireError::Malformed(format!(
            "the arguments of the call to tool `{name}` are not JSON ({e}): {}",
            excerpt(s)
        ))
    })
}

/// A tool call's id; a made-up one when the server gave none (the tool's
/// result must name it).
fn call_id(id: &str, index: usize) -> String {
    if id.is_empty() {
        format!("call_{index}")
    } else {
        id.to_string()
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The start of a text quoted in an error.
fn excerpt(s: &str) -> String {
    const MAX: usize = 200;
    if s.len() <= MAX {
        return format!("{s:?}");
    }
    let mut cut = MAX;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{:?}... ({} bytes)", &s[..cut], s.len())
}

fn malformed(what: &str, body: &Value) -> WireError {
    WireError::Malformed(format!("{what}: {}", excerpt(&body.to_string())))
}

/// A streamed reply, folded event by event.
#[derive(Debug, Default)]
pub struct Stream {
    text: String,
    /// The tool calls, in the order they started.
    calls: Vec<PartialCall>,
    /// Where in `calls` each `index` is: a stream may name many.
    at: std::collections::HashMap<u64, usize>,
    /// One more than the highest index so far.
    next_index: u64,
    finish_reason: Option<String>,
    /// The model refused (`delta.refusal`).
    refused: bool,
    usage: Usage,
    model: String,
    done: bool,
}

/// A tool call being streamed.
#[derive(Debug, Default)]
struct PartialCall {
    /// Its `index` in the chunks.
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Folds one event in, handing new text to `on_text`; `Ok(true)` once
    /// the stream says it is complete.
    pub fn event(&mut self, ev: &Event, on_text: OnText) -> Result<bool, WireError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            WireError::Malformed(format!(
                "a stream event is not JSON ({e}): {}",
                excerpt(data)
            ))
        })?;
        if let Some(err) = provider_error(&chunk) {
            return Err(err);
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            if !model.is_empty() {
                self.model = model.to_string();
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = usage(u);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        match delta.get("content") {
            Some(Value::String(piece)) if !piece.is_empty() => {
                self.text.push_str(piece);
                on_text(piece);
            }
            Some(Value::Array(parts)) => {
                for piece in parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                {
                    if !piece.is_empty() {
                        self.text.push_str(piece);
                        on_text(piece);
                    }
                }
            }
            _ => {}
        }
        let refusal = str_of(delta, "refusal");
        if !refusal.is_empty() {
            self.refused = true;
            self.text.push_str(refusal);
            on_text(refusal);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for piece in calls {
                self.tool_call_piece(piece);
            }
        }
        if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(finish.to_string());
        }
        Ok(false)
    }

    /// Folds one piece of `delta.tool_calls` into its call.
    fn tool_call_piece(&mut self, piece: &Value) {
        let id = str_of(piece, "id");
        let index = match piece.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // Without an index (some servers): a new id starts a call, else
            // the piece continues the last one.
            None => match self.calls.last() {
                Some(last) if id.is_empty() || last.id == id => last.index,
                Some(_) => self.next_index,
                None => 0,
            },
        };
        self.next_index = self.next_index.max(index.saturating_add(1));
        let at = *self.at.entry(index).or_insert_with(|| {
            self.calls.push(PartialCall {
                index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[at];
        if call.id.is_empty() {
            call.id = id.to_string();
        }
        let function = piece.get("function").unwrap_or(&Value::Null);
        let name = str_of(function, "name");
        if call.name.is_empty() {
            call.name = name.to_string();
        }
        match function.get("arguments") {
            Some(Value::String(s)) => call.arguments.push_str(s),
            Some(v @ Value::Object(_)) => call.arguments.push_str(&v.to_string()),
            _ => {}
        }
    }

    /// The text received so far.
    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The reply, once the stream is complete.
    pub fn finish(self) -> Result<Reply, WireError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(WireError::Malformed(
                "the stream ended before the model finished".into(),
            ));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                Ok(ToolCall {
                    input: decode_arguments(&c.name, &c.arguments)?,
                    id: call_id(&c.id, i),
                    name: c.name,
                })
            })
            .collect::<Result<Vec<_>, WireError>>()?;
        let stop = if self.refused {
            StopReason::ContentFilter
        } else {
            stop_reason(self.finish_reason.as_deref(), !tool_calls.is_empty())
        };
        Ok(Reply {
            text: self.text,
            stop_reason: Some(stop),
            tool_calls,
            usage: self.usage,
            model: self.model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::samples::{self, tool_result, user, weather_tool};
    use crate::model::sse::Parser;
    use crate::model::wire::ToolDef;

    fn request() -> Request {
        samples::request("gpt-4.1")
    }

    fn stream(bytes: &str) -> (Result<Reply, WireError>, Vec<String>) {
        samples::stream(crate::model::providers::Api::OpenAi, bytes)
    }

    #[test]
    fn body_minimal() {
        assert_eq!(
            body(&request()),
            json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
        );
    }

    #[test]
    fn body_every_option() {
        let mut req = request();
        req.system = Some("Be brief.".into());
        req.tools = vec![
            weather_tool(),
            ToolDef {
                name: "now".into(),
                description: String::new(),
                input: json!({"type": "object", "properties": {}}),
            },
        ];
        req.tool_choice = Some(ToolChoice::Required);
        req.max_tokens = Some(512);
        req.temperature = Some(0.2);
        req.stop = vec!["END".into(), "\n\n".into()];
        req.stream = true;
        assert_eq!(
            body(&req),
            json!({
                "model": "gpt-4.1",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                ],
                "tools": [
                    {"type": "function", "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city.",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    }},
                    {"type": "function", "function": {
                        "name": "now",
                        "parameters": {"type": "object", "properties": {}},
                    }},
                ],
                "tool_choice": "required",
                "max_tokens": 512,
                "temperature": 0.2,
                "stop": ["END", "\n\n"],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn body_tool_choices() {
        let mut req = request();
        req.tools = vec![weather_tool()];
        for (choice, want) in [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (ToolChoice::Required, json!("required")),
            (
                ToolChoice::Tool("get_weather".into()),
                json!({"type": "function", "function": {"name": "get_weather"}}),
            ),
        ] {
            req.tool_choice = Some(choice);
            assert_eq!(body(&req)["tool_choice"], want);
        }
        // No tools, no tool choice: OpenAI refuses one alone.
        req.tools.clear();
        assert_eq!(body(&req).get("tool_choice"), None);
        req.tool_choice = None;
        req.tools = vec![weather_tool()];
        assert_eq!(body(&req).get("tool_choice"), None);
    }

    #[test]
    fn body_json_schema() {
        let mut req = request();
        let schema = json!({
            "type": "object",
            "properties": {"answer": {"type": "integer"}},
            "required": ["answer"],
            "additionalProperties": false,
        });
        req.json_schema = Some(schema.clone());
        assert_eq!(
            body(&req),
            json!({
                "model": "gpt-4.1",
                "messages": [{"role": "user", "content": "Hi"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": schema},
                },
            })
        );
    }

    #[test]
    fn body_images() {
        let mut req = request();
        req.messages = vec![Message {
            content: Content::Parts(vec![
                Part::Text {
                    text: "What is in these?".into(),
                },
                Part::Image {
                    url: "https://example.com/cat.jpg".into(),
                },
                Part::Image {
                    url: "data:image/png;base64,iVBORw0KGgo=".into(),
                },
            ]),
            ..user("")
        }];
        assert_eq!(
            body(&req)["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]}])
        );
    }

    #[test]
    fn conversation_round_trip() {
        // The model's tool calls, as a reply gives them...
        let first = reply(&json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4.1-2025-04-14",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {
                            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                        {"id": "call_b", "type": "function", "function": {
                            "name": "get_weather",
                            "arguments": "{\"city\":\"Tōkyō\",\"units\":{\"temp\":\"C\"}}"}},
                    ],
                    "refusal": null,
                },
                "finish_reason": "tool_calls",
            }],
        }))
        .unwrap();
        // ...go back in an assistant message, then the tools' results.
        let mut req = request();
        req.messages = vec![
            user("Weather in Paris and Tokyo?"),
            Message {
                role: Role::Assistant,
                content: Content::Text(first.text.clone()),
                tool_calls: first.tool_calls.clone(),
                tool_call_id: None,
                is_error: false,
            },
            tool_result("call_a", "18°C, cloudy", false),
            tool_result("call_b", "city not found", true),
            Message {
                role: Role::Assistant,
                content: Content::Text("Paris is 18°C.".into()),
                ..user("")
            },
        ];
        let b = body(&req);
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": "Weather in Paris and Tokyo?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {
                        "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_b", "type": "function", "function": {
                        "name": "get_weather",
                        "arguments": "{\"city\":\"Tōkyō\",\"units\":{\"temp\":\"C\"}}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "18°C, cloudy"},
                {"role": "tool", "tool_call_id": "call_b", "content": "Error: city not found"},
                {"role": "assistant", "content": "Paris is 18°C."},
            ])
        );
        // The arguments re-encoded decode to the inputs the reply gave.
        for (call, sent) in first
            .tool_calls
            .iter()
            .zip(b["messages"][1]["tool_calls"].as_array().unwrap())
        {
            let args = sent["function"]["arguments"].as_str().unwrap();
            assert_eq!(serde_json::from_str::<Value>(args).unwrap(), call.input);
        }
    }

    #[test]
    fn assistant_text_with_tool_calls() {
        let mut req = request();
        req.messages = vec![Message {
            role: Role::Assistant,
            content: Content::Text("Let me look.".into()),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "now".into(),
                input: json!({}),
            }],
            tool_call_id: None,
            is_error: false,
        }];
        assert_eq!(
            body(&req)["messages"],
            json!([{"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "now", "arguments": "{}"}},
            ]}])
        );
    }

    #[test]
    fn reply_text() {
        let r = reply(&json!({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Hello! How can I assist you today?",
                    "refusal": null,
                    "annotations": [],
                },
                "logprobs": null,
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": 2006,
                "completion_tokens": 10,
                "total_tokens": 2016,
                "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
        }))
        .unwrap();
        assert_eq!(
            r,
            Reply {
                text: "Hello! How can I assist you today?".into(),
                tool_calls: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage: Usage {
                    input_tokens: 2006,
                    output_tokens: 10,
                    cached_tokens: 1920,
                },
                model: "gpt-4.1-2025-04-14".into(),
            }
        );
    }

    #[test]
    fn reply_parallel_tool_calls() {
        let r = reply(&json!({
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_12345xyz", "type": "function", "function": {
                            "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                        {"id": "call_67890abc", "type": "function", "function": {
                            "name": "get_weather", "arguments": "{\"city\":\"Bogotá\"}"}},
                        {"id": "call_99999def", "type": "function", "function": {
                            "name": "now", "arguments": ""}},
                    ],
                },
                "finish_reason": "tool_calls",
            }],
            "usage": {"prompt_tokens": 82, "completion_tokens": 51, "total_tokens": 133},
        }))
        .unwrap();
        assert_eq!(r.text, "");
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "call_12345xyz".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Paris"}),
                },
                ToolCall {
                    id: "call_67890abc".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Bogotá"}),
                },
                ToolCall {
                    id: "call_99999def".into(),
                    name: "now".into(),
                    input: json!({}),
                },
            ]
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 82,
                output_tokens: 51,
                cached_tokens: 0,
            }
        );
    }

    #[test]
    fn reply_stop_reasons() {
        let with = |finish: Value, calls: bool| {
            let mut message = json!({"role": "assistant", "content": "x"});
            if calls {
                message["tool_calls"] = json!([{"id": "c", "type": "function",
                    "function": {"name": "t", "arguments": "{}"}}]);
            }
            reply(&json!({"model": "m", "choices": [
                {"index": 0, "message": message, "finish_reason": finish}]}))
            .unwrap()
            .stop_reason
            .unwrap()
        };
        assert_eq!(with(json!("stop"), false), StopReason::EndTurn);
        assert_eq!(with(json!("tool_calls"), true), StopReason::ToolUse);
        assert_eq!(with(json!("function_call"), false), StopReason::ToolUse);
        // Some servers (older vLLM, Ollama) end tool calls with "stop".
        assert_eq!(with(json!("stop"), true), StopReason::ToolUse);
        assert_eq!(with(json!("length"), false), StopReason::MaxTokens);
        assert_eq!(
            with(json!("content_filter"), false),
            StopReason::ContentFilter
        );
        assert_eq!(with(json!("eos"), false), StopReason::Other);
        assert_eq!(with(Value::Null, false), StopReason::Other);
    }

    #[test]
    fn refusals() {
        let r = reply(&json!({
            "id": "chatcmpl-3",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "refusal": "I'm sorry, I cannot assist with that request.",
                },
                "logprobs": null,
                "finish_reason": "stop",
            }],
        }))
        .unwrap();
        assert_eq!(r.text, "I'm sorry, I cannot assist with that request.");
        assert_eq!(r.stop_reason, Some(StopReason::ContentFilter));
        let s = concat!(
            "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"refusal\":\"\"},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I'm sorry, \"},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I cannot.\"},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let (r, pieces) = stream(s);
        assert_eq!(pieces, ["I'm sorry, ", "I cannot."]);
        let r = r.unwrap();
        assert_eq!(r.text, "I'm sorry, I cannot.");
        assert_eq!(r.stop_reason, Some(StopReason::ContentFilter));
    }

    #[test]
    fn reply_content_parts_no_usage() {
        let r = reply(&json!({
            "model": "some-server-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world."}],
            }}],
        }))
        .unwrap();
        assert_eq!(r.text, "Hello, world.");
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn reply_tool_calls_without_ids() {
        let r = reply(
            &json!({"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
                {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ]}}]}),
        )
        .unwrap();
        let ids: Vec<&str> = r.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_0", "call_1"]);
        assert_eq!(r.tool_calls[0].input, json!({"x": 1}));
    }

    #[test]
    fn reply_undecodable_arguments() {
        let err = reply(
            &json!({"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {
                    "name": "get_weather", "arguments": "{\"city\": \"Par"}},
            ]}}]}),
        )
        .unwrap_err();
        let WireError::Malformed(m) = err else {
            panic!("{err:?}")
        };
        assert!(m.contains("`get_weather`"), "{m}");
        assert!(m.contains(r#""{\"city\": \"Par""#), "{m}");
    }

    #[test]
    fn reply_errors_and_no_choices() {
        assert_eq!(
            reply(&json!({"error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error", "param": null, "code": null}})),
            Err(WireError::Provider {
                kind: Some("server_error".into()),
                message: "The server had an error while processing your request.".into(),
            })
        );
        // OpenRouter: an error with a numeric code, in a 200 reply.
        assert_eq!(
            reply(&json!({"error": {"message": "Provider returned error", "code": 502}})),
            Err(WireError::Provider {
                kind: Some("502".into()),
                message: "Provider returned error".into(),
            })
        );
        assert!(matches!(
            reply(&json!({"id": "x", "model": "m", "choices": []})),
            Err(WireError::Malformed(m)) if m.starts_with("the reply has no choices")
        ));
        assert!(matches!(
            reply(&json!({"model": "m"})),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn error_bodies() {
        let e = |s: &str| error(s.as_bytes());
        assert_eq!(
            e(r#"{"error": {"message": "Incorrect API key provided: sk-xx. You can find your API key at https://platform.openai.com/account/api-keys.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}"#),
            Some((
                Some("invalid_request_error".into()),
                "Incorrect API key provided: sk-xx. You can find your API key at https://platform.openai.com/account/api-keys.".into()
            ))
        );
        assert_eq!(
            e(
                r#"{"error": {"message": "Rate limit reached", "type": null, "code": "rate_limit_exceeded"}}"#
            ),
            Some((
                Some("rate_limit_exceeded".into()),
                "Rate limit reached".into()
            ))
        );
        // Ollama.
        assert_eq!(
            e(r#"{"error":"model \"llama9\" not found, try pulling it first"}"#),
            Some((
                None,
                "model \"llama9\" not found, try pulling it first".into()
            ))
        );
        // vLLM.
        assert_eq!(
            e(
                r#"{"object":"error","message":"The model `gpt-5` does not exist.","type":"NotFoundError","param":null,"code":404}"#
            ),
            Some((
                Some("NotFoundError".into()),
                "The model `gpt-5` does not exist.".into()
            ))
        );
        // A message alone.
        assert_eq!(
            e(r#"{"message":"Unauthorized"}"#),
            Some((None, "Unauthorized".into()))
        );
        // Gemini's compatible endpoint: a list.
        assert_eq!(
            e(
                r#"[{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}]"#
            ),
            Some((Some("400".into()), "API key not valid.".into()))
        );
        // llama.cpp server.
        assert_eq!(
            e(r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#),
            Some((Some("unavailable_error".into()), "Loading model".into()))
        );
        assert_eq!(e("<html>502 Bad Gateway</html>"), None);
        assert_eq!(e(r#"{"detail": "Not Found"}"#), None);
        assert_eq!(e(""), None);
    }

    const TEXT_STREAM: &str = concat!(
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" wörld 🌍\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":5,\"total_tokens\":1205,\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn stream_text_byte_by_byte() {
        let (r, pieces) = stream(TEXT_STREAM);
        assert_eq!(pieces, ["Héllo", " wörld 🌍"]);
        assert_eq!(
            r.unwrap(),
            Reply {
                text: "Héllo wörld 🌍".into(),
                tool_calls: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage: Usage {
                    input_tokens: 1200,
                    output_tokens: 5,
                    cached_tokens: 1024,
                },
                model: "gpt-4.1-2025-04-14".into(),
            }
        );
    }

    #[test]
    fn stream_text_so_far_and_done() {
        let mut parser = Parser::new();
        let mut s = Stream::new();
        let mut ends = Vec::new();
        for ev in parser.feed(TEXT_STREAM.as_bytes()) {
            ends.push(s.event(&ev, &mut |_| {}).unwrap());
            if ends.len() == 2 {
                assert_eq!(s.text(), "Héllo");
            }
        }
        assert_eq!(ends, [false, false, false, false, false, true]);
        assert_eq!(s.text(), "Héllo wörld 🌍");
    }

    #[test]
    fn stream_interleaved_parallel_tool_calls() {
        let chunk = |delta: &str, finish: &str| {
            format!(
                "data: {{\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}],\"usage\":null}}\n\n"
            )
        };
        let args = |index: u64, piece: &str| {
            chunk(
                &json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                    .to_string(),
                "null",
            )
        };
        let mut s = String::new();
        s += &chunk(
            r#"{"role":"assistant","content":"Checking both.","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}"#,
            "null",
        );
        s += &args(0, "{\"ci");
        s += &chunk(
            r#"{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"zo"}}]}"#,
            "null",
        );
        s += &args(0, "ty\": \"Par");
        s += &args(1, "ne\": \"Asia/");
        s += &args(0, "is\"}");
        s += &args(1, "Tōkyō\"}");
        s += &chunk("{}", "\"tool_calls\"");
        s += "data: {\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"completion_tokens\":40,\"total_tokens\":130}}\n\n";
        s += "data: [DONE]\n\n";
        let (r, pieces) = stream(&s);
        let r = r.unwrap();
        assert_eq!(pieces, ["Checking both."]);
        assert_eq!(r.text, "Checking both.");
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Paris"}),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "get_time".into(),
                    input: json!({"zone": "Asia/Tōkyō"}),
                },
            ]
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 90,
                output_tokens: 40,
                cached_tokens: 0,
            }
        );
    }

    #[test]
    fn stream_tool_call_without_arguments() {
        let s = concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"now\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let r = stream(s).0.unwrap();
        assert_eq!(
            r.tool_calls,
            [ToolCall {
                id: "call_1".into(),
                name: "now".into(),
                input: json!({}),
            }]
        );
    }

    #[test]
    fn stream_whole_tool_calls_without_index() {
        // Some servers send each call whole, without an index, and end
        // with "stop".
        let s = concat!(
            "data: {\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_x\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"n\\\":1}\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"call_y\",\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":\"{\\\"n\\\":2}\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"qwen3\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let r = stream(s).0.unwrap();
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            r.tool_calls,
            [
                ToolCall {
                    id: "call_x".into(),
                    name: "a".into(),
                    input: json!({"n": 1}),
                },
                ToolCall {
                    id: "call_y".into(),
                    name: "b".into(),
                    input: json!({"n": 2}),
                },
            ]
        );
    }

    #[test]
    fn stream_without_done() {
        // Some servers end the stream after the finish reason.
        let s = concat!(
            ": keep-alive\n\n",
            "data: {\"model\":\"llama3.2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"llama3.2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}",
        );
        let (r, pieces) = stream(s);
        assert_eq!(pieces, ["Hi", "!"]);
        let r = r.unwrap();
        assert_eq!(r.text, "Hi!");
        assert_eq!(r.stop_reason, Some(StopReason::MaxTokens));
        assert_eq!(r.model, "llama3.2");
        assert_eq!(r.usage.input_tokens, 3);
    }

    #[test]
    fn stream_cut() {
        let cut = TEXT_STREAM.find("\"finish_reason\":\"stop\"").unwrap() - 40;
        let (r, pieces) = stream(&TEXT_STREAM[..cut]);
        assert_eq!(pieces, ["Héllo", " wörld 🌍"]);
        // The last event is cut: its JSON is not whole.
        assert!(matches!(r, Err(WireError::Malformed(_))));
        // Cut at an event's end.
        let cut = TEXT_STREAM.find("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"gpt-4.1-2025-04-14\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,\"delta\":{},").unwrap();
        assert_eq!(
            stream(&TEXT_STREAM[..cut]).0,
            Err(WireError::Malformed(
                "the stream ended before the model finished".into()
            ))
        );
        assert_eq!(
            Stream::new().finish(),
            Err(WireError::Malformed(
                "the stream ended before the model finished".into()
            ))
        );
    }

    #[test]
    fn stream_cut_inside_tool_arguments() {
        let s = concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"ci\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert!(matches!(
            stream(s).0,
            Err(WireError::Malformed(m)) if m.contains("`get_weather`") && m.contains(r#""{\"ci""#)
        ));
    }

    #[test]
    fn stream_error_chunk() {
        let s = concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
            "data: {\"error\":{\"message\":\"The server is overloaded.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n",
        );
        let (r, pieces) = stream(s);
        assert_eq!(pieces, ["Hel"]);
        assert_eq!(
            r,
            Err(WireError::Provider {
                kind: Some("server_error".into()),
                message: "The server is overloaded.".into(),
            })
        );
        // OpenRouter: a numeric code, with the event named.
        let s = "event: error\ndata: {\"error\":{\"code\":429,\"message\":\"Rate limited\"}}\n\n";
        assert_eq!(
            stream(s).0,
            Err(WireError::Provider {
                kind: Some("429".into()),
                message: "Rate limited".into(),
            })
        );
    }

    #[test]
    fn stream_event_not_json() {
        let mut s = Stream::new();
        let ev = Event {
            event: None,
            data: "{\"choices\":".into(),
        };
        assert!(matches!(
            s.event(&ev, &mut |_| {}),
            Err(WireError::Malformed(m)) if m.starts_with("a stream event is not JSON")
        ));
    }
}
