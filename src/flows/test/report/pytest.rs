//! pytest: `=== 2 failed, 3 passed in 0.04s ===` (`-q`: the same line
//! without the rules), the `FAILED`/`ERROR` lines of the short test summary,
//! and each failure's section for its location and `E` lines.

use super::unittest::python_frame;
use super::{dedent, items, location, message, pad, Failure, Output, Report, Signature};
use std::collections::{HashMap, VecDeque};

/// The words of a summary line's items (`3 failed, 1 error, 2 warnings`).
const WORDS: &[&str] = &[
    "passed",
    "failed",
    "skipped",
    "deselected",
    "xfailed",
    "xpassed",
    "error",
    "errors",
    "warning",
    "warnings",
    "rerun",
];

/// Strong when a line is pytest's final summary, in any verbosity.
pub(super) fn detect(out: &Output) -> Signature {
    if out.any_line(|l| summary(l).is_some()) {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// The counts of a summary line (`=== 3 failed, 1 error in 0.10s ===`,
/// `2 passed in 0.01s`, `=== no tests ran in 0.01s ===`), None for any
/// other line.
fn summary(line: &str) -> Option<Vec<(u64, &str)>> {
    let body = match line.strip_prefix('=') {
        Some(_) => {
            let inner = line.trim_matches('=');
            // A rule on both sides, one space inside each.
            let ruled = line.ends_with('=') && inner.len() + 2 < line.len();
            inner
                .strip_prefix(' ')?
                .strip_suffix(' ')
                .filter(|_| ruled)?
        }
        None => line,
    };
    let (counts, took) = body.rsplit_once(" in ")?;
    if !duration(took) {
        return None;
    }
    if counts == "no tests ran" {
        return Some(Vec::new());
    }
    let counts = items(counts, ", ")?;
    counts
        .iter()
        .all(|(_, w)| WORDS.contains(w))
        .then_some(counts)
}

/// `0.04s`, `65.12s (0:01:05)`, or the older `0.04 seconds`.
fn duration(text: &str) -> bool {
    let (secs, rest) = match text.split_once(' ') {
        Some((secs, "seconds")) => (secs, ""),
        Some((secs, clock)) => (secs.strip_suffix('s').unwrap_or(""), clock),
        None => (text.strip_suffix('s').unwrap_or(""), ""),
    };
    let clock_ok = rest.is_empty()
        || rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|c| c.bytes().all(|b| b.is_ascii_digit() || b == b':'));
    !secs.is_empty() && secs.parse::<f64>().is_ok() && clock_ok
}

/// Which part of the report a line is in, from the `=== TITLE ===` rules.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Other,
    Failures,
    Errors,
    ShortSummary,
}

/// Whether a short-summary or `-v` line's test failed or errored: the two
/// are listed in separate parts, so a name finds its section in its own.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Failed,
    Error,
}

/// One `___ title ___` section of the FAILURES or ERRORS part.
struct Section<'a> {
    /// The last `path:LINE: ...` line before any captured output.
    at: Option<(&'a str, u64)>,
    /// The `E   ...` lines, the `E` and the margin taken off.
    says: Vec<&'a str>,
    /// The section's first lines, for a failure with no `E` lines.
    head: Vec<&'a str>,
}

/// A test the report names as failed or errored.
struct Named<'a> {
    kind: Kind,
    id: &'a str,
    /// What follows ` - ` on a short summary line.
    said: Option<&'a str>,
}

/// Everything read from one pass over the lines.
#[derive(Default)]
struct Read<'a> {
    passed: u64,
    failed: u64,
    skipped: u64,
    summary: Vec<Named<'a>>,
    verbose: Vec<Named<'a>>,
    sections: HashMap<(Kind, String), VecDeque<Section<'a>>>,
    /// Each section's kind, title and key, in the report's order.
    titles: Vec<(Kind, &'a str, String)>,
    not_found: Vec<(&'a str, &'a str)>,
}

/// pytest's report. `passed` counts xpassed tests too and `skipped`
/// xfailed ones; errors (at setup, teardown or collection) are failures
/// named by their node id or file; `ERROR: not found: ID` and `ERROR: file
/// or directory not found: PATH` (a selection naming nothing) are failures
/// named by what pytest quoted.
pub(super) fn parse(out: &Output) -> Report {
    let read = read(out);
    let mut failed = resolve(&read);
    pad(&mut failed, read.failed, |n| {
        format!("(unnamed failure {n})")
    });
    for (id, line) in &read.not_found {
        failed.push(Failure {
            message: message([*line]),
            ..Failure::named(*id)
        });
    }
    Report {
        runner: "pytest",
        passed: read.passed,
        failed,
        skipped: read.skipped,
    }
}

/// One pass: counts, names and sections.
fn read<'a>(out: &'a Output) -> Read<'a> {
    let mut read = Read::default();
    let mut part = Part::Other;
    let mut section: Option<(Kind, &str, Vec<&str>)> = None;
    // A summary line counts only when it ends its run: nothing but a new
    // session's header may follow it. One followed by another part of the
    // report is a quote (the captured output of a pytest the test ran).
    let mut pending: Vec<Vec<(u64, &str)>> = Vec::new();
    for line in out.lines() {
        if let Some(title) = ruled(line, '=') {
            close(&mut read, section.take());
            if title == "test session starts" {
                pending.drain(..).for_each(|c| count(&mut read, &c));
            }
            pending.clear();
            pending.extend(summary(line));
            part = part_of(title);
            continue;
        }
        if let Some(counts) = summary(line) {
            pending.push(counts);
        }
        match part {
            Part::Failures | Part::Errors => {
                let kind = if part == Part::Failures {
                    Kind::Failed
                } else {
                    Kind::Error
                };
                if let Some(title) = ruled(line, '_') {
                    close(&mut read, section.take());
                    section = Some((kind, title, Vec::new()));
                } else if let Some((_, _, body)) = section.as_mut() {
                    body.push(line);
                }
            }
            Part::ShortSummary => match short_summary(line) {
                Some(named) => read.summary.push(named),
                None => other_line(&mut read, line),
            },
            Part::Other => other_line(&mut read, line),
        }
    }
    close(&mut read, section);
    pending.iter().for_each(|c| count(&mut read, c));
    read
}

/// A line outside the sections: a `-v` result, a selection pytest could
/// not find.
fn other_line<'a>(read: &mut Read<'a>, line: &'a str) {
    if let Some(named) = verbose_result(line) {
        read.verbose.push(named);
    } else if let Some(id) = line
        .strip_prefix("ERROR: not found: ")
        .or_else(|| line.strip_prefix("ERROR: file or directory not found: "))
    {
        read.not_found.push((id.trim(), line));
    }
}

/// Adds a summary line's counts.
fn count(read: &mut Read, counts: &[(u64, &str)]) {
    use super::count_of;
    read.passed += count_of(counts, &["passed", "xpassed"]);
    read.failed += count_of(counts, &["failed", "error", "errors"]);
    read.skipped += count_of(counts, &["skipped", "xfailed"]);
}

/// The title of a `=== title ===` (or `___ title ___`) line.
fn ruled(line: &str, rule: char) -> Option<&str> {
    let rules = line.len() - line.trim_matches(rule).len();
    if rules < 6 || !line.starts_with(rule) || !line.ends_with(rule) {
        return None;
    }
    Some(line.trim_matches(rule).trim())
}

/// The part a `=== title ===` line opens.
fn part_of(title: &str) -> Part {
    match title {
        "FAILURES" => Part::Failures,
        "ERRORS" => Part::Errors,
        "short test summary info" => Part::ShortSummary,
        _ => Part::Other,
    }
}

/// Files a finished section under the key its test's node id maps to.
fn close<'a>(read: &mut Read<'a>, section: Option<(Kind, &'a str, Vec<&'a str>)>) {
    let Some((kind, title, body)) = section else {
        return;
    };
    let key = [
        "ERROR at setup of ",
        "ERROR at teardown of ",
        "ERROR collecting ",
    ]
    .iter()
    .find_map(|p| title.strip_prefix(p))
    .unwrap_or(title);
    read.titles.push((kind, title, key.to_string()));
    read.sections
        .entry((kind, key.to_string()))
        .or_default()
        .push_back(section_of(&body));
}

/// A section's location and message lines, up to its captured output.
fn section_of<'a>(body: &[&'a str]) -> Section<'a> {
    let own = body
        .iter()
        .position(|l| ruled(l, '-').is_some())
        .map_or(body, |end| &body[..end]);
    let at = own.iter().rev().find_map(|l| {
        let (path, line) = match l.split_once(": ") {
            Some((head, _)) => location(head)?,
            None => location(l.strip_suffix(':')?)?,
        };
        Some((path, line)).filter(|(p, _)| p.ends_with(".py"))
    });
    let at = at.or_else(|| {
        own.iter()
            .rev()
            .find_map(|l| python_frame(l))
            .map(|(p, n, _)| (p, n))
    });
    let says: Vec<&str> = own
        .iter()
        .filter_map(|l| {
            l.strip_prefix('E')
                .filter(|r| r.is_empty() || r.starts_with(' '))
        })
        .collect();
    Section {
        at,
        says: dedent(&says),
        head: own.iter().take(super::MESSAGE_LINES).copied().collect(),
    }
}

/// `FAILED tests/a.py::test_x - msg` or `ERROR tests/a.py` in the short
/// test summary.
fn short_summary(line: &str) -> Option<Named<'_>> {
    let (kind, rest) = match line.split_once(' ')? {
        ("FAILED", rest) => (Kind::Failed, rest),
        ("ERROR", rest) => (Kind::Error, rest),
        _ => return None,
    };
    let (id, said) = split_id(rest);
    Some(Named { kind, id, said })
}

/// A node id and what follows its ` - `. A parametrized id may hold ` - `
/// inside its brackets, so then the id runs to the `]` before one.
fn split_id(text: &str) -> (&str, Option<&str>) {
    let from = match text.find('[') {
        Some(open) if text[..open].find(" - ").is_none() => text[open..]
            .find("] - ")
            .map_or(text.len(), |c| open + c + 1),
        _ => 0,
    };
    match text[from..].find(" - ") {
        Some(at) => (&text[..from + at], Some(&text[from + at + 3..])),
        None => (text.trim_end(), None),
    }
}

/// `tests/a.py::test_x FAILED   [ 25%]`, a `-v` result line.
fn verbose_result(line: &str) -> Option<Named<'_>> {
    let (id, rest) = line.split_once(' ')?;
    if !id.contains("::") {
        return None;
    }
    let kind = match rest.trim_start().split(' ').next()? {
        "FAILED" => Kind::Failed,
        "ERROR" => Kind::Error,
        _ => return None,
    };
    Some(Named {
        kind,
        id,
        said: None,
    })
}

/// The key of a node id's section: its part after the file, `::` as `.`
/// (`tests/a.py::TestC::test_x` is `TestC.test_x`); a file is its own key.
fn key_of(id: &str) -> String {
    match id.split_once("::") {
        Some((_, rest)) => rest.replace("::", "."),
        None => id.to_string(),
    }
}

/// Failures from the short summary (or, without one, `-v` results, or the
/// sections' titles), each with its section's location and message.
fn resolve(read: &Read) -> Vec<Failure> {
    let mut sections: HashMap<(Kind, String), VecDeque<&Section>> = read
        .sections
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().collect()))
        .collect();
    let named = if !read.summary.is_empty() {
        &read.summary
    } else {
        &read.verbose
    };
    if named.is_empty() {
        return read
            .titles
            .iter()
            .map(|(kind, title, key)| {
                let section = sections
                    .get_mut(&(*kind, key.clone()))
                    .and_then(VecDeque::pop_front);
                failure(title, None, section, None)
            })
            .collect();
    }
    named
        .iter()
        .map(|n| {
            let section = sections
                .get_mut(&(n.kind, key_of(n.id)))
                .and_then(VecDeque::pop_front);
            let file = n.id.split("::").next();
            failure(n.id, file, section, n.said)
        })
        .collect()
}

/// A failure from its name, its section (location and `E` lines) and the
/// summary's message, the section's first lines when nothing else says.
fn failure(
    name: &str,
    file: Option<&str>,
    section: Option<&Section>,
    said: Option<&str>,
) -> Failure {
    let at = section.and_then(|s| s.at);
    let text = match (section, said) {
        (Some(s), _) if !s.says.is_empty() => message(s.says.iter().copied()),
        (_, Some(said)) => message([said]),
        (Some(s), None) => message(s.head.iter().copied()),
        (None, None) => String::new(),
    };
    Failure {
        name: name.to_string(),
        file: at.map(|(p, _)| p).or(file).map(str::to_string),
        line: at.map(|(_, n)| n),
        message: text,
    }
}
