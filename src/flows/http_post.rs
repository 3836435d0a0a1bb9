//! `http-post`: sends a body, verbatim, and returns the response as `fetch`
//! does. The one network flow declared irreversible: the remote side may
//! have acted. Redirects are not followed (a 3xx is the answer), so a body
//! is never sent a second time, somewhere else.

use super::http::{request_schema, Output, Request};
use super::{Context, Envelope, Flow, FlowSpec, Tier};
use crate::credentials::Held;
use crate::error::FlowResult;
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use crate::net::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, Held>,
    #[serde(default)]
    pub body: String,
    pub content_type: Option<String>,
    pub timeout: Option<f64>,
}

pub struct HttpPost {
    request: Request,
    body: Vec<u8>,
}

fn schema() -> Value {
    let mut props = request_schema();
    props.insert(
        "body".into(),
        json!({"type": "string", "description": "Sent verbatim."}),
    );
    props.insert(
        "contentType".into(),
        json!({"type": "string", "description": "The content-type header (default application/json)."}),
    );
    json!({"type": "object", "additionalProperties": false, "required": ["url"], "properties": props})
}

/// The audit's one-line gist of an input: the URL it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "url")
}

impl Flow for HttpPost {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "http-post",
        description: "Posts a body verbatim to a URL and returns the response status and body as text; an error status is a value.",
        tier: Tier::Irreversible,
        actions: &[Action::NetPost, Action::NetPrivate, Action::CredUse],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[crate::error::ErrorCode::CommandFailed, crate::error::ErrorCode::RequestFailed, crate::error::ErrorCode::Timeout, crate::error::ErrorCode::ProviderUnavailable, crate::error::ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        super::http::response_schema()
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        use super::http::output_sample;
        vec![output_sample(201, true), output_sample(500, false)]
    }

    fn plan(_ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let named =
            |h: &BTreeMap<String, Held>| h.keys().any(|k| k.eq_ignore_ascii_case("content-type"));
        let mut headers = input.headers;
        match (named(&headers), input.content_type) {
            (true, Some(_)) => {
                return Err(crate::error::FlowError::invalid_input(
                    "contentType",
                    "give the content type once: in `contentType` or in `headers`, not both",
                ))
            }
            (true, None) => {}
            (false, ct) => {
                let ct = ct.unwrap_or_else(|| "application/json".into());
                headers.insert("content-type".into(), Held::Text(ct));
            }
        }
        let (request, envelope) =
            Request::plan(Action::NetPost, &input.url, &headers, input.timeout)?;
        let body = input.body.into_bytes();
        Ok((HttpPost { request, body }, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let resp = self
            .request
            .send(ctx, Method::Post, Some(self.body), 0)
            .await?;
        Ok(Output::of(&resp))
    }
}
