//! `apply_patch`: Codex's V4A patch text (`*** Begin Patch` ... `*** End
//! Patch`) applied to the workspace, with the result Codex's own
//! `apply_patch` gives, so a model trained on that tool gets the same files
//! and the same words back. The behaviour is that of Codex CLI 0.171.0
//! (codex-rs/apply-patch), checked against its binary:
//!
//! - [`parser`]: the grammar and the lenient forms Codex accepts, with its
//!   error messages and line numbers.
//! - [`seek`]: where a chunk lands: exact, then ignoring trailing
//!   whitespace, then surrounding whitespace, then typographic punctuation.
//! - [`lines`]: an update keeps every line ending the file has (`\n`,
//!   `\r\n`, a lone `\r`), gives new lines the file's first ending, and
//!   always ends the file with one; context lines keep the file's text.
//! - [`apply`]: Add writes each `+` line plus `\n`, over any existing file;
//!   Move writes the new text to the destination (over any file there) and
//!   removes the source; Delete removes the entry (a symlink, not its
//!   target). `output` is Codex's summary: `A` lines, then `M` (a moved file
//!   under its destination), then `D`, each with the path as written in the
//!   patch, in patch order; an update that changes nothing is still `M`.
//!
//! Where sluice differs from Codex, on purpose:
//!
//! - All or nothing: every change is derived under the files' locks before
//!   any is written, and a failed patch leaves every file as it was. Codex
//!   applies section by section and stops at the first failure, keeping the
//!   sections before it.
//! - One file, one section: a patch naming a file in two sections (an
//!   update and a delete, two updates, a move onto another section's file)
//!   is `invalid_input` naming both lines. Codex applies them in turn, each
//!   from what the one before left; sluice derives every section from the
//!   file on disk, so the second would silently undo the first.
//! - A move onto the file itself is `invalid_input`; Codex writes the file
//!   and then removes it, losing it.
//! - Sections naming a path and a path inside it (delete `a.txt`, then add
//!   `a.txt/b.txt`; move `x` to `x/y`) are `invalid_input` naming both: one
//!   cannot build on a folder or file another creates or removes when every
//!   section is derived before any is written. Codex applies them in turn.
//! - A file holding a NUL byte is `binary_file`, as for every text flow;
//!   Codex updates it if it is valid UTF-8.
//! - Failures carry error codes (`invalid_input`, `not_found`,
//!   `is_directory`, `binary_file`, `no_match`, ...) with Codex's message as
//!   the message. A patch with no sections ("No files were modified.") is
//!   `invalid_input`.
//!
//! The envelope is exact, which is narrower than the seed's workspace-wide
//! worst case. The seed's host cannot see inside the patch when it
//! schedules; sluice parses it while planning, so `reads` holds every
//! updated, moved or deleted source and `writes` every path written,
//! created, moved or deleted, each canonical (symlinks resolved; a deleted
//! or moved-away symlink is the link itself). The kernel then judges each
//! path on its own: a deny rule such as `fs:write:**/.git/**` refuses a
//! patch that writes a hook, which a single capability for the workspace
//! folder would never match, and a path outside the workspace asks. The
//! execution touches only the canonical paths the plan resolved and the
//! kernel authorized.

pub mod apply;
pub mod lines;
pub mod parser;
pub mod seek;

use super::{closed, field, list, Context, Envelope, Flow, FlowSpec, Tier};
use crate::container::files::Kind;
use crate::container::ContainerFiles;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::flows::files::Files;
use crate::fsops::{self, Target};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use crate::kernel::Capability;
use apply::{Named, Op};
use parser::{parse_patch, Hunk};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fs;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The patch text.
    pub input: String,
    /// Folder relative paths in the patch resolve against; the workspace
    /// when absent.
    pub cwd: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Output {
    /// Paths as written in the patch.
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
    /// What Codex prints on success.
    pub output: String,
    /// What the language servers bound to the added and changed files say
    /// now; absent when the run declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::langserver::Diagnostics>,
}

pub struct ApplyPatch {
    ops: Vec<Op>,
    /// The line of each section, for refusals found when the call runs.
    lines: Vec<usize>,
    /// A sealed host's `cwd`, checked in the container when the call runs
    /// (a plan does not reach it).
    cwd: Option<Target>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["input"],
        "properties": {
            "input": {"type": "string", "description": "The patch: '*** Begin Patch', then '*** Add File: path' with '+' lines, '*** Delete File: path', or '*** Update File: path' (optionally '*** Move to: path') with '@@' chunks of ' ', '-', '+' lines, then '*** End Patch'."},
            "cwd": {"type": "string", "description": "Folder the patch's relative paths resolve against, relative to the workspace or absolute. Default: the workspace."}
        }
    })
}

/// The audit's one-line gist of an input: the files its `*** Add/Update/
/// Delete File:` lines touch, else the patch itself.
fn summary(input: &Value) -> String {
    let Some(patch) = input.get("input").and_then(Value::as_str) else {
        return input.to_string();
    };
    let files: Vec<&str> = patch
        .lines()
        .filter_map(|l| l.strip_prefix("*** "))
        .filter_map(|l| l.split_once(" File: "))
        .map(|(_, f)| f.trim())
        .collect();
    if files.is_empty() {
        return patch.to_string();
    }
    format!("patch {}", files.join(", "))
}

impl Flow for ApplyPatch {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "apply_patch",
        description: "Applies a Codex-format patch that adds, deletes, updates and moves files, all or nothing, and returns Codex's summary.",
        tier: Tier::Compensable,
        actions: &[Action::FsRead, Action::FsWrite],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[
            ErrorCode::NotFound,
            ErrorCode::NotAFile,
            ErrorCode::NotADirectory,
            ErrorCode::IsDirectory,
            ErrorCode::BinaryFile,
            ErrorCode::NoMatch,
            ErrorCode::CommandFailed,
            ErrorCode::ProviderUnavailable,
            ErrorCode::ResponseTooLarge,
        ],
    };

    fn output_schema() -> Value {
        let paths = |what: &str| list(json!({"type": "string"}), what);
        closed(
            &[
                ("added", paths("Files the patch added, as written in it.")),
                ("modified", paths("Files the patch updated (a moved file under its new name), as written in it.")),
                ("deleted", paths("Files the patch deleted, as written in it.")),
                ("output", field("string", "What Codex prints on success: \"Success. Updated the following files:\" and a line per file (A, M or D, then the path).")),
            ],
            &[("diagnostics", super::langserver::diagnostics::schema())],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let with = super::langserver::diagnostics::samples()
            .into_iter()
            .map(|d| Output {
                added: vec![],
                modified: vec!["a.py".into()],
                deleted: vec![],
                output: "Success. Updated the following files:\nM a.py\n".into(),
                diagnostics: Some(d),
            });
        let mut out = vec![Output {
            added: vec!["b.txt".into()],
            modified: vec![],
            deleted: vec![],
            output: "Success. Updated the following files:\nA b.txt\n".into(),
            diagnostics: None,
        }];
        out.extend(with);
        out
    }

    fn validate(input: &Input) -> FlowResult<()> {
        parse(&input.input).map(drop)
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let hunks = parse(&input.input)?;
        let (base, cwd) = match ctx.files_in() {
            None => (base_folder(ctx, input.cwd.as_deref())?, None),
            Some(_) => container_base(ctx, input.cwd.as_deref())?,
        };
        let lines: Vec<usize> = hunks.iter().map(Hunk::line).collect();
        let ops = hunks
            .into_iter()
            .map(|h| resolve_hunk(ctx, &base, h))
            .collect::<FlowResult<Vec<Op>>>()?;
        check_one_section_per_file(&ops, &lines)?;
        let mut envelope = Envelope {
            tier: Tier::Compensable,
            reads: vec![],
            writes: vec![],
            commands: vec![],
            network: vec![],
            cwd: None,
            container: None,
            anywhere: false,
        };
        for op in &ops {
            add_unique(&mut envelope.reads, fs_names(ctx, op.reads()));
            add_unique(&mut envelope.writes, fs_names(ctx, op.writes()));
        }
        Ok((ApplyPatch { ops, lines, cwd }, envelope))
    }

    async fn execute(mut self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let files = Files::of(ctx).await?;
        if let Files::Container(c) = &files {
            self.settle(ctx, c).await?;
        }
        let summary = apply::run(&self.ops, &files).await?;
        let changed: Vec<PathBuf> = self.ops.iter().filter_map(apply::Op::now_at).collect();
        Ok(Output {
            output: summary.text(),
            added: summary.added,
            modified: summary.modified,
            deleted: summary.deleted,
            diagnostics: super::langserver::diagnostics::after_changes(ctx, &changed).await,
        })
    }
}

impl ApplyPatch {
    /// Resolves the patch's paths inside the container before anything is
    /// read: `cwd` must be a folder there, and a path whose canonical form
    /// (through the container's symlinks) differs from the granted one is
    /// authorized again and used; the sections must still name distinct
    /// files. A deleted or moved-away link stays the link itself.
    async fn settle(&mut self, ctx: &Context, c: &ContainerFiles) -> FlowResult<()> {
        if let Some(t) = &self.cwd {
            let probe = c.probe(&t.real.to_string_lossy()).await?;
            match probe.found {
                None => return Err(fsops::path::not_found(t).with("field", "cwd")),
                Some(f) if f.kind != Kind::Dir => return Err(cwd_not_folder(t)),
                Some(_) => {}
            }
        }
        for op in &mut self.ops {
            for (named, actions) in op.named_mut() {
                let probe = c.probe(&named.target.real.to_string_lossy()).await?;
                let real = PathBuf::from(&probe.real);
                let entry = PathBuf::from(&probe.entry);
                for path in [&real, &entry] {
                    if *path != named.target.real && *path != named.entry {
                        for &action in actions {
                            ctx.authorize(&Capability::fs(action, &ctx.fs_name(path)))?;
                        }
                    }
                }
                named.target.real = real;
                named.entry = entry;
            }
        }
        check_one_section_per_file(&self.ops, &self.lines)
    }
}

/// Capabilities' names for `paths` (`NAME:/path` in a container).
fn fs_names<'a>(ctx: &'a Context, paths: Vec<&'a Path>) -> impl Iterator<Item = PathBuf> + 'a {
    paths.into_iter().map(|p| ctx.fs_name(p))
}

/// On a sealed host: the folder relative paths resolve against (`cwd`, or
/// `SLUICE_TEST_CWD`), as a container path, and the `cwd` to check there.
fn container_base(ctx: &Context, cwd: Option<&str>) -> FlowResult<(Base, Option<Target>)> {
    let t = ctx.resolve_file("cwd", cwd.unwrap_or("."))?;
    let base = Base {
        real: t.real.clone(),
        shown: t.shown.clone(),
    };
    Ok((base, cwd.is_some().then_some(t)))
}

/// `not_a_directory` for a `cwd` that is a file.
fn cwd_not_folder(t: &Target) -> FlowError {
    FlowError::new(
        ErrorCode::NotADirectory,
        format!(
            "cwd {} is a file; give the folder the patch's paths are relative to.",
            t.shown.display()
        ),
    )
    .with("field", "cwd")
    .with("path", t.shown.display().to_string())
}

/// The patch's sections, or `invalid_input` with Codex's message.
fn parse(text: &str) -> FlowResult<Vec<Hunk>> {
    let hunks = parse_patch(text)
        .map_err(|e| FlowError::invalid_input("input", e.to_string()).with("line", e.line()))?;
    if hunks.is_empty() {
        return Err(FlowError::invalid_input("input", "No files were modified."));
    }
    Ok(hunks)
}

/// The folder relative paths resolve against: canonical (for resolving)
/// and as given (for messages).
struct Base {
    real: PathBuf,
    shown: PathBuf,
}

fn base_folder(ctx: &Context, cwd: Option<&str>) -> FlowResult<Base> {
    let Some(cwd) = cwd else {
        return Ok(Base {
            real: ctx.workspace.clone(),
            shown: ctx.workspace.clone(),
        });
    };
    let t = ctx.resolve("cwd", cwd)?;
    match fs::metadata(&t.real) {
        Ok(m) if m.is_dir() => Ok(Base {
            real: t.real,
            shown: t.shown,
        }),
        Ok(_) => Err(cwd_not_folder(&t)),
        Err(_) => Err(fsops::path::not_found(&t).with("field", "cwd")),
    }
}

fn resolve_hunk(ctx: &Context, base: &Base, hunk: Hunk) -> FlowResult<Op> {
    let named = |path| named(ctx, base, path);
    Ok(match hunk {
        Hunk::AddFile { path, contents, .. } => Op::Add {
            to: named(path)?,
            contents,
        },
        Hunk::DeleteFile { path, .. } => Op::Delete { file: named(path)? },
        Hunk::UpdateFile {
            path,
            move_to,
            chunks,
            ..
        } => Op::Update {
            file: named(path)?,
            chunks,
            move_to: move_to.map(named).transpose()?,
        },
    })
}

fn named(ctx: &Context, base: &Base, path: String) -> FlowResult<Named> {
    if ctx.files_in().is_some() {
        return named_in_container(ctx, base, path);
    }
    let target = fsops::path::resolve(&base.real, "input", &path)?;
    Ok(Named {
        abs: lexical(&base.shown, &path),
        entry: entry_of(&target),
        target,
        path,
    })
}

/// A path of the patch on a sealed host: a container path under `base`,
/// resolved lexically (the container resolves its links when the call
/// runs, [`ApplyPatch::settle`]); the entry a delete removes is the path
/// itself.
fn named_in_container(ctx: &Context, base: &Base, path: String) -> FlowResult<Named> {
    let joined = if path.starts_with('/') || path.is_empty() {
        path.clone()
    } else {
        format!("{}/{path}", base.real.display())
    };
    let target = ctx.resolve_file("input", &joined)?;
    Ok(Named {
        abs: lexical(&base.shown, &path),
        entry: target.real.clone(),
        target,
        path,
    })
}

/// `path` joined to `base` with `.`, `..` and doubled slashes folded away,
/// without looking at the filesystem: how Codex names a file in messages.
fn lexical(base: &Path, path: &str) -> String {
    let mut out = PathBuf::from("/");
    for c in base.join(path).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out.display().to_string()
}

/// The directory entry a delete or move removes: for a symlink, the link
/// itself (under its canonical folder), not the file it points to.
fn entry_of(t: &Target) -> PathBuf {
    let is_link = fs::symlink_metadata(&t.shown).is_ok_and(|m| m.file_type().is_symlink());
    match (is_link, t.shown.parent(), t.shown.file_name()) {
        (true, Some(parent), Some(name)) => fsops::path::canonical_lenient(parent)
            .map(|p| p.join(name))
            .unwrap_or_else(|_| t.real.clone()),
        _ => t.real.clone(),
    }
}

/// Refuses a patch whose sections share a file, or that moves a file onto
/// itself: each section is derived from the file on disk, so a second
/// section would silently undo the first.
fn check_one_section_per_file(ops: &[Op], lines: &[usize]) -> FlowResult<()> {
    let touched = |op: &Op| -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = op
            .reads()
            .into_iter()
            .chain(op.writes())
            .map(Path::to_path_buf)
            .collect();
        if let Op::Update { file, .. } = op {
            paths.push(file.entry.clone());
        }
        paths
    };
    for (i, op) in ops.iter().enumerate() {
        if let Op::Update {
            file,
            move_to: Some(dest),
            ..
        } = op
        {
            if dest.target.real == file.target.real || dest.target.real == file.entry {
                return Err(FlowError::invalid_input(
                    "input",
                    format!(
                        "The section on line {} moves {} onto itself ({}); Codex would write it and then delete it. \
                         Drop the '*** Move to:' line to update the file in place.",
                        lines[i], file.path, dest.path
                    ),
                )
                .with("path", file.path.clone())
                .with("lines", vec![lines[i]]));
            }
        }
        let mine = touched(op);
        if let Some((a, b)) = nested_pair(&mine, &mine) {
            return Err(nested(a, b, vec![lines[i]]));
        }
        for (j, earlier) in ops[..i].iter().enumerate() {
            if let Some((a, b)) = nested_pair(&touched(earlier), &mine) {
                return Err(nested(a, b, vec![lines[j], lines[i]]));
            }
            if let Some(shared) = touched(earlier).iter().find(|p| mine.contains(p)) {
                let path = shared_name(op, shared);
                return Err(FlowError::invalid_input(
                    "input",
                    format!(
                        "{path} is named by two sections of the patch, on lines {} and {}. Each section is derived \
                         from the file as it is on disk, so the second would undo the first: give the file one \
                         '*** Update File:' section with one '@@' chunk per change.",
                        lines[j], lines[i]
                    ),
                )
                .with("path", path)
                .with("lines", vec![lines[j], lines[i]]));
            }
        }
    }
    Ok(())
}

/// Two paths of which one lies inside the other.
fn nested_pair<'a>(xs: &'a [PathBuf], ys: &'a [PathBuf]) -> Option<(&'a Path, &'a Path)> {
    xs.iter().find_map(|x| {
        ys.iter()
            .find(|y| x != *y && (x.starts_with(y) || y.starts_with(x)))
            .map(|y| (x.as_path(), y.as_path()))
    })
}

/// A patch whose sections name a path and a path inside it: every section
/// is derived before any is written, so one cannot build on the folder or
/// file another creates or removes (Codex applies them one by one).
fn nested(a: &Path, b: &Path, lines: Vec<usize>) -> FlowError {
    let (outer, inner) = if b.starts_with(a) { (a, b) } else { (b, a) };
    let on = match lines.as_slice() {
        [one] => format!("the section on line {one}"),
        _ => format!(
            "the sections on lines {}",
            lines
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    };
    FlowError::invalid_input(
        "input",
        format!(
            "{on} name both {} and {}, which lies inside it. sluice derives every section from the files as they \
             are before writing any, so one section cannot build on a file or folder another creates or removes: \
             split the patch in two.",
            outer.display(),
            inner.display()
        ),
    )
    .with("path", inner.display().to_string())
    .with("lines", lines)
}

/// How `op` names the file at `real`.
fn shared_name(op: &Op, real: &Path) -> String {
    match op {
        Op::Add { to, .. } => to.path.clone(),
        Op::Delete { file } => file.path.clone(),
        Op::Update { file, move_to, .. } => move_to
            .as_ref()
            .filter(|d| d.target.real == real)
            .unwrap_or(file)
            .path
            .clone(),
    }
}

fn add_unique(into: &mut Vec<PathBuf>, paths: impl Iterator<Item = PathBuf>) {
    for p in paths {
        if !into.contains(&p) {
            into.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::Registry;

    fn ws() -> (tempfile::TempDir, PathBuf, Context) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ctx = Context::new(root.clone(), "t".into(), String::new());
        (dir, root, ctx)
    }

    fn prepare(ctx: &Context, input: Value) -> FlowResult<crate::flows::Prepared> {
        Registry::standard()
            .get("apply_patch")
            .unwrap()
            .prepare(ctx, input)
    }

    fn caps(ctx: &Context, patch: &str) -> Vec<String> {
        let call = prepare(ctx, json!({ "input": patch })).unwrap();
        assert_eq!(call.envelope.tier, Tier::Compensable);
        call.envelope
            .capabilities()
            .iter()
            .map(|c| c.to_string())
            .collect()
    }

    #[test]
    fn the_envelope_names_each_path_the_patch_touches() {
        let (_d, root, ctx) = ws();
        fs::write(root.join("u.txt"), "a\n").unwrap();
        fs::write(root.join("m.txt"), "a\n").unwrap();
        fs::write(root.join("d.txt"), "a\n").unwrap();
        let patch = "*** Begin Patch\n*** Add File: sub/n.txt\n+x\n*** Update File: u.txt\n@@\n-a\n+b\n\
                     *** Update File: m.txt\n*** Move to: to/m2.txt\n@@\n-a\n+b\n*** Delete File: d.txt\n*** End Patch";
        let p = |rel: &str| root.join(rel).display().to_string();
        assert_eq!(
            caps(&ctx, patch),
            vec![
                format!("fs:read:{}", p("u.txt")),
                format!("fs:read:{}", p("m.txt")),
                format!("fs:read:{}", p("d.txt")),
                format!("fs:write:{}", p("sub/n.txt")),
                format!("fs:write:{}", p("u.txt")),
                format!("fs:write:{}", p("to/m2.txt")),
                format!("fs:write:{}", p("m.txt")),
                format!("fs:write:{}", p("d.txt")),
            ]
        );
    }

    #[test]
    fn a_symlink_is_removed_as_itself_and_updated_through() {
        let (_d, root, ctx) = ws();
        fs::create_dir(root.join("real")).unwrap();
        fs::write(root.join("real/t.txt"), "a\n").unwrap();
        std::os::unix::fs::symlink(root.join("real/t.txt"), root.join("link.txt")).unwrap();
        let del = caps(
            &ctx,
            "*** Begin Patch\n*** Delete File: link.txt\n*** End Patch",
        );
        let link = root.join("link.txt").display().to_string();
        assert_eq!(
            del,
            vec![format!("fs:read:{link}"), format!("fs:write:{link}")]
        );
        let upd = caps(
            &ctx,
            "*** Begin Patch\n*** Update File: link.txt\n@@\n-a\n+b\n*** End Patch",
        );
        let t = root.join("real/t.txt").display().to_string();
        assert_eq!(upd, vec![format!("fs:read:{t}"), format!("fs:write:{t}")]);
    }

    #[test]
    fn relative_paths_resolve_against_cwd() {
        let (_d, root, ctx) = ws();
        fs::create_dir(root.join("sub")).unwrap();
        let call = prepare(
            &ctx,
            json!({"input": "*** Begin Patch\n*** Add File: ../x.txt\n+x\n*** End Patch", "cwd": "sub"}),
        )
        .unwrap();
        assert_eq!(call.envelope.writes, vec![root.join("x.txt")]);
        let e = prepare(
            &ctx,
            json!({"input": "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch", "cwd": "nope"}),
        )
        .err()
        .unwrap();
        assert_eq!(
            (e.code, e.details["field"].clone()),
            (ErrorCode::NotFound, json!("cwd"))
        );
    }

    #[test]
    fn parse_errors_and_empty_patches_are_invalid_input_with_the_line() {
        let (_d, _root, ctx) = ws();
        let e = prepare(
            &ctx,
            json!({"input": "*** Begin Patch\n*** Frobnicate: x\n*** End Patch"}),
        )
        .err()
        .unwrap();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["line"], 2);
        assert!(e
            .message
            .starts_with("Invalid patch hunk on line 2: '*** Frobnicate: x'"));
        let e = prepare(&ctx, json!({"input": "*** Begin Patch\n*** End Patch"}))
            .err()
            .unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::InvalidInput, "No files were modified.")
        );
        let e = prepare(&ctx, json!({"input": "x", "path": "y"}))
            .err()
            .unwrap();
        assert_eq!(e.details["field"], "path");
    }

    #[test]
    fn one_file_in_two_sections_is_refused_naming_both_lines() {
        let (_d, root, ctx) = ws();
        fs::write(root.join("a.txt"), "a\n").unwrap();
        let patch =
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: b.txt\n+x\n\
                     *** Delete File: ./a.txt\n*** End Patch";
        let e = prepare(&ctx, json!({ "input": patch })).err().unwrap();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["lines"], json!([2, 8]));
        assert!(
            e.message
                .starts_with("./a.txt is named by two sections of the patch, on lines 2 and 8."),
            "{}",
            e.message
        );
        let patch = "*** Begin Patch\n*** Add File: n.txt\n+x\n*** Update File: a.txt\n*** Move to: n.txt\n@@\n-a\n+b\n*** End Patch";
        let e = prepare(&ctx, json!({ "input": patch })).err().unwrap();
        assert_eq!(e.details["lines"], json!([2, 4]));
        let patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ./a.txt\n@@\n-a\n+b\n*** End Patch";
        let e = prepare(&ctx, json!({ "input": patch })).err().unwrap();
        assert!(e.message.contains("onto itself"), "{}", e.message);
    }

    #[test]
    fn lexical_paths_fold_dots_like_codex() {
        let base = Path::new("/w");
        assert_eq!(lexical(base, "./d/../x.txt"), "/w/x.txt");
        assert_eq!(lexical(base, "a//b.txt"), "/w/a/b.txt");
        assert_eq!(lexical(base, "/abs/./y"), "/abs/y");
    }
}
