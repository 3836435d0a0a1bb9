//! Who a failure belongs to: the code under test, or the command that was
//! meant to reach it. A runner that never reached any code (a test, file,
//! module, environment or program that does not exist) still exits
//! non-zero; `invalidProbe` says so, with the lines it rests on.
//!
//! Three judges, asked in this order, each only while the verdict is open:
//! 1. the rules below, over the exit code and the output (what runners
//!    print when a name resolves to nothing);
//! 2. the host's Lua function (`test.judge` in the policy), which sees the
//!    rules' verdict and may keep it (nil), clear it (false: the failure is
//!    the code's) or replace it (a probe table);
//! 3. a model the host names, asked only when neither decided, whose answer
//!    counts only with a stated confidence of at least [`MIN_CONFIDENCE`].
//!
//! Exit 0 is never judged.

use super::report::Report;
use crate::flows::probe::InvalidProbe;
use serde_json::{json, Value};

/// The closed list of reasons.
pub const REASONS: &[&str] = &[
    "unknown-command",
    "unknown-test",
    "unknown-path",
    "unknown-module",
    "unknown-environment",
];

/// The least confidence a model judge must state for its answer to count.
pub const MIN_CONFIDENCE: f64 = 0.7;

/// What one run of the suite gave the judges.
pub struct Run<'a> {
    pub exit_code: i32,
    /// The whole output, stdout and stderr as they were interleaved.
    pub output: &'a str,
    pub selection: &'a [String],
    pub report: Option<&'a Report>,
    /// The container it ran in, if any.
    pub container: Option<&'a str>,
}

/// A judge's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The failure is the command's: it never reached the code.
    Probe(InvalidProbe),
    /// The failure is the code's: the runner reached it.
    Code,
    /// This judge cannot tell.
    Open,
}

/// The reason's own word, from the closed list.
pub fn reason(text: &str) -> Option<&'static str> {
    REASONS.iter().copied().find(|r| *r == text)
}

/// What a probe of each reason proves and does not.
pub fn message(reason: &str) -> String {
    let what = match reason {
        "unknown-test" => "names a test the runner did not find",
        "unknown-path" => "names a file or folder that does not exist",
        "unknown-module" => "could not import a module before any test ran",
        "unknown-environment" => "names an environment (a container, a virtualenv, a runner's environment) that does not exist",
        _ => "names a program that does not exist",
    };
    format!("The command {what}, so the runner never reached the code under test: its exit code is no verdict on that code, and says nothing about whether the tests pass. Fix the name and run it again before drawing a conclusion.")
}

fn probe(reason: &'static str, evidence: Vec<&str>) -> Verdict {
    let evidence: Vec<String> = evidence.iter().map(|l| cut(l.trim())).collect();
    Verdict::Probe(InvalidProbe {
        reason,
        evidence: evidence.join("\n"),
        message: message(reason),
    })
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// The output's lines that contain `needle`, at most three.
fn lines_with<'a>(output: &'a str, needle: &str) -> Vec<&'a str> {
    output
        .lines()
        .filter(|l| l.contains(needle))
        .take(3)
        .collect()
}

/// The first rule that decides, else [`Verdict::Code`] when a parsed
/// report names failures, else [`Verdict::Open`].
pub fn rules(run: &Run) -> Verdict {
    if run.exit_code == 0 {
        return Verdict::Code;
    }
    let found = RULES.iter().find_map(|rule| rule(run));
    if let Some(v) = found {
        return v;
    }
    match run.report {
        Some(r) if !r.failed.is_empty() => Verdict::Code,
        _ => Verdict::Open,
    }
}

type Rule = fn(&Run) -> Option<Verdict>;

/// In order: where the command ran, whether its program exists, then what
/// each runner prints when a name resolves to nothing.
const RULES: &[Rule] = &[
    no_container,
    no_program,
    no_runner_module,
    pytest_not_found,
    missing_path,
    missing_module,
    no_tests_selected,
    unittest_unknown_test,
    cargo_no_target,
];

/// The engine could not find the container (podman and docker say so and
/// exit 125).
fn no_container(run: &Run) -> Option<Verdict> {
    run.container?;
    let said = run.output.lines().find(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("no such container") || l.contains("no container with name or id")
    })?;
    Some(probe("unknown-environment", vec![said]))
}

/// The shell found no such program: exit 127 and its own words.
fn no_program(run: &Run) -> Option<Verdict> {
    if run.exit_code != 127 {
        return None;
    }
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| {
            l.contains("command not found")
                || l.ends_with(": not found")
                || l.contains("No such file or directory")
        })
        .take(2)
        .collect();
    (!said.is_empty()).then(|| probe("unknown-command", said))
}

/// `python -m pytest` where the runner is not installed.
fn no_runner_module(run: &Run) -> Option<Verdict> {
    let said = run.output.lines().find(|l| {
        (l.contains("python") || l.starts_with('/')) && l.contains(": No module named ")
    })?;
    Some(probe("unknown-environment", vec![said]))
}

/// pytest: a node id that matched nothing, or a file that is not there.
fn pytest_not_found(run: &Run) -> Option<Verdict> {
    let path = lines_with(run.output, "ERROR: file or directory not found:");
    if !path.is_empty() {
        return Some(probe("unknown-path", path));
    }
    let test = lines_with(run.output, "ERROR: not found:");
    if test.is_empty() {
        return None;
    }
    let mut evidence = test;
    evidence.extend(lines_with(run.output, "(no match in any of"));
    Some(probe("unknown-test", evidence))
}

/// A path the selection named that does not exist, in the words of the
/// runners that say so (node, jest, vitest, prove, go, python).
fn missing_path(run: &Run) -> Option<Verdict> {
    const SAID: &[&str] = &[
        "Could not find '",
        "can't open file",
        "Cannot detect source of",
        "No test files found",
        "No tests found, exiting with code",
        "directory not found",
        "matched no packages",
        "no Go files in",
        "is not in std",
        "cannot find package",
    ];
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| SAID.iter().any(|s| l.contains(s)))
        .take(3)
        .collect();
    (!said.is_empty()).then(|| probe("unknown-path", said))
}

/// A module that could not be imported before any test ran: pytest's
/// collection errors, unittest's failed loads, node's and jest's
/// resolution errors. An import error inside a test that ran is the
/// code's, and a parsed report with passes means tests ran.
fn missing_module(run: &Run) -> Option<Verdict> {
    let ran = run.report.is_some_and(|r| r.passed > 0);
    if ran {
        return None;
    }
    let collecting = run.output.contains("ERROR collecting")
        || run.output.contains("Interrupted: ")
        || run.output.contains("unittest.loader._FailedTest")
        || run
            .output
            .contains("ImportError while importing test module");
    let python: Vec<&str> = run
        .output
        .lines()
        .filter(|l| {
            l.contains("ModuleNotFoundError: No module named")
                || l.starts_with("E   ModuleNotFoundError")
        })
        .take(2)
        .collect();
    if collecting && !python.is_empty() {
        let mut evidence = lines_with(run.output, "ERROR collecting");
        evidence.extend(python);
        return Some(probe("unknown-module", evidence));
    }
    let js: Vec<&str> = run
        .output
        .lines()
        .filter(|l| {
            l.contains("Cannot find module")
                || l.contains("ERR_MODULE_NOT_FOUND")
                || l.contains("Failed to load url")
        })
        .take(2)
        .collect();
    (!js.is_empty()).then(|| probe("unknown-module", js))
}

/// A selection that selected nothing: pytest's "no tests ran" (exit 5),
/// nextest's "no tests to run".
fn no_tests_selected(run: &Run) -> Option<Verdict> {
    if run.selection.is_empty() {
        return None;
    }
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| l.contains("no tests ran") || l.contains("no tests to run"))
        .take(2)
        .collect();
    (!said.is_empty()).then(|| probe("unknown-test", said))
}

/// unittest: a dotted name whose last part is not there.
fn unittest_unknown_test(run: &Run) -> Option<Verdict> {
    if !run.output.contains("unittest.loader._FailedTest") {
        return None;
    }
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| l.starts_with("AttributeError: ") && l.contains("has no attribute"))
        .take(2)
        .collect();
    (!said.is_empty()).then(|| probe("unknown-test", said))
}

/// cargo: a test target that does not exist, or no manifest at all.
fn cargo_no_target(run: &Run) -> Option<Verdict> {
    let target = lines_with(run.output, "error: no test target named");
    if !target.is_empty() {
        return Some(probe("unknown-test", target));
    }
    let manifest = lines_with(run.output, "error: could not find `Cargo.toml`");
    (!manifest.is_empty()).then(|| probe("unknown-path", manifest))
}

/// What the Lua judge and the model see of a run.
pub fn described(run: &Run, command: &str, rules: &Verdict, tail: &str) -> Value {
    let failed: Vec<&str> = run
        .report
        .map(|r| r.failed.iter().map(|f| f.name.as_str()).collect())
        .unwrap_or_default();
    let mut v = json!({
        "command": command,
        "exitCode": run.exit_code,
        "selection": run.selection,
        "output": tail,
        "parsed": run.report.is_some(),
        "passed": run.report.map_or(0, |r| r.passed),
        "failed": failed,
        "skipped": run.report.map_or(0, |r| r.skipped),
    });
    if let Some(r) = run.report {
        v["runner"] = json!(r.runner);
    }
    if let Some(c) = run.container {
        v["container"] = json!(c);
    }
    if let Verdict::Probe(p) = rules {
        v["rules"] = serde_json::to_value(p).expect("a probe serializes");
    }
    v
}

/// Reads what a Lua judge returned: nil (`None`) keeps the verdict, false
/// says the failure is the code's, a table is a probe (`reason` from the
/// closed list, `evidence`, and `message`, which defaults to the reason's).
pub fn from_lua(returned: Option<Value>) -> Result<Option<Verdict>, String> {
    let Some(v) = returned else { return Ok(None) };
    match v {
        Value::Bool(false) => Ok(Some(Verdict::Code)),
        Value::Object(map) => {
            let text = |k: &str| map.get(k).and_then(Value::as_str);
            let given = text("reason").unwrap_or_default();
            let Some(reason) = reason(given) else {
                return Err(format!(
                    "returned reason {given:?}; a reason is one of {}",
                    REASONS.join(", ")
                ));
            };
            Ok(Some(Verdict::Probe(InvalidProbe {
                reason,
                evidence: text("evidence").unwrap_or_default().to_string(),
                message: text("message").map_or_else(|| message(reason), str::to_string),
            })))
        }
        other => Err(format!(
            "returned {other}; return nil (keep the rules' verdict), false (the failure is the code's) or {{reason = ..., evidence = ..., message = ...}}"
        )),
    }
}

/// What the model is asked: the run, and the answer's shape.
pub fn question(run: &Value) -> (String, String) {
    let system = format!(
        "You decide who a failed test run belongs to. A runner that was handed a test, file, module, environment or program that does not exist never reaches the code under test, yet exits non-zero: that failure belongs to the command. A failure the runner reached the code to produce belongs to the code. Answer with one JSON object and nothing else: {{\"belongsTo\": \"command\" or \"code\", \"reason\": one of {} (when it belongs to the command), \"evidence\": the output line your answer rests on, quoted exactly, \"confidence\": a number from 0 to 1}}.",
        REASONS.join(", ")
    );
    (system, format!("The run, as JSON:\n{run}"))
}

/// What the model answered, as a verdict and the confidence it stated;
/// `Err` says why the answer cannot count.
pub fn from_model(text: &str) -> Result<(Verdict, f64), String> {
    let start = text.find('{').ok_or("the answer holds no JSON object")?;
    let end = text.rfind('}').ok_or("the answer holds no JSON object")?;
    let v: Value = serde_json::from_str(text.get(start..=end).unwrap_or_default())
        .map_err(|e| format!("the answer's JSON does not parse: {e}"))?;
    let confidence = v
        .get("confidence")
        .and_then(Value::as_f64)
        .ok_or("the answer states no confidence")?;
    let verdict = match v.get("belongsTo").and_then(Value::as_str) {
        Some("code") => Verdict::Code,
        Some("command") => {
            let given = v.get("reason").and_then(Value::as_str).unwrap_or_default();
            let reason = reason(given).ok_or_else(|| {
                format!("the answer's reason {given:?} is not one of the closed list")
            })?;
            let evidence = v
                .get("evidence")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Verdict::Probe(InvalidProbe {
                reason,
                evidence: cut(evidence),
                message: message(reason),
            })
        }
        _ => return Err("the answer's belongsTo is neither \"command\" nor \"code\"".into()),
    };
    Ok((verdict, confidence))
}
