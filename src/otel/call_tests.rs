use super::*;
use crate::otel::span::{task_span_id, Status};
use serde_json::json;

/// A call as the reader hands it: `flow` of task `task`, step `seq`,
/// started at ms 1,000 for 2.5 ms, ending `ok` with `output` or failing
/// with `error`.
fn call(flow: &str, task: &str, seq: i64, input: Json, end: Result<Json, Json>) -> Call {
    let (outcome, output, error) = match end {
        Ok(out) => (Outcome::Ok, Some(out), None),
        Err(err) => (Outcome::Error, None, Some(err)),
    };
    Call {
        run: "r1".into(),
        n: 7,
        task: task.into(),
        seq,
        client: None,
        flow: flow.into(),
        tier: "sealed".into(),
        started_ms: 1_000,
        status: Some(
            if outcome == Outcome::Ok {
                "ok"
            } else {
                "error"
            }
            .into(),
        ),
        outcome,
        duration_us: Some(2_500),
        input,
        capabilities: json!([]),
        decisions: json!([{"capability": "x", "decision": "allow", "by": "rule", "reason": "r"}]),
        late_decisions: Some(json!([])),
        route: None,
        redacted: json!([]),
        replayed_from: None,
        output,
        error,
        capped: false,
        prev: String::new(),
        hash: String::new(),
        outcome_hash: None,
        parts: None,
        overlaps: Vec::new(),
    }
}

fn model_call() -> Call {
    call(
        "model",
        "0",
        1,
        json!({"provider": "local", "model": "m1", "system": "be brief", "maxTokens": 64,
               "messages": [{"role": "user", "content": "hi [redacted]"}]}),
        Ok(
            json!({"text": "hello there", "toolCalls": [], "stopReason": "end_turn",
                  "model": "test-model-2025-01-01", "latencyMs": 2, "firstTokenMs": 2,
                  "usage": {"inputTokens": 120, "outputTokens": 8, "cachedTokens": 100}}),
        ),
    )
}

fn attr<'a>(s: &'a Span, key: &str) -> &'a Value {
    s.attribute(key)
        .unwrap_or_else(|| panic!("no {key} in {:?}", s.attributes))
}

#[test]
fn a_model_call_is_a_chat_span_with_the_genai_attributes_and_the_records_tokens() {
    let s = call_span("r1", &model_call(), false, None);
    assert_eq!(s.name, "chat m1");
    assert_eq!(s.kind, Kind::Client);
    assert_eq!(s.parent, Some(task_span_id("r1", "0")));
    assert_eq!((s.start_ns, s.end_ns), (1_000_000_000, 1_002_500_000));
    for (key, want) in [
        ("gen_ai.operation.name", Value::from("chat")),
        ("gen_ai.system", "local".into()),
        ("gen_ai.provider.name", "local".into()),
        ("gen_ai.request.model", "m1".into()),
        ("gen_ai.request.max_tokens", 64i64.into()),
        ("gen_ai.response.model", "test-model-2025-01-01".into()),
        ("gen_ai.usage.input_tokens", 120i64.into()),
        ("gen_ai.usage.output_tokens", 8i64.into()),
        ("gen_ai.usage.cache_read.input_tokens", 100i64.into()),
        (
            "gen_ai.response.finish_reasons",
            Value::Strs(vec!["stop".into()]),
        ),
        ("sluice.model.stop_reason", "end_turn".into()),
        ("sluice.call.n", 7i64.into()),
        ("sluice.call.seq", 1i64.into()),
        ("sluice.task", "0".into()),
        ("sluice.tier", "sealed".into()),
        ("sluice.decision", "allow".into()),
        ("sluice.outcome", "ok".into()),
    ] {
        assert_eq!(attr(&s, key), &want, "{key}");
    }
    assert_eq!(s.status, Status::Unset);
    // No content without asking: no input, output, message or text.
    for key in [
        "sluice.input",
        "sluice.output",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
    ] {
        assert!(s.attribute(key).is_none(), "{key} without --otlp-content");
    }
    let text = format!("{s:?}");
    assert!(!text.contains("hello there") && !text.contains("hi [redacted]"));
}

#[test]
fn with_content_a_model_call_carries_its_conversation_and_the_records_text() {
    let s = call_span("r1", &model_call(), true, None);
    let messages: Json =
        serde_json::from_str(attr(&s, "gen_ai.input.messages").as_str().unwrap()).unwrap();
    assert_eq!(
        messages,
        json!([{"role": "user", "parts": [{"type": "text", "content": "hi [redacted]"}]}])
    );
    let out: Json =
        serde_json::from_str(attr(&s, "gen_ai.output.messages").as_str().unwrap()).unwrap();
    assert_eq!(out[0]["parts"][0]["content"], "hello there");
    assert_eq!(
        attr(&s, "gen_ai.system_instructions").as_str(),
        Some(r#"[{"content":"be brief","type":"text"}]"#)
    );
    assert_eq!(
        attr(&s, "sluice.input").as_str().unwrap(),
        model_call().input.to_string()
    );
    assert!(attr(&s, "sluice.output")
        .as_str()
        .unwrap()
        .contains(r#""text":"hello there""#));
}

#[test]
fn a_denied_tool_call_is_an_error_span_naming_its_code_and_the_deny() {
    let mut c = call(
        "read",
        "0.2",
        3,
        json!({"path": "/etc/shadow"}),
        Err(json!({"code": "permission_denied", "message": "fs:read:/etc/shadow is denied"})),
    );
    c.decisions = json!([{"capability": "fs:read:/etc/shadow", "decision": "deny",
                          "by": "deny \"fs:*:/etc/shadow\"", "reason": "r"}]);
    let s = call_span("r1", &c, false, None);
    assert_eq!(s.name, "execute_tool read");
    assert_eq!(s.kind, Kind::Internal);
    assert_eq!(s.parent, Some(task_span_id("r1", "0.2")));
    assert_eq!(
        attr(&s, "gen_ai.operation.name"),
        &Value::from("execute_tool")
    );
    assert_eq!(attr(&s, "gen_ai.tool.name"), &Value::from("read"));
    assert_eq!(
        attr(&s, "sluice.decision"),
        &Value::from("deny by deny \"fs:*:/etc/shadow\"")
    );
    assert_eq!(attr(&s, "sluice.outcome"), &Value::from("error"));
    assert_eq!(
        attr(&s, "sluice.error.code"),
        &Value::from("permission_denied")
    );
    assert_eq!(attr(&s, "error.type"), &Value::from("permission_denied"));
    // The code alone: the message names the path, which is content.
    assert_eq!(s.status, Status::Error("permission_denied".into()));
    assert!(s.attribute("gen_ai.usage.input_tokens").is_none());
    let with = call_span("r1", &c, true, None);
    assert_eq!(
        with.status,
        Status::Error("permission_denied: fs:read:/etc/shadow is denied".into())
    );
    assert_eq!(
        attr(&with, "gen_ai.tool.call.arguments").as_str(),
        Some(r#"{"path":"/etc/shadow"}"#)
    );
    assert!(attr(&with, "sluice.error")
        .as_str()
        .unwrap()
        .contains("permission_denied"));
}

#[test]
fn an_inner_call_hangs_under_its_maker_and_an_unknown_outcome_ends_with_the_run() {
    let mut c = call("read", "0.c4", 1, json!({"path": "a"}), Ok(json!({})));
    c.outcome = Outcome::Unknown;
    c.status = None;
    c.output = None;
    c.duration_us = None;
    let s = call_span("r1", &c, false, Some(1_500));
    assert_eq!(
        s.parent,
        Some(crate::otel::span::call_span_id("r1", "0", 4))
    );
    assert_eq!(s.end_ns, 1_500_000_000);
    assert!(matches!(&s.status, Status::Error(m) if m.starts_with("outcome unknown")));
    assert_eq!(attr(&s, "sluice.outcome"), &Value::from("unknown"));
}

#[test]
fn a_failed_model_call_is_still_a_chat_span_without_tokens() {
    let c = call(
        "model",
        "0",
        2,
        json!({"provider": "local", "model": "m1", "messages": []}),
        Err(json!({"code": "provider_unavailable", "message": "503"})),
    );
    let s = call_span("r1", &c, false, None);
    assert_eq!(s.name, "chat m1");
    assert!(s.attribute("gen_ai.usage.input_tokens").is_none());
    assert!(s.attribute("gen_ai.response.model").is_none());
    assert_eq!(s.status, Status::Error("provider_unavailable".into()));
}
