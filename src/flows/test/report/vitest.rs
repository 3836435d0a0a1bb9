//! vitest: ` FAIL  tests/math.test.js > suite > test` headers (to stderr),
//! each followed by its error and ` ❯ FILE:LINE:COL`; ` FAIL  FILE [ FILE ]`
//! for a file that could not load; and the summary,
//! ` Test Files  1 failed | 1 passed (2)` and `      Tests  2 failed | 3 passed (5)`.

use super::{count_of, items, location, message, pad, Failure, Output, Report, Signature};

/// Strong when both of vitest's summary lines are there.
pub(super) fn detect(out: &Output) -> Signature {
    let tests = out.any_line(|l| totals(l, "Tests").is_some());
    if tests && out.any_line(|l| totals(l, "Test Files").is_some()) {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// The items of `      Tests  2 failed | 3 passed | 1 skipped (6)`.
fn totals<'a>(line: &'a str, label: &str) -> Option<Vec<(u64, &'a str)>> {
    let rest = line.trim_start().strip_prefix(label)?.strip_prefix("  ")?;
    let (counts, total) = rest.trim().rsplit_once(" (")?;
    total.strip_suffix(')')?.parse::<u64>().ok()?;
    items(counts, " | ")
}

/// vitest's report, summed over summaries. `skipped` counts todos too; a
/// file that failed to load is a failure named by the file, beside the
/// tests vitest counts.
pub(super) fn parse(out: &Output) -> Report {
    let (mut passed, mut bad, mut skipped) = (0, 0, 0);
    for counts in out.lines().filter_map(|l| totals(l, "Tests")) {
        passed += count_of(&counts, &["passed"]);
        bad += count_of(&counts, &["failed"]);
        skipped += count_of(&counts, &["skipped", "todo"]);
    }
    let lines: Vec<&str> = out.lines().collect();
    let (mut failed, files) = failures(&lines);
    pad(&mut failed, bad + files, |n| {
        format!("(unnamed failure {n})")
    });
    Report {
        runner: "vitest",
        passed,
        failed,
        skipped,
    }
}

/// The failures the ` FAIL ` headers name, and how many were files. A run
/// of headers shares the error below them (vitest groups tests that
/// failed the same way).
fn failures(lines: &[&str]) -> (Vec<Failure>, u64) {
    let (mut failed, mut files) = (Vec::new(), 0);
    let mut i = 0;
    while i < lines.len() {
        let heads: Vec<(&str, Option<&str>)> = lines[i..].iter().map_while(|l| header(l)).collect();
        if heads.is_empty() {
            i += 1;
            continue;
        }
        let from = i + heads.len();
        let body_len = lines[from..]
            .iter()
            .take_while(|l| header(l).is_none() && !l.starts_with('⎯'))
            .count();
        let body = &lines[from..from + body_len];
        for (file, title) in heads {
            files += u64::from(title.is_none());
            failed.push(failure(file, title, body));
        }
        i = from + body_len;
    }
    (failed, files)
}

/// The file and title path of ` FAIL  tests/a.test.js > suite > test`;
/// no title for ` FAIL  tests/a.test.js [ tests/a.test.js ]`.
fn header(line: &str) -> Option<(&str, Option<&str>)> {
    let rest = line.trim_start().strip_prefix("FAIL  ")?.trim_end();
    match rest.split_once(" > ") {
        Some((file, title)) => Some((file, Some(title))),
        None => Some((rest.split(" [ ").next()?, None)),
    }
}

/// A failure from the error below its header: the message up to the first
/// ` ❯ ` frame; the first frame in its file.
fn failure(file: &str, title: Option<&str>, body: &[&str]) -> Failure {
    let frame = |l: &str| l.trim_start().starts_with("❯ ");
    let said_len = body.iter().position(|l| frame(l)).unwrap_or(body.len());
    let at = body
        .iter()
        .filter(|l| frame(l))
        .filter_map(|l| {
            location(
                l.trim_start()
                    .trim_start_matches("❯ ")
                    .split(' ')
                    .next_back()?,
            )
        })
        .find(|(path, _)| *path == file);
    Failure {
        name: title.unwrap_or(file).to_string(),
        file: Some(file.to_string()),
        line: at.map(|(_, n)| n),
        message: message(body[..said_len].iter().copied()),
    }
}
