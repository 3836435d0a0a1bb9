//! What `fetch`, `http-post` and `webfetch` share: the request part of
//! their inputs, checked (destination, headers, deadline), how it is sent
//! under the call's gate, and the response as text.

use super::{closed, field, Context, Envelope, Tier};
use crate::credentials::Held;
use crate::error::{FlowError, FlowResult};
use crate::kernel::{Action, Capability};
use crate::net::client::{check_headers, timeout, PLAIN_HEADERS};
use crate::net::destination::{self, Destination};
use crate::net::{clip, Incoming, Method, Outgoing};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// What `fetch` and `http-post` return.
#[derive(Debug, Serialize)]
pub struct Output {
    pub status: u16,
    pub body: String,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl Output {
    /// The response as text, its head kept (60,000 bytes).
    pub fn of(resp: &Incoming) -> Output {
        let c = clip(text_of(resp));
        Output {
            status: resp.status,
            body: c.text,
            truncated: c.truncated,
            notice: c.notice,
        }
    }
}

/// The response's body as text, with every loaded secret cut before
/// anything clips or renders it: a copy split by the 60,000-byte clip, or
/// escaped by Markdown (`ghp\_...`), would no longer be recognized by the
/// cut of the flow's output.
pub fn text_of(resp: &Incoming) -> String {
    let mut text = resp.text();
    crate::credentials::cut_loaded_text(&mut text);
    text
}

/// The part of a `fetch`, `http-post` or `webfetch` call their inputs share,
/// checked: the destination, the headers and the deadline.
pub struct Request {
    dest: Destination,
    /// In name order; a credential's secret is put in by [`Request::send`].
    headers: Vec<(String, Held)>,
    timeout: Duration,
}

impl Request {
    /// Checks `url`, `headers` and `timeout`, and declares the capability
    /// of the first hop (`action` on the URL's resource) and of each
    /// credential a header sends there (`cred:use:NAME@ORIGIN`).
    pub fn plan(
        action: Action,
        url: &str,
        headers: &BTreeMap<String, Held>,
        timeout_secs: Option<f64>,
    ) -> FlowResult<(Request, Envelope)> {
        let dest = destination::parse("url", url)?;
        let mut envelope = first_hop(action, &dest);
        check_headers(&shapes(headers))?;
        for (name, held) in headers {
            if let Held::Credential(r) = held {
                if PLAIN_HEADERS.iter().any(|p| name.eq_ignore_ascii_case(p)) {
                    return Err(FlowError::invalid_input(
                        &format!("headers.{name}"),
                        format!("{name} goes on to every host a redirect leads to, so it may not carry credential `{}`; send it in authorization or an x-... header, which stay behind when a redirect leaves {}", r.credential, dest.origin),
                    ));
                }
                envelope.network.push(r.capability(&dest.origin));
            }
        }
        let request = Request {
            dest,
            headers: headers
                .iter()
                .map(|(n, h)| (n.clone(), h.clone()))
                .collect(),
            timeout: timeout("timeout", timeout_secs)?,
        };
        Ok((request, envelope))
    }

    /// Sends it through the run's client, under the call's gate, with each
    /// credential's secret put in its header.
    pub async fn send(
        self,
        ctx: &Context,
        method: Method,
        body: Option<Vec<u8>>,
        max_redirects: usize,
    ) -> FlowResult<Incoming> {
        let mut revealed = BTreeMap::new();
        let credentialed = self
            .headers
            .iter()
            .any(|(_, h)| matches!(h, Held::Credential(_)));
        for (name, held) in &self.headers {
            let who = format!("`headers.{name}`");
            revealed.insert(name.clone(), held.reveal(&ctx.credentials, &who)?);
        }
        let out = Outgoing {
            method,
            dest: self.dest,
            headers: check_headers(&revealed)?,
            body,
            timeout: self.timeout,
            max_redirects,
            inside: !credentialed,
        };
        ctx.net.send(out, ctx).await
    }
}

/// `headers` as the checks see them before any secret is known.
fn shapes(headers: &BTreeMap<String, Held>) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, held)| (name.clone(), held.shape()))
        .collect()
}

/// The input fields `fetch`, `http-post` and `webfetch` share.
pub fn request_schema() -> serde_json::Map<String, Value> {
    let v = json!({
        "url": {"type": "string", "description": "Absolute http or https URL, without user:password@."},
        "headers": {"type": "object", "additionalProperties": super::held_schema(), "description": "Request headers: text, or sluice.credential(NAME) (needs cred:use:NAME@ORIGIN). authorization, cookie and credentials are dropped when a redirect leaves the URL's origin."},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds for the whole request and body (default 30, at most 120)."}
    });
    v.as_object().cloned().unwrap_or_default()
}

/// The capability the first hop needs.
fn first_hop(action: Action, dest: &Destination) -> Envelope {
    let tier = if action == Action::NetPost {
        Tier::Irreversible
    } else {
        Tier::Sealed
    };
    Envelope {
        network: vec![Capability {
            action,
            resource: dest.resource.clone(),
        }],
        ..Envelope::new(tier)
    }
}

/// The output schema of `fetch` and `http-post` ([`Output`]).
pub(crate) fn response_schema() -> Value {
    let (truncated, notice) = clip_fields("body");
    closed(
        &[
            (
                "status",
                field(
                    "integer",
                    "The HTTP status; an error status (404, 500) is a value, not an error.",
                ),
            ),
            (
                "body",
                field(
                    "string",
                    "The response body as text, decoded by its charset, its first 60,000 bytes.",
                ),
            ),
            truncated,
        ],
        &[notice],
    )
}

/// The output fields that say whether `text` was clipped to its first
/// 60,000 bytes ([`clip`]): `truncated`, and the optional `notice`.
pub(crate) fn clip_fields(text: &str) -> ((&'static str, Value), (&'static str, Value)) {
    (
        (
            "truncated",
            field(
                "boolean",
                &format!("Whether `{text}` was cut at 60,000 bytes."),
            ),
        ),
        (
            "notice",
            field(
                "string",
                "The bytes kept of how many; present when truncated.",
            ),
        ),
    )
}

/// A response of `status` with a body, clipped or not, for the schema tests.
#[cfg(test)]
pub(crate) fn output_sample(status: u16, clipped: bool) -> Output {
    Output {
        status,
        body: "ok".into(),
        truncated: clipped,
        notice: clipped.then(|| "kept the first 2 of 9 bytes; the rest was cut".into()),
    }
}
