//! Reading the record: `sluice audit list|show|export|verify`.
//!
//! The functions here return plain serializable structs (what `--json`
//! prints); the `render_*` functions turn them into text for a terminal.
//! Nothing here writes to the database.
//!
//! A call whose `status` is NULL had its intent written and synced and
//! never got an outcome: while its run is live it is in progress, after that
//! its outcome is unknown, and every view says so in those words.

use super::chain::{self, CallIntent, CallOutcome, Reading, RunEnd, RunHead, RunLink, Seal};
use super::store;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Tables are laid out to fit a terminal this wide.
const WIDTH: usize = 100;

/// Error codes that mean the policy stopped a call: refused, or an ask
/// that nobody approved.
const DENIAL_CODES: [&str; 2] = ["permission_denied", "permission_required"];

// ---------------------------------------------------------------------------
// Rows as stored: JSON columns kept as their text, which the hashes cover.

const RUN_COLUMNS: &str = "id, script, script_sha256, policies, args, workspace, started_ms, \
ended_ms, status, error, version, random_seed, resumed_from, pid, pid_start, head, seal, ceiling, \
n, prior, prior_rows";

struct RunRow {
    id: String,
    script: String,
    script_sha256: Option<String>,
    policies: String,
    args: String,
    workspace: String,
    started_ms: i64,
    ended_ms: Option<i64>,
    status: String,
    error: Option<String>,
    version: String,
    random_seed: i64,
    resumed_from: Option<String>,
    pid: i64,
    pid_start: i64,
    head: String,
    seal: Option<String>,
    ceiling: String,
    n: Option<i64>,
    prior: Option<String>,
    prior_rows: Option<i64>,
}

impl RunRow {
    fn read(r: &rusqlite::Row) -> rusqlite::Result<RunRow> {
        Ok(RunRow {
            id: r.get(0)?,
            script: r.get(1)?,
            script_sha256: r.get(2)?,
            policies: r.get(3)?,
            args: r.get(4)?,
            workspace: r.get(5)?,
            started_ms: r.get(6)?,
            ended_ms: r.get(7)?,
            status: r.get(8)?,
            error: r.get(9)?,
            version: r.get(10)?,
            random_seed: r.get(11)?,
            resumed_from: r.get(12)?,
            pid: r.get(13)?,
            pid_start: r.get(14)?,
            head: r.get(15)?,
            seal: r.get(16)?,
            ceiling: r.get(17)?,
            n: r.get(18)?,
            prior: r.get(19)?,
            prior_rows: r.get(20)?,
        })
    }

    /// The fields its head covers; `chained` for a run recorded since runs
    /// were chained to each other (whose head covers its link too).
    fn head_fields(&self, chained: bool) -> RunHead<'_> {
        RunHead {
            id: &self.id,
            script: &self.script,
            script_sha256: self.script_sha256.as_deref(),
            policies: &self.policies,
            args: &self.args,
            workspace: &self.workspace,
            started_ms: self.started_ms,
            version: &self.version,
            random_seed: self.random_seed,
            resumed_from: self.resumed_from.as_deref(),
            ceiling: &self.ceiling,
            pid: self.pid,
            pid_start: self.pid_start,
            link: chained.then(|| RunLink {
                n: self.n.unwrap_or(0),
                prior: self.prior.as_deref(),
                prior_rows: self.prior_rows,
            }),
        }
    }

    fn running(&self) -> bool {
        self.status == "running"
    }

    fn view(&self) -> Run {
        Run {
            id: self.id.clone(),
            script: self.script.clone(),
            script_sha256: self.script_sha256.clone(),
            policies: json(&self.policies),
            args: json(&self.args),
            workspace: self.workspace.clone(),
            status: self.status.clone(),
            error: self.error.clone(),
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            duration_ms: self.ended_ms.map(|e| e - self.started_ms),
            version: self.version.clone(),
            random_seed: self.random_seed,
            resumed_from: self.resumed_from.clone(),
            pid: self.pid,
            pid_start: self.pid_start,
            head: self.head.clone(),
            seal: self.seal.clone(),
            n: self.n,
            prior: self.prior.clone(),
            prior_rows: self.prior_rows,
        }
    }
}

const CALL_COLUMNS: &str = concat!(
    "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, redacted, replayed_from, started_ms, prev, hash, status, ",
    super::store::output_column!(),
    ", error, capped, duration_us, late_decisions, outcome_hash, output_ref"
);

/// The same columns with `output` as the row holds it (inline only): what
/// `verify` reads, checking each output kept by content once, not per row.
const CHAIN_COLUMNS: &str = "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, redacted, replayed_from, started_ms, prev, hash, status, output, error, capped, duration_us, \
late_decisions, outcome_hash, output_ref";

struct CallRow {
    run: String,
    task: String,
    seq: i64,
    n: i64,
    flow: String,
    tier: String,
    input: String,
    capabilities: String,
    decisions: String,
    route: Option<String>,
    redacted: String,
    replayed_from: Option<String>,
    started_ms: i64,
    prev: String,
    hash: String,
    status: Option<String>,
    output: Option<String>,
    error: Option<String>,
    capped: bool,
    duration_us: Option<i64>,
    late_decisions: Option<String>,
    outcome_hash: Option<String>,
    /// The SHA-256 of an output kept by content (in `outputs`).
    output_ref: Option<String>,
}

impl CallRow {
    fn read(r: &rusqlite::Row) -> rusqlite::Result<CallRow> {
        Ok(CallRow {
            run: r.get(0)?,
            task: r.get(1)?,
            seq: r.get(2)?,
            n: r.get(3)?,
            flow: r.get(4)?,
            tier: r.get(5)?,
            input: r.get(6)?,
            capabilities: r.get(7)?,
            decisions: r.get(8)?,
            route: r.get(9)?,
            redacted: r.get(10)?,
            replayed_from: r.get(11)?,
            started_ms: r.get(12)?,
            prev: r.get(13)?,
            hash: r.get(14)?,
            status: r.get(15)?,
            output: r.get(16)?,
            error: r.get(17)?,
            capped: r.get::<_, i64>(18)? != 0,
            duration_us: r.get(19)?,
            late_decisions: r.get(20)?,
            outcome_hash: r.get(21)?,
            output_ref: r.get(22)?,
        })
    }

    fn intent(&self) -> CallIntent<'_> {
        CallIntent {
            task: &self.task,
            seq: self.seq,
            n: self.n,
            flow: &self.flow,
            tier: &self.tier,
            input: &self.input,
            capabilities: &self.capabilities,
            decisions: &self.decisions,
            route: self.route.as_deref(),
            replayed_from: self.replayed_from.as_deref(),
            started_ms: self.started_ms,
        }
    }

    /// The outcome fields, when the row has all the outcome's mandatory
    /// ones (the writer sets them together).
    fn outcome(&self) -> Option<CallOutcome<'_>> {
        Some(CallOutcome {
            status: self.status.as_deref()?,
            output: self.output.as_deref(),
            error: self.error.as_deref(),
            capped: self.capped,
            duration_us: self.duration_us?,
            late_decisions: self.late_decisions.as_deref()?,
            redacted: &self.redacted,
        })
    }

    /// How the call ended; a call without a status is running while its
    /// run is live, and unknown once the run is not.
    fn ended(&self, run_live: bool) -> Outcome {
        match self.status.as_deref() {
            Some("ok") => Outcome::Ok,
            Some(_) => Outcome::Error,
            None if run_live => Outcome::Pending,
            None => Outcome::Unknown,
        }
    }

    fn view(&self, run_live: bool) -> Call {
        Call {
            run: self.run.clone(),
            n: self.n,
            task: self.task.clone(),
            seq: self.seq,
            flow: self.flow.clone(),
            tier: self.tier.clone(),
            started_ms: self.started_ms,
            outcome: self.ended(run_live),
            status: self.status.clone(),
            duration_us: self.duration_us,
            input: json(&self.input),
            capabilities: json(&self.capabilities),
            decisions: json(&self.decisions),
            late_decisions: self.late_decisions.as_deref().map(json),
            route: self.route.as_deref().map(json),
            redacted: json(&self.redacted),
            replayed_from: self.replayed_from.clone(),
            output: self.output.as_deref().map(json),
            error: self.error.as_deref().map(json),
            capped: self.capped,
            prev: self.prev.clone(),
            hash: self.hash.clone(),
            outcome_hash: self.outcome_hash.clone(),
        }
    }
}

/// A JSON column as a value; text that does not parse (a damaged row) is
/// kept as a string rather than hidden.
fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn db(e: rusqlite::Error) -> String {
    format!("reading the audit database: {e}")
}

fn load_run(conn: &Connection, id: &str) -> Result<RunRow, String> {
    conn.query_row(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        [id],
        RunRow::read,
    )
    .optional()
    .map_err(db)?
    .ok_or_else(|| {
        format!("no run {id:?} in the audit database; `sluice audit list` shows the runs")
    })
}

/// Hands each call row of `run` to `f` in chain order, without holding
/// them all (a run may hold thousands of calls with large outputs).
fn for_each_call<E: From<String>>(
    conn: &Connection,
    run: &str,
    f: impl FnMut(CallRow) -> Result<(), E>,
) -> Result<(), E> {
    for_each_call_as(conn, run, CALL_COLUMNS, f)
}

fn for_each_call_as<E: From<String>>(
    conn: &Connection,
    run: &str,
    columns: &str,
    mut f: impl FnMut(CallRow) -> Result<(), E>,
) -> Result<(), E> {
    let sql = format!("SELECT {columns} FROM calls WHERE run = ?1 ORDER BY n");
    let mut stmt = conn.prepare(&sql).map_err(db)?;
    let mut rows = stmt.query([run]).map_err(db)?;
    while let Some(row) = rows.next().map_err(db)? {
        f(CallRow::read(row).map_err(db)?)?;
    }
    Ok(())
}

struct ReadingRow {
    task: String,
    seq: i64,
    kind: String,
    value: f64,
}

/// The run's clock readings in the order the seal covers them.
fn load_readings(conn: &Connection, run: &str) -> Result<Vec<ReadingRow>, String> {
    let mut stmt = conn
        .prepare("SELECT task, seq, kind, value FROM readings WHERE run = ?1 ORDER BY task, seq")
        .map_err(db)?;
    let rows = stmt
        .query_map([run], |r| {
            Ok(ReadingRow {
                task: r.get(0)?,
                seq: r.get(1)?,
                kind: r.get(2)?,
                value: r.get(3)?,
            })
        })
        .map_err(db)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db)
}

// ---------------------------------------------------------------------------
// What the views return.

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
}

impl Call {
    /// The error's `code`, when the call failed.
    pub fn error_code(&self) -> Option<&str> {
        self.error.as_ref()?.get("code")?.as_str()
    }

    /// Whether the policy stopped the call.
    pub fn denied(&self) -> bool {
        self.error_code().is_some_and(|c| DENIAL_CODES.contains(&c))
    }
}

/// A run and its calls in chain order: `sluice audit show`.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub run: Run,
    pub calls: Vec<Call>,
}

/// A line of `sluice audit list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub script: String,
    pub status: String,
    pub calls: i64,
    pub irreversible: i64,
    /// Calls that ended `permission_denied` or `permission_required`.
    pub denials: i64,
    /// Calls whose outcome is unknown (0 while the run is live).
    pub unknown_outcomes: i64,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<i64>,
}

/// The newest runs, and how many there are in all.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub total: i64,
    pub runs: Vec<RunSummary>,
}

// ---------------------------------------------------------------------------
// list

/// The newest `limit` runs (0: all), newest first, with their counts.
pub fn list(conn: &Connection, limit: usize) -> Result<Listing, String> {
    // The limit applies before the join, so only the runs shown are counted.
    // A damaged error column must not fail the listing: json_extract
    // raises on malformed JSON, so it is only reached through json_valid.
    let sql = "SELECT r.id, r.script, r.status, r.started_ms, r.ended_ms, count(c.run),
        coalesce(sum(c.tier = 'irreversible'), 0),
        coalesce(sum(CASE WHEN json_valid(c.error) THEN json_extract(c.error, '$.code') END
                     IN ('permission_denied', 'permission_required')), 0),
        coalesce(sum(c.run IS NOT NULL AND c.status IS NULL), 0)
      FROM (SELECT rowid AS rid, * FROM runs ORDER BY started_ms DESC, rowid DESC LIMIT ?1) r
      LEFT JOIN calls c ON c.run = r.id
      GROUP BY r.rid ORDER BY r.started_ms DESC, r.rid DESC";
    let limit = if limit == 0 { -1 } else { limit as i64 };
    let mut stmt = conn.prepare(sql).map_err(db)?;
    let runs = stmt
        .query_map([limit], summary)
        .map_err(db)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db)?;
    let total = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .map_err(db)?;
    Ok(Listing { total, runs })
}

fn summary(r: &rusqlite::Row) -> rusqlite::Result<RunSummary> {
    let status: String = r.get(2)?;
    let started_ms: i64 = r.get(3)?;
    let ended_ms: Option<i64> = r.get(4)?;
    let unknown: i64 = r.get(8)?;
    Ok(RunSummary {
        id: r.get(0)?,
        script: r.get(1)?,
        calls: r.get(5)?,
        irreversible: r.get(6)?,
        denials: r.get(7)?,
        // A live run's last call may simply be running.
        unknown_outcomes: if status == "running" { 0 } else { unknown },
        status,
        started_ms,
        ended_ms,
        duration_ms: ended_ms.map(|e| e - started_ms),
    })
}

/// The `sluice audit list` table, clipped to fit the terminal.
pub fn render_list(listing: &Listing) -> String {
    if listing.runs.is_empty() {
        return "no runs recorded yet: `sluice run` records each run here\n".to_string();
    }
    let mut table = Table::new(&[
        "ID",
        "SCRIPT",
        "STATUS",
        "CALLS",
        "IRREV",
        "DENIED",
        "TOOK",
        "STARTED (UTC)",
    ]);
    for run in &listing.runs {
        table.row(vec![
            run.id.clone(),
            run.script.clone(),
            run.status.clone(),
            run.calls.to_string(),
            run.irreversible.to_string(),
            run.denials.to_string(),
            run_took(&run.status, run.duration_ms),
            utc(run.started_ms),
        ]);
    }
    let mut out = table.render(1, Clip::Left, &[3, 4, 5]);
    for run in listing.runs.iter().filter(|r| r.unknown_outcomes > 0) {
        let _ = writeln!(
            out,
            "run {}: {} with OUTCOME UNKNOWN (the process died mid-call); `sluice audit show {}` names it",
            visible(&run.id),
            plural(run.unknown_outcomes, "call", "calls"),
            visible(&run.id),
        );
    }
    if listing.total > listing.runs.len() as i64 {
        let _ = writeln!(
            out,
            "({} of {} runs shown; --limit 0 shows all)",
            listing.runs.len(),
            listing.total
        );
    }
    out
}

fn run_took(status: &str, duration_ms: Option<i64>) -> String {
    match duration_ms {
        Some(ms) => took_us(ms.saturating_mul(1000)),
        None if status == "running" => "running".to_string(),
        None => "—".to_string(),
    }
}

// ---------------------------------------------------------------------------
// show

/// A run and all its calls.
pub fn show(conn: &Connection, run_id: &str) -> Result<RunView, String> {
    let run = load_run(conn, run_id)?;
    let live = run.running();
    let mut calls = Vec::new();
    for_each_call(conn, run_id, |c| {
        calls.push(c.view(live));
        Ok::<(), String>(())
    })?;
    Ok(RunView {
        run: run.view(),
        calls,
    })
}

/// Call `#n` of a run, with its run.
pub fn call(conn: &Connection, run_id: &str, n: i64) -> Result<(Run, Call), String> {
    let run = load_run(conn, run_id)?;
    let row = conn
        .query_row(
            &format!("SELECT {CALL_COLUMNS} FROM calls WHERE run = ?1 AND n = ?2"),
            rusqlite::params![run_id, n],
            CallRow::read,
        )
        .optional()
        .map_err(db)?;
    match row {
        Some(c) => Ok((run.view(), c.view(run.running()))),
        None => {
            let count: i64 = conn
                .query_row("SELECT count(*) FROM calls WHERE run = ?1", [run_id], |r| {
                    r.get(0)
                })
                .map_err(db)?;
            Err(format!(
                "run {run_id} has no call #{n} (it has {}); `sluice audit show {run_id}` lists them",
                plural(count, "call", "calls")
            ))
        }
    }
}

/// The header and the timeline of `sluice audit show`.
pub fn render_show(view: &RunView) -> String {
    let mut out = render_header(&view.run, &view.calls);
    out.push('\n');
    if view.calls.is_empty() {
        out.push_str("no flow calls recorded\n");
        return out;
    }
    out.push_str(&render_timeline(&view.run, &view.calls));
    if view.calls.iter().any(|c| c.outcome == Outcome::Unknown) {
        out.push_str(
            "\nOUTCOME UNKNOWN: the call's intent was recorded and synced before it ran, then the \
process died before its outcome was written; it may or may not have taken effect.\n",
        );
    }
    let _ = writeln!(
        out,
        "`sluice audit show {} --call N` shows call #N whole.",
        visible(&view.run.id)
    );
    out
}

fn render_header(run: &Run, calls: &[Call]) -> String {
    let mut h = Lines::default();
    h.field("run", &run.id);
    let sha = run.script_sha256.as_deref().map_or("none".into(), short);
    h.field("script", &format!("{} (sha256 {sha})", run.script));
    h.field("policies", &policies_line(&run.policies));
    h.field("args", &compact(&run.args));
    h.field("workspace", &run.workspace);
    h.field("status", &status_line(run));
    h.field("started", &started_line(run));
    h.field("version", &run.version);
    if let Some(from) = &run.resumed_from {
        let replayed = calls.iter().filter(|c| c.replayed_from.is_some()).count();
        let what = plural(replayed as i64, "call", "calls");
        h.field(
            "resumed",
            &format!("from run {from} ({what} replayed from it)"),
        );
    }
    h.field("chain", seal_line(run));
    h.field("calls", &counts_line(calls));
    h.0
}

fn policies_line(policies: &Value) -> String {
    let Some(list) = policies.as_array() else {
        return compact(policies);
    };
    if list.is_empty() {
        return "none".to_string();
    }
    let named = list.iter().map(|p| {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("?");
        match p.get("sha256").and_then(Value::as_str) {
            Some(sha) => format!("{name} (sha256 {})", short(sha)),
            None => name.to_string(),
        }
    });
    named.collect::<Vec<_>>().join(", ")
}

fn status_line(run: &Run) -> String {
    match &run.error {
        Some(e) => format!("{}: {}", run.status, error_text(e)),
        None => run.status.clone(),
    }
}

/// A run's error is a message, or a flow error's JSON.
fn error_text(e: &str) -> String {
    match serde_json::from_str::<Value>(e) {
        Ok(v @ Value::Object(_)) => flow_error_text(&v),
        _ => e.to_string(),
    }
}

/// `code: message` of a flow error.
fn flow_error_text(e: &Value) -> String {
    let code = e.get("code").and_then(Value::as_str).unwrap_or("error");
    match e.get("message").and_then(Value::as_str) {
        Some(message) => format!("{code}: {message}"),
        None => code.to_string(),
    }
}

fn started_line(run: &Run) -> String {
    let start = utc(run.started_ms);
    match (run.ended_ms, run.status.as_str()) {
        (Some(end), _) => format!(
            "{start}, ended {}, took {}",
            utc(end),
            run_took("", Some(end - run.started_ms))
        ),
        (None, "running") => format!("{start}, still running"),
        (None, _) => format!("{start}, no end recorded"),
    }
}

fn seal_line(run: &Run) -> &'static str {
    match (&run.seal, run.status.as_str()) {
        (Some(_), _) => "sealed (`sluice audit verify` checks it)",
        (None, "running") => "not sealed yet (running)",
        (None, "interrupted") => "not sealed (the process was killed before it could seal)",
        (None, _) => "NOT SEALED (`sluice audit verify` to check the record)",
    }
}

fn counts_line(calls: &[Call]) -> String {
    let count = |f: fn(&Call) -> bool| calls.iter().filter(|c| f(c)).count() as i64;
    let mut parts = vec![format!(
        "{} irreversible",
        count(|c| c.tier == "irreversible")
    )];
    parts.push(format!("{} denied", count(Call::denied)));
    let unknown = count(|c| c.outcome == Outcome::Unknown);
    if unknown > 0 {
        parts.push(format!("{unknown} OUTCOME UNKNOWN"));
    }
    let capped = count(|c| c.capped);
    if capped > 0 {
        parts.push(format!("{capped} with output capped"));
    }
    format!("{} ({})", calls.len(), parts.join(", "))
}

fn render_timeline(run: &Run, calls: &[Call]) -> String {
    // A run without process flows routes nothing: its ROUTE column would
    // be all dashes, and the room is better spent on the input.
    let routed = calls
        .iter()
        .any(|c| c.route.as_ref().is_some_and(|r| !r.is_null()));
    let mut header = vec![
        "#", "AT", "FLOW", "TIER", "DECISION", "ROUTE", "OUTCOME", "TOOK", "INPUT",
    ];
    if !routed {
        header.remove(5);
    }
    let mut table = Table::new(&header);
    for c in calls {
        let mut cells = vec![
            format!("#{}", c.n),
            format!(
                "+{}",
                took_us((c.started_ms - run.started_ms).saturating_mul(1000))
            ),
            c.flow.clone(),
            c.tier.clone(),
            // A rule may be named by a long path: `--call N` has it whole.
            clip_to(&decision_summary(c), 30, Clip::Right),
            clip_to(&route_summary(c.route.as_ref()), 24, Clip::Right),
            outcome_summary(c),
            c.duration_us.map_or("—".into(), took_us),
            input_summary(&c.input),
        ];
        if !routed {
            cells.remove(5);
        }
        table.row(cells);
    }
    let last = header.len() - 1;
    table.render(last, Clip::Right, &[1, last - 1])
}

/// One word or three for a call's decisions, those made before it ran and
/// while it ran: the most telling one wins (a deny, then an ask, then allow).
pub fn decision_summary(c: &Call) -> String {
    let list: Vec<&Value> = items(Some(&c.decisions))
        .iter()
        .chain(items(c.late_decisions.as_ref()))
        .collect();
    let field = |d: &Value, k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
    let kind = |k: &str| {
        list.iter()
            .find(|d| field(d, "decision").as_deref() == Some(k))
    };
    if let Some(d) = kind("deny") {
        return format!("deny by {}", field(d, "by").unwrap_or_else(|| "?".into()));
    }
    if let Some(d) = kind("ask") {
        return match field(d, "approvedBy") {
            Some(who) => format!("ask→approved by {who}"),
            None => "ask→not approved".to_string(),
        };
    }
    if kind("allow").is_some() {
        return "allow".to_string();
    }
    "—".to_string()
}

/// `host:unconfined`, `container:name`; `—` for a call that runs no process.
pub fn route_summary(route: Option<&Value>) -> String {
    match route {
        None | Some(Value::Null) => "—".to_string(),
        Some(Value::Object(m)) if m.len() == 1 => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}:{}",
                    v.as_str().map_or_else(|| compact(v), str::to_string)
                )
            })
            .collect(),
        Some(other) => compact(other),
    }
}

/// `ok`, the error code, or `OUTCOME UNKNOWN`, with what is notable about
/// the row (capped output, copied by resume).
pub fn outcome_summary(c: &Call) -> String {
    let mut s = match c.outcome {
        Outcome::Ok => "ok".to_string(),
        Outcome::Error => c.error_code().unwrap_or("error").to_string(),
        Outcome::Unknown => "OUTCOME UNKNOWN".to_string(),
        Outcome::Pending => "in progress".to_string(),
    };
    if c.capped {
        s.push_str(", capped");
    }
    if c.replayed_from.is_some() {
        s.push_str(", replayed");
    }
    s
}

/// The gist of an input: the path, URL, query, command or pattern it
/// names, else its JSON.
pub fn input_summary(input: &Value) -> String {
    let text = |k: &str| input.get(k).and_then(Value::as_str);
    for key in ["path", "url", "query", "command"] {
        if let Some(s) = text(key) {
            return one_line(s);
        }
    }
    if let Some(Value::Array(argv)) = input.get("command") {
        let words: Vec<String> = argv
            .iter()
            .map(|a| a.as_str().map_or_else(|| compact(a), str::to_string))
            .collect();
        return one_line(&words.join(" "));
    }
    if let Some(pattern) = text("pattern") {
        let root = text("root").map_or(String::new(), |r| format!(" in {r}"));
        return one_line(&format!("{pattern}{root}"));
    }
    if let Some(script) = text("script") {
        let interpreter = text("interpreter").unwrap_or("bash");
        return one_line(&format!("{interpreter}: {script}"));
    }
    if let Some(patch) = text("input") {
        return patch_files(patch);
    }
    one_line(&compact(input))
}

/// The files an apply_patch input touches, from its `*** Add/Update/Delete
/// File:` lines.
fn patch_files(patch: &str) -> String {
    let files: Vec<&str> = patch
        .lines()
        .filter_map(|l| l.strip_prefix("*** "))
        .filter_map(|l| l.split_once(" File: "))
        .map(|(_, f)| f.trim())
        .collect();
    if files.is_empty() {
        return one_line(patch);
    }
    one_line(&format!("patch {}", files.join(", ")))
}

/// One call whole: `sluice audit show RUN --call N`.
pub fn render_call(run: &Run, c: &Call) -> String {
    let mut h = Lines::default();
    h.field(
        "call",
        &format!(
            "#{} of run {} (task {}, seq {})",
            c.n, run.id, c.task, c.seq
        ),
    );
    h.field("flow", &c.flow);
    h.field("tier", &c.tier);
    let offset = took_us((c.started_ms - run.started_ms).saturating_mul(1000));
    h.field(
        "started",
        &format!(
            "{}.{:03} UTC (+{offset} into the run)",
            utc(c.started_ms),
            c.started_ms.rem_euclid(1000)
        ),
    );
    h.field("took", &c.duration_us.map_or("—".into(), took_us));
    h.field("outcome", &outcome_line(c));
    h.field("route", &route_summary(c.route.as_ref()));
    if let Some(from) = &c.replayed_from {
        h.field(
            "replayed",
            &format!("copied from run {from} by `sluice resume`; it did not run again"),
        );
    }
    let mut out = h.0;
    out.push_str(&list_section("capabilities", &c.capabilities));
    out.push_str(&decisions_section("decisions", &c.decisions));
    if let Some(late) = c
        .late_decisions
        .as_ref()
        .filter(|l| l.as_array().is_none_or(|a| !a.is_empty()))
    {
        out.push_str(&decisions_section("decisions while it ran", late));
    }
    out.push_str(&list_section("redacted", &c.redacted));
    out.push_str(&json_section("input", Some(&c.input)));
    out.push_str(&json_section("output", c.output.as_ref()));
    if c.capped {
        out.push_str(&capped_notice(c.output.as_ref()));
    }
    out.push_str(&json_section("error", c.error.as_ref()));
    let mut t = Lines::default();
    t.field("hash", &c.hash);
    t.field("prev", &c.prev);
    t.field("outcome hash", c.outcome_hash.as_deref().unwrap_or("—"));
    out.push('\n');
    out.push_str(&t.0);
    out
}

fn outcome_line(c: &Call) -> String {
    match c.outcome {
        Outcome::Ok => "ok".to_string(),
        Outcome::Error => c.error.as_ref().map_or("error".into(), flow_error_text),
        Outcome::Unknown => {
            "OUTCOME UNKNOWN: the intent was recorded and synced, then the process \
died before the outcome was written; the call may or may not have taken effect"
                .to_string()
        }
        Outcome::Pending => "in progress (the run is still live)".to_string(),
    }
}

fn list_section(title: &str, items: &Value) -> String {
    let mut out = format!("\n{title}\n");
    match items.as_array() {
        Some(list) if list.is_empty() => out.push_str("  none\n"),
        Some(list) => {
            for item in list {
                let text = item.as_str().map_or_else(|| compact(item), str::to_string);
                let _ = writeln!(out, "  {}", visible(&text));
            }
        }
        None => {
            let _ = writeln!(out, "  {}", visible(&compact(items)));
        }
    }
    out
}

fn decisions_section(title: &str, decisions: &Value) -> String {
    let Some(list) = decisions.as_array() else {
        return list_section(title, decisions);
    };
    let mut out = format!("\n{title}\n");
    if list.is_empty() {
        out.push_str("  none (the call stopped before authorization, or needed no capability)\n");
    }
    for d in list {
        let f = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("?");
        let mut line = format!("  {}  {} by {}", f("capability"), f("decision"), f("by"));
        if let Some(who) = d.get("approvedBy").and_then(Value::as_str) {
            let _ = write!(line, ", approved by {who}");
        }
        if let Some(reason) = d
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            let _ = write!(line, ": {reason}");
        }
        out.push_str(&visible(&line));
        out.push('\n');
    }
    out
}

fn json_section(title: &str, value: Option<&Value>) -> String {
    let Some(v) = value else {
        return String::new();
    };
    let pretty = serde_json::to_string_pretty(v).unwrap_or_else(|_| compact(v));
    let body: String = pretty
        .lines()
        .map(|l| format!("  {}\n", visible(l)))
        .collect();
    format!("\n{title}\n{body}")
}

fn capped_notice(output: Option<&Value>) -> String {
    let bytes = output.and_then(|o| o.get("bytes")).and_then(Value::as_u64);
    let sha = output.and_then(|o| o.get("sha256")).and_then(Value::as_str);
    format!(
        "  OUTPUT CAPPED: the output was {} bytes, over the 1 MiB cap; the record keeps its SHA-256 ({}), head and tail only\n",
        bytes.map_or("?".into(), |b| b.to_string()),
        sha.unwrap_or("?"),
    )
}

// ---------------------------------------------------------------------------
// export

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A `{"type":"run"}` line, then a `{"type":"call"}` line per call.
    Jsonl,
    /// A header, then a row per call (RFC 4180).
    Csv,
}

/// Why an export stopped.
#[derive(Debug)]
pub enum ExportError {
    /// The database could not be read.
    Db(String),
    /// The output could not be written.
    Write(std::io::Error),
}

impl From<String> for ExportError {
    fn from(e: String) -> Self {
        ExportError::Db(e)
    }
}

impl From<std::io::Error> for ExportError {
    fn from(e: std::io::Error) -> Self {
        ExportError::Write(e)
    }
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Db(e) => f.write_str(e),
            ExportError::Write(e) => write!(f, "cannot write the export: {e}"),
        }
    }
}

/// Writes run `run_id` to `out` in `format`, streaming its calls.
pub fn export(
    conn: &Connection,
    run_id: &str,
    format: Format,
    out: &mut dyn std::io::Write,
) -> Result<(), ExportError> {
    let run = load_run(conn, run_id)?;
    let live = run.running();
    match format {
        Format::Jsonl => {
            writeln!(out, "{}", tagged("run", &run.view()))?;
            for_each_call(conn, run_id, |c| {
                writeln!(out, "{}", tagged("call", &c.view(live)))?;
                Ok::<(), ExportError>(())
            })
        }
        Format::Csv => {
            out.write_all(csv_line(CSV_HEADER.iter().map(|h| Some(*h))).as_bytes())?;
            for_each_call(conn, run_id, |c| {
                out.write_all(csv_row(&c, live).as_bytes())?;
                Ok::<(), ExportError>(())
            })
        }
    }
}

/// `value`'s fields after a `"type"` field.
fn tagged(kind: &str, value: &impl Serialize) -> String {
    #[derive(Serialize)]
    struct Tagged<'a, T> {
        #[serde(rename = "type")]
        kind: &'a str,
        #[serde(flatten)]
        value: &'a T,
    }
    serde_json::to_string(&Tagged { kind, value }).unwrap_or_default()
}

const CSV_HEADER: [&str; 23] = [
    "run",
    "n",
    "task",
    "seq",
    "flow",
    "tier",
    "started_ms",
    "outcome",
    "status",
    "duration_us",
    "input",
    "capabilities",
    "decisions",
    "late_decisions",
    "route",
    "redacted",
    "replayed_from",
    "output",
    "error",
    "capped",
    "prev",
    "hash",
    "outcome_hash",
];

/// A call as CSV: JSON columns as stored, so the hashes can be checked
/// from the export.
fn csv_row(c: &CallRow, live: bool) -> String {
    let (n, seq, started) = (c.n.to_string(), c.seq.to_string(), c.started_ms.to_string());
    let duration = c.duration_us.map(|d| d.to_string());
    let capped = if c.capped { "1" } else { "0" };
    let fields: [Option<&str>; 23] = [
        Some(&c.run),
        Some(&n),
        Some(&c.task),
        Some(&seq),
        Some(&c.flow),
        Some(&c.tier),
        Some(&started),
        Some(c.ended(live).as_str()),
        c.status.as_deref(),
        duration.as_deref(),
        Some(&c.input),
        Some(&c.capabilities),
        Some(&c.decisions),
        c.late_decisions.as_deref(),
        c.route.as_deref(),
        Some(&c.redacted),
        c.replayed_from.as_deref(),
        c.output.as_deref(),
        c.error.as_deref(),
        Some(capped),
        Some(&c.prev),
        Some(&c.hash),
        c.outcome_hash.as_deref(),
    ];
    csv_line(fields)
}

/// One CSV record ending in CRLF; an absent field is empty.
fn csv_line<'a>(fields: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let quoted: Vec<String> = fields
        .into_iter()
        .map(|f| csv_field(f.unwrap_or("")))
        .collect();
    quoted.join(",") + "\r\n"
}

/// RFC 4180: a field holding a comma, quote or line break is quoted, its
/// quotes doubled.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

// ---------------------------------------------------------------------------
// verify

/// What kind of mismatch `verify` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The run's own fields do not hash to its head.
    RunEdited,
    /// A row's fields do not hash to its hash.
    ContentEdited,
    /// A chain position is absent before this row.
    RowMissing,
    /// This row links to a row other than the one before it.
    OutOfOrder,
    /// This row links to no row of the run: the one before it was removed
    /// or replaced.
    LinkBroken,
    /// A row's outcome does not hash to its outcome hash (or one is absent).
    OutcomeEdited,
    /// The seal does not cover what the run holds now.
    SealMismatch,
    /// The run ended but carries no seal.
    NotSealed,
    /// The run before it in the chain of runs is gone: a whole run was
    /// deleted.
    PredecessorMissing,
    /// The run before it does not hold the hash this run committed to: it
    /// was edited or replaced.
    PredecessorMismatch,
}

/// The first thing that did not match.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub failure: Failure,
    /// The row, when the mismatch is a row's (not the run's or the seal's).
    pub n: Option<i64>,
    pub task: Option<String>,
    pub seq: Option<i64>,
    pub flow: Option<String>,
    pub message: String,
}

/// One run's verification.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub run: String,
    pub status: String,
    pub calls: usize,
    pub sealed: bool,
    /// No mismatch found (a warning may still apply).
    pub intact: bool,
    /// Recorded since runs were chained to each other: its link to the run
    /// before it was checked too.
    pub chained: bool,
    /// Said of an intact run whose record cannot be fully checked.
    pub warning: Option<String>,
    pub problem: Option<Problem>,
}

/// Recomputes run `run_id`'s chain and seal, and checks its link to the
/// run before it.
pub fn verify(conn: &Connection, run_id: &str) -> Result<Verdict, String> {
    let run = load_run(conn, run_id)?;
    let unchained = store::unchained_runs(conn).map_err(db)?;
    // A run without a place is judged as chained: every run since has one.
    let chained = run.n.is_none_or(|n| n > unchained);
    let mut calls = Vec::new();
    for_each_call_as(conn, run_id, CHAIN_COLUMNS, |c| {
        calls.push(c);
        Ok::<(), String>(())
    })?;
    let readings = load_readings(conn, run_id)?;
    let mut verdict = judge(&run, chained, &calls, &readings);
    if verdict.intact && chained {
        verdict.problem = check_prior(conn, &run)?;
        verdict.intact = verdict.problem.is_none();
    }
    if verdict.intact {
        if let Some(p) = check_outputs(conn, run_id, &calls)? {
            verdict.intact = false;
            verdict.problem = Some(p);
        }
    }
    Ok(verdict)
}

/// The run before `run` in the chain of runs, as it stands now.
struct Predecessor {
    id: String,
    head: String,
    seal: Option<String>,
}

/// Whether the run before `run` still holds the hash `run` committed to
/// when it started; when not, what is wrong.
fn check_prior(conn: &Connection, run: &RunRow) -> Result<Option<Problem>, String> {
    let n = run.n.unwrap_or(0);
    if n <= 1 {
        return Ok(run.prior.is_some().then(|| {
            run_problem(
                Failure::PredecessorMissing,
                "predecessor missing: it commits to a run before it, yet it is the first run of the \
record: the runs before it were deleted",
            )
        }));
    }
    let p = n - 1;
    let pred = conn
        .query_row("SELECT id, head, seal FROM runs WHERE n = ?1", [p], |r| {
            Ok(Predecessor {
                id: r.get(0)?,
                head: r.get(1)?,
                seal: r.get(2)?,
            })
        })
        .optional()
        .map_err(db)?;
    let Some(pred) = pred else {
        let m = format!(
            "predecessor missing: run #{p}, the run before it (#{n}), is gone from the record: a whole \
run (its row and its calls) was deleted"
        );
        return Ok(Some(run_problem(Failure::PredecessorMissing, &m)));
    };
    let Some(prior) = run.prior.as_deref() else {
        let m = format!(
            "predecessor seal does not match: it commits to no run before it, though run #{p} ({}) is \
before it",
            pred.id
        );
        return Ok(Some(run_problem(Failure::PredecessorMismatch, &m)));
    };
    let (what, now) = match run.prior_rows {
        None => ("the seal".to_string(), pred.seal.clone()),
        Some(0) => ("the head".to_string(), Some(pred.head.clone())),
        Some(k) => (format!("row #{k}"), row_hash(conn, &pred.id, k)?),
    };
    if now.as_deref() == Some(prior) {
        return Ok(None);
    }
    let holds = match (&now, run.prior_rows) {
        (None, None) => "no seal".to_string(),
        (None, Some(k)) => format!("no row #{k}"),
        (Some(_), _) => format!(
            "another {}",
            if run.prior_rows.is_none() {
                "seal"
            } else {
                "hash"
            }
        ),
    };
    let m = format!(
        "predecessor seal does not match: a run was deleted or edited between run #{p} ({}) and this \
one (#{n}): this run commits to {what} of run #{p} as it was when this run started, and run #{p} holds \
{holds} now",
        pred.id
    );
    Ok(Some(run_problem(Failure::PredecessorMismatch, &m)))
}

fn row_hash(conn: &Connection, run: &str, n: i64) -> Result<Option<String>, String> {
    conn.query_row(
        "SELECT hash FROM calls WHERE run = ?1 AND n = ?2",
        rusqlite::params![run, n],
        |r| r.get(0),
    )
    .optional()
    .map_err(db)
}

/// Each output the run keeps by content must still hash to its key (rows
/// hold the key, and their outcome hashes cover it); the first row whose
/// output was edited is named.
fn check_outputs(
    conn: &Connection,
    run_id: &str,
    calls: &[CallRow],
) -> Result<Option<Problem>, String> {
    let mut stmt = conn
        .prepare("SELECT sha256, body FROM outputs WHERE sha256 IN (SELECT output_ref FROM calls WHERE run = ?1)")
        .map_err(db)?;
    let mut rows = stmt.query([run_id]).map_err(db)?;
    let mut present = std::collections::HashSet::new();
    while let Some(r) = rows.next().map_err(db)? {
        let (key, body): (String, String) = (r.get(0).map_err(db)?, r.get(1).map_err(db)?);
        if crate::digest::sha256_hex(body.as_bytes()) != key {
            return Ok(first_using(
                calls,
                &key,
                "outcome edited: the output it keeps by content was changed",
            ));
        }
        present.insert(key);
    }
    Ok(calls
        .iter()
        .filter_map(|c| c.output_ref.as_deref())
        .find(|key| !present.contains(*key))
        .and_then(|key| {
            first_using(
                calls,
                key,
                "outcome edited: the output it keeps by content is gone",
            )
        }))
}

fn first_using(calls: &[CallRow], key: &str, message: &str) -> Option<Problem> {
    calls
        .iter()
        .find(|c| c.output_ref.as_deref() == Some(key))
        .map(|c| row_problem(c, Failure::OutcomeEdited, message.to_string()))
}

/// Verifies every run, newest first (by place in the chain of runs).
pub fn verify_all(conn: &Connection) -> Result<Vec<Verdict>, String> {
    let mut stmt = conn
        .prepare("SELECT id FROM runs ORDER BY n DESC, started_ms DESC, rowid DESC")
        .map_err(db)?;
    let ids = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(db)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db)?;
    ids.iter().map(|id| verify(conn, id)).collect()
}

fn judge(run: &RunRow, chained: bool, calls: &[CallRow], readings: &[ReadingRow]) -> Verdict {
    let mut verdict = Verdict {
        run: run.id.clone(),
        status: run.status.clone(),
        calls: calls.len(),
        sealed: run.seal.is_some(),
        intact: true,
        chained,
        warning: None,
        problem: None,
    };
    let head = chain::head(&run.head_fields(chained));
    let problem = if head != run.head {
        Some(run_problem(
            Failure::RunEdited,
            "run edited: its fields (script, policies, args, workspace, start, version, seed, its place \
among the runs and its link to the run before it) do not hash to its head",
        ))
    } else {
        check_rows(&head, calls).or_else(|| check_seal(run, &head, calls, readings, &mut verdict))
    };
    verdict.intact = problem.is_none();
    verdict.problem = problem;
    verdict
}

fn run_problem(failure: Failure, message: &str) -> Problem {
    Problem {
        failure,
        n: None,
        task: None,
        seq: None,
        flow: None,
        message: message.to_string(),
    }
}

fn row_problem(c: &CallRow, failure: Failure, message: String) -> Problem {
    Problem {
        failure,
        n: Some(c.n),
        task: Some(c.task.clone()),
        seq: Some(c.seq),
        flow: Some(c.flow.clone()),
        message,
    }
}

/// The first row (by `n`) whose position, link, hash or outcome hash does
/// not match.
fn check_rows(head: &str, calls: &[CallRow]) -> Option<Problem> {
    let positions: HashMap<&str, i64> = calls.iter().map(|c| (c.hash.as_str(), c.n)).collect();
    let mut prev = head;
    for (i, c) in calls.iter().enumerate() {
        let expected = i as i64 + 1;
        if let Some(p) = check_link(c, expected, prev, head, &positions) {
            return Some(p);
        }
        if chain::call(&c.prev, &c.intent()) != c.hash {
            let m = "content edited: its fields do not hash to its recorded hash".to_string();
            return Some(row_problem(c, Failure::ContentEdited, m));
        }
        if let Some(p) = check_outcome(c) {
            return Some(p);
        }
        prev = &c.hash;
    }
    None
}

/// Whether row `c`, found at chain position `expected`, is numbered and
/// linked as that position requires; when not, why.
fn check_link(
    c: &CallRow,
    expected: i64,
    prev: &str,
    head: &str,
    positions: &HashMap<&str, i64>,
) -> Option<Problem> {
    if c.n > expected {
        let gap = if c.n - 1 == expected {
            format!("#{expected} is")
        } else {
            format!("#{expected}–#{} are", c.n - 1)
        };
        let m = format!("a row is missing before it: {gap} absent from the chain");
        return Some(row_problem(c, Failure::RowMissing, m));
    }
    if c.n < expected {
        let m = format!(
            "rows out of order: it is numbered #{} where #{expected} belongs",
            c.n
        );
        return Some(row_problem(c, Failure::OutOfOrder, m));
    }
    if c.prev == prev {
        return None;
    }
    let (failure, m) = if c.prev == head {
        (
            Failure::OutOfOrder,
            "rows out of order: it links to the run's head, as the first row does".to_string(),
        )
    } else if let Some(j) = positions.get(c.prev.as_str()) {
        (
            Failure::OutOfOrder,
            format!("rows out of order: it links to #{j}, not to the row before it"),
        )
    } else {
        (Failure::LinkBroken, "a row is missing before it, or the row before it was replaced: its link matches no row of the run".to_string())
    };
    Some(row_problem(c, failure, m))
}

fn check_outcome(c: &CallRow) -> Option<Problem> {
    // An output kept by content is covered by its key, checked once against
    // the body (`check_outputs`); an inline one is hashed here.
    let digest = |o: &CallOutcome| match (&c.output_ref, o.output) {
        (Some(key), _) => Some(key.clone()),
        (None, text) => text.map(|t| crate::digest::sha256_hex(t.as_bytes())),
    };
    let m = match (c.outcome(), c.outcome_hash.as_deref()) {
        (Some(o), Some(h)) if chain::outcome_of(&c.hash, &o, digest(&o).as_deref()) == h => {
            return None
        }
        (Some(_), Some(_)) => {
            "outcome edited: its status, output, error, duration, late decisions or \
redactions do not hash to its outcome hash"
        }
        (Some(_), None) => "outcome edited: it has an outcome but no outcome hash",
        (None, Some(_)) if c.status.is_some() => {
            "outcome edited: it has a status but no duration or late decisions"
        }
        (None, Some(_)) => {
            "outcome edited: it has an outcome hash but no status (the outcome was removed)"
        }
        (None, None) if c.status.is_some() => "outcome edited: it has a status but no outcome hash",
        (None, None) if c.output.is_some() || c.error.is_some() || c.duration_us.is_some() => {
            "outcome edited: it holds an output, error or duration but no status"
        }
        (None, None) => return None,
    };
    Some(row_problem(c, Failure::OutcomeEdited, m.to_string()))
}

/// The seal's check; an unsealed run is a mismatch unless it is still
/// running or was killed (which cannot seal: a warning).
fn check_seal(
    run: &RunRow,
    head: &str,
    calls: &[CallRow],
    readings: &[ReadingRow],
    verdict: &mut Verdict,
) -> Option<Problem> {
    let Some(seal) = &run.seal else {
        return match run.status.as_str() {
            "running" => None,
            "interrupted" => {
                verdict.warning = Some(
                    "not sealed: the run was interrupted, and a killed process cannot seal, so rows \
removed from its end would not show"
                        .to_string(),
                );
                None
            }
            other => Some(run_problem(
                Failure::NotSealed,
                &format!("not sealed although it ended {other}: the seal was removed"),
            )),
        };
    };
    let Some(ended_ms) = run.ended_ms else {
        return Some(run_problem(
            Failure::SealMismatch,
            "seal mismatch: the run has a seal but no end time",
        ));
    };
    let mut s = Seal::new(head);
    for c in calls {
        s.row(&c.hash, c.outcome_hash.as_deref());
    }
    for r in readings {
        s.reading(&Reading {
            task: &r.task,
            seq: r.seq,
            kind: &r.kind,
            value: r.value,
        });
    }
    let end = RunEnd {
        status: &run.status,
        error: run.error.as_deref(),
        ended_ms,
    };
    if s.finish(&end) == *seal {
        return None;
    }
    Some(run_problem(
        Failure::SealMismatch,
        "seal mismatch: the run's status, error or end time, a clock reading, or rows at its end changed after it was sealed",
    ))
}

/// One line per run, and a total when there are several.
pub fn render_verify(verdicts: &[Verdict]) -> String {
    if verdicts.is_empty() {
        return "no runs recorded yet: nothing to verify\n".to_string();
    }
    let width = verdicts
        .iter()
        .map(|v| v.run.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for v in verdicts {
        let _ = writeln!(out, "{:<width$}  {}", visible(&v.run), verdict_text(v));
    }
    if verdicts.len() > 1 {
        let broken = verdicts.iter().filter(|v| !v.intact).count();
        let _ = writeln!(
            out,
            "{} checked: {} intact, {broken} not",
            plural(verdicts.len() as i64, "run", "runs"),
            verdicts.len() - broken
        );
    }
    out
}

/// What a check of runs recorded before runs were chained to each other
/// cannot show; `None` when every run checked is chained.
pub fn unchained_note(verdicts: &[Verdict], unchained: i64) -> Option<String> {
    verdicts.iter().any(|v| !v.chained).then(|| {
        let runs = if unchained == 1 {
            "run #1 was".to_string()
        } else {
            format!("runs #1–#{unchained} were")
        };
        format!(
            "note: {runs} recorded before runs were chained to each other (schema 1): each is checked \
on its own, and a whole run deleted or reordered among them would not show\n"
        )
    })
}

fn verdict_text(v: &Verdict) -> String {
    let calls = plural(v.calls as i64, "call", "calls");
    match (&v.problem, &v.warning) {
        (Some(p), _) => {
            let at = match (p.n, &p.task, p.seq, &p.flow) {
                (Some(n), Some(task), Some(seq), Some(flow)) => {
                    format!(" at #{n} (task {task}, seq {seq}, {flow})")
                }
                _ => String::new(),
            };
            visible(&format!("NOT INTACT{at}: {}", p.message))
        }
        (None, Some(w)) => format!("intact ({calls}), but {w}"),
        (None, None) if v.sealed => format!("intact ({calls}, sealed)"),
        (None, None) => format!("intact so far ({calls}; running, not sealed yet)"),
    }
}

// ---------------------------------------------------------------------------
// Text helpers.

/// `2026-11-30 17:03:12`: UTC, from milliseconds since the epoch.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// Days since 1970-01-01 as (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A duration in the coarsest unit that still says something: `850µs`,
/// `12ms`, `4.2s`, `3m07s`, `2h05m`.
pub fn took_us(us: i64) -> String {
    let us = us.max(0);
    match us {
        0..=999 => format!("{us}µs"),
        1_000..=999_999 => format!("{}ms", us / 1000),
        1_000_000..=59_999_999 => format!("{:.1}s", us as f64 / 1e6),
        60_000_000..=3_599_999_999 => {
            let s = us / 1_000_000;
            format!("{}m{:02}s", s / 60, s % 60)
        }
        _ => {
            let m = us / 60_000_000;
            format!("{}h{:02}m", m / 60, m % 60)
        }
    }
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first 12 hex digits of a digest: enough to tell files apart by eye.
fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// The elements of a JSON list; none for anything else.
fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Recorded text is shown, never obeyed: control characters (a terminal
/// escape in a file name or an output) are printed as escapes.
pub fn visible(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Text for a table cell: one line, line breaks shown as `↵`.
fn one_line(s: &str) -> String {
    let flat: String = s
        .trim()
        .chars()
        .map(|c| match c {
            '\n' => '↵',
            '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    visible(&flat)
}

/// `key      value` lines, values kept to one visible line.
#[derive(Default)]
struct Lines(String);

impl Lines {
    fn field(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.0, "{key:<12} {}", one_line(value));
    }
}

/// Which end of an over-long cell gives way: a path keeps its end (the
/// file name), an input summary its start.
#[derive(Clone, Copy)]
enum Clip {
    Left,
    Right,
}

/// A text table whose one flexible column shrinks so lines fit `WIDTH`.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| one_line(c)).collect());
    }

    /// Renders with column `flex` clipped to what the others leave of
    /// `WIDTH` (at least 20), and the `right` columns right-aligned.
    fn render(&self, flex: usize, clip: Clip, right: &[usize]) -> String {
        let mut widths: Vec<usize> = vec![0; self.rows[0].len()];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let others: usize = widths
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != flex)
            .map(|(_, w)| w + 2)
            .sum();
        widths[flex] = widths[flex].min(WIDTH.saturating_sub(others).max(20));
        let mut out = String::new();
        for row in &self.rows {
            let cells = row.iter().zip(&widths).enumerate().map(|(i, (cell, &w))| {
                let cell = if i == flex {
                    clip_to(cell, w, clip)
                } else {
                    cell.clone()
                };
                if right.contains(&i) {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            });
            let line = cells.collect::<Vec<_>>().join("  ");
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `s` cut to `width` characters, `…` marking the cut.
fn clip_to(s: &str, width: usize, clip: Clip) -> String {
    let len = s.chars().count();
    if len <= width {
        return s.to_string();
    }
    let keep = width.saturating_sub(1);
    match clip {
        Clip::Left => format!("…{}", s.chars().skip(len - keep).collect::<String>()),
        Clip::Right => format!("{}…", s.chars().take(keep).collect::<String>()),
    }
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
