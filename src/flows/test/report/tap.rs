//! TAP, the Test Anything Protocol: `prove`'s report (a line per file,
//! the `Test Summary Report`, `Files=2, Tests=6, ...` and `Result: FAIL`),
//! or a bare TAP stream (`1..4`, `ok 1 - adds`, `not ok 2 - adds wrong`).
//! Perl's Test::More writes why a test failed to stderr
//! (`#   Failed test 'adds wrong'` / `#   at t/math.t line 7.`); those
//! diagnostics give the names prove's report leaves out, and the messages.

use super::{message, Failure, Output, Report, Signature};
use std::collections::{HashMap, VecDeque};

/// Strong for prove's summary; weak for a bare TAP stream, which any
/// runner's failing test can print.
pub(super) fn detect(out: &Output) -> Signature {
    if prove(out) {
        return Signature::Strong;
    }
    let plan = out.any_line(|l| plan(l).is_some());
    if plan && out.any_line(|l| point(l).is_some()) {
        Signature::Weak
    } else {
        Signature::Absent
    }
}

/// Whether prove's two closing lines are there.
fn prove(out: &Output) -> bool {
    out.any_line(|l| files_line(l).is_some())
        && out.any_line(|l| matches!(l, "Result: PASS" | "Result: FAIL" | "Result: NOTESTS"))
}

/// Tests= of `Files=2, Tests=6,  0 wallclock secs (...)`.
fn files_line(line: &str) -> Option<u64> {
    let (files, rest) = line.strip_prefix("Files=")?.split_once(", Tests=")?;
    files.parse::<u64>().ok()?;
    rest.split(',').next()?.parse().ok()
}

/// N of a plan line, `1..N` (`1..0 # SKIP reason` too).
fn plan(line: &str) -> Option<u64> {
    let n = line.strip_prefix("1..")?;
    let n = n.split(" #").next()?.trim_end();
    n.parse().ok()
}

/// A test point's directive.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Directive {
    None,
    Skip,
    Todo,
}

/// A test point: `ok 1 - adds`, `not ok 2 - adds wrong # TODO later`.
pub(super) struct Point<'a> {
    pub ok: bool,
    pub number: Option<u64>,
    /// The description, still escaped (`\#`).
    pub text: &'a str,
    pub directive: Directive,
}

impl Point<'_> {
    /// The description with TAP's escapes undone, else `test N`.
    pub fn name(&self) -> String {
        if self.text.is_empty() {
            return format!("test {}", self.number.unwrap_or(0));
        }
        self.text.replace("\\#", "#").replace("\\\\", "\\")
    }

    /// Whether the point is a failure that counts (not a todo).
    pub fn failed(&self) -> bool {
        !self.ok && self.directive == Directive::None
    }
}

/// A test point at the start of `line`, or None.
pub(super) fn point(line: &str) -> Option<Point<'_>> {
    let (ok, rest) = match line.strip_prefix("not ok") {
        Some(rest) => (false, rest),
        None => (true, line.strip_prefix("ok")?),
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let number = rest[..digits].parse().ok();
    let rest = rest[digits..].trim_start();
    let rest = rest
        .strip_prefix("- ")
        .or_else(|| rest.strip_prefix('-').filter(|r| r.is_empty()))
        .unwrap_or(rest);
    let (text, directive) = split_directive(rest);
    Some(Point {
        ok,
        number,
        text,
        directive,
    })
}

/// A description and its directive: the first ` # ` not escaped as `\#`.
fn split_directive(rest: &str) -> (&str, Directive) {
    let mut from = 0;
    while let Some(at) = rest[from..].find('#').map(|i| i + from) {
        if at > 0 && rest.as_bytes()[at - 1] == b'\\' {
            from = at + 1;
            continue;
        }
        let directive = rest[at + 1..].trim_start();
        let kind = match directive.get(..4).map(str::to_ascii_uppercase).as_deref() {
            Some("SKIP") => Directive::Skip,
            Some("TODO") => Directive::Todo,
            _ => Directive::None,
        };
        return (rest[..at].trim_end(), kind);
    }
    (rest.trim_end(), Directive::None)
}

/// A Test::More diagnostic: `#   Failed test 'name'`, `#   at FILE line N.`
/// and what it said below.
struct Diagnostic<'a> {
    name: Option<&'a str>,
    at: Option<(&'a str, u64)>,
    said: Vec<&'a str>,
}

/// The diagnostics, each taken once, found by the test's name or by the
/// file it points at (queues of indexes, so finding stays linear).
struct Diagnostics<'a> {
    all: Vec<Option<Diagnostic<'a>>>,
    by_name: HashMap<&'a str, VecDeque<usize>>,
    by_file: HashMap<&'a str, VecDeque<usize>>,
}

impl<'a> Diagnostics<'a> {
    /// Every diagnostic of the output, indexed.
    fn new(out: &'a Output) -> Diagnostics<'a> {
        let all = diagnostics(out);
        let (mut by_name, mut by_file) = (HashMap::new(), HashMap::new());
        for (i, d) in all.iter().enumerate() {
            if let Some(name) = d.name {
                by_name
                    .entry(name)
                    .or_insert_with(VecDeque::new)
                    .push_back(i);
            }
            if let Some((file, _)) = d.at {
                by_file
                    .entry(file)
                    .or_insert_with(VecDeque::new)
                    .push_back(i);
            }
        }
        Diagnostics {
            all: all.into_iter().map(Some).collect(),
            by_name,
            by_file,
        }
    }

    /// The first diagnostic not yet taken of the test named `name`.
    fn named(&mut self, name: &str) -> Option<Diagnostic<'a>> {
        Self::first(&mut self.all, self.by_name.get_mut(name)?)
    }

    /// The first diagnostic not yet taken pointing into `file`.
    fn in_file(&mut self, file: &str) -> Option<Diagnostic<'a>> {
        Self::first(&mut self.all, self.by_file.get_mut(file)?)
    }

    /// Pops `queue` to the first diagnostic not taken, and takes it.
    fn first(
        all: &mut [Option<Diagnostic<'a>>],
        queue: &mut VecDeque<usize>,
    ) -> Option<Diagnostic<'a>> {
        while let Some(i) = queue.pop_front() {
            if let Some(d) = all[i].take() {
                return Some(d);
            }
        }
        None
    }
}

/// Every `Failed test` diagnostic, in order.
fn diagnostics<'a>(out: &'a Output) -> Vec<Diagnostic<'a>> {
    let mut found: Vec<Diagnostic> = Vec::new();
    let mut open = false;
    for line in out.lines() {
        let Some(text) = line.strip_prefix('#').map(str::trim) else {
            open = false;
            continue;
        };
        if let Some(rest) = text.strip_prefix("Failed test") {
            let rest = rest.trim();
            let (name, at) = match rest.strip_prefix('\'').and_then(|r| r.rsplit_once('\'')) {
                Some((name, at)) => (Some(name), at_line(at.trim())),
                None => (None, at_line(rest)),
            };
            found.push(Diagnostic {
                name,
                at,
                said: Vec::new(),
            });
            open = true;
        } else if text.starts_with("Looks like you failed")
            || text.starts_with("Looks like your test")
        {
            open = false;
        } else if let (true, Some(d)) = (open, found.last_mut()) {
            match at_line(text) {
                Some(at) if d.at.is_none() => d.at = Some(at),
                _ => d.said.push(text),
            }
        }
    }
    found
}

/// FILE and N of `at FILE line N.`.
fn at_line(text: &str) -> Option<(&str, u64)> {
    let (file, n) = text.strip_prefix("at ")?.rsplit_once(" line ")?;
    Some((file, n.trim_end_matches('.').parse().ok()?))
}

/// TAP's report: prove's when its summary is there, else the bare stream's.
pub(super) fn parse(out: &Output) -> Report {
    if prove(out) {
        prove_report(out)
    } else {
        stream_report(out)
    }
}

/// A bare stream: each test point counts (todos as skipped), a failure's
/// message is its YAML block or comments, else its diagnostic; a `Bail
/// out!` and a plan with more tests than ran are failures too.
fn stream_report(out: &Output) -> Report {
    let lines: Vec<&str> = out.lines().collect();
    let mut diagnostics = Diagnostics::new(out);
    let (mut passed, mut skipped, mut ran, mut planned) = (0, 0, 0, 0);
    let mut failed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(n) = plan(line) {
            planned += n;
        } else if let Some(reason) = line.strip_prefix("Bail out!") {
            failed.push(Failure {
                message: message([reason.trim()]),
                ..Failure::named("Bail out!")
            });
        } else if let Some(p) = point(line) {
            ran += 1;
            match (p.ok, p.directive) {
                (_, Directive::Skip) | (false, Directive::Todo) => skipped += 1,
                (true, _) => passed += 1,
                (false, Directive::None) => {
                    failed.push(stream_failure(&p, &lines[i + 1..], &mut diagnostics))
                }
            }
        }
    }
    if planned > ran {
        failed.push(Failure {
            message: format!("planned {planned} tests but ran {ran}"),
            ..Failure::named("(missing tests)")
        });
    }
    Report {
        runner: "tap",
        passed,
        failed,
        skipped,
    }
}

/// A failing point's failure: its YAML block or `#` lines below it, else
/// the diagnostic of that name.
fn stream_failure(p: &Point, below: &[&str], diagnostics: &mut Diagnostics) -> Failure {
    let name = p.name();
    let diagnostic = diagnostics.named(&name);
    let attached: Vec<&str> = below
        .iter()
        .take_while(|l| l.starts_with('#') || l.starts_with("  "))
        .map(|l| l.trim_start_matches('#').trim())
        .filter(|l| !matches!(*l, "---" | "..."))
        .collect();
    let said = match &diagnostic {
        Some(d) if attached.is_empty() => message(d.said.iter().copied()),
        _ => message(attached),
    };
    Failure {
        name,
        file: diagnostic
            .as_ref()
            .and_then(|d| d.at)
            .map(|(f, _)| f.to_string()),
        line: diagnostic.as_ref().and_then(|d| d.at).map(|(_, n)| n),
        message: said,
    }
}

/// One file's part of prove's output.
#[derive(Default)]
struct File<'a> {
    /// Descriptions of its test points, by number (with `-v`).
    described: HashMap<u64, &'a str>,
    /// Skipped points seen (`-v`), and `(less N skipped subtests` said.
    skip_points: u64,
    less_skipped: u64,
    /// From the Test Summary Report: failed numbers, and what else went wrong.
    failed: Vec<u64>,
    trouble: Vec<&'a str>,
}

/// prove's report. `passed` is `Tests=` less failures and skips;
/// `skipped` is what prove shows of skips: the points with `-v`, else
/// only those of files that failed (a passing file's skips are not
/// printed without `-v`). A file that failed with no failed test (a bad
/// plan, a death) is a failure named by the file.
fn prove_report(out: &Output) -> Report {
    let (order, files, total) = prove_files(out);
    let mut diagnostics = Diagnostics::new(out);
    let mut failed = Vec::new();
    let mut skipped = 0;
    for name in &order {
        let file = &files[name];
        skipped += if file.skip_points > 0 {
            file.skip_points
        } else {
            file.less_skipped
        };
        failed.extend(file_failures(name, file, &mut diagnostics));
    }
    let numbered: u64 = files.values().map(|f| f.failed.len() as u64).sum();
    Report {
        runner: "tap",
        passed: total.saturating_sub(numbered + skipped),
        failed,
        skipped,
    }
}

/// The files in the order prove names them, what each said, and `Tests=`.
fn prove_files<'a>(out: &'a Output) -> (Vec<&'a str>, HashMap<&'a str, File<'a>>, u64) {
    let mut order = Vec::new();
    let mut files: HashMap<&str, File> = HashMap::new();
    let (mut current, mut total) = (None, 0);
    for line in out.lines() {
        if let Some(n) = files_line(line) {
            total += n;
        } else if let Some(name) = file_header(line).or_else(|| summary_header(line)) {
            if !files.contains_key(name) {
                order.push(name);
            }
            files.entry(name).or_default();
            current = Some(name);
        } else if let Some(file) = current.and_then(|c| files.get_mut(c)) {
            file_line(file, line);
        }
    }
    (order, files, total)
}

/// A line inside a file's part: a `-v` test point, a skip count, or the
/// Test Summary Report's lines about it.
fn file_line<'a>(file: &mut File<'a>, line: &'a str) {
    if let Some(p) = point(line) {
        if let Some(n) = p.number {
            file.described.insert(n, p.text);
        }
        file.skip_points += u64::from(p.directive == Directive::Skip);
    } else if let Some(rest) = line.trim_start().strip_prefix("(less ") {
        file.less_skipped += rest
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
    } else if let Some(list) = line
        .trim_start()
        .strip_prefix("Failed tests:")
        .or_else(|| line.trim_start().strip_prefix("Failed test:"))
    {
        file.failed.extend(numbers(list));
    } else if line.starts_with("  Parse errors: ") || line.starts_with("  Non-zero exit status: ") {
        file.trouble.push(line.trim());
    }
}

/// The file of `t/math.t ..... ok` (prove's line per file).
fn file_header(line: &str) -> Option<&str> {
    let (name, rest) = line.split_once(' ')?;
    (rest.starts_with("..") && !name.is_empty()).then_some(name)
}

/// The file of `t/math.t   (Wstat: 256 (exited 1) Tests: 4 Failed: 1)`.
fn summary_header(line: &str) -> Option<&str> {
    let (name, rest) = line.split_once(' ')?;
    let rest = rest.trim_start();
    (rest.starts_with("(Wstat: ") && rest.ends_with(')')).then_some(name)
}

/// `2, 4-6` as 2, 4, 5, 6.
fn numbers(list: &str) -> Vec<u64> {
    let mut all = Vec::new();
    for part in list.split(',').map(str::trim) {
        let (from, to) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(from), Ok(to)) = (from.parse::<u64>(), to.parse::<u64>()) {
            all.extend(from..=to.min(from + 100_000));
        }
    }
    all
}

/// A file's failures: each failed number, named by its `-v` description
/// or its diagnostic (in the file's order), else `FILE #N`; or the file
/// itself when it failed with no failed test.
fn file_failures(name: &str, file: &File, diagnostics: &mut Diagnostics) -> Vec<Failure> {
    if file.failed.is_empty() && file.trouble.is_empty() {
        return Vec::new();
    }
    if file.failed.is_empty() {
        return vec![Failure {
            message: message(file.trouble.iter().copied()),
            ..Failure::named(name)
        }];
    }
    file.failed
        .iter()
        .map(|n| {
            let described = file.described.get(n).map(|t| t.replace("\\#", "#"));
            let d = match &described {
                Some(text) => diagnostics.named(text),
                None => diagnostics.in_file(name),
            };
            let at = d.as_ref().and_then(|d| d.at);
            let fallback = || format!("{name} #{n}");
            Failure {
                name: described
                    .or_else(|| d.as_ref()?.name.map(str::to_string))
                    .unwrap_or_else(fallback),
                file: Some(at.map_or(name, |(f, _)| f).to_string()),
                line: at.map(|(_, l)| l),
                message: d
                    .map(|d| message(d.said.iter().copied()))
                    .unwrap_or_default(),
            }
        })
        .collect()
}
