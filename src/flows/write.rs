//! `write`: replace a whole file, or create it with its parent folders.
//!
//! The bytes are staged beside the file and renamed over it under the file's
//! lock, so a crash leaves the old bytes or the new ones, never a mix.

use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::{atomic, lock::FileLock, path::io_error, text, Target};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fs;
use std::io;

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
            &[],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        vec![Output {
            bytes_written: 3,
            created: true,
        }]
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve("path", &input.path)?;
        let envelope = Envelope {
            tier: Tier::Compensable,
            reads: vec![],
            writes: vec![target.real.clone()],
            commands: vec![],
            network: vec![],
            cwd: None,
            container: None,
        };
        Ok((
            Write {
                target,
                content: input.content,
            },
            envelope,
        ))
    }

    async fn execute(self, _ctx: &Context, _: Authorized) -> FlowResult<Output> {
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
        let existing = existing_file(t)?;
        if existing.is_none() {
            if let Some(parent) = t.real.parent() {
                fs::create_dir_all(parent).map_err(|e| io_error(t, "create the folders of", e))?;
            }
        }
        let _lock = FileLock::acquire(t)?;
        // Looked at again under the lock: another writer may have created it.
        let existing = existing_file(t)?;
        atomic::replace(&t.real, self.content.as_bytes(), existing.as_ref())
            .map_err(|e| io_error(t, "write", e))?;
        Ok(Output {
            bytes_written: self.content.len() as u64,
            created: existing.is_none(),
        })
    }
}

/// The metadata of the file being replaced; a directory is `command_failed`.
fn existing_file(t: &Target) -> FlowResult<Option<fs::Metadata>> {
    match fs::metadata(&t.real) {
        Ok(m) if m.is_dir() => Err(FlowError::new(
            ErrorCode::CommandFailed,
            format!(
                "{} is a directory; write replaces files only. Name a file inside it.",
                t.shown.display()
            ),
        )
        .with("path", t.shown.display().to_string())),
        Ok(m) => text::check_regular(t, &m).map(|()| Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(t, "write", e)),
    }
}
