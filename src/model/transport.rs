//! One model call through the run's HTTP client: the destination checks
//! and pinning of `fetch` (a private endpoint needs its exact
//! `net:private:ORIGIN` grant), the provider's key in its header, the
//! stream read as it arrives, and retries.
//!
//! How an answer is judged, attempt by attempt:
//!
//! 1. 2xx: the reply (JSON, or the event stream folded as it arrives);
//! 2. 429, and an `error` event of kind `rate_limit_error` before any text:
//!    retried, then `rate_limited`;
//! 3. 5xx (529 is Anthropic's "overloaded"), and an `overloaded_error` or
//!    `api_error` event before any text: retried, then
//!    `provider_unavailable`;
//! 4. 401 and 403: `provider_unavailable`, naming the credential; never
//!    retried;
//! 5. any other status: `request_failed` with the provider's message.
//!
//! A retry waits what `retry-after-ms` or `Retry-After` says, else 0.5 s
//! doubling up to 8 s, and only while the call's deadline leaves room for
//! the wait; at most [`MAX_ATTEMPTS`] attempts. A stream cut mid-way is
//! `request_failed`, and a deadline passed mid-way `timeout`, both carrying
//! the text received so far (`text`). No error holds the key: it is cut
//! from every byte the provider sends before anything reads them, and
//! from every error.

use super::providers::{Api, Provider};
use super::sse;
use super::wire::{OnText, Reply, Request, WireError};
use super::{anthropic, openai};
use crate::credentials::Secret;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authority;
use crate::net::search::{excerpt, retry_seconds, scrub, unix_now};
use crate::net::{Method, Net, Opened, Outgoing};
use std::time::Duration;
use tokio::time::Instant;

/// Attempts of one call, the first included.
pub const MAX_ATTEMPTS: u32 = 5;
/// The most a streamed reply may carry: 16 MiB.
pub const MAX_STREAM: usize = 16 << 20;
/// The `anthropic-version` header sluice speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The most tool calls one reply may make: far more than any model makes
/// at once, and few enough that an agent loop running each is bounded.
pub const MAX_TOOL_CALLS: usize = 256;
/// The deepest a tool call's input may nest (an object in a list in an
/// object is 3): far more than any tool's input, and shallow enough that
/// the input goes back to the model (inside a message, inside the call)
/// and reads back from the record as it came.
pub const MAX_INPUT_DEPTH: usize = 32;

/// A model's answer and how long it took.
#[derive(Debug, Clone)]
pub struct Answer {
    pub reply: Reply,
    /// From the first attempt's start to the reply's end.
    pub latency_ms: u64,
    /// Until the first text arrived (streamed; for a reply with no text,
    /// its first bytes), or until the reply arrived (not streamed).
    pub first_token_ms: u64,
}

/// One call to make.
pub struct Call<'a> {
    pub provider: &'a Provider,
    pub key: Option<Secret>,
    pub request: &'a Request,
    pub deadline: Instant,
}

/// What one attempt came to.
enum Attempt {
    Done(Reply),
    /// Worth another try after `wait` (when the answer said), else this
    /// error.
    Retry(FlowError, Option<Duration>),
    Fail(FlowError),
}

/// What a call has seen so far, kept outside each attempt so a deadline
/// that cuts one short still knows it.
struct Seen {
    started: Instant,
    text: String,
    first: Option<Instant>,
}

impl Call<'_> {
    /// Runs the call: attempts, waits between them, the deadline over all.
    pub async fn run(
        self,
        net: &Net,
        auth: &dyn Authority,
        on_text: OnText<'_>,
    ) -> FlowResult<Answer> {
        let mut seen = Seen {
            started: Instant::now(),
            text: String::new(),
            first: None,
        };
        let result = self.attempts(net, auth, on_text, &mut seen).await;
        let key = self.key.clone();
        result
            .map(|reply| Answer {
                latency_ms: ms(seen.started.elapsed()),
                first_token_ms: ms(seen.first.unwrap_or_else(Instant::now) - seen.started),
                reply,
            })
            .map_err(|e| match &key {
                Some(k) => scrub(e, k),
                None => e,
            })
    }

    async fn attempts(
        &self,
        net: &Net,
        auth: &dyn Authority,
        on_text: OnText<'_>,
        seen: &mut Seen,
    ) -> FlowResult<Reply> {
        let mut attempt = 1;
        loop {
            // A retried attempt starts with no text: its first token is its own.
            seen.first = None;
            let once = tokio::time::timeout_at(self.deadline, self.once(net, auth, on_text, seen));
            let outcome = match once.await {
                Ok(outcome) => outcome?,
                Err(_) => return Err(self.timed_out(seen)),
            };
            let (err, asked) = match outcome {
                Attempt::Done(reply) => {
                    return self.bounded(reply).map_err(|e| e.with("attempts", attempt))
                }
                Attempt::Fail(e) => return Err(e.with("attempts", attempt)),
                Attempt::Retry(e, asked) => (e, asked),
            };
            let wait = asked.unwrap_or_else(|| backoff(attempt));
            let room = self.deadline.saturating_duration_since(Instant::now());
            if attempt >= MAX_ATTEMPTS || wait >= room {
                return Err(gave_up(err, attempt, wait, room));
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One attempt: the request, then its answer judged.
    async fn once(
        &self,
        net: &Net,
        auth: &dyn Authority,
        on_text: OnText<'_>,
        seen: &mut Seen,
    ) -> FlowResult<Attempt> {
        let opened = net.open(self.outgoing()?, auth).await?;
        let status = opened.status();
        if !(200..300).contains(&status) {
            return self.refused(opened).await;
        }
        if self.request.stream {
            return self.stream(opened, on_text, seen).await;
        }
        let body = self.without_key(opened.body().await?.body);
        seen.first.get_or_insert_with(Instant::now);
        let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            self.failed(format!(
                "answered HTTP {status} with a body that is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        Ok(self.judge(self.api_reply(&value), seen))
    }

    /// A body with every copy of the key replaced by `[redacted]`, before
    /// anything reads it: no message quoting it, shortened, can keep the
    /// start of one.
    fn without_key(&self, body: Vec<u8>) -> Vec<u8> {
        match self.key.as_ref().map(Secret::expose) {
            Some(k) if !k.is_empty() && memchr::memmem::find(&body, k.as_bytes()).is_some() => {
                crate::credentials::cut_bytes(&body, k.as_bytes())
            }
            _ => body,
        }
    }

    /// `reply`, unless it holds more tool calls than [`MAX_TOOL_CALLS`] or
    /// an input nested deeper than [`MAX_INPUT_DEPTH`]: a reply sluice does
    /// not take. An input of `null` is `{}`, as a call without arguments
    /// has: Lua has no null in a table, and a later turn carries the call
    /// back.
    fn bounded(&self, mut reply: Reply) -> FlowResult<Reply> {
        for c in &mut reply.tool_calls {
            if c.input.is_null() {
                c.input = serde_json::Value::Object(Default::default());
            }
        }
        let calls = reply.tool_calls.len();
        if calls > MAX_TOOL_CALLS {
            return Err(self.failed(format!(
                "sent a reply with {calls} tool calls, more than the {MAX_TOOL_CALLS} sluice takes in one reply"
            )));
        }
        if let Some(c) = reply
            .tool_calls
            .iter()
            .find(|c| deeper_than(&c.input, MAX_INPUT_DEPTH))
        {
            return Err(self.failed(format!(
                "sent a call to tool `{}` whose input nests deeper than {MAX_INPUT_DEPTH} levels",
                c.name
            )));
        }
        Ok(reply)
    }

    /// The HTTP request: the protocol's body and headers, the key in its
    /// header.
    fn outgoing(&self) -> FlowResult<Outgoing> {
        let api = self.provider.api;
        let (path, body) = match api {
            Api::OpenAi => (openai::PATH, openai::body(self.request)),
            Api::Anthropic => (anthropic::PATH, anthropic::body(self.request)),
        };
        let accept = if self.request.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("accept".to_string(), accept.to_string()),
            (
                "user-agent".to_string(),
                format!("sluice/{}", env!("CARGO_PKG_VERSION")),
            ),
        ];
        if api == Api::Anthropic {
            headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
        }
        if let Some(key) = &self.key {
            headers.push(match api {
                Api::OpenAi => ("authorization".into(), format!("Bearer {}", key.expose())),
                Api::Anthropic => ("x-api-key".into(), key.expose().to_string()),
            });
        }
        Ok(Outgoing {
            method: Method::Post,
            dest: self.provider.endpoint(path)?,
            headers,
            body: Some(body.to_string().into_bytes()),
            timeout: self.deadline.saturating_duration_since(Instant::now()),
            max_redirects: 0,
            // A model provider is the operator's: never a server a
            // command started.
            inside: false,
        })
    }

    /// Reads the event stream, folding each event in as it arrives.
    async fn stream(
        &self,
        mut opened: Opened,
        on_text: OnText<'_>,
        seen: &mut Seen,
    ) -> FlowResult<Attempt> {
        let mut parser = sse::Parser::cutting(self.key.as_ref().map(Secret::expose));
        let mut fold = Fold::new(self.provider.api);
        let mut bytes = 0;
        let mut done = false;
        while !done {
            let Some(chunk) = opened
                .chunk()
                .await
                .map_err(|e| self.cut(e.message, seen))?
            else {
                break;
            };
            bytes += chunk.len();
            if bytes > MAX_STREAM {
                return Err(FlowError::new(
                    ErrorCode::ResponseTooLarge,
                    format!(
                        "the stream from {} passed 16 MiB; the call was stopped",
                        self.provider.name
                    ),
                )
                .with("text", seen.text.clone()));
            }
            seen.first.get_or_insert_with(Instant::now);
            let events = parser.feed(&chunk);
            // A line past the parser's bound was cut: the events of this
            // chunk may not be what the server sent, so none is folded (a
            // cut event folded first would fail as "not JSON").
            if parser.too_long() {
                return Err(FlowError::new(
                    ErrorCode::ResponseTooLarge,
                    format!(
                        "model provider `{}` sent a stream event over {} MiB; the call was stopped",
                        self.provider.name,
                        sse::MAX_LINE >> 20
                    ),
                )
                .with("text", seen.text.clone()));
            }
            for ev in events {
                match self.fold_one(&mut fold, &ev, on_text, seen) {
                    Ok(end) => done |= end,
                    Err(attempt) => return Ok(attempt),
                }
            }
        }
        // An event the stream ended in the middle of is the cut's, not a
        // reply sluice cannot read.
        if let Some(ev) = parser.finish() {
            let mut relay = |piece: &str| {
                seen.text.push_str(piece);
                on_text(piece);
            };
            if fold.event(&ev, &mut relay).is_err() {
                return Err(self.cut("the stream ended in the middle of an event".into(), seen));
            }
        }
        match fold.finish() {
            Ok(reply) => Ok(Attempt::Done(reply)),
            // A stream that never said it was complete was cut short; one
            // that did, but does not fold into a reply (a tool call's
            // arguments that are not JSON), is a reply sluice cannot read.
            Err(WireError::Malformed(why)) if !done => Err(self.cut(why, seen)),
            Err(e) => Ok(self.judge(Err(e), seen)),
        }
    }

    /// One event into the fold; `Err` ends the attempt (an error event).
    fn fold_one(
        &self,
        fold: &mut Fold,
        ev: &sse::Event,
        on_text: OnText<'_>,
        seen: &mut Seen,
    ) -> Result<bool, Attempt> {
        let mut relay = |piece: &str| {
            if seen.text.is_empty() {
                seen.first = Some(Instant::now());
            }
            seen.text.push_str(piece);
            on_text(piece);
        };
        fold.event(ev, &mut relay)
            .map_err(|e| self.judge(Err(e), seen))
    }

    /// A reply, or the error the provider sent inside one.
    fn judge(&self, reply: Result<Reply, WireError>, seen: &Seen) -> Attempt {
        let e = match reply {
            Ok(reply) => return Attempt::Done(reply),
            Err(e) => e,
        };
        let (kind, message) = match e {
            WireError::Malformed(why) => {
                return Attempt::Fail(
                    self.failed(format!("sent a reply sluice cannot read: {why}")),
                )
            }
            WireError::Provider { kind, message } => (kind, message),
        };
        let said = format!("{}: {message}", kind.as_deref().unwrap_or("error"));
        let retry = seen.text.is_empty();
        let err = |code, what: &str| {
            FlowError::new(
                code,
                format!("model provider `{}` {what} ({said})", self.provider.name),
            )
            .with("provider", self.provider.name.clone())
            .with("text", seen.text.clone())
        };
        match kind.as_deref() {
            Some("rate_limit_error" | "rate_limit_exceeded") if retry => {
                Attempt::Retry(err(ErrorCode::RateLimited, "is limiting requests"), None)
            }
            Some("overloaded_error" | "api_error" | "server_error") if retry => Attempt::Retry(
                err(ErrorCode::ProviderUnavailable, "is overloaded or failing"),
                None,
            ),
            // The request itself was refused: no retry can fix it.
            Some(
                "invalid_request_error"
                | "not_found_error"
                | "request_too_large"
                | "invalid_request",
            ) => Attempt::Fail(err(ErrorCode::RequestFailed, "refused the request")),
            _ => Attempt::Fail(err(ErrorCode::ProviderUnavailable, "reported an error")),
        }
    }

    /// A non-2xx answer judged by its status (the module doc's list).
    async fn refused(&self, opened: Opened) -> FlowResult<Attempt> {
        let status = opened.status();
        let asked = asked_wait(opened.headers());
        let body = self.without_key(opened.body().await.map(|b| b.body).unwrap_or_default());
        let said = match self.provider_error(&body) {
            Some((kind, message)) => format!(
                ": {}{message}",
                kind.map(|k| format!("{k}: ")).unwrap_or_default()
            ),
            None if body.is_empty() => String::new(),
            None => format!(": {}", excerpt(&String::from_utf8_lossy(&body))),
        };
        let name = &self.provider.name;
        let err = |code, what: String| {
            let mut e = FlowError::new(code, what)
                .with("provider", name.clone())
                .with("status", status);
            if let Some(wait) = asked {
                e = e.with("retryAfter", wait.as_secs_f64());
            }
            e
        };
        Ok(match status {
            429 => Attempt::Retry(
                err(
                    ErrorCode::RateLimited,
                    format!("model provider `{name}` is limiting requests (HTTP 429{said})"),
                ),
                asked,
            ),
            500..=599 => Attempt::Retry(
                err(
                    ErrorCode::ProviderUnavailable,
                    format!("model provider `{name}` is unavailable (HTTP {status}{said})"),
                ),
                asked,
            ),
            401 | 403 => Attempt::Fail(err(
                ErrorCode::ProviderUnavailable,
                format!(
                    "model provider `{name}` refused the request (HTTP {status}{said}); {}",
                    self.whose_key()
                ),
            )),
            _ => Attempt::Fail(err(
                ErrorCode::RequestFailed,
                format!("model provider `{name}` refused the request (HTTP {status}{said})"),
            )),
        })
    }

    /// Where the key comes from, for a refusal.
    fn whose_key(&self) -> String {
        match (&self.provider.credential, &self.key) {
            (Some(c), Some(_)) => format!("its key is credential `{c}`: check it"),
            (Some(c), None) => format!("no key was sent: set credential `{c}`"),
            (None, _) => "the operator declared it without a credential".into(),
        }
    }

    fn provider_error(&self, body: &[u8]) -> Option<(Option<String>, String)> {
        match self.provider.api {
            Api::OpenAi => openai::error(body),
            Api::Anthropic => anthropic::error(body),
        }
    }

    fn api_reply(&self, body: &serde_json::Value) -> Result<Reply, WireError> {
        match self.provider.api {
            Api::OpenAi => openai::reply(body),
            Api::Anthropic => anthropic::reply(body),
        }
    }

    fn failed(&self, what: String) -> FlowError {
        FlowError::new(
            ErrorCode::RequestFailed,
            format!("model provider `{}` {what}", self.provider.name),
        )
        .with("provider", self.provider.name.clone())
    }

    /// A stream that ended (or broke) before the reply was whole.
    fn cut(&self, why: String, seen: &Seen) -> FlowError {
        self.failed(format!(
            "cut the stream short after {} bytes of text: {why}",
            seen.text.len()
        ))
        .with("text", seen.text.clone())
    }

    fn timed_out(&self, seen: &Seen) -> FlowError {
        let secs = (self.deadline - seen.started).as_secs_f64();
        FlowError::new(
            ErrorCode::Timeout,
            format!(
                "model provider `{}` gave no whole reply within {secs:.1} s; raise `timeoutMs`",
                self.provider.name
            ),
        )
        .with("provider", self.provider.name.clone())
        .with("text", seen.text.clone())
    }
}

/// A stream being folded, whichever the protocol.
pub(crate) enum Fold {
    OpenAi(openai::Stream),
    Anthropic(anthropic::Stream),
}

impl Fold {
    pub(crate) fn new(api: Api) -> Fold {
        match api {
            Api::OpenAi => Fold::OpenAi(openai::Stream::new()),
            Api::Anthropic => Fold::Anthropic(anthropic::Stream::new()),
        }
    }

    pub(crate) fn event(
        &mut self,
        ev: &sse::Event,
        on_text: OnText<'_>,
    ) -> Result<bool, WireError> {
        match self {
            Fold::OpenAi(s) => s.event(ev, on_text),
            Fold::Anthropic(s) => s.event(ev, on_text),
        }
    }

    pub(crate) fn finish(self) -> Result<Reply, WireError> {
        match self {
            Fold::OpenAi(s) => s.finish(),
            Fold::Anthropic(s) => s.finish(),
        }
    }
}

/// The wait an answer asks for: `retry-after-ms` (OpenAI's), else
/// `Retry-After` (seconds or an HTTP date). A wait longer than any clock
/// holds (`inf`, `1e300`) is the longest there is, which no call has room
/// for; one that is no number (`NaN`) asks for nothing.
fn asked_wait(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let ms = text("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| !ms.is_nan());
    if let Some(ms) = ms {
        return Some(Duration::try_from_secs_f64(ms.max(0.0) / 1000.0).unwrap_or(Duration::MAX));
    }
    text("retry-after")
        .and_then(|v| retry_seconds(v, unix_now()))
        .map(Duration::from_secs)
}

/// Whether `v` nests lists and objects more than `limit` deep (a scalar is
/// 0 deep, `{}` 1). Iterative: the value may be as deep as the parser
/// allows.
fn deeper_than(v: &serde_json::Value, limit: usize) -> bool {
    use serde_json::Value;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// 0.5 s before the second attempt, doubling, at most 8 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64 << (attempt - 1).min(4))
}

/// The last attempt's error, saying why no other was made.
fn gave_up(e: FlowError, attempts: u32, wait: Duration, room: Duration) -> FlowError {
    let why = if attempts >= MAX_ATTEMPTS {
        format!("gave up after {attempts} attempts")
    } else {
        format!(
            "gave up after {attempts} attempt{}: the next would wait {:.1} s and the call has {:.1} s left",
            if attempts == 1 { "" } else { "s" },
            wait.as_secs_f64(),
            room.as_secs_f64()
        )
    };
    let message = format!("{}; {why}", e.message);
    FlowError { message, ..e }.with("attempts", attempts)
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_lists_and_objects() {
        use serde_json::json;
        assert!(!deeper_than(&json!("x"), 0));
        assert!(deeper_than(&json!({}), 0));
        assert!(!deeper_than(&json!({"a": [1, {"b": 2}]}), 3));
        assert!(deeper_than(&json!({"a": [1, {"b": []}]}), 3));
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert!(deeper_than(&deep, MAX_INPUT_DEPTH));
        assert!(!deeper_than(&deep, 100));
    }

    #[test]
    fn backoff_doubles_from_half_a_second_to_eight() {
        let waits: Vec<u64> = (1..=7).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
    }

    #[test]
    fn the_asked_wait_prefers_milliseconds() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(asked_wait(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(asked_wait(&h), Some(Duration::from_millis(250)));
        assert_eq!(asked_wait(&reqwest::header::HeaderMap::new()), None);
        for huge in ["inf", "1e300", "+Infinity"] {
            h.insert("retry-after-ms", huge.parse().unwrap());
            assert_eq!(asked_wait(&h), Some(Duration::MAX), "{huge}");
        }
        h.insert("retry-after-ms", "-inf".parse().unwrap());
        assert_eq!(asked_wait(&h), Some(Duration::ZERO));
        h.insert("retry-after-ms", "NaN".parse().unwrap());
        assert_eq!(
            asked_wait(&h),
            Some(Duration::from_secs(3)),
            "falls back to retry-after"
        );
    }
}
