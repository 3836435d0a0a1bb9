//! Hermetic mode's pre-check: with `mode = "hermetic"` the caller declares
//! `reads` and `writes` (path globs), and before anything is spawned the
//! command line's explicit path tokens are checked against them.
//!
//! # A pre-check, not a sandbox
//!
//! The check is lexical. It reads the command line, not what the process
//! does: a program that opens a file it was not given on the command line
//! (`make`, a script, `git`), or that writes through a path it was given as
//! a read, is not seen here. It bounds what the caller declared it would do;
//! confinement, if any, is the sandbox's job.
//!
//! # Declarations
//!
//! Each glob is a capability glob with path semantics (see
//! [`crate::kernel::pattern`]): `reads[i]` becomes `fs:read:GLOB` and
//! `writes[i]` `fs:write:GLOB`. A leading `~` expands to the home folder and
//! `${workspace}` to the workspace; any other relative glob is relative to
//! the workspace (not to the command's `cwd`). The literal folders a glob
//! starts with are canonicalised, so a declaration through a symlinked
//! folder names the folder it points to. A path that is declared writable
//! may also be read.
//!
//! # Path tokens
//!
//! The line is taken apart with [`crate::kernel::shell::analyze`], and every
//! simple command in it (in lists, pipelines, subshells, substitutions,
//! wrappers such as `sudo` or `bash -c`) is checked:
//!
//! - A redirection target is always a path: written for `>`, `>>`, `&>`,
//!   `<>` and the like, read for `<`.
//! - The program (the first word) is not a path token; `proc:spawn` governs
//!   it.
//! - For the commands below, operands in file positions are paths whatever
//!   they look like (`rm -rf build` names `build`):
//!   - `cp`, `mv`, `install`, `ln`: the last operand (or the `-t` folder) is
//!     written, the others are read; `mv` writes its sources too (they
//!     disappear). When the destination is a folder (`-t`, a trailing `/`,
//!     or an existing folder), the written path is the file inside it.
//!     `install -d` writes every operand.
//!   - `rm`, `rmdir`, `mkdir`, `touch`, `truncate`, `shred`, `chmod`,
//!     `chown`, `chgrp`, `tee`: every file operand is written (the mode,
//!     owner or group operand is not a path; a `--reference` file is read).
//!   - `sed -i` / `sed --in-place` and `perl -i` write their file operands;
//!     without `-i` they read them. The script is not a path (a `-f` script
//!     file is read).
//!   - `dd`: `of=PATH` is written, `if=PATH` read.
//!   - `find`: its start points are read, or written with `-delete`;
//!     `-fprint` and `-fls` files are written.
//! - Any other command reads its path-like words: a word that starts with
//!   `/`, `./`, `../` or `~/`, is `.`, `..` or `~`, contains a `/`, or
//!   names an entry that exists in the working folder (`cat notes.txt`). For a
//!   word that starts with `-` only the `--name=VALUE` form is looked into
//!   (VALUE is the candidate; `-o/x` is an option, not a path), and in a
//!   `NAME=VALUE` word VALUE is the candidate. URLs (`scheme://...`) are not
//!   paths. So a write by a command not listed above (`gcc -o out/a`) counts
//!   as a read: declare it in `reads` or `writes`.
//! - `/dev/...` is exempt (`/dev/null`, `/dev/stderr`), except `/dev/shm`
//!   and `/dev/mqueue`, which are ordinary file systems.
//! - The words that make what a command runs are not its paths: the command
//!   a wrapper runs (`sudo rm x`, `chrt 1 cp a b`, `find -exec`, every
//!   wrapper the analysis knows) is checked as itself, with its own
//!   program's classification, and so are the commands of a script given
//!   with `-c` (and of `eval`, `trap`, `watch`, `ssh`...); a shell's script
//!   file (`bash x.sh`) and `--rcfile` are read, its options are not paths.
//!
//! # Resolution
//!
//! A token is resolved against the command's `cwd` (`~` against the home
//! folder), then canonicalised: symlinks along the part that exists are
//! followed, so a symlink inside a declared tree cannot smuggle a path
//! outside it; the missing rest is kept lexically. Leading assignments
//! (`FOO=/x cmd`) are not checked.
//!
//! # What is refused
//!
//! What cannot be checked lexically is refused with `invalid_input` (field
//! `command`) before anything runs: a line the analysis cannot parse; a word
//! or redirection target whose value is only known at run time (`$f`,
//! `"$f"`, `$(...)`, `<(...)`, unquoted globs like `*.rs`, braces), except a
//! bare option flag (`-$n`) and a plain `~/path`; a program name known only
//! at run time (`$CMD x`); a command that receives its arguments at run time
//! (`xargs`, `find -exec rm {} +`); and a relative path in a line that also
//! changes folder (`cd`, `pushd`, `popd`), since it would no longer resolve
//! against `cwd`.

use crate::error::{ErrorCode, FlowError};
use crate::fsops::path::canonical_lenient;
use crate::kernel::pattern::{Pattern, Vars};
use crate::kernel::shell::{self, Analysis, Command, Options, RunKind, Value};
use crate::kernel::{Action, Capability};
use std::path::{Component, Path, PathBuf};

/// The declared envelope, compiled.
pub struct Declared {
    reads: Vec<Pattern>,
    writes: Vec<Pattern>,
}

impl Declared {
    /// Compiles the caller's globs. Relative globs are relative to the
    /// workspace (`vars.workspace`); `~` and `${workspace}` expand as in
    /// policy patterns. A bad glob is `invalid_input` naming the field,
    /// `reads[2]` or `writes[0]`.
    pub fn new(reads: &[String], writes: &[String], vars: &Vars) -> Result<Declared, FlowError> {
        Ok(Declared {
            reads: compile("reads", Action::FsRead, reads, vars)?,
            writes: compile("writes", Action::FsWrite, writes, vars)?,
        })
    }

    fn may_write(&self, path: &Path) -> bool {
        let cap = Capability::fs(Action::FsWrite, path);
        self.writes.iter().any(|p| p.matches(&cap))
    }

    fn may_read(&self, path: &Path) -> bool {
        let cap = Capability::fs(Action::FsRead, path);
        self.reads.iter().any(|p| p.matches(&cap)) || self.may_write(path)
    }
}

/// What the check established: canonical absolute paths the command names,
/// split by use.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub reads: Vec<PathBuf>,
    pub writes: Vec<PathBuf>,
}

/// Checks `command` (a shell command line) run in `cwd` against `declared`.
///
/// Errors: `outside_declared_writes` for a written path outside `writes`;
/// `outside_declared_reads` for a read path outside `reads` ∪ `writes`. The
/// message names the token, the path it resolved to and the fix; details
/// carry `path` and `token`. A line that cannot be checked lexically (see
/// the module doc) is `invalid_input` naming `command`.
pub fn check(
    command: &str,
    cwd: &Path,
    declared: &Declared,
    vars: &Vars,
) -> Result<Touched, FlowError> {
    let commands = match shell::analyze(command) {
        Analysis::Parsed(commands) => commands,
        Analysis::Unparsed { reason } => {
            return Err(FlowError::invalid_input(
                "command",
                format!(
                    "hermetic mode needs literal paths it can find in the command line, and this line cannot be analyzed ({reason}); simplify it, or use mode = \"unhermetic\""
                ),
            ))
        }
    };
    let cwd = if cwd.is_absolute() {
        cwd.to_path_buf()
    } else {
        vars.workspace.join(cwd)
    };

    let mut collector = Collector {
        cwd: cwd.clone(),
        ..Collector::default()
    };
    for cmd in &commands {
        collector.command(cmd)?;
    }
    if collector.changes_folder {
        if let Some(token) = collector.tokens.iter().find(|t| t.is_relative()) {
            return Err(FlowError::invalid_input(
                "command",
                format!(
                    "hermetic mode needs literal paths, and `{}` is relative in a line that changes folder (`cd`, `pushd`, `popd`), so where it lands is only known at run time; set `cwd` instead of changing folder, or write the path out in full",
                    token.shown
                ),
            )
            .with("token", token.shown.clone()));
        }
    }

    let mut touched = Touched::default();
    for token in &collector.tokens {
        let Some(path) = token.resolve(&cwd, vars)? else {
            continue;
        };
        let shown = token.shown.as_str();
        let by = token.by.as_str();
        if token.write {
            if !declared.may_write(&path) {
                return Err(outside(
                    ErrorCode::OutsideDeclaredWrites,
                    format!(
                        "{by} writes `{shown}`, which resolves to {}, outside the declared writes; add a glob that covers it to `writes`",
                        path.display()
                    ),
                    &path,
                    shown,
                ));
            }
            push_unique(&mut touched.writes, path);
        } else {
            if !declared.may_read(&path) {
                return Err(outside(
                    ErrorCode::OutsideDeclaredReads,
                    format!(
                        "{by} reads `{shown}`, which resolves to {}, outside the declared reads and writes; add a glob that covers it to `reads` (or `writes`)",
                        path.display()
                    ),
                    &path,
                    shown,
                ));
            }
            push_unique(&mut touched.reads, path);
        }
    }
    Ok(touched)
}

fn outside(code: ErrorCode, message: String, path: &Path, token: &str) -> FlowError {
    FlowError::new(code, message)
        .with("path", path.to_string_lossy().into_owned())
        .with("token", token)
}

fn push_unique(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

// ---- declarations -----------------------------------------------------------

fn compile(
    field: &str,
    action: Action,
    globs: &[String],
    vars: &Vars,
) -> Result<Vec<Pattern>, FlowError> {
    globs
        .iter()
        .enumerate()
        .map(|(i, glob)| {
            let field = format!("{field}[{i}]");
            let resource = anchor(glob, vars).map_err(|m| {
                FlowError::invalid_input(&field, format!("`{glob}` in {field}: {m}"))
            })?;
            Pattern::parse(&format!("{}:{resource}", action.as_str()), vars).map_err(|e| {
                FlowError::invalid_input(
                    &field,
                    format!("`{glob}` in {field} is not a valid glob: {}", e.message),
                )
            })
        })
        .collect()
}

/// Characters that make a glob segment more than a literal name.
const GLOB_CHARS: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// The glob as an absolute glob: `~` and a leading `${workspace}` expanded,
/// a relative glob put under the workspace, and its literal leading folders
/// canonicalised (escaped, so the expanded text stays literal).
fn anchor(glob: &str, vars: &Vars) -> Result<String, String> {
    if glob.is_empty() {
        return Err("the glob is empty; name a path or a glob such as `src/**`".into());
    }
    let (base, rest) = if glob == "~" || glob.starts_with("~/") {
        let home = vars.home.clone().ok_or_else(|| {
            "`~` needs a home folder and none is known; write the path out".to_string()
        })?;
        (home, &glob[1..])
    } else if let Some(rest) = glob
        .strip_prefix("${workspace}")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    {
        (vars.workspace.clone(), rest)
    } else if glob.starts_with('/') {
        (PathBuf::from("/"), glob)
    } else {
        (vars.workspace.clone(), glob)
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let fixed = segments
        .iter()
        .position(|s| s.contains(GLOB_CHARS))
        .unwrap_or(segments.len());
    let mut prefix = base;
    for s in &segments[..fixed] {
        if !s.is_empty() {
            prefix.push(s);
        }
    }
    let prefix = canonical(&prefix);
    let mut out = escape(&prefix.to_string_lossy());
    let tail = segments[fixed..].join("/");
    if !tail.is_empty() {
        if !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(&tail);
    }
    Ok(out)
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if GLOB_CHARS.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

// ---- paths ------------------------------------------------------------------

/// `path` with its existing symlinks resolved, or lexically normalised when
/// that fails.
fn canonical(path: &Path) -> PathBuf {
    canonical_lenient(path).unwrap_or_else(|_| normalize(path))
}

/// `.` dropped and `..` applied, without looking at the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Device paths (`/dev/null`, `/dev/stderr`, `/dev/fd/3`) are not files the
/// declaration is about; `/dev/shm` and `/dev/mqueue` are file systems.
fn exempt(abs: &Path) -> bool {
    if abs.components().any(|c| c == Component::ParentDir) {
        return false;
    }
    let path = normalize(abs);
    path.starts_with("/dev")
        && path != Path::new("/dev")
        && !path.starts_with("/dev/shm")
        && !path.starts_with("/dev/mqueue")
}

fn is_path_like(s: &str) -> bool {
    matches!(s, "." | ".." | "~")
        || s.starts_with('/')
        || s.starts_with("./")
        || s.starts_with("../")
        || s.starts_with("~/")
        || s.contains('/')
}

fn is_url(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// `NAME=VALUE` with a name such as `of`, `DESTDIR` or `out-dir`.
fn key_value(s: &str) -> Option<&str> {
    let (key, value) = s.split_once('=')?;
    let mut chars = key.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    ok.then_some(value)
}

// ---- words ------------------------------------------------------------------

/// A command word, as far as the check can know its value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    /// Known before the command runs (after quote removal).
    Lit(String),
    /// `~` or `~/rest`: the home folder; holds the text after `~`.
    Home(String),
    /// Only known at run time; holds the source text.
    Dyn(String),
}

impl Word {
    /// The analysis keeps a dynamic word's source text but flags only the
    /// whole command, so in a dynamic command any word that could be source
    /// text of an expansion is taken as one.
    fn of(text: &str, dynamic: bool) -> Word {
        if !dynamic {
            Word::Lit(text.to_string())
        } else if let Some(rest) = plain_tilde(text) {
            Word::Home(rest.to_string())
        } else if looks_dynamic(text) {
            Word::Dyn(text.to_string())
        } else {
            Word::Lit(text.to_string())
        }
    }

    fn text(&self) -> String {
        match self {
            Word::Lit(t) | Word::Dyn(t) => t.clone(),
            Word::Home(rest) => format!("~{rest}"),
        }
    }

    fn lit(&self) -> Option<&str> {
        match self {
            Word::Lit(t) => Some(t),
            _ => None,
        }
    }
}

/// `~` or `~/path` with nothing else to expand: the text after `~`.
fn plain_tilde(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('~')?;
    (rest.is_empty() || (rest.starts_with('/') && !looks_dynamic(rest))).then_some(rest)
}

fn looks_dynamic(text: &str) -> bool {
    text.contains([
        '$', '`', '~', '*', '?', '[', ']', '{', '}', '\'', '"', '\\', '(', ')',
    ])
}

fn refuse_dynamic(word: &str, cmd: &Command) -> FlowError {
    FlowError::invalid_input(
        "command",
        format!(
            "hermetic mode needs literal paths: `{word}` in `{}` is only known at run time (a variable, a substitution or a glob), so it cannot be checked against `reads` and `writes` before the command runs; write the path out, or use mode = \"unhermetic\"",
            cmd.text
        ),
    )
    .with("token", word)
}

// ---- tokens -----------------------------------------------------------------

/// Where a destination operand puts what it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DestKind {
    /// Always a folder (`-t DIR`): the file lands inside it.
    Folder,
    /// A folder if it is one (or ends with `/`), else the file itself.
    Either,
}

/// One path a command names.
#[derive(Debug)]
struct Token {
    word: Word,
    /// The token as written, for messages.
    shown: String,
    write: bool,
    /// "`cp`" or "a redirection".
    by: String,
    /// For a copy's destination: how it takes the source, and the source.
    dest: Option<(DestKind, Word)>,
}

impl Token {
    fn is_relative(&self) -> bool {
        matches!(&self.word, Word::Lit(t) if !t.starts_with('/'))
            || matches!(&self.dest, Some((_, Word::Lit(t))) if !t.starts_with('/'))
    }

    /// The canonical path, or `None` when exempt.
    fn resolve(&self, cwd: &Path, vars: &Vars) -> Result<Option<PathBuf>, FlowError> {
        let abs = absolute(&self.word, cwd, vars)?;
        if exempt(&abs) {
            return Ok(None);
        }
        let mut path = canonical(&abs);
        if let Some((into, source)) = &self.dest {
            let folder = *into == DestKind::Folder || self.shown.ends_with('/') || path.is_dir();
            if folder {
                let source = normalize(&absolute(source, cwd, vars)?);
                if let Some(name) = source.file_name() {
                    path = canonical(&path.join(name));
                }
            }
        }
        Ok(Some(path))
    }
}

/// The word as an absolute path, not yet canonical.
fn absolute(word: &Word, cwd: &Path, vars: &Vars) -> Result<PathBuf, FlowError> {
    match word {
        // bash expands `~` in `of=~/x` and `NAME=~/x` too: a value that
        // starts with it is the home folder's, never a folder named `~`.
        Word::Lit(t) if t.starts_with('~') => match plain_tilde(t) {
            Some(rest) => absolute(&Word::Home(rest.to_string()), cwd, vars),
            None => absolute(&Word::Dyn(t.clone()), cwd, vars),
        },
        Word::Lit(t) if run_time_view(t) => Err(FlowError::invalid_input(
            "command",
            format!(
                "hermetic mode cannot judge `{t}`: /proc and /dev/fd show the command's own process (its folder, its files), which is only known once it runs; write the real path"
            ),
        )
        .with("token", t.clone())),
        Word::Lit(t) if t.starts_with('/') => Ok(PathBuf::from(t)),
        Word::Lit(t) => Ok(cwd.join(t)),
        Word::Home(rest) => {
            let home = vars.home.clone().ok_or_else(|| {
                FlowError::invalid_input(
                    "command",
                    format!(
                        "hermetic mode resolves `~{rest}` against the home folder, and none is known; write the path out"
                    ),
                )
                .with("token", format!("~{rest}"))
            })?;
            let rest = rest.trim_start_matches('/');
            Ok(if rest.is_empty() {
                home
            } else {
                home.join(rest)
            })
        }
        Word::Dyn(t) => Err(FlowError::invalid_input(
            "command",
            format!("hermetic mode needs literal paths: `{t}` is only known at run time"),
        )
        .with("token", t.clone())),
    }
}

/// Paths that name the running process's view (`/proc/self/cwd`,
/// `/dev/fd/3`): resolved here they would describe sluice, not the command.
fn run_time_view(t: &str) -> bool {
    let n = normalize(Path::new(t));
    n.starts_with("/proc") || n.starts_with("/dev/fd")
}

// ---- options ----------------------------------------------------------------

/// The argument of an option, as a word: the part of a word it is
/// (`-tDIR`, `--target-directory=DIR`), or the next word.
fn value(words: &[Word], v: &Value) -> Word {
    match &v.text {
        Some(text) => Word::Lit(text.clone()),
        None => words[v.word].clone(),
    }
}

/// Operands, without `-` (standard input or output).
fn operands(words: &[Word], options: &Options) -> Vec<Word> {
    options
        .operands
        .iter()
        .map(|&i| words[i].clone())
        .filter(|w| w.lit() != Some("-"))
        .collect()
}

// ---- classification ---------------------------------------------------------

#[derive(Default)]
struct Collector {
    tokens: Vec<Token>,
    changes_folder: bool,
    /// Where bare words are looked up: one that names an existing entry
    /// there is a path token.
    cwd: PathBuf,
}

impl Collector {
    fn push(&mut self, word: Word, write: bool, by: &str) {
        self.tokens.push(Token {
            shown: word.text(),
            word,
            write,
            by: by.to_string(),
            dest: None,
        });
    }

    fn push_dest(&mut self, dest: Word, into: DestKind, source: Word, by: &str) {
        self.tokens.push(Token {
            shown: dest.text(),
            word: dest,
            write: true,
            by: by.to_string(),
            dest: Some((into, source)),
        });
    }

    /// Collects `cmd`'s path tokens. The words that make what it runs (a
    /// wrapper's command, a shell's script: see [`Command::runs`]) are not
    /// its own: the analysis lists that command, or the script's, and it
    /// is checked there with its own program's classification.
    fn command(&mut self, cmd: &Command) -> Result<(), FlowError> {
        for r in &cmd.redirects {
            let word = if !r.dynamic {
                Word::Lit(r.target.clone())
            } else if let Some(rest) = plain_tilde(&r.target) {
                Word::Home(rest.to_string())
            } else {
                return Err(refuse_dynamic(&r.target, cmd));
            };
            self.push(word, r.write, "a redirection");
        }
        let words: Vec<Word> = cmd.words.iter().map(|w| Word::of(w, cmd.dynamic)).collect();
        let Some(program) = words.first() else {
            return Ok(());
        };
        if let Word::Dyn(p) = program {
            return Err(FlowError::invalid_input(
                "command",
                format!(
                    "hermetic mode needs a literal program name to tell what its operands are: `{p}` in `{}` is only known at run time; write the program out, or use mode = \"unhermetic\"",
                    cmd.text
                ),
            )
            .with("token", p.clone()));
        }
        if cmd.dynamic && !words.iter().any(|w| !matches!(w, Word::Lit(_))) {
            return Err(appended(cmd));
        }
        let name = program.text();
        let name = name.rsplit('/').next().unwrap_or_default().to_string();
        if name == "xargs" {
            return Err(appended(cmd));
        }
        // What it runs is not its own to classify: a wrapper's command is
        // checked where the analysis lists it, a script by the commands it
        // runs, a script file as a read. A script's words are still
        // refused here when only known at run time, since then so is what
        // it runs.
        let of_run = |kinds: &[RunKind]| -> Vec<usize> {
            cmd.runs
                .iter()
                .filter(|r| kinds.contains(&r.kind))
                .flat_map(|r| r.words.iter().copied())
                .collect()
        };
        let commands = of_run(&[RunKind::Argv]);
        let scripts = of_run(&[RunKind::Script, RunKind::File]);
        let files = of_run(&[RunKind::File]);
        let known = KNOWN.contains(&name.as_str());
        let mut operands_only = false;
        for w in (1..words.len())
            .filter(|i| !commands.contains(i))
            .map(|i| &words[i])
        {
            match w {
                Word::Lit(t) if t == "--" => operands_only = true,
                // A bare flag (`-$n`) names no path for a command the check
                // does not take apart.
                Word::Dyn(t) if !known && !operands_only && is_flag(t) => {}
                Word::Dyn(t) => return Err(refuse_dynamic(t, cmd)),
                _ => {}
            }
        }
        let by = format!("`{name}`");
        let own = |i: &usize| !commands.contains(i) && !scripts.contains(i);
        let own_words: Vec<Word> = (1..words.len())
            .filter(own)
            .map(|i| words[i].clone())
            .collect();
        let args = own_words.as_slice();
        let symbolic = name == "ln"
            && args.iter().any(|w| {
                w.lit().is_some_and(|t| {
                    t == "--symbolic"
                        || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
                })
            });
        if symbolic || matches!(name.as_str(), "alias" | "shopt") {
            return Err(FlowError::invalid_input(
                "command",
                format!(
                    "hermetic mode cannot check `{}`: {}; run it with mode = \"unhermetic\"",
                    cmd.text,
                    if symbolic {
                        "a symbolic link's target resolves from the link's folder when used, not where the check stands"
                    } else {
                        "an alias can turn later words into any command, which a lexical check cannot follow"
                    }
                ),
            )
            .with("token", name.clone()));
        }
        // A script file it runs is read.
        for &i in &files {
            self.push(words[i].clone(), false, &by);
        }
        // The programs that name files come with their options parsed by
        // the analysis's table.
        let options = cmd.options.as_ref();
        match (name.as_str(), options) {
            ("cd" | "pushd" | "popd", _) => self.changes_folder = true,
            ("cp" | "mv" | "install" | "ln", Some(o)) => self.copy(&name, &words, o, &by),
            (
                "rm" | "rmdir" | "mkdir" | "touch" | "truncate" | "shred" | "chmod" | "chown"
                | "chgrp" | "tee",
                Some(o),
            ) => self.modify(&name, &words, o, &by),
            ("dd", _) => {
                for w in args {
                    let Some(t) = w.lit() else { continue };
                    if let Some(v) = t.strip_prefix("of=") {
                        self.push(Word::Lit(v.into()), true, &by);
                    } else if let Some(v) = t.strip_prefix("if=") {
                        self.push(Word::Lit(v.into()), false, &by);
                    }
                }
            }
            ("sed", Some(o)) => self.sed(&words, o, &by),
            ("perl", _) => self.perl(args, &by),
            ("find", _) => self.find(args, &by),
            ("eval" | "trap", _) => {}
            // A shell's options are not paths, but its rcfile is read.
            (s, Some(o)) if shell::is_shell(s) => {
                for v in o.values(&["rcfile", "init-file"]) {
                    self.push(value(&words, v), false, &by);
                }
                let operands: Vec<Word> = o
                    .operands
                    .iter()
                    .filter(|i| own(i))
                    .map(|&i| words[i].clone())
                    .collect();
                self.generic(&operands, &by);
            }
            _ => self.generic(args, &by),
        }
        Ok(())
    }

    /// Path-like words, read.
    fn generic(&mut self, args: &[Word], by: &str) {
        let mut operands_only = false;
        for w in args {
            let text = match w {
                Word::Lit(t) => t.as_str(),
                Word::Home(_) => {
                    self.push(w.clone(), false, by);
                    continue;
                }
                Word::Dyn(_) => continue,
            };
            let candidate = if operands_only {
                text
            } else if text == "--" {
                operands_only = true;
                continue;
            } else if text.starts_with('-') {
                match text.split_once('=') {
                    Some((_, value)) => value,
                    None => continue,
                }
            } else {
                key_value(text).unwrap_or(text)
            };
            let names_entry =
                !candidate.is_empty() && self.cwd.join(candidate).symlink_metadata().is_ok();
            if (is_path_like(candidate) || names_entry) && !is_url(candidate) {
                self.push(Word::Lit(candidate.into()), false, by);
            }
        }
    }

    /// `cp`, `mv`, `install`, `ln`.
    fn copy(&mut self, name: &str, words: &[Word], options: &Options, by: &str) {
        let ops = operands(words, options);
        let moves = name == "mv";
        if name == "install" && options.has(&["d", "directory"]) {
            for w in ops {
                self.push(w, true, by);
            }
            return;
        }
        let target = options
            .values(&["t", "target-directory"])
            .next()
            .map(|v| value(words, v));
        let (sources, dest) = match target {
            Some(t) => (ops, Some((t, DestKind::Folder))),
            None if ops.len() >= 2 => {
                let mut sources = ops;
                let dest = sources.pop().expect("two operands");
                let into = if options.has(&["T", "no-target-directory"]) {
                    None
                } else {
                    Some(DestKind::Either)
                };
                match into {
                    Some(into) => (sources, Some((dest, into))),
                    None => {
                        self.push(dest, true, by);
                        (sources, None)
                    }
                }
            }
            // `ln -s /x/y` makes `./y`.
            None if name == "ln" && ops.len() == 1 => {
                (ops, Some((Word::Lit(".".into()), DestKind::Folder)))
            }
            None => (ops, None),
        };
        for source in sources {
            if let Some((dest, into)) = &dest {
                self.push_dest(dest.clone(), *into, source.clone(), by);
            }
            self.push(source, moves, by);
        }
    }

    /// Commands that write every file operand.
    fn modify(&mut self, name: &str, words: &[Word], options: &Options, by: &str) {
        // `chmod -w f`: a mode that looks like an option.
        let mode_option = name == "chmod"
            && words[1..].iter().filter_map(Word::lit).any(|t| {
                t.strip_prefix('-').is_some_and(|m| {
                    !m.is_empty() && m.chars().all(|c| "rwxXstugoa+-=,01234567".contains(c))
                })
            });
        let reads: &[&str] = match name {
            "touch" | "truncate" => &["r", "reference"],
            "chmod" | "chown" | "chgrp" => &["reference"],
            "shred" => &["random-source"],
            _ => &[],
        };
        for v in options.values(reads) {
            self.push(value(words, v), false, by);
        }
        let mut ops = operands(words, options).into_iter();
        let first_is_not_a_path = matches!(name, "chmod" | "chown" | "chgrp")
            && !options.has(&["reference"])
            && !mode_option;
        if first_is_not_a_path {
            ops.next();
        }
        for w in ops {
            self.push(w, true, by);
        }
    }

    fn sed(&mut self, words: &[Word], options: &Options, by: &str) {
        for v in options.values(&["f", "file"]) {
            self.push(value(words, v), false, by);
        }
        let in_place = options.has(&["i", "in-place"]);
        let mut ops = operands(words, options).into_iter();
        if !options.has(&["e", "expression", "f", "file"]) {
            ops.next(); // the script
        }
        for w in ops {
            self.push(w, in_place, by);
        }
    }

    fn perl(&mut self, args: &[Word], by: &str) {
        let mut code = false;
        let mut in_place = false;
        let mut ops: Vec<Word> = Vec::new();
        let mut it = args.iter();
        let mut operands_only = false;
        while let Some(w) = it.next() {
            let text = match w.lit() {
                Some(t) if !operands_only && ops.is_empty() && t.starts_with('-') && t != "-" => t,
                _ => {
                    ops.push(w.clone());
                    continue;
                }
            };
            if text == "--" {
                operands_only = true;
                continue;
            }
            let body: Vec<char> = text[1..].chars().collect();
            let mut k = 0;
            while k < body.len() {
                let c = body[k];
                k += 1;
                match c {
                    'e' | 'E' => {
                        code = true;
                        if k == body.len() {
                            it.next();
                        }
                        break;
                    }
                    'i' => {
                        in_place = true;
                        break;
                    }
                    'I' => {
                        if k == body.len() {
                            it.next();
                        }
                        break;
                    }
                    '0' | 'l' => {
                        while k < body.len() && body[k].is_ascii_hexdigit() {
                            k += 1;
                        }
                    }
                    'x' | 'C' | 'd' | 'D' | 'F' | 'M' | 'm' | 'V' => break,
                    _ => {}
                }
            }
        }
        let mut ops = ops.into_iter().filter(|w| w.lit() != Some("-"));
        if !code {
            if let Some(script) = ops.next() {
                self.push(script, false, by);
            }
        }
        let rest: Vec<Word> = ops.collect();
        if in_place {
            for w in rest {
                self.push(w, true, by);
            }
        } else {
            self.generic(&rest, by);
        }
    }

    fn find(&mut self, args: &[Word], by: &str) {
        let mut i = 0;
        // Leading options: -H, -L, -P, -D debugopts, -Olevel.
        while let Some(t) = args.get(i).and_then(Word::lit) {
            match t {
                "-H" | "-L" | "-P" => i += 1,
                "-D" => i += 2,
                t if t.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        let mut starts = Vec::new();
        while let Some(w) = args.get(i) {
            match w.lit() {
                Some(t) if t.starts_with('-') || matches!(t, "(" | ")" | "!" | ",") => break,
                _ => starts.push(w.clone()),
            }
            i += 1;
        }
        if starts.is_empty() {
            starts.push(Word::Lit(".".into()));
        }
        let mut deletes = false;
        while let Some(w) = args.get(i) {
            i += 1;
            match w.lit() {
                Some("-delete") => deletes = true,
                Some("-fprint" | "-fprint0" | "-fls" | "-fprintf") => {
                    if let Some(file) = args.get(i) {
                        self.push(file.clone(), true, by);
                        i += 1;
                    }
                }
                Some("-newer" | "-anewer" | "-cnewer" | "-samefile" | "-files0-from") => {
                    if let Some(file) = args.get(i) {
                        self.push(file.clone(), false, by);
                        i += 1;
                    }
                }
                _ => {}
            }
        }
        for w in starts {
            self.push(w, deletes, by);
        }
    }
}

/// Commands whose operands the check takes apart: a dynamic word there is
/// refused even when it looks like a flag (`-t$dir`).
const KNOWN: &[&str] = &[
    "cp", "mv", "install", "ln", "rm", "rmdir", "mkdir", "touch", "truncate", "shred", "chmod",
    "chown", "chgrp", "tee", "dd", "sed", "perl", "find",
];

fn is_flag(text: &str) -> bool {
    text.starts_with('-') && text != "-" && !text.contains('=')
}

fn appended(cmd: &Command) -> FlowError {
    FlowError::invalid_input(
        "command",
        format!(
            "hermetic mode needs literal paths: `{}` receives arguments only known at run time (`xargs`, `find -exec ... {{}}`), so they cannot be checked against `reads` and `writes`; name the files in the command line, or use mode = \"unhermetic\"",
            cmd.text
        ),
    )
    .with("token", cmd.text.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Ws {
        _dir: tempfile::TempDir,
        root: PathBuf,
        vars: Vars,
    }

    fn ws() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs::create_dir_all(&home).unwrap();
        for d in ["src", "build", "in", "out", "other", "sub"] {
            fs::create_dir_all(root.join("ws").join(d)).unwrap();
        }
        fs::write(root.join("ws/src/a.rs"), "a").unwrap();
        let vars = Vars {
            workspace: root.join("ws"),
            home: Some(home),
        };
        Ws {
            _dir: dir,
            root,
            vars,
        }
    }

    impl Ws {
        fn w(&self) -> PathBuf {
            self.vars.workspace.clone()
        }

        fn declared(&self, reads: &[&str], writes: &[&str]) -> Declared {
            let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            Declared::new(&s(reads), &s(writes), &self.vars).unwrap()
        }

        fn check(
            &self,
            command: &str,
            reads: &[&str],
            writes: &[&str],
        ) -> Result<Touched, FlowError> {
            check(
                command,
                &self.w(),
                &self.declared(reads, writes),
                &self.vars,
            )
        }
    }

    fn assert_err(r: Result<Touched, FlowError>, code: ErrorCode, path: &Path) -> FlowError {
        let e = r.expect_err("expected an error");
        assert_eq!(e.code, code, "{e}");
        assert_eq!(e.details["path"], path.to_string_lossy().as_ref(), "{e}");
        assert!(e.message.contains(&*path.to_string_lossy()), "{e}");
        e
    }

    fn assert_refused(r: Result<Touched, FlowError>, token: &str) -> FlowError {
        let e = r.expect_err("expected a refusal");
        assert_eq!(e.code, ErrorCode::InvalidInput, "{e}");
        assert_eq!(e.details["field"], "command", "{e}");
        assert!(e.message.contains(token), "{e}");
        assert!(e.message.contains("hermetic mode needs"), "{e}");
        e
    }

    #[test]
    fn cp_from_declared_reads_to_declared_writes_passes() {
        let ws = ws();
        let w = ws.w();
        let cmd = format!("cp {}/src/a.rs {}/build/a.rs", w.display(), w.display());
        let t = ws.check(&cmd, &["src/**"], &["build/**"]).unwrap();
        assert_eq!(t.reads, vec![w.join("src/a.rs")]);
        assert_eq!(t.writes, vec![w.join("build/a.rs")]);
    }

    #[test]
    fn cp_into_an_existing_folder_writes_the_file_inside_it() {
        let ws = ws();
        let w = ws.w();
        let t = ws
            .check("cp src/a.rs build", &["src/**"], &["build/**"])
            .unwrap();
        assert_eq!(t.writes, vec![w.join("build/a.rs")]);
        let t = ws
            .check("cp -t build src/a.rs", &["src/**"], &["build/**"])
            .unwrap();
        assert_eq!(t.writes, vec![w.join("build/a.rs")]);
    }

    #[test]
    fn write_outside_declared_writes_is_refused() {
        let ws = ws();
        let w = ws.w();
        let r = ws.check("cp src/a.rs other/a.rs", &["src/**"], &["build/**"]);
        let e = assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("other/a.rs"));
        assert_eq!(e.details["token"], "other/a.rs");
        assert!(e.message.contains("`writes`"), "{e}");
    }

    #[test]
    fn read_outside_declared_reads_is_refused() {
        let ws = ws();
        let w = ws.w();
        let r = ws.check("cat other/x.txt", &["src/**"], &["build/**"]);
        let e = assert_err(r, ErrorCode::OutsideDeclaredReads, &w.join("other/x.txt"));
        assert_eq!(e.details["token"], "other/x.txt");
        assert!(e.message.contains("`reads`"), "{e}");
        // A declared-writable path may be read.
        ws.check("cat build/x.txt", &[], &["build/**"]).unwrap();
    }

    #[test]
    fn redirects_are_checked_by_direction() {
        let ws = ws();
        let w = ws.w();
        let t = ws
            .check("sort < in/data > out/x", &["in/**"], &["out/**"])
            .unwrap();
        assert_eq!(t.reads, vec![w.join("in/data")]);
        assert_eq!(t.writes, vec![w.join("out/x")]);
        let r = ws.check("echo hi > out/x", &["out/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("out/x"));
        let r = ws.check("sort < in/data", &[], &["out/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &w.join("in/data"));
    }

    #[test]
    fn a_bare_word_naming_an_existing_file_is_a_path_token() {
        let ws = ws();
        fs::write(ws.w().join("other.txt"), "x").unwrap();
        let r = ws.check("cat other.txt", &["src/**"], &[]);
        assert_err(
            r,
            ErrorCode::OutsideDeclaredReads,
            &ws.w().join("other.txt"),
        );
        // A word naming nothing there is not a path (`git status`).
        assert!(ws.check("git status", &["src/**"], &[]).is_ok());
    }

    #[test]
    fn a_command_made_of_another_commands_operands_does_not_hide_them() {
        let ws = ws();
        let home = ws.vars.home.clone().unwrap();
        fs::write(home.join("id_rsa"), "k").unwrap();
        let key = home.join("id_rsa");
        let line = format!("cp {} leak; {} leak", key.display(), key.display());
        let r = ws.check(&line, &[], &["**"]);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &key);
    }

    #[test]
    fn tilde_after_an_assignment_is_the_home_folder() {
        let ws = ws();
        let home = ws.vars.home.clone().unwrap();
        let r = ws.check("dd if=/dev/zero of=~/.ssh/authorized_keys", &[], &["**"]);
        assert_err(
            r,
            ErrorCode::OutsideDeclaredWrites,
            &home.join(".ssh/authorized_keys"),
        );
    }

    #[test]
    fn proc_and_dev_fd_paths_alias_symlinks_and_aliases_are_refused() {
        let ws = ws();
        for line in [
            "echo k >> /proc/self/cwd/authorized_keys",
            "cat /dev/fd/3",
            "ln -s ../.bashrc link",
            "ln --symbolic a b",
            "alias go='cd /tmp'",
        ] {
            let e = ws.check(line, &["**"], &["**"]).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidInput, "{line}");
            assert_eq!(e.details["field"], "command", "{line}");
        }
        assert!(ws.check("echo x > /dev/null", &[], &[]).is_ok());
    }

    #[test]
    fn dev_null_is_exempt() {
        let ws = ws();
        let t = ws
            .check("cat /dev/null > /dev/null 2>/dev/stderr", &[], &[])
            .unwrap();
        assert_eq!(t, Touched::default());
        let r = ws.check("echo x > /dev/shm/x", &[], &[]);
        assert_err(
            r,
            ErrorCode::OutsideDeclaredWrites,
            &canonical(Path::new("/dev/shm/x")),
        );
    }

    #[test]
    fn relative_tokens_resolve_against_cwd_not_the_workspace() {
        let ws = ws();
        let w = ws.w();
        let cwd = w.join("sub");
        let declared = ws.declared(&["src/**"], &["sub/out.rs"]);
        let t = check("cp ../src/a.rs out.rs", &cwd, &declared, &ws.vars).unwrap();
        assert_eq!(t.reads, vec![w.join("src/a.rs")]);
        assert_eq!(t.writes, vec![w.join("sub/out.rs")]);
        // `./src/a.rs` is `sub/src/a.rs` here, not the declared `src/a.rs`.
        let r = check("cat ./src/a.rs", &cwd, &declared, &ws.vars);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &w.join("sub/src/a.rs"));
    }

    #[test]
    fn symlink_inside_a_declared_tree_pointing_outside_is_caught() {
        let ws = ws();
        let w = ws.w();
        let secret = ws.root.join("secret");
        fs::create_dir_all(&secret).unwrap();
        std::os::unix::fs::symlink(&secret, w.join("build/link")).unwrap();
        let r = ws.check("echo x > build/link/pw", &[], &["build/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &secret.join("pw"));
        let r = ws.check("cat src/../build/link/pw", &["src/**", "build/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &secret.join("pw"));
    }

    #[test]
    fn dynamic_words_are_refused() {
        let ws = ws();
        let all = ["**"];
        assert_refused(ws.check("cat $f", &all, &all), "$f");
        assert_refused(ws.check("rm \"$f\"", &all, &all), "\"$f\"");
        assert_refused(ws.check("cat src/*.rs", &all, &all), "src/*.rs");
        assert_refused(ws.check("ls *.rs", &all, &all), "*.rs");
        assert_refused(ws.check("cat $(ls)", &all, &all), "$(ls)");
        assert_refused(ws.check("echo x > $out", &all, &all), "$out");
        assert_refused(ws.check("$CMD build", &all, &all), "$CMD");
        assert_refused(ws.check("ls | xargs rm", &all, &all), "xargs rm");
        assert_refused(ws.check("find . -exec rm {} +", &all, &all), "rm {}");
        assert_refused(ws.check("cd src && rm a.rs", &all, &all), "a.rs");
        // A bare flag is not a path; `~/x` is the home folder.
        let t = ws.check("head -$n ~/notes", &["~/**"], &[]).unwrap();
        assert_eq!(t.reads, vec![ws.vars.home.clone().unwrap().join("notes")]);
    }

    #[test]
    fn unparsable_line_is_refused() {
        let ws = ws();
        let e = assert_refused(ws.check("echo (", &["**"], &["**"]), "cannot be analyzed");
        assert_eq!(e.details["field"], "command");
    }

    #[test]
    fn relative_declared_globs_resolve_against_the_workspace() {
        let ws = ws();
        let w = ws.w();
        let declared = ws.declared(&["src/**"], &["${workspace}/build/**"]);
        // Run from `sub`: `src/**` is still the workspace's `src`.
        let cwd = w.join("sub");
        let t = check("cp ../src/a.rs ../build/", &cwd, &declared, &ws.vars).unwrap();
        assert_eq!(t.reads, vec![w.join("src/a.rs")]);
        assert_eq!(t.writes, vec![w.join("build/a.rs")]);
        let r = check("cat src/a.rs", &cwd, &declared, &ws.vars);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &w.join("sub/src/a.rs"));
    }

    #[test]
    fn bad_glob_names_the_field() {
        let ws = ws();
        let vars = &ws.vars;
        let e = Declared::new(&[], &["src/[a".into()], vars).err().unwrap();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["field"], "writes[0]");
        assert!(e.message.contains("src/[a"), "{}", e.message);
        let reads = ["a/**".into(), "b".into(), "".into()];
        let e = Declared::new(&reads, &[], vars).err().unwrap();
        assert_eq!(e.details["field"], "reads[2]");
    }

    #[test]
    fn rm_rf_build_is_a_write() {
        let ws = ws();
        let w = ws.w();
        let r = ws.check("rm -rf build", &["**"], &["build/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("build"));
        let t = ws.check("rm -rf build", &[], &["build"]).unwrap();
        assert_eq!(t.writes, vec![w.join("build")]);
        assert!(t.reads.is_empty());
    }

    #[test]
    fn dd_reads_if_and_writes_of() {
        let ws = ws();
        let w = ws.w();
        let t = ws
            .check("dd if=in/a of=out/b bs=4k", &["in/**"], &["out/**"])
            .unwrap();
        assert_eq!(t.reads, vec![w.join("in/a")]);
        assert_eq!(t.writes, vec![w.join("out/b")]);
        let r = ws.check("dd if=in/a of=out/b", &["in/**", "out/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("out/b"));
    }

    #[test]
    fn well_known_writers() {
        let ws = ws();
        let w = ws.w();
        let t = ws
            .check("mv src/a.rs build/b.rs", &[], &["src/**", "build/**"])
            .unwrap();
        assert_eq!(t.writes, vec![w.join("build/b.rs"), w.join("src/a.rs")]);
        let r = ws.check("mv src/a.rs build/b.rs", &["src/**"], &["build/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("src/a.rs"));
        let t = ws
            .check(
                "chmod 755 build/x && sed -i 's/a/b/' build/y",
                &[],
                &["build/**"],
            )
            .unwrap();
        assert_eq!(t.writes, vec![w.join("build/x"), w.join("build/y")]);
        let t = ws
            .check(
                "sed -n 's/a/b/p' src/a.rs | tee out/log",
                &["src/**"],
                &["out/**"],
            )
            .unwrap();
        assert_eq!(t.reads, vec![w.join("src/a.rs")]);
        assert_eq!(t.writes, vec![w.join("out/log")]);
        let r = ws.check("perl -pi -e 's/a/b/' src/a.rs", &["src/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("src/a.rs"));
        let r = ws.check("mkdir -p -m 700 out/new", &[], &["build/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("out/new"));
        let r = ws.check("find build -name x -delete", &["**"], &["build/**"]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("build"));
    }

    #[test]
    fn programs_urls_options_and_wrappers() {
        let ws = ws();
        let w = ws.w();
        // The program is not a path token; a URL is not a path.
        let t = ws
            .check("/usr/bin/curl -o/x https://example.org/a", &[], &[])
            .unwrap();
        assert_eq!(t, Touched::default());
        let r = ws.check("tool --out=/etc/x", &[], &[]);
        assert_err(
            r,
            ErrorCode::OutsideDeclaredReads,
            &canonical(Path::new("/etc/x")),
        );
        // The wrapped command is classified as itself.
        let r = ws.check("sudo rm -f src/a.rs", &["src/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("src/a.rs"));
        let r = ws.check("bash -c 'rm -f src/a.rs'", &["**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("src/a.rs"));
    }

    #[test]
    fn what_a_wrapper_runs_is_checked_as_that_command() {
        let ws = ws();
        let w = ws.w();
        // Every wrapper of the analysis, not only `sudo` and `env`.
        let r = ws.check("chrt 1 rm -f src/a.rs", &["src/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("src/a.rs"));
        let r = ws.check("sudo --login rm -rf build", &["**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredWrites, &w.join("build"));
        let r = ws.check("nsenter -t 1 --wd cat /etc/passwd", &["src/**"], &[]);
        assert_err(
            r,
            ErrorCode::OutsideDeclaredReads,
            &canonical(Path::new("/etc/passwd")),
        );
        // Its words are that command's: a sed script is not the wrapper's
        // path.
        let t = ws
            .check("chrt 1 sed 's/a/b/' src/a.rs", &["src/**"], &[])
            .unwrap();
        assert_eq!(t.reads, vec![w.join("src/a.rs")]);
        // A shell's script file is read; its options are not paths.
        fs::write(w.join("pipefail"), "").unwrap();
        let r = ws.check("bash -o pipefail x.sh", &["src/**"], &[]);
        assert_err(r, ErrorCode::OutsideDeclaredReads, &w.join("x.sh"));
        ws.check("bash -o pipefail -c 'cat src/a.rs'", &["src/**"], &[])
            .unwrap();
        // `install --strip` takes no argument.
        let t = ws
            .check(
                "install --strip src/a.rs build/x",
                &["src/**"],
                &["build/**"],
            )
            .unwrap();
        assert_eq!(t.writes, vec![w.join("build/x")]);
    }
}
