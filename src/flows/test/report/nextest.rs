//! cargo-nextest: a status line per test (`        FAIL [   0.004s] calc
//! tests::adds_wrong`; 0.9.108+ adds a `(2/5)` counter), each failure's
//! captured output below its line (under `--- STDOUT:` headers, or
//! indented under `stdout ───` in 0.9.9x+), then `     Summary [   0.013s]
//! 5 tests run: 2 passed, 3 failed, 1 skipped` and the failures listed
//! again. The captured output of a failure includes libtest's own
//! `test result:` line, which is why nextest's report is never also read
//! as libtest's.

use super::libtest::{self, panic_of};
use super::{count_of, message, pad, Failure, Output, Report, Signature};
use std::collections::{HashMap, HashSet};

/// Strong when a line is nextest's `Summary [...] N tests run: ...`.
pub(super) fn detect(out: &Output) -> Signature {
    if out.any_line(|l| summary(l).is_some()) {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// The items of `Summary [   0.013s] 5 tests run: 2 passed (1 slow), 3 failed, 1 skipped`.
fn summary(line: &str) -> Option<Vec<(u64, &str)>> {
    let rest = line.trim_start().strip_prefix("Summary [")?;
    let (_, rest) = rest.split_once("] ")?;
    let (run, counts) = rest.split_once(" run: ")?;
    if !(run.ends_with(" tests") || run.ends_with(" test")) {
        return None;
    }
    counts
        .split(", ")
        .map(|item| {
            let (n, word) = item.split_once(' ')?;
            // `2 passed (1 slow)`: the parenthesis qualifies, it does not count.
            Some((n.parse().ok()?, word.split(" (").next()?))
        })
        .collect()
}

/// A status line: its status (`FAIL`, `TRY 2 FAIL`, `SIGSEGV`, `FLAKY 2/3`),
/// the binary's id and the test's name.
fn status(line: &str) -> Option<(&str, &str, &str)> {
    let (status, rest) = line.trim_start().split_once(" [")?;
    let upper = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b" /-".contains(&b);
    if status.is_empty() || !status.bytes().all(upper) {
        return None;
    }
    let (took, rest) = rest.split_once("] ")?;
    took.trim().strip_suffix('s')?.parse::<f64>().ok()?;
    // `(1/5) `: the counter nextest adds when not on a terminal (0.9.108+).
    let rest = match rest.strip_prefix('(') {
        Some(counter) => counter.split_once(") ")?.1,
        None => rest,
    };
    let (binary, test) = rest.split_once(' ')?;
    Some((status, binary, test.trim_end()))
}

/// The rule before the summary: dashes, or box-drawing lines in 0.9.9x.
fn separator(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 12 && (t.bytes().all(|b| b == b'-') || t.chars().all(|c| c == '─'))
}

/// Whether a status means the test failed.
fn failing(status: &str) -> bool {
    let last = status.rsplit(' ').next().unwrap_or(status);
    matches!(
        last,
        "FAIL" | "TIMEOUT" | "ABORT" | "EXECFAIL" | "LEAK-FAIL"
    ) || last.starts_with("SIG")
}

/// A test: its binary's id and its name.
type Test<'a> = (&'a str, &'a str);

/// What a walk over nextest's output gathers.
#[derive(Default)]
struct Walk<'a> {
    passed: u64,
    bad: u64,
    skipped: u64,
    /// The lines under each failing status line, by test, in order.
    blocks: HashMap<Test<'a>, Vec<Vec<&'a str>>>,
    /// Each test of the run in first-seen order, and whether its latest
    /// status line failed (a retry can pass).
    verdicts: Vec<(Test<'a>, bool)>,
    seen: HashMap<Test<'a>, usize>,
    /// The failures listed after the summary.
    listed: Vec<Test<'a>>,
    after_summary: bool,
    /// The test whose block the next lines belong to.
    open: Option<Test<'a>>,
}

impl<'a> Walk<'a> {
    /// One line: the summary, a status line, a rule, or a failure's output.
    fn line(&mut self, line: &'a str) {
        if let Some(items) = summary(line) {
            self.passed += count_of(&items, &["passed"]);
            self.bad += count_of(&items, &["failed", "timed out", "exec failed"]);
            self.skipped += count_of(&items, &["skipped"]);
            self.after_summary = true;
            self.open = None;
        } else if let Some((status, binary, test)) = status(line) {
            self.status((binary, test), failing(status));
        } else if separator(line) {
            self.open = None;
        } else if let Some(test) = self.open {
            let blocks = self.blocks.entry(test).or_default();
            blocks.last_mut().expect("an open block").push(line);
        }
    }

    /// A status line: opens a failure's block; during the run, the test's
    /// latest verdict; after the summary, the list of failures.
    fn status(&mut self, test: Test<'a>, failed: bool) {
        self.open = failed.then_some(test);
        if failed {
            self.blocks.entry(test).or_default().push(Vec::new());
        }
        if self.after_summary {
            if failed {
                self.listed.push(test);
            }
            return;
        }
        match self.seen.get(&test) {
            Some(&at) => self.verdicts[at].1 = failed,
            None => {
                self.seen.insert(test, self.verdicts.len());
                self.verdicts.push((test, failed));
            }
        }
    }

    /// The failed tests: those listed after the summary, else those whose
    /// latest status failed; each once.
    fn failed(&self) -> Vec<Test<'a>> {
        let from_run = || {
            self.verdicts
                .iter()
                .filter(|(_, f)| *f)
                .map(|(t, _)| *t)
                .collect()
        };
        let all: Vec<Test> = if self.listed.is_empty() {
            from_run()
        } else {
            self.listed.clone()
        };
        let mut once = HashSet::new();
        all.into_iter().filter(|t| once.insert(*t)).collect()
    }
}

/// nextest's report, summed over summaries. `failed` counts failed, timed
/// out and exec-failed tests; `skipped` is nextest's skipped (filtered and
/// ignored).
pub(super) fn parse(out: &Output) -> Report {
    let mut walk = Walk::default();
    for line in out.lines() {
        walk.line(line);
    }
    let none = Vec::new();
    let mut failed: Vec<Failure> = walk
        .failed()
        .iter()
        .map(|t| failure(t.1, walk.blocks.get(t).unwrap_or(&none)))
        .collect();
    pad(&mut failed, walk.bad, |n| format!("(unnamed failure {n})"));
    Report {
        runner: "nextest",
        passed: walk.passed,
        failed,
        skipped: walk.skipped,
    }
}

/// A failure from its blocks: the first panic in them, else the first
/// block's own lines (the libtest harness's lines left out).
fn failure(test: &str, blocks: &[Vec<&str>]) -> Failure {
    if let Some(p) = blocks.iter().find_map(|b| panic_of(b)) {
        return Failure {
            name: test.to_string(),
            file: p.at.map(|(f, _)| f.to_string()),
            line: p.at.map(|(_, n)| n),
            message: p.message,
        };
    }
    let said = blocks
        .first()
        .map(|b| message(b.iter().map(|l| l.trim()).filter(|l| !harness(l, test))));
    Failure {
        message: said.unwrap_or_default(),
        ..Failure::named(test)
    }
}

/// A line nextest or the libtest harness writes around a test's own
/// output (`test` is the failures list's line naming it).
fn harness(line: &str, test: &str) -> bool {
    let t = line.trim();
    t.starts_with("--- STDOUT:")
        || t.starts_with("--- STDERR:")
        || t.starts_with("stdout ─")
        || t.starts_with("stderr ─")
        || t.starts_with("running 1 test")
        || t == "failures:"
        || t == test
        || (t.starts_with("test ") && t.ends_with(" ... FAILED"))
        || libtest::result(t).is_some()
}
