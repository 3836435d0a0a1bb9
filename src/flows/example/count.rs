//! `count`: how many lines a file has. Not a shipped flow: the worked
//! example of ARCHITECTURE.md ("A new flow"), compiled and called through
//! the pipeline by `pipeline::tests`, so the example cannot rot.

use super::super::lines::count_lines;
use super::super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::call::Action;
use crate::error::FlowResult;
use crate::fsops::{text, Target};
use crate::kernel::gate::Authorized;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    path: String,
}

#[derive(Serialize)]
pub struct Output {
    lines: u64,
}

pub struct Count {
    target: Target,
}

impl Flow for Count {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "count",
        description: "Counts the lines of a UTF-8 text file.",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[],
    };

    fn output_schema() -> Value {
        closed(&[("lines", field("integer", "Lines in the file."))], &[])
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        vec![Output { lines: 3 }]
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve("path", &input.path)?;
        let envelope = Envelope {
            reads: vec![target.real.clone()],
            ..Envelope::new(Tier::Sealed)
        };
        Ok((Count { target }, envelope))
    }

    async fn execute(self, _ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let file = text::load(&self.target)?;
        Ok(Output {
            lines: count_lines(&file.text),
        })
    }
}

/// The audit's one-line gist of an input: the file it counts.
fn summary(input: &Value) -> String {
    super::super::field_or_json(input, "path")
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path"],
        "properties": {"path": {"type": "string", "description": "The file, relative to the workspace or absolute."}},
    })
}
