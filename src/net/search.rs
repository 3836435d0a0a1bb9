//! Search providers for `websearch`. sluice has no built-in one: the host
//! binds a [`Provider`] ([`crate::RuntimeBuilder::search`], `sluice run
//! --search`), and the flow sends its query there through the run's one
//! HTTP client, so every hop is authorized and pinned like any other.
//!
//! Two ship: [`Exa`] (its search API, keyed by a named credential) and
//! [`Searxng`] (the JSON API of a self-hosted SearXNG). Both map the
//! provider's answer onto the standard codes the same way:
//!
//! - 429, or any refusal carrying `Retry-After`: `rate_limited`, with the
//!   wait in the message and in `retryAfter` (seconds) when it is known;
//! - 401 and 403: `provider_unavailable` (the key, or the instance, refused);
//! - 5xx: `provider_unavailable` naming the status;
//! - any other non-2xx, and a body that is not the expected JSON:
//!   `request_failed`;
//! - no answer within 30 s: `timeout`; a body over 5 MiB:
//!   `response_too_large` (the client's limits).
//!
//! Snippets are clipped at [`SNIPPET_LIMIT`] characters. An error never
//! holds a key: Exa's errors are scrubbed of it before they leave.

use super::client::{Incoming, Method, Net, Outgoing};
use super::destination::{self, Destination};
use crate::calendar;
/// Search providers date their windows in RFC 3339.
pub use crate::calendar::rfc3339;
use crate::credentials::{self, Credentials, Secret};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authority;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Characters a snippet keeps.
pub const SNIPPET_LIMIT: usize = 2_000;
/// The bound on one search request, response included.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Exa's search endpoint.
pub const EXA_ENDPOINT: &str = "https://api.exa.ai/search";
/// The credential Exa's key is read from unless told otherwise.
pub const EXA_CREDENTIAL: &str = "exa";

/// How recent results must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Freshness {
    Day,
    Week,
    Month,
    Year,
}

impl Freshness {
    pub fn as_str(self) -> &'static str {
        match self {
            Freshness::Day => "day",
            Freshness::Week => "week",
            Freshness::Month => "month",
            Freshness::Year => "year",
        }
    }

    /// The window in days: a month is 30, a year 365.
    pub fn days(self) -> u64 {
        match self {
            Freshness::Day => 1,
            Freshness::Week => 7,
            Freshness::Month => 30,
            Freshness::Year => 365,
        }
    }
}

/// One search, checked by the flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub query: String,
    /// 1 through 20.
    pub num_results: usize,
    pub freshness: Option<Freshness>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// As the provider wrote it; omitted when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
}

/// A search under way. Flows run on a current-thread runtime, so it need
/// not be `Send`.
pub type Search<'a> = Pin<Box<dyn Future<Output = FlowResult<Vec<Hit>>> + 'a>>;

/// Who answers `websearch`.
pub trait Provider: fmt::Debug + Send + Sync {
    /// A short name for messages: `exa`, `searxng`.
    #[cfg_attr(not(test), allow(dead_code))]
    fn name(&self) -> &str;

    /// Where requests go first: the flow declares `net:post:<resource>` for
    /// it in the call's envelope.
    fn endpoint(&self) -> &Destination;

    /// Runs `q`, sending through `net` under the call's authority.
    fn search<'a>(&'a self, q: &'a Query, net: &'a Net, auth: &'a dyn Authority) -> Search<'a>;
}

/// A provider from the text of `sluice run --search`: `exa`, `exa=URL`
/// (another endpoint) or `searxng=URL` (the instance's base URL). Exa reads
/// its key from credential `exa` in `store`.
pub fn from_flag(text: &str, store: Credentials) -> Result<Arc<dyn Provider>, String> {
    let (kind, url) = match text.split_once('=') {
        Some((k, u)) => (k.trim(), Some(u.trim())),
        None => (text.trim(), None),
    };
    let parse = |u: &str| destination::parse("url", u).map_err(|e| e.message);
    match (kind, url) {
        ("exa", None) => Ok(Arc::new(Exa::new(store))),
        ("exa", Some(u)) => Ok(Arc::new(Exa::new(store).with_endpoint(parse(u)?))),
        ("searxng", Some(u)) => Ok(Arc::new(Searxng::new(parse(u)?.url)?)),
        ("searxng", None) => Err(
            "searxng needs the instance's base URL: --search searxng=https://search.example.org"
                .into(),
        ),
        (other, _) => Err(format!(
            "{other:?} is not a search provider; use exa, exa=URL or searxng=URL"
        )),
    }
}

/// Exa's search API: a POST of JSON with the key in `x-api-key`.
#[derive(Debug, Clone)]
pub struct Exa {
    endpoint: Destination,
    credential: String,
    store: Credentials,
}

impl Exa {
    /// Exa at [`EXA_ENDPOINT`], its key in credential [`EXA_CREDENTIAL`].
    pub fn new(store: Credentials) -> Exa {
        Exa {
            endpoint: destination::parse("url", EXA_ENDPOINT).expect("the Exa endpoint parses"),
            credential: EXA_CREDENTIAL.into(),
            store,
        }
    }

    /// Another endpoint (a proxy, a test server).
    pub fn with_endpoint(mut self, endpoint: Destination) -> Exa {
        self.endpoint = endpoint;
        self
    }

    /// The request body for `q`, `now` seconds after the epoch.
    pub fn body(q: &Query, now: u64) -> Value {
        let mut body = json!({
            "query": q.query,
            "numResults": q.num_results,
            "type": "auto",
            "contents": {"text": {"maxCharacters": SNIPPET_LIMIT}},
        });
        if let Some(f) = q.freshness {
            body["startPublishedDate"] = rfc3339(now.saturating_sub(f.days() * 86_400)).into();
        }
        body
    }

    /// The key, or why there is none to use.
    fn key(&self) -> FlowResult<Secret> {
        let who = format!("the exa search provider ({})", self.endpoint.url);
        let key = self.store.require(&self.credential, &who)?;
        if reqwest::header::HeaderValue::from_str(key.expose()).is_err() {
            return Err(FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "the key in credential `{}` holds characters a header cannot carry (control characters or newlines); set it again",
                    self.credential
                ),
            )
            .with("credential", self.credential.clone()));
        }
        Ok(key)
    }

    async fn run(
        &self,
        q: &Query,
        net: &Net,
        auth: &dyn Authority,
        key: &Secret,
    ) -> FlowResult<Vec<Hit>> {
        let body = Exa::body(q, unix_now());
        let req = Outgoing {
            method: Method::Post,
            dest: self.endpoint.clone(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "application/json".into()),
                ("x-api-key".into(), key.expose().to_string()),
            ],
            body: Some(body.to_string().into_bytes()),
            timeout: TIMEOUT,
            max_redirects: 0,
            inside: false,
        };
        let mut resp = send(net, auth, req, "exa").await?;
        // A provider that echoes the key (in an error page, in a result)
        // must not hand it to the script: it goes before anything reads it.
        resp.body = credentials::cut_bytes(&resp.body, key.expose().as_bytes());
        let refused = |status| {
            format!(
                "the provider refused the key in credential `{}` (HTTP {status}); check the key, then set it again with {} or in the credentials file",
                self.credential,
                credentials::env_var(&self.credential)
            )
        };
        check(&resp, "exa", &refused)?;
        let parsed: ExaResponse = decode(&resp, "exa")?;
        Ok(parsed
            .results
            .into_iter()
            .filter_map(|r| {
                let url = r.url.filter(|u| !u.is_empty())?;
                let highlight = r.highlights.into_iter().find(|h| !h.trim().is_empty());
                let snippet = [r.text, highlight, r.summary]
                    .into_iter()
                    .flatten()
                    .find(|s| !s.trim().is_empty())
                    .unwrap_or_default();
                Some(Hit {
                    title: r.title.unwrap_or_default(),
                    url,
                    snippet: clip_chars(snippet.trim()),
                    published_at: r.published_date.filter(|d| !d.is_empty()),
                })
            })
            .take(q.num_results)
            .collect())
    }
}

impl Provider for Exa {
    fn name(&self) -> &str {
        "exa"
    }

    fn endpoint(&self) -> &Destination {
        &self.endpoint
    }

    fn search<'a>(&'a self, q: &'a Query, net: &'a Net, auth: &'a dyn Authority) -> Search<'a> {
        Box::pin(async move {
            let key = self.key()?;
            // Whatever went wrong, the key stays out of the error, even if
            // the provider echoed it back.
            self.run(q, net, auth, &key)
                .await
                .map_err(|e| scrub(e, &key))
        })
    }
}

#[derive(Deserialize)]
struct ExaResponse {
    results: Vec<ExaResult>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExaResult {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    published_date: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default, deserialize_with = "strings_or_null")]
    highlights: Vec<String>,
    #[serde(default)]
    summary: Option<String>,
}

fn strings_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// A self-hosted SearXNG, through its JSON API (`format=json`, which the
/// instance must enable in `search.formats`).
#[derive(Debug, Clone)]
pub struct Searxng {
    /// `<base>/search`.
    endpoint: Destination,
}

impl Searxng {
    /// The instance at `base` (its root, or its `/search` URL).
    pub fn new(base: url::Url) -> Result<Searxng, String> {
        let mut url = base;
        url.set_query(None);
        url.set_fragment(None);
        if !url.path().trim_end_matches('/').ends_with("/search") {
            let path = format!("{}/search", url.path().trim_end_matches('/'));
            url.set_path(&path);
        }
        let endpoint = destination::from_url("url", url).map_err(|e| e.message)?;
        Ok(Searxng { endpoint })
    }

    /// The request URL for `q`.
    pub fn url(&self, q: &Query) -> url::Url {
        let mut url = self.endpoint.url.clone();
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("q", &q.query);
            pairs.append_pair("format", "json");
            if let Some(f) = q.freshness {
                pairs.append_pair("time_range", f.as_str());
            }
        }
        url
    }

    async fn run(&self, q: &Query, net: &Net, auth: &dyn Authority) -> FlowResult<Vec<Hit>> {
        let dest = destination::from_url("url", self.url(q))?;
        let req = Outgoing {
            method: Method::Get,
            dest,
            headers: vec![("accept".into(), "application/json".into())],
            body: None,
            timeout: TIMEOUT,
            max_redirects: 0,
            inside: false,
        };
        let resp = send(net, auth, req, "searxng").await?;
        let refused = |status| {
            format!(
                "the SearXNG instance at {} refused the request (HTTP {status}); it answers JSON only when `json` is in `search.formats` of its settings.yml",
                self.endpoint.origin
            )
        };
        check(&resp, "searxng", &refused)?;
        let parsed: SearxngResponse = decode(&resp, "searxng")?;
        Ok(parsed
            .results
            .into_iter()
            .filter_map(|r| {
                let url = r.url.filter(|u| !u.is_empty())?;
                Some(Hit {
                    title: r.title.unwrap_or_default(),
                    url,
                    snippet: clip_chars(r.content.unwrap_or_default().trim()),
                    published_at: r
                        .published_date
                        .as_ref()
                        .and_then(Value::as_str)
                        .filter(|d| !d.is_empty())
                        .map(str::to_string),
                })
            })
            .take(q.num_results)
            .collect())
    }
}

impl Provider for Searxng {
    fn name(&self) -> &str {
        "searxng"
    }

    fn endpoint(&self) -> &Destination {
        &self.endpoint
    }

    fn search<'a>(&'a self, q: &'a Query, net: &'a Net, auth: &'a dyn Authority) -> Search<'a> {
        Box::pin(self.run(q, net, auth))
    }
}

#[derive(Deserialize)]
struct SearxngResponse {
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearxngResult {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    content: Option<String>,
    /// A string, or null; anything else is ignored.
    #[serde(default)]
    published_date: Option<Value>,
}

/// Sends through the run's client; a deadline is told as the search's own
/// 30 s bound (there is no `timeout` input to raise).
async fn send(
    net: &Net,
    auth: &dyn Authority,
    req: Outgoing,
    provider: &str,
) -> FlowResult<Incoming> {
    net.send(req, auth).await.map_err(|e| {
        if e.code == ErrorCode::Timeout {
            let mut t = FlowError::new(
                ErrorCode::Timeout,
                format!(
                    "{provider} did not answer within {} s; try again later",
                    TIMEOUT.as_secs()
                ),
            );
            t.details = e.details;
            t.details.insert("timeout".into(), TIMEOUT.as_secs().into());
            t
        } else {
            e
        }
    })
}

/// The status mapping the module doc describes; `refused` is what a 401 or
/// 403 means for this provider.
fn check(resp: &Incoming, provider: &str, refused: &dyn Fn(u16) -> String) -> FlowResult<()> {
    let status = resp.status;
    if (200..300).contains(&status) {
        return Ok(());
    }
    let retry_after = resp.headers.get(reqwest::header::RETRY_AFTER);
    if status == 429 || retry_after.is_some() {
        let wait = retry_after
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_seconds(v, unix_now()));
        let advice = match wait {
            Some(s) => format!("retry after {s} seconds"),
            None => "wait a while before retrying".to_string(),
        };
        let mut e = FlowError::new(
            ErrorCode::RateLimited,
            format!("{provider} is limiting requests (HTTP {status}); {advice}"),
        )
        .with("provider", provider)
        .with("status", status);
        if let Some(s) = wait {
            e = e.with("retryAfter", s);
        }
        return Err(e);
    }
    let (code, message) = match status {
        401 | 403 => (ErrorCode::ProviderUnavailable, refused(status)),
        500..=599 => (
            ErrorCode::ProviderUnavailable,
            format!("{provider} is unavailable: it answered HTTP {status}; try again later"),
        ),
        _ => {
            let said = excerpt(&resp.text());
            let said = if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            };
            (
                ErrorCode::RequestFailed,
                format!("{provider} refused the search with HTTP {status}{said}"),
            )
        }
    };
    Err(FlowError::new(code, message)
        .with("provider", provider)
        .with("status", status))
}

/// A JSON body as `T`; anything else is `request_failed`.
fn decode<T: serde::de::DeserializeOwned>(resp: &Incoming, provider: &str) -> FlowResult<T> {
    serde_json::from_slice(&resp.body).map_err(|e| {
        // The position, not serde's text: that can quote the body.
        FlowError::new(
            ErrorCode::RequestFailed,
            format!(
                "{provider} answered HTTP {} with a body that is not its search results JSON (at line {}, column {})",
                resp.status,
                e.line(),
                e.column()
            ),
        )
        .with("provider", provider)
        .with("status", resp.status)
    })
}

/// The first 300 characters of an error body, on one line.
pub fn excerpt(body: &str) -> String {
    let one: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

/// `text` cut to [`SNIPPET_LIMIT`] characters.
pub fn clip_chars(text: &str) -> String {
    match text.char_indices().nth(SNIPPET_LIMIT) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}

/// `e` with every copy of `key` replaced, in the message and details.
pub fn scrub(mut e: FlowError, key: &Secret) -> FlowError {
    let key = key.expose();
    credentials::cut_text(&mut e.message, key);
    for v in e.details.values_mut() {
        credentials::cut_value(v, key);
    }
    e
}

/// Seconds to wait, from a `Retry-After` value: delay seconds, or an HTTP
/// date (0 when it has passed).
pub fn retry_seconds(value: &str, now: u64) -> Option<u64> {
    let v = value.trim();
    if let Ok(n) = v.parse::<u64>() {
        return Some(n);
    }
    http_date(v).map(|at| at.saturating_sub(now))
}

/// Seconds since the epoch of an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(v: &str) -> Option<u64> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u64 + 1;
    let day: u64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    let days = calendar::days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + (*h * 3600 + *m * 60 + *s) as i64).ok()
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn q(freshness: Option<Freshness>) -> Query {
        Query {
            query: "rust async traits".into(),
            num_results: 5,
            freshness,
        }
    }

    fn resp(status: u16, headers: &[(&'static str, &str)], body: &str) -> Incoming {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        Incoming {
            url: url::Url::parse("https://api.exa.ai/search").unwrap(),
            status,
            headers: map,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn dates_format_and_parse() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(784_111_777), "1994-11-06T08:49:37Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(retry_seconds(" 120 ", 0), Some(120));
        assert_eq!(
            retry_seconds("Sun, 06 Nov 1994 08:50:07 GMT", 784_111_777),
            Some(30)
        );
        assert_eq!(
            retry_seconds("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_999),
            Some(0)
        );
        assert_eq!(retry_seconds("soon", 0), None);
    }

    #[test]
    fn exa_bodies_carry_the_window_only_with_freshness() {
        let now = 784_111_777;
        let b = Exa::body(&q(None), now);
        assert_eq!(
            b,
            json!({"query": "rust async traits", "numResults": 5, "type": "auto",
                   "contents": {"text": {"maxCharacters": 2000}}})
        );
        let b = Exa::body(&q(Some(Freshness::Week)), now);
        assert_eq!(b["startPublishedDate"], "1994-10-30T08:49:37Z");
        let b = Exa::body(&q(Some(Freshness::Day)), now);
        assert_eq!(b["startPublishedDate"], "1994-11-05T08:49:37Z");
    }

    #[test]
    fn searxng_urls_name_the_search_path_query_and_range() {
        let s = Searxng::new(url::Url::parse("http://10.0.0.5:8888/").unwrap()).unwrap();
        assert_eq!(s.endpoint().resource, "http://10.0.0.5:8888");
        assert_eq!(
            s.url(&q(None)).as_str(),
            "http://10.0.0.5:8888/search?q=rust+async+traits&format=json"
        );
        let s = Searxng::new(url::Url::parse("https://s.example.org/searx?x=1").unwrap()).unwrap();
        assert_eq!(
            s.url(&q(Some(Freshness::Month))).as_str(),
            "https://s.example.org/searx/search?q=rust+async+traits&format=json&time_range=month"
        );
        let s = Searxng::new(url::Url::parse("https://s.example.org/search").unwrap()).unwrap();
        assert_eq!(s.endpoint().url.path(), "/search");
    }

    #[test]
    fn flags_name_a_provider() {
        let store = Credentials::with_file("/nonexistent/credentials");
        let p = from_flag("exa", store.clone()).unwrap();
        assert_eq!(
            (p.name(), p.endpoint().resource.as_str()),
            ("exa", "api.exa.ai")
        );
        let p = from_flag("exa=http://127.0.0.1:9/search", store.clone()).unwrap();
        assert_eq!(p.endpoint().url.as_str(), "http://127.0.0.1:9/search");
        let p = from_flag("searxng=https://s.example.org", store.clone()).unwrap();
        assert_eq!(p.endpoint().url.as_str(), "https://s.example.org/search");
        assert!(from_flag("searxng", store.clone())
            .unwrap_err()
            .contains("base URL"));
        assert!(from_flag("bing", store.clone())
            .unwrap_err()
            .contains("not a search provider"));
        assert!(from_flag("exa=not a url", store).is_err());
    }

    #[test]
    fn statuses_map_to_the_standard_codes() {
        let refused = |s: u16| format!("refused (HTTP {s})");
        let code = |r: Incoming| check(&r, "exa", &refused).unwrap_err();
        let e = code(resp(429, &[("retry-after", "17")], ""));
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(
            e.message.contains("retry after 17 seconds"),
            "{}",
            e.message
        );
        assert_eq!(e.details["retryAfter"], 17);
        let e = code(resp(429, &[], ""));
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(e.details.get("retryAfter").is_none());
        let e = code(resp(503, &[("retry-after", "5")], ""));
        assert_eq!(e.code, ErrorCode::RateLimited);
        for s in [401, 403] {
            let e = code(resp(s, &[], ""));
            assert_eq!(e.code, ErrorCode::ProviderUnavailable);
            assert_eq!(e.message, format!("refused (HTTP {s})"));
        }
        let e = code(resp(502, &[], ""));
        assert_eq!(e.code, ErrorCode::ProviderUnavailable);
        assert!(e.message.contains("HTTP 502"), "{}", e.message);
        let e = code(resp(400, &[], "{\"error\": \"numResults\n too big\"}"));
        assert_eq!(e.code, ErrorCode::RequestFailed);
        assert_eq!(
            e.message,
            "exa refused the search with HTTP 400: {\"error\": \"numResults too big\"}"
        );
        assert!(check(&resp(204, &[], ""), "exa", &refused).is_ok());
    }

    #[test]
    fn snippets_clip_at_2000_characters_not_bytes() {
        let s = "é".repeat(2_100);
        let c = clip_chars(&s);
        assert_eq!(c.chars().count(), 2_000);
        assert_eq!(clip_chars("short"), "short");
    }

    #[test]
    fn scrubbing_removes_the_key_everywhere() {
        let key = Secret::new("k-123");
        let e = FlowError::new(ErrorCode::RequestFailed, "said k-123 twice: k-123")
            .with("body", "x k-123")
            .with("list", json!(["k-123", 1]));
        let e = scrub(e, &key);
        let all = format!("{} {:?}", e.message, e.details);
        assert!(!all.contains("k-123"), "{all}");
        assert_eq!(e.message, "said [redacted] twice: [redacted]");
    }

    #[test]
    fn hits_serialize_camel_case_without_unknown_dates() {
        let h = Hit {
            title: "t".into(),
            url: "u".into(),
            snippet: "s".into(),
            published_at: None,
        };
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            json!({"title": "t", "url": "u", "snippet": "s"})
        );
        let h = Hit {
            published_at: Some("2024-01-02".into()),
            ..h
        };
        assert_eq!(
            serde_json::to_value(&h).unwrap()["publishedAt"],
            "2024-01-02"
        );
    }
}
