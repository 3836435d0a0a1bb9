//! What a test runner's report said: counts and named failures, read from
//! the output of pytest, unittest, cargo test (libtest), cargo nextest,
//! go test, TAP (prove or a bare TAP stream), node's test runner, jest and
//! vitest.
//!
//! Every function here is pure: text in, [`Parsed`] out. The runner is
//! never guessed: each has a signature, lines only that runner prints in
//! its exact format, and output carrying two runners' signatures is
//! [`Parsed::Ambiguous`]. Two runners quote another's signature as part of
//! their own report, so there the quoted one is dropped rather than called
//! ambiguous: nextest shows each failed test's captured libtest output
//! (`test result: FAILED. ...`), and node's test runner writes TAP. A bare
//! TAP stream (a plan and test points, with no harness summary) is the
//! weakest signature: a failing test of any runner can print one, so it
//! counts only when no other runner's signature is there.
//!
//! Parsers read both streams (stdout's lines, then stderr's) and also
//! accept the two merged into one, since callers that capture `2>&1` pass
//! everything as `stdout`. Several test binaries, packages or files in one
//! output are summed.

mod gotest;
mod jest;
mod libtest;
mod nextest;
mod node;
mod pytest;
mod tap;
mod unittest;
mod vitest;

#[cfg(test)]
mod tests;

use serde::Serialize;
use std::borrow::Cow;

/// The most lines a [`Failure::message`] keeps.
pub const MESSAGE_LINES: usize = 10;

/// The most characters a line of a [`Failure::message`] keeps.
pub const MESSAGE_WIDTH: usize = 300;

/// What a runner's report said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// "pytest", "unittest", "libtest", "nextest", "go", "tap", "node", "jest", "vitest"
    pub runner: &'static str,
    /// Tests that passed (how each runner's count is read is on its parser).
    pub passed: u64,
    /// Tests that failed, and errors the runner counts beside them (pytest's
    /// ERROR at setup, unittest's errors=): `failed.len()` is the count.
    pub failed: Vec<Failure>,
    /// Tests skipped (and, where the runner has them, expected failures and
    /// todos: tests that did not run as a pass or a failure).
    pub skipped: u64,
}

/// One failed test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The test's name as the runner writes it, so it can be passed back as a selection
    /// (pytest: the node id `tests/test_a.py::test_x` or `tests/test_a.py::TestC::test_x`; libtest: `tests::adds`;
    /// go: `TestAdd` (subtests `TestAdd/case`); unittest: `test_x (mod.Class.test_x)` → use `mod.Class.test_x`; jest/vitest: the full title path joined with " > " ; node/tap: the test's description)
    pub name: String,
    /// The file the failure points at, as the runner wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line in `file`, 1-based.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The first lines of its failure message (at most MESSAGE_LINES = 10 lines, each cut at 300 chars), "" when the report gives none.
    pub message: String,
}

impl Failure {
    /// A failure known only by its name.
    pub fn named(name: impl Into<String>) -> Failure {
        Failure {
            name: name.into(),
            file: None,
            line: None,
            message: String::new(),
        }
    }
}

/// What [`parse`] made of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// One runner's report.
    Report(Report),
    /// No known runner's signature.
    Unknown,
    /// Two or more runners' signatures: never a guess.
    Ambiguous(Vec<&'static str>),
}

/// stdout and stderr of the run, separately (runners write their report to either: cargo's "Running" lines and jest go to stderr).
pub fn parse(stdout: &str, stderr: &str) -> Parsed {
    let out = Output::new(stdout, stderr);
    let found = detect(&out);
    match found.as_slice() {
        [] => Parsed::Unknown,
        [one] => Parsed::Report((one.parse)(&out)),
        many => Parsed::Ambiguous(many.iter().map(|r| r.name).collect()),
    }
}

/// How strongly an output carries a runner's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signature {
    Absent,
    /// A shape other runners' output can contain (a bare TAP stream).
    Weak,
    /// A summary line only this runner prints.
    Strong,
}

/// One runner: its name, its signature and its parser.
struct Runner {
    name: &'static str,
    detect: fn(&Output) -> Signature,
    parse: fn(&Output) -> Report,
    /// Runners whose signature this one's report quotes.
    quotes: &'static [&'static str],
}

const RUNNERS: &[Runner] = &[
    Runner {
        name: "pytest",
        detect: pytest::detect,
        parse: pytest::parse,
        quotes: &[],
    },
    Runner {
        name: "unittest",
        detect: unittest::detect,
        parse: unittest::parse,
        quotes: &[],
    },
    Runner {
        name: "libtest",
        detect: libtest::detect,
        parse: libtest::parse,
        quotes: &[],
    },
    Runner {
        name: "nextest",
        detect: nextest::detect,
        parse: nextest::parse,
        quotes: &["libtest"],
    },
    Runner {
        name: "go",
        detect: gotest::detect,
        parse: gotest::parse,
        quotes: &[],
    },
    Runner {
        name: "tap",
        detect: tap::detect,
        parse: tap::parse,
        quotes: &[],
    },
    Runner {
        name: "node",
        detect: node::detect,
        parse: node::parse,
        quotes: &["tap"],
    },
    Runner {
        name: "jest",
        detect: jest::detect,
        parse: jest::parse,
        quotes: &[],
    },
    Runner {
        name: "vitest",
        detect: vitest::detect,
        parse: vitest::parse,
        quotes: &[],
    },
];

/// The runners the output is from: strong signatures, less those another
/// present runner quotes; a weak one only when nothing else is there.
fn detect(out: &Output) -> Vec<&'static Runner> {
    let seen: Vec<(&Runner, Signature)> = RUNNERS
        .iter()
        .map(|r| (r, (r.detect)(out)))
        .filter(|(_, s)| *s != Signature::Absent)
        .collect();
    let quoted = |name: &str| seen.iter().any(|(r, _)| r.quotes.contains(&name));
    let strong: Vec<&Runner> = seen
        .iter()
        .filter(|(r, s)| *s == Signature::Strong && !quoted(r.name))
        .map(|(r, _)| *r)
        .collect();
    if !strong.is_empty() {
        return strong;
    }
    seen.iter()
        .filter(|(r, _)| !quoted(r.name))
        .map(|(r, _)| *r)
        .collect()
}

/// The two streams, with terminal colour codes taken out (a runner forced
/// to colour, `FORCE_COLOR=1` or `--color=always`, still parses).
struct Output<'a> {
    stdout: Cow<'a, str>,
    stderr: Cow<'a, str>,
}

impl<'a> Output<'a> {
    /// Both streams, colour codes taken out.
    fn new(stdout: &'a str, stderr: &'a str) -> Output<'a> {
        Output {
            stdout: strip_ansi(stdout),
            stderr: strip_ansi(stderr),
        }
    }

    /// stdout's lines, then stderr's.
    fn lines(&self) -> impl Iterator<Item = &str> + '_ {
        self.stdout.lines().chain(self.stderr.lines())
    }

    /// Whether some line satisfies `f`.
    fn any_line(&self, f: impl Fn(&str) -> bool) -> bool {
        self.lines().any(f)
    }
}

/// `text` without ANSI escape sequences (CSI `ESC [ ... letter` and the
/// lone `ESC x` pairs); borrowed when it has none, the usual case.
fn strip_ansi(text: &str) -> Cow<'_, str> {
    if !text.contains('\x1b') {
        return Cow::Borrowed(text);
    }
    let mut clean = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            clean.push(c);
            continue;
        }
        if chars.next_if_eq(&'[').is_some() {
            // Parameters and intermediates, up to the final byte @..~.
            for p in chars.by_ref() {
                if ('@'..='~').contains(&p) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    Cow::Owned(clean)
}

/// A failure message from its lines: blank lines dropped (a message is a
/// glance, and ten lines go further without them), trailing spaces
/// trimmed, each cut at [`MESSAGE_WIDTH`] characters, at most
/// [`MESSAGE_LINES`].
fn message<'a>(lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let kept = lines
        .into_iter()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .take(MESSAGE_LINES);
    for (i, line) in kept.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(cut(line, MESSAGE_WIDTH));
    }
    out
}

/// The first `chars` characters of `line`.
fn cut(line: &str, chars: usize) -> &str {
    match line.char_indices().nth(chars) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

/// Lines with the indentation of the least indented non-blank one removed,
/// so a message keeps its own shape but not the report's margin.
fn dedent<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let margin = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(margin..).unwrap_or_else(|| l.trim_start()))
        .collect()
}

/// How many leading spaces (a tab counts as one) `line` has.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// Adds unnamed failures until there are `count`: a summary that counts a
/// failure the report names nowhere still reports it.
fn pad(failed: &mut Vec<Failure>, count: u64, name: impl Fn(usize) -> String) {
    while (failed.len() as u64) < count {
        let n = failed.len() + 1;
        failed.push(Failure::named(name(n)));
    }
}

/// The numbers of the `N word` items (`3 failed, 1 skipped`) whose word is
/// one of `words`, summed (0 when none is).
fn count_of(items: &[(u64, &str)], words: &[&str]) -> u64 {
    items
        .iter()
        .filter(|(_, w)| words.contains(w))
        .map(|(n, _)| n)
        .sum()
}

/// Splits `text` at `sep` into `N word` items; None when any item is not
/// a number followed by words (so a sentence is not read as a summary).
fn items<'a>(text: &'a str, sep: &str) -> Option<Vec<(u64, &'a str)>> {
    text.split(sep)
        .map(|item| {
            let item = item.trim();
            let (n, word) = item.split_once(' ')?;
            Some((n.parse().ok()?, word.trim()))
        })
        .collect()
}

/// `path:line` or `path:line:column` at the end of `text` (a stack frame's
/// location): the path and the line. A path with a space in it is taken
/// for prose, not a location.
fn location(text: &str) -> Option<(&str, u64)> {
    let (rest, last) = text.rsplit_once(':')?;
    let last: u64 = last.parse().ok()?;
    let (path, line) = match rest.rsplit_once(':') {
        Some((path, line)) if line.parse::<u64>().is_ok() => (path, line.parse().ok()?),
        _ => (rest, last),
    };
    (!path.is_empty() && !path.contains(' ')).then_some((path, line))
}
