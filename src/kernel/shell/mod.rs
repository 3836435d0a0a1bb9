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
//!
//! # What a command runs, and its options
//!
//! Each command also says what it runs besides itself ([`Command::runs`]):
//! which of its words make the command or script it hands on, and where in
//! the list that is; and, for a program of the table of grammars (the
//! wrappers, and programs that name files such as `cp` or `sed`), its
//! options as that program's grammar reads them ([`Command::options`]).
//! So a reader of the list (hermetic mode) can tell a command's own words
//! from those of what it runs, without a second parser that could read
//! them otherwise.

mod getopt;
mod grammars;
mod walk;
mod words;
mod wrappers;

#[cfg(test)]
mod tests;

pub use getopt::{Options, Value};
pub use grammars::is_shell;
pub use words::quote;

use words::Arg;

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
    /// What it runs besides itself, in order: the command a wrapper runs,
    /// a shell's script, each command of `find -exec`. Empty for a command
    /// that runs nothing else (or whose program is dynamic).
    pub runs: Vec<Run>,
    /// Its options, for a program of the table (see the module doc); with
    /// indices into [`Command::words`].
    pub options: Option<Options>,
}

/// Something a command runs besides itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// What it is.
    pub kind: RunKind,
    /// The words it is made of, as indices into [`Command::words`]: the
    /// command (`sudo -u root rm x`: 3 and 4), the script (`sh -c 'S'`: 2;
    /// `eval a b`: 1 and 2), the script file (`bash x.sh`: 1). Empty for
    /// [`RunKind::Stdin`] and [`RunKind::Shell`]. A command's other words
    /// are its own.
    pub words: Vec<usize>,
    /// Where the first command listed for it sits in the
    /// [`Analysis::Parsed`] list: the command it runs, the first command of
    /// the script, or the one that stands for what is known only at run
    /// time (`$SHELL`, `"$CMD"`). `None` when nothing is listed: a script
    /// file, standard input that is not a here-document, an empty script.
    pub command: Option<usize>,
}

/// What a command runs (see [`Run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// A command in its words: `sudo rm x`, `xargs rm`, `find -exec rm {} ;`.
    Argv,
    /// A script, from one word (`sh -c 'S'`, `su -c 'S'`, `trap 'S' EXIT`)
    /// or several joined (`eval a b`, `watch a b`, `ssh host a b`).
    Script,
    /// A shell's script file (`bash x.sh`), read when it runs; what it runs
    /// is not listed.
    File,
    /// A shell's standard input (`bash`, `sh -s`), listed when the line
    /// gives it as a here-document or here-string.
    Stdin,
    /// A shell of its own, given no command (`su`, `sudo -s`, `script`),
    /// listed as `$SHELL`.
    Shell,
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
    if line.len() <= SHORT_LINE {
        if let Some(analysis) = analyze_short(line) {
            return analysis;
        }
    }
    let stack = STACK_BASE + line.len() * STACK_PER_BYTE;
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("sluice-shell-parse".into())
            .stack_size(stack)
            .spawn_scoped(scope, || walk::analyze(line));
        match spawned {
            Ok(handle) => handle.join().unwrap_or_else(|_| parser_failed()),
            Err(e) => Analysis::Unparsed {
                reason: format!("could not start the shell parser: {e}"),
            },
        }
    })
}

fn parser_failed() -> Analysis {
    Analysis::Unparsed {
        reason: "the shell parser failed on this line".into(),
    }
}

/// Lines at most this long (nearly every command line) are analyzed on one
/// thread kept for them, with the stack the longest needs: starting a
/// thread per line cost more than analyzing it.
const SHORT_LINE: usize = 4 << 10;

/// A line for the kept thread, and where its analysis goes.
type ShortJob = (String, std::sync::mpsc::SyncSender<Analysis>);

/// The kept thread's queue, started on first use (again if it ended).
static SHORT: std::sync::Mutex<Option<std::sync::mpsc::SyncSender<ShortJob>>> =
    std::sync::Mutex::new(None);

/// `line` analyzed on the kept thread; `None` when it cannot start.
fn analyze_short(line: &str) -> Option<Analysis> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let job = (line.to_string(), tx);
    let mut queue = SHORT.lock().unwrap_or_else(|e| e.into_inner());
    let sent = match queue.as_ref() {
        Some(q) => q.send(job),
        None => Err(std::sync::mpsc::SendError(job)),
    };
    if let Err(std::sync::mpsc::SendError(job)) = sent {
        let q = start_short()?;
        q.send(job).ok()?;
        *queue = Some(q);
    }
    drop(queue);
    Some(rx.recv().unwrap_or_else(|_| parser_failed()))
}

fn start_short() -> Option<std::sync::mpsc::SyncSender<ShortJob>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<ShortJob>(16);
    std::thread::Builder::new()
        .name("sluice-shell-parse".into())
        .stack_size(STACK_BASE + SHORT_LINE * STACK_PER_BYTE)
        .spawn(move || {
            for (line, answer) in rx {
                let analysis = std::panic::catch_unwind(|| walk::analyze(&line))
                    .unwrap_or_else(|_| parser_failed());
                let _ = answer.send(analysis);
            }
        })
        .ok()?;
    Some(tx)
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
            runs: Vec::new(),
            options: None,
        }
    }
}
