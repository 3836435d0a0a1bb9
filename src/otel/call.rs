//! One recorded call as a span: a model call in the GenAI semantic
//! conventions (`chat MODEL`, `gen_ai.*`), every other call as a tool's
//! (`execute_tool FLOW`, `gen_ai.tool.name`), each with what the record
//! says of its decision, tier and outcome (`sluice.*`). Content (inputs,
//! outputs, errors, a conversation) only when asked.

use super::content::{self, fitted_json, json_text};
use super::span::{call_span_id, trace_id, Kind, Span, Status, Value};
use super::tree;
use crate::audit::render::{decision_summary, route_summary};
use crate::audit::show::{Call, ModelUse, Outcome};
use serde_json::Value as Json;

/// The flow whose calls are model calls (the record names each call's
/// flow; a model call's output alone would miss a failed one).
const MODEL_FLOW: &str = "model";

/// Call `c` of run `run` as a span. `run_end_ms` is when the run ended,
/// when it has: a call whose outcome is unknown ends there.
pub fn call_span(run: &str, c: &Call, content: bool, run_end_ms: Option<i64>) -> Span {
    let start_ns = ms_to_ns(c.started_ms);
    let end_ns = match c.duration_us {
        Some(us) => start_ns.saturating_add(u64::try_from(us).unwrap_or(0) * 1000),
        None => run_end_ms.map_or(start_ns, ms_to_ns).max(start_ns),
    };
    let model = is_model(c);
    let mut attributes = common(c);
    if model {
        attributes.extend(model_attributes(c));
    } else {
        attributes.push(("gen_ai.operation.name", "execute_tool".into()));
        attributes.push(("gen_ai.tool.name", c.flow.as_str().into()));
    }
    if content {
        attributes.extend(content_attributes(c, model));
    }
    Span {
        trace_id: trace_id(run),
        span_id: call_span_id(run, &c.task, c.seq),
        parent: Some(tree::call_parent(run, &c.task)),
        name: name(c, model),
        kind: if model { Kind::Client } else { Kind::Internal },
        start_ns,
        end_ns,
        attributes,
        status: status(c, content),
    }
}

/// Milliseconds since the epoch as nanoseconds (0 for a time before it).
pub fn ms_to_ns(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

fn is_model(c: &Call) -> bool {
    c.flow == MODEL_FLOW
}

/// `chat MODEL` (the model asked for) or `execute_tool FLOW`.
fn name(c: &Call, model: bool) -> String {
    match (model, str_field(&c.input, "model")) {
        (true, Some(m)) => format!("chat {m}"),
        (true, None) => "chat".to_string(),
        (false, _) => format!("execute_tool {}", c.flow),
    }
}

/// What every call's span says: where it is in the record, and what the
/// policy and the world made of it.
fn common(c: &Call) -> Vec<(&'static str, Value)> {
    let mut a: Vec<(&'static str, Value)> = vec![
        ("sluice.call.n", c.n.into()),
        ("sluice.call.seq", c.seq.into()),
        ("sluice.task", c.task.as_str().into()),
        ("sluice.flow", c.flow.as_str().into()),
        ("sluice.tier", c.tier.as_str().into()),
        ("sluice.decision", decision_summary(c).into()),
        ("sluice.outcome", c.outcome.as_str().into()),
    ];
    if let Some(code) = c.error_code() {
        a.push(("sluice.error.code", code.into()));
        a.push(("error.type", code.into()));
    }
    if c.route.as_ref().is_some_and(|r| !r.is_null()) {
        a.push(("sluice.route", route_summary(c.route.as_ref()).into()));
    }
    if let Some(client) = &c.client {
        a.push(("sluice.client", client.as_str().into()));
    }
    if let Some(from) = &c.replayed_from {
        a.push(("sluice.replayed_from", from.as_str().into()));
    }
    if c.capped {
        a.push(("sluice.output.capped", Value::Bool(true)));
    }
    a
}

/// A model call's GenAI attributes: the provider and model asked for
/// (from its input), and once it answered, the model that answered, the
/// tokens and why it stopped (from its output).
fn model_attributes(c: &Call) -> Vec<(&'static str, Value)> {
    let mut a: Vec<(&'static str, Value)> = vec![("gen_ai.operation.name", "chat".into())];
    if let Some(p) = str_field(&c.input, "provider") {
        // The record names the operator's provider (`--provider NAME=...`,
        // a policy's `providers`), not its wire protocol.
        a.push(("gen_ai.system", p.into()));
        a.push(("gen_ai.provider.name", p.into()));
    }
    if let Some(m) = str_field(&c.input, "model") {
        a.push(("gen_ai.request.model", m.into()));
    }
    if let Some(n) = c.input.get("maxTokens").and_then(Json::as_u64) {
        a.push(("gen_ai.request.max_tokens", n.into()));
    }
    if let Some(t) = c.input.get("temperature").and_then(Json::as_f64) {
        a.push(("gen_ai.request.temperature", Value::Double(t)));
    }
    let answered = c.output.as_ref().filter(|_| c.outcome == Outcome::Ok);
    if let Some(u) = answered.filter(|_| !c.capped).and_then(ModelUse::of) {
        a.push(("gen_ai.response.model", u.model.into()));
        a.push(("gen_ai.usage.input_tokens", u.input_tokens.into()));
        a.push(("gen_ai.usage.output_tokens", u.output_tokens.into()));
        a.push((
            "gen_ai.usage.cache_read.input_tokens",
            u.cached_tokens.into(),
        ));
        a.push(("sluice.model.latency_ms", u.latency_ms.into()));
    }
    if let Some(stop) = answered.and_then(|o| str_field(o, "stopReason")) {
        let reason = content::finish_reason(stop).to_string();
        a.push(("gen_ai.response.finish_reasons", Value::Strs(vec![reason])));
        a.push(("sluice.model.stop_reason", stop.into()));
    }
    a
}

/// The record's input, output and error (`--otlp-content`), and a model
/// call's conversation or a tool call's arguments and result in the GenAI
/// conventions' names.
fn content_attributes(c: &Call, model: bool) -> Vec<(&'static str, Value)> {
    let mut a: Vec<(&'static str, Value)> = vec![("sluice.input", json_text(&c.input).into())];
    if let Some(out) = &c.output {
        a.push(("sluice.output", json_text(out).into()));
    }
    if let Some(err) = &c.error {
        a.push(("sluice.error", json_text(err).into()));
    }
    if model {
        let messages = [
            (
                "gen_ai.system_instructions",
                content::system_instructions(&c.input),
            ),
            ("gen_ai.input.messages", content::input_messages(&c.input)),
            (
                "gen_ai.output.messages",
                c.output
                    .as_ref()
                    .filter(|_| c.outcome == Outcome::Ok && !c.capped)
                    .and_then(content::output_messages),
            ),
        ];
        for (key, value) in messages {
            if let Some(v) = value {
                a.push((key, fitted_json(&v).into()));
            }
        }
    } else {
        a.push(("gen_ai.tool.call.arguments", json_text(&c.input).into()));
        if let Some(out) = &c.output {
            a.push(("gen_ai.tool.call.result", json_text(out).into()));
        }
    }
    a
}

/// Error for a call that failed (its code; with content, its message too)
/// or whose outcome is unknown; unset otherwise.
fn status(c: &Call, content: bool) -> Status {
    match c.outcome {
        Outcome::Ok | Outcome::Pending => Status::Unset,
        Outcome::Unknown => {
            Status::Error("outcome unknown: the process ended while the call ran".to_string())
        }
        Outcome::Error => {
            let code = c.error_code().unwrap_or("error");
            let message = c
                .error
                .as_ref()
                .and_then(|e| str_field(e, "message"))
                .filter(|_| content);
            Status::Error(match message {
                Some(m) => content::cut(&format!("{code}: {m}"), content::LIMIT),
                None => code.to_string(),
            })
        }
    }
}

fn str_field<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str)
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
