//! `sluice audit show`: a run and its calls as views, JSON columns parsed
//! (what `--json` prints; [`super::render`] turns them into text).
//!
//! A call whose `status` is NULL had its intent written and synced and
//! never got an outcome: while its run is live it is in progress, after that
//! its outcome is unknown, and every view says so in those words.

use super::render::plural;
use super::rows::{self, Output, StoredCall, StoredRun};
use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

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
    pub fn of(calls: &[Call]) -> ModelTotals {
        let mut t = ModelTotals::default();
        for (c, u) in calls.iter().filter_map(|c| Some((c, c.model_use()?))) {
            if c.replayed_from.is_some() {
                t.replayed += 1;
                continue;
            }
            t.calls += 1;
            t.input_tokens += u.input_tokens;
            t.cached_tokens += u.cached_tokens;
            t.output_tokens += u.output_tokens;
            t.latency_ms += u.latency_ms;
        }
        t
    }
}

/// A run and its calls in chain order: `sluice audit show`.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub run: Run,
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
        }
    }
}

/// A JSON column as a value; text that does not parse (a damaged row) is
/// kept as a string rather than hidden.
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// A run and all its calls.
pub fn show(conn: &Connection, run_id: &str) -> Result<RunView, String> {
    let run = rows::load_run(conn, run_id)?;
    let live = run.running();
    let mut calls = Vec::new();
    rows::each_call(conn, run_id, Output::Resolved, rows::db, |c| {
        calls.push(Call::of(&c, live));
        Ok(())
    })?;
    Ok(RunView {
        run: Run::of(&run),
        models: ModelTotals::of(&calls),
        calls,
    })
}

/// Call `#n` of a run, with its run.
pub fn call(conn: &Connection, run_id: &str, n: i64) -> Result<(Run, Call), String> {
    let run = rows::load_run(conn, run_id)?;
    match rows::call(conn, run_id, n).map_err(rows::db)? {
        Some(c) => Ok((Run::of(&run), Call::of(&c, run.running()))),
        None => {
            let count = rows::call_count(conn, run_id).map_err(rows::db)?;
            Err(format!(
                "run {run_id} has no call #{n} (it has {}); `sluice audit show {run_id}` lists them",
                plural(count, "call", "calls")
            ))
        }
    }
}

#[cfg(test)]
#[path = "show_tests.rs"]
mod tests;
