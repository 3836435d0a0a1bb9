//! `ls`: one page of a folder's entries, sorted by name, each with its kind.

use super::files::Files;
use super::lines::positive;
use super::{choice, closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::Target;
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Entries in one page, at most.
pub const PAGE_ENTRIES: u64 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub path: Option<String>,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

#[derive(Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub name: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub kind: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Output {
    pub entries: Vec<Entry>,
    pub total: u64,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct Ls {
    target: Target,
    offset: u64,
    limit: u64,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "description": "Folder to list, relative to the workspace or absolute. Default: the workspace."},
            "offset": {"type": "integer", "minimum": 1, "description": "First entry of the page, 1-based. Default 1."},
            "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_ENTRIES, "description": "Entries in the page, at most 1000. Default 1000."}
        }
    })
}

/// The audit's one-line gist of an input: the folder it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "path")
}

impl Flow for Ls {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "ls",
        description: "Lists one page of a folder's entries, sorted by name, each with its kind (file, directory, symlink, other).",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[
            ErrorCode::NotFound,
            ErrorCode::NotADirectory,
            ErrorCode::OffsetOutOfRange,
            ErrorCode::CommandFailed,
            ErrorCode::ProviderUnavailable,
        ],
    };

    fn output_schema() -> Value {
        let entry = closed(
            &[
                ("name", field("string", "The entry's name in the folder.")),
                (
                    "kind",
                    choice(
                        &["file", "directory", "symlink", "other"],
                        "What the entry is; a symlink is not followed.",
                    ),
                ),
            ],
            &[],
        );
        closed(
            &[
                (
                    "entries",
                    list(
                        nested("LsEntry", "One entry of the folder.", entry),
                        "The page's entries, sorted by name.",
                    ),
                ),
                ("total", field("integer", "Entries in the whole folder.")),
                (
                    "truncated",
                    field(
                        "boolean",
                        "Whether entries lie outside the page; `notice` then says how to page on.",
                    ),
                ),
            ],
            &[(
                "notice",
                field(
                    "string",
                    "Which entries the page shows out of how many; present when truncated.",
                ),
            )],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let page = |notice: Option<&str>| Output {
            entries: vec![Entry {
                name: "a.txt".into(),
                kind: "file",
            }],
            total: 2,
            truncated: notice.is_some(),
            notice: notice.map(String::from),
        };
        vec![page(Some("entries 1-1 of 2")), page(None)]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        positive("offset", input.offset)?;
        positive("limit", input.limit)?;
        match input.limit {
            Some(n) if n > PAGE_ENTRIES => Err(FlowError::invalid_input(
                "limit",
                format!("`limit` is at most {PAGE_ENTRIES}; page on with `offset` instead."),
            )),
            _ => Ok(()),
        }
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve_file("path", input.path.as_deref().unwrap_or("."))?;
        let envelope = Envelope {
            tier: Tier::Sealed,
            reads: vec![ctx.fs_name(&target.real)],
            writes: vec![],
            commands: vec![],
            network: vec![],
            cwd: None,
            container: None,
            anywhere: false,
        };
        let call = Ls {
            target,
            offset: input.offset.unwrap_or(1),
            limit: input.limit.unwrap_or(PAGE_ENTRIES),
        };
        Ok((call, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let files = Files::of(ctx).await?;
        let (t, found) = files.entries(ctx, &self.target).await?;
        let Some(found) = found else {
            return Err(FlowError::new(
                ErrorCode::NotADirectory,
                format!("{} is not a folder; read it with read.", t.shown.display()),
            )
            .with("path", t.shown.display().to_string()));
        };
        let mut entries: Vec<Entry> = found
            .into_iter()
            .map(|(name, kind)| Entry { name, kind })
            .collect();
        entries.sort();
        self.page(entries)
    }
}

impl Ls {
    fn page(&self, entries: Vec<Entry>) -> FlowResult<Output> {
        let total = entries.len() as u64;
        if self.offset > total.max(1) {
            return Err(FlowError::new(
                ErrorCode::OffsetOutOfRange,
                format!(
                    "offset {} is past the end of {}, which holds {total} entries.",
                    self.offset,
                    self.target.shown.display()
                ),
            )
            .with("offset", self.offset)
            .with("total", total));
        }
        let entries: Vec<Entry> = entries
            .into_iter()
            .skip((self.offset - 1) as usize)
            .take(self.limit as usize)
            .collect();
        let last = self.offset - 1 + entries.len() as u64;
        let notice = (last < total).then(|| {
            format!(
                "Showing entries {}-{last} of {total}. Continue with offset = {}.",
                self.offset,
                last + 1
            )
        });
        Ok(Output {
            entries,
            total,
            truncated: notice.is_some(),
            notice,
        })
    }
}
