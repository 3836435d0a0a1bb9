//! `http-post`: sends a body, verbatim, and returns the response as `fetch`
//! does. The one network flow declared irreversible: the remote side may
//! have acted. Redirects are not followed (a 3xx is the answer), so a body
//! is never sent a second time, somewhere else.

use super::fetch::{first_hop, request_schema, Output};
use super::{Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::FlowResult;
use crate::kernel::Action;
use crate::net::client::{check_headers, timeout};
use crate::net::destination::{self, Destination};
use crate::net::{Method, Outgoing};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: String,
    pub content_type: Option<String>,
    pub timeout: Option<f64>,
}

pub struct HttpPost {
    dest: Destination,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Duration,
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

impl Flow for HttpPost {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "http-post",
        description: "Posts a body verbatim to a URL and returns the response status and body as text; an error status is a value.",
        tier: Tier::Irreversible,
        actions: &[Action::NetPost, Action::NetPrivate],
        read_only: false,
        schema,
    };

    fn plan(_ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let dest = destination::parse("url", &input.url)?;
        let envelope = first_hop(Action::NetPost, &dest);
        let mut headers = input.headers;
        if headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("content-type"))
            && input.content_type.is_some()
        {
            return Err(crate::error::FlowError::invalid_input(
                "contentType",
                "give the content type once: in `contentType` or in `headers`, not both",
            ));
        }
        if !headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("content-type"))
        {
            let ct = input
                .content_type
                .unwrap_or_else(|| "application/json".into());
            headers.insert("content-type".into(), ct);
        }
        let call = HttpPost {
            dest,
            headers: check_headers(&headers)?,
            body: input.body.into_bytes(),
            timeout: timeout("timeout", input.timeout)?,
        };
        Ok((call, envelope))
    }

    async fn execute(self, ctx: &Context) -> FlowResult<Output> {
        let resp = ctx
            .net
            .send(
                Outgoing {
                    method: Method::Post,
                    dest: self.dest,
                    headers: self.headers,
                    body: Some(self.body),
                    timeout: self.timeout,
                    max_redirects: 0,
                },
                ctx,
            )
            .await?;
        Ok(Output::of(&resp))
    }
}
