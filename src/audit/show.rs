//! `sluice audit show`: a run and its calls as views, JSON columns parsed
//! (what `--json` prints; [`super::render`] turns them into text).
//!
//! A call whose `status` is NULL had its intent written and synced and
//! never got an outcome: while its run is live it is in progress, after that
//! its outcome is unknown, and every view says so in those words.
//!
//! Which calls ran at the same time (tasks run concurrently) is read from
//! each call's start and duration ([`Span`]), not stored: the record
//! already holds both.

use super::db::Db;
use super::render::plural;
use super::rows::{self, Output, StoredCall, StoredRun};
use super::verify::{Failure, Problem, Verdict};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// Error codes that mean the policy stopped a call: refused, or an ask
/// that nobody approved.
const DENIAL_CODES: [&str; 2] = ["permission_denied", "permission_required"];

/// A run's fields, JSON columns parsed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub script: String,
    pub script_sha256: Option<String>,
    /// `[{name, sha256}]`
    pub policies: Value,
    /// `[string]`
    pub args: Value,
    pub workspace: String,
    /// `running`, `ok`, `failed` or `interrupted`.
    pub status: String,
    pub error: Option<String>,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<i64>,
    pub version: String,
    pub random_seed: i64,
    pub resumed_from: Option<String>,
    pub pid: i64,
    pub pid_start: i64,
    pub head: String,
    pub seal: Option<String>,
    /// Its place among the database's runs, from 1.
    pub n: Option<i64>,
    /// The hash of the run before it that this run commits to.
    pub prior: Option<String>,
    /// Which: null for that run's seal, k for its row #k (0: its head).
    pub prior_rows: Option<i64>,
}

/// How a call ended, as every view names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error,
    /// Intent recorded, then the process died: it may or may not have
    /// taken effect.
    Unknown,
    /// Intent recorded and the run is still live: the call is running.
    Pending,
}

impl Outcome {
    /// The name `--json` and the CSV export use.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Unknown => "unknown",
            Outcome::Pending => "pending",
        }
    }
}

/// One flow call, JSON columns parsed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    pub run: String,
    /// The chain position, 1-based: the `#n` of the timeline and `--call N`.
    pub n: i64,
    pub task: String,
    pub seq: i64,
    /// Who made the call when it came from outside the script (an MCP
    /// client's name and version, `claude-code 1.2.3`); null for the
    /// script's own calls.
    pub client: Option<String>,
    pub flow: String,
    pub tier: String,
    pub started_ms: i64,
    pub outcome: Outcome,
    /// `ok`, `error`, or null when the outcome was never written.
    pub status: Option<String>,
    pub duration_us: Option<i64>,
    pub input: Value,
    pub capabilities: Value,
    pub decisions: Value,
    /// Decisions made while the call ran (a redirect's host, a private
    /// address DNS returned); null until the outcome is written.
    pub late_decisions: Option<Value>,
    pub route: Option<Value>,
    /// What was redacted from the input (and, once the outcome is written,
    /// from the output and error).
    pub redacted: Value,
    pub replayed_from: Option<String>,
    pub output: Option<Value>,
    pub error: Option<Value>,
    /// The output was over the cap: `output` holds its size, SHA-256, head
    /// and tail instead.
    pub capped: bool,
    pub prev: String,
    pub hash: String,
    pub outcome_hash: Option<String>,
    /// `{FIELD: [sha256]}` when the record keeps the items of the input's
    /// list field FIELD (a model call's `messages`) once each by content;
    /// `input` is whole either way. Absent for an input stored whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<Value>,
    /// The `n` of every other call of the run that was running while this
    /// one ran, in order; empty when none was (see [`Span`]).
    pub overlaps: Vec<i64>,
}

/// What does not match at the call where a run's record breaks: `--json`
/// gives that call a `broken` field holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Broken {
    pub failure: Failure,
    pub message: String,
}

/// `sluice audit verify`'s verdict on a run, as `sluice audit show` says
/// it (`--json`'s `integrity`): the header says "sealed" only of a run
/// found intact, and the call where the record breaks is marked
/// ([`Integrity::broken_at`]).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Integrity {
    /// Nothing was found that does not match: the run's head, every row
    /// and outcome, the seal, its link to the run before it and every
    /// text kept by content.
    pub intact: bool,
    /// The run carries a seal.
    pub sealed: bool,
    /// Said of an intact run whose record cannot be fully checked (one
    /// killed before it could seal).
    pub warning: Option<String>,
    /// The first thing that does not match: its kind, the call where it
    /// is (`n`, `task`, `seq`, `flow`) when it is a call's, and what.
    pub problem: Option<Problem>,
}

impl Integrity {
    /// What `verdict` says of a run.
    pub fn of(verdict: &Verdict) -> Integrity {
        Integrity {
            intact: verdict.intact,
            sealed: verdict.sealed,
            warning: verdict.warning.clone(),
            problem: verdict.problem.clone(),
        }
    }

    /// The call where the record breaks, and what does not match there.
    pub fn broken_at(&self) -> Option<(i64, Broken)> {
        let p = self.problem.as_ref()?;
        let broken = Broken {
            failure: p.failure,
            message: p.message.clone(),
        };
        Some((p.n?, broken))
    }
}

impl Call {
    /// The error's `code`, when the call failed.
    pub fn error_code(&self) -> Option<&str> {
        self.error.as_ref()?.get("code")?.as_str()
    }

    /// The signal (`SIGINT`) of the stop request that cut the call short
    /// (a command sluice killed, a grep or glob that stopped), when one did.
    pub fn stopped_by(&self) -> Option<&str> {
        self.error.as_ref()?.get("interrupted")?.as_str()
    }

    /// Whether the policy stopped the call.
    pub fn denied(&self) -> bool {
        self.error_code().is_some_and(|c| DENIAL_CODES.contains(&c))
    }

    /// What the call's output says of a model's work, when it is a model
    /// call's.
    pub fn model_use(&self) -> Option<ModelUse> {
        match (self.outcome, self.capped, &self.output) {
            (Outcome::Ok, false, Some(out)) => ModelUse::of(out),
            _ => None,
        }
    }
}

/// One model call's work, as its output reports it (the `model` flow's
/// output: `model`, `usage {inputTokens, outputTokens, cachedTokens}` and
/// `latencyMs`, beside `text`, `toolCalls`, `stopReason`, `firstTokenMs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUse {
    /// The model that answered.
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    pub latency_ms: u64,
}

impl ModelUse {
    /// The work `output` reports; `None` for an output of another shape.
    /// The audit names no flow: the shape tells a model call.
    pub fn of(output: &Value) -> Option<ModelUse> {
        let usage = output.get("usage")?;
        let tokens = |k: &str| usage.get(k).and_then(Value::as_u64);
        Some(ModelUse {
            model: output.get("model")?.as_str()?.to_string(),
            input_tokens: tokens("inputTokens")?,
            output_tokens: tokens("outputTokens")?,
            cached_tokens: tokens("cachedTokens").unwrap_or(0),
            latency_ms: output.get("latencyMs")?.as_u64()?,
        })
    }
}

/// A run's model calls summed up: what it spent on models.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelTotals {
    /// Model calls the run made.
    pub calls: u64,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// Their latencies added up.
    pub latency_ms: u64,
    /// Model calls a resume copied from the run it continued: they did not
    /// run again, so the sums leave them out.
    pub replayed: u64,
}

impl ModelTotals {
    /// The totals of `calls`.
    #[cfg(test)]
    pub fn of(calls: &[Call]) -> ModelTotals {
        let mut t = ModelTotals::default();
        calls.iter().for_each(|c| t.add(c));
        t
    }

    /// Counts call `c`, when it is a model call.
    pub fn add(&mut self, c: &Call) {
        let Some(u) = c.model_use() else { return };
        if c.replayed_from.is_some() {
            self.replayed += 1;
            return;
        }
        self.calls += 1;
        self.input_tokens += u.input_tokens;
        self.cached_tokens += u.cached_tokens;
        self.output_tokens += u.output_tokens;
        self.latency_ms += u.latency_ms;
    }
}

/// A run and its calls in chain order: the shape `sluice audit show
/// --json` has ([`write_json`] writes it one call at a time).
#[cfg(test)]
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub run: Run,
    pub integrity: Integrity,
    pub calls: Vec<Call>,
    /// What its model calls spent (all zero for a run without any).
    pub models: ModelTotals,
}

impl Run {
    /// Run `r` as the views show it.
    pub fn of(r: &StoredRun) -> Run {
        Run {
            id: r.id.clone(),
            script: r.script.clone(),
            script_sha256: r.script_sha256.clone(),
            policies: json(&r.policies),
            args: json(&r.args),
            workspace: r.workspace.clone(),
            status: r.status.clone(),
            error: r.error.clone(),
            started_ms: r.started_ms,
            ended_ms: r.ended_ms,
            duration_ms: r.ended_ms.map(|e| e - r.started_ms),
            version: r.version.clone(),
            random_seed: r.random_seed,
            resumed_from: r.resumed_from.clone(),
            pid: r.pid,
            pid_start: r.pid_start,
            head: r.head.clone(),
            seal: r.seal.clone(),
            n: r.n,
            prior: r.prior.clone(),
            prior_rows: r.prior_rows,
        }
    }
}

impl Outcome {
    /// How call `c` ended; a call without a status is running while its
    /// run is live, and unknown once the run is not.
    pub fn of(c: &StoredCall, run_live: bool) -> Outcome {
        match c.status.as_deref() {
            Some("ok") => Outcome::Ok,
            Some(_) => Outcome::Error,
            None if run_live => Outcome::Pending,
            None => Outcome::Unknown,
        }
    }
}

impl Call {
    /// Call `c` as the views show it.
    pub fn of(c: &StoredCall, run_live: bool) -> Call {
        Call {
            run: c.run.clone(),
            n: c.n,
            task: c.task.clone(),
            seq: c.seq,
            client: c.client.clone(),
            flow: c.flow.clone(),
            tier: c.tier.clone(),
            started_ms: c.started_ms,
            outcome: Outcome::of(c, run_live),
            status: c.status.clone(),
            duration_us: c.duration_us,
            input: json(&c.input),
            capabilities: json(&c.capabilities),
            decisions: json(&c.decisions),
            late_decisions: c.late_decisions.as_deref().map(json),
            route: c.route.as_deref().map(json),
            redacted: json(&c.redacted),
            replayed_from: c.replayed_from.clone(),
            output: c.output.as_deref().map(json),
            error: c.error.as_deref().map(json),
            capped: c.capped,
            prev: c.prev.clone(),
            hash: c.hash.clone(),
            outcome_hash: c.outcome_hash.clone(),
            parts: c.parts.as_ref().map(|p| json(&p.column)),
            overlaps: Vec::new(),
        }
    }
}

/// When a call ran, in microseconds since the epoch, as far as the record
/// tells: it stores the start in whole milliseconds (the true start is up
/// to 1 ms later) and the duration in microseconds.
#[derive(Debug, Clone, Copy)]
struct Span {
    n: i64,
    start_us: i64,
    /// `i64::MAX` for a call still running.
    end_us: i64,
}

/// How far the stored start may lag the true one.
const START_SLACK_US: i64 = 1000;

impl Span {
    /// Call `c`'s span; `None` for a call that did not run in this run (a
    /// resume's copy) or whose end is unknown (its process died).
    fn of(c: &StoredCall, run_live: bool) -> Option<Span> {
        if c.replayed_from.is_some() {
            return None;
        }
        let start_us = c.started_ms.saturating_mul(1000);
        let end_us = match (c.duration_us, Outcome::of(c, run_live)) {
            (Some(d), _) => start_us.saturating_add(d),
            (None, Outcome::Pending) => i64::MAX,
            (None, _) => return None,
        };
        Some(Span {
            n: c.n,
            start_us,
            end_us,
        })
    }

    /// Whether `later` (which starts no earlier) surely began before this
    /// span ended, and this one before `later` ended, whatever the
    /// milliseconds' rounding hid: two calls one after the other never
    /// count, one that overlapped by less than a millisecond may not.
    fn overlaps(&self, later: &Span) -> bool {
        later.start_us.saturating_add(START_SLACK_US) <= self.end_us
            && self.start_us.saturating_add(START_SLACK_US) <= later.end_us
    }
}

/// For each call with a span, the calls whose spans overlap its own.
fn overlapping(mut spans: Vec<Span>) -> HashMap<i64, Vec<i64>> {
    spans.sort_by_key(|s| (s.start_us, s.n));
    let mut found: HashMap<i64, Vec<i64>> = HashMap::new();
    for (i, a) in spans.iter().enumerate() {
        // Sorted by start: past the first span that starts too late to
        // overlap `a`, every one does.
        let later = spans[i + 1..]
            .iter()
            .take_while(|b| b.start_us.saturating_add(START_SLACK_US) <= a.end_us);
        for b in later.filter(|b| a.overlaps(b)) {
            found.entry(a.n).or_default().push(b.n);
            found.entry(b.n).or_default().push(a.n);
        }
    }
    for list in found.values_mut() {
        list.sort_unstable();
    }
    found
}

/// A JSON column as a value; text that does not parse (a damaged row) is
/// kept as a string rather than hidden.
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// A run and all its calls, held whole (for a run of any size, a view
/// reads them through [`Recorded`] instead, one at a time).
#[cfg(test)]
pub fn show(db: &dyn Db, run_id: &str) -> Result<RunView, String> {
    let integrity = Integrity::of(&super::verify::verify(db, run_id)?);
    let (run, recorded) = Recorded::open(db, run_id)?;
    let mut calls = Vec::new();
    recorded.each(&mut |c| {
        calls.push(c);
        Ok(())
    })?;
    Ok(RunView {
        run,
        integrity,
        models: ModelTotals::of(&calls),
        calls,
    })
}

/// A run's calls as a view reads them, in chain order, once per pass: a
/// view of a run of any size holds one call at a time.
pub trait Calls {
    /// Hands each call to `f`, in chain order, stopping at its first error.
    fn each(&self, f: &mut dyn FnMut(Call) -> Result<(), String>) -> Result<(), String>;
}

/// Writes `sluice audit show --json` of `run` to `out`, one call at a
/// time: the bytes `serde_json::to_string_pretty` makes of the
/// [`RunView`], and a line break.
pub fn write_json(
    run: &Run,
    integrity: &Integrity,
    calls: &dyn Calls,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let mut put = |text: &str| {
        out.write_all(text.as_bytes())
            .map_err(|e| format!("cannot write the view: {e}"))
    };
    put(&format!(
        "{{\n  \"run\": {},\n  \"integrity\": {},\n  \"calls\": [",
        pretty(run, 1),
        pretty(integrity, 1)
    ))?;
    let mut models = ModelTotals::default();
    let mut first = true;
    let broken = integrity.broken_at();
    calls.each(&mut |c| {
        models.add(&c);
        let sep = if first { "\n    " } else { ",\n    " };
        first = false;
        let text = match &broken {
            Some((n, broken)) if *n == c.n => pretty(&Marked { call: &c, broken }, 2),
            _ => pretty(&c, 2),
        };
        put(&format!("{sep}{text}"))
    })?;
    let close = if first { "]" } else { "\n  ]" };
    put(&format!(
        "{close},\n  \"models\": {}\n}}\n",
        pretty(&models, 1)
    ))
}

/// The call where the record breaks, as `--json` gives it: its fields,
/// then `broken`.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    call: &'a Call,
    broken: &'a Broken,
}

/// `v` as pretty JSON nested `depth` levels deep.
fn pretty<T: Serialize>(v: &T, depth: usize) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
}

/// Calls held in memory (a [`RunView`]'s).
#[cfg(test)]
pub struct HeldCalls<'a>(pub &'a [Call]);

#[cfg(test)]
impl Calls for HeldCalls<'_> {
    fn each(&self, f: &mut dyn FnMut(Call) -> Result<(), String>) -> Result<(), String> {
        self.0.iter().try_for_each(|c| f(c.clone()))
    }
}

/// A run's calls read from the record on each pass, each with the calls
/// it overlapped (found once, from every call's span).
pub struct Recorded<'a> {
    db: &'a dyn Db,
    run_id: String,
    live: bool,
    overlaps: HashMap<i64, Vec<i64>>,
}

impl<'a> Recorded<'a> {
    /// Run `run_id` and its calls in the record.
    pub fn open(db: &'a dyn Db, run_id: &str) -> Result<(Run, Recorded<'a>), String> {
        let run = rows::load_run(db, run_id)?;
        let live = run.running();
        let recorded = Recorded {
            db,
            run_id: run_id.to_string(),
            live,
            overlaps: overlaps_in(db, &run)?,
        };
        Ok((Run::of(&run), recorded))
    }
}

impl Calls for Recorded<'_> {
    fn each(&self, f: &mut dyn FnMut(Call) -> Result<(), String>) -> Result<(), String> {
        rows::each_call(self.db, &self.run_id, Output::Resolved, rows::db, |c| {
            let mut call = Call::of(&c, self.live);
            call.overlaps = self.overlaps.get(&call.n).cloned().unwrap_or_default();
            f(call)
        })
    }
}

/// Call `#n` of a run, with its run.
pub fn call(db: &dyn Db, run_id: &str, n: i64) -> Result<(Run, Call), String> {
    let run = rows::load_run(db, run_id)?;
    match rows::call(db, run_id, n).map_err(rows::db)? {
        Some(c) => {
            let mut call = Call::of(&c, run.running());
            call.overlaps = overlaps_of(db, &run, n)?;
            Ok((Run::of(&run), call))
        }
        None => {
            let count = rows::call_count(db, run_id).map_err(rows::db)?;
            Err(format!(
                "run {run_id} has no call #{n} (it has {}); `sluice audit show {run_id}` lists them",
                plural(count, "call", "calls")
            ))
        }
    }
}

/// The calls of run `run` that overlapped its call `#n`.
fn overlaps_of(db: &dyn Db, run: &StoredRun, n: i64) -> Result<Vec<i64>, String> {
    Ok(overlaps_in(db, run)?.remove(&n).unwrap_or_default())
}

/// Which calls of run `run` each call overlapped, from every call's span.
fn overlaps_in(db: &dyn Db, run: &StoredRun) -> Result<HashMap<i64, Vec<i64>>, String> {
    let live = run.running();
    let mut spans = Vec::new();
    rows::each_stored_call(db, &run.id, Output::Inline, rows::db, |c| {
        spans.extend(Span::of(&c, live));
        Ok(())
    })?;
    Ok(overlapping(spans))
}

#[cfg(test)]
#[path = "show_tests.rs"]
mod tests;

#[cfg(test)]
mod overlap_tests {
    use super::*;
    use crate::audit::fixtures::*;
    use crate::audit::render::{render_call, render_show};
    use rusqlite::Connection;

    fn span(n: i64, start_ms: i64, duration_us: i64) -> Span {
        Span {
            n,
            start_us: start_ms * 1000,
            end_us: start_ms * 1000 + duration_us,
        }
    }

    #[test]
    fn spans_overlap_only_where_the_millisecond_rounding_cannot_explain_it() {
        // 1.5 ms from ms 0, the next from ms 1: the first may have started
        // at 0.9 and ended at 2.4, the second at 1.95 was after it.
        assert!(!span(1, 0, 1500).overlaps(&span(2, 1, 10_000)));
        // Both within ms 0 and under a millisecond: may be one after the other.
        assert!(!span(1, 0, 500).overlaps(&span(2, 0, 500)));
        // 3 ms from ms 0, the next from ms 1 for 1 ms: surely together.
        assert!(span(1, 0, 3000).overlaps(&span(2, 1, 1000)));
        let found = overlapping(vec![
            span(1, 0, 300_000),
            span(2, 5, 300_000),
            span(3, 400, 1000),
        ]);
        assert_eq!(found.get(&1), Some(&vec![2]));
        assert_eq!(found.get(&2), Some(&vec![1]));
        assert_eq!(found.get(&3), None);
    }

    /// Run `c1`: #1 (task 0.1) and #2 (task 0.2) ran 300 ms each, 5 ms
    /// apart; #3 (task 0) ran after both.
    fn concurrent(conn: &Connection) {
        let mut prev = insert_run(conn, "c1", "/w/tasks.lua", T0);
        for (n, path) in [(1, "a.txt"), (2, "b.txt"), (3, "c.txt")] {
            let s = spec("read", "sealed", serde_json::json!({ "path": path }));
            prev = insert_call(conn, "c1", &prev, n, &s);
        }
        sql(
            conn,
            &format!(
                "UPDATE calls SET task = '0.1', started_ms = {T0}, duration_us = 300000 WHERE n = 1;
                 UPDATE calls SET task = '0.2', started_ms = {T0} + 5, duration_us = 300000 WHERE n = 2;
                 UPDATE calls SET started_ms = {T0} + 400 WHERE n = 3;"
            ),
        );
        rehash(conn, "c1");
        seal(conn, "c1", "ok");
    }

    #[test]
    fn show_names_the_calls_each_one_ran_beside_and_its_task() {
        let (_d, conn) = db();
        concurrent(&conn);
        let view = show(&conn, "c1").unwrap();
        let got: Vec<(&str, &[i64])> = view
            .calls
            .iter()
            .map(|c| (c.task.as_str(), c.overlaps.as_slice()))
            .collect();
        assert_eq!(got, [("0.1", &[2][..]), ("0.2", &[1][..]), ("0", &[][..])]);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["calls"][0]["overlaps"], serde_json::json!([2]));
        assert_eq!(json["calls"][2]["overlaps"], serde_json::json!([]));
        let text = render_show(&view, &Facts);
        let header: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with("#  "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            [
                "#", "TASK", "AT", "FLOW", "TIER", "DECISION", "OUTCOME", "TOOK", "OVERLAPS",
                "INPUT"
            ]
        );
        let row = |n: &str| text.lines().find(|l| l.starts_with(n)).unwrap().to_string();
        let cells =
            |n: &str| -> Vec<String> { row(n).split_whitespace().map(str::to_string).collect() };
        assert_eq!(cells("#1")[1], "0.1", "{text}");
        assert_eq!(cells("#1")[8], "#2", "{text}");
        assert_eq!(cells("#2")[8], "#1", "{text}");
        assert_eq!(cells("#3")[8], "—", "{text}");
        assert!(
            text.contains("\nOVERLAPS: the calls that were running"),
            "{text}"
        );
        let (run, c) = call(&conn, "c1", 2).unwrap();
        assert_eq!(c.overlaps, [1]);
        let page = render_call(&run, &c);
        assert!(
            page.contains("overlaps     #1 (running while it ran)"),
            "{page}"
        );
        let (run, c) = call(&conn, "c1", 3).unwrap();
        assert!(!render_call(&run, &c).contains("overlaps"));
    }

    #[test]
    fn a_run_of_one_task_one_call_at_a_time_keeps_the_plain_timeline() {
        let (_d, conn) = db();
        standard(&conn, "r1");
        let view = show(&conn, "r1").unwrap();
        assert!(view.calls.iter().all(|c| c.overlaps.is_empty()));
        let text = render_show(&view, &Facts);
        let header: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with("#  "))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            ["#", "AT", "FLOW", "TIER", "DECISION", "ROUTE", "OUTCOME", "TOOK", "INPUT"]
        );
        assert!(!text.contains("OVERLAPS"), "{text}");
    }

    #[test]
    fn copies_and_calls_of_unknown_end_overlap_nothing_and_a_running_call_runs_on() {
        let (_d, conn) = db();
        concurrent(&conn);
        // #1 copied by a resume: it did not run here.
        sql(
            &conn,
            "UPDATE calls SET replayed_from = 'older' WHERE n = 1",
        );
        assert!(show(&conn, "c1")
            .unwrap()
            .calls
            .iter()
            .all(|c| c.overlaps.is_empty()));
        // #2 never finished and the process died: its end is unknown.
        sql(
            &conn,
            "UPDATE calls SET replayed_from = NULL WHERE n = 1;
             UPDATE calls SET status = NULL, duration_us = NULL WHERE n = 2;",
        );
        let view = show(&conn, "c1").unwrap();
        assert!(view.calls.iter().all(|c| c.overlaps.is_empty()));
        // ... while the run is live it is still running, beside #3 too.
        sql(
            &conn,
            "UPDATE runs SET status = 'running', seal = NULL WHERE id = 'c1'",
        );
        let view = show(&conn, "c1").unwrap();
        let got: Vec<&[i64]> = view.calls.iter().map(|c| c.overlaps.as_slice()).collect();
        assert_eq!(got, [&[2][..], &[1, 3][..], &[2][..]]);
    }
}
