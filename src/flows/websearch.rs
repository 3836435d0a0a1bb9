//! `websearch`: a query to the search provider the host bound, and its
//! results as title, URL, snippet and (when known) publication date.
//!
//! sluice has no built-in provider ([`crate::net::search`]); with none
//! bound the call is `provider_unavailable` before anything is authorized.
//! A provider's contract needs `net:post` authority (Exa takes a POST), so
//! the envelope asks `net:post:<endpoint>` and the flow is not in the
//! read-only set, though it changes nothing here (tier sealed).

use super::{closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use crate::kernel::{Action, Capability};
use crate::net::search::{Freshness, Hit, Provider, Query};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// Results when the caller does not say.
pub const DEFAULT_RESULTS: i64 = 8;
/// The most a caller may ask for.
pub const MAX_RESULTS: i64 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub query: String,
    pub num_results: Option<i64>,
    pub freshness: Option<Freshness>,
}

#[derive(Debug, Serialize)]
pub struct Output {
    pub results: Vec<Hit>,
}

pub struct WebSearch {
    provider: Arc<dyn Provider>,
    query: Query,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What to search for."},
            "numResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many results to return, 1 through 20 (default 8)."},
            "freshness": {"type": "string", "enum": ["day", "week", "month", "year"], "description": "Only results published within the last day, week, month or year."}
        }
    })
}

/// The audit's one-line gist of an input: the query it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "query")
}

impl Flow for WebSearch {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "websearch",
        description: "Searches the web through the host's search provider and returns titles, URLs, snippets and publication dates.",
        tier: Tier::Sealed,
        actions: &[Action::NetPost, Action::NetPrivate],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::CommandFailed, ErrorCode::RequestFailed, ErrorCode::Timeout, ErrorCode::RateLimited, ErrorCode::ProviderUnavailable, ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        let hit = closed(
            &[
                ("title", field("string", "The page's title.")),
                ("url", field("string", "The page's URL.")),
                (
                    "snippet",
                    field(
                        "string",
                        "What the provider quotes of the page, trimmed, at most 2,000 characters.",
                    ),
                ),
            ],
            &[(
                "publishedAt",
                field(
                    "string",
                    "When the page was published, as the provider wrote it; absent when unknown.",
                ),
            )],
        );
        closed(
            &[(
                "results",
                list(
                    nested("SearchResult", "One result.", hit),
                    "The results, best first, at most numResults.",
                ),
            )],
            &[],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let hit = |published_at: Option<&str>| Hit {
            title: "Lua".into(),
            url: "https://www.lua.org/".into(),
            snippet: "The programming language Lua".into(),
            published_at: published_at.map(String::from),
        };
        vec![Output {
            results: vec![hit(Some("2024-03-04T00:00:00")), hit(None)],
        }]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        if input.query.trim().is_empty() {
            return Err(FlowError::invalid_input(
                "query",
                "query is empty; say what to search for",
            ));
        }
        if let Some(n) = input.num_results {
            if !(1..=MAX_RESULTS).contains(&n) {
                return Err(FlowError::invalid_input(
                    "numResults",
                    format!("numResults is 1 through {MAX_RESULTS} (default {DEFAULT_RESULTS}); got {n}"),
                ));
            }
        }
        Ok(())
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let provider = ctx.net.search().cloned().ok_or_else(|| {
            FlowError::new(
                ErrorCode::ProviderUnavailable,
                "no search provider is bound; run with --search exa or --search searxng=URL",
            )
        })?;
        let envelope = Envelope {
            tier: Tier::Sealed,
            reads: vec![],
            writes: vec![],
            commands: vec![],
            network: vec![Capability {
                action: Action::NetPost,
                resource: provider.endpoint().resource.clone(),
            }],
            cwd: None,
            container: None,
            anywhere: false,
        };
        let query = Query {
            query: input.query,
            num_results: input.num_results.unwrap_or(DEFAULT_RESULTS) as usize,
            freshness: input.freshness,
        };
        Ok((WebSearch { provider, query }, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let results = self.provider.search(&self.query, &ctx.net, ctx).await?;
        Ok(Output { results })
    }
}
