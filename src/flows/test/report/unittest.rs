//! Python's unittest: `Ran 5 tests in 0.001s` then `OK` or
//! `FAILED (failures=1, errors=1)`, and a section per failure and error
//! (`FAIL: test_x (pkg.mod.Class.test_x)`) holding its traceback.

use super::{count_of, message, pad, Failure, Output, Report, Signature};

/// The rules around a section's header: 70 `=` above, 70 `-` below.
const DOUBLE: &str = "======================================================================";
const SINGLE: &str = "----------------------------------------------------------------------";

/// Strong when a `Ran N tests in T` line is followed by unittest's verdict.
pub(super) fn detect(out: &Output) -> Signature {
    let mut ran = false;
    for line in out.lines() {
        if ran_count(line).is_some() {
            ran = true;
        } else if ran && verdict(line).is_some() {
            return Signature::Strong;
        }
    }
    Signature::Absent
}

/// N of `Ran N tests in 0.001s`.
fn ran_count(line: &str) -> Option<u64> {
    let (n, rest) = line.strip_prefix("Ran ")?.split_once(' ')?;
    let took = rest
        .strip_prefix("tests in ")
        .or_else(|| rest.strip_prefix("test in "))?
        .strip_suffix('s')?;
    took.parse::<f64>().ok()?;
    n.parse().ok()
}

/// The `key=N` items of `OK`, `OK (skipped=1)`, `FAILED (errors=1)` or
/// `NO TESTS RAN`.
fn verdict(line: &str) -> Option<Vec<(u64, &str)>> {
    let rest = ["OK", "FAILED", "NO TESTS RAN"]
        .iter()
        .find_map(|w| line.strip_prefix(w))?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let inner = rest.strip_prefix(" (")?.strip_suffix(')')?;
    inner
        .split(", ")
        .map(|item| {
            let (key, n) = item.split_once('=')?;
            Some((n.parse().ok()?, key))
        })
        .collect()
}

/// unittest's report. `passed` is what ran less failures, errors,
/// unexpected successes, skips and expected failures; `skipped` counts the
/// expected failures too; errors and unexpected successes are failures.
pub(super) fn parse(out: &Output) -> Report {
    let (mut ran, mut bad, mut skipped) = (0, 0, 0);
    for line in out.lines() {
        if let Some(n) = ran_count(line) {
            ran += n;
        } else if let Some(items) = verdict(line) {
            bad += count_of(&items, &["failures", "errors", "unexpected successes"]);
            skipped += count_of(&items, &["skipped", "expected failures"]);
        }
    }
    let mut failed = sections(out);
    pad(&mut failed, bad, |n| format!("(unnamed failure {n})"));
    Report {
        runner: "unittest",
        passed: ran.saturating_sub(bad + skipped),
        failed,
        skipped,
    }
}

/// The failures the sections name, in order.
fn sections(out: &Output) -> Vec<Failure> {
    let lines: Vec<&str> = out.lines().collect();
    let mut failed = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let header = lines.get(i + 1).and_then(|l| header(l));
        let (true, Some(title)) = (lines[i] == DOUBLE, header) else {
            i += 1;
            continue;
        };
        // Past the header (a docstring may add lines) and the dashes.
        let start = (i + 2..lines.len())
            .find(|&j| lines[j] == SINGLE)
            .map_or(lines.len(), |j| j + 1);
        let end = (start..lines.len())
            .find(|&j| lines[j] == DOUBLE || lines[j] == SINGLE)
            .unwrap_or(lines.len());
        failed.push(failure(title, &lines[start..end]));
        i = end;
    }
    failed
}

/// The title of `FAIL: title`, `ERROR: title`, `UNEXPECTED SUCCESS: title`.
fn header(line: &str) -> Option<&str> {
    ["FAIL: ", "ERROR: ", "UNEXPECTED SUCCESS: "]
        .iter()
        .find_map(|k| line.strip_prefix(k))
}

/// A failure from its section: the dotted name, the frame in the test
/// method (else the last frame), and the lines that are not traceback.
fn failure(title: &str, body: &[&str]) -> Failure {
    let (name, method) = name_of(title);
    let frames: Vec<(&str, u64, &str)> = body.iter().filter_map(|l| python_frame(l)).collect();
    let at = frames
        .iter()
        .rev()
        .find(|(_, _, func)| *func == method)
        .or(frames.last());
    Failure {
        name,
        file: at.map(|(p, _, _)| p.to_string()),
        line: at.map(|(_, n, _)| *n),
        message: message(not_traceback(body)),
    }
}

/// `mod.Class.test_x` from `test_x (mod.Class.test_x)` (Python 3.11+) or
/// `test_x (mod.Class)` (before); a subtest's ` (i=1)` is dropped. Also
/// the method's name, to find its frame.
fn name_of(title: &str) -> (String, &str) {
    let Some((method, rest)) = title.split_once(" (") else {
        return (title.to_string(), title);
    };
    let inner = rest.split(')').next().unwrap_or(rest);
    let name = if inner == method || inner.ends_with(&format!(".{method}")) {
        inner.to_string()
    } else {
        format!("{inner}.{method}")
    };
    (name, method)
}

/// The lines of a section that are not a traceback's frames: the
/// exception lines, and what the test printed.
fn not_traceback<'a>(body: &[&'a str]) -> Vec<&'a str> {
    let mut kept = Vec::new();
    let mut in_traceback = false;
    for line in body {
        if line.starts_with("Traceback (most recent call last):") {
            in_traceback = true;
        } else if in_traceback && line.starts_with([' ', '\t']) {
            // A frame, its source line, or the carets under it.
        } else {
            in_traceback = false;
            kept.push(*line);
        }
    }
    kept
}

/// Path, line and function of a traceback frame,
/// `  File "pkg/test_calc.py", line 9, in test_adds_wrong`.
pub(super) fn python_frame(line: &str) -> Option<(&str, u64, &str)> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (path, rest) = rest.split_once("\", line ")?;
    let (n, func) = rest.split_once(", in ")?;
    Some((path, n.parse().ok()?, func.trim_end()))
}
