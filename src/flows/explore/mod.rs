//! `explore`: a read-only sub-agent answers a question about the
//! workspace with findings, each citing the `path:line` it rests on.
//!
//! The model is the operator's ([`config`]: a policy's `explore`, or
//! `sluice run --explore-model`); its tools are `read`, `ls`, `glob` and
//! `grep` (and `lsp` when the run has a language server), nothing else: a
//! call of any other tool is refused without running and the refusal goes
//! back to the model. Each model turn and each tool call passes the door as
//! an inner call ([`super::Inner`]: task `TASK.cSEQ`), so the run's policy
//! judges it, the record keeps it under the explore call, and a replay
//! answers the explore call whole from the record. The last answer becomes
//! findings whose citations are checked against the lines the sub-agent
//! was shown ([`findings`]).

pub mod config;
pub mod findings;
pub mod shown;
mod turns;

use super::{closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use crate::kernel::{Action, Capability};
use crate::model::Usage;
pub use config::Config;
use findings::{Dropped, Finding};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// The most characters of a prompt.
pub const MAX_PROMPT_CHARS: usize = 20_000;
/// The tools the sub-agent may use: the read-only flows. `lsp` joins them
/// when the run has it.
pub const TOOLS: [&str; 4] = ["read", "ls", "glob", "grep"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub prompt: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub findings: Vec<Finding>,
    pub dropped: Vec<Dropped>,
    pub turns: u64,
    pub stop_reason: &'static str,
    pub model: String,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct Explore {
    config: Arc<Config>,
    prompt: String,
}

impl Flow for Explore {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "explore",
        description: "Explores the workspace with a read-only sub-agent (read, ls, glob, grep) on the operator's model and returns findings, each citing the path:line it was shown.",
        tier: Tier::Sealed,
        actions: &[Action::ModelCall, Action::FsRead],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::CommandFailed, ErrorCode::RequestFailed, ErrorCode::Timeout, ErrorCode::RateLimited, ErrorCode::ProviderUnavailable, ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        output_schema()
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        samples()
    }

    fn validate(input: &Input) -> FlowResult<()> {
        let n = input.prompt.chars().count();
        if input.prompt.trim().is_empty() || n > MAX_PROMPT_CHARS {
            return Err(FlowError::invalid_input(
                "prompt",
                format!("prompt is empty or over {MAX_PROMPT_CHARS} characters ({n}); ask one question about the workspace"),
            ));
        }
        Ok(())
    }

    fn unavailable(ctx: &Context) -> Option<&'static str> {
        ctx.explore
            .is_none()
            .then_some("no model is named for it (a policy's `explore` table, or --explore-model)")
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let config = ctx.explore.clone().ok_or_else(no_model)?;
        if ctx.models.get(&config.provider).is_none() {
            let e = ctx.models.unknown(&config.provider);
            return Err(FlowError::new(
                e.code,
                format!(
                    "explore's model ({}) is {}/{}: {}",
                    config.from, config.provider, config.model, e.message
                ),
            ));
        }
        let envelope = Envelope {
            network: vec![Capability {
                action: Action::ModelCall,
                resource: format!("{}/{}", config.provider, config.model),
            }],
            ..Envelope::new(Tier::Sealed)
        };
        Ok((
            Explore {
                config,
                prompt: input.prompt,
            },
            envelope,
        ))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        turns::explore(ctx, &self.config, &self.prompt).await
    }
}

/// `provider_unavailable`, saying how the operator names a model.
fn no_model() -> FlowError {
    FlowError::new(
        ErrorCode::ProviderUnavailable,
        format!(
            "explore runs a sub-agent on a model the operator names, and none is named: run with `--explore-model PROVIDER/MODEL` (the provider from --provider or a policy's providers), or declare it in a policy: `{}`",
            config::EXAMPLE
        ),
    )
    .with("field", "explore")
}

/// The audit's one-line gist: the question.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "prompt")
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["prompt"],
        "properties": {
            "prompt": {"type": "string", "maxLength": MAX_PROMPT_CHARS, "description": "The question about the workspace, e.g. \"Where is the retry delay computed?\""}
        }
    })
}

fn output_schema() -> Value {
    let evidence = closed(
        &[
            (
                "path",
                field(
                    "string",
                    "The file, relative to the workspace (absolute outside it).",
                ),
            ),
            ("line", field("integer", "The line, 1-based.")),
            (
                "text",
                field("string", "The line as the sub-agent was shown it."),
            ),
        ],
        &[],
    );
    let finding = closed(
        &[
            ("claim", field("string", "What the sub-agent found.")),
            (
                "evidence",
                list(
                    nested("ExploreEvidence", "A line the claim rests on.", evidence),
                    "The cited lines the sub-agent was shown (others are in `dropped`).",
                ),
            ),
        ],
        &[],
    );
    let dropped = closed(
        &[
            (
                "claim",
                field(
                    "string",
                    "The claim whose citation (or which) was left out.",
                ),
            ),
            ("reason", field("string", "Why it was left out.")),
        ],
        &[(
            "citation",
            field(
                "string",
                "The citation left out, as path:line; absent when the whole finding was.",
            ),
        )],
    );
    let usage = closed(
        &[
            (
                "inputTokens",
                field(
                    "integer",
                    "Tokens of input over all turns, cached ones included.",
                ),
            ),
            (
                "outputTokens",
                field("integer", "Tokens the sub-agent wrote over all turns."),
            ),
            (
                "cachedTokens",
                field(
                    "integer",
                    "Input tokens served from the provider's prompt cache.",
                ),
            ),
        ],
        &[],
    );
    closed(
        &[
            ("findings", list(nested("ExploreFinding", "One finding.", finding), "The findings, each with at least one citation the sub-agent was shown.")),
            ("dropped", list(nested("ExploreDropped", "A citation or finding left out.", dropped), "Citations of lines the sub-agent was never shown, and findings left without any.")),
            ("turns", field("integer", "Model calls made.")),
            ("stopReason", super::choice(&["final", "max_turns", "budget"], "final: the sub-agent answered; max_turns or budget: it was made to answer when its turns or output tokens ran out.")),
            ("model", field("string", "PROVIDER/MODEL the sub-agent ran on.")),
            ("usage", nested("ExploreUsage", "Tokens all its turns used.", usage)),
        ],
        &[("notice", field("string", "Why the answer gave no findings, when it could not be read."))],
    )
}

#[cfg(test)]
fn samples() -> Vec<Output> {
    let usage = Usage {
        input_tokens: 900,
        output_tokens: 80,
        cached_tokens: 0,
    };
    let finding = Finding {
        claim: "mean divides by len + 1".into(),
        evidence: vec![findings::Evidence {
            path: "calc.py".into(),
            line: 3,
            text: "    return sum(v) / (len(v) + 1)".into(),
        }],
    };
    let dropped = |citation: Option<&str>| Dropped {
        claim: "x".into(),
        citation: citation.map(str::to_string),
        reason: "never shown".into(),
    };
    vec![
        Output {
            findings: vec![finding],
            dropped: vec![dropped(Some("calc.py:99")), dropped(None)],
            turns: 3,
            stop_reason: "final",
            model: "local/m".into(),
            usage,
            notice: None,
        },
        Output {
            findings: vec![],
            dropped: vec![],
            turns: 10,
            stop_reason: "max_turns",
            model: "local/m".into(),
            usage,
            notice: Some("no JSON".into()),
        },
    ]
}
