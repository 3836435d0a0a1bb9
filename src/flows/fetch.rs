//! `fetch`: a raw GET whose body comes back as text. An error status is a
//! value; only a transport failure, a refusal, a timeout or a body over
//! 5 MiB use the error channel.

use super::http::{request_schema, response_schema, Output, Request};
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
#[serde(deny_unknown_fields)]
pub struct Input {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, Held>,
    /// Seconds.
    pub timeout: Option<f64>,
}

pub struct Fetch {
    request: Request,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["url"],
        "properties": request_schema(),
    })
}

/// The audit's one-line gist of an input: the URL it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "url")
}

impl Flow for Fetch {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "fetch",
        description: "Gets a URL and returns its status and body as text (the first 60,000 bytes); an error status is a value.",
        tier: Tier::Sealed,
        actions: &[Action::NetGet, Action::NetPrivate, Action::CredUse],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[crate::error::ErrorCode::CommandFailed, crate::error::ErrorCode::RequestFailed, crate::error::ErrorCode::Timeout, crate::error::ErrorCode::ProviderUnavailable, crate::error::ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        response_schema()
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        use super::http::output_sample;
        vec![output_sample(200, true), output_sample(404, false)]
    }

    fn plan(_ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let (request, envelope) =
            Request::plan(Action::NetGet, &input.url, &input.headers, input.timeout)?;
        Ok((Fetch { request }, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let resp = self.request.send(ctx, Method::Get, None, 10).await?;
        Ok(Output::of(&resp))
    }
}
