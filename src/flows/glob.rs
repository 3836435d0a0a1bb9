//! `glob`: the paths under a folder that match a glob, sorted, found by a
//! walk that lists each folder by descriptor ([`Tree`]), with `.gitignore`
//! and `.ignore` files counting as they do for `rg --files` (ripgrep's
//! matcher, the `ignore` crate's).
//!
//! What a caller can rely on (shared with `grep`, which walks the same way;
//! the walk itself lives here as [`Tree`]):
//!
//! - **Matching.** `pattern` is matched against each path relative to `root`,
//!   with `/` between folders: `*` and `?` stay inside one name, `**` crosses
//!   folders, `{a,b}` and `[ab]` work, `\` escapes. So `*.rs` matches only
//!   files directly in `root`; `**/*.rs` matches at any depth. An absolute
//!   pattern is `invalid_input` (give `root` instead); a pattern that does not
//!   parse is `invalid_pattern` with the glob engine's message.
//! - **What is listed.** Everything that is not a folder: files, symlinks
//!   (listed, never followed) and special files (FIFOs, sockets). Folders are
//!   not listed (`ls` lists them); their contents are.
//! - **Paths** are relative to the workspace when inside it, absolute
//!   otherwise, with `/` between names, so they go straight back into `read`
//!   or `edit`. The root is canonical: a root given through a symlink shows
//!   its target. Output is sorted bytewise (`a.txt` before `a/b`, since `.`
//!   sorts before `/`), so the same tree always gives the same page.
//! - **Ignore files.** `.gitignore`, `.ignore` and `.git/info/exclude` inside
//!   `root` count, in a git repository or not (`require_git(false)`); so do
//!   the `.gitignore` and `.ignore` of the folders between the workspace and
//!   `root`, when `root` is inside the workspace (nothing above the workspace
//!   is read, nor the user's global git excludes, which the call never
//!   declared). A `!` rule inside `root` cannot re-include what such an outer
//!   file ignores, and the root itself is walked even if an outer file
//!   ignores it (`rg PATTERN target` does the same). `noIgnore = true` turns
//!   every ignore file off.
//! - **Hidden names** (starting with `.`) are skipped unless `hidden = true`.
//!   `.git` (a folder, or the file a worktree has) and `.sluice` (the audit
//!   store) are always skipped, `hidden` or not.
//! - **Symlinks are not followed**, to folders or files, so a link loop cannot
//!   make the walk run forever, and a link cannot lead the walk out of `root`:
//!   each folder is opened inside the one that listed it, never through a
//!   link, so a folder swapped for a link while the walk runs is not entered
//!   either (it counts in `skippedUnreadable`).
//! - **Policy.** The call needs `fs:read` on `root` (its envelope). Inside it,
//!   each path is checked again through the kernel without asking anyone
//!   (symlinks by the path they resolve to): what a rule or hook denies (say
//!   `fs:read:**/.env`) is skipped, never listed, and only counted in
//!   `skippedDenied`. An ask is not a refusal here: the root was authorized.
//! - **Hostile names.** A name that is not UTF-8 or holds a control character
//!   (U+0000-U+001F, U+007F-U+009F, newline and escape included) is skipped,
//!   with what is below it, and counted in `skippedNames`: such a name can
//!   not be named to the policy or shown without being mangled, and a
//!   mangled path would not reach the file again.
//! - **Unreadable entries** (a folder without permission, a file that vanished
//!   mid-walk) do not fail the call: they are counted in `skippedUnreadable`
//!   and the notice names the first few.
//! - **Limits.** `limit` is at most and by default 1,000 paths; `total` counts
//!   every match (denied ones excluded) and the notice says how to narrow
//!   when paths were cut. Only the first `limit` paths are held while the
//!   walk runs, so a huge tree costs time, not memory.
//! - **Deadline.** `timeoutMs` (default 60,000, at most 600,000) bounds the
//!   walk, and a stop request (SIGINT, SIGTERM) ends it too: the walker
//!   threads look at every entry, and the call returns at once either way,
//!   with the `timeout` error carrying what was found so far in the fields a
//!   finished call returns (`paths`, `total`, ...), see [`super::deadline`].
//! - **Output shape.** `paths`, `total`, `truncated`, `skippedDenied`,
//!   `skippedUnreadable`, `skippedNames`, and `notice` when something was cut
//!   or skipped (or nothing matched a pattern that only looks at the top).

use super::deadline::{check_timeout, Deadline};
use super::files::{settle_in, Files};
use super::lines::positive;
use super::walk::{
    hear, inbox, plural, skipped_fields, thousands, threads, Abandon, Found, Heard, Skipped, Tree,
};
use super::{closed, field, list, Context, Envelope, Flow, FlowSpec, Tier};
use crate::container::ContainerFiles;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::path::{io_error, not_found_near};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BinaryHeap;
use std::path::Path;

/// Paths in one answer, at most, and by default.
pub const MAX_PATHS: u64 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub pattern: String,
    pub root: Option<String>,
    pub hidden: Option<bool>,
    pub no_ignore: Option<bool>,
    pub limit: Option<u64>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub paths: Vec<String>,
    /// Every path that matched, before `limit`.
    pub total: u64,
    pub truncated: bool,
    pub skipped_denied: u64,
    pub skipped_unreadable: u64,
    pub skipped_names: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct Glob {
    tree: Tree,
    pattern: String,
    matcher: globset::GlobMatcher,
    limit: u64,
    timeout_ms: Option<u64>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "Glob matched against paths relative to root: `*` stays in one folder, `**` crosses folders, e.g. `**/*.rs` or `src/*/mod.rs`."},
            "root": {"type": "string", "description": "Folder to search, relative to the workspace or absolute. Default: the workspace."},
            "hidden": {"type": "boolean", "description": "Include names starting with `.` (`.git` and `.sluice` never). Default false."},
            "noIgnore": {"type": "boolean", "description": "Disregard .gitignore, .ignore and .git/info/exclude. Default false."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PATHS, "description": "Paths returned, at most 1000. Default 1000."},
            "timeoutMs": {"type": "integer", "minimum": 1, "maximum": super::deadline::MAX_TIMEOUT_MS, "description": "Milliseconds the walk may take (default 60000, at most 600000); past it the call fails with `timeout`, carrying the paths found so far."}
        }
    })
}

impl Flow for Glob {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "glob",
        description: "Finds the paths under a folder that match a glob, sorted, honoring .gitignore and .ignore, skipping what the policy denies.",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
        summary: super::walk::summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[
            ErrorCode::NotFound,
            ErrorCode::NotADirectory,
            ErrorCode::InvalidPattern,
            ErrorCode::CommandFailed,
            ErrorCode::Timeout,
            ErrorCode::ProviderUnavailable,
        ],
    };

    fn output_schema() -> Value {
        let [denied, unreadable, names] = skipped_fields();
        closed(
            &[
                ("paths", list(json!({"type": "string"}), "The matching paths, relative to the workspace (absolute outside it), sorted.")),
                ("total", field("integer", "Every path that matched, before `limit`.")),
                ("truncated", field("boolean", "Whether paths were left out for `limit`.")),
                denied,
                unreadable,
                names,
            ],
            &[("notice", field("string", "What was cut or skipped, or why nothing matched; present when there is something to say."))],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let found = |notice: Option<&str>| Output {
            paths: vec!["a.rs".into()],
            total: 1,
            truncated: false,
            skipped_denied: 0,
            skipped_unreadable: 0,
            skipped_names: 0,
            notice: notice.map(String::from),
        };
        vec![found(Some("1 path skipped")), found(None)]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        positive("limit", input.limit)?;
        check_timeout(input.timeout_ms)?;
        if input.limit.is_some_and(|n| n > MAX_PATHS) {
            return Err(FlowError::invalid_input(
                "limit",
                format!("`limit` is at most {MAX_PATHS}; narrow `pattern` or `root` instead."),
            ));
        }
        if input.pattern.is_empty() {
            return Err(FlowError::invalid_input(
                "pattern",
                "`pattern` is empty: give a glob such as `**/*.rs`.",
            ));
        }
        if input.pattern.starts_with('/') {
            return Err(FlowError::invalid_input(
                "pattern",
                format!(
                    "`pattern` is matched against paths relative to `root`, so it cannot be absolute: \
                     give the folder as `root` and a relative pattern, e.g. root = \"/abs/dir\", pattern = \"**/*.rs\" (got {:?}).",
                    input.pattern
                ),
            ));
        }
        Ok(())
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let matcher = GlobBuilder::new(&input.pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                FlowError::new(
                    ErrorCode::InvalidPattern,
                    format!("`pattern` is not a valid glob: {}", e.kind()),
                )
                .with("pattern", input.pattern.clone())
            })?
            .compile_matcher();
        let target = ctx.resolve_file("root", input.root.as_deref().unwrap_or("."))?;
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
        let call = Glob {
            tree: Tree::new(ctx, target, input.hidden, input.no_ignore),
            pattern: input.pattern,
            matcher,
            limit: input.limit.unwrap_or(MAX_PATHS),
            timeout_ms: input.timeout_ms,
        };
        Ok((call, envelope))
    }

    async fn execute(mut self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        if let Files::Container(c) = Files::of(ctx).await? {
            return self.in_container(ctx, &c).await;
        }
        let t = &self.tree.target;
        let meta =
            crate::fsops::checked::metadata(&t.real).map_err(|e| io_error(t, "search", e))?;
        if !meta.is_dir() {
            return Err(not_a_folder(t));
        }
        let deadline = Deadline::after(self.timeout_ms);
        let _abandon = Abandon::new(&deadline);
        let outer = self.tree.outer_ignores(ctx);
        let Glob {
            tree,
            pattern,
            matcher,
            limit,
            ..
        } = self;
        let (tx, mut rx) = inbox::<Vec<Found>>();
        // The walk runs on its own threads, which the call does not wait for
        // once its deadline passes: they stop at their next entry.
        let walk = {
            let deadline = deadline.clone();
            std::thread::Builder::new()
                .name("sluice-glob".into())
                .spawn(move || {
                    let root = tree.target.real.clone();
                    tree.walk(threads(), outer, None, &deadline, |batch| {
                        let hits: Vec<Found> = batch
                            .into_iter()
                            .filter(|f| matcher.is_match(f.rel(&root)))
                            .collect();
                        if !hits.is_empty() {
                            let _ = tx.send(hits);
                        }
                    })
                })
                .map_err(|e| {
                    FlowError::new(
                        ErrorCode::CommandFailed,
                        format!("glob: cannot start the walk: {e}"),
                    )
                })?
        };
        let mut found = Listing {
            first: BinaryHeap::new(),
            total: 0,
            limit,
            skipped: Skipped::default(),
        };
        // On the run's thread (the kernel's): the policy check.
        let stopped = loop {
            match hear(&mut rx).await {
                Heard::Message(batch) => {
                    // A decision can take a while (a policy's hook): the
                    // deadline is looked at between two.
                    for f in batch {
                        if deadline.passed() {
                            break;
                        }
                        found.add(ctx, f);
                    }
                }
                Heard::Quiet => {}
                // The walkers also stop at the deadline: their hanging up
                // then means a partial walk, which is a timeout, not a
                // success with fewer paths.
                Heard::Closed => break deadline.passed(),
            }
            if deadline.passed() {
                break true;
            }
        };
        if stopped {
            let total = found.total;
            let out = found.finish(&pattern);
            let value = serde_json::to_value(&out).expect("glob output serializes");
            return Err(deadline.error(
                "glob",
                &format!("found {} so far", plural(total, "matching path")),
                value,
                "Narrow `root` or `pattern`",
            ));
        }
        let walked = match walk.join() {
            Ok(w) => w,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        found.skipped.add(walked);
        Ok(found.finish(&pattern))
    }
}

impl Glob {
    /// The glob over a container's tree: one `find` lists it, then the
    /// same matcher, policy check and bounds as on the host.
    async fn in_container(&mut self, ctx: &Context, c: &ContainerFiles) -> FlowResult<Output> {
        let (settled, probe) = settle_in(c, ctx, &self.tree.target, &[Action::FsRead]).await?;
        match probe.found {
            None => return Err(not_found_near(&settled, Path::new(&probe.nearest))),
            Some(f) if f.kind != crate::container::files::Kind::Dir => {
                return Err(not_a_folder(&settled))
            }
            Some(_) => {}
        }
        self.tree.target = settled;
        let listing = c.list(&probe.real, None).await?;
        let (found, skipped) = self.tree.found_in(&listing, None);
        let root = self.tree.target.real.clone();
        let mut out = Listing {
            first: BinaryHeap::new(),
            total: 0,
            limit: self.limit,
            skipped,
        };
        for f in found {
            if self.matcher.is_match(f.rel(&root)) {
                out.add(ctx, f);
            }
        }
        Ok(out.finish(&self.pattern))
    }
}

/// `not_a_directory` for a root that is not a folder.
fn not_a_folder(t: &crate::fsops::Target) -> FlowError {
    FlowError::new(
        ErrorCode::NotADirectory,
        format!(
            "{} is not a folder; glob searches under a folder given as `root`.",
            t.shown.display()
        ),
    )
    .with("path", t.shown.display().to_string())
}

/// The paths a glob found so far: the first `limit`, and how many in all.
struct Listing {
    /// The first `limit` paths so far, the greatest on top, so what is held
    /// stays bounded by `limit` however large the tree.
    first: BinaryHeap<String>,
    total: u64,
    limit: u64,
    skipped: Skipped,
}

impl Listing {
    /// One path the walk found, unless the policy refuses it.
    fn add(&mut self, ctx: &Context, f: Found) {
        if f.denied(ctx) {
            self.skipped.denied += 1;
            return;
        }
        self.total += 1;
        self.first.push(f.shown);
        if self.first.len() as u64 > self.limit {
            self.first.pop();
        }
    }

    fn finish(mut self, pattern: &str) -> Output {
        let total = self.total;
        let paths = self.first.into_sorted_vec();
        let truncated = total > paths.len() as u64;
        let mut notes = Vec::new();
        if truncated {
            notes.push(format!(
                "Showing the first {} of {} matching paths (sorted). Narrow `pattern` (e.g. `src/**/*.rs`) or `root` to see the rest.",
                thousands(paths.len() as u64),
                thousands(total)
            ));
        }
        if total == 0 && !pattern.contains('/') && !pattern.starts_with("**") {
            notes.push(format!(
                "No path matched. `{pattern}` matches only names directly in root; write `**/{pattern}` to match at any depth."
            ));
        }
        notes.extend(self.skipped.notes());
        Output {
            paths,
            total,
            truncated,
            skipped_denied: self.skipped.denied,
            skipped_unreadable: self.skipped.unreadable,
            skipped_names: self.skipped.names,
            notice: (!notes.is_empty()).then(|| notes.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns_keep_stars_inside_one_folder() {
        let m = |p: &str| {
            GlobBuilder::new(p)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher()
        };
        assert!(m("*.rs").is_match("a.rs"));
        assert!(!m("*.rs").is_match("src/a.rs"));
        assert!(m("**/*.rs").is_match("a.rs"));
        assert!(m("**/*.rs").is_match("src/x/a.rs"));
        assert!(m("src/{a,b}.rs").is_match("src/b.rs"));
    }
}
