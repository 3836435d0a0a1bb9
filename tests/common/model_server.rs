//! A scripted model provider for the tests: a real HTTP/1.1 server on
//! 127.0.0.1 (a port the system picks) that answers as OpenAI Chat
//! Completions or Anthropic Messages do, as their documentation shows.
//!
//! A test either queues [`Answer`]s ([`ModelServer::start`], one per request,
//! in order; [`ModelServer::push`] adds more) or decides per request with a
//! closure ([`ModelServer::respond`]). An answer is a JSON reply, a stream
//! of server-sent events (each with an optional pause before it, and an
//! optional cut: the connection closed after N events, the stream left
//! unfinished), or a raw error with any status and headers; any answer may
//! wait before its first byte (a slow first token).
//!
//! Every request is captured ([`ModelServer::requests`]): method, path,
//! headers (names lowercased), the body as text and as JSON, and when it
//! arrived. [`ModelServer::stop`] (or dropping the server) closes the
//! listener, so a later connection is refused.
//!
//! Each answer is sent with `connection: close`, so every request comes on
//! its own connection; a JSON or error body has a `content-length`, a
//! stream is sent with chunked transfer encoding (one chunk per event,
//! flushed), so a cut is a body that ends before its last chunk.
//!
//! The body builders (`openai_*`, `anthropic_*`) write realistic replies:
//! the ids, objects and fields the providers send, and the same token
//! counts in both protocols' terms: [`INPUT_TOKENS`] of input of which
//! [`CACHED_TOKENS`] came from the prompt cache, and [`OUTPUT_TOKENS`]
//! written, by model [`REPLY_MODEL`].
//!
//! Use it from a test file with
//! `#[path = "common/model_server.rs"] mod model_server;`.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The model every builder's reply names (a provider names the exact
/// snapshot that answered, not the alias the request asked for).
pub const REPLY_MODEL: &str = "test-model-2025-01-01";
/// Input tokens of a reply, the cached ones included.
pub const INPUT_TOKENS: u64 = 120;
/// Of [`INPUT_TOKENS`], those served from the prompt cache.
pub const CACHED_TOKENS: u64 = 100;
/// Tokens a reply wrote.
pub const OUTPUT_TOKENS: u64 = 8;

/// The longest a request's head and body may be; more is a test bug.
const MAX_REQUEST: usize = 16 << 20;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// 1 for the first request the server received, and so on.
    pub n: usize,
    /// When its head and body had arrived.
    pub at: Instant,
    pub method: String,
    /// The request target as sent: `/v1/chat/completions`.
    pub path: String,
    /// Names lowercased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy UTF-8).
    pub text: String,
    /// The body as JSON; `Value::Null` when it is not JSON.
    pub body: Value,
}

impl Request {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the request asked for a stream (`"stream": true`).
    pub fn streams(&self) -> bool {
        self.body["stream"] == json!(true)
    }
}

/// What the server sends back for one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Extra headers; `content-type` is among them when the constructor
    /// set one.
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Silence before the status line: a slow provider, a slow first token.
    pub delay: Duration,
}

/// An answer's body.
#[derive(Debug, Clone)]
pub enum Body {
    /// Bytes sent whole, with a `content-length`.
    Whole(Vec<u8>),
    /// Server-sent events, one chunk each; with `cut: Some(n)`, the
    /// connection closes after the first `n` events, without the last
    /// chunk (the stream broken mid-way). With `crlf`, lines end in
    /// `\r\n` (which the format allows); with `split`, each event goes in
    /// two chunks, cut mid-line, a pause between them.
    Events {
        events: Vec<Event>,
        cut: Option<usize>,
        crlf: bool,
        split: bool,
    },
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `event:` line, if any (Anthropic names every event; OpenAI none).
    pub name: Option<String>,
    /// The data, one `data:` line per line of it.
    pub data: String,
    /// A comment line (`: TEXT`) sent instead of the event; it dispatches
    /// nothing (a keep-alive, OpenRouter's `: OPENROUTER PROCESSING`).
    pub comment: Option<String>,
    /// Silence before this event is sent.
    pub delay: Duration,
}

impl Event {
    /// An unnamed event whose data is `value` as compact JSON (OpenAI's).
    pub fn json(value: Value) -> Event {
        Event::text(&value.to_string())
    }

    /// An unnamed event with `data` as it is (`[DONE]`).
    pub fn text(data: &str) -> Event {
        Event {
            name: None,
            data: data.to_string(),
            comment: None,
            delay: Duration::ZERO,
        }
    }

    /// A comment line, `: TEXT`, and its blank line.
    pub fn comment(text: &str) -> Event {
        Event {
            comment: Some(text.to_string()),
            ..Event::text("")
        }
    }

    /// An event named `name` with `value` as its data (Anthropic's, whose
    /// data repeats the name as its `type`).
    pub fn named(name: &str, value: Value) -> Event {
        Event {
            name: Some(name.to_string()),
            ..Event::json(value)
        }
    }

    /// This event, sent after `delay` of silence.
    pub fn after(self, delay: Duration) -> Event {
        Event { delay, ..self }
    }

    /// The event as it goes on the wire, its blank line included.
    pub fn wire(&self) -> String {
        if let Some(c) = &self.comment {
            return format!(": {c}\n\n");
        }
        let mut out = String::new();
        if let Some(name) = &self.name {
            out.push_str(&format!("event: {name}\n"));
        }
        for line in self.data.split('\n') {
            out.push_str(&format!("data: {line}\n"));
        }
        out.push('\n');
        out
    }
}

impl Answer {
    /// 200 with `body` as JSON.
    pub fn json(body: Value) -> Answer {
        Answer::raw(200, "application/json", body.to_string())
    }

    /// An error status with a JSON body (the provider's error object).
    pub fn error(status: u16, body: Value) -> Answer {
        Answer::raw(status, "application/json", body.to_string())
    }

    /// Any status, content type and bytes.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Body::Whole(body.into()),
            delay: Duration::ZERO,
        }
    }

    /// 200, `text/event-stream`, these events.
    pub fn sse(events: Vec<Event>) -> Answer {
        Answer {
            status: 200,
            headers: vec![
                (
                    "content-type".into(),
                    "text/event-stream; charset=utf-8".into(),
                ),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: Body::Events {
                events,
                cut: None,
                crlf: false,
                split: false,
            },
            delay: Duration::ZERO,
        }
    }

    /// The same answer with another status.
    pub fn status(self, status: u16) -> Answer {
        Answer { status, ..self }
    }

    /// The same answer with one more header (`retry-after`, ...).
    pub fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    /// The same answer, after `delay` of silence before its first byte.
    pub fn delay(self, delay: Duration) -> Answer {
        Answer { delay, ..self }
    }

    /// The same stream, the connection closed after its first `n` events.
    /// Panics for an answer that is not a stream.
    pub fn cut_after(mut self, n: usize) -> Answer {
        match &mut self.body {
            Body::Events { cut, .. } => *cut = Some(n),
            Body::Whole(_) => panic!("cut_after: only a stream can be cut"),
        }
        self
    }

    /// The same stream with `\r\n` line ends.
    pub fn crlf(mut self) -> Answer {
        match &mut self.body {
            Body::Events { crlf, .. } => *crlf = true,
            Body::Whole(_) => panic!("crlf: not a stream"),
        }
        self
    }

    /// The same stream, each event sent in two chunks cut mid-line (a
    /// multi-byte character may be cut too), 5 ms apart.
    pub fn split(mut self) -> Answer {
        match &mut self.body {
            Body::Events { split, .. } => *split = true,
            Body::Whole(_) => panic!("split: not a stream"),
        }
        self
    }

    /// The event stream's events (for a test that adjusts them).
    pub fn events_mut(&mut self) -> &mut Vec<Event> {
        match &mut self.body {
            Body::Events { events, .. } => events,
            Body::Whole(_) => panic!("events_mut: not a stream"),
        }
    }
}

type Responder = dyn Fn(&Request) -> Answer + Send + Sync;

struct Shared {
    requests: Mutex<Vec<Request>>,
    queue: Mutex<VecDeque<Answer>>,
    responder: Option<Box<Responder>>,
    stopping: AtomicBool,
}

/// The running server. Dropping it stops it.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl ModelServer {
    /// A server answering its requests with `answers`, in order, one each.
    /// A request beyond them gets a 418 whose error (in a shape both
    /// protocols read) says so, which no caller retries.
    pub fn start(answers: Vec<Answer>) -> ModelServer {
        ModelServer::serve(answers.into(), None)
    }

    /// A server answering every request with what `f` returns for it.
    pub fn respond(f: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> ModelServer {
        ModelServer::serve(VecDeque::new(), Some(Box::new(f)))
    }

    fn serve(queue: VecDeque<Answer>, responder: Option<Box<Responder>>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            queue: Mutex::new(queue),
            responder,
            stopping: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept = thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                thread::spawn(move || serve_one(conn, &s));
            }
            // The listener drops here: later connections are refused.
        });
        ModelServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Queues one more answer, after those already queued.
    pub fn push(&self, answer: Answer) {
        self.shared.queue.lock().unwrap().push_back(answer);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`: the origin a `net:private` grant names.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL a provider is declared
    /// with (requests go to `/v1/chat/completions` or `/v1/messages`).
    pub fn url(&self) -> String {
        format!("{}/v1", self.origin())
    }

    /// Closes the listener (a later connection is refused) and waits for
    /// the accept loop to end; answers being sent are cut at their next
    /// pause. Stopping twice does nothing.
    pub fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop, which then sees `stopping`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = accept.join();
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One connection: its request read and recorded, its answer sent, the
/// connection closed.
fn serve_one(mut conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = conn.set_nodelay(true);
    let Some(mut req) = read_request(&mut conn) else {
        return;
    };
    let answer = {
        let mut seen = shared.requests.lock().unwrap();
        req.n = seen.len() + 1;
        seen.push(req.clone());
        drop(seen);
        match &shared.responder {
            Some(f) => f(&req),
            None => shared
                .queue
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| unscripted(req.n)),
        }
    };
    let _ = send(&mut conn, &answer, &shared.stopping);
}

/// The answer to a request no test scripted.
fn unscripted(n: usize) -> Answer {
    Answer::error(
        418,
        json!({"type": "error", "error": {
            "type": "test_server_error",
            "message": format!("the test's model server has no answer scripted for request #{n}")
        }}),
    )
}

/// Sleeps `d`, in slices, unless the server stops first; whether it slept
/// it all.
fn pause(d: Duration, stopping: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    loop {
        if stopping.load(Ordering::SeqCst) {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        thread::sleep(left.min(Duration::from_millis(20)));
    }
}

fn send(conn: &mut TcpStream, a: &Answer, stopping: &AtomicBool) -> std::io::Result<()> {
    if !pause(a.delay, stopping) {
        return Ok(());
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", a.status, reason(a.status));
    for (k, v) in &a.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("connection: close\r\n");
    match &a.body {
        Body::Whole(bytes) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", bytes.len()));
            conn.write_all(head.as_bytes())?;
            conn.write_all(bytes)?;
        }
        Body::Events {
            events,
            cut,
            crlf,
            split,
        } => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            conn.write_all(head.as_bytes())?;
            conn.flush()?;
            for (i, ev) in events.iter().enumerate() {
                if cut.is_some_and(|n| i >= n) {
                    // Broken mid-way: no last chunk, the connection closed.
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                    return Ok(());
                }
                if !pause(ev.delay, stopping) {
                    return Ok(());
                }
                let mut data = ev.wire().into_bytes();
                if *crlf {
                    data = String::from_utf8(data)
                        .unwrap()
                        .replace('\n', "\r\n")
                        .into_bytes();
                }
                let halves = if *split {
                    let mid = data.len() / 2;
                    vec![&data[..mid], &data[mid..]]
                } else {
                    vec![&data[..]]
                };
                for (k, part) in halves.into_iter().enumerate() {
                    if k > 0 && !pause(ms_5(), stopping) {
                        return Ok(());
                    }
                    conn.write_all(format!("{:x}\r\n", part.len()).as_bytes())?;
                    conn.write_all(part)?;
                    conn.write_all(b"\r\n")?;
                    conn.flush()?;
                }
            }
            if cut.is_some_and(|n| n >= events.len()) {
                // Every event sent, but the stream never properly ended.
                let _ = conn.shutdown(std::net::Shutdown::Both);
                return Ok(());
            }
            conn.write_all(b"0\r\n\r\n")?;
        }
    }
    conn.flush()?;
    // Let the client read to the end before the socket goes.
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(())
}

fn ms_5() -> Duration {
    Duration::from_millis(5)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Site Overloaded",
        _ => "Scripted",
    }
}

/// Reads one request: its head, and its body by `content-length` or
/// chunked. `None` when the connection ends first (the accept loop's own
/// wake-up connection, a client that gave up).
fn read_request(conn: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_REQUEST {
            return None;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let mut rest = buf[end..].to_vec();
    let mut more = |rest: &mut Vec<u8>| -> Option<()> {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 || rest.len() > MAX_REQUEST {
            return None;
        }
        rest.extend_from_slice(&chunk[..n]);
        Some(())
    };
    let body = if find("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                more(&mut rest)?;
            };
            let size_text = String::from_utf8_lossy(&rest[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            while rest.len() < line_end + 2 + size + 2 {
                more(&mut rest)?;
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest.drain(..line_end + 2 + size + 2);
            if size == 0 {
                break body;
            }
        }
    } else {
        let len: usize = find("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while rest.len() < len {
            more(&mut rest)?;
        }
        rest.truncate(len);
        rest
    };
    let text = String::from_utf8_lossy(&body).into_owned();
    Some(Request {
        n: 0,
        at: Instant::now(),
        method,
        path,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    })
}

// ---- OpenAI Chat Completions ----

/// OpenAI's usage object: `prompt_tokens` counts the cached ones.
pub fn openai_usage() -> Value {
    json!({
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

fn openai_completion(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-test0001",
        "object": "chat.completion",
        "created": 1_735_689_600,
        "model": REPLY_MODEL,
        "system_fingerprint": "fp_test",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": openai_usage(),
        "service_tier": "default"
    })
}

/// The `sluice run` flags for provider `local` speaking OpenAI's protocol
/// at `server`, with its model calls and its private origin approved.
pub fn local_openai_flags(server: &ModelServer) -> Vec<String> {
    vec![
        "--provider".into(),
        format!("local=openai:{}", server.url()),
        "--approve".into(),
        "model:call:local/**".into(),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
    ]
}

/// A whole reply of `text`, finish reason `stop`.
pub fn openai_text(text: &str) -> Value {
    openai_completion(
        json!({"role": "assistant", "content": text, "refusal": null, "annotations": []}),
        "stop",
    )
}

/// The tool results an OpenAI-shaped request carries, in order:
/// `(toolCallId, content)`.
pub fn tool_results(req: &Request) -> Vec<(String, String)> {
    req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A whole reply calling tools, in order: `(id, name, arguments)`, the
/// arguments sent as the JSON text OpenAI sends; finish reason
/// `tool_calls`, no text.
pub fn openai_tools(calls: Vec<(&str, &str, Value)>) -> Value {
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    openai_completion(
        json!({"role": "assistant", "content": null, "tool_calls": calls, "refusal": null, "annotations": []}),
        "tool_calls",
    )
}

/// OpenAI's error body: `{"error": {message, type, param, code}}`.
pub fn openai_error(kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// One `chat.completion.chunk` with `choices`; `usage` is null, as in
/// every chunk but the last when usage is asked for.
fn openai_chunk(choices: Value) -> Event {
    Event::json(json!({
        "id": "chatcmpl-test0001",
        "object": "chat.completion.chunk",
        "created": 1_735_689_600,
        "model": REPLY_MODEL,
        "system_fingerprint": "fp_test",
        "choices": choices,
        "usage": null
    }))
}

fn openai_delta(delta: Value, finish_reason: Option<&str>) -> Event {
    openai_chunk(
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]),
    )
}

/// The stream's end: the chunk with no choices carrying the usage
/// (`stream_options.include_usage`), then `data: [DONE]`.
fn openai_stream_end() -> Vec<Event> {
    let mut usage = openai_chunk(json!([]));
    let mut v: Value = serde_json::from_str(&usage.data).unwrap();
    v["usage"] = openai_usage();
    usage.data = v.to_string();
    vec![usage, Event::text("[DONE]")]
}

/// A streamed reply of `pieces`: the role chunk (empty content), one chunk
/// per piece, the chunk with finish reason `stop`, the usage chunk,
/// `[DONE]`. The piece `i` is event `i + 1`.
pub fn openai_stream_text(pieces: &[&str]) -> Vec<Event> {
    let mut events = vec![openai_delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    for p in pieces {
        events.push(openai_delta(json!({"content": p}), None));
    }
    events.push(openai_delta(json!({}), Some("stop")));
    events.extend(openai_stream_end());
    events
}

/// A streamed reply calling tools `(id, name, argument pieces)`: the role
/// chunk, each call announced (index, id, type, name, empty arguments),
/// then the argument pieces interleaved across the calls (one piece of
/// call 0, one of call 1, ...) each naming only its call's index, the
/// chunk with finish reason `tool_calls`, the usage chunk, `[DONE]`.
pub fn openai_stream_tools(calls: Vec<(&str, &str, Vec<&str>)>) -> Vec<Event> {
    let mut events = vec![openai_delta(
        json!({"role": "assistant", "content": null, "refusal": null}),
        None,
    )];
    for (i, (id, name, _)) in calls.iter().enumerate() {
        events.push(openai_delta(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
    }
    let longest = calls.iter().map(|c| c.2.len()).max().unwrap_or(0);
    for k in 0..longest {
        for (i, (_, _, pieces)) in calls.iter().enumerate() {
            if let Some(p) = pieces.get(k) {
                events.push(openai_delta(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                    None,
                ));
            }
        }
    }
    events.push(openai_delta(json!({}), Some("tool_calls")));
    events.extend(openai_stream_end());
    events
}

// ---- Anthropic Messages ----

/// Anthropic's usage object: `input_tokens` does not count the cached ones,
/// which are `cache_read_input_tokens`.
pub fn anthropic_usage() -> Value {
    json!({
        "input_tokens": INPUT_TOKENS - CACHED_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": CACHED_TOKENS,
        "output_tokens": OUTPUT_TOKENS,
        "service_tier": "standard"
    })
}

fn anthropic_message(content: Vec<Value>, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01TestReply",
        "type": "message",
        "role": "assistant",
        "model": REPLY_MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": anthropic_usage()
    })
}

/// A whole reply of `text`, stop reason `end_turn`.
pub fn anthropic_text(text: &str) -> Value {
    anthropic_message(vec![json!({"type": "text", "text": text})], "end_turn")
}

/// A whole reply calling tools `(id, name, input)`, stop reason `tool_use`.
pub fn anthropic_tools(calls: Vec<(&str, &str, Value)>) -> Value {
    anthropic_text_and_tools("", calls)
}

/// A whole reply with a text block (unless `text` is empty) then tool_use
/// blocks, as Claude writes "I'll look." before its calls.
pub fn anthropic_text_and_tools(text: &str, calls: Vec<(&str, &str, Value)>) -> Value {
    let mut content = vec![];
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, input) in calls {
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    anthropic_message(content, "tool_use")
}

/// Anthropic's error body (and `error` event data): `{"type": "error",
/// "error": {type, message}}`.
pub fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// 529, Anthropic's "overloaded".
pub fn anthropic_overloaded() -> Answer {
    Answer::error(529, anthropic_error("overloaded_error", "Overloaded"))
}

/// An `error` event, as Anthropic sends mid-stream.
pub fn anthropic_error_event(kind: &str, message: &str) -> Event {
    Event::named("error", anthropic_error(kind, message))
}

/// `message_start` (usage so far: the input, one output token), then a
/// `ping`.
pub fn anthropic_stream_start() -> Vec<Event> {
    let mut usage = anthropic_usage();
    usage["output_tokens"] = json!(1);
    vec![
        Event::named(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_01TestReply", "type": "message", "role": "assistant",
                "model": REPLY_MODEL, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage
            }}),
        ),
        Event::named("ping", json!({"type": "ping"})),
    ]
}

/// `message_delta` (the stop reason, the output tokens) and `message_stop`.
fn anthropic_stream_end(stop_reason: &str) -> Vec<Event> {
    vec![
        Event::named(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ),
        Event::named("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A text block at `index`: start, one `text_delta` per piece, stop.
fn anthropic_text_block(index: usize, pieces: &[&str]) -> Vec<Event> {
    let mut events = vec![Event::named(
        "content_block_start",
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}),
    )];
    for p in pieces {
        events.push(Event::named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    events.push(Event::named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    events
}

/// A streamed reply of `pieces`: `message_start`, `ping`, the text block
/// (`content_block_start`, a `text_delta` per piece, `content_block_stop`),
/// `message_delta` (`end_turn`, usage), `message_stop`. The piece `i` is
/// event `i + 3`.
pub fn anthropic_stream_text(pieces: &[&str]) -> Vec<Event> {
    let mut events = anthropic_stream_start();
    events.extend(anthropic_text_block(0, pieces));
    events.extend(anthropic_stream_end("end_turn"));
    events
}

/// A streamed reply calling tools `(id, name, input_json_delta pieces)`.
pub fn anthropic_stream_tools(calls: Vec<(&str, &str, Vec<&str>)>) -> Vec<Event> {
    anthropic_stream_text_then_tools(&[], calls)
}

/// A streamed reply: a text block of `text` pieces (none when empty), then
/// one tool_use block per call, each `content_block_start` (id, name,
/// `input: {}`), an empty `input_json_delta` (as Anthropic sends first),
/// one per piece, `content_block_stop`; then `tool_use`.
pub fn anthropic_stream_text_then_tools(
    text: &[&str],
    calls: Vec<(&str, &str, Vec<&str>)>,
) -> Vec<Event> {
    let mut events = anthropic_stream_start();
    let mut index = 0;
    if !text.is_empty() {
        events.extend(anthropic_text_block(0, text));
        index = 1;
    }
    for (id, name, pieces) in calls {
        events.push(Event::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for p in std::iter::once("").chain(pieces) {
            events.push(Event::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        events.push(Event::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.extend(anthropic_stream_end("tool_use"));
    events
}

/// The two protocols, side by side: what a test of both asks of each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

use Api::{Anthropic, OpenAi};

impl Api {
    /// As `--provider local=API:URL` names it.
    pub fn name(self) -> &'static str {
        match self {
            OpenAi => "openai",
            Anthropic => "anthropic",
        }
    }

    /// Where its requests go, under the server's `/v1`.
    pub fn path(self) -> &'static str {
        match self {
            OpenAi => "/v1/chat/completions",
            Anthropic => "/v1/messages",
        }
    }

    /// A whole reply of `text`.
    pub fn text(self, text: &str) -> Answer {
        Answer::json(match self {
            OpenAi => openai_text(text),
            Anthropic => anthropic_text(text),
        })
    }

    /// A whole reply calling tools `(id, name, input)`.
    pub fn tools(self, calls: Vec<(&str, &str, Value)>) -> Answer {
        Answer::json(match self {
            OpenAi => openai_tools(calls),
            Anthropic => anthropic_tools(calls),
        })
    }

    /// A streamed reply of `pieces`.
    pub fn stream_text(self, pieces: &[&str]) -> Answer {
        Answer::sse(match self {
            OpenAi => openai_stream_text(pieces),
            Anthropic => anthropic_stream_text(pieces),
        })
    }

    /// The event carrying piece 0 of [`Api::stream_text`].
    pub fn first_piece(self) -> usize {
        match self {
            OpenAi => 1,
            Anthropic => 3,
        }
    }

    /// An error status with the protocol's error body.
    pub fn error(self, status: u16, message: &str) -> Answer {
        // As each documents them: OpenAI's type and code, Anthropic's type.
        let (openai_kind, openai_code, anthropic_kind) = match status {
            401 => (
                "invalid_request_error",
                Some("invalid_api_key"),
                "authentication_error",
            ),
            429 => ("requests", Some("rate_limit_exceeded"), "rate_limit_error"),
            500..=599 => ("server_error", None, "api_error"),
            _ => ("invalid_request_error", None, "invalid_request_error"),
        };
        Answer::error(
            status,
            match self {
                OpenAi => openai_error(openai_kind, openai_code, message),
                Anthropic => anthropic_error(anthropic_kind, message),
            },
        )
    }

    /// The header the key goes in, and its value for `key`.
    pub fn key_header(self, key: &str) -> (&'static str, String) {
        match self {
            OpenAi => ("authorization", format!("Bearer {key}")),
            Anthropic => ("x-api-key", key.to_string()),
        }
    }
}

/// The output of a script's emitted `{ok = out}` (a `sluice.model` call
/// that succeeded).
pub fn ok(line: &Value) -> Value {
    match line.get("ok") {
        Some(out) => out.clone(),
        None => panic!("the call failed: {line}"),
    }
}

/// The error of a script's emitted `{err = e}`.
pub fn err(line: &Value) -> Value {
    match line.get("err") {
        Some(e) => e.clone(),
        None => panic!("the call succeeded: {line}"),
    }
}
