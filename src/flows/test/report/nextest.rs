//! cargo-nextest: a status line per test (`        FAIL [   0.004s] calc
//! tests::adds_wrong`), each failure's captured output below its line,
//! then `     Summary [   0.013s] 5 tests run: 2 passed, 3 failed, 1
//! skipped` and the failures listed again. The captured output of a
//! failure includes libtest's own `test result:` line, which is why
//! nextest's report is never also read as libtest's.

use super::libtest::{self, panic_of};
use super::{count_of, message, pad, Failure, Output, Report, Signature};

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

/// Whether a status means the test failed.
fn failing(status: &str) -> bool {
    let last = status.rsplit(' ').next().unwrap_or(status);
    matches!(
        last,
        "FAIL" | "TIMEOUT" | "ABORT" | "EXECFAIL" | "LEAK-FAIL"
    ) || last.starts_with("SIG")
}

/// A failing test's status line and the lines under it.
struct Block<'a> {
    binary: &'a str,
    test: &'a str,
    lines: Vec<&'a str>,
}

/// nextest's report, summed over summaries. `failed` counts failed, timed
/// out and exec-failed tests; `skipped` is nextest's skipped (filtered and
/// ignored).
pub(super) fn parse(out: &Output) -> Report {
    let (mut passed, mut bad, mut skipped) = (0, 0, 0);
    let mut blocks: Vec<Block> = Vec::new();
    let mut last: Vec<(&str, &str, bool)> = Vec::new();
    let mut listed: Vec<(&str, &str)> = Vec::new();
    let mut after_summary = false;
    let mut open = false;
    for line in out.lines() {
        if let Some(items) = summary(line) {
            passed += count_of(&items, &["passed"]);
            bad += count_of(&items, &["failed", "timed out", "exec failed"]);
            skipped += count_of(&items, &["skipped"]);
            after_summary = true;
            open = false;
        } else if let Some((status, binary, test)) = status(line) {
            open = failing(status);
            if open {
                blocks.push(Block {
                    binary,
                    test,
                    lines: Vec::new(),
                });
            }
            if after_summary && open {
                listed.push((binary, test));
            } else if !after_summary {
                last.retain(|(b, t, _)| (*b, *t) != (binary, test));
                last.push((binary, test, open));
            }
        } else if line.starts_with("------------") {
            open = false;
        } else if open {
            blocks.last_mut().expect("an open block").lines.push(line);
        }
    }
    if listed.is_empty() {
        listed = last
            .iter()
            .filter(|(_, _, f)| *f)
            .map(|(b, t, _)| (*b, *t))
            .collect();
    }
    listed.dedup();
    let mut failed: Vec<Failure> = listed.iter().map(|(b, t)| failure(b, t, &blocks)).collect();
    pad(&mut failed, bad, |n| format!("(unnamed failure {n})"));
    Report {
        runner: "nextest",
        passed,
        failed,
        skipped,
    }
}

/// A failure from its blocks: the first panic in them, else the first
/// block's own lines (the libtest harness's lines left out).
fn failure(binary: &str, test: &str, blocks: &[Block]) -> Failure {
    let mine = || {
        blocks
            .iter()
            .filter(|b| (b.binary, b.test) == (binary, test))
    };
    if let Some(p) = mine().find_map(|b| panic_of(&b.lines)) {
        return Failure {
            name: test.to_string(),
            file: p.at.map(|(f, _)| f.to_string()),
            line: p.at.map(|(_, n)| n),
            message: p.message,
        };
    }
    let said = mine()
        .next()
        .map(|b| message(b.lines.iter().copied().filter(|l| !harness(l))));
    Failure {
        message: said.unwrap_or_default(),
        ..Failure::named(test)
    }
}

/// A line nextest or the libtest harness writes around a test's own output.
fn harness(line: &str) -> bool {
    line.starts_with("--- STDOUT:")
        || line.starts_with("--- STDERR:")
        || line.starts_with("running 1 test")
        || line == "failures:"
        || line.starts_with("    ")
        || (line.starts_with("test ") && line.ends_with(" ... FAILED"))
        || libtest::result(line).is_some()
}
