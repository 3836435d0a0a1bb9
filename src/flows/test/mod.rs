//! `test`: runs the project's tests with the runner the host declared,
//! parses the runner's report, and says who a failure belongs to.
//!
//! The host declares the runner once ([`runner::Runner`]: a policy's `test
//! = {...}` or the embedder's); a call names only its `selection`, which
//! reaches the runner as arguments (`"$@"`), never as shell text, and
//! whether to compare `against` the base revision. A call goes:
//! 1. (`against = "base"`) check out `baseRef` in a private folder and
//!    run the selection there ([`base`]);
//! 2. run the selection in the workspace, confined or routed like `bash`
//!    ([`run`]);
//! 3. parse the output with the runner it carries the signature of
//!    ([`report`]; two signatures or none is `parsed = false`);
//! 4. judge a non-zero exit: the rules, the host's Lua judge, a model
//!    ([`judge`]);
//! 5. compare the two runs' failures by name, when both parsed.

pub mod base;
pub mod judge;
pub mod report;
mod run;
pub mod runner;

use super::probe::InvalidProbe;
use super::{choice, closed, field, list, nested, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use judge::Verdict;
use report::{Failure, Parsed, Report};
pub use runner::Runner;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The runners whose reports [`report::parse`] reads, as `runner` names them.
pub const RUNNERS: &[&str] = &[
    "pytest", "unittest", "libtest", "nextest", "go", "tap", "node", "jest", "vitest",
];

/// The most items a selection may name.
pub const MAX_SELECTION: usize = 1000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Against {
    #[default]
    Workspace,
    Base,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    #[serde(default)]
    pub selection: Vec<String>,
    #[serde(default)]
    pub against: Against,
    pub timeout_ms: Option<u64>,
}

/// What one run of the suite said, as a result shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    pub exit_code: i32,
    pub passed: u64,
    pub failed: Vec<Failure>,
    pub skipped: u64,
    pub parsed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_probe: Option<InvalidProbe>,
    /// Who decided `invalidProbe`'s presence on a failing run: "rules",
    /// "lua" or "model".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged_by: Option<&'static str>,
    /// Why a judge's answer did not count (an error, a low confidence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_note: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub command: String,
    #[serde(flatten)]
    pub side: Side,
    pub tail: String,
    pub tail_truncated: bool,
    pub tail_dropped_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spill_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<Side>,
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub comparison: Option<base::Comparison>,
}

/// One planned call.
pub struct Test {
    runner: Arc<Runner>,
    line: run::Line,
    selection: Vec<String>,
    cwd: PathBuf,
    against: Against,
    timeout: Duration,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "selection": {"type": "array", "items": {"type": "string"}, "description": "Tests to run: names or paths as the runner takes them (tests/test_a.py::test_x, a cargo test filter, a file), passed to the runner's command as arguments, never as shell text. Empty: the whole suite."},
            "against": {"type": "string", "enum": ["workspace", "base"], "description": "workspace (the default) runs the selection here; base also runs it in a checkout of the runner's baseRef first and reports introduced, preexisting and fixed failures."},
            "timeoutMs": {"type": "integer", "minimum": 1, "maximum": runner::MAX_TIMEOUT_MS, "description": "Milliseconds before each run is stopped (default: the runner's timeoutMs, else 600000)."}
        }
    })
}

/// The audit's one-line gist: the selection, or the whole suite.
fn summary(input: &Value) -> String {
    let against = match input.get("against").and_then(Value::as_str) {
        Some("base") => " against base",
        _ => "",
    };
    let picked: Vec<&str> = input
        .get("selection")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match picked.is_empty() {
        true => format!("the whole suite{against}"),
        false => format!("{}{against}", picked.join(" ")),
    }
}

impl Flow for Test {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "test",
        description: "Runs the project's tests with the host's runner, parses the report (pytest, cargo, go, jest, ...), says when a failure belongs to the command, not the code, and compares with a base.",
        tier: Tier::Irreversible,
        actions: &[Action::ProcSpawn],
        read_only: false,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::OutsideContainer, ErrorCode::CommandFailed, ErrorCode::Timeout, ErrorCode::ProviderUnavailable],
    };

    fn output_schema() -> Value {
        output_schema()
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        samples()
    }

    fn validate(input: &Input) -> FlowResult<()> {
        validate(input)
    }

    fn unavailable(ctx: &Context) -> Option<&'static str> {
        ctx.tests
            .is_none()
            .then_some("no test runner is declared (a policy's test = {command = ...})")
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        plan(ctx, input)
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        // 1. the base revision's run, judged.
        let base = match self.against {
            Against::Base => Some(self.base_side(ctx).await?),
            Against::Workspace => None,
        };
        let target = run::Target {
            runner: &self.runner,
            line: &self.line,
            cwd: self.cwd.clone(),
            copy: None,
            timeout: self.timeout,
        };
        // 2-4. the workspace's run, parsed and judged.
        let ran = run::run(ctx, &target).await?;
        let (side, report) = self.side(ctx, &ran).await;
        // 5. failures compare by name only where both runs reached the code.
        let compared = |side: &Side| side.invalid_probe.is_none();
        let comparison = match (&base, &report) {
            (Some((was, Some(before))), Some(now)) if compared(was) && compared(&side) => {
                Some(base::compare(before, now))
            }
            _ => None,
        };
        let (tail, dropped) = run::tail(&ran.output, run::TAIL_BYTES);
        let dropped = dropped + ran.lost_bytes;
        Ok(Output {
            command: self.line.shown.clone(),
            side,
            tail: tail.to_string(),
            tail_truncated: dropped > 0,
            tail_dropped_bytes: dropped,
            spill_path: ran.spill_path.clone(),
            sandbox: ran.place.clone(),
            base: base.map(|(side, _)| side),
            comparison,
        })
    }
}

fn refuse(field: &str, message: &str) -> FlowResult<()> {
    Err(FlowError::invalid_input(field, message))
}

fn validate(i: &Input) -> FlowResult<()> {
    if i.selection.len() > MAX_SELECTION {
        return refuse("selection", &format!("a selection names at most {MAX_SELECTION} tests; run the whole suite (no selection) or split it"));
    }
    for (n, item) in i.selection.iter().enumerate() {
        let field = format!("selection[{}]", n + 1);
        if item.is_empty() || item.contains('\0') {
            return refuse(
                &field,
                "a selection item is a test name or path: not empty, no NUL byte",
            );
        }
        if item.starts_with('@') {
            return refuse(&field, &format!("{item:?} starts with '@', which runners (pytest, argparse-based ones) read as a file of more arguments; name a path that starts with '@' as ./{item}"));
        }
        if item.starts_with('+') {
            return refuse(&field, &format!("{item:?} starts with '+', which prove reads as an option; name a path that starts with '+' as ./{item}"));
        }
        if item.starts_with('-') {
            return refuse(&field, &format!("{item:?} starts with '-', so the runner would read it as an option; a selection names tests and paths only (options belong in the runner's command, test.command, which the host declares)"));
        }
    }
    if i.timeout_ms
        .is_some_and(|ms| !(1..=runner::MAX_TIMEOUT_MS).contains(&ms))
    {
        return refuse(
            "timeoutMs",
            "timeoutMs is milliseconds from 1 to 600000 (ten minutes)",
        );
    }
    Ok(())
}

/// No runner declared: the call cannot run, and the fix is the host's.
fn no_runner() -> FlowError {
    FlowError::new(
        ErrorCode::ProviderUnavailable,
        "no test runner is declared for this run; the host declares one in a policy, e.g. test = {command = \"pytest -q\", baseRef = \"main\"} (or RuntimeBuilder::test_runner)",
    )
}

fn plan(ctx: &Context, input: Input) -> FlowResult<(Test, Envelope)> {
    let runner = ctx.tests.clone().ok_or_else(no_runner)?;
    if input.against == Against::Base {
        if runner.base_ref.is_none() {
            return Err(FlowError::invalid_input("against", format!("against = \"base\" compares with the runner's baseRef, which {} does not declare; add baseRef = \"main\" (a branch, tag or commit) to its test table", runner.from)));
        }
        if runner.container.is_some() {
            return Err(FlowError::invalid_input("against", "the base worktree is checked out on the host, where a runner routed into a container cannot see it; compare on the host, or run against = \"workspace\" alone"));
        }
    }
    let cwd = match &runner.cwd {
        Some(c) => ctx.workspace.join(c),
        None => ctx.workspace.clone(),
    };
    let cwd = crate::fsops::path::canonical_lenient(&cwd).unwrap_or(cwd);
    let line = run::Line::new(&runner.command, &input.selection);
    let envelope = Envelope {
        tier: Tier::Irreversible,
        reads: vec![],
        writes: vec![],
        commands: vec![line.shown.clone()],
        network: vec![],
        cwd: Some(cwd.clone()),
        container: runner.container.clone(),
        anywhere: true,
    };
    let ms = input
        .timeout_ms
        .or(runner.timeout_ms)
        .unwrap_or(runner::MAX_TIMEOUT_MS);
    Ok((
        Test {
            runner,
            line,
            selection: input.selection,
            cwd,
            against: input.against,
            timeout: Duration::from_millis(ms),
        },
        envelope,
    ))
}

impl Test {
    /// Step 1: the selection in a checkout of `baseRef`, judged.
    async fn base_side(&self, ctx: &Context) -> FlowResult<(Side, Option<Report>)> {
        let base_ref = self
            .runner
            .base_ref
            .as_deref()
            .expect("plan checked baseRef");
        let started = self.runner.repository.as_deref();
        let tree = base::Worktree::make(&ctx.workspace, base_ref, started).await?;
        let rel = self
            .cwd
            .strip_prefix(&ctx.workspace)
            .unwrap_or(std::path::Path::new(""));
        let target = run::Target {
            runner: &self.runner,
            line: &self.line,
            cwd: tree.workspace.join(rel),
            copy: Some(tree.root()),
            timeout: self.timeout,
        };
        let ran = run::run(ctx, &target).await;
        tree.remove().await;
        Ok(self.side(ctx, &ran?).await)
    }

    /// Steps 3 and 4 for one run.
    async fn side(&self, ctx: &Context, ran: &run::Ran) -> (Side, Option<Report>) {
        let (report, ambiguous) = parsed(&ran.output).await;
        let run = judge::Run {
            command: &self.runner.command,
            ambiguous,
            exit_code: ran.exit_code,
            output: &ran.output,
            selection: &self.selection,
            report: report.as_ref(),
            container: ran.container.as_deref(),
        };
        let (verdict, judged_by, note) = match ran.exit_code {
            0 => (Verdict::Code, None, None),
            _ => self.judged(ctx, &run, ran).await,
        };
        let mut report = report;
        if let (Verdict::Probe(p), Some(r)) = (&verdict, report.as_mut()) {
            // No test ran: the entry the runner made up for the name it
            // could not find (unittest's `_FailedTest.NAME`) is no test
            // that failed; the probe says what happened.
            if p.reason == "unknown-test" {
                r.failed.retain(|f| !judge::load_failure(f));
            }
        }
        let side = Side {
            exit_code: ran.exit_code,
            passed: report.as_ref().map_or(0, |r| r.passed),
            failed: report
                .as_ref()
                .map(|r| r.failed.clone())
                .unwrap_or_default(),
            skipped: report.as_ref().map_or(0, |r| r.skipped),
            parsed: report.is_some(),
            runner: report.as_ref().map(|r| r.runner),
            invalid_probe: match verdict {
                Verdict::Probe(p) => Some(p),
                _ => None,
            },
            judged_by,
            judge_note: note,
        };
        (side, report)
    }

    /// Step 4: the rules, then the host's Lua judge, then its model.
    async fn judged(
        &self,
        ctx: &Context,
        run: &judge::Run<'_>,
        ran: &run::Ran,
    ) -> (Verdict, Option<&'static str>, Option<String>) {
        // The host's own evidence that nothing started comes first.
        let rules = match &ran.launch_probe {
            Some(p) => Verdict::Probe(InvalidProbe {
                message: judge::message(p.reason),
                ..p.clone()
            }),
            None => judge::rules(run),
        };
        let by_rules = (rules != Verdict::Open).then_some("rules");
        let asks = match &self.runner.judge {
            runner::Judge::Rules => false,
            runner::Judge::Lua { .. } => true,
            runner::Judge::Model { .. } => rules == Verdict::Open,
        };
        if !asks {
            return (rules, by_rules, None);
        }
        let seen = judge::seen(&ran.output);
        let describe = |bytes: usize| {
            let tail = run::tail(&seen, bytes).0;
            judge::described(run, &self.line.shown, &rules, tail)
        };
        match &self.runner.judge {
            runner::Judge::Lua { policy, at } => {
                let Some(gate) = &ctx.gate else {
                    return (
                        rules,
                        by_rules,
                        Some("the Lua judge cannot be asked outside a call".into()),
                    );
                };
                let answer = gate.kernel().judge(policy, &describe(run::TAIL_BYTES));
                match answer
                    .and_then(|v| judge::from_lua(v).map_err(|e| format!("the judge at {at} {e}")))
                {
                    Ok(Some(v)) => (v, Some("lua"), None),
                    Ok(None) => (rules, by_rules, None),
                    Err(e) => (
                        rules,
                        by_rules,
                        Some(format!("{e}; the rules' verdict stands")),
                    ),
                }
            }
            runner::Judge::Rules => (rules, by_rules, None),
            runner::Judge::Model { provider, model } => {
                match ask_model(ctx, (provider, model), &describe(MODEL_TAIL), &seen).await {
                    Ok(v) => (v, Some("model"), None),
                    Err(note) => (Verdict::Open, None, Some(note)),
                }
            }
        }
    }
}

/// Output from this size on is parsed off the run's thread, so a long
/// report does not hold up the run's other tasks.
const PARSE_ASIDE: usize = 1 << 20;

/// The report `output` carries, if one runner's signature is there, and
/// whether it carried two runners' signatures.
async fn parsed(output: &str) -> (Option<Report>, bool) {
    let report = |p: Parsed| match p {
        Parsed::Report(r) => (Some(r), false),
        Parsed::Unknown => (None, false),
        Parsed::Ambiguous(_) => (None, true),
    };
    if output.len() < PARSE_ASIDE {
        return report(report::parse(output, ""));
    }
    let owned = output.to_string();
    let aside = tokio::task::spawn_blocking(move || report::parse(&owned, ""));
    aside.await.map_or((None, false), report)
}

/// How much of the output's end the model judge reads.
const MODEL_TAIL: usize = 8_000;

/// The model judge: one `model` call through the door (authorized and
/// recorded as a call of its own), whose answer counts only with a stated
/// confidence of at least [`judge::MIN_CONFIDENCE`] and evidence that is
/// a line of the output as it was shown (`output`: [`judge::seen`], every
/// loaded secret cut).
async fn ask_model(
    ctx: &Context,
    (provider, model): (&str, &str),
    run: &Value,
    output: &str,
) -> Result<Verdict, String> {
    let inner = ctx
        .inner
        .as_ref()
        .ok_or("the model judge cannot be asked outside a run")?;
    let (system, question) = judge::question(run);
    let input = json!({
        "provider": provider,
        "model": model,
        "system": system,
        "messages": [{"role": "user", "content": question}],
        "maxTokens": 400,
        "temperature": 0.0,
    });
    let reply = inner.call("model", input).await.map_err(|e| {
        format!(
            "the model judge {provider}/{model} failed ({}): {}",
            e.code.as_str(),
            e.message
        )
    })?;
    let text = reply
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (verdict, confidence) = judge::from_model(text)
        .map_err(|e| format!("the model judge's answer does not count: {e}"))?;
    if confidence < judge::MIN_CONFIDENCE {
        return Err(format!(
            "the model judge's confidence {confidence} is below {}; its answer does not count",
            judge::MIN_CONFIDENCE
        ));
    }
    if let Verdict::Probe(p) = &verdict {
        // Each line it quotes is a whole line of the output.
        let whole = |q: &str| output.lines().any(|l| l.trim() == q.trim());
        if p.evidence.trim().is_empty() || !p.evidence.lines().all(whole) {
            return Err(
                "the model judge's evidence is not a line of the output; its answer does not count"
                    .into(),
            );
        }
    }
    Ok(verdict)
}

fn output_schema() -> Value {
    let text = |what: &str| field("string", what);
    let count = |what: &str| field("integer", what);
    let names = |what: &str| list(field("string", "A test's name."), what);
    let failure = closed(
        &[
            (
                "name",
                text("The test's name as the runner writes it (pass it back in `selection`)."),
            ),
            (
                "message",
                text("The first lines of its failure message (at most 10)."),
            ),
        ],
        &[
            ("file", text("The file the report places the failure in.")),
            ("line", count("The line the report places the failure at.")),
        ],
    );
    let probe = closed(
        &[
            ("reason", choice(judge::REASONS, "Which name resolved to nothing: a program, a test, a path, a module, an environment.")),
            ("evidence", text("The output's lines (or the host's observation) it rests on.")),
            ("message", text("What the result does and does not prove.")),
        ],
        &[],
    );
    let side = |extra: &[(&str, Value)]| {
        let mut required = vec![
            ("exitCode", count("The runner's exit status (128+N after signal N).")),
            ("passed", count("Tests that passed, as the report counts them.")),
            ("failed", list(nested("TestFailure", "A failed test.", failure.clone()), "Tests that failed (and errors the runner counts with them).")),
            ("skipped", count("Tests skipped or ignored.")),
            ("parsed", field("boolean", "Whether one known runner's report was recognised (two runners' signatures, or none, is false: counts are then 0).")),
        ];
        required.extend(extra.iter().cloned());
        closed(
            &required,
            &[
                ("runner", choice(RUNNERS, "The runner whose report was parsed.")),
                ("invalidProbe", nested("TestInvalidProbe", "Present when the failure belongs to the command, not the code: the runner never reached the code under test.", probe.clone())),
                ("judgedBy", choice(&["rules", "lua", "model"], "Who decided, for a failing run: the built-in rules, the host's Lua judge, or its model.")),
                ("judgeNote", text("Why a judge's answer did not count (an error, a confidence under 0.7, evidence not in the output).")),
            ],
        )
    };
    let mut top = side(&[
        (
            "command",
            text("The command that ran: the runner's command with the selection quoted after it."),
        ),
        (
            "tail",
            text(
                "The last 30,000 bytes of the output (stdout and stderr as they were interleaved).",
            ),
        ),
        (
            "tailTruncated",
            field("boolean", "Whether output came before the tail."),
        ),
        (
            "tailDroppedBytes",
            count("Bytes of output before the tail."),
        ),
    ]);
    let extra = json!({
        "spillPath": text("A file with the complete output (up to 64 MiB) when it was longer than the tail, kept while the run lasts or with --keep-spill."),
        "sandbox": super::shape::sandbox_schema(true),
        "base": nested("TestBase", "against = \"base\": the same selection's run in a checkout of baseRef.", side(&[])),
        "introduced": names("Failing here, not in the base (only when both reports parsed)."),
        "preexisting": names("Failing here and in the base."),
        "fixed": names("Failing in the base, not here."),
    });
    if let (Some(props), Value::Object(more)) = (top["properties"].as_object_mut(), extra) {
        props.extend(more);
    }
    top
}

#[cfg(test)]
fn samples() -> Vec<Output> {
    let failure = Failure {
        name: "tests/test_a.py::test_x".into(),
        file: Some("tests/test_a.py".into()),
        line: Some(3),
        message: "assert 1 == 2".into(),
    };
    let side = |probe: bool| Side {
        exit_code: 1,
        passed: 2,
        failed: vec![match probe {
            true => Failure {
                file: None,
                line: None,
                ..failure.clone()
            },
            false => failure.clone(),
        }],
        skipped: 1,
        parsed: !probe,
        runner: (!probe).then_some("pytest"),
        invalid_probe: probe.then(|| InvalidProbe {
            reason: "unknown-test",
            evidence: "ERROR: not found: tests/test_a.py::test_nope".into(),
            message: judge::message("unknown-test"),
        }),
        judged_by: probe.then_some("rules"),
        judge_note: probe.then(|| "note".into()),
    };
    let output = |full: bool, base_probe: bool| Output {
        command: "pytest -q tests/test_a.py".into(),
        side: side(!full),
        tail: "1 failed".into(),
        tail_truncated: full,
        tail_dropped_bytes: 0,
        spill_path: full.then(|| "/tmp/spill".into()),
        sandbox: match (full, base_probe) {
            (true, false) => {
                Some(serde_json::to_value(super::shape::sandbox_sample(true)).unwrap())
            }
            (false, false) => {
                Some(serde_json::to_value(super::shape::sandbox_sample(false)).unwrap())
            }
            (true, true) => Some(serde_json::to_value(super::shape::container_sample()).unwrap()),
            (false, true) => None,
        },
        base: full.then(|| side(base_probe)),
        comparison: full.then(|| base::Comparison {
            introduced: vec!["a".into()],
            preexisting: vec![],
            fixed: vec!["b".into()],
        }),
    };
    let limited = Output {
        sandbox: serde_json::to_value(super::shape::sandbox_sample_limited()).ok(),
        ..output(false, false)
    };
    vec![
        output(true, false),
        output(true, true),
        output(false, false),
        output(false, true),
        limited,
    ]
}
