//! `grep`: the lines under a folder (or in one file) that match a regular
//! expression, found with ripgrep's own crates (`grep-regex` for the
//! matcher, `grep-searcher` for the line search, `ignore` for the walk), so
//! it finds what `rg` finds, about as fast.
//!
//! The walk is `glob`'s (see [`super::glob`]): `.gitignore`/`.ignore` honored
//! in or out of a git repository unless `noIgnore`, hidden names only with
//! `hidden`, `.git` never, symlinks never followed (a link loop cannot hang
//! the search; a linked file is not searched), names that are not UTF-8 or
//! hold control characters skipped and counted in `skippedNames`, unreadable
//! folders and files skipped and counted in `skippedUnreadable` with the first
//! few named in the notice, and paths shown relative to the workspace when
//! inside it. Special files (FIFOs, sockets, devices) are never opened, so
//! one cannot block the search; files are opened without following a link
//! swapped in after the walk saw them.
//!
//! The rest, as a caller can rely on it:
//!
//! - **Pattern.** Rust `regex` syntax, as `rg` takes it; `fixedStrings` makes
//!   it a literal. `ignoreCase` makes the search case-insensitive; otherwise
//!   `smartCase` does when the pattern has no upper-case letter. `$` matches
//!   before `\r\n` too. A pattern that does not parse, or that could match a
//!   line break, is `invalid_pattern` with the regex engine's message. So is
//!   a pattern over [`MAX_PATTERN_BYTES`], or one whose compiled form would
//!   pass [`REGEX_SIZE_LIMIT`] (counted repetitions multiply: `a{1000}{1000}`
//!   is a million states): both bound how long compiling and matching take.
//!   Each searching thread's lazy DFA holds at most [`REGEX_DFA_SIZE_LIMIT`].
//! - **Deadline.** `timeoutMs` (default 60,000, at most 600,000) bounds the
//!   search, and a stop request (SIGINT, SIGTERM) ends it too: the threads
//!   look at it at every entry, file and read buffer, and the call returns at
//!   once either way with a `timeout` error carrying what was found so far in
//!   the fields a finished call returns (`matches`, `files`, `totalMatches`,
//!   ...), the file a thread was inside included; see [`super::deadline`].
//!   One regex search cannot be interrupted: a thread inside one finishes it
//!   on its own, in the background. That is one buffer (64 KiB) for ordinary
//!   files, but a whole line for a line longer than that, where a pattern
//!   the size limits allow can still take minutes of one core.
//! - **Lines.** `line` is 1-based. `text` is the line without its terminator
//!   (`\n`, or `\r\n` in a CRLF file), invalid UTF-8 decoded lossily (as
//!   U+FFFD), clipped at 500 characters; a clipped line has `clipped = true`
//!   and the notice says so. `before` and `after` are present when context was
//!   asked for: the lines right before and after the match (matching lines
//!   included, so each match reads on its own), fewer at the file's ends,
//!   clipped the same way.
//! - **Binary files**, holding a NUL byte in what was read, are skipped whole
//!   and counted in `skippedBinary`, even when a match came before the NUL.
//!   A search that stops early (`maxCount`, `filesWithMatches`) may not reach
//!   a late NUL, as with `rg`.
//! - **Counting and limits.** `maxCount` caps matching lines per file.
//!   `limit` (default 200) caps the matches returned overall: the first ones
//!   by path (bytewise), then line. `totalMatches` and `totalFiles` count
//!   everything found, so the notice can say what was cut and how to narrow.
//!   `files` lists the files with a match, sorted, at most 1,000.
//!   `filesWithMatches = true` stops each file at its first match and
//!   returns only `files` (at most `limit`) and the counts, no `matches`.
//! - **Parallel, yet stable.** Files are searched on one thread per core
//!   (the walk on half as many), while the run's thread checks each file
//!   with the policy, and the results are sorted, so the same tree gives
//!   the same answer whichever thread finished first. The lines held are
//!   bounded by `limit`, not by the size of the tree: a file sorting after
//!   the first `limit` matches keeps only its count. The call waits for
//!   those threads without holding the run's thread: between two batches
//!   of files, the run's other tasks run. Files are read through
//!   a buffer, not memory-mapped (as `rg` does for a tree: faster for many
//!   small files), and a line is decoded only if it matches or is context.
//! - **Output shape.** `matches` (`file`, `line`, `text`, `clipped` when
//!   true, `before`/`after` when asked), `files`, `totalMatches`,
//!   `totalFiles`, `filesSearched` (text files searched), `skippedBinary`,
//!   `skippedDenied`, `skippedUnreadable`, `skippedNames`, `truncated`, and
//!   `notice` when something was cut or skipped.
//! - **Policy.** The call needs `fs:read` on `root` (its envelope). Each file
//!   found is checked again through the kernel, on the calling thread and
//!   without asking anyone, before it is opened: a file the policy denies
//!   (say `fs:read:**/.env`) is never opened nor named, only counted in
//!   `skippedDenied`. An ask is not a refusal here: the root was authorized.

use super::deadline::{check_timeout, Deadline};
use super::files::{settle_in, Files};
use super::lines::positive;
use super::walk::{
    hear, inbox, plural, refused, skipped_fields, thousands, threads, Abandon, Found, Heard, Kind,
    Skipped, Tree,
};
use super::{closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::container::files::Fetched;
use crate::container::ContainerFiles;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::checked;
use crate::fsops::path::{io_error, not_found_near};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::{Override, OverrideBuilder};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// Matches returned when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 200;
/// Characters kept of a line; longer lines are clipped.
pub const MAX_LINE_CHARS: usize = 500;
/// Lines of context on either side, at most.
pub const MAX_CONTEXT: u64 = 100;
/// Files named in `files`, at most, when matches are returned too.
pub const MAX_FILES: usize = 1000;
/// Bytes of `pattern`, at most.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;
/// Bytes the compiled regex may take (the `regex` crate's own default;
/// `grep-regex`'s is ten times that, which let `a{1000}{1000}` compile).
pub const REGEX_SIZE_LIMIT: usize = 10 << 20;
/// Bytes of lazy-DFA cache per searching thread (`grep-regex` allows 1 GiB).
pub const REGEX_DFA_SIZE_LIMIT: usize = 10 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub pattern: String,
    pub root: Option<String>,
    pub fixed_strings: Option<bool>,
    pub ignore_case: Option<bool>,
    pub smart_case: Option<bool>,
    pub globs: Option<Vec<String>>,
    pub before_context: Option<u64>,
    pub after_context: Option<u64>,
    pub context: Option<u64>,
    pub max_count: Option<u64>,
    pub files_with_matches: Option<bool>,
    pub hidden: Option<bool>,
    pub no_ignore: Option<bool>,
    pub limit: Option<u64>,
    pub timeout_ms: Option<u64>,
}

/// One matching line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Match {
    pub file: String,
    /// 1-based.
    pub line: u64,
    /// Without its line terminator, clipped at [`MAX_LINE_CHARS`].
    pub text: String,
    /// Whether `text` was clipped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub clipped: bool,
    /// Present when `beforeContext` (or `context`) was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Vec<String>>,
    /// Present when `afterContext` (or `context`) was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// Absent with `filesWithMatches`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<Match>>,
    pub files: Vec<String>,
    /// Matching lines found (each file's capped by `maxCount`); absent with
    /// `filesWithMatches`, which stops at each file's first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_matches: Option<u64>,
    /// Files with a match.
    pub total_files: u64,
    /// Text files searched (binary ones are not counted here).
    pub files_searched: u64,
    pub skipped_binary: u64,
    pub skipped_denied: u64,
    pub skipped_unreadable: u64,
    pub skipped_names: u64,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct Grep {
    tree: Tree,
    matcher: RegexMatcher,
    overrides: Option<Override>,
    /// `globs` as given, to root the overrides again at a container's
    /// canonical root.
    globs: Vec<String>,
    settings: Settings,
    timeout_ms: Option<u64>,
}

/// How each file is searched.
#[derive(Debug, Clone, Copy)]
struct Settings {
    before: usize,
    after: usize,
    /// Matching lines per file, at most.
    max_count: u64,
    files_only: bool,
    /// Matches returned overall (files, with `files_only`).
    limit: u64,
}

fn schema() -> Value {
    let count = |what: &str| json!({"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": what});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax, as rg), or a literal with fixedStrings; at most 16 KiB, and at most 10 MiB compiled."},
            "root": {"type": "string", "description": "Folder (or one file) to search, relative to the workspace or absolute. Default: the workspace."},
            "fixedStrings": {"type": "boolean", "description": "Treat pattern as a literal string. Default false."},
            "ignoreCase": {"type": "boolean", "description": "Match case-insensitively. Default false."},
            "smartCase": {"type": "boolean", "description": "Match case-insensitively when the pattern has no upper-case letter. Default false."},
            "globs": {"type": "array", "items": {"type": "string"}, "description": "Only paths matching these globs, as rg -g: `*.rs` at any depth, `!*.md` excludes."},
            "beforeContext": count("Lines of context before each match (0-100). Default: context, or 0."),
            "afterContext": count("Lines of context after each match (0-100). Default: context, or 0."),
            "context": count("Lines of context before and after each match (0-100). Default 0."),
            "maxCount": {"type": "integer", "minimum": 1, "description": "Matching lines per file, at most."},
            "filesWithMatches": {"type": "boolean", "description": "Return only the files with a match, not the lines. Default false."},
            "hidden": {"type": "boolean", "description": "Search names starting with `.` (`.git` never). Default false."},
            "noIgnore": {"type": "boolean", "description": "Disregard .gitignore, .ignore and .git/info/exclude. Default false."},
            "limit": {"type": "integer", "minimum": 1, "description": "Matches returned overall (files, with filesWithMatches). Default 200."},
            "timeoutMs": {"type": "integer", "minimum": 1, "maximum": super::deadline::MAX_TIMEOUT_MS, "description": "Milliseconds the search may take (default 60000, at most 600000); past it the call fails with `timeout`, carrying the matches found so far."}
        }
    })
}

impl Flow for Grep {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "grep",
        description: "Searches files under a folder for lines matching a regular expression, as ripgrep does, with context lines, honoring .gitignore.",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
        // A pattern under a root, as glob takes them.
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
        let lines = |what: &str| list(json!({"type": "string"}), what);
        let one = closed(
            &[
                ("file", field("string", "The file, relative to the workspace (absolute outside it).")),
                ("line", field("integer", "The matching line's number, 1-based.")),
                ("text", field("string", "The line without its terminator, at most 500 characters.")),
            ],
            &[
                ("clipped", field("boolean", "Present (true) when `text` was clipped at 500 characters.")),
                ("before", lines("The lines before the match, when beforeContext (or context) was asked for.")),
                ("after", lines("The lines after the match, when afterContext (or context) was asked for.")),
            ],
        );
        let [denied, unreadable, names] = skipped_fields();
        closed(
            &[
                ("files", lines("The files with a match, sorted (at most limit with filesWithMatches, else 1000).")),
                ("totalFiles", field("integer", "Files with a match.")),
                ("filesSearched", field("integer", "Text files searched (binary ones are counted in skippedBinary).")),
                ("skippedBinary", field("integer", "Files skipped as binary (a NUL byte in what was read).")),
                denied,
                unreadable,
                names,
                ("truncated", field("boolean", "Whether matches or files were left out for `limit`.")),
            ],
            &[
                ("matches", list(nested("GrepMatch", "One matching line.", one), "The matching lines, sorted by file, then line; absent with filesWithMatches.")),
                ("totalMatches", field("integer", "Matching lines found (each file's capped by maxCount); absent with filesWithMatches.")),
                ("notice", field("string", "What was cut, clipped or skipped; present when there is something to say.")),
            ],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let hit = |context: Option<Vec<String>>| Match {
            file: "a.rs".into(),
            line: 2,
            text: "fn main".into(),
            clipped: context.is_some(),
            before: context.clone(),
            after: context,
        };
        let found = |matches: Option<Vec<Match>>| Output {
            total_matches: matches.as_ref().map(|m| m.len() as u64),
            notice: matches
                .as_ref()
                .map(|_| "1 matching line was clipped".into()),
            matches,
            files: vec!["a.rs".into()],
            total_files: 1,
            files_searched: 1,
            skipped_binary: 0,
            skipped_denied: 0,
            skipped_unreadable: 0,
            skipped_names: 0,
            truncated: false,
        };
        vec![
            found(Some(vec![hit(Some(vec!["// a".into()])), hit(None)])),
            found(None),
        ]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        positive("limit", input.limit)?;
        positive("maxCount", input.max_count)?;
        check_timeout(input.timeout_ms)?;
        if input.pattern.len() > MAX_PATTERN_BYTES {
            return Err(FlowError::new(
                ErrorCode::InvalidPattern,
                format!(
                    "`pattern` is {} bytes, over the limit of {} bytes (16 KiB); search for a shorter, distinctive part of it and filter the matches, or split it across several calls.",
                    thousands(input.pattern.len() as u64),
                    thousands(MAX_PATTERN_BYTES as u64)
                ),
            )
            .with("field", "pattern")
            .with("limit", MAX_PATTERN_BYTES));
        }
        for (field, value) in [
            ("beforeContext", input.before_context),
            ("afterContext", input.after_context),
            ("context", input.context),
        ] {
            if value.is_some_and(|n| n > MAX_CONTEXT) {
                return Err(FlowError::invalid_input(
                    field,
                    format!("`{field}` is at most {MAX_CONTEXT} lines; read the file around the match for more."),
                ));
            }
        }
        Ok(())
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let matcher = matcher(&input)?;
        let target = ctx.resolve_file("root", input.root.as_deref().unwrap_or("."))?;
        let globs = input.globs.clone().unwrap_or_default();
        let overrides = match globs.is_empty() {
            false => Some(overrides(&target.real, &globs)?),
            true => None,
        };
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
        let context = input.context.unwrap_or(0);
        let settings = Settings {
            before: input.before_context.unwrap_or(context) as usize,
            after: input.after_context.unwrap_or(context) as usize,
            max_count: input.max_count.unwrap_or(u64::MAX),
            files_only: input.files_with_matches.unwrap_or(false),
            limit: input.limit.unwrap_or(DEFAULT_LIMIT),
        };
        let call = Grep {
            tree: Tree::new(ctx, target, input.hidden, input.no_ignore),
            matcher,
            overrides,
            globs,
            settings,
            timeout_ms: input.timeout_ms,
        };
        Ok((call, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        if let Files::Container(c) = Files::of(ctx).await? {
            return self.in_container(ctx, &c).await;
        }
        let t = &self.tree.target;
        checked::metadata(&t.real).map_err(|e| io_error(t, "search", e))?;
        let deadline = Deadline::after(self.timeout_ms);
        let _abandon = Abandon::new(&deadline);
        let outer = self.tree.outer_ignores(ctx);
        let Grep {
            tree,
            matcher,
            overrides,
            settings,
            ..
        } = self;
        let mut found = Collected::new(settings);
        let mut skipped = Skipped::default();
        // One searcher per core; the walk, lighter, gets half as many
        // threads (searchers sit idle if it lags, so not fewer than one).
        // None of them is waited for once the deadline passes: each stops
        // at its next entry, file or read buffer.
        let workers = threads();
        let walkers = workers.div_ceil(2);
        let (tx, mut rx) = inbox::<Msg>();
        let (job_tx, job_rx) = mpsc::channel::<Vec<Found>>();
        let jobs = Arc::new(Mutex::new(job_rx));
        let cannot = |e: io::Error| {
            FlowError::new(
                ErrorCode::CommandFailed,
                format!("grep: cannot start a search thread: {e}"),
            )
        };
        let mut handles = Vec::with_capacity(workers + 1);
        {
            let (tx, deadline) = (tx.clone(), deadline.clone());
            handles.push(
                std::thread::Builder::new()
                    .name("sluice-grep-walk".into())
                    .spawn(move || {
                        let mut end = WalkEnd {
                            tx: &tx,
                            skipped: None,
                        };
                        end.skipped =
                            Some(
                                tree.walk(walkers, outer, overrides, &deadline, |mut batch| {
                                    batch.retain(|f| f.kind == Kind::File);
                                    if !batch.is_empty() {
                                        let _ = tx.send(Msg::Found(batch));
                                    }
                                }),
                            );
                    })
                    .map_err(cannot)?,
            );
        }
        let mut states = Vec::with_capacity(workers);
        for _ in 0..workers {
            let state = Arc::new(Mutex::new(Worker::new(settings)));
            states.push(state.clone());
            let (tx, jobs, matcher, deadline) =
                (tx.clone(), jobs.clone(), matcher.clone(), deadline.clone());
            handles.push(
                std::thread::Builder::new()
                    .name("sluice-grep".into())
                    .spawn(move || search_files(&jobs, &matcher, &state, &tx, &deadline))
                    .map_err(cannot)?,
            );
        }
        drop(tx);
        // Here, on the run's thread (the kernel's), each file found is
        // checked before any worker opens it.
        let mut job_tx = Some(job_tx);
        let stopped = loop {
            match hear(&mut rx).await {
                Heard::Message(Msg::Found(batch)) => {
                    // A decision can take a while (a policy's hook): the
                    // deadline is looked at between two.
                    let mut allowed = Vec::with_capacity(batch.len());
                    for f in batch {
                        if deadline.passed() {
                            break;
                        }
                        if refused(ctx, &f.path) {
                            skipped.denied += 1;
                        } else {
                            allowed.push(f);
                        }
                    }
                    if let (Some(jobs), false) = (&job_tx, allowed.is_empty()) {
                        let _ = jobs.send(allowed);
                    }
                }
                Heard::Message(Msg::Walked(w)) => {
                    skipped.add(w);
                    job_tx = None;
                }
                Heard::Message(Msg::Hits(file, count, hits)) => found.add(file, count, hits),
                Heard::Quiet => {}
                // The workers also stop at the deadline: their hanging up
                // then means a partial search, a timeout.
                Heard::Closed => break deadline.passed(),
            }
            if deadline.passed() {
                break true;
            }
        };
        if !stopped {
            for t in handles {
                if let Err(panic) = t.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
        // Idle workers end once the job queue closes.
        drop(job_tx);
        let mut tally = Tally::default();
        for state in &states {
            // A worker still inside a file hands over what it found there
            // (under the lock, a file is either here or already sent).
            let mut w = state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(file) = w.file.take() {
                if w.sink.count > 0 && !w.sink.binary {
                    w.tally.searched += 1;
                    found.add(file, w.sink.count, std::mem::take(&mut w.sink.hits));
                }
            }
            tally.add(std::mem::take(&mut w.tally));
        }
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Hits(file, count, hits) = msg {
                found.add(file, count, hits);
            }
        }
        conclude(found, tally, skipped, stopped.then_some(&deadline))
    }
}

/// The answer of a search: its output, or, when `stopped` at this
/// deadline, the `timeout` error carrying what it found so far.
fn conclude(
    found: Collected,
    mut tally: Tally,
    mut skipped: Skipped,
    stopped: Option<&Deadline>,
) -> FlowResult<Output> {
    let searched = tally.searched;
    skipped.add(std::mem::take(&mut tally.skipped));
    let out = found.finish(tally, skipped);
    let Some(deadline) = stopped else {
        return Ok(out);
    };
    let value = serde_json::to_value(&out).expect("grep output serializes");
    Err(deadline.error(
        "grep",
        &format!("searched {} so far", plural(searched, "file")),
        value,
        "Narrow `root` or `globs`, or make the pattern simpler",
    ))
}

/// Bytes of files one container exec reads at most (one file at least),
/// and so what the search holds at once.
const CONTAINER_BATCH_BYTES: u64 = 8 << 20;
/// Files one container exec reads at most, to keep its arguments short.
const CONTAINER_BATCH_FILES: usize = 256;

impl Grep {
    /// The search over a container's tree: one `find` lists it, the files
    /// the policy lets through are read a batch per exec, and each is
    /// searched from its bytes by the same searcher, sink and collector as
    /// on the host, so fields, limits, order and binary handling agree.
    async fn in_container(mut self, ctx: &Context, c: &ContainerFiles) -> FlowResult<Output> {
        let deadline = Deadline::after(self.timeout_ms);
        self.settle_root(ctx, c).await?;
        let root = self.tree.target.real.to_string_lossy().into_owned();
        let listing = c.list(&root, None).await?;
        let (walked, mut skipped) = self.tree.found_in(&listing, self.overrides.as_ref());
        let mut files: Vec<Found> = Vec::new();
        for f in walked.into_iter().filter(|f| f.kind == Kind::File) {
            if f.denied(ctx) {
                skipped.denied += 1;
            } else {
                files.push(f);
            }
        }
        // In output order: the collector then keeps few lines it drops.
        files.sort_by(|a, b| a.shown.cmp(&b.shown));
        let mut found = Collected::new(self.settings);
        let mut tally = Tally::default();
        let mut searcher = searcher(self.settings);
        let mut rest = &files[..];
        let mut stopped = false;
        while !rest.is_empty() && !stopped {
            let batch = &rest[..rest.len().min(CONTAINER_BATCH_FILES)];
            let Some(fetched) = fetch(c, batch, &deadline).await? else {
                stopped = true;
                break;
            };
            for (f, got) in batch.iter().zip(&fetched) {
                let bytes = match got {
                    Fetched::Bytes(b) => b,
                    other => {
                        tally.skipped.unreadable_path(unfetched(&f.shown, other));
                        continue;
                    }
                };
                let mut sink = FileSink::new(self.settings);
                let reader = Watched {
                    file: &bytes[..],
                    deadline: &deadline,
                };
                let result = searcher.search_reader(&self.matcher, reader, &mut sink);
                let (matches, stop) = tally.count(&f.shown, &mut sink, result, &deadline);
                if let Some((count, hits)) = matches {
                    found.add(f.shown.clone(), count, hits);
                }
                stopped = stop;
                if stopped {
                    break;
                }
            }
            rest = &rest[fetched.len()..];
        }
        conclude(found, tally, skipped, stopped.then_some(&deadline))
    }

    /// Resolves the root in the container (it may be one file): missing is
    /// `not_found`; a canonical path other than the granted one is
    /// authorized again, and the globs are rooted there.
    async fn settle_root(&mut self, ctx: &Context, c: &ContainerFiles) -> FlowResult<()> {
        let (settled, probe) = settle_in(c, ctx, &self.tree.target, &[Action::FsRead]).await?;
        if probe.found.is_none() {
            return Err(not_found_near(&settled, Path::new(&probe.nearest)));
        }
        if settled.real != self.tree.target.real && !self.globs.is_empty() {
            self.overrides = Some(overrides(&settled.real, &self.globs)?);
        }
        self.tree.target = settled;
        Ok(())
    }
}

/// Reads a prefix of `batch` in one exec, bounded by the time the deadline
/// leaves; `None` when the deadline passed first.
async fn fetch(
    c: &ContainerFiles,
    batch: &[Found],
    deadline: &Deadline,
) -> FlowResult<Option<Vec<Fetched>>> {
    if deadline.passed() {
        return Ok(None);
    }
    let paths: Vec<String> = batch
        .iter()
        .map(|f| f.path.to_string_lossy().into_owned())
        .collect();
    let max = crate::fsops::MAX_FILE_BYTES;
    let read = c.read_many(&paths, CONTAINER_BATCH_BYTES, max, deadline.remaining());
    match read.await {
        Ok(got) => Ok(Some(got)),
        Err(_) if deadline.passed() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The notice's words for a container file that was not searched.
fn unfetched(shown: &str, got: &Fetched) -> String {
    match got {
        Fetched::TooLarge(size) => format!(
            "{shown}: {} bytes, over the {} MiB a container's file is searched up to; search it with bash (grep) in the container",
            thousands(*size),
            crate::fsops::MAX_FILE_BYTES >> 20
        ),
        Fetched::Gone => format!("{shown}: no longer a regular file"),
        Fetched::Failed(why) => format!("{shown}: {why}"),
        Fetched::Bytes(_) => format!("{shown}: read"),
    }
}

/// The matcher for the input's pattern and flags.
fn matcher(input: &Input) -> FlowResult<RegexMatcher> {
    let ignore_case = input.ignore_case.unwrap_or(false);
    RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .case_smart(!ignore_case && input.smart_case.unwrap_or(false))
        .fixed_strings(input.fixed_strings.unwrap_or(false))
        .crlf(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build(&input.pattern)
        .map_err(|e| {
            if e.to_string().contains("exceeds size limit") {
                return FlowError::new(
                    ErrorCode::InvalidPattern,
                    format!(
                        "`pattern` compiles to a regex over the size limit of {} MiB: counted repetitions multiply \
                         (a{{1000}}{{1000}} is a million copies of `a`) and a Unicode class such as \\w or \\pL is large \
                         in each; use fewer or smaller counts (`+` or `*` instead of `{{1000}}`), an ASCII class \
                         ([a-zA-Z0-9_] or (?-u:\\w)), or fixedStrings for a literal.",
                        REGEX_SIZE_LIMIT >> 20
                    ),
                )
                .with("pattern", input.pattern.clone())
                .with("limit", REGEX_SIZE_LIMIT);
            }
            // grep-regex reports a syntax error against the pattern as it
            // wrapped it (`(?:...)`), carets included; the regex parser's own
            // message points into the pattern as the caller wrote it.
            let syntax = regex_syntax::Parser::new().parse(&input.pattern).err();
            let why = syntax.map_or_else(|| e.to_string(), |s| s.to_string());
            FlowError::new(
                ErrorCode::InvalidPattern,
                format!("`pattern` is not a valid regular expression: {why}"),
            )
            .with("pattern", input.pattern.clone())
        })
}

/// `globs` as ripgrep's `-g` overrides, rooted at `root`.
fn overrides(root: &Path, globs: &[String]) -> FlowResult<Override> {
    let mut builder = OverrideBuilder::new(root);
    for g in globs {
        builder.add(g).map_err(|e| {
            FlowError::new(
                ErrorCode::InvalidPattern,
                format!("`globs`: {g:?} is not a valid glob: {e}"),
            )
            .with("pattern", g.clone())
        })?;
    }
    builder.build().map_err(|e| {
        FlowError::new(ErrorCode::InvalidPattern, format!("`globs`: {e}")).with("field", "globs")
    })
}

/// What the walker and the workers tell the calling thread.
enum Msg {
    /// Files to check and search.
    Found(Vec<Found>),
    /// The walk ended, with what it skipped.
    Walked(Skipped),
    /// A file's matches: shown path, matching lines, the first ones kept.
    Hits(String, u64, Vec<Hit>),
}

/// Tells the calling thread the walk ended, even if it ended in a panic:
/// until it hears so, it keeps the workers waiting for more files.
struct WalkEnd<'a> {
    tx: &'a UnboundedSender<Msg>,
    skipped: Option<Skipped>,
}

impl Drop for WalkEnd<'_> {
    fn drop(&mut self) {
        let skipped = self.skipped.take().unwrap_or_default();
        let _ = self.tx.send(Msg::Walked(skipped));
    }
}

/// One worker's counts.
#[derive(Debug, Default)]
struct Tally {
    searched: u64,
    binary: u64,
    skipped: Skipped,
}

/// A searched file's matches to hand over: its matching lines, and hits.
type Matches = (u64, Vec<Hit>);

impl Tally {
    /// Counts one searched file, binary, searched or unreadable, as the
    /// host's workers and a container's search both do; its matches to
    /// hand over, and whether the deadline cut the search short (what the
    /// file showed before the cut still counts).
    fn count(
        &mut self,
        shown: &str,
        sink: &mut FileSink,
        result: io::Result<()>,
        deadline: &Deadline,
    ) -> (Option<Matches>, bool) {
        let hits = |sink: &mut FileSink| (sink.count, std::mem::take(&mut sink.hits));
        match result {
            Err(_) if deadline.passed() => {
                if sink.binary || sink.count == 0 {
                    return (None, true);
                }
                self.searched += 1;
                (Some(hits(sink)), true)
            }
            Err(e) => {
                self.skipped.unreadable_path(format!("{shown}: {e}"));
                (None, false)
            }
            Ok(()) if sink.binary => {
                self.binary += 1;
                (None, false)
            }
            Ok(()) => {
                self.searched += 1;
                ((sink.count > 0).then(|| hits(sink)), false)
            }
        }
    }

    fn add(&mut self, other: Tally) {
        self.searched += other.searched;
        self.binary += other.binary;
        self.skipped.add(other.skipped);
    }
}

fn searcher(settings: Settings) -> Searcher {
    let max = if settings.files_only {
        1
    } else {
        settings.max_count
    };
    SearcherBuilder::new()
        .line_terminator(LineTerminator::crlf())
        .line_number(true)
        .before_context(settings.before)
        .after_context(settings.after)
        .binary_detection(BinaryDetection::quit(0))
        .max_matches((max != u64::MAX).then_some(max))
        .build()
}

/// What one worker holds, shared with the calling thread: its counts, and
/// the file it is searching with what it found there so far, which the
/// calling thread takes over when the deadline cuts the search short (a
/// worker can be inside one long regex search then).
struct Worker {
    settings: Settings,
    tally: Tally,
    /// The shown path of the file being searched, if one is.
    file: Option<String>,
    sink: FileSink,
}

impl Worker {
    fn new(settings: Settings) -> Worker {
        Worker {
            settings,
            tally: Tally::default(),
            file: None,
            sink: FileSink::new(settings),
        }
    }
}

/// A worker: searches the files the calling thread let through until there
/// are no more or the deadline passes, sending each file's matches back.
fn search_files(
    jobs: &Mutex<Receiver<Vec<Found>>>,
    matcher: &RegexMatcher,
    state: &Mutex<Worker>,
    tx: &UnboundedSender<Msg>,
    deadline: &Deadline,
) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let settings = lock().settings;
    let mut searcher = searcher(settings);
    'jobs: loop {
        let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(batch) = job else { break };
        for f in batch {
            if deadline.passed() {
                break 'jobs;
            }
            let file = match open(&f) {
                Ok(file) => file,
                Err(e) if checked::changed(&e) => {
                    let what = format!(
                        "{}: changed during the search (a symbolic link now), not followed",
                        f.shown
                    );
                    lock().tally.skipped.unreadable_path(what);
                    continue;
                }
                Err(e) => {
                    lock()
                        .tally
                        .skipped
                        .unreadable_path(format!("{}: {e}", f.shown));
                    continue;
                }
            };
            {
                let mut w = lock();
                w.file = Some(f.shown.clone());
                w.sink = FileSink::new(settings);
            }
            let reader = Watched { file, deadline };
            let result = searcher.search_reader(matcher, reader, Shared(state));
            let mut guard = lock();
            let w = &mut *guard;
            if w.file.take().is_none() {
                // The calling thread took the file over: the call is done.
                break 'jobs;
            }
            let (matches, stop) = w.tally.count(&f.shown, &mut w.sink, result, deadline);
            if let Some((count, hits)) = matches {
                let _ = tx.send(Msg::Hits(f.shown, count, hits));
            }
            if stop {
                break 'jobs;
            }
        }
    }
}

/// The searcher's sink for a worker's current file, through the lock the
/// calling thread may take it by. Only the worker's own callbacks hold it,
/// briefly.
struct Shared<'a>(&'a Mutex<Worker>);

impl Sink for Shared<'_> {
    type Error = io::Error;

    fn matched(&mut self, s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.sink.matched(s, m)
    }

    fn context(&mut self, s: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.sink.context(s, c)
    }

    fn binary_data(&mut self, s: &Searcher, offset: u64) -> Result<bool, io::Error> {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.sink.binary_data(s, offset)
    }
}

/// A file read through the deadline: each read (a buffer of the searcher's,
/// 64 KiB) first looks at it, so a huge file is left within one buffer's
/// search of the deadline.
struct Watched<'a, R: Read> {
    file: R,
    deadline: &'a Deadline,
}

impl<R: Read> Read for Watched<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.deadline.passed() {
            return Err(io::Error::other("the search's deadline passed"));
        }
        self.file.read(buf)
    }
}

/// Opens a file the walk found to be a regular file, by its name in the
/// folder the walk listed it in, without following a link (one swapped in
/// since would lead past the policy check) and without blocking (a FIFO
/// swapped in would wait for a writer; this way it reads as empty).
fn open(f: &Found) -> io::Result<File> {
    match (&f.folder, f.path.file_name()) {
        (Some(dir), Some(name)) => dir.open_read(name),
        _ => checked::open_read(&f.path),
    }
}

/// A match as a worker keeps it, before its file is known to make the cut.
#[derive(Debug, Clone, PartialEq)]
struct Hit {
    line: u64,
    text: String,
    clipped: bool,
    before: Vec<String>,
    after: Vec<String>,
}

/// The matches of one file, as the searcher reports lines.
struct FileSink {
    settings: Settings,
    /// Matches with their lines kept, at most `settings.limit`.
    hits: Vec<Hit>,
    /// Matching lines, up to `maxCount`.
    count: u64,
    binary: bool,
    /// The last `before` lines seen, for the next match's `before`.
    window: VecDeque<String>,
    /// The number of the last line seen, to see gaps between groups.
    last_line: u64,
    /// The first hit still short of its `after` lines.
    pending: usize,
}

impl FileSink {
    fn new(settings: Settings) -> FileSink {
        FileSink {
            settings,
            hits: Vec::new(),
            count: 0,
            binary: false,
            window: VecDeque::new(),
            last_line: 0,
            pending: 0,
        }
    }

    fn keep(&self) -> usize {
        if self.settings.files_only {
            0
        } else {
            usize::try_from(self.settings.limit).unwrap_or(usize::MAX)
        }
    }

    /// One line, matching or context, in file order; whether to go on.
    fn line(&mut self, n: u64, bytes: &[u8], matched: bool) -> bool {
        let s = self.settings;
        // A line past `maxCount` (the searcher reports matches inside the
        // last one's after-context) is context.
        let matched = matched && self.count < s.max_count;
        if self.last_line != 0 && n != self.last_line + 1 {
            self.window.clear();
            self.pending = self.hits.len();
        }
        self.last_line = n;
        let keep_hit = matched && self.hits.len() < self.keep();
        let feeds_after = s.after > 0 && self.pending < self.hits.len();
        let feeds_window = s.before > 0 && self.hits.len() < self.keep();
        if matched {
            self.count += 1;
        }
        if keep_hit || feeds_after || feeds_window {
            let (text, clipped) = line_text(bytes);
            if feeds_after {
                for hit in &mut self.hits[self.pending..] {
                    if hit.after.len() < s.after {
                        hit.after.push(text.clone());
                    }
                }
                while self
                    .hits
                    .get(self.pending)
                    .is_some_and(|h| h.after.len() >= s.after)
                {
                    self.pending += 1;
                }
            }
            if keep_hit {
                self.hits.push(Hit {
                    line: n,
                    text: text.clone(),
                    clipped,
                    before: self.window.iter().cloned().collect(),
                    after: Vec::new(),
                });
            }
            if s.before > 0 {
                if self.window.len() == s.before {
                    self.window.pop_front();
                }
                self.window.push_back(text);
            }
        }
        !(s.files_only && self.count > 0)
    }
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        Ok(self.line(m.line_number().unwrap_or(0), m.bytes(), true))
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.line(c.line_number().unwrap_or(0), c.bytes(), false))
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line as shown: without its terminator (`\n` or `\r\n`), decoded
/// lossily, clipped at [`MAX_LINE_CHARS`]; and whether it was clipped.
fn line_text(bytes: &[u8]) -> (String, bool) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    // A character takes at least one byte, and so does each replacement.
    if bytes.len() <= MAX_LINE_CHARS {
        return (text.into_owned(), false);
    }
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.into_owned(), false),
    }
}

/// The files with matches, by shown path, holding on to matches' lines only
/// while they may still be among the first `limit`.
struct Collected {
    settings: Settings,
    by_file: BTreeMap<String, (u64, Vec<Hit>)>,
    /// Hits held in `by_file`.
    held: usize,
    /// Files sorting after this one cannot make the cut.
    cutoff: Option<String>,
}

impl Collected {
    fn new(settings: Settings) -> Collected {
        Collected {
            settings,
            by_file: BTreeMap::new(),
            held: 0,
            cutoff: None,
        }
    }

    fn limit(&self) -> usize {
        usize::try_from(self.settings.limit).unwrap_or(usize::MAX)
    }

    fn add(&mut self, file: String, count: u64, mut hits: Vec<Hit>) {
        if self.cutoff.as_ref().is_some_and(|c| file > *c) {
            hits = Vec::new();
        }
        self.held += hits.len();
        self.by_file.insert(file, (count, hits));
        let limit = self.limit();
        if self.held > limit.saturating_add(limit.max(1000)) {
            self.prune();
        }
    }

    /// Drops the lines of every file sorting after the first `limit` hits.
    fn prune(&mut self) {
        let limit = self.limit();
        let mut before = 0usize;
        for (file, (_, hits)) in self.by_file.iter_mut() {
            if before >= limit {
                self.held -= hits.len();
                *hits = Vec::new();
            } else {
                before += hits.len();
                if before >= limit {
                    self.cutoff = Some(file.clone());
                }
            }
        }
    }

    fn finish(self, tally: Tally, mut skipped: Skipped) -> Output {
        let s = self.settings;
        let limit = self.limit();
        let total_files = self.by_file.len() as u64;
        let total_matches: u64 = self.by_file.values().map(|(n, _)| n).sum();
        let files_cap = if s.files_only { limit } else { MAX_FILES };
        let mut matches = Vec::new();
        let mut files = Vec::new();
        for (file, (_, hits)) in self.by_file {
            for hit in hits {
                if matches.len() == limit {
                    break;
                }
                matches.push(Match {
                    file: file.clone(),
                    line: hit.line,
                    text: hit.text,
                    clipped: hit.clipped,
                    before: (s.before > 0).then_some(hit.before),
                    after: (s.after > 0).then_some(hit.after),
                });
            }
            if files.len() < files_cap {
                files.push(file);
            }
        }
        let mut notes = Vec::new();
        let narrow = "Narrow with `globs` (e.g. {\"*.rs\"}), a more specific `pattern` or a deeper `root`, or raise `limit`.";
        let matches_cut = !s.files_only && total_matches > matches.len() as u64;
        let files_cut = total_files > files.len() as u64;
        if matches_cut {
            notes.push(format!(
                "Showing the first {} of {} matching lines (sorted by file, then line), from {}. {narrow}",
                thousands(matches.len() as u64),
                thousands(total_matches),
                plural(total_files, "file"),
            ));
        }
        if s.files_only && files_cut {
            notes.push(format!(
                "Showing the first {} of {} files with a match (sorted). {narrow}",
                thousands(files.len() as u64),
                thousands(total_files),
            ));
        } else if files_cut {
            notes.push(format!(
                "`files` lists the first {} of {} files with a match.",
                thousands(files.len() as u64),
                thousands(total_files),
            ));
        }
        let clipped = matches.iter().filter(|m| m.clipped).count() as u64;
        if clipped > 0 {
            notes.push(format!(
                "{} longer than {MAX_LINE_CHARS} characters {} clipped (`clipped = true`); read the file for the whole line.",
                plural(clipped, "matching line"),
                if clipped == 1 { "was" } else { "were" },
            ));
        }
        if tally.binary > 0 {
            notes.push(format!(
                "Skipped {} (a NUL byte in what was read).",
                plural(tally.binary, "binary file")
            ));
        }
        notes.extend(skipped.notes());
        Output {
            matches: (!s.files_only).then_some(matches),
            files,
            total_matches: (!s.files_only).then_some(total_matches),
            total_files,
            files_searched: tally.searched,
            skipped_binary: tally.binary,
            skipped_denied: skipped.denied,
            skipped_unreadable: skipped.unreadable,
            skipped_names: skipped.names,
            truncated: matches_cut || files_cut,
            notice: (!notes.is_empty()).then(|| notes.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(before: usize, after: usize) -> Settings {
        Settings {
            before,
            after,
            max_count: u64::MAX,
            files_only: false,
            limit: 200,
        }
    }

    /// Feeds `lines` (number, text, matched) to a sink, as the searcher would.
    fn feed(s: Settings, lines: &[(u64, &str, bool)]) -> FileSink {
        let mut sink = FileSink::new(s);
        for (n, text, m) in lines {
            sink.line(*n, format!("{text}\n").as_bytes(), *m);
        }
        sink
    }

    #[test]
    fn grep_and_glob_envelopes_narrow_to_the_root() {
        use crate::flows::{Context, Registry};
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        let ctx = Context::new(ws.clone(), "t".into(), String::new());
        let registry = Registry::standard();
        for (flow, input, root) in [
            (
                "grep",
                json!({"pattern": "x", "root": "src"}),
                ws.join("src"),
            ),
            ("grep", json!({"pattern": "x"}), ws.clone()),
            (
                "glob",
                json!({"pattern": "**/*.rs", "root": "src"}),
                ws.join("src"),
            ),
        ] {
            let call = registry.get(flow).unwrap().prepare(&ctx, input).unwrap();
            assert_eq!(call.envelope.tier, Tier::Sealed, "{flow}");
            assert_eq!(call.envelope.reads, vec![root], "{flow}");
            assert!(call.envelope.writes.is_empty() && call.envelope.commands.is_empty());
        }
    }

    #[test]
    fn grep_line_text_strips_terminators_and_clips() {
        assert_eq!(line_text(b"abc\r\n"), ("abc".to_string(), false));
        assert_eq!(line_text(b"abc\n"), ("abc".to_string(), false));
        assert_eq!(line_text(b"a\rb"), ("a\rb".to_string(), false));
        assert_eq!(line_text(b"a\xffb\n"), ("a\u{fffd}b".to_string(), false));
        let long = "é".repeat(600);
        let (text, clipped) = line_text(long.as_bytes());
        assert!(clipped);
        assert_eq!(text.chars().count(), MAX_LINE_CHARS);
        let exact = "é".repeat(MAX_LINE_CHARS);
        assert_eq!(line_text(exact.as_bytes()), (exact.clone(), false));
    }

    #[test]
    fn grep_each_match_carries_its_own_context() {
        // Lines 2 and 3 match, with one line of context on each side.
        let sink = feed(
            settings(1, 1),
            &[
                (1, "one", false),
                (2, "two", true),
                (3, "three", true),
                (4, "four", false),
            ],
        );
        let got: Vec<(u64, Vec<String>, Vec<String>)> = sink
            .hits
            .iter()
            .map(|h| (h.line, h.before.clone(), h.after.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, vec!["one".into()], vec!["three".into()]),
                (3, vec!["two".into()], vec!["four".into()]),
            ]
        );
    }

    #[test]
    fn grep_context_does_not_cross_a_gap() {
        let sink = feed(
            settings(2, 2),
            &[
                (1, "a", true),
                (2, "b", false),
                (9, "i", false),
                (10, "j", true),
            ],
        );
        assert_eq!(sink.hits[0].after, vec!["b".to_string()]);
        assert_eq!(sink.hits[1].before, vec!["i".to_string()]);
        assert!(sink.hits[1].after.is_empty());
    }

    #[test]
    fn grep_max_count_turns_later_matches_into_context() {
        let mut s = settings(0, 1);
        s.max_count = 1;
        let sink = feed(s, &[(1, "x", true), (2, "x again", true)]);
        assert_eq!(sink.count, 1);
        assert_eq!(sink.hits[0].after, vec!["x again".to_string()]);
    }

    #[test]
    fn grep_collected_keeps_the_first_matches_by_path_whatever_the_order() {
        let hit = |line| Hit {
            line,
            text: String::new(),
            clipped: false,
            before: vec![],
            after: vec![],
        };
        let mut s = settings(0, 0);
        s.limit = 3;
        let mut c = Collected::new(s);
        // Arrive out of order, enough to prune along the way.
        for i in (0..3000u64).rev() {
            c.add(format!("f{i:04}"), 2, vec![hit(1), hit(2)]);
        }
        assert!(c.held < 3000, "held {}", c.held);
        let out = c.finish(Tally::default(), Skipped::default());
        let got: Vec<(String, u64)> = out
            .matches
            .unwrap()
            .into_iter()
            .map(|m| (m.file, m.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("f0000".into(), 1),
                ("f0000".into(), 2),
                ("f0001".into(), 1)
            ]
        );
        assert_eq!(out.total_matches, Some(6000));
        assert_eq!(out.total_files, 3000);
        assert_eq!(out.files.len(), MAX_FILES);
        assert!(out.truncated);
    }
}
