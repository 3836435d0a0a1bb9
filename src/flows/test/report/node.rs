//! node's test runner (`node --test`), in its two forms: TAP, which Node
//! 20 writes when stdout is not a terminal (`not ok 2 - adds wrong` with a
//! YAML block, closed by `# tests 5`, `# pass 2`, `# fail 2`,
//! `# cancelled 0`, ...), and the spec reporter, the default of Node 22+
//! (`✖ adds wrong (5.2ms)`, `ℹ tests 5`, ..., and a `✖ failing tests:`
//! part repeating each failure with its `test at FILE:LINE:COL`).

use super::tap::point;
use super::{dedent, indent, location, message, pad, Failure, Output, Report, Signature};

/// The counters of the closing lines.
const COUNTERS: &[&str] = &[
    "tests",
    "suites",
    "pass",
    "fail",
    "cancelled",
    "skipped",
    "todo",
];

/// Strong when the closing counters are there, in either form; TAP's
/// needs `# cancelled` too, since tape closes with `# tests`/`# pass`/`# fail`.
pub(super) fn detect(out: &Output) -> Signature {
    // One pass, the counters seen as bits: tests, pass, fail, cancelled.
    let (mut tap, mut spec) = (0u8, 0u8);
    for (mark, key, _) in out.lines().filter_map(counter) {
        let bit = match key {
            "tests" => 1,
            "pass" => 2,
            "fail" => 4,
            "cancelled" => 8,
            _ => 0,
        };
        if mark == '#' {
            tap |= bit;
        } else {
            spec |= bit;
        }
    }
    if tap == 15 || spec & 7 == 7 {
        Signature::Strong
    } else {
        Signature::Absent
    }
}

/// `# pass 2` or `ℹ pass 2`: the mark, the counter and its value.
fn counter(line: &str) -> Option<(char, &str, u64)> {
    let mark = line.chars().next().filter(|c| matches!(c, '#' | 'ℹ'))?;
    let (key, n) = line[mark.len_utf8()..].strip_prefix(' ')?.split_once(' ')?;
    let key = COUNTERS.iter().find(|k| **k == key)?;
    Some((mark, key, n.parse().ok()?))
}

/// node's report, summed over closing counters. `failed` counts failed
/// and cancelled tests (a timeout cancels); suites are not tests, and a
/// suite that failed because a test in it did is not listed; `skipped` is
/// node's skipped (todos are counted by node as passed or failed).
pub(super) fn parse(out: &Output) -> Report {
    let (mut passed, mut bad, mut skipped, mut spec) = (0, 0, 0, false);
    for (mark, key, n) in out.lines().filter_map(counter) {
        spec |= mark == 'ℹ';
        match key {
            "pass" => passed += n,
            "fail" | "cancelled" => bad += n,
            "skipped" => skipped += n,
            _ => {}
        }
    }
    let lines: Vec<&str> = out.lines().collect();
    let mut failed = if spec {
        spec_failures(&lines)
    } else {
        tap_failures(&lines)
    };
    pad(&mut failed, bad, |n| format!("(unnamed failure {n})"));
    Report {
        runner: "node",
        passed,
        failed,
        skipped,
    }
}

/// The failing leaf tests of the TAP form, with their YAML blocks.
fn tap_failures(lines: &[&str]) -> Vec<Failure> {
    let mut failed = Vec::new();
    // `# ` lines at the top level before a test: what a test file that
    // could not run wrote to stderr.
    let mut comments: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let depth = indent(line);
        let Some(p) = point(&line[depth..]) else {
            match line.strip_prefix("# ") {
                Some(c) if !c.starts_with("Subtest: ") && counter(line).is_none() => {
                    comments.push(c)
                }
                _ if depth == 0 && !line.starts_with('#') => comments.clear(),
                _ => {}
            }
            continue;
        };
        let yaml = Yaml::below(&lines[i + 1..], depth);
        if p.failed()
            && yaml.get("type") != Some("suite")
            && yaml.get("failureType") != Some("subtestsFailed")
        {
            failed.push(tap_failure(p.name(), &yaml, &comments));
        }
        comments.clear();
    }
    failed
}

/// A failure from its YAML: `error` (and, for a file that could not run,
/// what it wrote), the line of `stack` in the file of `location`, else
/// `location`'s.
fn tap_failure(name: String, yaml: &Yaml, comments: &[&str]) -> Failure {
    let declared = yaml.get("location").and_then(location);
    let failing =
        declared.and_then(|(file, _)| yaml.block("stack").iter().find_map(|f| in_file(f, file)));
    let mut said: Vec<&str> = yaml.block("error");
    if said.is_empty() {
        said.extend(yaml.get("error"));
    }
    if yaml.get("exitCode").is_some() {
        said.extend(thrown(comments));
    }
    Failure {
        name,
        file: declared.map(|(f, _)| f.to_string()),
        line: failing.or(declared.map(|(_, n)| n)),
        message: message(said),
    }
}

/// What a file that could not run wrote, from its error's line (node's
/// own lines about where it was thrown come first) to the stack.
fn thrown<'a>(comments: &[&'a str]) -> Vec<&'a str> {
    let from = comments
        .iter()
        .position(|c| c.contains("Error"))
        .unwrap_or(0);
    comments[from..]
        .iter()
        .take_while(|c| !c.trim_start().starts_with("at "))
        .copied()
        .collect()
}

/// The line of a stack frame in `file`: `TestContext.<anonymous> (/x/a.test.js:10:10)`
/// or `at /x/a.test.js:10:10`.
fn in_file(frame: &str, file: &str) -> Option<u64> {
    let (path, n) = frame_location(frame)?;
    (path == file || path.ends_with(&format!("/{file}")) || file.ends_with(&format!("/{path}")))
        .then_some(n)
}

/// The location of a stack frame line, in parentheses or after `at `.
fn frame_location(frame: &str) -> Option<(&str, u64)> {
    let frame = frame.trim();
    let inner = match frame.rfind('(') {
        Some(open) => frame[open + 1..].strip_suffix(')')?,
        None => frame.strip_prefix("at ").unwrap_or(frame),
    };
    location(inner)
}

/// The YAML block under a TAP test point: `---` to `...`, two deeper.
struct Yaml<'a> {
    lines: &'a [&'a str],
    margin: usize,
}

impl<'a> Yaml<'a> {
    /// The block opening on the first of `lines`, under a point indented
    /// `depth`; empty when there is none.
    fn below(lines: &'a [&'a str], depth: usize) -> Yaml<'a> {
        let margin = depth + 2;
        let opens = lines
            .first()
            .is_some_and(|l| indent(l) == margin && l.trim() == "---");
        if !opens {
            return Yaml { lines: &[], margin };
        }
        let end = lines
            .iter()
            .position(|l| indent(l) == margin && l.trim() == "...")
            .unwrap_or(lines.len());
        Yaml {
            lines: &lines[1..end],
            margin,
        }
    }

    /// The value of `key: value` at the block's margin, unquoted.
    fn get(&self, key: &str) -> Option<&'a str> {
        self.lines.iter().find_map(|l| {
            let (k, v) = l.get(self.margin..)?.split_once(':')?;
            (k == key).then(|| v.trim().trim_matches('\''))
        })
    }

    /// The lines of `key: |-`, a block scalar, without their margin.
    fn block(&self, key: &str) -> Vec<&'a str> {
        let Some(at) = self.lines.iter().position(|l| {
            l.get(self.margin..)
                .and_then(|l| l.strip_prefix(key))
                .is_some_and(|r| r.starts_with(": |") || r.starts_with(": >"))
        }) else {
            return Vec::new();
        };
        let body: Vec<&str> = self.lines[at + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || indent(l) > self.margin)
            .copied()
            .collect();
        dedent(&body)
    }
}

/// The spec form's failures: from its `✖ failing tests:` part when there
/// is one (it repeats them), else from the run's own `✖` lines.
fn spec_failures(lines: &[&str]) -> Vec<Failure> {
    let from = lines
        .iter()
        .position(|l| l.trim_end() == "✖ failing tests:");
    let part = from.map_or(lines, |at| &lines[at + 1..]);
    let mut failed = Vec::new();
    let mut declared = None;
    let mut i = 0;
    while i < part.len() {
        let line = part[i];
        if let Some(at) = line.strip_prefix("test at ") {
            declared = location(at.trim());
        }
        let Some(name) = spec_failed(line) else {
            i += 1;
            continue;
        };
        let depth = indent(line);
        let body_len = part[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || (indent(l) > depth && spec_mark(l).is_none()))
            .count();
        let body = &part[i + 1..i + 1 + body_len];
        if body.iter().any(|l| !l.trim().is_empty()) {
            failed.push(spec_failure(name, body, declared.take()));
        }
        i += 1 + body_len;
    }
    failed
}

/// The marks the spec reporter starts a test's line with.
fn spec_mark(line: &str) -> Option<char> {
    line.trim_start()
        .chars()
        .next()
        .filter(|c| matches!(c, '✔' | '✖' | '﹣' | '▶' | 'ℹ'))
}

/// NAME of `✖ NAME (5.204904ms)`.
fn spec_failed(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("✖ ")?;
    let (name, took) = rest.rsplit_once(" (")?;
    took.starts_with(|c: char| c.is_ascii_digit())
        .then_some(name)
}

/// A failure from its indented lines: the message up to the first stack
/// frame; the line of the first frame in the declaring file.
fn spec_failure(name: &str, body: &[&str], declared: Option<(&str, u64)>) -> Failure {
    let frame = |l: &str| l.trim_start().starts_with("at ") && frame_location(l).is_some();
    let said_len = body.iter().position(|l| frame(l)).unwrap_or(body.len());
    let failing = declared.and_then(|(file, _)| {
        body.iter()
            .filter(|l| frame(l))
            .find_map(|f| in_file(f, file))
    });
    Failure {
        name: name.to_string(),
        file: declared.map(|(f, _)| f.to_string()),
        line: failing.or(declared.map(|(_, n)| n)),
        message: message(dedent(&body[..said_len])),
    }
}
