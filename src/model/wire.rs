//! The neutral form of a model call: what the `model` flow takes and
//! returns whatever the provider, and what each protocol module maps to and
//! from its own wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// A tool's result, answering the assistant's tool call `toolCallId`.
    Tool,
}

/// A message's content: text, or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text of the content: the text itself, or its text parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    Part::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Part {
    Text {
        text: String,
    },
    /// An image by URL: `https://...`, or `data:MEDIA;base64,...`.
    Image {
        url: String,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: Content,
    /// An assistant message's tool calls, as a reply gave them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A tool message: whether the tool failed (refused, errored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A tool the model may call, in the neutral form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the tool's input (an object schema).
    pub input: Value,
}

/// Which tool the model must call, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    Auto,
    /// No tool call.
    None,
    /// Some tool call.
    Required,
    /// This tool.
    Tool(String),
}

/// One model call, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub tool_choice: Option<ToolChoice>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub stop: Vec<String>,
    /// Structured output: the reply's text is JSON of this schema.
    pub json_schema: Option<Value>,
    /// Ask for a stream of server-sent events.
    pub stream: bool,
}

/// A tool call the model made, its input decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A final answer (OpenAI `stop`, Anthropic `end_turn`).
    EndTurn,
    /// It asked for tools (`tool_calls`, `tool_use`).
    ToolUse,
    /// It ran out of output tokens (`length`, `max_tokens`).
    MaxTokens,
    /// A stop sequence ended it.
    StopSequence,
    /// The provider's filter, or the model, refused.
    ContentFilter,
    /// Anything else the provider said.
    Other,
}

impl StopReason {
    /// The name the `model` flow returns.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ContentFilter => "content_filter",
            StopReason::Other => "other",
        }
    }
}

/// Tokens a call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
}

/// A model's answer, in the neutral form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: Option<StopReason>,
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    pub model: String,
}

/// What a protocol module could not make sense of, or an error the
/// provider sent inside a reply or a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The body or an event is not what the protocol says.
    Malformed(String),
    /// The provider reported an error (an `error` event, an error object):
    /// its type (`overloaded_error`, `rate_limit_error`, ...) when it gave
    /// one, and its message.
    Provider {
        kind: Option<String>,
        message: String,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Malformed(m) => f.write_str(m),
            WireError::Provider {
                kind: Some(k),
                message,
            } => write!(f, "{k}: {message}"),
            WireError::Provider {
                kind: None,
                message,
            } => f.write_str(message),
        }
    }
}

/// Text a stream has delivered so far, handed to the caller as it comes.
pub type OnText<'a> = &'a mut dyn FnMut(&str);
