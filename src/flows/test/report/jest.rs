//! jest (to stderr): `FAIL tests/math.test.js`, a `  ● suite › test`
//! block per failure (message, code frame, `at ... (FILE:LINE:COL)`),
//! `  ● Test suite failed to run` for a file that could not load, and
//! `Tests:       2 failed, 1 skipped, 3 passed, 6 total`.

use super::{
    count_of, dedent, indent, items, location, message, pad, Failure, Output, Report, Signature,
};

/// Strong when both of jest's summary lines are there.
pub(super) fn detect(out: &Output) -> Signature {
    let tests = out.any_line(|l| totals(l, "Tests:").is_some());
    if tests && out.any_line(|l| totals(l, "Test Suites:").is_some()) {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// The items of `Tests:       2 failed, 1 skipped, 3 passed, 6 total`.
fn totals<'a>(line: &'a str, label: &str) -> Option<Vec<(u64, &'a str)>> {
    let rest = line.strip_prefix(label)?.trim_start();
    let counts = items(rest, ", ")?;
    counts.last().filter(|(_, w)| *w == "total")?;
    Some(counts)
}

/// jest's report, summed over summaries. `skipped` counts todos too; a
/// file that failed to run is a failure named by the file, beside the
/// tests jest counts.
pub(super) fn parse(out: &Output) -> Report {
    let (mut passed, mut bad, mut skipped) = (0, 0, 0);
    for counts in out.lines().filter_map(|l| totals(l, "Tests:")) {
        passed += count_of(&counts, &["passed"]);
        bad += count_of(&counts, &["failed"]);
        skipped += count_of(&counts, &["skipped", "todo"]);
    }
    let lines: Vec<&str> = out.lines().collect();
    let (mut failed, suites) = blocks(&lines);
    pad(&mut failed, bad + suites, |n| {
        format!("(unnamed failure {n})")
    });
    Report {
        runner: "jest",
        passed,
        failed,
        skipped,
    }
}

/// The `●` blocks up to jest's `Summary of all failing tests` (which
/// repeats them), and how many were files that failed to run.
fn blocks(lines: &[&str]) -> (Vec<Failure>, u64) {
    let lines = match lines
        .iter()
        .position(|l| l.starts_with("Summary of all failing tests"))
    {
        Some(end) => &lines[..end],
        None => lines,
    };
    let (mut failed, mut suites) = (Vec::new(), 0);
    let mut file = None;
    for (i, line) in lines.iter().enumerate() {
        if let Some(path) = line.strip_prefix("FAIL ") {
            file = Some(path.trim());
        }
        let Some(title) = line.strip_prefix("  ● ") else {
            continue;
        };
        let body_len = lines[i + 1..]
            .iter()
            .take_while(|l| {
                !l.starts_with("  ● ") && !l.starts_with("FAIL ") && !l.starts_with("PASS ")
            })
            .count();
        let body = &lines[i + 1..i + 1 + body_len];
        if title == "Test suite failed to run" {
            suites += 1;
            failed.push(failure(file.unwrap_or(title).to_string(), file, body));
        } else {
            failed.push(failure(title.replace(" › ", " > "), file, body));
        }
    }
    (failed, suites)
}

/// A failure from its block: the message up to the code frame or the
/// first `at` line; the first frame in the test's file.
fn failure(name: String, file: Option<&str>, body: &[&str]) -> Failure {
    let said_len = body
        .iter()
        .position(|l| code_frame(l) || frame(l).is_some())
        .unwrap_or(body.len());
    let said: Vec<&str> = body[..said_len]
        .iter()
        .copied()
        .filter(|l| indent(l) >= 4 || l.trim().is_empty())
        .collect();
    let at = body
        .iter()
        .filter_map(|l| frame(l))
        .find(|(path, _)| file.is_none_or(|f| *path == f || path.ends_with(&format!("/{f}"))));
    Failure {
        name,
        file: at.map(|(p, _)| p.to_string()).or(file.map(str::to_string)),
        line: at.map(|(_, n)| n),
        message: message(dedent(&said)),
    }
}

/// A line of jest's code frame: `    > 10 |   expect(...)` or `      11 | });`.
fn code_frame(line: &str) -> bool {
    let t = line.trim_start().trim_start_matches('>').trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && t[digits..].trim_start().starts_with('|')) || t.starts_with("| ") || t == "|"
}

/// The location of `at Object.toBe (tests/math.test.js:10:21)` or
/// `at tests/math.test.js:10:21`.
fn frame(line: &str) -> Option<(&str, u64)> {
    let rest = line.trim_start().strip_prefix("at ")?;
    let inner = match rest.rfind('(') {
        Some(open) => rest[open + 1..].strip_suffix(')')?,
        None => rest,
    };
    location(inner)
}
