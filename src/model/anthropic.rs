//! The anthropic protocol: request body, JSON reply, stream, error body.
//!
//! Anthropic Messages. The API wants user and assistant turns to
//! alternate, and every tool result of a turn in one user message: the
//! neutral messages that map to the same role in a row are merged into one
//! message's blocks.

use super::sse::Event;
use super::wire::{
    Content, Message, OnText, Part, Reply, Request, Role, StopReason, ToolCall, ToolChoice, Usage,
    WireError,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The path under the provider's base URL requests go to.
pub const PATH: &str = "messages";

/// `max_tokens` when the request gives none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request body for `req` (`stream` set as `req.stream` says).
pub fn body(req: &Request) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "max_tokens".into(),
        json!(req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(system) = &req.system {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), messages(&req.messages));
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                let mut tool = Map::new();
                tool.insert("name".into(), json!(t.name));
                if !t.description.is_empty() {
                    tool.insert("description".into(), json!(t.description));
                }
                tool.insert("input_schema".into(), t.input.clone());
                Value::Object(tool)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        // A tool choice without tools is refused.
        if let Some(choice) = &req.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(schema) = &req.json_schema {
        // Structured outputs as generally available (the beta's
        // `output_format` moved here).
        body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    if req.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// One API message being built: its role, and its content as a plain text
/// or as blocks.
struct Turn {
    role: &'static str,
    text: Option<String>,
    blocks: Vec<Value>,
}

impl Turn {
    fn into_blocks(self) -> Vec<Value> {
        match self.text {
            Some(t) if t.is_empty() => vec![],
            Some(t) => vec![json!({"type": "text", "text": t})],
            None => self.blocks,
        }
    }
}

/// The neutral messages as the API's, those of the same role in a row
/// merged.
fn messages(messages: &[Message]) -> Value {
    let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
    for m in messages {
        let turn = turn(m);
        match turns.last_mut() {
            Some(last) if last.role == turn.role => {
                let prev = std::mem::replace(
                    last,
                    Turn {
                        role: turn.role,
                        text: None,
                        blocks: vec![],
                    },
                );
                let mut blocks = prev.into_blocks();
                blocks.extend(turn.into_blocks());
                last.blocks = blocks;
            }
            _ => turns.push(turn),
        }
    }
    turns
        .into_iter()
        .map(|t| {
            let content = match t.text {
                Some(text) => json!(text),
                None => {
                    let mut blocks = t.blocks;
                    if t.role == "user" {
                        // Tool results first: the API wants them before
                        // any text of the message.
                        let (mut results, rest): (Vec<_>, Vec<_>) =
                            blocks.into_iter().partition(|b| b["type"] == "tool_result");
                        results.extend(rest);
                        blocks = results;
                    }
                    Value::Array(blocks)
                }
            };
            json!({"role": t.role, "content": content})
        })
        .collect()
}

/// One neutral message as an API message.
fn turn(m: &Message) -> Turn {
    match m.role {
        Role::User => match &m.content {
            Content::Text(t) => Turn {
                role: "user",
                text: Some(t.clone()),
                blocks: vec![],
            },
            Content::Parts(parts) => Turn {
                role: "user",
                text: None,
                blocks: parts.iter().map(part).collect(),
            },
        },
        Role::Assistant => {
            let text = m.content.text();
            if m.tool_calls.is_empty() {
                return Turn {
                    role: "assistant",
                    text: Some(text),
                    blocks: vec![],
                };
            }
            let mut blocks = Vec::with_capacity(m.tool_calls.len() + 1);
            if !text.is_empty() {
                blocks.push(json!({"type": "text", "text": text}));
            }
            blocks.extend(m.tool_calls.iter().map(
                |c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}),
            ));
            Turn {
                role: "assistant",
                text: None,
                blocks,
            }
        }
        Role::Tool => {
            let content = match &m.content {
                Content::Parts(parts) if parts.iter().any(|p| matches!(p, Part::Image { .. })) => {
                    Value::Array(parts.iter().map(part).collect())
                }
                c => json!(c.text()),
            };
            let mut result = json!({
                "type": "tool_result",
                "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "content": content,
            });
            if m.is_error {
                result["is_error"] = json!(true);
            }
            Turn {
                role: "user",
                text: None,
                blocks: vec![result],
            }
        }
    }
}

/// A content part as a block: text, or an image by URL or inline.
fn part(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { url } => {
            let source = match data_url(url) {
                Some((media, data)) => json!({"type": "base64", "media_type": media, "data": data}),
                None => json!({"type": "url", "url": url}),
            };
            json!({"type": "image", "source": source})
        }
    }
}

/// The media type and data of a `data:MEDIA;base64,DATA` URL.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media = meta.strip_suffix(";base64")?;
    // Parameters before `;base64` (`;charset=...`) are not the media type.
    let media = media.split(';').next().unwrap_or_default();
    Some((media, data))
}

/// A whole (not streamed) reply.
pub fn reply(body: &Value) -> Result<Reply, WireError> {
    if let Some(err) = provider_error(body) {
        return Err(err);
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            WireError::Malformed(format!(
                "the reply has no content: {}",
                excerpt(&body.to_string())
            ))
        })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(str_of(block, "text")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: str_of(block, "id").to_string(),
                name: str_of(block, "name").to_string(),
                input: match block.get("input") {
                    None | Some(Value::Null) => json!({}),
                    Some(v) => v.clone(),
                },
            }),
            // thinking, redacted_thinking, server tools' blocks...
            _ => {}
        }
    }
    let mut usage = StreamUsage::default();
    if let Some(u) = body.get("usage") {
        usage.update(u);
    }
    Ok(Reply {
        text,
        tool_calls,
        stop_reason: Some(stop_reason(body.get("stop_reason").and_then(Value::as_str))),
        usage: usage.neutral(),
        model: str_of(body, "model").to_string(),
    })
}

/// The error an error response's body carries: its type, if given, and its
/// message; `None` when the body is not the protocol's error shape.
pub fn error(body: &[u8]) -> Option<(Option<String>, String)> {
    let body: Value = serde_json::from_slice(body).ok()?;
    error_of(&body)
}

/// `{"type": "error", "error": {"type", "message"}}` (the outer type
/// optional).
fn error_of(body: &Value) -> Option<(Option<String>, String)> {
    let err = body.get("error").filter(|e| e.is_object())?;
    let kind = err
        .get("type")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let message = match err.get("message") {
        Some(Value::String(m)) => m.clone(),
        _ => err.to_string(),
    };
    Some((kind, message))
}

fn provider_error(body: &Value) -> Option<WireError> {
    let (kind, message) = error_of(body)?;
    Some(WireError::Provider { kind, message })
}

fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::ContentFilter,
        // pause_turn, model_context_window_exceeded, ...
        _ => StopReason::Other,
    }
}

/// The usage fields as the API gives them; the neutral input counts all
/// input (uncached, read from the cache, written to it).
#[derive(Debug, Default, Clone, Copy)]
struct StreamUsage {
    input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
}

impl StreamUsage {
    /// Takes the fields `u` gives (a stream's later events repeat or
    /// update some).
    fn update(&mut self, u: &Value) {
        let set = |field: &mut u64, key: &str| {
            if let Some(n) = u.get(key).and_then(Value::as_u64) {
                *field = n;
            }
        };
        set(&mut self.input, "input_tokens");
        set(&mut self.cache_read, "cache_read_input_tokens");
        set(&mut self.cache_creation, "cache_creation_input_tokens");
        set(&mut self.output, "output_tokens");
    }

    fn neutral(self) -> Usage {
        Usage {
            // Saturating: the counts are the provider's to say.
            input_tokens: self
                .input
                .saturating_add(self.cache_read)
                .saturating_add(self.cache_creation),
            output_tokens: self.output,
            cached_tokens: self.cache_read,
        }
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

/// A streamed reply, folded event by event.
#[derive(Debug, Default)]
pub struct Stream {
    text: String,
    /// The content blocks that are tool calls, by index.
    tools: BTreeMap<u64, PartialTool>,
    stop_reason: Option<String>,
    usage: StreamUsage,
    model: String,
    done: bool,
}

/// A tool_use block being streamed.
#[derive(Debug, Default)]
struct PartialTool {
    id: String,
    name: String,
    /// The input `content_block_start` gave (`{}`).
    start: Value,
    /// The `partial_json` pieces so far.
    json: String,
    /// The input, once the block stopped.
    input: Option<Value>,
}

impl PartialTool {
    fn decode(&mut self) -> Result<(), WireError> {
        if self.input.is_some() {
            return Ok(());
        }
        let input = if self.json.trim().is_empty() {
            match &self.start {
                Value::Null => json!({}),
                v => v.clone(),
            }
        } else {
            serde_json::from_str(&self.json).map_err(|e| {
                WireError::Malformed(format!(
                    "the input of the call to tool `{}` is not JSON ({e}): {}",
                    self.name,
                    excerpt(&self.json)
                ))
            })?
        };
        self.input = Some(input);
        Ok(())
    }
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Folds one event in, handing new text to `on_text`; `Ok(true)` once
    /// the stream says it is complete.
    pub fn event(&mut self, ev: &Event, on_text: OnText) -> Result<bool, WireError> {
        if ev.data.trim().is_empty() {
            return Ok(false);
        }
        let data: Value = serde_json::from_str(&ev.data).map_err(|e| {
            WireError::Malformed(format!(
                "a stream event is not JSON ({e}): {}",
                excerpt(&ev.data)
            ))
        })?;
        let name = match &ev.event {
            Some(name) => name.as_str(),
            None => str_of(&data, "type"),
        };
        let index = data.get("index").and_then(Value::as_u64);
        match name {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.model = str_of(message, "model").to_string();
                if let Some(u) = message.get("usage") {
                    self.usage.update(u);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                match str_of(block, "type") {
                    "text" => self.push_text(str_of(block, "text"), on_text),
                    "tool_use" => {
                        let index = index.ok_or_else(|| no_index(&ev.data))?;
                        self.tools.insert(
                            index,
                            PartialTool {
                                id: str_of(block, "id").to_string(),
                                name: str_of(block, "name").to_string(),
                                start: block.get("input").cloned().unwrap_or(Value::Null),
                                ..PartialTool::default()
                            },
                        );
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match str_of(delta, "type") {
                    "text_delta" => self.push_text(str_of(delta, "text"), on_text),
                    "input_json_delta" => {
                        // The input of a server tool's block (web search...)
                        // is not the caller's to run: only tool_use blocks
                        // are kept.
                        let index = index.ok_or_else(|| no_index(&ev.data))?;
                        if let Some(tool) = self.tools.get_mut(&index) {
                            tool.json.push_str(str_of(delta, "partial_json"));
                        }
                    }
                    // thinking_delta, signature_delta, citations_delta...
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(tool) = index.and_then(|i| self.tools.get_mut(&i)) {
                    tool.decode()?;
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = data.get("usage") {
                    self.usage.update(u);
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(true);
            }
            "error" => {
                let (kind, message) = error_of(&data).unwrap_or((None, ev.data.clone()));
                return Err(WireError::Provider { kind, message });
            }
            // ping, and the events the API may add.
            _ => {}
        }
        Ok(false)
    }

    fn push_text(&mut self, piece: &str, on_text: OnText) {
        if !piece.is_empty() {
            self.text.push_str(piece);
            on_text(piece);
        }
    }

    /// The text received so far.
    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The reply, once the stream is complete.
    pub fn finish(self) -> Result<Reply, WireError> {
        if !self.done {
            return Err(WireError::Malformed(
                "the stream ended before the model finished".into(),
            ));
        }
        let mut tool_calls = Vec::with_capacity(self.tools.len());
        for (_, mut tool) in self.tools {
            tool.decode()?;
            tool_calls.push(ToolCall {
                id: tool.id,
                name: tool.name,
                input: tool.input.unwrap_or_default(),
            });
        }
        Ok(Reply {
            text: self.text,
            tool_calls,
            stop_reason: Some(stop_reason(self.stop_reason.as_deref())),
            usage: self.usage.neutral(),
            model: self.model,
        })
    }
}

fn no_index(data: &str) -> WireError {
    WireError::Malformed(format!(
        "a content block event has no index: {}",
        excerpt(data)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::samples::{self, assistant, call, tool_result, user, weather_tool};
    use crate::model::wire::ToolDef;

    fn request() -> Request {
        samples::request("claude-sonnet-4-5")
    }

    fn stream(bytes: &str) -> (Result<Reply, WireError>, Vec<String>) {
        samples::stream(crate::model::providers::Api::Anthropic, bytes)
    }

    /// An SSE stream of `(event, data)`.
    fn sse(events: &[(&str, Value)]) -> String {
        events
            .iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect()
    }

    fn message_start(usage: Value) -> (&'static str, Value) {
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_014p7gG3wDgGV9EUtLvnow3U", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
        )
    }

    fn text_delta(index: u64, text: &str) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": text}}),
        )
    }

    fn json_delta(index: u64, piece: &str) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}),
        )
    }

    fn block_stop(index: u64) -> (&'static str, Value) {
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )
    }

    fn message_delta(reason: &str, usage: Value) -> (&'static str, Value) {
        (
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": usage}),
        )
    }

    fn message_stop() -> (&'static str, Value) {
        ("message_stop", json!({"type": "message_stop"}))
    }

    fn ping() -> (&'static str, Value) {
        ("ping", json!({"type": "ping"}))
    }

    #[test]
    fn body_minimal() {
        assert_eq!(
            body(&request()),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": "Hi"}],
            })
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
        req.tool_choice = Some(ToolChoice::Auto);
        req.max_tokens = Some(1024);
        req.temperature = Some(0.5);
        req.stop = vec!["END".into()];
        req.stream = true;
        assert_eq!(
            body(&req),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": "Be brief.",
                "messages": [{"role": "user", "content": "Hi"}],
                "temperature": 0.5,
                "stop_sequences": ["END"],
                "tools": [
                    {
                        "name": "get_weather",
                        "description": "Current weather for a city.",
                        "input_schema": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                    {"name": "now", "input_schema": {"type": "object", "properties": {}}},
                ],
                "tool_choice": {"type": "auto"},
                "stream": true,
            })
        );
    }

    #[test]
    fn body_tool_choices() {
        let mut req = request();
        req.tools = vec![weather_tool()];
        for (choice, want) in [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::None, json!({"type": "none"})),
            (ToolChoice::Required, json!({"type": "any"})),
            (
                ToolChoice::Tool("get_weather".into()),
                json!({"type": "tool", "name": "get_weather"}),
            ),
        ] {
            req.tool_choice = Some(choice);
            assert_eq!(body(&req)["tool_choice"], want);
        }
        req.tools.clear();
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
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": "Hi"}],
                "output_config": {"format": {"type": "json_schema", "schema": schema}},
            })
        );
    }

    #[test]
    fn body_images() {
        let mut req = request();
        req.messages = vec![Message {
            content: Content::Parts(vec![
                Part::Text {
                    text: "Compare these.".into(),
                },
                Part::Image {
                    url: "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg".into(),
                },
                Part::Image {
                    url: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==".into(),
                },
                Part::Image {
                    url: "data:image/webp;charset=binary;base64,UklGRg==".into(),
                },
            ]),
            ..user("")
        }];
        assert_eq!(
            body(&req)["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "Compare these."},
                {"type": "image", "source": {"type": "url",
                    "url": "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg"}},
                {"type": "image", "source": {"type": "base64",
                    "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}},
                {"type": "image", "source": {"type": "base64",
                    "media_type": "image/webp", "data": "UklGRg=="}},
            ]}])
        );
    }

    #[test]
    fn conversation_round_trip_merges_tool_results() {
        // The model's parallel tool calls, as a reply gives them...
        let first = reply(&json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "text", "text": "I'll check both cities."},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
                    "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "get_weather",
                    "input": {"city": "Atlantis"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": 380, "output_tokens": 96},
        }))
        .unwrap();
        // ...go back as an assistant message, then the results and a
        // user's remark, which the API wants in one user message.
        let mut req = request();
        req.messages = vec![
            user("Weather in Paris and Atlantis?"),
            assistant(&first.text, first.tool_calls.clone()),
            tool_result("toolu_01A", "18°C, cloudy", false),
            tool_result("toolu_01B", "no such city", true),
            user("Also, be brief."),
            assistant("Paris: 18°C. Atlantis: unknown.", vec![]),
            user("Thanks"),
        ];
        assert_eq!(
            body(&req)["messages"],
            json!([
                {"role": "user", "content": "Weather in Paris and Atlantis?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "I'll check both cities."},
                    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather",
                        "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_01B", "name": "get_weather",
                        "input": {"city": "Atlantis"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C, cloudy"},
                    {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "no such city",
                        "is_error": true},
                    {"type": "text", "text": "Also, be brief."},
                ]},
                {"role": "assistant", "content": "Paris: 18°C. Atlantis: unknown."},
                {"role": "user", "content": "Thanks"},
            ])
        );
    }

    #[test]
    fn merging_puts_tool_results_first_and_drops_empty_text() {
        let mut req = request();
        req.messages = vec![
            user("Go."),
            assistant("", vec![call("toolu_1", "now", json!({}))]),
            user(""),
            user("Note: the clock is UTC."),
            tool_result("toolu_1", "12:00", false),
            assistant("It is noon.", vec![]),
            assistant("", vec![call("toolu_2", "now", json!({}))]),
        ];
        assert_eq!(
            body(&req)["messages"],
            json!([
                {"role": "user", "content": "Go."},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12:00"},
                    {"type": "text", "text": "Note: the clock is UTC."},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "It is noon."},
                    {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
                ]},
            ])
        );
    }

    #[test]
    fn tool_result_with_an_image() {
        let mut req = request();
        req.messages = vec![Message {
            role: Role::Tool,
            content: Content::Parts(vec![
                Part::Text {
                    text: "The screenshot:".into(),
                },
                Part::Image {
                    url: "data:image/jpeg;base64,/9j/4AAQ".into(),
                },
            ]),
            tool_calls: vec![],
            tool_call_id: Some("toolu_9".into()),
            is_error: false,
        }];
        assert_eq!(
            body(&req)["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": [
                    {"type": "text", "text": "The screenshot:"},
                    {"type": "image", "source": {"type": "base64",
                        "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                ]},
            ]}])
        );
    }

    #[test]
    fn reply_text_and_tool_calls() {
        let r = reply(&json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "thinking", "thinking": "The user wants the weather.",
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
                {"type": "text", "text": "Let me check "},
                {"type": "text", "text": "the weather."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather", "input": {"city": "San Francisco, CA"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "now", "input": {}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {
                "input_tokens": 50,
                "cache_creation_input_tokens": 1200,
                "cache_read_input_tokens": 3000,
                "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 503,
                "service_tier": "standard",
            },
        }))
        .unwrap();
        assert_eq!(
            r,
            Reply {
                text: "Let me check the weather.".into(),
                tool_calls: vec![
                    call(
                        "toolu_01A09q90qw90lq917835lq9",
                        "get_weather",
                        json!({"city": "San Francisco, CA"})
                    ),
                    call("toolu_01B", "now", json!({})),
                ],
                stop_reason: Some(StopReason::ToolUse),
                usage: Usage {
                    input_tokens: 4250,
                    output_tokens: 503,
                    cached_tokens: 3000,
                },
                model: "claude-sonnet-4-5-20250929".into(),
            }
        );
    }

    #[test]
    fn reply_stop_reasons() {
        let with = |reason: Value| {
            reply(
                &json!({"type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "x"}], "stop_reason": reason,
                "usage": {"input_tokens": 1, "output_tokens": 1}}),
            )
            .unwrap()
            .stop_reason
            .unwrap()
        };
        assert_eq!(with(json!("end_turn")), StopReason::EndTurn);
        assert_eq!(with(json!("tool_use")), StopReason::ToolUse);
        assert_eq!(with(json!("max_tokens")), StopReason::MaxTokens);
        assert_eq!(with(json!("stop_sequence")), StopReason::StopSequence);
        assert_eq!(with(json!("refusal")), StopReason::ContentFilter);
        assert_eq!(with(json!("pause_turn")), StopReason::Other);
        assert_eq!(with(Value::Null), StopReason::Other);
    }

    #[test]
    fn reply_errors() {
        assert_eq!(
            reply(
                &json!({"type": "error", "error": {"type": "overloaded_error",
                "message": "Overloaded"}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
            ),
            Err(WireError::Provider {
                kind: Some("overloaded_error".into()),
                message: "Overloaded".into(),
            })
        );
        assert!(matches!(
            reply(&json!({"type": "message", "model": "m"})),
            Err(WireError::Malformed(m)) if m.starts_with("the reply has no content")
        ));
    }

    #[test]
    fn error_bodies() {
        let e = |s: &str| error(s.as_bytes());
        assert_eq!(
            e(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}"#
            ),
            Some((Some("overloaded_error".into()), "Overloaded".into()))
        );
        assert_eq!(
            e(r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row"}}"#),
            Some((
                Some("invalid_request_error".into()),
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row".into()
            ))
        );
        assert_eq!(
            e(
                r#"{"error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#
            ),
            Some((
                Some("rate_limit_error".into()),
                "Number of request tokens has exceeded your per-minute rate limit".into()
            ))
        );
        assert_eq!(e("upstream connect error"), None);
        assert_eq!(e(r#"{"type":"message"}"#), None);
        assert_eq!(e(r#"{"error":"x"}"#), None);
    }

    #[test]
    fn stream_text_byte_by_byte() {
        let s = sse(&[
            message_start(json!({"input_tokens": 25, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 2048, "output_tokens": 1})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            ),
            ping(),
            text_delta(0, "Héllo"),
            text_delta(0, " wörld 🌍"),
            block_stop(0),
            message_delta("end_turn", json!({"output_tokens": 15})),
            message_stop(),
        ]);
        let (r, pieces) = stream(&s);
        assert_eq!(pieces, ["Héllo", " wörld 🌍"]);
        assert_eq!(
            r.unwrap(),
            Reply {
                text: "Héllo wörld 🌍".into(),
                tool_calls: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage: Usage {
                    input_tokens: 2073,
                    output_tokens: 15,
                    cached_tokens: 2048,
                },
                model: "claude-sonnet-4-5-20250929".into(),
            }
        );
    }

    fn tool_stream() -> Vec<(&'static str, Value)> {
        vec![
            message_start(
                json!({"input_tokens": 472, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": 2}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            ),
            text_delta(0, "Checking both."),
            block_stop(0),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block":
                    {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "name": "get_weather", "input": {}}}),
            ),
            json_delta(1, ""),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 2, "content_block":
                    {"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {}}}),
            ),
            json_delta(1, "{\"ci"),
            json_delta(2, "{\"zo"),
            ping(),
            json_delta(1, "ty\": \"Par"),
            json_delta(2, "ne\": \"Asia/"),
            json_delta(2, "Tōkyō\"}"),
            json_delta(1, "is\"}"),
            block_stop(2),
            block_stop(1),
            message_delta(
                "tool_use",
                json!({"input_tokens": 472, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0, "output_tokens": 89}),
            ),
            message_stop(),
        ]
    }

    #[test]
    fn stream_interleaved_tool_calls() {
        let (r, pieces) = stream(&sse(&tool_stream()));
        assert_eq!(pieces, ["Checking both."]);
        assert_eq!(
            r.unwrap(),
            Reply {
                text: "Checking both.".into(),
                tool_calls: vec![
                    call(
                        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "get_weather",
                        json!({"city": "Paris"})
                    ),
                    call("toolu_02", "get_time", json!({"zone": "Asia/Tōkyō"})),
                ],
                stop_reason: Some(StopReason::ToolUse),
                usage: Usage {
                    input_tokens: 472,
                    output_tokens: 89,
                    cached_tokens: 0,
                },
                model: "claude-sonnet-4-5-20250929".into(),
            }
        );
    }

    #[test]
    fn stream_tool_call_without_input_and_without_block_stop() {
        let s = sse(&[
            message_start(json!({"input_tokens": 10, "output_tokens": 1})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}}),
            ),
            block_stop(0),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block":
                    {"type": "tool_use", "id": "toolu_2", "name": "echo", "input": {}}}),
            ),
            json_delta(1, "{\"x\": [1, 2]}"),
            message_delta("tool_use", json!({"output_tokens": 30})),
            message_stop(),
        ]);
        assert_eq!(
            stream(&s).0.unwrap().tool_calls,
            [
                call("toolu_1", "now", json!({})),
                call("toolu_2", "echo", json!({"x": [1, 2]})),
            ]
        );
    }

    #[test]
    fn stream_server_tool_blocks_are_not_tool_calls() {
        let s = sse(&[
            message_start(json!({"input_tokens": 10, "output_tokens": 1})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                        "name": "web_search", "input": {}}}),
            ),
            json_delta(0, "{\"query\": \"weather"),
            json_delta(0, " Paris\"}"),
            block_stop(0),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block":
                    {"type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "content": []}}),
            ),
            block_stop(1),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 2,
                    "content_block": {"type": "text", "text": ""}}),
            ),
            text_delta(2, "Sunny."),
            block_stop(2),
            message_delta("end_turn", json!({"output_tokens": 30})),
            message_stop(),
        ]);
        let r = stream(&s).0.unwrap();
        assert_eq!(r.text, "Sunny.");
        assert_eq!(r.tool_calls, []);
    }

    #[test]
    fn stream_undecodable_tool_input() {
        let s = sse(&[
            message_start(json!({"input_tokens": 10, "output_tokens": 1})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block":
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
            ),
            json_delta(0, "{\"city\": "),
            block_stop(0),
        ]);
        assert!(matches!(
            stream(&s).0,
            Err(WireError::Malformed(m)) if m.contains("`get_weather`") && m.contains(r#""{\"city\": ""#)
        ));
    }

    #[test]
    fn stream_stop_reasons() {
        for (reason, want) in [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("refusal", StopReason::ContentFilter),
            ("pause_turn", StopReason::Other),
        ] {
            let s = sse(&[
                message_start(json!({"input_tokens": 1, "output_tokens": 1})),
                message_delta(reason, json!({"output_tokens": 2})),
                message_stop(),
            ]);
            assert_eq!(stream(&s).0.unwrap().stop_reason, Some(want), "{reason}");
        }
    }

    #[test]
    fn stream_error_event() {
        let s = sse(&[
            message_start(json!({"input_tokens": 1, "output_tokens": 1})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            ),
            text_delta(0, "Once upon"),
            (
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error",
                    "message": "Overloaded"}}),
            ),
        ]);
        let (r, pieces) = stream(&s);
        assert_eq!(pieces, ["Once upon"]);
        assert_eq!(
            r,
            Err(WireError::Provider {
                kind: Some("overloaded_error".into()),
                message: "Overloaded".into(),
            })
        );
    }

    #[test]
    fn stream_cut() {
        let mut events = tool_stream();
        events.pop();
        assert_eq!(
            stream(&sse(&events)).0,
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
    fn stream_text_so_far_unknown_events_and_unnamed_events() {
        let mut s = Stream::new();
        let events = [
            Event {
                event: Some("message_start".into()),
                data: message_start(json!({"input_tokens": 3, "output_tokens": 1}))
                    .1
                    .to_string(),
            },
            Event {
                event: Some("some_future_event".into()),
                data: r#"{"type": "some_future_event", "x": 1}"#.into(),
            },
            // No event name: the type in the data says.
            Event {
                event: None,
                data: text_delta(0, "Hi").1.to_string(),
            },
        ];
        for ev in &events {
            assert!(!s.event(ev, &mut |_| {}).unwrap());
        }
        assert_eq!(s.text(), "Hi");
        let stop = Event {
            event: None,
            data: r#"{"type":"message_stop"}"#.into(),
        };
        assert!(s.event(&stop, &mut |_| {}).unwrap());
        let r = s.finish().unwrap();
        assert_eq!(r.text, "Hi");
        assert_eq!(r.stop_reason, Some(StopReason::Other));
    }

    #[test]
    fn stream_event_not_json() {
        let ev = Event {
            event: Some("content_block_delta".into()),
            data: "{\"type\":".into(),
        };
        assert!(matches!(
            Stream::new().event(&ev, &mut |_| {}),
            Err(WireError::Malformed(m)) if m.starts_with("a stream event is not JSON")
        ));
    }
}
