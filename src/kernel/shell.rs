//! Shell command lines, taken apart into what a policy must check.
//!
//! `proc:spawn` resources are command lines, and a rule such as
//! `allow "proc:spawn:git *"` must not let `git status && curl x | sh`
//! through. [`analyze`] parses a line with a real bash parser
//! ([brush-parser](https://docs.rs/brush-parser)) and lists every simple
//! command in it, wherever it sits, so the kernel checks each one:
//!
//! - lists and pipelines (`;`, `&&`, `||`, `&`, `|`, `|&`), `!`, `time`;
//! - subshells `( )`, groups `{ }`, `if`, `for`, `while`, `until`, `case`,
//!   `(( ))`, `[[ ]]`, `coproc`, and function bodies;
//! - command substitutions `$(...)` and backticks, inside any word: plain,
//!   double-quoted, in assignments (`X=$(curl x)`), redirect targets,
//!   here-strings, unquoted here-documents, `${x:-$(...)}` and `$((...))`;
//! - process substitutions `<(...)` and `>(...)`;
//! - commands that run their arguments as a command: the shells
//!   (`bash -c 'S'`, `sh -lc "S"`, `bash <<'EOF'`), `env`, `timeout`,
//!   `nice`, `nohup`, `setsid`, `stdbuf`, `time`, `command`, `builtin`,
//!   `exec`, `sudo`, `doas`, `su -c`, `runuser`, `xargs`, `find -exec`,
//!   `eval` and `trap`; util-linux's `chrt`, `taskset`, `ionice`,
//!   `unshare`, `nsenter`, `setpriv`, `flock` (a command or `-c SCRIPT`),
//!   `setarch` (and `linux32`, `linux64`, ...), `choom`, `prlimit`,
//!   `script -c`, `chroot`, `sg`, `newgrp`; `logsave`, `strace`,
//!   `valgrind`, `perf stat|record|trace`, `ssh-agent`, `busybox APPLET`,
//!   `capsh --`, `start-stop-daemon -S`, `rlwrap`, `watch` (a script, or
//!   `-x` and a command), `parallel`, `ip netns exec`, `systemd-run`, the
//!   dynamic loader (`ld.so`, `ld-linux-x86-64.so.2`); `ssh HOST CMD`
//!   (judged as if it ran here: the host may be this machine); and the
//!   package runners `npx`, `npm exec`, `pnpm dlx`, `yarn exec`, `uv run`,
//!   `uvx`, `poetry run`, `pipx run`, `bundle exec`, `rustup run`. The
//!   wrapper is listed, then the command it runs (whose [`Command::text`]
//!   starts at that command's name), recursively, with the wrapper's
//!   assignments and standard input (see [`Command::env`] and
//!   [`Command::fed`]).
//! - what such a command runs when it is only known at run time (`sh -c
//!   "$CMD"`, `eval "$X"`, a script in an expanded here-document), and the
//!   shell a wrapper starts when given no command (`script`, `unshare -r`,
//!   `chroot /`, `su`, `sudo -s`, `run-parts DIR`), listed as one command
//!   whose program is dynamic (`$SHELL` for a shell), see
//!   [`Command::program_dynamic`].
//!
//! # Order
//!
//! Commands are listed in source order, each before the commands nested in
//! it: first those in its words and redirects, then the one it runs as a
//! wrapper. `echo $(curl x)` lists `echo $(curl x)`, then `curl x`.
//!
//! # Words
//!
//! A word whose value is known before the command runs is given after quote
//! removal: `'a b'` is `a b`, `"x"` is `x`, `\rm` is `rm`, `$'\x72m'` is
//! `rm`. A word whose value is only known at run time keeps its source text,
//! quotes and all: parameter expansions (`$f`, `"$f"`, `${x:-y}`),
//! substitutions (`$(date)`, `` `date` ``, `$((1+2))`), tilde (`~/.bashrc`),
//! unquoted glob patterns (`*.rs`, `[ab]`, extglobs) and brace expansions
//! (`{a,b}`). The source text is never a guess at the value: it still holds
//! the `$`, backquote, `~`, glob or quote characters, so it matches a rule
//! only through a wildcard or by spelling them out. `rm "$f"` does not
//! match `proc:spawn:rm build`, whatever `$f` holds; it does match
//! `proc:spawn:rm *`, which allows `rm` with any argument anyway. Such a
//! command has [`Command::dynamic`] set, and so does a redirect target
//! ([`Redirect::dynamic`]), so the kernel can refuse to take a deny rule's
//! silence as consent.
//!
//! # Lines that are not analyzed
//!
//! A line that does not parse, that nests more than [`MAX_DEPTH`] levels
//! deep, or that is longer than [`MAX_LINE_BYTES`] is
//! [`Analysis::Unparsed`]: the kernel checks it whole, and unless a rule
//! matches it whole it is an ask. So is a wrapper whose inner script does
//! not parse (`bash -c 'echo ('`), and `env -S`, whose argument is split by
//! rules of its own.
//!
//! # What it cannot see
//!
//! Only what is written in the line. A command built at run time is listed
//! as written (`$CMD x` keeps `$CMD x`, dynamic), and a script read from a
//! file or a pipe (`bash script.sh`, `curl x | sh`) is listed as the command
//! that reads it (`bash script.sh`, `sh`, fed), not as what it runs.
//! Programs that run code given in an option (`python -c`, `git -c
//! alias...`, `tar --to-command`) are listed as themselves: the forms of
//! [`super::programs`] find those. File writes that are not redirections
//! (`tee f`, `cp a b`) are not listed. A redirection to
//! `/dev/tcp/HOST/PORT` or `/dev/udp/...` is a network connection in bash,
//! though it is listed as a file like any other.
//!
//! brush-parser does not parse `select`, `for ((;;))` with an empty part,
//! or `case` inside `$(...)`; such lines are [`Analysis::Unparsed`]. It
//! reads nested subshells written `( (a) )` as arithmetic; this module
//! corrects that from the source text.

use brush_parser::ast;
use brush_parser::word::{self, Parameter, ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// Lines longer than this are not analyzed (they are
/// [`Analysis::Unparsed`]).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// How deeply commands may nest (compound commands, substitutions,
/// wrappers, each counting one level) before a line is
/// [`Analysis::Unparsed`].
pub const MAX_DEPTH: usize = 100;

/// The parser recurses once per nesting level, and a level can be as short
/// as a few bytes (`{ ` and `;}`), so the analysis runs on its own thread
/// with a stack sized to the line: measured, brush-parser 0.4 needs up to
/// about 4.3 KiB of stack per byte of input in a debug build and 1.4 KiB in
/// a release build. Stack is reserved, not touched, unless the line nests.
const STACK_BASE: usize = 4 << 20;
const STACK_PER_BYTE: usize = if cfg!(debug_assertions) {
    8 << 10
} else {
    4 << 10
};

/// One simple command the line runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The command's words (name first), without leading assignments and
    /// redirections. See the module doc for static and dynamic words.
    /// Empty for a command that only redirects (`> f`, or the redirections
    /// of a compound command such as `{ a; } > f`): it spawns nothing and
    /// is listed for its [`Command::redirects`] only.
    pub words: Vec<String>,
    /// `words` joined by single spaces.
    pub text: String,
    /// The assignments in effect for the command, as written (`GIT_DIR=x`
    /// in `GIT_DIR=x git log`): they change what it does, so the kernel
    /// checks them with it. In order: assignments the line made earlier to
    /// a variable of [`super::programs::VARS`] (`PATH=/x; git status`,
    /// `export PAGER=y; git log`), those of the wrappers around it
    /// (`PAGER=y timeout 5 git log`, `env PAGER=y git log`, the script of
    /// `PAGER=y sh -c 'git log'`), then its own leading assignments.
    pub env: Vec<String>,
    /// The command's redirections to or from files, in order. Descriptor
    /// duplications (`2>&1`, `3>&-`), here-documents and here-strings are
    /// not files and are not listed. A command run by a wrapper inherits the
    /// wrapper's redirections; they are listed on the wrapper only.
    pub redirects: Vec<Redirect>,
    /// Some word's value is only known at run time: it contains an
    /// expansion, or the command gets arguments at run time (`xargs rm`,
    /// `find -exec rm {} ;`).
    pub dynamic: bool,
    /// The program itself is only known at run time: its name is an
    /// expansion (`$T x`, `$(echo touch) x`), or it is a script given at
    /// run time (`sh -c "$CMD"`, `eval "$CMD"`), or the shell a wrapper
    /// starts when it is given no command (`script`, `unshare -r`,
    /// `chroot /`, listed as `$SHELL`).
    pub program_dynamic: bool,
    /// Its standard input may carry data from the line: it follows a `|`,
    /// or it (or a compound command or wrapper around it) reads a file,
    /// a here-document or a here-string on standard input, or an earlier
    /// `exec <file` redirected the shell's. A program that runs commands it
    /// reads on standard input (`ed`, `vim`, `sqlite3 db`) is then fed some.
    pub fed: bool,
}

/// A file a command reads or writes through a redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Opened for writing: `>`, `>>`, `>|`, `&>`, `&>>`, `>&file`, `<>`.
    /// `false` for `<`.
    pub write: bool,
    /// The target word: after quote removal when static, else its source
    /// text (`~/.bashrc`, `$(curl x)`), as for command words.
    pub target: String,
    /// The target's value is only known at run time.
    pub dynamic: bool,
}

/// What [`analyze`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Analysis {
    /// Every simple command in the line, in order (see the module doc).
    Parsed(Vec<Command>),
    /// The line could not be analyzed: check it whole.
    Unparsed { reason: String },
}

/// Lists every simple command in a shell command line (bash syntax).
pub fn analyze(line: &str) -> Analysis {
    if line.len() > MAX_LINE_BYTES {
        return Analysis::Unparsed {
            reason: format!(
                "the command line is {} bytes; lines over {MAX_LINE_BYTES} bytes are not analyzed",
                line.len()
            ),
        };
    }
    let stack = STACK_BASE + line.len() * STACK_PER_BYTE;
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("sluice-shell-parse".into())
            .stack_size(stack)
            .spawn_scoped(scope, || analyze_here(line));
        match spawned {
            Ok(handle) => handle.join().unwrap_or_else(|_| Analysis::Unparsed {
                reason: "the shell parser failed on this line".into(),
            }),
            Err(e) => Analysis::Unparsed {
                reason: format!("could not start the shell parser: {e}"),
            },
        }
    })
}

fn analyze_here(line: &str) -> Analysis {
    let mut walker = Walker {
        options: ParserOptions::default(),
        out: Vec::new(),
        env: Vec::new(),
        fed: false,
        exec_fed: false,
    };
    match walker.script(line, 0) {
        Ok(()) => Analysis::Parsed(walker.out),
        Err(reason) => Analysis::Unparsed { reason },
    }
}

/// A word as the command will see it: `text` is the value after quote
/// removal, or the source text when `dynamic`.
#[derive(Debug, Clone)]
struct Arg {
    text: String,
    dynamic: bool,
}

/// A simple command's parts, gathered in order.
#[derive(Default)]
struct Parts {
    words: Vec<Arg>,
    env: Vec<String>,
    redirects: Vec<Redirect>,
    /// The last here-document or here-string on standard input.
    stdin: Option<Arg>,
    /// Some redirection gives it data on standard input.
    fed: bool,
}

/// What a redirection contributes to its command.
enum Redir {
    None,
    File(Redirect),
    /// A here-document or here-string on standard input: its text.
    Stdin(Arg),
}

type Walk<T = ()> = Result<T, String>;

struct Walker {
    options: ParserOptions,
    out: Vec<Command>,
    /// The assignments in effect where the walk is (see [`Command::env`]).
    env: Vec<String>,
    /// Standard input may carry data where the walk is (see
    /// [`Command::fed`]).
    fed: bool,
    /// An `exec <file` redirected the shell's standard input for the rest
    /// of the line.
    exec_fed: bool,
}

impl Walker {
    // ---- the syntax tree -------------------------------------------------

    fn script(&mut self, src: &str, depth: usize) -> Walk {
        let depth = deeper(depth)?;
        let program = Parser::new(src.as_bytes(), &self.options)
            .parse_program()
            .map_err(|e| {
                if depth == 1 {
                    e.to_string()
                } else {
                    format!("{e} in `{}`", snippet(src))
                }
            })?;
        for list in &program.complete_commands {
            self.list(list, src, depth)?;
        }
        Ok(())
    }

    fn list(&mut self, list: &ast::CompoundList, src: &str, depth: usize) -> Walk {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, src, depth)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, src, depth)?;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, src: &str, depth: usize) -> Walk {
        for (i, command) in pipeline.seq.iter().enumerate() {
            // After a `|`, standard input is the previous command's output.
            let fed = self.fed;
            self.fed |= i > 0;
            let walked = self.command(command, src, depth);
            self.fed = fed;
            walked?;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, src: &str, depth: usize) -> Walk {
        let depth = deeper(depth)?;
        match command {
            ast::Command::Simple(simple) => self.simple(simple, src, depth),
            ast::Command::Compound(compound, redirects) => {
                self.redirects_only(redirects.as_ref(), src, depth)?;
                let fed = self.fed;
                self.fed |= redirects
                    .as_ref()
                    .is_some_and(|l| l.0.iter().any(feeds_stdin));
                let walked = self.compound(compound, src, depth);
                self.fed = fed;
                walked
            }
            ast::Command::Function(function) => {
                let ast::FunctionBody(compound, redirects) = &function.body;
                self.redirects_only(redirects.as_ref(), src, depth)?;
                self.compound(compound, src, depth)
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirects_only(redirects.as_ref(), src, depth)?;
                self.extended_test(&test.expr, depth)
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, src: &str, depth: usize) -> Walk {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(arith) => {
                // brush-parser reads nested subshells written `( (a) )` or
                // `((a) )` as `((a))`; bash reads `((` as arithmetic only
                // when the parentheses touch at both ends.
                let text = chars(src, &arith.loc);
                match text.strip_prefix("((").and_then(|t| t.strip_suffix("))")) {
                    Some(_) => self.scan(&arith.expr.value, depth),
                    None => {
                        let inner = text.strip_prefix('(').and_then(|t| t.strip_suffix(')'));
                        self.script(inner.unwrap_or(&text), depth)
                    }
                }
            }
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.scan(&expr.value, depth)?;
                }
                self.list(&f.body.list, src, depth)
            }
            C::BraceGroup(group) => self.list(&group.list, src, depth),
            C::Subshell(subshell) => self.list(&subshell.list, src, depth),
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.scan(&value.value, depth)?;
                }
                self.list(&f.body.list, src, depth)
            }
            C::CaseClause(case) => {
                self.scan(&case.value.value, depth)?;
                for item in &case.cases {
                    for pattern in &item.patterns {
                        self.scan(&pattern.value, depth)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list, src, depth)?;
                    }
                }
                Ok(())
            }
            C::IfClause(clause) => {
                self.list(&clause.condition, src, depth)?;
                self.list(&clause.then, src, depth)?;
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, src, depth)?;
                    }
                    self.list(&other.body, src, depth)?;
                }
                Ok(())
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0, src, depth)?;
                self.list(&clause.1.list, src, depth)
            }
            C::Coprocess(coproc) => self.command(&coproc.body, src, depth),
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) -> Walk {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, depth)?;
                self.extended_test(b, depth)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, depth),
            E::UnaryTest(_, w) => self.scan(&w.value, depth),
            E::BinaryTest(_, a, b) => {
                self.scan(&a.value, depth)?;
                self.scan(&b.value, depth)
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, src: &str, depth: usize) -> Walk {
        // Listed before the commands nested in it: hold its place.
        let at = self.out.len();
        self.out.push(Command::new(&[], Vec::new(), false));
        let mut parts = Parts::default();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, &mut parts, src, depth)?;
        }
        if let Some(name) = &simple.word_or_name {
            parts.words.push(self.word(&name.value, depth)?);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, &mut parts, src, depth)?;
        }
        let Parts {
            words,
            env,
            redirects,
            stdin,
            fed,
        } = parts;
        if words.is_empty() {
            // A bare assignment stays in effect for the rest of the line,
            // and a variable such as PATH or HOME is already exported.
            self.keep(env.iter().map(String::as_str));
        }
        if words.is_empty() && redirects.is_empty() {
            // Nothing to spawn, nothing to open.
            self.out.remove(at);
            return Ok(());
        }
        // A shell whose script is the here-document read here runs what
        // the analysis lists, not unknown input.
        let script_read = stdin.as_ref().is_some_and(|s| !s.dynamic)
            && words.first().is_some_and(|w| {
                !w.dynamic
                    && SHELLS.contains(&w.text.rsplit('/').next().unwrap_or_default())
                    && matches!(shell_input(&words[1..]), ShellInput::Stdin)
            });
        let fed = self.fed || self.exec_fed || (fed && !script_read);
        let mut all = self.env.clone();
        all.extend(env);
        let mut command = Command::new(&words, redirects, false);
        command.env = all.clone();
        command.fed = fed;
        self.out[at] = command;
        self.assigns(&words);
        if words.len() == 1 && words[0].text == "exec" && fed {
            // `exec <file`: the rest of the line reads that file.
            self.exec_fed = true;
        }
        self.unwrap(&words, stdin.as_ref(), depth, &all, fed)
    }

    /// Keeps the assignments among `assignments` (`NAME=value`, as written)
    /// that set a variable of the table, for the rest of the line.
    fn keep<'a>(&mut self, assignments: impl Iterator<Item = &'a str>) {
        for a in assignments {
            let Some((name, _)) = a.split_once('=') else {
                // `export PATH` exports the value it already has.
                continue;
            };
            if super::programs::var_of(name).is_some() {
                self.env.push(a.to_string());
            }
        }
    }

    /// What builtins that set variables (`export PAGER=x`, `declare -x`,
    /// `read PATH`, `printf -v HOME`) leave in effect for the rest of the
    /// line, as for a bare assignment.
    fn assigns(&mut self, words: &[Arg]) {
        let Some((name, args)) = words.split_first() else {
            return;
        };
        if name.dynamic {
            return;
        }
        match name.text.as_str() {
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                let set: Vec<String> = args
                    .iter()
                    .filter(|a| !a.text.starts_with(['-', '+']))
                    .map(|a| a.text.clone())
                    .collect();
                self.keep(set.iter().map(String::as_str));
            }
            "read" | "printf" | "mapfile" | "readarray" | "getopts" => {
                // Which word names the variable depends on the options;
                // any word that is a table name is taken to be one.
                let set: Vec<String> = args
                    .iter()
                    .filter(|a| super::programs::var_of(&a.text).is_some())
                    .map(|a| format!("{}=$({})", a.text, name.text))
                    .collect();
                self.keep(set.iter().map(String::as_str));
            }
            _ => {}
        }
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        parts: &mut Parts,
        src: &str,
        depth: usize,
    ) -> Walk {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            Item::AssignmentWord(assignment, w) if in_prefix => {
                parts.env.push(w.value.clone());
                self.assignment(assignment, depth)?
            }
            // After the name, `NAME=value` is an argument (`export A=b`).
            Item::AssignmentWord(_, w) | Item::Word(w) => {
                parts.words.push(self.word(&w.value, depth)?)
            }
            Item::IoRedirect(r) => {
                parts.fed |= feeds_stdin(r);
                match self.redirect(r, src, depth)? {
                    Redir::None => {}
                    Redir::File(r) => parts.redirects.push(r),
                    Redir::Stdin(text) => parts.stdin = Some(text),
                }
            }
            Item::ProcessSubstitution(kind, subshell) => {
                parts.words.push(Arg {
                    text: process_substitution_text(kind, subshell, src),
                    dynamic: true,
                });
                self.list(&subshell.list, src, depth)?;
            }
        }
        Ok(())
    }

    /// The redirections of a compound command, as a word-less command.
    fn redirects_only(
        &mut self,
        list: Option<&ast::RedirectList>,
        src: &str,
        depth: usize,
    ) -> Walk {
        let Some(list) = list else { return Ok(()) };
        let at = self.out.len();
        self.out.push(Command::new(&[], Vec::new(), false));
        let mut redirects = Vec::new();
        for r in &list.0 {
            if let Redir::File(r) = self.redirect(r, src, depth)? {
                redirects.push(r);
            }
        }
        if redirects.is_empty() {
            self.out.remove(at);
        } else {
            self.out[at].redirects = redirects;
        }
        Ok(())
    }

    fn assignment(&mut self, assignment: &ast::Assignment, depth: usize) -> Walk {
        if let ast::AssignmentName::ArrayElementName(_, index) = &assignment.name {
            self.scan(index, depth)?;
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => self.scan(&w.value, depth),
            ast::AssignmentValue::Array(items) => {
                for (key, value) in items {
                    if let Some(key) = key {
                        self.scan(&key.value, depth)?;
                    }
                    self.scan(&value.value, depth)?;
                }
                Ok(())
            }
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, src: &str, depth: usize) -> Walk<Redir> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        Ok(match redirect {
            R::File(_, kind, target) => {
                let write = match kind {
                    K::Read | K::DuplicateInput => false,
                    K::Write | K::Append | K::ReadAndWrite | K::Clobber | K::DuplicateOutput => {
                        true
                    }
                };
                match target {
                    T::Filename(w) => Redir::File(self.target(&w.value, write, depth)?),
                    T::Fd(_) => Redir::None,
                    T::Duplicate(w) => {
                        // `2>&1`, `3>&-`, `4<&0`, `5>&6-` duplicate or close
                        // descriptors; `>&file` writes a file.
                        let r = self.target(&w.value, write, depth)?;
                        let t = r.target.trim_end_matches('-');
                        if !r.dynamic && t.bytes().all(|b| b.is_ascii_digit()) {
                            Redir::None
                        } else {
                            Redir::File(r)
                        }
                    }
                    T::ProcessSubstitution(_, subshell) => {
                        self.list(&subshell.list, src, depth)?;
                        Redir::None
                    }
                }
            }
            R::OutputAndError(w, _) => Redir::File(self.target(&w.value, true, depth)?),
            R::HereDocument(fd, doc) => {
                let text = if doc.requires_expansion {
                    let pieces = word::parse_heredoc(&doc.doc.value, &self.options)
                        .map_err(|e| format!("cannot parse a here-document: {e}"))?;
                    let mut value = String::new();
                    let dynamic = self.pieces(&pieces, Quoting::HereDocument, &mut value, depth)?;
                    Arg {
                        text: if dynamic {
                            doc.doc.value.clone()
                        } else {
                            value
                        },
                        dynamic,
                    }
                } else {
                    Arg {
                        text: doc.doc.value.clone(),
                        dynamic: false,
                    }
                };
                on_stdin(*fd, text)
            }
            R::HereString(fd, w) => {
                let arg = self.word(&w.value, depth)?;
                on_stdin(*fd, arg)
            }
        })
    }

    fn target(&mut self, raw: &str, write: bool, depth: usize) -> Walk<Redirect> {
        let arg = self.word(raw, depth)?;
        Ok(Redirect {
            write,
            target: arg.text,
            dynamic: arg.dynamic,
        })
    }

    // ---- words -----------------------------------------------------------

    /// A word's value (or source text), listing the commands in it.
    fn word(&mut self, raw: &str, depth: usize) -> Walk<Arg> {
        let depth = deeper(depth)?;
        let pieces = match word::parse(raw, &self.options) {
            Ok(pieces) => pieces,
            // Without `$` or a backquote the word can hold no command: keep
            // it as written. Otherwise it might, and it cannot be checked.
            Err(_) if !raw.contains(['$', '`']) => {
                return Ok(Arg {
                    text: raw.to_owned(),
                    dynamic: true,
                })
            }
            Err(e) => return Err(format!("cannot parse the word `{}`: {e}", snippet(raw))),
        };
        let mut value = String::new();
        let dynamic = self.pieces(&pieces, Quoting::None, &mut value, depth)?;
        Ok(Arg {
            text: if dynamic { raw.to_owned() } else { value },
            dynamic,
        })
    }

    /// Lists the commands in text that is expanded but never a command
    /// word: assignment values, patterns, arithmetic, `${...}` operands.
    fn scan(&mut self, text: &str, depth: usize) -> Walk {
        if text.contains(['$', '`']) {
            self.word(text, depth)?;
        }
        Ok(())
    }

    /// Appends the static value of `pieces` to `value`; true if some piece
    /// is only known at run time.
    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoting: Quoting,
        value: &mut String,
        depth: usize,
    ) -> Walk<bool> {
        let mut dynamic = false;
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(text) => {
                    dynamic |= quoting == Quoting::None && is_pattern(text);
                    value.push_str(text);
                }
                WordPiece::SingleQuotedText(text) => value.push_str(text),
                WordPiece::AnsiCQuotedText(body) => match ansi_c(body) {
                    Some(text) => value.push_str(&text),
                    None => dynamic = true,
                },
                WordPiece::DoubleQuotedSequence(inner) => {
                    dynamic |= self.pieces(inner, Quoting::Double, value, depth)?;
                }
                // `$"..."` is translated at run time.
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, Quoting::Double, value, depth)?;
                    dynamic = true;
                }
                WordPiece::TildeExpansion(_) => dynamic = true,
                WordPiece::ParameterExpansion(expr) => {
                    self.parameter(expr, depth)?;
                    dynamic = true;
                }
                WordPiece::CommandSubstitution(script)
                | WordPiece::BackquotedCommandSubstitution(script) => {
                    self.script(script, depth)?;
                    dynamic = true;
                }
                WordPiece::EscapeSequence(escape) => unescape(escape, quoting, value),
                WordPiece::ArithmeticExpression(expr) => {
                    self.scan(&expr.value, depth)?;
                    dynamic = true;
                }
            }
        }
        Ok(dynamic)
    }

    /// Lists the commands in the operands of `${...}`.
    fn parameter(&mut self, expr: &ParameterExpr, depth: usize) -> Walk {
        use ParameterExpr as P;
        let mut texts: Vec<&str> = Vec::new();
        let parameter = match expr {
            P::Parameter { parameter, .. }
            | P::ParameterLength { parameter, .. }
            | P::Transform { parameter, .. } => parameter,
            P::UseDefaultValues {
                parameter,
                default_value: text,
                ..
            }
            | P::AssignDefaultValues {
                parameter,
                default_value: text,
                ..
            }
            | P::IndicateErrorIfNullOrUnset {
                parameter,
                error_message: text,
                ..
            }
            | P::UseAlternativeValue {
                parameter,
                alternative_value: text,
                ..
            }
            | P::RemoveSmallestSuffixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::UppercaseFirstChar {
                parameter,
                pattern: text,
                ..
            }
            | P::UppercasePattern {
                parameter,
                pattern: text,
                ..
            }
            | P::LowercaseFirstChar {
                parameter,
                pattern: text,
                ..
            }
            | P::LowercasePattern {
                parameter,
                pattern: text,
                ..
            } => {
                texts.extend(text.as_deref());
                parameter
            }
            P::Substring {
                parameter,
                offset,
                length,
                ..
            } => {
                texts.push(&offset.value);
                texts.extend(length.as_ref().map(|l| l.value.as_str()));
                parameter
            }
            P::ReplaceSubstring {
                parameter,
                pattern,
                replacement,
                ..
            } => {
                texts.push(pattern);
                texts.extend(replacement.as_deref());
                parameter
            }
            P::VariableNames { .. } | P::MemberKeys { .. } => return Ok(()),
        };
        if let Parameter::NamedWithIndex { index, .. } = parameter {
            texts.push(index);
        }
        for text in texts {
            self.scan(text, depth)?;
        }
        Ok(())
    }

    // ---- wrappers --------------------------------------------------------

    /// Lists what a command runs when it runs its arguments (or standard
    /// input) as a command. `env` and `fed` are the command's own (see
    /// [`Command`]): what it runs inherits them.
    fn unwrap(
        &mut self,
        words: &[Arg],
        stdin: Option<&Arg>,
        depth: usize,
        env: &[String],
        fed: bool,
    ) -> Walk {
        let depth = deeper(depth)?;
        let Some((name, args)) = words.split_first() else {
            return Ok(());
        };
        if name.dynamic {
            return Ok(());
        }
        let program = name.text.rsplit('/').next().unwrap_or_default();
        let at = Scope { env, fed };
        match program {
            p if SHELLS.contains(&p) => match shell_input(args) {
                ShellInput::Command(Some(script)) => self.inline(script, depth, at),
                ShellInput::Stdin => stdin.map_or(Ok(()), |script| self.inline(script, depth, at)),
                ShellInput::Command(None) | ShellInput::File => Ok(()),
            },
            "su" | "runuser" => match su_command(args) {
                Some(script) => self.inline(&script, depth, at),
                // Without `-c`, su starts the user's shell.
                None => self.runtime("$SHELL", at),
            },
            "eval" => {
                if args.is_empty() {
                    return Ok(());
                }
                let script = joined(args);
                if script.dynamic {
                    return self.runtime(&script.text, at);
                }
                self.inline(&script, depth, at)
            }
            "trap" => {
                let args = match args.first() {
                    Some(a) if a.text == "--" => &args[1..],
                    _ => args,
                };
                match args {
                    [action, _, ..]
                        if !action.text.starts_with('-')
                            && !action.text.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        self.inline(action, depth, at)
                    }
                    _ => Ok(()),
                }
            }
            "find" => {
                let mut i = 0;
                while i < args.len() {
                    if matches!(
                        args[i].text.as_str(),
                        "-exec" | "-execdir" | "-ok" | "-okdir"
                    ) {
                        let start = i + 1;
                        let mut end = start;
                        while end < args.len()
                            && (args[end].dynamic || !matches!(args[end].text.as_str(), ";" | "+"))
                        {
                            end += 1;
                        }
                        let inner = &args[start..end];
                        let appended = inner.iter().any(|a| a.text.contains("{}"));
                        self.inner(inner, appended, &[], depth, at)?;
                        i = end;
                    }
                    i += 1;
                }
                Ok(())
            }
            _ => match wrapped(program, args)? {
                Run::Nothing => Ok(()),
                Run::Argv {
                    start,
                    appended,
                    env,
                } => self.inner(&args[start..], appended, &env, depth, at),
                Run::Script(script) => self.inline(&script, depth, at),
                Run::Shell => self.runtime("$SHELL", at),
            },
        }
    }

    /// Lists a script given as one word (`sh -c 'S'`), run with the
    /// assignments and standard input of `at`; a script only known at run
    /// time is listed as one command whose program is dynamic.
    fn inline(&mut self, script: &Arg, depth: usize, at: Scope) -> Walk {
        if script.dynamic {
            return self.runtime(&script.text, at);
        }
        let (env, fed) = (std::mem::replace(&mut self.env, at.env.to_vec()), self.fed);
        self.fed = at.fed;
        let walked = self.script(&script.text, depth);
        self.env = env;
        self.fed = fed;
        walked
    }

    /// Lists the command a wrapper runs, then what that one runs. `env`
    /// are assignments the wrapper itself makes for it (`env A=1 cmd`).
    fn inner(
        &mut self,
        words: &[Arg],
        appended: bool,
        env: &[String],
        depth: usize,
        at: Scope,
    ) -> Walk {
        if words.is_empty() {
            return Ok(());
        }
        let mut all = at.env.to_vec();
        all.extend_from_slice(env);
        let mut command = Command::new(words, Vec::new(), appended);
        command.env = all.clone();
        command.fed = at.fed;
        self.out.push(command);
        self.unwrap(words, None, depth, &all, at.fed)
    }

    /// Lists a command known only at run time: `text` stands for it (`$SHELL`
    /// for the shell a wrapper starts, the script's source for `sh -c "$X"`).
    fn runtime(&mut self, text: &str, at: Scope) -> Walk {
        let mut command = Command::new(
            &[Arg {
                text: text.to_owned(),
                dynamic: true,
            }],
            Vec::new(),
            true,
        );
        command.env = at.env.to_vec();
        command.fed = at.fed;
        self.out.push(command);
        Ok(())
    }
}

/// The shells whose `-c` script and here-documents are analyzed.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"];

/// Where a wrapper's command runs: with its assignments and its standard
/// input.
#[derive(Clone, Copy)]
struct Scope<'a> {
    env: &'a [String],
    fed: bool,
}

/// `args` as one word, joined by spaces (how `eval`, `watch` and `ssh` make
/// a script of their arguments).
fn joined(args: &[Arg]) -> Arg {
    Arg {
        text: args
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        dynamic: args.iter().any(|a| a.dynamic),
    }
}

impl Command {
    fn new(words: &[Arg], redirects: Vec<Redirect>, appended: bool) -> Command {
        let words_text: Vec<String> = words.iter().map(|w| w.text.clone()).collect();
        Command {
            text: words_text.join(" "),
            words: words_text,
            env: Vec::new(),
            redirects,
            dynamic: appended || words.iter().any(|w| w.dynamic),
            program_dynamic: words.first().is_some_and(|w| w.dynamic),
            fed: false,
        }
    }
}

fn deeper(depth: usize) -> Walk<usize> {
    if depth >= MAX_DEPTH {
        return Err(format!(
            "the command line nests more than {MAX_DEPTH} levels deep"
        ));
    }
    Ok(depth + 1)
}

/// Whether a redirection gives standard input data: `<`, `<>`, `<&N`, a
/// here-document or a here-string, on descriptor 0.
fn feeds_stdin(r: &ast::IoRedirect) -> bool {
    use ast::{IoFileRedirectKind as K, IoRedirect as R};
    match r {
        R::File(fd, K::Read | K::ReadAndWrite | K::DuplicateInput, _)
        | R::HereDocument(fd, _)
        | R::HereString(fd, _) => fd.unwrap_or(0) == 0,
        _ => false,
    }
}

fn on_stdin(fd: Option<ast::IoFd>, text: Arg) -> Redir {
    if fd.unwrap_or(0) == 0 {
        Redir::Stdin(text)
    } else {
        Redir::None
    }
}

/// `<(...)` or `>(...)` as written.
fn process_substitution_text(
    kind: &ast::ProcessSubstitutionKind,
    subshell: &ast::SubshellCommand,
    src: &str,
) -> String {
    let sign = match kind {
        ast::ProcessSubstitutionKind::Read => '<',
        ast::ProcessSubstitutionKind::Write => '>',
    };
    let body = chars(src, &subshell.loc);
    if body.starts_with('(') {
        format!("{sign}{body}")
    } else {
        format!("{sign}({})", subshell.list)
    }
}

/// The source text a span covers (its positions count characters).
fn chars(src: &str, span: &brush_parser::SourceSpan) -> String {
    let (start, end) = (span.start.index, span.end.index);
    src.chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

/// Unquoted text that the shell would expand as a pattern: globs,
/// extglobs and brace expansions.
fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?'])
        || text.find('[').is_some_and(|i| text[i + 1..].contains(']'))
        || ["+(", "@(", "!("].iter().any(|p| text.contains(p))
        || (text.contains('{') && text.contains('}') && (text.contains(',') || text.contains("..")))
}

/// Where a piece of a word sits, for quote removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoting {
    None,
    /// Inside `"..."`.
    Double,
    /// The body of an unquoted here-document, where `"` is not special.
    HereDocument,
}

/// Quote removal for a backslash escape (`\x`): outside quotes it yields
/// `x`; inside double quotes (and here-documents) only `$`, backquote, `\`
/// and newline are escaped (and `"`, inside double quotes).
fn unescape(escape: &str, quoting: Quoting, value: &mut String) {
    let escaped = escape.strip_prefix('\\').unwrap_or(escape);
    match (escaped, quoting) {
        ("\n", _) => {}
        ("$" | "`" | "\\", _) | ("\"", Quoting::Double) | (_, Quoting::None) => {
            value.push_str(escaped)
        }
        _ => value.push_str(escape),
    }
}

/// The value of `$'...'` (bash's ANSI-C quoting), or `None` where it is
/// not a plain string (a NUL, a raw byte, `\c`), which leaves the word
/// dynamic.
fn ansi_c(body: &str) -> Option<String> {
    let mut value = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        let escape = chars.next()?;
        let code = match escape {
            'a' => 0x07,
            'b' => 0x08,
            'e' | 'E' => 0x1b,
            'f' => 0x0c,
            'n' => 0x0a,
            'r' => 0x0d,
            't' => 0x09,
            'v' => 0x0b,
            '\\' | '\'' | '"' | '?' => u32::from(escape),
            '0'..='7' => {
                let mut code = escape.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                // Values from 0x80 up are raw bytes, not characters.
                if code >= 0x80 {
                    return None;
                }
                code
            }
            'x' | 'u' | 'U' => {
                let max = match escape {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut code = 0u32;
                let mut digits = 0;
                while digits < max {
                    match chars.peek().and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            code = code.checked_mul(16)?.checked_add(d)?;
                            chars.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 || (escape == 'x' && code >= 0x80) {
                    return None;
                }
                code
            }
            'c' => return None,
            // bash keeps unknown escapes as written.
            other => {
                value.push('\\');
                value.push(other);
                continue;
            }
        };
        // The shell's strings end at a NUL.
        if code == 0 {
            return None;
        }
        value.push(char::from_u32(code)?);
    }
    Some(value)
}

fn snippet(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

// ---- option grammars -------------------------------------------------------

/// The option grammar of a wrapper, as GNU getopt with a leading `+`: the
/// options end at the first word that is not one (or after `--`).
struct Options {
    /// Short options that take an argument, attached (`-n10`) or next
    /// (`-n 10`).
    with_arg: &'static str,
    /// Short options whose argument, if any, is attached (`xargs -i{}`).
    optional_arg: &'static str,
    /// Long options that take an argument, `--name=value` or `--name value`
    /// (an unambiguous prefix such as `--kill` counts too).
    long_with_arg: &'static [&'static str],
}

/// What the options of a wrapper were.
struct Parsed {
    /// Index of the first word after the options, if there is one.
    next: Option<usize>,
    /// Every short option letter seen.
    short: String,
    /// Every long option seen, without `--` and `=value`.
    long: Vec<String>,
    /// The arguments of options that take one: the letter (`c`) or the
    /// long name from the grammar (`command`), and the argument.
    values: Vec<(String, Arg)>,
}

impl Parsed {
    /// Whether option `-short` or `--long` (or a prefix of it) was given.
    fn has(&self, short: char, long: &str) -> bool {
        self.short.contains(short)
            || self
                .long
                .iter()
                .any(|l| l.len() >= 2 && long.starts_with(l.as_str()))
    }

    /// The argument of `-short` or `--long`, the last one given.
    fn value(&self, short: char, long: &str) -> Option<&Arg> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| *n == short.to_string() || n == long)
            .map(|(_, a)| a)
    }
}

impl Options {
    const NONE: Options = Options {
        with_arg: "",
        optional_arg: "",
        long_with_arg: &[],
    };

    fn parse(&self, args: &[Arg]) -> Parsed {
        let mut short = String::new();
        let mut long = Vec::new();
        let mut values = Vec::new();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let t = arg.text.as_str();
            if t == "--" {
                i += 1;
                break;
            }
            if let Some(name) = t.strip_prefix("--") {
                let (name, value) = match name.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (name, None),
                };
                let takes = self.long_with_arg.iter().find_map(|o| {
                    let o = o.strip_prefix("--")?;
                    (!name.is_empty() && o.starts_with(name)).then_some(o)
                });
                long.push(name.to_owned());
                i += 1;
                if let Some(full) = takes {
                    let value = match value {
                        Some(v) => Some(Arg {
                            text: v.to_owned(),
                            dynamic: arg.dynamic,
                        }),
                        None => {
                            i += 1;
                            args.get(i - 1).cloned()
                        }
                    };
                    values.extend(value.map(|v| (full.to_owned(), v)));
                }
                continue;
            }
            if t.len() > 1 && t.starts_with('-') {
                i += 1;
                let cluster = &t[1..];
                for (at, c) in cluster.char_indices() {
                    short.push(c);
                    let rest = &cluster[at + c.len_utf8()..];
                    if self.with_arg.contains(c) {
                        let value = if rest.is_empty() {
                            i += 1;
                            args.get(i - 1).cloned()
                        } else {
                            Some(Arg {
                                text: rest.to_owned(),
                                dynamic: arg.dynamic,
                            })
                        };
                        values.extend(value.map(|v| (c.to_string(), v)));
                        break;
                    }
                    if self.optional_arg.contains(c) {
                        break;
                    }
                }
                continue;
            }
            break;
        }
        Parsed {
            next: (i < args.len()).then_some(i),
            short,
            long,
            values,
        }
    }
}

/// The `NAME=value` words from `from` on (as `env` and `sudo` take them),
/// and the index after them.
fn assignments(args: &[Arg], from: usize) -> (Vec<String>, usize) {
    let mut i = from;
    let mut set = Vec::new();
    while let Some(a) = args.get(i).filter(|a| a.text.contains('=')) {
        set.push(a.text.clone());
        i += 1;
    }
    (set, i)
}

/// What a wrapper runs.
enum Run {
    /// Nothing: it is not a wrapper, or this use runs no command.
    Nothing,
    /// The command in its arguments from `start` on, given more arguments
    /// at run time if `appended`, with the assignments `env` the wrapper
    /// makes for it.
    Argv {
        start: usize,
        appended: bool,
        env: Vec<String>,
    },
    /// A script it hands to a shell (`watch 'a; b'`, `flock f -c 'a'`).
    Script(Arg),
    /// A shell of its own, given no command (`script`, `chroot /`): it runs
    /// whatever it reads.
    Shell,
}

/// The command starting at `at`, if there is one.
fn argv(at: Option<usize>) -> Run {
    match at {
        Some(start) => Run::Argv {
            start,
            appended: false,
            env: Vec::new(),
        },
        None => Run::Nothing,
    }
}

/// The command starting at `at`, or else the wrapper's own shell.
fn argv_or_shell(at: Option<usize>) -> Run {
    match at {
        Some(_) => argv(at),
        None => Run::Shell,
    }
}

/// The command after `skip` positional words (a priority, a mask, a file)
/// that follow the options.
fn after(parsed: &Parsed, skip: usize, args: &[Arg]) -> Run {
    argv(parsed.next.map(|i| i + skip).filter(|&i| i < args.len()))
}

/// What `program` runs, from its arguments (see the module doc for the
/// list).
fn wrapped(program: &str, args: &[Arg]) -> Walk<Run> {
    let options = |with_arg, long_with_arg| Options {
        with_arg,
        optional_arg: "",
        long_with_arg,
    };
    let at = |parsed: Parsed| argv(parsed.next);
    Ok(match program {
        "env" => {
            // `-` alone is `-i`.
            let skip = args.iter().take_while(|a| a.text == "-").count();
            let parsed = options("uCPa", &["--unset", "--chdir", "--split-string", "--argv0"])
                .parse(&args[skip..]);
            let split = parsed.short.contains('S')
                || parsed
                    .long
                    .iter()
                    .any(|l| l.len() >= 2 && "split-string".starts_with(l.as_str()));
            if split {
                return Err(
                    "env -S splits its argument into a command line by rules of its own; \
                            it is not analyzed"
                        .into(),
                );
            }
            match parsed.next {
                Some(i) => {
                    let (env, start) = assignments(args, skip + i);
                    if start < args.len() {
                        Run::Argv {
                            start,
                            appended: false,
                            env,
                        }
                    } else {
                        Run::Nothing
                    }
                }
                None => Run::Nothing,
            }
        }
        "timeout" => after(
            &options("ks", &["--kill-after", "--signal"]).parse(args),
            1,
            args,
        ),
        "nice" => at(options("n", &["--adjustment"]).parse(args)),
        "nohup" | "builtin" | "setsid" => at(Options::NONE.parse(args)),
        "stdbuf" => at(options("ioe", &["--input", "--output", "--error"]).parse(args)),
        "time" => at(options("fo", &["--format", "--output"]).parse(args)),
        "exec" => at(options("a", &[]).parse(args)),
        "command" => {
            let parsed = Options::NONE.parse(args);
            // `command -v x` and `-V` describe `x`; they do not run it.
            if parsed.short.contains(['v', 'V']) {
                Run::Nothing
            } else {
                at(parsed)
            }
        }
        "sudo" => {
            let parsed = Options {
                with_arg: "aCcDgpRrTtUu",
                optional_arg: "h",
                long_with_arg: &[
                    "--auth-type",
                    "--close-from",
                    "--login-class",
                    "--chdir",
                    "--group",
                    "--prompt",
                    "--chroot",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                    "--user",
                ],
            }
            .parse(args);
            // Edit, list, validate, reset, version, help: nothing runs.
            let runs_nothing = parsed.short.contains(['e', 'l', 'v', 'K', 'V', 'h'])
                || parsed.long.iter().any(|l| {
                    [
                        "edit",
                        "list",
                        "validate",
                        "remove-timestamp",
                        "version",
                        "help",
                    ]
                    .contains(&l.as_str())
                });
            let shell = parsed.short.contains(['s', 'i'])
                || parsed.long.iter().any(|l| l == "shell" || l == "login");
            if runs_nothing {
                Run::Nothing
            } else {
                match parsed.next.map(|i| assignments(args, i)) {
                    Some((env, start)) if start < args.len() => Run::Argv {
                        start,
                        appended: false,
                        env,
                    },
                    _ if shell => Run::Shell,
                    _ => Run::Nothing,
                }
            }
        }
        "doas" => at(options("aCu", &[]).parse(args)),
        "xargs" => match (Options {
            with_arg: "adEILnPs",
            optional_arg: "eil",
            long_with_arg: &[
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
        })
        .parse(args)
        .next
        {
            Some(start) => Run::Argv {
                start,
                appended: true,
                env: Vec::new(),
            },
            None => Run::Nothing,
        },
        // util-linux and coreutils.
        "chrt" => {
            let parsed = options(
                "TPD",
                &["--sched-runtime", "--sched-period", "--sched-deadline"],
            )
            .parse(args);
            if parsed.has('p', "pid") || parsed.has('m', "max") {
                Run::Nothing
            } else {
                // The priority comes first.
                after(&parsed, 1, args)
            }
        }
        "taskset" => {
            let parsed = Options::NONE.parse(args);
            if parsed.has('p', "pid") {
                Run::Nothing
            } else {
                // The mask (or list) comes first.
                after(&parsed, 1, args)
            }
        }
        "ionice" => {
            let parsed = options(
                "cnpPu",
                &["--class", "--classdata", "--pid", "--pgid", "--uid"],
            )
            .parse(args);
            if parsed.has('p', "pid") || parsed.has('P', "pgid") || parsed.has('u', "uid") {
                Run::Nothing
            } else {
                at(parsed)
            }
        }
        "unshare" => argv_or_shell(
            Options {
                with_arg: "RwSG",
                optional_arg: "muinpUCT",
                long_with_arg: &[
                    "--map-user",
                    "--map-group",
                    "--map-users",
                    "--map-groups",
                    "--propagation",
                    "--setgroups",
                    "--root",
                    "--wd",
                    "--setuid",
                    "--setgid",
                    "--monotonic",
                    "--boottime",
                ],
            }
            .parse(args)
            .next,
        ),
        "nsenter" => argv_or_shell(
            Options {
                with_arg: "tSGW",
                optional_arg: "muinpCUTrw",
                long_with_arg: &["--target", "--setuid", "--setgid", "--wdns"],
            }
            .parse(args)
            .next,
        ),
        "setpriv" => {
            let parsed = options(
                "",
                &[
                    "--ambient-caps",
                    "--inh-caps",
                    "--bounding-set",
                    "--ruid",
                    "--euid",
                    "--rgid",
                    "--egid",
                    "--reuid",
                    "--regid",
                    "--groups",
                    "--securebits",
                    "--pdeathsig",
                    "--selinux-label",
                    "--apparmor-profile",
                    "--landlock-access",
                    "--landlock-rule",
                ],
            )
            .parse(args);
            if parsed.has('d', "dump") {
                Run::Nothing
            } else {
                at(parsed)
            }
        }
        "flock" => {
            let grammar = options("wEc", &["--timeout", "--conflict-exit-code", "--command"]);
            let parsed = grammar.parse(args);
            if let Some(script) = parsed.value('c', "command") {
                return Ok(Run::Script(script.clone()));
            }
            // `flock FILE -c CMD` or `flock FILE CMD...`; `flock N` runs nothing.
            match parsed.next.map(|i| (i, args.get(i + 1))) {
                Some((i, Some(c))) if c.text == "-c" || c.text == "--command" => {
                    args.get(i + 2).cloned().map_or(Run::Nothing, Run::Script)
                }
                Some((i, Some(_))) => argv(Some(i + 1)),
                _ => Run::Nothing,
            }
        }
        "setarch" | "linux32" | "linux64" | "i386" | "i686" | "x86_64" | "uname26" => {
            // `setarch [ARCH] [options] [program]`; its aliases take no ARCH.
            let skip = usize::from(
                program == "setarch" && args.first().is_some_and(|a| !a.text.starts_with('-')),
            );
            let parsed = Options::NONE.parse(&args[skip..]);
            if parsed.long.iter().any(|l| l == "list") {
                Run::Nothing
            } else {
                argv_or_shell(parsed.next.map(|i| i + skip))
            }
        }
        "choom" => {
            let parsed = options("np", &["--adjust", "--pid"]).parse(args);
            if parsed.has('p', "pid") {
                Run::Nothing
            } else {
                at(parsed)
            }
        }
        "logsave" => after(&Options::NONE.parse(args), 1, args),
        "prlimit" => at(Options {
            with_arg: "po",
            optional_arg: "cdefilmnqrstuvxy",
            long_with_arg: &["--pid", "--output"],
        }
        .parse(args)),
        "chroot" => {
            let parsed = options("", &["--groups", "--userspec"]).parse(args);
            // After the new root; without a command, `$SHELL -i`.
            match parsed.next {
                Some(i) if i + 1 < args.len() => argv(Some(i + 1)),
                Some(_) => Run::Shell,
                None => Run::Nothing,
            }
        }
        "sg" => {
            // `sg [-] [GROUP [-c] COMMAND]`: the command goes to `sh -c`.
            let skip = usize::from(args.first().is_some_and(|a| a.text == "-"));
            match args.get(skip + 1..) {
                Some([c, script, ..]) if c.text == "-c" => Run::Script(script.clone()),
                Some(rest) if !rest.is_empty() => Run::Script(joined(rest)),
                _ => Run::Shell,
            }
        }
        "newgrp" => Run::Shell,
        "script" => {
            let parsed = Options {
                with_arg: "IOBTmEoc",
                optional_arg: "t",
                long_with_arg: &[
                    "--log-in",
                    "--log-out",
                    "--log-io",
                    "--log-timing",
                    "--logging-format",
                    "--echo",
                    "--output-limit",
                    "--command",
                ],
            }
            .parse(args);
            match parsed.value('c', "command") {
                Some(script) => Run::Script(script.clone()),
                None => Run::Shell,
            }
        }
        "watch" => {
            let parsed = Options {
                with_arg: "nq",
                optional_arg: "d",
                long_with_arg: &["--interval", "--equexit"],
            }
            .parse(args);
            match parsed.next {
                // Without -x the words are joined and run by `sh -c`.
                Some(_) if parsed.has('x', "exec") => at(parsed),
                Some(i) => Run::Script(joined(&args[i..])),
                None => Run::Nothing,
            }
        }
        "strace" => {
            let parsed = options(
                "abeEIoOpPsSuUX",
                &[
                    "--attach",
                    "--env",
                    "--user",
                    "--detach-on",
                    "--interruptible",
                    "--trace",
                    "--signal",
                    "--status",
                    "--trace-path",
                    "--output",
                    "--string-limit",
                    "--summary-sort-by",
                    "--columns",
                ],
            )
            .parse(args);
            // `-E VAR=VAL` sets the traced command's environment.
            let env = parsed
                .values
                .iter()
                .filter(|(n, v)| (n == "E" || n == "env") && v.text.contains('='))
                .map(|(_, v)| v.text.clone())
                .collect();
            match parsed.next {
                Some(start) => Run::Argv {
                    start,
                    appended: false,
                    env,
                },
                None => Run::Nothing,
            }
        }
        "valgrind" => at(Options::NONE.parse(args)),
        "ssh-agent" => at(options("aEOPt", &[]).parse(args)),
        "busybox" => match args.first() {
            Some(applet) if !applet.text.starts_with('-') => argv(Some(0)),
            _ => Run::Nothing,
        },
        "capsh" => {
            // `--` runs the shell (bash, or `--shell=`) with the rest;
            // `==` runs capsh again with the rest.
            let mut shell = None;
            for (i, a) in args.iter().enumerate() {
                if let Some(s) = a.text.strip_prefix("--shell=") {
                    shell = Some(s.to_owned());
                }
                if a.text == "--" || a.text == "==" {
                    let name = if a.text == "==" {
                        "capsh".to_owned()
                    } else {
                        shell.unwrap_or_else(|| "/bin/bash".to_owned())
                    };
                    let mut words = vec![Arg {
                        text: name,
                        dynamic: a.dynamic,
                    }];
                    words.extend_from_slice(&args[i + 1..]);
                    return Ok(Run::Script(Arg {
                        text: words
                            .iter()
                            .map(|w| quote(&w.text))
                            .collect::<Vec<_>>()
                            .join(" "),
                        dynamic: words.iter().any(|w| w.dynamic),
                    }));
                }
            }
            Run::Nothing
        }
        "start-stop-daemon" => {
            let parsed = options(
                "xaupPgcNrkdRnsI",
                &[
                    "--exec",
                    "--startas",
                    "--user",
                    "--pidfile",
                    "--group",
                    "--chuid",
                    "--nicelevel",
                    "--chroot",
                    "--chdir",
                    "--retry",
                    "--name",
                    "--signal",
                    "--procsched",
                    "--iosched",
                    "--umask",
                    "--ppid",
                    "--output",
                    "--notify-timeout",
                ],
            );
            let parsed = parsed.parse(args);
            if !parsed.has('S', "start") {
                return Ok(Run::Nothing);
            }
            let program = parsed
                .value('a', "startas")
                .or_else(|| parsed.value('x', "exec"));
            match program {
                Some(p) => {
                    let rest = args
                        .iter()
                        .position(|a| a.text == "--")
                        .map_or(&[][..], |i| &args[i + 1..]);
                    let mut words = vec![p.clone()];
                    words.extend_from_slice(rest);
                    Run::Script(Arg {
                        text: words
                            .iter()
                            .map(|w| quote(&w.text))
                            .collect::<Vec<_>>()
                            .join(" "),
                        dynamic: words.iter().any(|w| w.dynamic),
                    })
                }
                None => Run::Nothing,
            }
        }
        "rlwrap" => at(Options {
            with_arg: "bCDeEfgHlMOPqsStwz",
            optional_arg: "amp",
            long_with_arg: &[],
        }
        .parse(args)),
        "ssh" => {
            let parsed = options("BbcDEeFIiJLlmOoPpQRSWw", &[]).parse(args);
            match parsed.next {
                // The words after the destination are joined and run by the
                // remote user's shell (the host may be this machine).
                Some(i) if i + 1 < args.len() => Run::Script(joined(&args[i + 1..])),
                // Without a command, the remote shell reads standard input:
                // a form of the table when something feeds it.
                _ => Run::Nothing,
            }
        }
        "run-parts" => {
            let parsed = options("u", &["--umask", "--arg", "--regex"]).parse(args);
            if parsed.long.iter().any(|l| l == "test" || l == "list") {
                Run::Nothing
            } else {
                // Runs every program it finds in the folder.
                Run::Shell
            }
        }
        "ip" => {
            // `ip [options] netns exec NAME CMD...`, `ip vrf exec NAME CMD...`.
            let words: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
            match words.iter().position(|w| *w == "exec") {
                Some(i) if i >= 1 && matches!(words[i - 1], "netns" | "vrf" | "netn" | "net") => {
                    argv(Some(i + 2).filter(|&s| s < args.len()))
                }
                _ => Run::Nothing,
            }
        }
        "systemd-run" => {
            let parsed = options(
                "upEMH",
                &[
                    "--unit",
                    "--property",
                    "--description",
                    "--slice",
                    "--setenv",
                    "--machine",
                    "--host",
                    "--uid",
                    "--gid",
                    "--nice",
                    "--working-directory",
                    "--service-type",
                    "--on-active",
                    "--on-boot",
                    "--on-startup",
                    "--on-unit-active",
                    "--on-unit-inactive",
                    "--on-calendar",
                    "--timer-property",
                    "--path-property",
                    "--socket-property",
                ],
            )
            .parse(args);
            match parsed.next {
                Some(_) => at(parsed),
                None if parsed.has('S', "shell") => Run::Shell,
                None => Run::Nothing,
            }
        }
        "parallel" => {
            // GNU parallel runs its command through the shell, or the
            // commands it reads on standard input when given none.
            let parsed = options(
                "adEIjLnNPSsC",
                &[
                    "--arg-file",
                    "--delimiter",
                    "--jobs",
                    "--max-args",
                    "--max-lines",
                    "--sshlogin",
                    "--sshloginfile",
                    "--max-chars",
                    "--colsep",
                    "--joblog",
                    "--results",
                    "--tmpdir",
                    "--workdir",
                    "--env",
                    "--basefile",
                    "--return",
                    "--transferfile",
                    "--block",
                    "--timeout",
                    "--delay",
                    "--tagstring",
                    "--retries",
                    "--halt",
                    "--memfree",
                    "--load",
                    "--nice",
                    "--termseq",
                    "--replace",
                ],
            )
            .parse(args);
            match parsed.next {
                Some(i) => {
                    let end = args[i..]
                        .iter()
                        .position(|a| a.text.starts_with(":::"))
                        .map_or(args.len(), |e| i + e);
                    if end == i {
                        Run::Shell
                    } else {
                        Run::Script(joined(&args[i..end]))
                    }
                }
                None => Run::Shell,
            }
        }
        // Package runners: the program they run is a package's, or any.
        "npx" | "bunx" | "uvx" => runner(args, 0),
        "npm" | "pnpm" | "yarn" | "bun" => match args.first().map(|a| a.text.as_str()) {
            Some("exec" | "x" | "dlx") => runner(args, 1),
            _ => Run::Nothing,
        },
        "uv" | "poetry" | "pipx" | "pdm" | "hatch" => match args.first().map(|a| a.text.as_str()) {
            Some("run") => runner(args, 1),
            _ => Run::Nothing,
        },
        "bundle" | "bundler" => match args.first().map(|a| a.text.as_str()) {
            Some("exec") => runner(args, 1),
            _ => Run::Nothing,
        },
        "rustup" => match args.first().map(|a| a.text.as_str()) {
            // `rustup run TOOLCHAIN CMD...`
            Some("run") if args.len() > 2 => argv(Some(2)),
            _ => Run::Nothing,
        },
        "perf" => match args.first().map(|a| a.text.as_str()) {
            Some("stat" | "record" | "trace") => {
                let parsed = options(
                    "eptoCGIxMDrcFjmu",
                    &[
                        "--event",
                        "--pid",
                        "--tid",
                        "--output",
                        "--cpu",
                        "--cgroup",
                        "--repeat",
                        "--field-separator",
                        "--metrics",
                        "--delay",
                        "--count",
                        "--freq",
                        "--mmap-pages",
                        "--uid",
                        "--call-graph",
                    ],
                )
                .parse(&args[1..]);
                argv(parsed.next.map(|i| i + 1))
            }
            _ => Run::Nothing,
        },
        p if is_loader(p) => at(options(
            "",
            &[
                "--library-path",
                "--glibc-hwcaps-prepend",
                "--glibc-hwcaps-mask",
                "--inhibit-rpath",
                "--audit",
                "--preload",
                "--argv0",
            ],
        )
        .parse(args)),
        _ => Run::Nothing,
    })
}

/// What a package runner (`npx`, `npm exec`, `uv run`, ...) runs, from its
/// arguments after the first `skip` (the subcommand): `-c`/`--call` hands
/// a script to the shell; otherwise the first word after its options.
fn runner(args: &[Arg], skip: usize) -> Run {
    let rest = args.get(skip..).unwrap_or_default();
    let parsed = Options {
        with_arg: "pcCPw",
        optional_arg: "",
        long_with_arg: &[
            "--package",
            "--call",
            "--with",
            "--python",
            "--project",
            "--directory",
            "--from",
            "--spec",
            "--pip-args",
            "--index-url",
            "--index",
            "--extra",
            "--group",
            "--env-file",
            "--gemfile",
            "--workspace",
        ],
    }
    .parse(rest);
    match parsed.value('c', "call") {
        Some(script) => Run::Script(script.clone()),
        None => argv(parsed.next.map(|i| i + skip)),
    }
}

/// The dynamic loader, run as a program (`ld.so`, `ld-linux-x86-64.so.2`).
fn is_loader(program: &str) -> bool {
    program == "ld.so" || (program.starts_with("ld-") && program.contains(".so"))
}

/// A word as a shell would need it quoted to stay one word.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// What a shell runs, from its arguments.
enum ShellInput<'a> {
    /// `-c`: the first word after the options (if any).
    Command(Option<&'a Arg>),
    /// No operand (or `-s`): standard input.
    Stdin,
    /// A script file.
    File,
}

fn shell_input(args: &[Arg]) -> ShellInput<'_> {
    let (mut command, mut stdin) = (false, false);
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let t = arg.text.as_str();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if t.starts_with("--") {
            i += if matches!(t, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if t.len() > 1 && (t.starts_with('-') || t.starts_with('+')) {
            i += 1;
            for c in t[1..].chars() {
                match c {
                    'c' => command = true,
                    's' => stdin = true,
                    // `-o pipefail`, `-O extglob`: the option's name is next.
                    'o' | 'O' => i += 1,
                    _ => {}
                }
            }
            continue;
        }
        break;
    }
    if command {
        ShellInput::Command(args.get(i))
    } else if stdin || i >= args.len() {
        ShellInput::Stdin
    } else {
        ShellInput::File
    }
}

/// The command of `su -c CMD` (also `-cCMD`, `--command CMD`,
/// `--command=CMD`); su's options may follow the user name.
fn su_command(args: &[Arg]) -> Option<Arg> {
    for (i, arg) in args.iter().enumerate() {
        let t = arg.text.as_str();
        if t == "--" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if name.len() >= 2
                && ("command".starts_with(name) || "session-command".starts_with(name))
            {
                return match value {
                    Some(value) => Some(Arg {
                        text: value.to_owned(),
                        dynamic: arg.dynamic,
                    }),
                    None => args.get(i + 1).cloned(),
                };
            }
            continue;
        }
        if let Some(cluster) = t.strip_prefix('-') {
            // The first letter that takes an argument decides.
            if let Some(at) = cluster.find(['c', 'g', 'G', 's', 'w']) {
                if cluster[at..].starts_with('c') {
                    let rest = &cluster[at + 1..];
                    return if rest.is_empty() {
                        args.get(i + 1).cloned()
                    } else {
                        Some(Arg {
                            text: rest.to_owned(),
                            dynamic: arg.dynamic,
                        })
                    };
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(line: &str) -> Vec<Command> {
        match analyze(line) {
            Analysis::Parsed(commands) => commands,
            Analysis::Unparsed { reason } => panic!("{line:?} did not parse: {reason}"),
        }
    }

    fn texts(line: &str) -> Vec<String> {
        commands(line).into_iter().map(|c| c.text).collect()
    }

    /// Asserts the `text` of every command the line lists, in order.
    #[track_caller]
    fn check(line: &str, expected: &[&str]) {
        assert_eq!(texts(line), expected, "for {line:?}");
    }

    fn redirects(line: &str) -> Vec<(String, bool)> {
        commands(line)
            .into_iter()
            .flat_map(|c| c.redirects)
            .map(|r| (r.target, r.write))
            .collect()
    }

    fn w(target: &str) -> (String, bool) {
        (target.to_owned(), true)
    }

    fn r(target: &str) -> (String, bool) {
        (target.to_owned(), false)
    }

    #[track_caller]
    fn unparsed(line: &str) -> String {
        match analyze(line) {
            Analysis::Unparsed { reason } => reason,
            Analysis::Parsed(c) => panic!("{line:?} parsed: {c:?}"),
        }
    }

    // ---- lists, pipelines, compound commands --------------------------------

    #[test]
    fn and_list_and_pipeline() {
        check("git status && curl x | sh", &["git status", "curl x", "sh"]);
    }

    #[test]
    fn sequence_or_background() {
        check("a; b || c &", &["a", "b", "c"]);
        check("ls |& grep x", &["ls", "grep x"]);
        check("! git status", &["git status"]);
        check("time git status", &["git status"]);
    }

    #[test]
    fn subshell_and_group() {
        check("(cd /tmp && rm -rf x)", &["cd /tmp", "rm -rf x"]);
        check("{ a; b; }", &["a", "b"]);
    }

    #[test]
    fn if_for_while_case() {
        check("if curl x; then rm y; fi", &["curl x", "rm y"]);
        check(
            "if a; then b; elif c; then d; else e; fi",
            &["a", "b", "c", "d", "e"],
        );
        check(r#"for f in *; do rm "$f"; done"#, &[r#"rm "$f""#]);
        check("for f in $(ls); do :; done", &["ls", ":"]);
        check("until a; do b; done", &["a", "b"]);
        check(
            "case $x in a) rm a;; b|c) curl b;; esac",
            &["rm a", "curl b"],
        );
        check("case $(curl x) in *) :;; esac", &["curl x", ":"]);
        check(
            "for ((i = $(curl x); i < 3; i++)); do b; done",
            &["curl x", "b"],
        );
        check("(( $(curl x) ))", &["curl x"]);
        check("coproc curl x", &["curl x"]);
    }

    #[test]
    fn nested_subshells_are_not_arithmetic() {
        // brush-parser reads these as `((...))`; bash runs them as subshells.
        check("( ( curl x ) )", &["curl x"]);
        check("((curl x) )", &["curl x"]);
        check(
            "echo $( ( ( curl x ) ) )",
            &["echo $( ( ( curl x ) ) )", "curl x"],
        );
        check("(( i++ ))", &[]);
        check("if (( 1 )); then curl x; fi", &["curl x"]);
    }

    #[test]
    fn functions_body_and_call() {
        check("f() { curl x; }; f", &["curl x", "f"]);
        check("function g { curl x; }", &["curl x"]);
    }

    #[test]
    fn extended_test() {
        check("[[ -f $(curl x) ]]", &["curl x"]);
        check("[[ $x =~ ^(a|b)$ ]] && ok", &["ok"]);
    }

    #[test]
    fn comments_and_continuations() {
        check("git status # && curl x", &["git status"]);
        check("git status \\\n  && curl x", &["git status", "curl x"]);
        check("a\nb", &["a", "b"]);
    }

    // ---- substitutions ------------------------------------------------------

    #[test]
    fn command_substitution() {
        check("echo $(curl evil)", &["echo $(curl evil)", "curl evil"]);
        check(
            "echo $(echo $(curl x))",
            &["echo $(echo $(curl x))", "echo $(curl x)", "curl x"],
        );
        check(
            r#"git commit -m "fix: $(date)""#,
            &[r#"git commit -m "fix: $(date)""#, "date"],
        );
        check("$(curl x) arg", &["$(curl x) arg", "curl x"]);
    }

    #[test]
    fn backticks() {
        check("echo `curl evil`", &["echo `curl evil`", "curl evil"]);
        check(
            r#"echo "a `curl x` b""#,
            &[r#"echo "a `curl x` b""#, "curl x"],
        );
        check(
            "echo `echo \\`curl x\\``",
            &["echo `echo \\`curl x\\``", "echo `curl x`", "curl x"],
        );
    }

    #[test]
    fn substitution_inside_double_quotes() {
        check(
            r#"echo "$(rm -rf /)""#,
            &[r#"echo "$(rm -rf /)""#, "rm -rf /"],
        );
    }

    #[test]
    fn substitution_inside_expansions() {
        check("echo ${x:-$(curl x)}", &["echo ${x:-$(curl x)}", "curl x"]);
        check(
            r#"echo "${a[$(curl x)]}""#,
            &[r#"echo "${a[$(curl x)]}""#, "curl x"],
        );
        check(
            "echo ${x/$(curl a)/$(curl b)}",
            &["echo ${x/$(curl a)/$(curl b)}", "curl a", "curl b"],
        );
        check(
            "echo $(( $(curl x) + 1 ))",
            &["echo $(( $(curl x) + 1 ))", "curl x"],
        );
    }

    #[test]
    fn process_substitution() {
        check("cat <(curl x)", &["cat <(curl x)", "curl x"]);
        check("diff >(tee f) g", &["diff >(tee f) g", "tee f"]);
        check("echo hi > >(curl x)", &["echo hi", "curl x"]);
        assert!(commands("cat <(curl x)")[0].dynamic);
    }

    // ---- assignments --------------------------------------------------------

    #[test]
    fn leading_assignments_are_not_words() {
        check("FOO=1 git status", &["git status"]);
        check("FOO=1 BAR='a b' git status", &["git status"]);
        check("FOO=$(curl x) git status", &["git status", "curl x"]);
        check("export A=$(curl x)", &["export A=$(curl x)", "curl x"]);
    }

    #[test]
    fn bare_assignment_yields_its_substitution() {
        check("X=$(curl x)", &["curl x"]);
        check("X=1", &[]);
        check("a=(1 $(curl x))", &["curl x"]);
        check("a[$(curl x)]=1", &["curl x"]);
    }

    // ---- words --------------------------------------------------------------

    #[test]
    fn quote_removal_of_static_words() {
        let c = &commands(r#"echo 'a b' "c" d\ e $'f\tg' "h\$i""#)[0];
        assert_eq!(c.words, ["echo", "a b", "c", "d e", "f\tg", "h$i"]);
        assert_eq!(c.text, "echo a b c d e f\tg h$i");
        assert!(!c.dynamic);
        // Ways to spell `rm` are all `rm`.
        for line in [
            r"\rm -rf /",
            "'r'm -rf /",
            r#""rm" -rf /"#,
            "r''m -rf /",
            r"$'\x72m' -rf /",
            r"$'\162m' -rf /",
        ] {
            check(line, &["rm -rf /"]);
        }
    }

    #[test]
    fn dynamic_words_keep_their_source() {
        let c = &commands(r#"echo ~ *.rs "$HOME" {a,b} $x [ab] ~/x "~/y""#)[0];
        assert_eq!(
            c.words,
            [
                "echo",
                "~",
                "*.rs",
                r#""$HOME""#,
                "{a,b}",
                "$x",
                "[ab]",
                "~/x",
                "~/y"
            ]
        );
        assert!(c.dynamic);
        let c = &commands("[ -f x ] && git log -1 HEAD@{1}")[..];
        assert!(!c[0].dynamic && !c[1].dynamic, "{c:?}");
        // An ANSI-C escape that is not a plain string stays as written.
        check(r"echo $'a\0b'", &[r"echo $'a\0b'"]);
    }

    // ---- redirections -------------------------------------------------------

    #[test]
    fn redirect_into_protected_files() {
        let c = commands("echo hi > .git/config");
        assert_eq!(c[0].text, "echo hi");
        assert_eq!(
            c[0].redirects,
            [Redirect {
                write: true,
                target: ".git/config".into(),
                dynamic: false
            }]
        );
        let c = commands("echo hi >> ~/.bashrc");
        assert_eq!(c[0].text, "echo hi");
        assert_eq!(
            c[0].redirects,
            [Redirect {
                write: true,
                target: "~/.bashrc".into(),
                dynamic: true
            }]
        );
        assert_eq!(redirects("cat < /etc/shadow"), [r("/etc/shadow")]);
        assert_eq!(redirects("echo hi &> out"), [w("out")]);
        assert_eq!(redirects("echo hi &>> out"), [w("out")]);
        assert_eq!(redirects("echo hi >| out"), [w("out")]);
        assert_eq!(redirects("echo hi >& out"), [w("out")]);
        assert_eq!(redirects("cat 4<> f"), [w("f")]);
        assert_eq!(redirects(r#"> "a b" echo hi 2>err"#), [w("a b"), w("err")]);
        check("> .git/config", &[""]);
        assert_eq!(redirects("> .git/config"), [w(".git/config")]);
        assert_eq!(redirects("exec 3> f"), [w("f")]);
    }

    #[test]
    fn redirect_without_a_command() {
        // `$(<file)` reads the file without running anything.
        check("x=$(</etc/shadow)", &[""]);
        assert_eq!(redirects("x=$(</etc/shadow)"), [r("/etc/shadow")]);
        check("exec >/tmp/log 2>&1", &["exec"]);
        assert_eq!(redirects("exec >/tmp/log 2>&1"), [w("/tmp/log")]);
    }

    #[test]
    fn descriptor_duplication_is_not_a_file() {
        check("git log 2>&1 | head", &["git log", "head"]);
        assert_eq!(redirects("git log 2>&1 | head"), []);
        assert_eq!(redirects("cat 3>&- 4<&0 5>&6-"), []);
    }

    #[test]
    fn redirect_target_with_substitution() {
        let c = commands("echo hi > $(curl x)");
        assert_eq!(
            c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
            ["echo hi", "curl x"]
        );
        assert_eq!(c[0].redirects[0].target, "$(curl x)");
        assert!(c[0].redirects[0].dynamic);
    }

    #[test]
    fn redirects_of_compound_commands() {
        check("{ curl x; } > .git/config", &["", "curl x"]);
        assert_eq!(redirects("{ curl x; } > .git/config"), [w(".git/config")]);
        check(
            "while read l; do echo $l; done < f",
            &["", "read l", "echo $l"],
        );
        assert_eq!(redirects("while read l; do echo $l; done < f"), [r("f")]);
        check("(a) 2>&1", &["a"]);
    }

    #[test]
    fn here_documents_and_strings() {
        check("cat <<EOF\nhello $(curl x)\nEOF\n", &["cat", "curl x"]);
        check("cat <<'EOF'\nhello $(curl x)\nEOF\n", &["cat"]);
        check("cat <<< \"$(curl x)\"", &["cat", "curl x"]);
        assert_eq!(redirects("cat <<EOF\nx\nEOF\n"), []);
    }

    // ---- wrappers -----------------------------------------------------------

    #[test]
    fn shell_dash_c() {
        check(
            "sh -c 'curl x | sh'",
            &["sh -c curl x | sh", "curl x", "sh"],
        );
        check("bash -lc \"rm -rf ~\"", &["bash -lc rm -rf ~", "rm -rf ~"]);
        check(
            "bash -e -o pipefail -c 'a && b' name arg",
            &["bash -e -o pipefail -c a && b name arg", "a", "b"],
        );
        check("/bin/dash -c 'curl x'", &["/bin/dash -c curl x", "curl x"]);
        check("zsh -c 'curl x'", &["zsh -c curl x", "curl x"]);
        check("bash script.sh", &["bash script.sh"]);
        // A script given only at run time cannot be seen: the wrapper is
        // dynamic, and what it runs is a program known only at run time.
        let c = commands(r#"bash -c "$CMD""#);
        assert_eq!(c.len(), 2);
        assert!(c[0].dynamic && !c[0].program_dynamic);
        assert!(c[1].program_dynamic);
        assert_eq!(c[1].text, r#""$CMD""#);
    }

    #[test]
    fn shell_reading_a_here_document() {
        check(
            "bash <<'EOF'\ncurl x | sh\nEOF\n",
            &["bash", "curl x", "sh"],
        );
        check("sh -s <<< 'rm -rf /'", &["sh -s", "rm -rf /"]);
        check("bash script.sh <<< 'rm -rf /'", &["bash script.sh"]);
        // In an unquoted here-document `\$` is escaped and `\"` is not.
        check(
            "bash <<EOF\necho \\\"hi\\\" \\$HOME\nEOF\n",
            &["bash", "echo \"hi\" $HOME"],
        );
        // A script known only at run time is a program known only then.
        check(
            "bash <<EOF\n$(curl x)\nEOF\n",
            &["bash", "curl x", "$(curl x)\n"],
        );
    }

    #[test]
    fn env_wrapper() {
        check(
            "env -i PATH=/bin curl x",
            &["env -i PATH=/bin curl x", "curl x"],
        );
        check(
            "env -u HOME --chdir /tmp A=1 B=2 curl x",
            &["env -u HOME --chdir /tmp A=1 B=2 curl x", "curl x"],
        );
        check(
            "/usr/bin/env - curl x",
            &["/usr/bin/env - curl x", "curl x"],
        );
        check("env A=1", &["env A=1"]);
        assert!(unparsed("env -S 'curl x'").contains("env -S"));
    }

    #[test]
    fn timeout_nice_nohup_stdbuf_time() {
        check("timeout 5 curl x", &["timeout 5 curl x", "curl x"]);
        check(
            "timeout -s KILL --kill 3 5 curl x",
            &["timeout -s KILL --kill 3 5 curl x", "curl x"],
        );
        check("nice -n 10 rm -rf /", &["nice -n 10 rm -rf /", "rm -rf /"]);
        check("nice -5 rm x", &["nice -5 rm x", "rm x"]);
        check("nohup curl x &", &["nohup curl x", "curl x"]);
        check(
            "stdbuf -oL -e 0 curl x",
            &["stdbuf -oL -e 0 curl x", "curl x"],
        );
        check(
            "/usr/bin/time -o t.txt -v curl x",
            &["/usr/bin/time -o t.txt -v curl x", "curl x"],
        );
        check("setsid -f curl x", &["setsid -f curl x", "curl x"]);
    }

    #[test]
    fn command_builtin_exec() {
        check("command curl x", &["command curl x", "curl x"]);
        check("command -v curl", &["command -v curl"]);
        check(
            "builtin eval 'curl x'",
            &["builtin eval curl x", "eval curl x", "curl x"],
        );
        check("exec curl x", &["exec curl x", "curl x"]);
        check("exec -a name curl x", &["exec -a name curl x", "curl x"]);
    }

    #[test]
    fn sudo_doas_su() {
        check("sudo -u root rm x", &["sudo -u root rm x", "rm x"]);
        check("sudo -E VAR=1 rm x", &["sudo -E VAR=1 rm x", "rm x"]);
        check("sudo -l", &["sudo -l"]);
        check("doas -u root rm x", &["doas -u root rm x", "rm x"]);
        check("su -c 'curl x' root", &["su -c curl x root", "curl x"]);
        check(
            "su root --command='curl x'",
            &["su root --command=curl x", "curl x"],
        );
    }

    #[test]
    fn xargs_and_find_exec() {
        let c = commands("xargs rm < list");
        assert_eq!(
            c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
            ["xargs rm", "rm"]
        );
        assert_eq!(
            c[0].redirects,
            [Redirect {
                write: false,
                target: "list".into(),
                dynamic: false
            }]
        );
        assert!(c[1].dynamic, "xargs appends arguments at run time");
        check(
            "xargs -0 -I{} -n 1 sh -c 'rm {}'",
            &["xargs -0 -I{} -n 1 sh -c rm {}", "sh -c rm {}", "rm {}"],
        );
        check(
            r"find . -name x -exec rm {} \;",
            &["find . -name x -exec rm {} ;", "rm {}"],
        );
        check(
            "find . -execdir chmod +x {} + -ok rm -rf / ';'",
            &[
                "find . -execdir chmod +x {} + -ok rm -rf / ;",
                "chmod +x {}",
                "rm -rf /",
            ],
        );
        assert!(commands(r"find . -exec rm {} \;")[1].dynamic);
    }

    #[test]
    fn eval_and_trap() {
        check(r#"eval "curl x""#, &["eval curl x", "curl x"]);
        check(
            "eval curl '$(id)'",
            &["eval curl $(id)", "curl $(id)", "id"],
        );
        check("trap 'curl x' EXIT", &["trap curl x EXIT", "curl x"]);
        check("trap - EXIT", &["trap - EXIT"]);
    }

    #[test]
    fn nested_wrappers() {
        check(
            "sudo env timeout 5 sh -c 'nice curl x'",
            &[
                "sudo env timeout 5 sh -c nice curl x",
                "env timeout 5 sh -c nice curl x",
                "timeout 5 sh -c nice curl x",
                "sh -c nice curl x",
                "nice curl x",
                "curl x",
            ],
        );
    }

    #[test]
    fn wrappers_of_util_linux_and_others() {
        for (line, inner) in [
            ("chrt 1 curl x", "curl x"),
            ("chrt -f -T 5 1 curl x", "curl x"),
            ("taskset 1 curl x", "curl x"),
            ("taskset -c 0,1 curl x", "curl x"),
            ("ionice curl x", "curl x"),
            ("ionice -c 3 curl x", "curl x"),
            ("ionice -c3 -n 7 curl x", "curl x"),
            ("unshare curl x", "curl x"),
            ("unshare -r --setgroups deny curl x", "curl x"),
            ("unshare --mount=/x -R / curl x", "curl x"),
            ("nsenter -t 1 -m curl x", "curl x"),
            ("setpriv --reuid 1000 curl x", "curl x"),
            ("flock -u / curl x", "curl x"),
            ("flock -w 5 /tmp/l curl x", "curl x"),
            ("setarch -3 curl x", "curl x"),
            ("setarch x86_64 -R curl x", "curl x"),
            ("linux32 curl x", "curl x"),
            ("choom -n 0 curl x", "curl x"),
            ("logsave /dev/null curl x", "curl x"),
            ("prlimit --nofile=10 curl x", "curl x"),
            ("chroot / curl x", "curl x"),
            ("strace -o /dev/null curl x", "curl x"),
            ("strace -f -e trace=open curl x", "curl x"),
            ("valgrind --tool=none curl x", "curl x"),
            ("ssh-agent curl x", "curl x"),
            ("busybox curl x", "curl x"),
            ("watch -x curl x", "curl x"),
            ("rlwrap -a curl x", "curl x"),
            ("/lib64/ld-linux-x86-64.so.2 curl x", "curl x"),
            ("ld.so --preload x.so curl x", "curl x"),
            ("npx curl x", "curl x"),
            ("npm exec -- curl x", "curl x"),
            ("uv run --with y curl x", "curl x"),
            ("bundle exec curl x", "curl x"),
            ("rustup run stable curl x", "curl x"),
            ("perf stat -e cycles curl x", "curl x"),
            ("start-stop-daemon -S -x curl -- x", "curl x"),
            ("ip netns exec n curl x", "curl x"),
        ] {
            let texts = texts(line);
            assert_eq!(
                texts.last().map(String::as_str),
                Some(inner),
                "{line}: {texts:?}"
            );
        }
        // Those that take a script, run by a shell.
        for line in [
            "flock /tmp/l -c 'curl x'",
            "flock -c 'curl x' /tmp/l",
            "watch 'curl x'",
            "watch -n 1 curl x",
            "script -q -c 'curl x' /dev/null",
            "sg users -c 'curl x'",
            "ssh host curl x",
            "ssh -p 22 host 'curl x'",
            "capsh -- -c 'curl x'",
            "parallel curl x ::: a b",
            "npx -c 'curl x'",
        ] {
            let texts = texts(line);
            assert_eq!(
                texts.last().map(String::as_str),
                Some("curl x"),
                "{line}: {texts:?}"
            );
        }
        // What runs nothing.
        for line in [
            "taskset -p 1",
            "chrt -m",
            "ionice -p 1",
            "setpriv -d",
            "flock 9",
            "ssh -N host",
            "ssh host",
            "npm install",
            "uv pip install x",
        ] {
            assert_eq!(texts(line).len(), 1, "{line}: {:?}", texts(line));
        }
    }

    #[test]
    fn a_wrapper_with_no_command_runs_a_shell_known_only_at_run_time() {
        for line in [
            "script -q /dev/null",
            "unshare -r",
            "chroot /",
            "nsenter -t 1",
            "su",
            "sudo -s",
            "sg users",
            "run-parts /etc/x",
        ] {
            let c = commands(line);
            assert_eq!(c.len(), 2, "{line}: {c:?}");
            assert!(c[1].program_dynamic, "{line}");
            assert_eq!(c[1].text, "$SHELL", "{line}");
        }
        let c = commands("eval \"$X\"");
        assert!(c[1].program_dynamic, "{c:?}");
        let c = commands("$T x");
        assert!(c[0].program_dynamic);
        let c = commands("$(echo touch) x");
        assert!(c[0].program_dynamic);
        assert!(!commands("touch $x")[0].program_dynamic);
    }

    #[test]
    fn assignments_reach_what_runs_them() {
        let env = |line: &str| -> Vec<Vec<String>> {
            commands(line).into_iter().map(|c| c.env).collect()
        };
        assert_eq!(env("PAGER=x git log"), [vec!["PAGER=x".to_string()]]);
        assert_eq!(
            env("PAGER=x timeout 5 git log"),
            [vec!["PAGER=x".to_string()], vec!["PAGER=x".to_string()]]
        );
        assert_eq!(env("env PAGER=x git log")[1], ["PAGER=x"]);
        assert_eq!(env("sudo -E PAGER=x git log")[1], ["PAGER=x"]);
        assert_eq!(env("strace -E PAGER=x git log")[1], ["PAGER=x"]);
        assert_eq!(env("PAGER=x sh -c 'git log'")[1], ["PAGER=x"]);
        // A table variable set earlier in the line stays in effect; others
        // are the shell's own.
        assert_eq!(
            env("PATH=/tmp/x; git status"),
            [vec!["PATH=/tmp/x".to_string()]]
        );
        assert_eq!(env("export PAGER=x; git log")[1], ["PAGER=x"]);
        assert_eq!(env("x=1; echo $x"), [Vec::<String>::new()]);
        assert_eq!(env("export PATH; git status")[1], Vec::<String>::new());
        assert_eq!(env("read HOME; git status")[1], ["HOME=$(read)"]);
    }

    #[test]
    fn what_feeds_standard_input() {
        let fed = |line: &str| -> Vec<bool> { commands(line).iter().map(|c| c.fed).collect() };
        assert_eq!(fed("ed f"), [false]);
        assert_eq!(fed("echo x | ed f"), [false, true]);
        assert_eq!(fed("ed f < cmds"), [true]);
        assert_eq!(fed("ed f <<< x"), [true]);
        assert_eq!(fed("ed f <<EOF\nx\nEOF\n"), [true]);
        assert_eq!(fed("{ ed f; } < cmds"), [false, true]);
        assert_eq!(fed("echo x | { ed f; }"), [false, true]);
        assert_eq!(fed("echo x | sh -c 'ed f'"), [false, true, true]);
        assert_eq!(fed("exec < cmds; ed f"), [true, true]);
        assert_eq!(fed("ed f 2> err"), [false]);
    }

    // ---- what is not analyzed -----------------------------------------------

    #[test]
    fn unparsable_lines() {
        unparsed("echo 'unterminated");
        unparsed("if then fi");
        unparsed("echo )");
        // Inner scripts must parse too.
        assert!(unparsed("bash -c 'echo ('").contains("echo ("));
        // brush-parser 0.4 rejects `case` inside `$(...)`; failing closed.
        unparsed("echo $(case x in a) curl x;; esac)");
    }

    #[test]
    fn deep_or_long_lines_are_refused_not_crashed() {
        let deep = format!("{}a{}", "{ ".repeat(3000), ";}".repeat(3000));
        assert!(unparsed(&deep).contains("levels deep"));
        let subs = format!("echo {}x{}", "$(echo ".repeat(500), ")".repeat(500));
        assert!(unparsed(&subs).contains("levels deep"));
        let long = "a;".repeat(MAX_LINE_BYTES);
        assert!(unparsed(&long).contains("bytes"));
        // Nesting within the limit is fine.
        let ok = format!("{}curl x{}", "( ".repeat(20), " )".repeat(20));
        check(&ok, &["curl x"]);
    }

    #[test]
    fn ansi_c_decoding() {
        assert_eq!(
            ansi_c(r"a\tb\x41\u00e9\101\\\'").as_deref(),
            Some("a\tbAé".to_owned() + "A\\'").as_deref()
        );
        assert_eq!(ansi_c(r"\q").as_deref(), Some(r"\q"));
        assert_eq!(ansi_c(r"\xff"), None);
        assert_eq!(ansi_c(r"\cA"), None);
        assert_eq!(ansi_c(r"\0"), None);
    }
}
