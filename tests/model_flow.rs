//! `sluice.model` through the real binary, against a scripted loopback
//! provider speaking OpenAI Chat Completions or Anthropic Messages as their
//! documentation shows (tests/common/model_server.rs): the output for text
//! and tool calls, JSON and streamed; the exact request each protocol
//! receives; retries and the error codes; the policy's say; that the key
//! never leaks into an error or the record; invalid input; replay.
//!
//! Each test runs for both protocols where the behaviour is the same in
//! both. Providers come from `--provider local=API:URL` (or a policy's
//! `providers` table); every run gets `--credentials` naming a file that
//! does not exist and has no `SLUICE_CREDENTIAL_LOCAL*` in its
//! environment unless the test sets it, so the machine's own keys never
//! take part.

mod common;
#[path = "common/model_server.rs"]
mod model_server;

use common::stores::{Kind, Store};
use common::{denied, exported_calls, script_file, sluice_in, workspace, Run, Workspace, EMIT};
use model_server::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A key distinctive enough that any leak is found by a substring search.
const KEY: &str = "sk-test-SECRET123";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

use Api::{Anthropic, OpenAi};

// ---- running scripts ----

/// Lua: `model(input)` calls sluice.model, emits `{ok = out}` or
/// `{err = err}`, and returns both.
const PRELUDE: &str = r#"
local function model(input)
  local r, e = sluice.model(input)
  if r then emit({ok = r}) else emit({err = e}) end
  return r, e
end
local hello = {{role = "user", content = "Say hello."}}
"#;

/// The flags for provider `local` at `server`, speaking `api`, with the
/// model calls and the server's private origin approved.
fn flags(api: Api, server: &ModelServer) -> Vec<String> {
    vec![
        "--provider".into(),
        format!("local={}:{}", api.name(), server.url()),
        "--approve".into(),
        "model:call:local/**".into(),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
    ]
}

/// The credentials file every run is given: one that does not exist.
fn nowhere(ws: &Workspace) -> String {
    ws.path()
        .parent()
        .unwrap()
        .join("no-credentials")
        .display()
        .to_string()
}

/// Runs `body` (after `emit`, `model` and `hello`) with `flags`, `env` set
/// on the sluice process and nothing else of the machine's credentials.
fn sluice(ws: &Workspace, flags: &[String], env: &[(&str, &str)], body: &str) -> Run {
    let path = script_file(ws.path(), &format!("{EMIT}{PRELUDE}{body}"));
    let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
    let creds = nowhere(ws);
    all.extend(["--credentials", &creds]);
    common::sluice_run(ws.path(), &path, &all, &[])
        .env_remove("SLUICE_CREDENTIAL_LOCAL")
        .env_remove("SLUICE_CREDENTIAL_LOCAL_KEY")
        .envs(env.iter().copied())
        .output()
        .expect("spawn sluice")
        .into()
}

/// Each stdout line of a run that must succeed, as JSON.
fn lines(run: Run) -> Vec<Value> {
    run.ok()
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// [`sluice`] then [`lines`].
fn emitted(ws: &Workspace, flags: &[String], env: &[(&str, &str)], body: &str) -> Vec<Value> {
    lines(sluice(ws, flags, env, body))
}

/// An emitted Lua list: an empty one is an empty table, which JSON shows
/// as `{}`.
fn list(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.is_empty() => json!([]),
        other => other.clone(),
    }
}

/// The usage every builder's reply reports, in the flow's terms.
fn usage() -> Value {
    json!({"inputTokens": INPUT_TOKENS, "outputTokens": OUTPUT_TOKENS, "cachedTokens": CACHED_TOKENS})
}

/// An output's timings `(latencyMs, firstTokenMs)`, checked to be whole
/// milliseconds with the first token no later than the whole reply, and
/// the output without them.
fn timings(out: &Value) -> (Value, u64, u64) {
    let latency = out["latencyMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("latencyMs: {out}"));
    let first = out["firstTokenMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("firstTokenMs: {out}"));
    assert!(first <= latency, "first token after the whole reply: {out}");
    let mut rest = out.clone();
    let map = rest.as_object_mut().unwrap();
    map.remove("latencyMs");
    map.remove("firstTokenMs");
    (rest, latency, first)
}

/// The whole output of a text reply, without its timings.
fn text_output(text: &str) -> Value {
    json!({"text": text, "toolCalls": [], "stopReason": "end_turn", "usage": usage(), "model": REPLY_MODEL})
}

/// A message's content as text: a string, or text parts joined (both
/// protocols take either).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| {
                assert_eq!(p["type"], "text", "a part that is not text: {content}");
                p["text"].as_str().unwrap().to_string()
            })
            .collect(),
        other => panic!("content is neither text nor parts: {other}"),
    }
}

/// The permission_required error of the built-in default policy for `cap`,
/// with nobody at a terminal.
fn required(cap: &str) -> Value {
    let by = "policies/default.lua (built in)";
    let reason = format!("no rule or hook of the policy matched {cap}");
    json!({
        "code": "permission_required",
        "message": format!(
            "{cap} needs approval ({by}: {reason}) and there is no terminal to ask. \
             Pre-approve it with --approve '{cap}', or change the policy."
        ),
        "capability": cap,
        "by": by,
        "reason": reason,
        "approve": format!("--approve '{cap}'"),
    })
}

/// The manifest entry of flow `name` (`sluice flows NAME`).
fn manifest(name: &str) -> Value {
    let out = std::process::Command::new(common::sluice_bin())
        .args(["flows", name])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

// ---- the test server itself ----

/// A raw HTTP/1.1 POST to `server`: the whole answer as text.
fn raw_post(server: &ModelServer, body: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    write!(
        c,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

/// The body of a chunked answer, de-chunked, and whether it ended with its
/// last (empty) chunk.
fn dechunk(answer: &str) -> (String, bool) {
    let (_, mut rest) = answer.split_once("\r\n\r\n").unwrap();
    let mut body = String::new();
    loop {
        let Some((size, tail)) = rest.split_once("\r\n") else {
            return (body, false);
        };
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            return (body, true);
        }
        body.push_str(&tail[..size]);
        rest = &tail[size + 2..];
    }
}

#[test]
fn the_test_server_answers_in_order_captures_requests_and_refuses_once_stopped() {
    let mut server = ModelServer::start(vec![
        Answer::json(json!({"a": 1})).header("retry-after", "3"),
        Answer::sse(vec![
            Event::named("ping", json!({"type": "ping"})),
            Event::json(json!({"x": "y"})).after(ms(150)),
            Event::text("[DONE]"),
        ]),
        Answer::sse(anthropic_stream_text(&["a", "b", "c"])).cut_after(4),
        Answer::error(503, json!({})).delay(ms(200)),
    ]);
    assert_eq!(
        server.url(),
        format!("http://127.0.0.1:{}/v1", server.port())
    );
    assert_eq!(
        server.origin(),
        format!("http://127.0.0.1:{}", server.port())
    );

    let first = raw_post(&server, r#"{"model": "m"}"#);
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.contains("\r\nretry-after: 3\r\n"), "{first}");
    assert!(first.contains("\r\nconnection: close\r\n"), "{first}");
    assert!(first.ends_with("\r\n\r\n{\"a\":1}"), "{first}");

    let t = Instant::now();
    let second = raw_post(&server, "not json");
    assert!(t.elapsed() >= ms(150));
    assert!(second.contains("\r\ncontent-type: text/event-stream; charset=utf-8\r\n"));
    assert!(second.contains("\r\ntransfer-encoding: chunked\r\n"));
    assert_eq!(
        dechunk(&second),
        (
            "event: ping\ndata: {\"type\":\"ping\"}\n\ndata: {\"x\":\"y\"}\n\ndata: [DONE]\n\n"
                .to_string(),
            true
        )
    );

    let (cut, whole) = dechunk(&raw_post(&server, "{}"));
    assert!(!whole, "a cut stream has no last chunk");
    assert_eq!(cut.matches("\n\n").count(), 4, "{cut}");
    let sent: String = anthropic_stream_text(&["a", "b", "c"])[..4]
        .iter()
        .map(Event::wire)
        .collect();
    assert_eq!(
        cut, sent,
        "the first four events, then the connection closed"
    );

    let t = Instant::now();
    let slow = raw_post(&server, "{}");
    assert!(t.elapsed() >= ms(200));
    assert!(slow.starts_with("HTTP/1.1 503 "), "{slow}");

    let unscripted = raw_post(&server, "{}");
    assert!(unscripted.starts_with("HTTP/1.1 418 "), "{unscripted}");
    assert!(unscripted.contains("no answer scripted for request #5"));

    let reqs = server.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(
        (reqs[0].n, reqs[0].method.as_str(), reqs[0].path.as_str()),
        (1, "POST", "/v1/messages")
    );
    assert_eq!(reqs[0].header("x-api-key"), Some("k"));
    assert_eq!(reqs[0].header("content-type"), Some("application/json"));
    assert_eq!(reqs[0].body, json!({"model": "m"}));
    assert_eq!(
        (reqs[1].body.clone(), reqs[1].text.as_str()),
        (Value::Null, "not json")
    );

    server.stop();
    assert!(
        TcpStream::connect(("127.0.0.1", server.port())).is_err(),
        "a stopped server refuses connections"
    );
}

#[test]
fn the_test_server_responder_decides_per_request() {
    let server = ModelServer::respond(|r| {
        if r.streams() {
            Answer::sse(openai_stream_text(&["x"]))
        } else {
            Answer::json(json!({"n": r.n}))
        }
    });
    assert!(raw_post(&server, r#"{"stream": false}"#).ends_with(r#"{"n":1}"#));
    let (body, whole) = dechunk(&raw_post(&server, r#"{"stream": true}"#));
    assert!(whole);
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(body.matches("data: ").count(), 5, "{body}");
}

#[test]
fn the_builders_carry_the_same_tokens_in_each_protocols_terms() {
    let o = openai_text("hi");
    assert_eq!(o["usage"]["prompt_tokens"], INPUT_TOKENS);
    assert_eq!(
        o["usage"]["prompt_tokens_details"]["cached_tokens"],
        CACHED_TOKENS
    );
    let a = anthropic_text("hi");
    assert_eq!(
        a["usage"]["input_tokens"].as_u64().unwrap()
            + a["usage"]["cache_read_input_tokens"].as_u64().unwrap(),
        INPUT_TOKENS
    );
    let calls = openai_tools(vec![("c1", "read", json!({"path": "a"}))]);
    assert_eq!(
        calls["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a"}"#
    );
    // Interleaved: both calls announced, then their pieces alternate.
    let events = openai_stream_tools(vec![
        ("c1", "read", vec!["{\"pa", "th\":1}"]),
        ("c2", "grep", vec!["{}"]),
    ]);
    let indices: Vec<Value> = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["tool_calls"][0]
                .get("index")
                .cloned()
        })
        .collect();
    assert_eq!(indices, [json!(0), json!(1), json!(0), json!(1), json!(0)]);
    let names: Vec<String> = anthropic_stream_tools(vec![("t1", "read", vec!["{}"])])
        .iter()
        .map(|e| e.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
}

// ---- 1. text replies ----

fn a_text_reply_as_json_is_the_whole_output_and_on_text_gets_it_once(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![
        api.text("Hello there.").delay(ms(120)),
        api.text("Hello again."),
    ]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
model{provider = "local", model = "m", messages = hello}
local pieces = {}
model{provider = "local", model = "m", messages = hello, stream = false,
      onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    assert_eq!(out.len(), 3, "{out:?}");
    let (first, latency, first_token) = timings(&ok(&out[0]));
    assert_eq!(first, text_output("Hello there."));
    assert!(latency >= 120, "the reply came after 120 ms: {latency}");
    assert!(
        first_token >= 120,
        "not streamed, the first token is the reply: {first_token}"
    );
    let (second, _, _) = timings(&ok(&out[1]));
    assert_eq!(second, text_output("Hello again."));
    assert_eq!(
        out[2],
        json!(["Hello again."]),
        "onText got the whole text once"
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", api.path()));
        assert_eq!(r.header("accept"), Some("application/json"));
        assert_ne!(r.body["stream"], json!(true), "not streamed: {}", r.text);
    }
}

#[test]
fn openai_text_reply_as_json() {
    a_text_reply_as_json_is_the_whole_output_and_on_text_gets_it_once(OpenAi);
}

#[test]
fn anthropic_text_reply_as_json() {
    a_text_reply_as_json_is_the_whole_output_and_on_text_gets_it_once(Anthropic);
}

fn a_streamed_text_reply_hands_its_pieces_to_on_text_in_order(api: Api) {
    let ws = workspace();
    let pieces = ["Hel", "lo", " there", ", world", "."];
    let mut slow = api.stream_text(&pieces);
    let at = api.first_piece();
    let events = slow.events_mut();
    events[at] = events[at].clone().after(ms(150));
    events[at + 4] = events[at + 4].clone().after(ms(100));
    let server = ModelServer::start(vec![slow, api.stream_text(&["Plain ", "stream."])]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello,
      onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
model{provider = "local", model = "m", messages = hello, stream = true}
"#,
    );
    assert_eq!(out.len(), 3, "{out:?}");
    let (first, latency, first_token) = timings(&ok(&out[0]));
    assert_eq!(first, text_output("Hello there, world."));
    assert_eq!(out[1], json!(pieces), "onText got each piece, in order");
    assert!(
        first_token >= 150,
        "the first text came 150 ms in: {first_token}"
    );
    assert!(
        latency >= first_token + 80,
        "the last piece came 100 ms after the first: {latency} vs {first_token}"
    );
    let (second, _, _) = timings(&ok(&out[2]));
    assert_eq!(second, text_output("Plain stream."));

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.path, api.path());
        assert_eq!(r.body["stream"], json!(true), "{}", r.text);
        assert_eq!(r.header("accept"), Some("text/event-stream"));
        if api == OpenAi {
            assert_eq!(
                r.body["stream_options"]["include_usage"],
                json!(true),
                "without it OpenAI sends no usage: {}",
                r.text
            );
        }
    }
}

#[test]
fn openai_streamed_text_reply() {
    a_streamed_text_reply_hands_its_pieces_to_on_text_in_order(OpenAi);
}

#[test]
fn anthropic_streamed_text_reply() {
    a_streamed_text_reply_hands_its_pieces_to_on_text_in_order(Anthropic);
}

fn sse_framing_with_crlf_comments_and_split_chunks_is_read_whole(api: Api) {
    let ws = workspace();
    let pieces = ["Grüße", ", ", "wörld 🌍", "!"];
    let mut answer = api.stream_text(&pieces).crlf().split();
    let events = answer.events_mut();
    events.insert(0, Event::comment("OPENROUTER PROCESSING"));
    let at = api.first_piece() + 2;
    events.insert(at, Event::comment("keep-alive"));
    let server = ModelServer::start(vec![answer]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello, onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    let (got, _, _) = timings(&ok(&out[0]));
    assert_eq!(got, text_output("Grüße, wörld 🌍!"));
    assert_eq!(out[1], json!(pieces));
}

#[test]
fn openai_sse_framing() {
    sse_framing_with_crlf_comments_and_split_chunks_is_read_whole(OpenAi);
}

#[test]
fn anthropic_sse_framing() {
    sse_framing_with_crlf_comments_and_split_chunks_is_read_whole(Anthropic);
}

/// Stop reasons as each protocol names them, and the flow's names.
fn stop_reasons(api: Api) -> Vec<(&'static str, &'static str)> {
    match api {
        OpenAi => vec![
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("content_filter", "content_filter"),
        ],
        Anthropic => vec![
            ("end_turn", "end_turn"),
            ("max_tokens", "max_tokens"),
            ("stop_sequence", "stop_sequence"),
            ("refusal", "content_filter"),
            ("pause_turn", "other"),
        ],
    }
}

fn each_stop_reason_maps_to_the_flows_name(api: Api) {
    let ws = workspace();
    let reasons = stop_reasons(api);
    let answers = reasons
        .iter()
        .map(|(wire, _)| {
            let mut body = match api {
                OpenAi => openai_text("cut"),
                Anthropic => anthropic_text("cut"),
            };
            match api {
                OpenAi => body["choices"][0]["finish_reason"] = json!(wire),
                Anthropic => {
                    body["stop_reason"] = json!(wire);
                    if *wire == "stop_sequence" {
                        body["stop_sequence"] = json!("END");
                    }
                }
            }
            Answer::json(body)
        })
        .collect();
    let server = ModelServer::start(answers);
    let script = format!(
        "for i = 1, {} do model{{provider = \"local\", model = \"m\", messages = hello}} end",
        reasons.len()
    );
    let out = emitted(&ws, &flags(api, &server), &[], &script);
    let got: Vec<Value> = out.iter().map(|l| ok(l)["stopReason"].clone()).collect();
    let want: Vec<Value> = reasons.iter().map(|(_, name)| json!(name)).collect();
    assert_eq!(got, want);
}

#[test]
fn openai_stop_reasons() {
    each_stop_reason_maps_to_the_flows_name(OpenAi);
}

#[test]
fn anthropic_stop_reasons() {
    each_stop_reason_maps_to_the_flows_name(Anthropic);
}

#[test]
fn an_error_in_on_text_is_raised_at_the_callers_line_once_the_call_is_over() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.stream_text(&["a", "b", "c"])]);
    let out = emitted(
        &ws,
        &flags(OpenAi, &server),
        &[],
        r#"
local calls = 0
local ok, e = pcall(sluice.model, {provider = "local", model = "m", messages = hello,
  onText = function(p) calls = calls + 1; error("boom at " .. p) end})
emit({ok = ok, e = tostring(e), calls = calls})
"#,
    );
    assert_eq!(out[0]["ok"], false);
    assert_eq!(
        out[0]["calls"], 1,
        "onText is not called again once it raised"
    );
    let e = out[0]["e"].as_str().unwrap();
    assert!(e.contains("sluice.model: onText raised: "), "{e}");
    assert!(e.contains("boom at a"), "{e}");
    assert_eq!(server.count(), 1);
}

#[test]
fn a_json_reply_that_is_not_json_is_request_failed() {
    let ws = workspace();
    let server = ModelServer::start(vec![Answer::raw(
        200,
        "text/html",
        "<html>502 Bad Gateway</html>",
    )]);
    let out = emitted(
        &ws,
        &flags(OpenAi, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    assert_eq!(
        err(&out[0]),
        json!({"code": "request_failed", "provider": "local",
               "message": "model provider `local` answered HTTP 200 with a body that is not JSON (line 1, column 1)"})
    );
}

// ---- 2. tool calls ----

/// The two parallel calls of the tool tests, and their inputs decoded.
fn two_calls() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "call_a1",
            "read",
            json!({"path": "src/main.rs", "offset": 10}),
        ),
        (
            "call_b2",
            "grep",
            json!({"pattern": "say \"hi\"", "root": "src", "globs": ["*.rs", "!x é.rs"], "ignoreCase": true}),
        ),
    ]
}

fn tool_calls_output(text: &str) -> Value {
    json!({
        "text": text,
        "toolCalls": two_calls().into_iter()
            .map(|(id, name, input)| json!({"id": id, "name": name, "input": input}))
            .collect::<Vec<_>>(),
        "stopReason": "tool_use",
        "usage": usage(),
        "model": REPLY_MODEL,
    })
}

fn parallel_tool_calls_come_back_with_their_input_decoded(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![api.tools(two_calls())]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, tools = sluice.tools{"read", "grep"}}"#,
    );
    let (got, _, _) = timings(&ok(&out[0]));
    assert_eq!(got, tool_calls_output(""));
}

#[test]
fn openai_parallel_tool_calls() {
    parallel_tool_calls_come_back_with_their_input_decoded(OpenAi);
}

#[test]
fn anthropic_parallel_tool_calls() {
    parallel_tool_calls_come_back_with_their_input_decoded(Anthropic);
}

/// The arguments of [`two_calls`] as JSON text cut into four pieces each,
/// one cut falling inside an escape (`\"`): pieces are text to join, not
/// JSON to parse one by one.
fn argument_pieces() -> Vec<Vec<String>> {
    two_calls()
        .into_iter()
        .map(|(_, _, input)| {
            let text = input.to_string();
            let cuts: Vec<usize> = match text.find("\\\"") {
                Some(i) => vec![1, i + 1, text.len() - 3],
                None => vec![1, text.len() / 2, text.len() - 1],
            };
            let mut pieces = vec![];
            let mut from = 0;
            for c in cuts {
                let c = (c..).find(|&c| text.is_char_boundary(c)).unwrap();
                pieces.push(text[from..c].to_string());
                from = c;
            }
            pieces.push(text[from..].to_string());
            assert_eq!(pieces.concat(), text);
            pieces
        })
        .collect()
}

fn streamed_tool_calls_assemble_their_arguments_from_pieces(api: Api) {
    let ws = workspace();
    let pieces = argument_pieces();
    let calls = two_calls();
    let streamed: Vec<(&str, &str, Vec<&str>)> = calls
        .iter()
        .zip(&pieces)
        .map(|((id, name, _), p)| (*id, *name, p.iter().map(String::as_str).collect()))
        .collect();
    let (events, lead) = match api {
        // OpenAI: both calls announced, their pieces interleaved by index.
        OpenAi => (openai_stream_tools(streamed), vec![]),
        // Anthropic: a text block, then one tool_use block per call.
        Anthropic => (
            anthropic_stream_text_then_tools(&["Let me ", "look."], streamed),
            vec!["Let me ", "look."],
        ),
    };
    let server = ModelServer::start(vec![Answer::sse(events)]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello, tools = sluice.tools{"read", "grep"},
      onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    let (got, _, _) = timings(&ok(&out[0]));
    assert_eq!(got, tool_calls_output(&lead.concat()));
    assert_eq!(list(&out[1]), json!(lead), "onText got the text, if any");
}

#[test]
fn openai_streamed_tool_calls_interleaved() {
    streamed_tool_calls_assemble_their_arguments_from_pieces(OpenAi);
}

#[test]
fn anthropic_streamed_tool_calls_after_text() {
    streamed_tool_calls_assemble_their_arguments_from_pieces(Anthropic);
}

fn a_tool_without_arguments_has_an_empty_input(api: Api) {
    let ws = workspace();
    let events = match api {
        OpenAi => openai_stream_tools(vec![("call_n", "list_all", vec!["{", "}"])]),
        // Only the empty input_json_delta Anthropic sends first.
        Anthropic => anthropic_stream_tools(vec![("toolu_n", "list_all", vec![])]),
    };
    let id = if api == OpenAi { "call_n" } else { "toolu_n" };
    let server = ModelServer::start(vec![Answer::sse(events)]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
local r = model{provider = "local", model = "m", messages = hello, stream = true,
  tools = {{name = "list_all", description = "Lists everything.", input = {type = "object"}}}}
emit({isTable = type(r.toolCalls[1].input) == "table", n = next(r.toolCalls[1].input) == nil})
"#,
    );
    let got = ok(&out[0]);
    assert_eq!(
        got["toolCalls"],
        json!([{"id": id, "name": "list_all", "input": {}}])
    );
    assert_eq!(got["stopReason"], "tool_use");
    assert_eq!(out[1], json!({"isTable": true, "n": true}));
}

#[test]
fn openai_tool_without_arguments() {
    a_tool_without_arguments_has_an_empty_input(OpenAi);
}

#[test]
fn anthropic_tool_without_arguments() {
    a_tool_without_arguments_has_an_empty_input(Anthropic);
}

fn tool_arguments_that_are_not_json_are_an_unreadable_reply(api: Api) {
    let ws = workspace();
    // The stream is whole (it ends as the protocol says), but the model's
    // arguments stop mid-object.
    let broken = vec![("call_x", "read", vec!["{\"path\": ", "\"a.txt\""])];
    let events = match api {
        OpenAi => openai_stream_tools(broken),
        Anthropic => anthropic_stream_tools(broken),
    };
    let server = ModelServer::start(vec![Answer::sse(events)]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, stream = true, tools = sluice.tools{"read"}}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "request_failed", "{e}");
    let what = match api {
        OpenAi => "the arguments of the call to tool `read` are not JSON",
        Anthropic => "the input of the call to tool `read` is not JSON",
    };
    assert!(
        e["message"].as_str().unwrap().starts_with(&format!(
            "model provider `local` sent a reply sluice cannot read: {what}"
        )),
        "a whole stream was not cut short: {e}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn openai_tool_arguments_not_json() {
    tool_arguments_that_are_not_json_are_an_unreadable_reply(OpenAi);
}

#[test]
fn anthropic_tool_arguments_not_json() {
    tool_arguments_that_are_not_json_are_an_unreadable_reply(Anthropic);
}

// ---- 3. the request the provider receives ----

/// Lua: the tools of the request test (two flows and a Lua tool with its
/// `run`), and a conversation with a system prompt, an assistant turn
/// calling two tools and both results, one of them an error.
const CONVERSATION: &str = r#"
local tools = sluice.tools{"read", "grep", {
  name = "lookup", description = "Looks a word up in the glossary.",
  input = {type = "object", properties = {word = {type = "string", description = "The word."}}, required = {"word"}},
  run = function(input) return {found = false} end,
}}
model{provider = "local", model = "big-model", system = "You are terse.", tools = tools,
      maxTokens = 256, temperature = 0.5, stop = {"END"}, toolChoice = "required",
      messages = {
        {role = "user", content = "Read a.txt and find main."},
        {role = "assistant", content = "Looking.", toolCalls = {
          {id = "call_1", name = "read", input = {path = "a.txt"}},
          {id = "call_2", name = "grep", input = {pattern = "main", ignoreCase = true}},
        }},
        {role = "tool", toolCallId = "call_1", content = "alpha\nbeta"},
        {role = "tool", toolCallId = "call_2", content = "no such folder", isError = true},
      }}
model{provider = "local", model = "small", tools = tools, toolChoice = "lookup", messages = hello}
"#;

/// The three tools of [`CONVERSATION`] as `(name, description, schema)`.
fn conversation_tools() -> Vec<(String, String, Value)> {
    let mut tools: Vec<(String, String, Value)> = ["read", "grep"]
        .iter()
        .map(|name| {
            let m = manifest(name);
            (
                name.to_string(),
                m["description"].as_str().unwrap().to_string(),
                m["inputSchema"].clone(),
            )
        })
        .collect();
    tools.push((
        "lookup".into(),
        "Looks a word up in the glossary.".into(),
        json!({"type": "object", "properties": {"word": {"type": "string", "description": "The word."}}, "required": ["word"]}),
    ));
    tools
}

#[test]
fn openai_gets_the_conversation_tools_and_key_as_chat_completions_documents() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text("ok"), OpenAi.text("ok")]);
    let out = emitted(
        &ws,
        &flags(OpenAi, &server),
        &[("SLUICE_CREDENTIAL_LOCAL", KEY)],
        CONVERSATION,
    );
    assert_eq!(out.len(), 2);
    ok(&out[0]);
    ok(&out[1]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("x-api-key"), None);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let b = &r.body;
    assert_eq!(b["model"], "big-model");

    let m = b["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", r.text));
    assert_eq!(
        m.len(),
        5,
        "system, user, assistant, two tool results: {}",
        r.text
    );
    assert_eq!(m[0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(m[1]["role"], "user");
    assert_eq!(text_of(&m[1]["content"]), "Read a.txt and find main.");
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(text_of(&m[2]["content"]), "Looking.");
    let calls = m[2]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (id, name, input)) in calls.iter().zip([
        ("call_1", "read", json!({"path": "a.txt"})),
        (
            "call_2",
            "grep",
            json!({"pattern": "main", "ignoreCase": true}),
        ),
    ]) {
        assert_eq!(call["id"], id);
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let args = call["function"]["arguments"]
            .as_str()
            .unwrap_or_else(|| panic!("arguments are JSON text: {call}"));
        assert_eq!(serde_json::from_str::<Value>(args).unwrap(), input);
    }
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["tool_call_id"], "call_1");
    assert_eq!(text_of(&m[3]["content"]), "alpha\nbeta");
    assert_eq!(m[4]["role"], "tool");
    assert_eq!(m[4]["tool_call_id"], "call_2");
    assert!(
        text_of(&m[4]["content"]).contains("no such folder"),
        "{}",
        m[4]
    );

    let tools = b["tools"].as_array().unwrap();
    let want = conversation_tools();
    assert_eq!(tools.len(), want.len());
    for (t, (name, description, schema)) in tools.iter().zip(&want) {
        assert_eq!(t["type"], "function");
        let f = &t["function"];
        assert_eq!(&f["name"], name);
        assert_eq!(&f["description"], description);
        assert_eq!(&f["parameters"], schema, "{name}");
        assert!(f.get("run").is_none() && t.get("run").is_none(), "{t}");
    }
    assert!(
        b.get("max_tokens") == Some(&json!(256))
            || b.get("max_completion_tokens") == Some(&json!(256)),
        "{}",
        r.text
    );
    assert_eq!(b["temperature"], json!(0.5));
    assert!(
        b["stop"] == json!(["END"]) || b["stop"] == json!("END"),
        "{}",
        r.text
    );
    assert_eq!(b["tool_choice"], "required");

    let b = &reqs[1].body;
    assert_eq!(b["model"], "small");
    let m = b["messages"].as_array().unwrap();
    assert_eq!(m.len(), 1, "no system message: {}", reqs[1].text);
    assert_eq!(m[0]["role"], "user");
    assert_eq!(text_of(&m[0]["content"]), "Say hello.");
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "lookup"}})
    );
}

#[test]
fn anthropic_gets_the_conversation_tools_and_key_as_messages_documents() {
    let ws = workspace();
    let server = ModelServer::start(vec![Anthropic.text("ok"), Anthropic.text("ok")]);
    let out = emitted(
        &ws,
        &flags(Anthropic, &server),
        &[("SLUICE_CREDENTIAL_LOCAL", KEY)],
        CONVERSATION,
    );
    assert_eq!(out.len(), 2);
    ok(&out[0]);
    ok(&out[1]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let b = &r.body;
    assert_eq!(b["model"], "big-model");
    assert_eq!(text_of(&b["system"]), "You are terse.");

    let m = b["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", r.text));
    assert_eq!(
        m.len(),
        3,
        "user, assistant, and one user turn holding both results: {}",
        r.text
    );
    assert_eq!(m[0]["role"], "user");
    assert_eq!(text_of(&m[0]["content"]), "Read a.txt and find main.");
    assert_eq!(
        m[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "call_2", "name": "grep", "input": {"pattern": "main", "ignoreCase": true}},
        ]})
    );
    assert_eq!(m[2]["role"], "user");
    let results = m[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{}", m[2]);
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "call_1");
    assert_eq!(text_of(&results[0]["content"]), "alpha\nbeta");
    assert_ne!(results[0]["is_error"], json!(true));
    assert_eq!(results[1]["type"], "tool_result");
    assert_eq!(results[1]["tool_use_id"], "call_2");
    assert_eq!(text_of(&results[1]["content"]), "no such folder");
    assert_eq!(results[1]["is_error"], json!(true));

    let tools = b["tools"].as_array().unwrap();
    let want = conversation_tools();
    assert_eq!(tools.len(), want.len());
    for (t, (name, description, schema)) in tools.iter().zip(&want) {
        assert_eq!(&t["name"], name);
        assert_eq!(&t["description"], description);
        assert_eq!(&t["input_schema"], schema, "{name}");
        assert!(t.get("run").is_none(), "{t}");
    }
    assert_eq!(b["max_tokens"], json!(256));
    assert_eq!(b["temperature"], json!(0.5));
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert_eq!(b["tool_choice"], json!({"type": "any"}));

    let b = &reqs[1].body;
    assert_eq!(b["model"], "small");
    assert!(
        b.get("system").is_none_or(|s| text_of(s).is_empty()),
        "no system prompt: {}",
        reqs[1].text
    );
    assert!(
        b["max_tokens"].as_u64().is_some_and(|n| n > 0),
        "Anthropic requires max_tokens: {}",
        reqs[1].text
    );
    let m = b["messages"].as_array().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(text_of(&m[0]["content"]), "Say hello.");
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "lookup"}));
}

/// Lua: a user turn of text and two images (a data URL, an https URL),
/// and a structured-output schema.
const PARTS: &str = r#"
model{provider = "local", model = "m",
  jsonSchema = {type = "object", properties = {answer = {type = "string"}}, required = {"answer"}},
  messages = {{role = "user", content = {
    {type = "text", text = "What is this?"},
    {type = "image", url = "data:image/png;base64,iVBORw0KGgo="},
    {type = "image", url = "https://example.com/cat.jpg"},
  }}}}
"#;

fn answer_schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
}

#[test]
fn openai_gets_image_parts_and_a_json_schema_as_documented() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text(r#"{"answer": "a cat"}"#)]);
    let out = emitted(&ws, &flags(OpenAi, &server), &[], PARTS);
    assert_eq!(ok(&out[0])["text"], r#"{"answer": "a cat"}"#);
    let b = &server.requests()[0].body;
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        ]}])
    );
    let format = &b["response_format"];
    assert_eq!(format["type"], "json_schema", "{b}");
    assert!(
        format["json_schema"]["name"].is_string(),
        "a name is required: {b}"
    );
    assert_eq!(format["json_schema"]["schema"], answer_schema());
}

#[test]
fn anthropic_gets_image_parts_and_a_json_schema_as_documented() {
    let ws = workspace();
    let server = ModelServer::start(vec![Anthropic.text(r#"{"answer": "a cat"}"#)]);
    let out = emitted(&ws, &flags(Anthropic, &server), &[], PARTS);
    assert_eq!(ok(&out[0])["text"], r#"{"answer": "a cat"}"#);
    let b = &server.requests()[0].body;
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        ]}])
    );
    assert_eq!(
        b["output_config"]["format"],
        json!({"type": "json_schema", "schema": answer_schema()}),
        "{b}"
    );
}

fn no_credential_sends_no_key(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![api.text("ok")]);
    ok(&emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    )[0]);
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("x-api-key"), None);
}

#[test]
fn openai_without_a_credential_sends_no_key() {
    no_credential_sends_no_key(OpenAi);
}

#[test]
fn anthropic_without_a_credential_sends_no_key() {
    no_credential_sends_no_key(Anthropic);
}

// ---- 4. errors and retries ----

fn a_429_is_retried_after_the_wait_it_asks_for(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![
        api.error(429, "Rate limit reached")
            .header("retry-after", "1"),
        api.text("Finally."),
    ]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let (got, latency, _) = timings(&ok(&out[0]));
    assert_eq!(got, text_output("Finally."));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "one retry");
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= ms(1000), "retry-after: 1 waits a second: {gap:?}");
    assert!(latency >= 1000, "the wait is in latencyMs: {latency}");
    assert_eq!(reqs[0].body, reqs[1].body, "the same request again");
}

#[test]
fn openai_429_then_success() {
    a_429_is_retried_after_the_wait_it_asks_for(OpenAi);
}

#[test]
fn anthropic_429_then_success() {
    a_429_is_retried_after_the_wait_it_asks_for(Anthropic);
}

fn a_429_past_the_timeout_is_rate_limited_with_the_providers_message(api: Api) {
    let ws = workspace();
    let server = ModelServer::respond(move |_| api.error(429, "Rate limit reached for m in org-x"));
    // No retry-after: 0.5 s, then 1 s, which 1.2 s leaves no room for.
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, timeoutMs = 1200}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "rate_limited", "{e}");
    assert_eq!(e["status"], 429, "{e}");
    assert_eq!(e["provider"], "local", "{e}");
    assert_eq!(e["attempts"], 2, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("model provider `local` is limiting requests (HTTP 429"),
        "{msg}"
    );
    assert!(msg.contains("Rate limit reached for m in org-x"), "{msg}");
    assert!(msg.contains("gave up after 2 attempts"), "{msg}");
    assert_eq!(server.count(), 2);
}

#[test]
fn openai_429_forever_is_rate_limited() {
    a_429_past_the_timeout_is_rate_limited_with_the_providers_message(OpenAi);
}

#[test]
fn anthropic_429_forever_is_rate_limited() {
    a_429_past_the_timeout_is_rate_limited_with_the_providers_message(Anthropic);
}

fn server_errors_are_retried_then_provider_unavailable(api: Api) {
    let ws = workspace();
    // A short asked wait, so the five attempts run out before the timeout.
    let server = ModelServer::respond(move |r| {
        let a = if r.n == 1 {
            api.error(500, "The server had an error")
        } else {
            api.error(503, "Service temporarily unavailable")
        };
        match api {
            OpenAi => a.header("retry-after-ms", "20"),
            Anthropic => a.header("retry-after", "0"),
        }
    });
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, timeoutMs = 5000}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "provider_unavailable", "{e}");
    assert_eq!(e["status"], 503, "{e}");
    assert_eq!(e["attempts"], 5, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("model provider `local` is unavailable (HTTP 503"),
        "{msg}"
    );
    assert!(msg.contains("Service temporarily unavailable"), "{msg}");
    assert!(msg.ends_with("; gave up after 5 attempts"), "{msg}");
    assert_eq!(server.count(), 5);
}

#[test]
fn openai_500_and_503_are_retried_then_unavailable() {
    server_errors_are_retried_then_provider_unavailable(OpenAi);
}

#[test]
fn anthropic_500_and_503_are_retried_then_unavailable() {
    server_errors_are_retried_then_provider_unavailable(Anthropic);
}

#[test]
fn anthropic_529_overloaded_is_retried() {
    let ws = workspace();
    let server = ModelServer::start(vec![anthropic_overloaded(), Anthropic.text("Recovered.")]);
    let out = emitted(
        &ws,
        &flags(Anthropic, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let (got, latency, _) = timings(&ok(&out[0]));
    assert_eq!(got, text_output("Recovered."));
    assert_eq!(server.count(), 2);
    let reqs = server.requests();
    assert!(
        reqs[1].at - reqs[0].at >= ms(500),
        "no retry-after: the first backoff is 0.5 s"
    );
    assert!(latency >= 500);
}

#[test]
fn anthropic_error_event_before_any_text_is_retried() {
    let ws = workspace();
    let mut broken = anthropic_stream_start();
    broken.push(anthropic_error_event("overloaded_error", "Overloaded"));
    let server = ModelServer::start(vec![
        Answer::sse(broken),
        Anthropic.stream_text(&["Second ", "time."]),
    ]);
    let out = emitted(
        &ws,
        &flags(Anthropic, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello, onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    let (got, latency, first_token) = timings(&ok(&out[0]));
    assert_eq!(got, text_output("Second time."));
    assert_eq!(out[1], json!(["Second ", "time."]));
    assert_eq!(server.count(), 2);
    let reqs = server.requests();
    assert!(
        reqs[1].at - reqs[0].at >= ms(500),
        "the first backoff is 0.5 s"
    );
    assert!(
        first_token >= 500 && latency >= first_token,
        "the first text is the second attempt's, not the failed one's first bytes: {first_token}"
    );
}

#[test]
fn anthropic_error_event_after_text_is_an_error_carrying_the_text() {
    let ws = workspace();
    let mut events = anthropic_stream_text(&["Partial ", "answer", " never ends"]);
    // message_start, ping, block start, two pieces, then the error.
    events.truncate(5);
    events.push(anthropic_error_event("overloaded_error", "Overloaded"));
    let server = ModelServer::start(vec![Answer::sse(events)]);
    let out = emitted(
        &ws,
        &flags(Anthropic, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello, onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "provider_unavailable", "{e}");
    assert_eq!(e["text"], "Partial answer", "{e}");
    assert_eq!(e["provider"], "local", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("overloaded_error: Overloaded"),
        "{e}"
    );
    assert_eq!(out[1], json!(["Partial ", "answer"]));
    assert_eq!(server.count(), 1, "text was shown: never retried");
}

fn a_stream_cut_mid_way_fails_with_the_text_so_far(api: Api) {
    let ws = workspace();
    let cut = api
        .stream_text(&["Hello", " wor", "ld."])
        .cut_after(api.first_piece() + 2);
    let server = ModelServer::start(vec![cut]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
local pieces = {}
model{provider = "local", model = "m", messages = hello, onText = function(p) pieces[#pieces + 1] = p end}
emit(pieces)
"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "request_failed", "{e}");
    assert_eq!(e["text"], "Hello wor", "{e}");
    assert_eq!(e["provider"], "local", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("model provider `local` cut the stream short after 9 bytes of text: "),
        "{e}"
    );
    assert_eq!(out[1], json!(["Hello", " wor"]));
    assert_eq!(server.count(), 1);
}

fn a_stream_that_ends_before_its_end_marker_fails_with_the_text_so_far(api: Api) {
    let ws = workspace();
    let mut short = api.stream_text(&["Hello", " wor", "ld."]);
    // The body ends properly (its last chunk sent), but before the finish
    // reason and `[DONE]`, or `message_delta` and `message_stop`.
    short.events_mut().truncate(api.first_piece() + 2);
    let server = ModelServer::start(vec![short]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, stream = true}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "request_failed", "{e}");
    assert_eq!(e["text"], "Hello wor", "{e}");
    assert_eq!(server.count(), 1);
}

#[test]
fn openai_stream_ending_early() {
    a_stream_that_ends_before_its_end_marker_fails_with_the_text_so_far(OpenAi);
}

#[test]
fn anthropic_stream_ending_early() {
    a_stream_that_ends_before_its_end_marker_fails_with_the_text_so_far(Anthropic);
}

#[test]
fn a_stream_past_16_mib_is_stopped_with_the_text_so_far() {
    let ws = workspace();
    let piece = "x".repeat(1 << 20);
    let pieces: Vec<&str> = (0..17).map(|_| piece.as_str()).collect();
    let server = ModelServer::start(vec![OpenAi.stream_text(&pieces)]);
    let out = emitted(
        &ws,
        &[flags(OpenAi, &server), vec!["--no-audit".into()]].concat(),
        &[],
        r#"
local r, e = sluice.model{provider = "local", model = "m", messages = hello, stream = true}
emit({code = e.code, message = e.message, n = #e.text, xs = not e.text:find("[^x]")})
"#,
    );
    let e = &out[0];
    assert_eq!(e["code"], "response_too_large", "{e}");
    assert_eq!(
        e["message"],
        "the stream from local passed 16 MiB; the call was stopped"
    );
    let n = e["n"].as_u64().unwrap();
    assert!(
        (14 << 20..=16 << 20).contains(&n),
        "the text received before the limit: {n}"
    );
    assert_eq!(e["xs"], true);
}

#[test]
fn a_stream_event_past_the_parsers_line_bound_fails_the_stream() {
    let ws = workspace();
    // One data line of 9 MiB: past the 8 MiB a line may keep, under the
    // 16 MiB a stream may carry. Cut to 8 MiB it is no longer what the
    // server sent, so the stream fails rather than go on from it.
    let piece = "y".repeat(9 << 20);
    let mut answer = OpenAi.stream_text(&["Start. ", &piece]);
    // The big event comes apart from the first, as a provider sends them.
    let events = answer.events_mut();
    events[2] = events[2].clone().after(ms(50));
    let server = ModelServer::start(vec![answer]);
    let out = emitted(
        &ws,
        &[flags(OpenAi, &server), vec!["--no-audit".into()]].concat(),
        &[],
        r#"
local r, e = sluice.model{provider = "local", model = "m", messages = hello, stream = true}
emit(r and {ok = #r.text} or {code = e.code, message = e.message, text = e.text})
"#,
    );
    let e = &out[0];
    assert_eq!(
        (&e["code"], &e["message"], &e["text"]),
        (
            &json!("response_too_large"),
            &json!("model provider `local` sent a stream event over 8 MiB; the call was stopped"),
            &json!("Start. ")
        ),
        "{e}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn openai_stream_cut_mid_way() {
    a_stream_cut_mid_way_fails_with_the_text_so_far(OpenAi);
}

#[test]
fn anthropic_stream_cut_mid_way() {
    a_stream_cut_mid_way_fails_with_the_text_so_far(Anthropic);
}

fn a_slow_first_token_past_the_timeout_is_timeout(api: Api) {
    let ws = workspace();
    let mut stalls = api.stream_text(&["First", " then nothing"]);
    let at = api.first_piece() + 1;
    let events = stalls.events_mut();
    events[at] = events[at].clone().after(Duration::from_secs(5));
    let server = ModelServer::start(vec![
        api.stream_text(&["never"]).delay(Duration::from_secs(5)),
        stalls,
    ]);
    let started = Instant::now();
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"
model{provider = "local", model = "m", messages = hello, stream = true, timeoutMs = 300}
model{provider = "local", model = "m", messages = hello, stream = true, timeoutMs = 500}
"#,
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the calls ended at their deadlines, not the server's: {:?}",
        started.elapsed()
    );
    assert_eq!(
        err(&out[0]),
        json!({"code": "timeout", "provider": "local", "text": "",
               "message": "model provider `local` gave no whole reply within 0.3 s; raise `timeoutMs`"})
    );
    assert_eq!(
        err(&out[1]),
        json!({"code": "timeout", "provider": "local", "text": "First",
               "message": "model provider `local` gave no whole reply within 0.5 s; raise `timeoutMs`"})
    );
    assert_eq!(server.count(), 2);
}

#[test]
fn openai_slow_first_token_is_timeout() {
    a_slow_first_token_past_the_timeout_is_timeout(OpenAi);
}

#[test]
fn anthropic_slow_first_token_is_timeout() {
    a_slow_first_token_past_the_timeout_is_timeout(Anthropic);
}

fn a_401_names_the_credential_and_is_not_retried(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![api.error(401, "Incorrect API key provided")]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[("SLUICE_CREDENTIAL_LOCAL", "sk-wrong")],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "provider_unavailable", "{e}");
    assert_eq!(e["status"], 401, "{e}");
    assert_eq!(e["attempts"], 1, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("model provider `local` refused the request (HTTP 401"),
        "{msg}"
    );
    assert!(msg.contains("Incorrect API key provided"), "{msg}");
    assert!(
        msg.ends_with("; its key is credential `local`: check it"),
        "{msg}"
    );
    assert_eq!(server.count(), 1, "a refused key is not retried");

    // Without the credential set, no key was sent, and the error says so.
    let server = ModelServer::start(vec![api.error(401, "Missing API key")]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let msg = err(&out[0])["message"].as_str().unwrap().to_string();
    assert!(
        msg.ends_with("; no key was sent: set credential `local`"),
        "{msg}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn openai_401_is_not_retried() {
    a_401_names_the_credential_and_is_not_retried(OpenAi);
}

#[test]
fn anthropic_401_is_not_retried() {
    a_401_names_the_credential_and_is_not_retried(Anthropic);
}

fn a_400_is_request_failed_with_the_providers_message(api: Api) {
    let ws = workspace();
    let message = "Invalid value for 'temperature': must be at most 1.";
    let server = ModelServer::start(vec![api.error(400, message)]);
    let out = emitted(
        &ws,
        &flags(api, &server),
        &[],
        r#"model{provider = "local", model = "m", messages = hello, temperature = 1.5}"#,
    );
    let e = err(&out[0]);
    assert_eq!(e["code"], "request_failed", "{e}");
    assert_eq!(e["status"], 400, "{e}");
    assert_eq!(
        e["message"],
        format!("model provider `local` refused the request (HTTP 400: invalid_request_error: {message})"),
        "{e}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn openai_400_is_request_failed() {
    a_400_is_request_failed_with_the_providers_message(OpenAi);
}

#[test]
fn anthropic_400_is_request_failed() {
    a_400_is_request_failed_with_the_providers_message(Anthropic);
}

// ---- 5. the policy's say ----

#[test]
fn an_unapproved_model_call_needs_approval_and_reaches_no_server() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text("never")]);
    let grant_net_only = vec![
        "--provider".into(),
        format!("local=openai:{}", server.url()),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
    ];
    let out = emitted(
        &ws,
        &grant_net_only,
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    assert_eq!(err(&out[0]), required("model:call:local/m"));
    assert_eq!(server.count(), 0);
}

#[test]
fn a_private_endpoint_needs_its_exact_net_private_grant() {
    let ws = workspace();
    let server = ModelServer::start(vec![Anthropic.text("never")]);
    let no_net = vec![
        "--provider".into(),
        format!("local=anthropic:{}", server.url()),
        "--approve".into(),
        "model:call:local/**".into(),
        // A wildcard approves the network's other actions, never a private origin.
        "--approve".into(),
        "net:*".into(),
    ];
    let out = emitted(
        &ws,
        &no_net,
        &[],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    assert_eq!(
        err(&out[0]),
        required(&format!("net:private:{}", server.origin()))
    );
    assert_eq!(server.count(), 0, "a refused endpoint is never contacted");
}

#[test]
fn a_policy_denying_one_model_refuses_it_and_allows_the_rest() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text("small is fine")]);
    let pol = common::policy(
        &ws,
        "deny-big.lua",
        &format!(
            r#"local p = require("sluice.policy")
return {{
  rules = {{
    p.deny("model:call:local/big-model", "too costly"),
    p.allow "model:call:local/**",
    p.allow "net:private:{}",
  }},
  otherwise = "deny",
}}
"#,
            server.origin()
        ),
    );
    let f = vec![
        "--policy".into(),
        pol.clone(),
        "--provider".into(),
        format!("local=openai:{}", server.url()),
    ];
    let out = emitted(
        &ws,
        &f,
        &[],
        r#"
model{provider = "local", model = "big-model", messages = hello}
model{provider = "local", model = "small-model", messages = hello}
"#,
    );
    assert_eq!(
        err(&out[0]),
        denied(
            "model:call:local/big-model",
            &format!("deny \"model:call:local/big-model\" (rules[1] of {pol})"),
            "too costly"
        )
    );
    assert_eq!(ok(&out[1])["text"], "small is fine");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "the denied call reached no server");
    assert_eq!(reqs[0].body["model"], "small-model");
}

/// A policy declaring provider `local` at `server` with `credential`,
/// allowing its models and its origin.
fn declaring(ws: &Workspace, api: Api, server: &ModelServer, credential: &str) -> String {
    common::policy(
        ws,
        &format!("providers-{credential}.lua"),
        &format!(
            r#"local p = require("sluice.policy")
return {{
  providers = {{
    -- `local` is a Lua keyword: the name is written as a string key.
    ["local"] = {{ api = "{api}", url = "{url}", credential = "{credential}" }},
  }},
  rules = {{
    p.allow "model:call:local/**",
    p.allow "net:private:{origin}",
  }},
  otherwise = "deny",
}}
"#,
            api = api.name(),
            url = server.url(),
            origin = server.origin()
        ),
    )
}

fn a_provider_declared_in_a_policy_works_with_its_credential(api: Api) {
    let ws = workspace();
    let server = ModelServer::start(vec![api.text("declared")]);
    let pol = declaring(&ws, api, &server, "local");
    let out = emitted(
        &ws,
        &["--policy".into(), pol.clone()],
        &[("SLUICE_CREDENTIAL_LOCAL", KEY)],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let (got, _, _) = timings(&ok(&out[0]));
    assert_eq!(got, text_output("declared"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, api.path());
    let (name, value) = api.key_header(KEY);
    assert_eq!(reqs[0].header(name), Some(value.as_str()));

    // Declared twice, by the policy and by --provider: the run does not start.
    let twice = sluice(
        &ws,
        &[
            "--policy".into(),
            pol,
            "--provider".into(),
            format!("local=openai:{}", server.url()),
        ],
        &[],
        "print('started')",
    );
    assert_ne!(twice.code, 0);
    assert!(!twice.stdout.contains("started"));
    assert!(
        twice
            .stderr
            .contains("provider \"local\" is declared twice (again by --provider)"),
        "{}",
        twice.stderr
    );
}

#[test]
fn openai_provider_declared_in_a_policy() {
    a_provider_declared_in_a_policy_works_with_its_credential(OpenAi);
}

#[test]
fn anthropic_provider_declared_in_a_policy() {
    a_provider_declared_in_a_policy_works_with_its_credential(Anthropic);
}

#[test]
fn a_declared_credential_that_is_not_set_is_provider_unavailable_naming_it() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text("never")]);
    let pol = declaring(&ws, OpenAi, &server, "local-key");
    let out = emitted(
        &ws,
        &["--policy".into(), pol],
        &[("SLUICE_CREDENTIAL_LOCAL", KEY)],
        r#"model{provider = "local", model = "m", messages = hello}"#,
    );
    let file = nowhere(&ws);
    assert_eq!(
        err(&out[0]),
        json!({
            "code": "provider_unavailable",
            "message": format!(
                "model provider `local` ({}) needs credential `local-key`, which is not set; \
                 set SLUICE_CREDENTIAL_LOCAL_KEY in sluice's environment, or add the line \
                 `local-key = YOUR_KEY` to {file} (chmod 600)",
                server.url()
            ),
            "credential": "local-key",
            "env": "SLUICE_CREDENTIAL_LOCAL_KEY",
            "file": file,
        })
    );
    assert_eq!(server.count(), 0);
}

#[test]
fn model_names_with_slashes_and_colons_are_capabilities_and_sent_as_given() {
    let ws = workspace();
    let server = ModelServer::start(vec![OpenAi.text("a"), OpenAi.text("b")]);
    let f = vec![
        "--provider".into(),
        format!("local=openai:{}", server.url()),
        "--approve".into(),
        "model:call:local/meta-llama/**".into(),
        "--approve".into(),
        "model:call:local/llama3.1:8b".into(),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
    ];
    let out = emitted(
        &ws,
        &f,
        &[],
        r#"
model{provider = "local", model = "meta-llama/Llama-3.1-8B-Instruct", messages = hello}
model{provider = "local", model = "llama3.1:8b", messages = hello}
model{provider = "local", model = "llama3.1:70b", messages = hello}
"#,
    );
    assert_eq!(ok(&out[0])["text"], "a");
    assert_eq!(ok(&out[1])["text"], "b");
    assert_eq!(err(&out[2]), required("model:call:local/llama3.1:70b"));
    let models: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        [
            json!("meta-llama/Llama-3.1-8B-Instruct"),
            json!("llama3.1:8b")
        ]
    );
}

// ---- 6. the key never leaks ----

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn the_key_never_reaches_an_error_or_the_record(api: Api, store: &Store) {
    let ws = workspace();
    // A provider that echoes the key it got: in a refusal, in an error
    // status, in its reply's text, and in a stream it then cuts.
    let server = ModelServer::respond(move |r| {
        let key = r
            .header("authorization")
            .map(|h| h.trim_start_matches("Bearer ").to_string())
            .or_else(|| r.header("x-api-key").map(String::from))
            .unwrap_or_default();
        match r.n {
            1 => api.error(401, &format!("Incorrect API key provided: {key}.")),
            2 => api.error(400, &format!("Bad request from key {key}")),
            3 => api.text(&format!("Your key is {key}.")),
            _ => api
                .stream_text(&["key ", &key, " and more"])
                .cut_after(api.first_piece() + 2),
        }
    });
    let run = sluice(
        &ws,
        &flags(api, &server),
        &[("SLUICE_CREDENTIAL_LOCAL", KEY)],
        r#"
for i = 1, 2 do
  local r, e = sluice.model{provider = "local", model = "m", messages = hello}
  emit(e)
end
local r = assert(sluice.model{provider = "local", model = "m", messages = hello})
emit({length = #r.text})
local r, e = sluice.model{provider = "local", model = "m", messages = hello, stream = true}
emit(e)
"#,
    );
    let (name, value) = api.key_header(KEY);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(reqs.iter().all(|r| r.header(name) == Some(value.as_str())));

    assert!(!run.stdout.contains(KEY), "{}", run.stdout);
    assert!(!run.stderr.contains(KEY), "{}", run.stderr);
    let out = lines(run);
    assert_eq!(out[0]["code"], "provider_unavailable", "{}", out[0]);
    assert!(
        out[0]["message"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key provided: [redacted]."),
        "{}",
        out[0]
    );
    assert_eq!(out[1]["code"], "request_failed", "{}", out[1]);
    assert!(
        out[1]["message"]
            .as_str()
            .unwrap()
            .contains("Bad request from key [redacted]"),
        "{}",
        out[1]
    );
    // A reply that carries the key hands the script none of it.
    assert_eq!(out[2], json!({"length": "Your key is [redacted].".len()}));
    assert_eq!(out[3]["code"], "request_failed", "{}", out[3]);
    assert_eq!(out[3]["text"], "key [redacted]", "{}", out[3]);

    if store.kind == Kind::Postgres {
        // The record's every row as text: the calls are there, the key not.
        let bytes = store.bytes(ws.path());
        let holds = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(holds("model:call:local/m"), "the dump holds no model call");
        assert!(!holds(KEY), "the PostgreSQL record holds the key");
        return;
    }
    let store = ws.file(".sluice");
    let files = files_under(&store);
    assert!(files.iter().any(|f| f.ends_with("audit.db")), "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "{} holds the key",
            f.display()
        );
    }
}

both_stores! {
    fn openai_key_never_leaks(store) {
        the_key_never_reaches_an_error_or_the_record(OpenAi, store);
    }

    fn anthropic_key_never_leaks(store) {
        the_key_never_reaches_an_error_or_the_record(Anthropic, store);
    }
}

// ---- 7. invalid input ----

#[test]
fn invalid_input_is_refused_before_any_request() {
    let ws = workspace();
    let server = ModelServer::start(vec![]);
    let out = emitted(
        &ws,
        &[flags(OpenAi, &server), vec!["--no-audit".to_string()]].concat(),
        &[],
        r#"
model{provider = "nope", model = "m", messages = hello}
model{provider = "local", model = "m", messages = {
  {role = "user", content = "hi"},
  {role = "tool", content = "a result of nothing"},
}}
model{provider = "local", model = "m", messages = hello,
      tools = {{name = "read file", description = "x", input = {type = "object"}}}}
model{provider = "local", model = "m", messages = {}}
model{provider = "local", model = "m", messages = hello, toolChoice = "lookup"}
"#,
    );
    assert_eq!(
        err(&out[0]),
        json!({
            "code": "provider_unavailable",
            "message": "no model provider is named \"nope\" (the declared ones are local); the operator \
                        declares providers in a policy (`providers = { [\"nope\"] = { api = \"openai\", url = \
                        \"http://127.0.0.1:8080/v1\" } }`) or with `sluice run --provider nope=openai:URL`",
            "field": "provider",
            "provider": "nope",
        })
    );
    assert_eq!(
        err(&out[1]),
        json!({
            "code": "invalid_input",
            "field": "messages[2].toolCallId",
            "message": "messages[2].role is a tool result without the id of the call it answers; set toolCallId",
        })
    );
    assert_eq!(
        err(&out[2]),
        json!({
            "code": "invalid_input",
            "field": "tools[1].name",
            "message": "tool name \"read file\" is not 1 to 64 letters, digits, `_` or `-`, which both protocols require",
        })
    );
    assert_eq!(
        err(&out[3]),
        json!({
            "code": "invalid_input",
            "field": "messages",
            "message": "messages is empty; give at least one, e.g. messages = {{role = \"user\", content = \"...\"}}",
        })
    );
    assert_eq!(
        err(&out[4]),
        json!({
            "code": "invalid_input",
            "field": "toolChoice",
            "message": "toolChoice is \"lookup\"; it is \"auto\", \"none\", \"required\" or the name of one of `tools`",
        })
    );
    assert_eq!(server.count(), 0);
}

// ---- 8. replay ----

fn a_recorded_run_replays_without_the_server(api: Api) {
    let ws = workspace();
    let mut server = ModelServer::start(vec![
        api.tools(vec![("call_r1", "read", json!({"path": "a.txt"}))]),
        api.stream_text(&["It says ", "alpha."]),
    ]);
    let script = format!(
        "{EMIT}{PRELUDE}{}",
        r#"
local first = model{provider = "local", model = "m", messages = hello, tools = sluice.tools{"read"}}
local call = first.toolCalls[1]
-- Live, onText gets the pieces; replayed, the recorded text at once:
-- joined, the script sees the same either way.
local pieces = {}
local second = model{provider = "local", model = "m", tools = sluice.tools{"read"}, messages = {
  hello[1],
  {role = "assistant", toolCalls = first.toolCalls},
  {role = "tool", toolCallId = call.id, content = "alpha"},
}, onText = function(p) pieces[#pieces + 1] = p end}
print(second.text, call.name, call.input.path, table.concat(pieces))
"#
    );
    let path = script_file(ws.path(), &script);
    let mut all = flags(api, &server);
    let creds = nowhere(&ws);
    all.extend(["--credentials".to_string(), creds]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let first = common::run_script_with(ws.path(), &path, &all, &[]).ok();
    let out: Vec<&str> = first.stdout.lines().collect();
    assert_eq!(out.len(), 3, "{}", first.stdout);
    assert_eq!(out[2], "It says alpha.\tread\ta.txt\tIt says alpha.");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    if api == Anthropic {
        // An assistant turn with no text has no (empty, refused) text block.
        assert_eq!(
            reqs[1].body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_r1", "name": "read", "input": {"path": "a.txt"}}
            ]}),
            "{}",
            reqs[1].text
        );
    }

    let calls = exported_calls(ws.path());
    let models: Vec<&Value> = calls.iter().filter(|c| c["flow"] == "model").collect();
    assert_eq!(models.len(), 2, "{calls:?}");
    for (c, line) in models.iter().zip(&out) {
        assert_eq!(c["tier"], "sealed");
        assert_eq!(c["status"], "ok");
        assert_eq!(c["capabilities"], json!(["model:call:local/m"]));
        let emitted: Value = serde_json::from_str(line).unwrap();
        assert_eq!(c["output"], emitted["ok"], "the record holds the output");
    }

    server.stop();
    let id = sluice_in(ws.path(), &["audit", "export", "last"])
        .stdout
        .lines()
        .next()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .unwrap();
    let replay = sluice_in(ws.path(), &["replay", &id]);
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert_eq!(
        replay.stdout, first.stdout,
        "the script saw the recorded replies"
    );
    assert!(replay.stderr.contains("reproduced"), "{}", replay.stderr);
}

both_stores! {
    fn openai_run_replays(store) {
        a_recorded_run_replays_without_the_server(OpenAi);
    }

    fn anthropic_run_replays(store) {
        a_recorded_run_replays_without_the_server(Anthropic);
    }
}

// ---- 9. a conversation's record ----

/// An agent loop of six turns, each sending the whole conversation so far
/// and appending the reply and the next question: each message is kept
/// once in the record however many turns send it, every turn's input
/// reads back whole, an edit of one kept message fails `verify` at the
/// first call that sent it, and the run replays without the server.
fn a_conversation_keeps_each_message_once_and_reads_back_whole(api: Api) {
    let ws = workspace();
    let replies: Vec<String> = (1..=6).map(|i| format!("Reply {i}.")).collect();
    let mut server = ModelServer::start(replies.iter().map(|r| api.text(r)).collect());
    let script = format!(
        "{EMIT}{}",
        r#"
local messages = {{role = "user", content = "Question 1?"}}
for i = 1, 6 do
  local r = assert(sluice.model{provider = "local", model = "m", messages = messages})
  messages[#messages + 1] = {role = "assistant", content = r.text}
  messages[#messages + 1] = {role = "user", content = "Question " .. (i + 1) .. "?"}
end
print(#messages, messages[#messages - 1].content)
"#
    );
    let path = script_file(ws.path(), &script);
    let mut all = flags(api, &server);
    all.extend(["--credentials".to_string(), nowhere(&ws)]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let first = common::run_script_with(ws.path(), &path, &all, &[]).ok();
    assert_eq!(first.stdout, "13\tReply 6.\n");
    assert_eq!(server.count(), 6);

    // Turn k sent 2k - 1 messages, and the record gives each back whole.
    let sent = |k: usize| -> Value {
        let mut m = vec![json!({"role": "user", "content": "Question 1?"})];
        for i in 1..k {
            m.push(json!({"role": "assistant", "content": format!("Reply {i}.")}));
            m.push(json!({"role": "user", "content": format!("Question {}?", i + 1)}));
        }
        Value::Array(m)
    };
    let calls = exported_calls(ws.path());
    assert_eq!(calls.len(), 6, "{calls:?}");
    for (k, c) in calls.iter().enumerate() {
        assert_eq!(c["flow"], "model");
        assert_eq!(c["input"]["messages"], sent(k + 1), "turn {}", k + 1);
        assert_eq!(c["output"]["text"], replies[k]);
    }
    // 11 distinct messages were sent, 36 in all: each is kept once (beside
    // the script's text, which the record keeps too).
    let db = Store::current().db(ws.path());
    let kept: i64 = common::stores::one(
        &*db,
        "SELECT count(*) FROM outputs WHERE sha256 NOT IN \
         (SELECT script_sha256 FROM runs WHERE script_sha256 IS NOT NULL)",
        &[],
    );
    assert_eq!(kept, 11);
    let ok = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);

    server.stop();
    let replay = sluice_in(ws.path(), &["replay", "last"]);
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert_eq!(replay.stdout, first.stdout);

    // The third question, first sent by turn 3, edited where it is kept.
    let edited = common::stores::exec(
        &*db,
        "UPDATE outputs SET body = replace(body, 'Question 3?', 'Question 9?') WHERE body LIKE ?1",
        &[sluice::internals::audit::db::Val::from("%Question 3?%")],
    );
    assert_eq!(edited, 1);
    let bad = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
    assert!(bad.stdout.contains("NOT INTACT at #3 "), "{}", bad.stdout);
}

both_stores! {
    fn openai_conversation_record(store) {
        a_conversation_keeps_each_message_once_and_reads_back_whole(OpenAi);
    }

    fn anthropic_conversation_record(store) {
        a_conversation_keeps_each_message_once_and_reads_back_whole(Anthropic);
    }
}
