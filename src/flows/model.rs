//! `model`: one call to a language model, through a provider the operator
//! declared (a policy's `providers` table, `sluice run --provider`), in
//! either wire protocol ([`crate::model`]). The output is the same whatever
//! the provider: text, tool calls with their input decoded, why it stopped,
//! the tokens and the time.
//!
//! The capability is `model:call:PROVIDER/MODEL`, tier sealed: the call
//! changes nothing in the world, and the policy decides which models a
//! workflow may use. The endpoint passes the client's destination checks
//! (a private one needs its exact `net:private:ORIGIN` grant). The key is
//! read from the provider's credential at the moment of the call and never
//! reaches Lua, the record or an error.

use super::{closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use crate::kernel::{Action, Capability};
use crate::model::transport::{Answer, Call};
use crate::model::{Message, Provider, Request, Role, ToolCall, ToolChoice, ToolDef, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

/// What each `stopReason` value means: the model flow's schema says it, and
/// so `sluice flows model` and lua/sluice.d.lua.
pub const STOP_REASONS: &str = "Why it stopped: `end_turn`, a final answer (OpenAI's `stop`); `tool_use`, it asks \
for the toolCalls (run them and call again with their results); `max_tokens`, it reached maxTokens and the text is \
cut (raise maxTokens or ask for less); `stop_sequence`, a stop sequence ended it; `content_filter`, the provider's \
filter or the model refused (Anthropic's `refusal`, OpenAI's `content_filter`); `other`, any other reason the \
provider gave (Anthropic's `pause_turn`, for one) or none.";

/// Milliseconds a call may take when the caller does not say: two minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The most a caller may ask for: ten minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub provider: String,
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    pub tool_choice: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    #[serde(default)]
    pub stop: Vec<String>,
    pub json_schema: Option<Value>,
    pub timeout_ms: Option<u64>,
    pub stream: Option<bool>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: &'static str,
    pub usage: Usage,
    pub model: String,
    pub latency_ms: u64,
    pub first_token_ms: u64,
}

pub struct Model {
    provider: Provider,
    request: Request,
    timeout: Duration,
}

impl Flow for Model {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "model",
        description: "Sends a conversation to a language model and returns its text, its tool calls, why it stopped, the tokens used and the time taken.",
        tier: Tier::Sealed,
        actions: &[Action::ModelCall, Action::NetPrivate],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: Some("messages"),
        errors: &[crate::error::ErrorCode::CommandFailed, crate::error::ErrorCode::RequestFailed, crate::error::ErrorCode::Timeout, crate::error::ErrorCode::RateLimited, crate::error::ErrorCode::ProviderUnavailable, crate::error::ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        let call = tool_call_schema();
        let usage = closed(
            &[
                (
                    "inputTokens",
                    field("integer", "Tokens of input, cached ones included."),
                ),
                ("outputTokens", field("integer", "Tokens the model wrote.")),
                (
                    "cachedTokens",
                    field(
                        "integer",
                        "Input tokens served from the provider's prompt cache.",
                    ),
                ),
            ],
            &[],
        );
        closed(
            &[
                ("text", field("string", "The model's text (empty when it only called tools).")),
                ("toolCalls", list(call, "The tools the model asks to run, in its order.")),
                (
                    "stopReason",
                    super::choice(
                        &["end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "other"],
                        STOP_REASONS,
                    ),
                ),
                ("usage", nested("ModelUsage", "Tokens the call used.", usage)),
                ("model", field("string", "The model that answered, as the provider names it.")),
                ("latencyMs", field("integer", "Milliseconds from the request to the whole reply, retries included.")),
                ("firstTokenMs", field("integer", "Milliseconds until the first text arrived (streamed), or the reply (not streamed).")),
            ],
            &[],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        vec![Output {
            text: "Done.".into(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "read".into(),
                input: json!({}),
            }],
            stop_reason: "tool_use",
            usage: Usage {
                input_tokens: 120,
                output_tokens: 8,
                cached_tokens: 100,
            },
            model: "m".into(),
            latency_ms: 840,
            first_token_ms: 200,
        }]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        check_name("model", &input.model)?;
        check_messages(&input.messages)?;
        check_tools(&input.tools)?;
        if let Some(n) = input.max_tokens.filter(|n| *n == 0) {
            return Err(FlowError::invalid_input(
                "maxTokens",
                format!("maxTokens is {n}; it is at least 1"),
            ));
        }
        if let Some(t) = input.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
            return Err(FlowError::invalid_input(
                "temperature",
                format!("temperature is {t}; it is from 0 to 2"),
            ));
        }
        if input.json_schema.as_ref().is_some_and(|s| !s.is_object()) {
            return Err(FlowError::invalid_input(
                "jsonSchema",
                "jsonSchema is a JSON Schema table, e.g. {type = \"object\", properties = {...}}",
            ));
        }
        Ok(())
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let provider = ctx
            .models
            .get(&input.provider)
            .cloned()
            .ok_or_else(|| ctx.models.unknown(&input.provider))?;
        let timeout = timeout(input.timeout_ms)?;
        let tool_choice = tool_choice(input.tool_choice.as_deref(), &input.tools)?;
        let envelope = Envelope {
            network: vec![Capability {
                action: Action::ModelCall,
                resource: format!("{}/{}", provider.name, input.model),
            }],
            ..Envelope::new(Tier::Sealed)
        };
        let mut tools = input.tools;
        for t in &mut tools {
            lists_in_schema(&mut t.input);
        }
        let mut json_schema = input.json_schema;
        if let Some(s) = &mut json_schema {
            lists_in_schema(s);
        }
        let request = Request {
            model: input.model,
            system: input.system,
            messages: input.messages,
            tools,
            tool_choice,
            max_tokens: input.max_tokens,
            temperature: input.temperature,
            stop: input.stop,
            json_schema,
            stream: input.stream.unwrap_or(false),
        };
        Ok((
            Model {
                provider,
                request,
                timeout,
            },
            envelope,
        ))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let key = ctx.models.key(&self.provider)?;
        let secret = key
            .as_ref()
            .map(|k| k.expose().to_string())
            .filter(|k| !k.is_empty());
        let call = Call {
            provider: &self.provider,
            key,
            request: &self.request,
            deadline: tokio::time::Instant::now() + self.timeout,
        };
        let relay = ctx.on_text.clone();
        // Every loaded secret is cut from the streamed text, the key too.
        let mut held = crate::credentials::StreamCut::loaded_and(secret.as_deref());
        let answer = {
            let mut on_text = |piece: &str| {
                if let Some(r) = &relay {
                    let out = held.push(piece);
                    if !out.is_empty() {
                        r.send(&out);
                    }
                }
            };
            call.run(&ctx.net, ctx, &mut on_text).await
        };
        // The end of the text, held back in case it began the key.
        let rest = held.finish();
        if let (Some(r), false) = (&relay, rest.is_empty()) {
            r.send(&rest);
        }
        let mut answer = answer?;
        // A provider that sends its key back, in any field of its reply,
        // does not hand it to the script.
        if let Some(k) = secret.as_deref() {
            unkey_reply(&mut answer.reply, k);
        }
        Ok(output(answer))
    }
}

use crate::credentials::{cut_text, cut_value};

/// `reply` with every copy of `key` replaced: in its text, the model's
/// name, and each tool call's id, name and input (its keys and values).
fn unkey_reply(reply: &mut crate::model::wire::Reply, key: &str) {
    cut_text(&mut reply.text, key);
    cut_text(&mut reply.model, key);
    for c in &mut reply.tool_calls {
        cut_text(&mut c.id, key);
        cut_text(&mut c.name, key);
        cut_value(&mut c.input, key);
    }
}

fn output(a: Answer) -> Output {
    Output {
        stop_reason: a.reply.stop_reason.map_or("other", |s| s.as_str()),
        text: a.reply.text,
        tool_calls: a.reply.tool_calls,
        usage: a.reply.usage,
        model: a.reply.model,
        latency_ms: a.latency_ms,
        first_token_ms: a.first_token_ms,
    }
}

/// A model or tool name: printable, no spaces. Invisible format characters
/// (zero-width ones, bidirectional controls) are refused too: the name is
/// part of a capability a person may be asked about, and with one of them
/// it could print as another name.
fn check_name(field: &str, name: &str) -> FlowResult<()> {
    if name.is_empty()
        || name.len() > 200
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || crate::fsops::text::invisible(c))
    {
        return Err(FlowError::invalid_input(
            field,
            format!("{field} is {name:?}; it is the provider's name for the model, without spaces or invisible characters (1 to 200 characters)"),
        ));
    }
    Ok(())
}

fn check_messages(messages: &[Message]) -> FlowResult<()> {
    if messages.is_empty() {
        return Err(FlowError::invalid_input(
            "messages",
            "messages is empty; give at least one, e.g. messages = {{role = \"user\", content = \"...\"}}",
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let at = |f: &str| format!("messages[{}].{f}", i + 1);
        match m.role {
            Role::Tool if m.tool_call_id.as_deref().is_none_or(str::is_empty) => {
                return Err(FlowError::invalid_input(
                    &at("toolCallId"),
                    format!(
                        "{} is a tool result without the id of the call it answers; set toolCallId",
                        at("role")
                    ),
                ))
            }
            Role::User | Role::Assistant if m.tool_call_id.is_some() || m.is_error => {
                return Err(FlowError::invalid_input(
                    &at("toolCallId"),
                    "toolCallId and isError belong to tool results (role = \"tool\")",
                ))
            }
            Role::User | Role::Tool if !m.tool_calls.is_empty() => {
                return Err(FlowError::invalid_input(
                    &at("toolCalls"),
                    "toolCalls belong to assistant messages (role = \"assistant\")",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_tools(tools: &[ToolDef]) -> FlowResult<()> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in tools.iter().enumerate() {
        let at = |f: &str| format!("tools[{}].{f}", i + 1);
        let good = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !good {
            return Err(FlowError::invalid_input(
                &at("name"),
                format!("tool name {:?} is not 1 to 64 letters, digits, `_` or `-`, which both protocols require", t.name),
            ));
        }
        if !seen.insert(t.name.as_str()) {
            return Err(FlowError::invalid_input(
                &at("name"),
                format!("two tools are named {:?}", t.name),
            ));
        }
        let object = t.input.is_object() && t.input.get("type").is_none_or(|ty| ty == "object");
        if !object {
            return Err(FlowError::invalid_input(
                &at("input"),
                format!("the input of tool {:?} is a JSON Schema of an object, e.g. {{type = \"object\", properties = {{...}}}}", t.name),
            ));
        }
    }
    Ok(())
}

/// Lua has one empty table for `{}` and `[]`, and it reaches us as an
/// object: where JSON Schema wants a list (`required = {}`, `enum`, the
/// `*Of` keywords), an empty object is an empty list, as providers insist.
fn lists_in_schema(schema: &mut Value) {
    const LISTS: [&str; 6] = ["required", "enum", "anyOf", "oneOf", "allOf", "prefixItems"];
    match schema {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if LISTS.contains(&k.as_str()) && v.as_object().is_some_and(|o| o.is_empty()) {
                    *v = Value::Array(Vec::new());
                } else if k == "properties" || k == "$defs" || k == "definitions" {
                    // Keyed by name: a property may be called `required`.
                    if let Value::Object(named) = v {
                        named.values_mut().for_each(lists_in_schema);
                    }
                } else {
                    lists_in_schema(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(lists_in_schema),
        _ => {}
    }
}

/// `auto`, `none`, `required`, or the name of one of `tools`.
fn tool_choice(given: Option<&str>, tools: &[ToolDef]) -> FlowResult<Option<ToolChoice>> {
    let Some(given) = given else { return Ok(None) };
    let choice = match given {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        name if tools.iter().any(|t| t.name == name) => ToolChoice::Tool(name.into()),
        other => {
            return Err(FlowError::invalid_input(
                "toolChoice",
                format!("toolChoice is {other:?}; it is \"auto\", \"none\", \"required\" or the name of one of `tools`"),
            ))
        }
    };
    if tools.is_empty() && choice != ToolChoice::None && choice != ToolChoice::Auto {
        return Err(FlowError::invalid_input(
            "toolChoice",
            "toolChoice asks for a tool call, but `tools` is empty",
        ));
    }
    Ok(Some(choice))
}

fn timeout(ms: Option<u64>) -> FlowResult<Duration> {
    match ms.unwrap_or(DEFAULT_TIMEOUT_MS) {
        0 => Err(FlowError::invalid_input(
            "timeoutMs",
            format!("timeoutMs is 0; it is milliseconds above 0 (default {DEFAULT_TIMEOUT_MS}, at most {MAX_TIMEOUT_MS})"),
        )),
        n => Ok(Duration::from_millis(n.min(MAX_TIMEOUT_MS))),
    }
}

/// A tool call, as a reply gives it and a later turn's assistant message
/// carries it back.
fn tool_call_schema() -> Value {
    let call = closed(
        &[
            (
                "id",
                field(
                    "string",
                    "The call's id; a tool result answers it as `toolCallId`.",
                ),
            ),
            ("name", field("string", "The tool to run.")),
            (
                "input",
                field("object", "The tool's input, decoded from the model's JSON."),
            ),
        ],
        &[],
    );
    nested("ToolCall", "A tool call.", call)
}

/// The audit's one-line gist: the model, and the head of the last message.
fn summary(input: &Value) -> String {
    let (Some(provider), Some(model)) = (input["provider"].as_str(), input["model"].as_str())
    else {
        return input.to_string();
    };
    let last = input["messages"].as_array().and_then(|m| m.last());
    let said = match last.map(|m| &m["content"]) {
        Some(Value::String(s)) => s.clone(),
        Some(other @ Value::Array(_)) => other.to_string(),
        _ => String::new(),
    };
    let head: String = said
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(60)
        .collect();
    let turns = input["messages"].as_array().map_or(0, Vec::len);
    format!("{provider}/{model} ({turns} messages): {head}")
}

fn schema() -> Value {
    let part = json!({
        "type": "object", "title": "Part", "additionalProperties": false, "required": ["type"],
        "properties": {
            "type": {"type": "string", "enum": ["text", "image"], "description": "A text part or an image part."},
            "text": {"type": "string", "description": "The text of a text part."},
            "url": {"type": "string", "description": "An image part's URL: https://..., or data:MEDIA;base64,..."}
        }
    });
    let call = tool_call_schema();
    let message = json!({
        "type": "object", "title": "Message", "additionalProperties": false, "required": ["role"],
        "properties": {
            "role": {"type": "string", "enum": ["user", "assistant", "tool"], "description": "Who wrote it; a tool result is `tool`."},
            "content": {"description": "Text, or a list of parts ({type = \"text\", text = ...}, {type = \"image\", url = ...}).",
                        "oneOf": [{"type": "string"}, {"type": "array", "items": part}]},
            "toolCalls": {"type": "array", "items": call, "description": "An assistant message's tool calls, as the reply gave them."},
            "toolCallId": {"type": "string", "description": "A tool result: the id of the call it answers."},
            "isError": {"type": "boolean", "description": "A tool result: whether the tool failed or was refused."}
        }
    });
    let tool = json!({
        "type": "object", "title": "Tool", "additionalProperties": false, "required": ["name", "input"],
        "properties": {
            "name": {"type": "string", "description": "1 to 64 letters, digits, `_` or `-`."},
            "description": {"type": "string", "description": "What the tool does, for the model."},
            "input": {"type": "object", "description": "JSON Schema of the tool's input (an object)."}
        }
    });
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["provider", "model", "messages"],
        "properties": {
            "provider": {"type": "string", "description": "A provider the operator declared (the policy's `providers`, or --provider)."},
            "model": {"type": "string", "description": "The provider's name for the model."},
            "system": {"type": "string", "description": "The system prompt."},
            "messages": {"type": "array", "items": message, "minItems": 1, "description": "The conversation, oldest first."},
            "tools": {"type": "array", "items": tool, "description": "Tools the model may call (sluice.tools{...} builds them from flows)."},
            "toolChoice": {"type": "string", "description": "\"auto\" (default), \"none\", \"required\", or a tool's name."},
            "maxTokens": {"type": "integer", "minimum": 1, "description": "The most tokens the reply may have."},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2, "description": "Sampling temperature."},
            "stop": {"type": "array", "items": {"type": "string"}, "description": "Sequences that end the reply."},
            "jsonSchema": {"type": "object", "description": "Structured output: the reply's text is JSON of this schema."},
            "timeoutMs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "description": "Milliseconds for the whole call, retries included (default 120000, at most 600000)."},
            "stream": {"type": "boolean", "description": "Stream the reply (default: true when onText is given). onText, a function, is called with each piece of text."}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_carrying_the_key_anywhere_gives_none_of_it() {
        let key = "sk-SECRET-123";
        let mut reply = crate::model::wire::Reply {
            text: format!("t {key}"),
            model: key.into(),
            tool_calls: vec![ToolCall {
                id: format!("id-{key}"),
                name: format!("n{key}"),
                input: json!({key: [key, {"in": format!("x{key}"), key: 1}], "path": "a"}),
            }],
            ..Default::default()
        };
        unkey_reply(&mut reply, key);
        let all = format!("{reply:?}");
        assert!(!all.contains("SECRET"), "{all}");
        assert_eq!(reply.tool_calls[0].input["path"], "a");
        assert_eq!(
            reply.tool_calls[0].input["[redacted]"][1],
            json!({"in": "x[redacted]", "[redacted]": 1})
        );
    }

    #[test]
    fn a_model_name_with_invisible_characters_is_refused() {
        for bad in [
            "a\u{200b}b",
            "\u{202e}gib",
            "m\u{feff}",
            "m\u{2066}",
            "m\u{ad}",
            "a b",
            "a\u{7}",
        ] {
            assert!(check_name("model", bad).is_err(), "{bad:?}");
        }
        for good in [
            "gpt-4.1",
            "meta-llama/Llama-3.1-8B",
            "llama3.1:8b",
            "bíg",
            "模型",
        ] {
            assert!(check_name("model", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn an_empty_lua_table_where_a_schema_wants_a_list_is_an_empty_list() {
        let mut s = json!({"type": "object", "required": {}, "properties": {"a": {"enum": {}, "type": "string"}, "required": {}}});
        lists_in_schema(&mut s);
        assert_eq!(
            s,
            json!({"type": "object", "required": [], "properties": {"a": {"enum": [], "type": "string"}, "required": {}}})
        );
    }
}
