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

/// The longest evidence a model's answer may quote.
const MAX_EVIDENCE: usize = 4_000;

/// The least confidence a model judge must state for its answer to count.
pub const MIN_CONFIDENCE: f64 = 0.7;

/// What one run of the suite gave the judges.
pub struct Run<'a> {
    /// The runner's command line, as the host declared it.
    pub command: &'a str,
    pub exit_code: i32,
    /// The whole output, stdout and stderr as they were interleaved.
    pub output: &'a str,
    pub selection: &'a [String],
    pub report: Option<&'a Report>,
    /// Whether the output carried two runners' reports: what is in it
    /// cannot be told from what a test printed.
    pub ambiguous: bool,
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
    let found = PROCESS_RULES.iter().find_map(|rule| rule(run));
    if let Some(v) = found {
        return v;
    }
    // The output is the code's as much as the runner's: a test can print
    // any line these rules look for. Once the report shows a test ran (one
    // passed, or one failed that is not a file the runner could not load),
    // the runner reached the code, and no line it printed says otherwise.
    let reached = run.ambiguous || run.report.is_some_and(|r| reached(r, run.exit_code));
    let found = (!reached)
        .then(|| OUTPUT_RULES.iter().find_map(|rule| rule(run)))
        .flatten();
    if let Some(v) = found {
        return v;
    }
    match run.report {
        Some(r) if !r.failed.is_empty() => Verdict::Code,
        _ => Verdict::Open,
    }
}

type Rule = fn(&Run) -> Option<Verdict>;

/// Whether the report shows the runner ran a test: one passed, or one
/// failed (pytest says so by its status, 1, where a usage or collection
/// error is 2, 4 or 5; other runners by a failure that is a test's).
fn reached(r: &super::report::Report, exit_code: i32) -> bool {
    if r.passed > 0 {
        return true;
    }
    match r.runner {
        "pytest" => exit_code == PYTEST_FAILED,
        _ => r.failed.iter().any(|f| !load_failure(f)),
    }
}

/// How unittest names the stand-in test of a module it could not load.
const UNITTEST_FAILED_LOAD: &str = "unittest.loader._FailedTest.";

/// A failure the report names by a file rather than a test (a module that
/// failed to import or load: pytest's collection errors, jest's "Test
/// suite failed to run", vitest's failed loads) or unittest's stand-in for
/// a module it could not load: no test of it ran.
pub(super) fn load_failure(f: &super::report::Failure) -> bool {
    f.file.as_deref() == Some(f.name.as_str()) || f.name.starts_with(UNITTEST_FAILED_LOAD)
}

/// Where the command ran and whether its program exists: what the engine
/// and the shell say before any runner starts.
const PROCESS_RULES: &[Rule] = &[no_container, no_program];

/// What each runner prints when a name resolves to nothing, in order.
const OUTPUT_RULES: &[Rule] = &[
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
    // Only a shell's words about a program the command names: a test
    // that printed them and exited 127 named none of the command's.
    let named = |l: &str| {
        run.command.split_whitespace().any(|w| {
            l.contains(&format!(": {w}: ")) || l.contains(&format!("{w}: command not found"))
        })
    };
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| {
            let shell = l.contains("command not found")
                || l.ends_with(": not found")
                || l.contains("No such file or directory");
            shell && named(l)
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

/// pytest's exit status for a usage error (a name that resolves to
/// nothing), and for a run that collected no tests.
const PYTEST_USAGE: i32 = 4;
/// pytest's exit status when tests ran and some failed.
const PYTEST_FAILED: i32 = 1;
const PYTEST_NO_TESTS: i32 = 5;
/// pytest's exit status when collection failed (an import error).
const PYTEST_INTERRUPTED: i32 = 2;

/// pytest: a node id that matched nothing, or a file that is not there
/// (pytest then exits 4, which failing tests never make it do).
fn pytest_not_found(run: &Run) -> Option<Verdict> {
    if run.exit_code != PYTEST_USAGE {
        return None;
    }
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
    const PYTHON: &str = "ModuleNotFoundError: No module named";
    const JS: &[&str] = &[
        "Cannot find module",
        "ERR_MODULE_NOT_FOUND",
        "Failed to load url",
    ];
    let said: Vec<&str> = match run.report {
        // With a report, the words must be in what the runner said of a
        // file it could not load (a test's own print is not that), and
        // pytest must say by its status that collection failed.
        Some(r) => {
            if r.runner == "pytest" && run.exit_code != PYTEST_INTERRUPTED {
                return None;
            }
            r.failed
                .iter()
                .filter(|f| load_failure(f))
                .flat_map(|f| f.message.lines())
                .filter(|l| l.contains(PYTHON) || JS.iter().any(|w| l.contains(w)))
                .take(2)
                .collect()
        }
        // Without one, the runners' words, Python's only while collecting.
        None => {
            let collecting = [
                "ERROR collecting",
                "unittest.loader._FailedTest",
                "ImportError while importing test module",
            ]
            .iter()
            .any(|m| run.output.contains(m));
            run.output
                .lines()
                .filter(|l| (collecting && l.contains(PYTHON)) || JS.iter().any(|w| l.contains(w)))
                .take(2)
                .collect()
        }
    };
    (!said.is_empty()).then(|| probe("unknown-module", said))
}

/// A selection that selected nothing: pytest's "no tests ran" (with its
/// exit 5), nextest's "no tests to run".
fn no_tests_selected(run: &Run) -> Option<Verdict> {
    if run.selection.is_empty() {
        return None;
    }
    let pytest = run.exit_code == PYTEST_NO_TESTS;
    let said: Vec<&str> = run
        .output
        .lines()
        .filter(|l| (pytest && l.contains("no tests ran")) || l.contains("no tests to run"))
        .take(2)
        .collect();
    (!said.is_empty()).then(|| probe("unknown-test", said))
}

/// unittest: a dotted name whose last part is not there.
fn unittest_unknown_test(run: &Run) -> Option<Verdict> {
    let failed_load = match run.report {
        Some(r) => r
            .failed
            .iter()
            .any(|f| f.name.starts_with(UNITTEST_FAILED_LOAD)),
        None => run.output.contains("unittest.loader._FailedTest"),
    };
    if !failed_load {
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

/// The output as the judges see it: every loaded secret cut, as the
/// result and the record cut it, so a secret a test printed never reaches
/// the Lua judge or the model judge's provider. The whole output is cut
/// before a judge's tail is taken from it, so no piece of a secret
/// survives at the tail's edge.
pub fn seen(output: &str) -> String {
    let mut seen = output.to_string();
    crate::credentials::cut_loaded_text(&mut seen);
    seen
}

/// What the Lua judge and the model see of a run, every loaded secret cut
/// (the selection and the rules' evidence too); `tail` is of [`seen`].
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
    crate::credentials::cut_loaded_value(&mut v);
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
            if evidence.len() > MAX_EVIDENCE {
                return Err(format!(
                    "the answer's evidence is over {MAX_EVIDENCE} bytes"
                ));
            }
            Verdict::Probe(InvalidProbe {
                reason,
                evidence: evidence.to_string(),
                message: message(reason),
            })
        }
        _ => return Err("the answer's belongsTo is neither \"command\" nor \"code\"".into()),
    };
    Ok((verdict, confidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(exit_code: i32, output: &str, selection: &[&str]) -> Verdict {
        let selection: Vec<String> = selection.iter().map(|s| s.to_string()).collect();
        let report = match super::super::report::parse(output, "") {
            super::super::report::Parsed::Report(r) => Some(r),
            _ => None,
        };
        rules(&Run {
            command: "runner",
            exit_code,
            output,
            selection: &selection,
            report: report.as_ref(),
            ambiguous: false,
            container: None,
        })
    }

    fn reason_of(v: &Verdict) -> &'static str {
        match v {
            Verdict::Probe(p) => p.reason,
            other => panic!("no probe: {other:?}"),
        }
    }

    #[test]
    fn exit_zero_is_never_judged_whatever_the_output_says() {
        assert_eq!(
            judge(0, "ERROR: not found: x\nNo module named y", &["x"]),
            Verdict::Code
        );
    }

    #[test]
    fn each_runners_words_for_a_missing_name_give_their_reason_and_quote_the_line() {
        let cases: &[(i32, &str, &[&str], &str, &str)] = &[
            (1, "node:internal/modules/cjs/loader:1080\nError: Could not find '/w/test/nope.test.js'\n", &["test/nope.test.js"], "unknown-path", "Could not find"),
            (1, "No tests found, exiting with code 1\nRun with `--passWithNoTests` to exit with code 0\n", &["nope"], "unknown-path", "No tests found"),
            (1, "FAIL  calc.test.js\n  ● Test suite failed to run\n\n    Cannot find module './nope' from 'calc.test.js'\n", &[], "unknown-module", "Cannot find module"),
            (101, "error: no test target named `nope`.\n", &[], "unknown-test", "no test target named"),
            (101, "error: could not find `Cargo.toml` in `/w` or any parent directory\n", &[], "unknown-path", "Cargo.toml"),
            (1, "stat /w/nope: directory not found\n", &["./nope"], "unknown-path", "directory not found"),
            (1, "Cannot detect source of 't/nope.t'! at /usr/share/perl/5.36/TAP/Parser/SourceHandler.pm\n", &["t/nope.t"], "unknown-path", "Cannot detect source"),
            (4, "error: no tests to run\n(hint: use `--no-tests` to customize)\n", &["nope"], "unknown-test", "no tests to run"),
            (1, "E\n======================================================================\nERROR: Nope (unittest.loader._FailedTest.Nope)\n----------------------------------------------------------------------\nAttributeError: module 'test_calc' has no attribute 'Nope'\n\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nFAILED (errors=1)\n", &["test_calc.Nope"], "unknown-test", "has no attribute"),
            (127, "sh: 1: runner: not found\n", &[], "unknown-command", "runner: not found"),
        ];
        for (exit, output, selection, reason, quoted) in cases {
            let v = judge(*exit, output, selection);
            assert!(matches!(v, Verdict::Probe(_)), "{output}: {v:?}");
            assert_eq!(reason_of(&v), *reason, "{output}");
            let Verdict::Probe(p) = v else { unreachable!() };
            assert!(p.evidence.contains(quoted), "{output}: {}", p.evidence);
        }
    }

    #[test]
    fn a_failure_no_rule_explains_is_open_and_one_a_report_names_is_the_codes() {
        assert_eq!(judge(2, "segfault somewhere\n", &[]), Verdict::Open);
        let libtest = "running 1 test\ntest t::a ... FAILED\n\nfailures:\n\n---- t::a stdout ----\nthread 't::a' panicked at src/lib.rs:3:5:\nboom\n\nfailures:\n    t::a\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        assert_eq!(judge(101, libtest, &[]), Verdict::Code);
    }

    #[test]
    fn a_lua_judges_answer_is_nil_false_or_a_probe_with_a_listed_reason() {
        assert_eq!(from_lua(None).unwrap(), None);
        assert_eq!(
            from_lua(Some(Value::Bool(false))).unwrap(),
            Some(Verdict::Code)
        );
        let probe = from_lua(Some(json!({"reason": "unknown-module", "evidence": "e"}))).unwrap();
        let Some(Verdict::Probe(p)) = probe else {
            panic!("{probe:?}")
        };
        assert_eq!((p.reason, p.evidence.as_str()), ("unknown-module", "e"));
        assert_eq!(p.message, message("unknown-module"));
        let e = from_lua(Some(json!({"reason": "cosmic-rays"}))).unwrap_err();
        assert!(e.contains("unknown-command, unknown-test"), "{e}");
        assert!(from_lua(Some(json!(7))).unwrap_err().contains("return nil"));
    }

    #[test]
    fn a_models_answer_needs_a_belonging_a_listed_reason_and_a_confidence() {
        let (v, c) = from_model("Sure: {\"belongsTo\": \"command\", \"reason\": \"unknown-test\", \"evidence\": \"x\", \"confidence\": 0.8}").unwrap();
        assert_eq!(reason_of(&v), "unknown-test");
        assert_eq!(c, 0.8);
        let (v, _) = from_model("{\"belongsTo\": \"code\", \"confidence\": 0.9}").unwrap();
        assert_eq!(v, Verdict::Code);
        for bad in [
            "no json here",
            "{\"belongsTo\": \"command\", \"reason\": \"unknown-test\"}",
            "{\"belongsTo\": \"command\", \"reason\": \"vibes\", \"confidence\": 1}",
            "{\"belongsTo\": \"nobody\", \"confidence\": 1}",
        ] {
            assert!(from_model(bad).is_err(), "{bad}");
        }
    }
}
