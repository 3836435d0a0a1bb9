//! `webfetch`: a page rendered for reading. HTML becomes Markdown (default)
//! or plain text; other text passes through as it arrived; binaries are
//! refused. Up to 10 redirects are followed, each one checked.

pub mod html;

use super::http::{clip_fields, request_schema, text_of, Request};
use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::credentials::Held;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use crate::net::{clip, Incoming, Method};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Markdown,
    Text,
    Html,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub url: String,
    #[serde(default)]
    pub format: Format,
    #[serde(default)]
    pub headers: BTreeMap<String, Held>,
    pub timeout: Option<f64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// Where the last redirect ended.
    pub url: String,
    pub status: u16,
    pub content_type: String,
    pub content: String,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct WebFetch {
    request: Request,
    format: Format,
}

fn schema() -> Value {
    let mut props = request_schema();
    props.insert(
        "format".into(),
        json!({"type": "string", "enum": ["markdown", "text", "html"], "description": "How an HTML page comes back (default markdown); other text passes through."}),
    );
    json!({"type": "object", "additionalProperties": false, "required": ["url"], "properties": props})
}

/// The audit's one-line gist of an input: the URL it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "url")
}

impl Flow for WebFetch {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "webfetch",
        description: "Fetches a web page and returns it as Markdown, plain text or HTML, following up to 10 redirects.",
        tier: Tier::Sealed,
        actions: &[Action::NetGet, Action::NetPrivate, Action::CredUse],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::CommandFailed, ErrorCode::RequestFailed, ErrorCode::Timeout, ErrorCode::ProviderUnavailable, ErrorCode::UnsupportedContentType, ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        let (truncated, notice) = clip_fields("content");
        closed(
            &[
                ("url", field("string", "Where the last redirect ended.")),
                ("status", field("integer", "The HTTP status; an error status is a value, not an error.")),
                ("contentType", field("string", "The media type, lower-cased, without parameters (text/plain when the server named none).")),
                ("content", field("string", "The body, its first 60,000 bytes: an HTML page rendered in `format`, other text as it came.")),
                truncated,
            ],
            &[notice],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let page = |notice: Option<&str>| Output {
            url: "https://example.org/".into(),
            status: 200,
            content_type: "text/html".into(),
            content: "# Example".into(),
            truncated: notice.is_some(),
            notice: notice.map(String::from),
        };
        vec![
            page(Some("kept the first 9 of 20 bytes; the rest was cut")),
            page(None),
        ]
    }

    fn plan(_ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let mut headers = input.headers;
        if !headers.keys().any(|k| k.eq_ignore_ascii_case("accept")) {
            let accept = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5";
            headers.insert("accept".into(), Held::Text(accept.into()));
        }
        let (request, envelope) =
            Request::plan(Action::NetGet, &input.url, &headers, input.timeout)?;
        let format = input.format;
        Ok((WebFetch { request, format }, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let resp = self.request.send(ctx, Method::Get, None, 10).await?;
        let content_type = kind_of(&resp)?;
        let text = text_of(&resp);
        let is_html = content_type.contains("html");
        let content = match self.format {
            Format::Markdown if is_html => html::to_markdown(&text, Some(&resp.url)),
            Format::Text if is_html => html::to_text(&text),
            _ => text,
        };
        let c = clip(content);
        Ok(Output {
            url: resp.url.to_string(),
            status: resp.status,
            content_type,
            content: c.text,
            truncated: c.truncated,
            notice: c.notice,
        })
    }
}

/// The media type, when it is text sluice can render: `text/*`, or any
/// type carrying `json` or `xml`. Without a content type, a body that is
/// UTF-8 without NUL bytes is taken as `text/plain`.
fn kind_of(resp: &Incoming) -> FlowResult<String> {
    let media = match resp.content_type() {
        Some(ct) => ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
        None if std::str::from_utf8(&resp.body).is_ok() && !resp.body.contains(&0) => {
            return Ok("text/plain".into())
        }
        None => String::new(),
    };
    if media.starts_with("text/") || media.contains("json") || media.contains("xml") {
        return Ok(media);
    }
    let shown = if media.is_empty() {
        "no content type and binary bytes".to_string()
    } else {
        media.clone()
    };
    Err(FlowError::new(
        ErrorCode::UnsupportedContentType,
        format!(
            "{} answered with {shown}; webfetch renders text (text/*, JSON, XML), not binaries",
            resp.url
        ),
    )
    .with("contentType", media))
}
