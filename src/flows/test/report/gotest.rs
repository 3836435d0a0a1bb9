//! go test: `--- FAIL: TestAdd (0.00s)` result lines (subtests indented,
//! `TestAdd/case`), the `    add_test.go:12: got 3, want 4` lines a test
//! logged, and a line per package, `ok  \tpkg\t0.002s` or
//! `FAIL\tpkg\t0.004s` (`FAIL\tpkg [build failed]`).
//!
//! With `-v` a test's log lines come before its result, after its
//! `=== RUN` line; without, they come after its `--- FAIL` line, indented
//! under it. Both are read.

use super::{location, message, Failure, Output, Report, Signature};
use std::collections::{HashMap, HashSet};

/// Strong when a line is a package's verdict or a top-level `--- FAIL:`.
pub(super) fn detect(out: &Output) -> Signature {
    let found = out.any_line(|l| {
        package(l).is_some()
            || result(l).is_some_and(|r| r.indent == 0 && r.verdict == Verdict::Fail)
    });
    if found {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// A package's line: whether it passed, its import path, and what follows
/// (`0.002s`, `(cached)`, `[build failed]`, `[no test files]`).
fn package(line: &str) -> Option<(bool, &str, &str)> {
    let (head, rest) = line.split_once('\t')?;
    let ok = match head {
        "ok  " => true,
        "FAIL" | "?   " => false,
        _ => return None,
    };
    let (pkg, tail) = match rest.split_once(['\t', ' ']) {
        Some((pkg, tail)) => (pkg, tail.trim()),
        None => (rest, ""),
    };
    let tail_ok = tail.starts_with('[')
        || tail.starts_with("(cached)")
        || tail
            .split(['\t', ' '])
            .next()
            .and_then(|t| t.strip_suffix('s'))
            .is_some_and(|t| t.parse::<f64>().is_ok());
    (!pkg.is_empty() && tail_ok).then_some((ok && head == "ok  ", pkg, tail))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    Skip,
}

/// A result line, `    --- FAIL: TestTable/off (0.00s)` (four spaces a
/// level of subtests).
struct Result<'a> {
    indent: usize,
    verdict: Verdict,
    name: &'a str,
}

/// The result line `line` is, if it is one.
fn result(line: &str) -> Option<Result<'_>> {
    let t = line.trim_start_matches(' ');
    let (verdict, rest) = t.strip_prefix("--- ")?.split_once(": ")?;
    let verdict = match verdict {
        "PASS" => Verdict::Pass,
        "FAIL" => Verdict::Fail,
        "SKIP" => Verdict::Skip,
        _ => return None,
    };
    let (name, took) = rest.rsplit_once(" (")?;
    took.strip_suffix("s)")?.parse::<f64>().ok()?;
    Some(Result {
        indent: line.len() - t.len(),
        verdict,
        name,
    })
}

/// A test of one package block (the lines up to its package line); the
/// block tells apart two packages' tests of the same name.
type Key<'a> = (usize, &'a str);

/// A panic's line, and the file and line of the test's frame in its dump.
type Panic<'a> = (&'a str, Option<(&'a str, u64)>);

/// What a walk over the lines gathers.
#[derive(Default)]
struct Walk<'a> {
    block: usize,
    results: Vec<(Key<'a>, Verdict)>,
    logs: HashMap<Key<'a>, Vec<&'a str>>,
    panics: HashMap<Key<'a>, Panic<'a>>,
    /// Blocks whose package line said FAIL: the block, package and tail.
    failed_packages: Vec<(usize, &'a str, &'a str)>,
    /// A panic with no test to pin it on, by block.
    loose_panics: HashMap<usize, &'a str>,
    /// Compiler output under `# pkg`, by package.
    build: HashMap<&'a str, Vec<&'a str>>,
}

/// Where the walk is.
#[derive(Default)]
struct State<'a> {
    /// The test `=== RUN`/`CONT`/`NAME` named (`-v`).
    running: Option<&'a str>,
    /// The last result line and its indent: more indented lines are its log.
    under: Option<(&'a str, usize)>,
    /// After `panic:`: the test it is pinned on, and whether the last line
    /// was that test's frame (the next holds its file and line).
    panic: Option<(Option<&'a str>, bool)>,
    /// After `# pkg`: the package whose build output follows.
    building: Option<&'a str>,
}

/// go test's report, summed over packages. Without `-v` go prints only
/// failures, so `passed` (the `--- PASS` lines of tests with no subtests)
/// is 0 then, and `skipped` too; with `-v` both are counted. A test that
/// failed because a subtest did is not listed beside it, only the
/// subtest. A package that failed with no failed test named (a build
/// failure, a panic in `TestMain`, a timeout) is a failure named by its
/// import path. File names are as go prints them, the base name only.
pub(super) fn parse(out: &Output) -> Report {
    let mut walk = Walk::default();
    let mut state = State::default();
    for line in out.lines() {
        step(&mut walk, &mut state, line);
    }
    summarize(&walk)
}

/// One line: a test starting, a result, a package's verdict, a build's
/// header, a panic and its dump, or a log line.
fn step<'a>(walk: &mut Walk<'a>, state: &mut State<'a>, line: &'a str) {
    if let Some(rest) = line.strip_prefix("=== ") {
        let (word, name) = rest.split_once(' ').unwrap_or((rest, ""));
        state.running = matches!(word, "RUN" | "CONT" | "NAME").then(|| name.trim());
        state.under = None;
    } else if let Some(r) = result(line) {
        walk.results.push(((walk.block, r.name), r.verdict));
        state.under = Some((r.name, r.indent));
    } else if let Some((ok, pkg, tail)) = package(line) {
        if !ok && line.starts_with("FAIL") {
            walk.failed_packages.push((walk.block, pkg, tail));
        }
        walk.block += 1;
        *state = State::default();
    } else if let Some(pkg) = line.strip_prefix("# ") {
        state.building = pkg.split(' ').next();
    } else if line.starts_with("panic: ") {
        let said = line.trim_end_matches(" [recovered]");
        let test = state.under.map(|(n, _)| n).or(state.running);
        match test {
            Some(t) => {
                walk.panics.insert((walk.block, t), (said, None));
            }
            None => {
                walk.loose_panics.insert(walk.block, said);
            }
        }
        state.panic = Some((test, false));
        state.under = None;
    } else if let Some((test, frame)) = state.panic {
        panic_line(walk, state, line, test, frame);
    } else {
        log_line(walk, state, line);
    }
}

/// A line of a panic's goroutine dump: the line after the test function's
/// frame holds the file and line it panicked at.
fn panic_line<'a>(
    walk: &mut Walk<'a>,
    state: &mut State<'a>,
    line: &'a str,
    test: Option<&'a str>,
    frame: bool,
) {
    let Some(test) = test else { return };
    let top = test.split('/').next().unwrap_or(test);
    if frame {
        let at = line.trim().split(" +0x").next().and_then(location);
        if let Some(entry) = walk.panics.get_mut(&(walk.block, test)) {
            entry.1 = entry.1.or(at);
        }
    }
    // `pkg.TestX(...)`, or `pkg.TestX.func1(...)` for a subtest's closure.
    let is_frame = !line.starts_with('\t')
        && (line.contains(&format!(".{top}(")) || line.contains(&format!(".{top}.func")));
    state.panic = Some((Some(test), is_frame));
}

/// A test's log line, a line of compiler output, or an unrelated line.
fn log_line<'a>(walk: &mut Walk<'a>, state: &mut State<'a>, line: &'a str) {
    if line.trim().is_empty() {
        return;
    }
    let depth = super::indent(line);
    let owner = match state.under {
        Some((name, at)) if depth > at => Some(name),
        _ if depth > 0 => state.running,
        _ => None,
    };
    match owner {
        Some(name) => walk.logs.entry((walk.block, name)).or_default().push(line),
        None => {
            state.under = None;
            if let Some(pkg) = state.building {
                walk.build.entry(pkg).or_default().push(line);
            }
        }
    }
}

/// Counts and failures from the walk.
fn summarize(walk: &Walk) -> Report {
    let mut parents: HashSet<Key> = HashSet::new();
    for ((block, name), _) in &walk.results {
        for (at, _) in name.match_indices('/') {
            parents.insert((*block, &name[..at]));
        }
    }
    let leaves: Vec<&(Key, Verdict)> = walk
        .results
        .iter()
        .filter(|(key, _)| !parents.contains(key))
        .collect();
    let count = |v: Verdict| leaves.iter().filter(|(_, verdict)| *verdict == v).count() as u64;
    let failing = leaves
        .iter()
        .filter(|(_, verdict)| *verdict == Verdict::Fail);
    let mut failed: Vec<Failure> = failing
        .clone()
        .map(|(key, _)| failure(walk, *key))
        .collect();
    let named: HashSet<usize> = failing.map(|((block, _), _)| *block).collect();
    for (block, pkg, tail) in &walk.failed_packages {
        if !named.contains(block) {
            failed.push(package_failure(walk, *block, pkg, tail));
        }
    }
    Report {
        runner: "go",
        passed: count(Verdict::Pass),
        failed,
        skipped: count(Verdict::Skip),
    }
}

/// A failed test: its panic first (the cause), then its log; the first
/// log line's file and line, else the panic's.
fn failure(walk: &Walk, key: Key) -> Failure {
    let logs = walk.logs.get(&key).map(Vec::as_slice).unwrap_or(&[]);
    let panic = walk.panics.get(&key);
    let at = logs.iter().find_map(|l| log_entry(l).map(|(at, _)| at));
    let said = logs
        .iter()
        .map(|l| log_entry(l).map_or(l.trim(), |(_, text)| text));
    Failure {
        name: key.1.to_string(),
        file: at.or(panic.and_then(|p| p.1)).map(|(f, _)| f.to_string()),
        line: at.or(panic.and_then(|p| p.1)).map(|(_, n)| n),
        message: message(panic.map(|p| p.0).into_iter().chain(said)),
    }
}

/// `file.go:12: text` of a log line: the location and the text.
fn log_entry(line: &str) -> Option<((&str, u64), &str)> {
    let (head, text) = line.trim_start().split_once(": ")?;
    let at = location(head).filter(|(f, _)| f.ends_with(".go"))?;
    Some((at, text))
}

/// A package that failed with no failed test named: its compiler output,
/// else its panic, else what its package line said.
fn package_failure(walk: &Walk, block: usize, pkg: &str, tail: &str) -> Failure {
    let build = walk.build.get(pkg).map(Vec::as_slice).unwrap_or(&[]);
    let at = build.iter().find_map(|l| location(l.split(": ").next()?));
    let said = match (build.is_empty(), walk.loose_panics.get(&block)) {
        (false, _) => message(build.iter().copied()),
        (true, Some(panic)) => message([*panic]),
        (true, None) => message([tail]),
    };
    Failure {
        name: pkg.to_string(),
        file: at.map(|(f, _)| f.to_string()),
        line: at.map(|(_, n)| n),
        message: said,
    }
}
