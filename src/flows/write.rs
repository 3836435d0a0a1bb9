//! `write`: replace a whole file, or create it with its parent folders.
//!
//! The bytes are staged beside the file and renamed over it under the file's
//! lock, so a crash leaves the old bytes or the new ones, never a mix.

use super::files::{Existing, Files};
use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::Target;
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub bytes_written: u64,
    pub created: bool,
    /// What the language server bound to the file says now; absent when
    /// the run declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::langserver::Diagnostics>,
}

pub struct Write {
    target: Target,
    content: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path", "content"],
        "properties": {
            "path": {"type": "string", "description": "File to write, relative to the workspace or absolute. Missing parent folders are created."},
            "content": {"type": "string", "description": "The whole new contents, written byte for byte."}
        }
    })
}

/// The audit's one-line gist of an input: the file it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "path")
}

impl Flow for Write {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "write",
        description: "Writes a whole file atomically, creating it and its parent folders if needed and keeping an existing file's mode.",
        tier: Tier::Compensable,
        actions: &[Action::FsWrite],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[
            ErrorCode::NotAFile,
            ErrorCode::NotADirectory,
            ErrorCode::NoMatch,
            ErrorCode::CommandFailed,
            ErrorCode::ProviderUnavailable,
        ],
    };

    fn output_schema() -> Value {
        closed(
            &[
                (
                    "bytesWritten",
                    field("integer", "Bytes the file now holds."),
                ),
                (
                    "created",
                    field("boolean", "Whether the file did not exist before."),
                ),
            ],
            &[("diagnostics", super::langserver::diagnostics::schema())],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let with = super::langserver::diagnostics::samples()
            .into_iter()
            .map(|d| Output {
                bytes_written: 3,
                created: false,
                diagnostics: Some(d),
            });
        let mut out = vec![Output {
            bytes_written: 3,
            created: true,
            diagnostics: None,
        }];
        out.extend(with);
        out
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve_file("path", &input.path)?;
        let envelope = Envelope {
            tier: Tier::Compensable,
            reads: vec![],
            writes: vec![ctx.fs_name(&target.real)],
            commands: vec![],
            network: vec![],
            cwd: None,
            container: None,
            anywhere: false,
        };
        Ok((
            Write {
                target,
                content: input.content,
            },
            envelope,
        ))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let t = &self.target;
        if t.names_folder {
            return Err(FlowError::new(
                ErrorCode::CommandFailed,
                format!(
                    "{}/ ends in a slash, so it names a folder; write replaces files only. Drop the slash to name a file.",
                    t.shown.display()
                ),
            )
            .with("path", t.shown.display().to_string()));
        }
        let files = Files::of(ctx).await?;
        let (t, existing) = existing_file(&files, ctx, t).await?;
        if existing.is_none() {
            // The lock lives beside the file: its folder must exist first.
            files.make_parent(&t)?;
        }
        let lock = files.lock(&t)?;
        // Looked at again under the lock: another writer may have created
        // it. Without a lock (a container's file) the first look stands.
        let (t, existing) = match &lock {
            Some(_) => existing_file(&files, ctx, &t).await?,
            None => (t, existing),
        };
        files
            .replace(&t, self.content.as_bytes(), existing.as_ref())
            .await?;
        // The server reads the file as written; other writers need not
        // wait for it.
        drop(lock);
        Ok(Output {
            bytes_written: self.content.len() as u64,
            created: existing.is_none(),
            diagnostics: super::langserver::after_change(ctx, &t.real).await,
        })
    }
}

/// What is at `t` before the write; a folder is refused.
async fn existing_file(
    files: &Files,
    ctx: &Context,
    t: &Target,
) -> FlowResult<(Target, Option<Existing>)> {
    let (t, existing) = files.existing(ctx, t).await?;
    match existing {
        Some((_, true)) => Err(FlowError::new(
            ErrorCode::CommandFailed,
            format!(
                "{} is a directory; write replaces files only. Name a file inside it.",
                t.shown.display()
            ),
        )
        .with("path", t.shown.display().to_string())),
        Some((e, false)) => Ok((t, Some(e))),
        None => Ok((t, None)),
    }
}
