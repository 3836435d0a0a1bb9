//! libtest, the harness behind `cargo test`: per binary, `running N tests`,
//! `test NAME ... FAILED` lines, a `---- NAME stdout ----` section per
//! failure with its panic, the `failures:` list and
//! `test result: FAILED. 1 passed; 2 failed; 1 ignored; ...`.

use super::{indent, items, location, message, pad, Failure, Output, Report, Signature};
use std::collections::{HashMap, HashSet};

/// Strong when a line is a `test result: ...` line.
pub(super) fn detect(out: &Output) -> Signature {
    if out.any_line(|l| result(l).is_some()) {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// passed, failed and ignored of
/// `test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 2 filtered out; finished in 0.00s`.
pub(super) fn result(line: &str) -> Option<(u64, u64, u64)> {
    let rest = line.strip_prefix("test result: ")?;
    let rest = rest
        .strip_prefix("ok. ")
        .or_else(|| rest.strip_prefix("FAILED. "))?;
    let counted = rest.split("; finished in ").next()?;
    let counts = items(counted, "; ")?;
    let of = |word: &str| counts.iter().find(|(_, w)| *w == word).map(|(n, _)| *n);
    Some((of("passed")?, of("failed")?, of("ignored").unwrap_or(0)))
}

/// One test binary's part of the output, from its `running N tests`.
#[derive(Default)]
struct Run<'a> {
    failed: u64,
    /// Names in the order the report gives them, each once (a set beside
    /// the list, so a run of thousands of failures stays linear).
    names: Vec<&'a str>,
    named: HashSet<&'a str>,
    sections: Vec<(&'a str, Vec<&'a str>)>,
}

impl<'a> Run<'a> {
    /// Notes a failed test's name, once.
    fn name(&mut self, name: &'a str) {
        if self.named.insert(name) {
            self.names.push(name);
        }
    }
}

/// What a line of a run is, for the walk.
enum Seen<'a> {
    Running,
    Result(u64, u64, u64),
    Section(&'a str),
    FailuresList,
    Failed(&'a str),
    Other,
}

/// What `line` is.
fn seen(line: &str) -> Seen<'_> {
    let running = line
        .strip_prefix("running ")
        .and_then(|l| l.strip_suffix(" tests").or_else(|| l.strip_suffix(" test")));
    if running.is_some_and(|n| n.parse::<u64>().is_ok()) {
        return Seen::Running;
    }
    if let Some((p, f, i)) = result(line) {
        return Seen::Result(p, f, i);
    }
    if let Some(name) = section_header(line) {
        return Seen::Section(name);
    }
    if line == "failures:" {
        return Seen::FailuresList;
    }
    if let Some(name) = line
        .strip_prefix("test ")
        .and_then(|l| l.strip_suffix(" ... FAILED"))
    {
        return Seen::Failed(name.split(" - should panic").next().unwrap_or(name));
    }
    Seen::Other
}

/// NAME of `---- NAME stdout ----` (or `stderr`).
fn section_header(line: &str) -> Option<&str> {
    let inner = line.strip_prefix("---- ")?.strip_suffix(" ----")?;
    inner
        .strip_suffix(" stdout")
        .or_else(|| inner.strip_suffix(" stderr"))
}

/// Where the walk is inside a run.
#[derive(Clone, Copy)]
enum State {
    Plain,
    /// In the section at this index of the run's sections.
    Section(usize),
    /// After a `failures:` line: the list of names, once one is seen (the
    /// first `failures:` heads the sections and lists nothing).
    List {
        named: bool,
    },
}

/// libtest's report, summed over the binaries. `skipped` is the ignored
/// tests; filtered-out ones are not counted.
pub(super) fn parse(out: &Output) -> Report {
    let (mut passed, mut skipped) = (0, 0);
    let mut runs: Vec<Run> = vec![Run::default()];
    let mut state = State::Plain;
    for line in out.lines() {
        let run = runs.last_mut().expect("one run at least");
        state = match (seen(line), state) {
            (Seen::Running, _) => {
                runs.push(Run::default());
                State::Plain
            }
            (Seen::Result(p, f, i), _) => {
                passed += p;
                skipped += i;
                run.failed += f;
                State::Plain
            }
            (Seen::Section(name), _) => {
                run.name(name);
                run.sections.push((name, Vec::new()));
                State::Section(run.sections.len() - 1)
            }
            (Seen::FailuresList, _) => State::List { named: false },
            (Seen::Failed(name), state) => {
                run.name(name);
                state
            }
            (Seen::Other, State::Section(at)) => {
                run.sections[at].1.push(line);
                State::Section(at)
            }
            (Seen::Other, State::List { named }) => list_line(run, line, named),
            (Seen::Other, State::Plain) => State::Plain,
        };
    }
    let failed = runs.iter().flat_map(failures).collect();
    Report {
        runner: "libtest",
        passed,
        failed,
        skipped,
    }
}

/// A line after `failures:`: a listed name, the blank line before the
/// list, or the end of it.
fn list_line<'a>(run: &mut Run<'a>, line: &'a str, named: bool) -> State {
    match line.strip_prefix("    ") {
        Some(name) if !name.is_empty() && !name.starts_with(' ') => {
            run.name(name);
            State::List { named: true }
        }
        _ if line.is_empty() && !named => State::List { named },
        _ => State::Plain,
    }
}

/// One binary's failures: each name the run gave (a `... FAILED` line, a
/// section, the list), then unnamed ones up to its count.
fn failures(run: &Run) -> Vec<Failure> {
    let bodies: HashMap<&str, &[&str]> = run
        .sections
        .iter()
        .rev()
        .map(|(name, body)| (*name, body.as_slice()))
        .collect();
    let mut failed: Vec<Failure> = run
        .names
        .iter()
        .map(|name| failure(name, bodies.get(name).copied().unwrap_or(&[])))
        .collect();
    pad(&mut failed, run.failed, |n| {
        format!("(unnamed failure {n})")
    });
    failed
}

/// A failure from its captured output: where it panicked and what the
/// panic said, else the output's first lines.
fn failure(name: &str, body: &[&str]) -> Failure {
    match panic_of(body) {
        Some(p) => Failure {
            name: name.to_string(),
            file: p.at.map(|(f, _)| f.to_string()),
            line: p.at.map(|(_, n)| n),
            message: p.message,
        },
        None => Failure {
            message: message(body.iter().copied()),
            ..Failure::named(name)
        },
    }
}

/// What a Rust panic said and where.
pub(super) struct Panic<'a> {
    pub at: Option<(&'a str, u64)>,
    pub message: String,
}

/// The first panic in `lines`: `thread 'x' panicked at src/lib.rs:10:5:`
/// then its message (Rust 1.73+), or `thread 'x' panicked at 'message',
/// src/lib.rs:10:5` (before), the message possibly over several lines.
/// The panic may be indented (nextest 0.9.9x indents captured output):
/// its lines lose that margin.
pub(super) fn panic_of<'a>(lines: &[&'a str]) -> Option<Panic<'a>> {
    let (i, rest) = lines.iter().enumerate().find_map(|(i, l)| {
        let (head, rest) = l.split_once(" panicked at ")?;
        head.trim_start()
            .starts_with("thread '")
            .then_some((i, rest))
    })?;
    let margin = indent(lines[i]);
    let after: Vec<&str> = lines[i + 1..].iter().map(|l| unindent(l, margin)).collect();
    if let Some(quoted) = rest.strip_prefix('\'') {
        return Some(old_panic(quoted, &after));
    }
    let end = after
        .iter()
        .position(|l| l.starts_with("note: ") || l.starts_with("stack backtrace:"))
        .unwrap_or(after.len());
    Some(Panic {
        at: location(rest.trim_end().trim_end_matches(':')),
        message: message(after[..end].iter().copied()),
    })
}

/// `line` without its first `margin` columns when they are blank.
fn unindent(line: &str, margin: usize) -> &str {
    match line.get(..margin) {
        Some(head) if head.trim().is_empty() => &line[margin..],
        _ => line.trim_start(),
    }
}

/// The old form: the message runs from the quote to `', path:line:col` at
/// the end of a line.
fn old_panic<'a>(first: &'a str, more: &[&'a str]) -> Panic<'a> {
    let mut said: Vec<&str> = Vec::new();
    for line in std::iter::once(&first).chain(more) {
        if let Some((text, at)) = line.rsplit_once("', ") {
            if let Some(at) = location(at) {
                said.push(text);
                return Panic {
                    at: Some(at),
                    message: message(said),
                };
            }
        }
        said.push(line);
    }
    Panic {
        at: None,
        message: message(said),
    }
}
