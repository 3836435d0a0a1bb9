//! Sending spans to an OTLP/HTTP receiver: protobuf bodies POSTed to its
//! traces endpoint, [`BATCH`] spans a request, each request waited for
//! (the callers are synchronous: a command, or the live exporter's own
//! thread), its failure worded with the URL and what to do.

use super::proto::{self, Resource};
use super::span::Span;
use std::time::Duration;

/// Spans a request carries at most: receivers bound a request's size
/// (4 MiB is common), and a span with content may carry a few of
/// [`super::content::LIMIT`].
pub const BATCH: usize = 512;

/// How long one request may take before the receiver counts as not
/// answering.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The variables that give headers every request carries (`KEY=VALUE`
/// pairs, comma-separated, values percent-encoded), as OpenTelemetry's
/// exporters read them: the traces one first.
const HEADER_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// A receiver's traces endpoint and the client that reaches it.
pub struct Sender {
    url: reqwest::Url,
    /// The URL as messages show it (without a password).
    shown: String,
    client: reqwest::Client,
    tokio: tokio::runtime::Runtime,
}

impl Sender {
    /// A sender to `given`: an `http://` or `https://` URL; one without a
    /// path gets OTLP's `/v1/traces`.
    pub fn new(given: &str) -> Result<Sender, String> {
        let url = endpoint(given)?;
        let mut shown = url.clone();
        let _ = shown.set_password(None);
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            // A connection per request: the live exporter sends one a
            // second at most, and a kept one the receiver closed meanwhile
            // (uvicorn's keep-alive is 5 s) fails the next request.
            .pool_max_idle_per_host(0)
            .default_headers(headers()?)
            .build()
            .map_err(|e| format!("cannot set up the OpenTelemetry export: {e}"))?;
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the OpenTelemetry export's async runtime: {e}"))?;
        Ok(Sender {
            url,
            shown: shown.to_string(),
            client,
            tokio,
        })
    }

    /// The endpoint, as messages name it.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// Sends `spans` of `resource`, [`BATCH`] a request, stopping at the
    /// first that fails; the error says why, not where (the caller names
    /// [`Sender::url`]).
    pub fn send(&self, resource: &Resource, spans: &[Span]) -> Result<(), String> {
        spans
            .chunks(BATCH)
            .try_for_each(|batch| self.post(proto::request(resource, batch)))
    }

    fn post(&self, body: Vec<u8>) -> Result<(), String> {
        self.tokio.block_on(async {
            let answer = self
                .client
                .post(self.url.clone())
                .header("content-type", "application/x-protobuf")
                .body(body)
                .send()
                .await
                .map_err(|e| unreachable(&e))?;
            let status = answer.status();
            if status.is_success() {
                return Ok(());
            }
            let text = answer.text().await.unwrap_or_default();
            let line: String = text
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .take(300)
                .collect();
            Err(format!(
                "the receiver answered HTTP {status}{}{line}; check that the URL is its OTLP/HTTP \
                 traces endpoint (protobuf) and that it accepts this sender",
                if line.is_empty() { "" } else { ": " }
            ))
        })
    }
}

/// Why a request got no answer, and what to do.
fn unreachable(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return format!(
            "no answer within {} s; check that the receiver is running and not overloaded",
            TIMEOUT.as_secs()
        );
    }
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = s.to_string();
        source = s.source();
    }
    format!(
        "cannot connect ({why}); is a receiver listening there? Start it, or give the URL it \
         listens on (OTLP/HTTP: a Collector's http://HOST:4318, Phoenix's http://HOST:6006)"
    )
}

/// The traces endpoint `given` names: a URL without a path gets
/// `/v1/traces`.
pub fn endpoint(given: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(given).map_err(|e| {
        format!("--otlp {given:?} is not a URL ({e}); give the receiver's OTLP/HTTP URL, e.g. http://127.0.0.1:6006")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "--otlp {given:?}: OTLP/HTTP needs an http:// or https:// URL (gRPC is not spoken), e.g. http://127.0.0.1:4318"
        ));
    }
    if url.path().is_empty() || url.path() == "/" {
        url.set_path("/v1/traces");
    }
    Ok(url)
}

/// The headers [`HEADER_VARS`] give.
fn headers() -> Result<reqwest::header::HeaderMap, String> {
    let given = HEADER_VARS
        .iter()
        .find_map(|v| Some((*v, std::env::var(v).ok().filter(|t| !t.is_empty())?)));
    match given {
        Some((var, text)) => parse_headers(var, &text),
        None => Ok(reqwest::header::HeaderMap::new()),
    }
}

/// Headers written as `key1=value1,key2=value2` (values percent-encoded)
/// in variable `var`.
fn parse_headers(var: &str, text: &str) -> Result<reqwest::header::HeaderMap, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut map = reqwest::header::HeaderMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| {
            format!("{var}: {pair:?} is not KEY=VALUE; give headers as key1=value1,key2=value2")
        })?;
        let value: String = url::form_urlencoded::parse(format!("v={}", v.trim()).as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let name = HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| format!("{var}: {:?} is not a header name", k.trim()))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| format!("{var}: the value of {name} is not a header value"))?;
        map.insert(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_gets_the_traces_endpoint_and_others_are_kept() {
        let got = |u: &str| endpoint(u).map(|u| u.to_string());
        assert_eq!(
            got("http://127.0.0.1:6006").unwrap(),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            got("http://127.0.0.1:6006/").unwrap(),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            got("https://otel.example/custom/traces").unwrap(),
            "https://otel.example/custom/traces"
        );
        let bad = got("127.0.0.1:4317").unwrap_err();
        assert!(
            bad.contains("http:// or https://") || bad.contains("not a URL"),
            "{bad}"
        );
        let grpc = got("grpc://h:4317").unwrap_err();
        assert!(
            grpc.contains("--otlp \"grpc://h:4317\": OTLP/HTTP needs"),
            "{grpc}"
        );
    }

    #[test]
    fn headers_are_read_as_opentelemetry_exporters_write_them() {
        let map = parse_headers(
            "V",
            "authorization=Bearer%20abc , x-project-name=agents,,api-key=a%3Db",
        )
        .unwrap();
        assert_eq!(map["authorization"], "Bearer abc");
        assert_eq!(map["x-project-name"], "agents");
        assert_eq!(map["api-key"], "a=b");
        assert_eq!(map.len(), 3);
        let bad = parse_headers("V", "nokey").unwrap_err();
        assert_eq!(
            bad,
            "V: \"nokey\" is not KEY=VALUE; give headers as key1=value1,key2=value2"
        );
        assert!(parse_headers("V", "bad name=x")
            .unwrap_err()
            .contains("not a header name"));
    }
}
