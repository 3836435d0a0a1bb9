//! The record as stored: the one reader of the schema, whose SELECTs and
//! row mappings `show`, `export`, `verify`, `list` and the replay all use,
//! so a column added or renamed is read in one place.
//!
//! JSON columns are kept as their text: the hashes cover those bytes, and
//! each view parses what it shows. An input whose list items are kept by
//! content is put back together here, so every reader but `verify` sees
//! the input whole. Functions return the store's errors ([`db::Error`]),
//! so each caller words a failure as it always has.
//!
//! Every query is in the dialect both stores speak (see [`super::db`]). A
//! reader that walks a whole run reads it a page of rows a query (see
//! [`PAGE`]): SQLite streams each page, and PostgreSQL, which holds a
//! query's rows, holds one page at a time.

use super::chain::{CallIntent, CallOutcome, RunHead, RunLink};
use super::db::{self, vals, Backend, Db, FromVal, Row, Val};
use super::parts::{self, Listed};
use serde_json::Value;
use std::collections::HashMap;

const RUN_COLUMNS: &str = "id, script, script_sha256, policies, args, workspace, started_ms, \
ended_ms, status, error, version, random_seed, resumed_from, pid, pid_start, head, seal, ceiling, \
n, prior, prior_rows, origin, joined";

/// A call's columns, `output` resolved: inline, or the body kept by
/// content. What the views show.
const CALL_COLUMNS: &str = concat!(
    "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, redacted, replayed_from, started_ms, prev, hash, status, ",
    super::store::output_column!(),
    ", error, capped, duration_us, late_decisions, outcome_hash, output_ref, parts, client"
);

/// The same columns with `output` as the row holds it (inline only): what
/// `verify` reads, checking each output kept by content once, not per row,
/// and what a replay reads, parsing each such output once.
const INLINE_COLUMNS: &str = "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, redacted, replayed_from, started_ms, prev, hash, status, output, error, capped, duration_us, \
late_decisions, outcome_hash, output_ref, parts, client";

/// [`INLINE_COLUMNS`] as a replay reads them: the columns it never looks at
/// (the hashes, which `verify` checked before it began; what was redacted;
/// the late decisions) come back empty, so a replay copies only what it
/// uses out of each row.
const REPLAY_COLUMNS: &str = "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, '' AS redacted, replayed_from, started_ms, '' AS prev, '' AS hash, status, output, error, capped, \
duration_us, NULL AS late_decisions, NULL AS outcome_hash, output_ref, parts, client";

/// How a call's `output` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The output whole, wherever it is kept.
    Resolved,
    /// Only an output kept in the row; one kept by content is left to
    /// [`each_output`].
    Inline,
}

/// A row of `runs`, each field the column of its name (see [`super::store`]
/// for what they hold): for the audit's readers alone.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub(super) id: String,
    pub(super) script: String,
    pub(super) script_sha256: Option<String>,
    pub(super) policies: String,
    pub(super) args: String,
    pub(super) workspace: String,
    pub(super) started_ms: i64,
    pub(super) ended_ms: Option<i64>,
    pub(super) status: String,
    pub(super) error: Option<String>,
    pub(super) version: String,
    pub(super) random_seed: i64,
    pub(super) resumed_from: Option<String>,
    pub(super) pid: i64,
    pub(super) pid_start: i64,
    pub(super) head: String,
    pub(super) seal: Option<String>,
    pub(super) ceiling: String,
    pub(super) n: Option<i64>,
    pub(super) prior: Option<String>,
    pub(super) prior_rows: Option<i64>,
    /// The link its head covers when it was copied in from another store.
    pub(super) origin: Option<Origin>,
    /// A copied run's hash of its place here ([`super::chain::joined`]).
    pub(super) joined: Option<String>,
}

/// The link a copied run's head covers: the one it was recorded with, in
/// the store it was recorded in (the `origin` column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Recorded before runs were chained: its head covers no link.
    Unchained,
    /// Its place and predecessor there.
    Link {
        n: i64,
        prior: Option<String>,
        prior_rows: Option<i64>,
    },
    /// The column holds something else: edited.
    Unreadable(String),
}

impl Origin {
    /// The `origin` column's JSON text for `link` (`None`: unchained).
    pub fn text(link: Option<&RunLink>) -> String {
        let value = match link {
            None => serde_json::json!({"unchained": true}),
            Some(l) => serde_json::json!({"n": l.n, "prior": l.prior, "priorRows": l.prior_rows}),
        };
        value.to_string()
    }

    /// Reads the `origin` column.
    pub fn parse(text: &str) -> Origin {
        let Ok(Value::Object(o)) = serde_json::from_str::<Value>(text) else {
            return Origin::Unreadable(text.to_string());
        };
        if o.get("unchained") == Some(&Value::Bool(true)) && o.len() == 1 {
            return Origin::Unchained;
        }
        let n = o.get("n").and_then(Value::as_i64);
        let prior = match o.get("prior") {
            Some(Value::Null) => Some(None),
            Some(Value::String(p)) => Some(Some(p.clone())),
            _ => None,
        };
        let prior_rows = match o.get("priorRows") {
            Some(Value::Null) => Some(None),
            Some(v) => v.as_i64().map(Some),
            None => None,
        };
        match (n, prior, prior_rows, o.len()) {
            (Some(n), Some(prior), Some(prior_rows), 3) => Origin::Link {
                n,
                prior,
                prior_rows,
            },
            _ => Origin::Unreadable(text.to_string()),
        }
    }

    /// The link the head covers (`None`: none).
    fn link(&self) -> Option<RunLink<'_>> {
        match self {
            Origin::Link {
                n,
                prior,
                prior_rows,
            } => Some(RunLink {
                n: *n,
                prior: prior.as_deref(),
                prior_rows: *prior_rows,
            }),
            Origin::Unchained | Origin::Unreadable(_) => None,
        }
    }
}

impl StoredRun {
    fn of(r: Row) -> db::Result<StoredRun> {
        let mut r = Take(r);
        Ok(StoredRun {
            id: r.text(0)?,
            script: r.text(1)?,
            script_sha256: r.opt_text(2)?,
            policies: r.text(3)?,
            args: r.text(4)?,
            workspace: r.text(5)?,
            started_ms: r.get(6)?,
            ended_ms: r.get(7)?,
            status: r.text(8)?,
            error: r.opt_text(9)?,
            version: r.text(10)?,
            random_seed: r.get(11)?,
            resumed_from: r.opt_text(12)?,
            pid: r.get(13)?,
            pid_start: r.get(14)?,
            head: r.text(15)?,
            seal: r.opt_text(16)?,
            ceiling: r.text(17)?,
            n: r.get(18)?,
            prior: r.opt_text(19)?,
            prior_rows: r.get(20)?,
            origin: r.opt_text(21)?.map(|t| Origin::parse(&t)),
            joined: r.opt_text(22)?,
        })
    }

    /// The fields its head covers; `chained` for a run recorded since runs
    /// were chained to each other (whose head covers its link too).
    pub fn head_fields(&self, chained: bool) -> RunHead<'_> {
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
            link: match &self.origin {
                Some(origin) => origin.link(),
                None => chained.then(|| self.link()),
            },
        }
    }

    /// Its place in this store and the hash it commits to there.
    pub fn link(&self) -> RunLink<'_> {
        RunLink {
            n: self.n.unwrap_or(0),
            prior: self.prior.as_deref(),
            prior_rows: self.prior_rows,
        }
    }

    /// Whether the run is live (its calls without a status are running).
    pub fn running(&self) -> bool {
        self.status == "running"
    }
}

/// A row of `calls`, each field the column of its name.
#[derive(Debug, Clone)]
pub struct StoredCall {
    pub(super) run: String,
    pub(super) task: String,
    pub(super) seq: i64,
    /// The chain position, 1-based.
    pub(super) n: i64,
    pub(super) flow: String,
    pub(super) tier: String,
    /// The input's JSON (redacted): whole, its items kept by content put
    /// back ([`each_call`], [`call`]); as the column stores it from
    /// [`each_stored_call`].
    pub(super) input: String,
    pub(super) capabilities: String,
    pub(super) decisions: String,
    pub(super) route: Option<String>,
    pub(super) redacted: String,
    pub(super) replayed_from: Option<String>,
    pub(super) started_ms: i64,
    pub(super) prev: String,
    pub(super) hash: String,
    /// `ok`, `error`, or `None`: the outcome is unknown.
    pub(super) status: Option<String>,
    /// The output's JSON: resolved, or inline only (see [`Output`]).
    pub(super) output: Option<String>,
    pub(super) error: Option<String>,
    pub(super) capped: bool,
    pub(super) duration_us: Option<i64>,
    pub(super) late_decisions: Option<String>,
    pub(super) outcome_hash: Option<String>,
    /// The SHA-256 of an output kept by content (in `outputs`).
    pub(super) output_ref: Option<String>,
    /// Set when the input's list field is kept by content.
    pub(super) parts: Option<Parts>,
    /// Who made the call from outside the script (schema 4's `client`: an
    /// MCP client's name and version); `None` for the script's own calls.
    pub(super) client: Option<String>,
}

/// A row whose input's list field is kept by content (schema 3's `parts`).
#[derive(Debug, Clone)]
pub struct Parts {
    /// The `parts` column as stored, which the row's hash covers.
    pub(super) column: String,
    /// The `input` column as stored: the input without the field.
    pub(super) input: String,
    /// The column read: its field and how it lists the keys; `None` for a
    /// column of another shape (a damaged row, which its hash gives away).
    listed: Option<(String, Listed)>,
    /// The field and its items' keys, in order, once known: at once for a
    /// column that lists every key, once [`Bodies::assemble`] has found the
    /// list a continuation names.
    pub(super) named: Option<(String, Vec<String>)>,
    /// The first item whose body `outputs` no longer holds, once the input
    /// was put back together (it stands as `null` there).
    pub(super) missing: Option<usize>,
}

impl Parts {
    fn of(column: Option<String>, input: &str) -> Option<Parts> {
        let column = column?;
        let listed = parts::listed(&column);
        let named = match &listed {
            Some((field, Listed::Keys(keys))) => Some((field.clone(), keys.clone())),
            _ => None,
        };
        Some(Parts {
            listed,
            named,
            input: input.to_string(),
            column,
            missing: None,
        })
    }

    /// The field its items belong to (`messages`), when the column names one.
    pub fn field(&self) -> Option<&str> {
        self.listed.as_ref().map(|(f, _)| f.as_str())
    }

    /// The items' keys, in order.
    pub fn keys(&self) -> &[String] {
        self.named.as_ref().map_or(&[], |(_, k)| k.as_slice())
    }

    /// Whether the keys are not known: the column names a list that is
    /// not in the record (or not that long), or is of another shape.
    pub fn unresolved(&self) -> bool {
        self.named.is_none()
    }
}

impl StoredCall {
    /// The call row `r` holds, its columns those of [`CALL_COLUMNS`] (or
    /// of the other lists of the same columns), each moved out of it.
    pub(super) fn of(r: Row) -> db::Result<StoredCall> {
        let mut r = Take(r);
        let input = r.text(6)?;
        Ok(StoredCall {
            parts: Parts::of(r.opt_text(23)?, &input),
            run: r.text(0)?,
            task: r.text(1)?,
            seq: r.get(2)?,
            n: r.get(3)?,
            flow: r.text(4)?,
            tier: r.text(5)?,
            input,
            capabilities: r.text(7)?,
            decisions: r.text(8)?,
            route: r.opt_text(9)?,
            redacted: r.text(10)?,
            replayed_from: r.opt_text(11)?,
            started_ms: r.get(12)?,
            prev: r.text(13)?,
            hash: r.text(14)?,
            status: r.opt_text(15)?,
            output: r.opt_text(16)?,
            error: r.opt_text(17)?,
            capped: r.get(18)?,
            duration_us: r.get(19)?,
            late_decisions: r.opt_text(20)?,
            outcome_hash: r.opt_text(21)?,
            output_ref: r.opt_text(22)?,
            client: r.opt_text(24)?,
        })
    }

    /// The fields its hash covers: the input and parts as stored.
    pub fn intent(&self) -> CallIntent<'_> {
        CallIntent {
            task: &self.task,
            seq: self.seq,
            n: self.n,
            flow: &self.flow,
            tier: &self.tier,
            input: self.parts.as_ref().map_or(&self.input, |p| &p.input),
            capabilities: &self.capabilities,
            decisions: &self.decisions,
            route: self.route.as_deref(),
            replayed_from: self.replayed_from.as_deref(),
            started_ms: self.started_ms,
            parts: self.parts.as_ref().map(|p| p.column.as_str()),
            client: self.client.as_deref(),
        }
    }

    /// The outcome fields, when the row has all the outcome's mandatory
    /// ones (the writer sets them together).
    pub fn outcome(&self) -> Option<CallOutcome<'_>> {
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
}

/// A row of `readings`: a clock (or seed) value the script saw.
#[derive(Debug, Clone)]
pub struct StoredReading {
    pub(super) task: String,
    pub(super) seq: i64,
    pub(super) kind: String,
    pub(super) value: f64,
}

/// A run's line of `sluice audit list`, counted as stored.
#[derive(Debug, Clone)]
pub struct RunTally {
    pub(super) id: String,
    pub(super) script: String,
    pub(super) status: String,
    pub(super) started_ms: i64,
    pub(super) ended_ms: Option<i64>,
    pub(super) calls: i64,
    pub(super) irreversible: i64,
    /// Calls that ended `permission_denied` or `permission_required`.
    pub(super) denials: i64,
    /// Calls without a status, live run or not.
    pub(super) unfinished: i64,
}

/// The run before another in the chain of runs, as it stands now.
#[derive(Debug, Clone)]
pub struct Predecessor {
    pub(super) id: String,
    pub(super) head: String,
    /// What the run after it commits to when it is finished: its seal, or
    /// for a run copied in, its hash of its place here (`joined`).
    pub(super) seal: Option<String>,
}

/// How the views word a failed read.
pub fn db(e: db::Error) -> String {
    format!("{}: {e}", super::browse::READ_FAILED)
}

/// Call rows a paged read of a run takes in one query. SQLite hands a
/// query's rows over one at a time either way; PostgreSQL reads all of a
/// query's rows before it hands over the first, so a page is what a
/// reader holds at once there, whatever the run's length.
const PAGE: usize = 512;

/// Pages of rows whose output is resolved are smaller: an output kept by
/// content may be as large as the cap (1 MiB).
const RESOLVED_PAGE: usize = 128;

/// Bodies of `outputs` a paged read takes in one query (each up to the
/// cap): PostgreSQL's pages only, see [`each_output`].
const BODY_PAGE: usize = 256;

/// A row's columns taken out one at a time, each moved, not copied.
struct Take(Row);

impl Take {
    /// Column `i` as text; NULL or another kind is an error naming it.
    fn text(&mut self, i: usize) -> db::Result<String> {
        match self.0.take(i) {
            Val::Text(s) => Ok(s),
            other => Err(kind_error(i, &other, "text")),
        }
    }

    /// Column `i` as text or NULL.
    fn opt_text(&mut self, i: usize) -> db::Result<Option<String>> {
        match self.0.take(i) {
            Val::Text(s) => Ok(Some(s)),
            Val::Null => Ok(None),
            other => Err(kind_error(i, &other, "text")),
        }
    }

    /// Column `i` as a `T` (a number: nothing to move).
    fn get<T: FromVal>(&self, i: usize) -> db::Result<T> {
        self.0.get(i)
    }
}

fn kind_error(i: usize, found: &Val, wanted: &str) -> db::Error {
    db::Error::other(format!(
        "column {}: {found:?} where {wanted} belongs",
        i + 1
    ))
}

/// Hands `f` each row `sql` returns; an error of `f`'s stops the query and
/// is returned as it is, one of the store's is worded by `err`.
fn each_until<E>(
    db: &dyn Db,
    sql: &str,
    params: &[Val],
    err: &impl Fn(db::Error) -> E,
    mut f: impl FnMut(Row) -> Result<(), E>,
) -> Result<(), E> {
    let mut stopped = None;
    let read = db.each(sql, params, &mut |row| {
        f(row).map_err(|e| {
            stopped = Some(e);
            db::Error::other("the reader stopped")
        })
    });
    match stopped {
        Some(e) => Err(e),
        None => read.map_err(err),
    }
}

/// Which call rows of a run a paged read takes, and how many a query.
struct Pages<'a> {
    /// The columns selected: they begin `run, task, seq, n`, which the
    /// next page starts after.
    columns: &'a str,
    /// An SQL condition on the rows; its parameters are `?2`, `?3`...
    filter: &'a str,
    /// Those parameters.
    args: Vec<Val>,
    /// Rows a query.
    size: usize,
}

/// Hands `f` each call row of `run` that `pages` selects, in chain order
/// (`n`; task and sequence after it, so that even rows of a damaged
/// record sharing a place are each read once), a page a query: each page
/// starts after the last row of the one before it, an indexed seek.
fn each_page<E>(
    db: &dyn Db,
    run: &str,
    pages: Pages,
    err: impl Fn(db::Error) -> E,
    mut f: impl FnMut(Row) -> Result<(), E>,
) -> Result<(), E> {
    let Pages {
        columns,
        filter,
        args,
        size,
    } = pages;
    let k = args.len() + 2;
    let (n, task, seq) = (k, k + 1, k + 2);
    let order = format!("ORDER BY n, task, seq LIMIT {size}");
    let first = format!("SELECT {columns} FROM calls WHERE run = ?1 AND ({filter}) {order}");
    let next = format!(
        "SELECT {columns} FROM calls WHERE run = ?1 AND ({filter})
           AND n >= ?{n} AND (n > ?{n} OR task > ?{task} OR (task = ?{task} AND seq > ?{seq})) {order}"
    );
    let mut params: Vec<Val> = Vec::with_capacity(k + 2);
    params.push(Val::from(run));
    params.extend(args);
    let fixed = params.len();
    let mut last: (i64, String, i64) = (0, String::new(), 0);
    let mut sql = &first;
    loop {
        let mut got = 0;
        each_until(db, sql, &params, &err, |row| {
            got += 1;
            last.0 = row.get(3).map_err(&err)?;
            last.1.clear();
            last.1
                .push_str(row.text(1).map_err(&err)?.unwrap_or_default());
            last.2 = row.get(2).map_err(&err)?;
            f(row)
        })?;
        if got < size {
            return Ok(());
        }
        params.truncate(fixed);
        params.extend([
            Val::Int(last.0),
            Val::Text(last.1.clone()),
            Val::Int(last.2),
        ]);
        sql = &next;
    }
}

/// Run `id`, if the record holds it.
pub fn run(db: &dyn Db, id: &str) -> db::Result<Option<StoredRun>> {
    db.first(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        vals![id],
    )?
    .map(StoredRun::of)
    .transpose()
}

/// Run `id`, or what to do when there is no such run: as the views say it.
pub fn load_run(db: &dyn Db, id: &str) -> Result<StoredRun, String> {
    run(db, id).map_err(self::db)?.ok_or_else(|| {
        format!("no run {id:?} in the audit database; `sluice audit list` shows the runs")
    })
}

/// Call `#n` of run `run`, its output resolved and its input whole.
pub fn call(db: &dyn Db, run: &str, n: i64) -> db::Result<Option<StoredCall>> {
    let found = db.first(
        &format!("SELECT {CALL_COLUMNS} FROM calls WHERE run = ?1 AND n = ?2"),
        vals![run, n],
    )?;
    let Some(row) = found else {
        return Ok(None);
    };
    let mut c = StoredCall::of(row)?;
    Bodies::new(db).assemble(&mut c)?;
    Ok(Some(c))
}

/// Call (`task`, `seq`) of run `run` as a replay reads it
/// ([`REPLAY_COLUMNS`]), its input as stored: an indexed look-up, for a
/// call the replay's read-ahead did not find.
pub fn call_at(db: &dyn Db, run: &str, task: &str, seq: i64) -> db::Result<Option<StoredCall>> {
    db.first(
        &format!("SELECT {REPLAY_COLUMNS} FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3"),
        vals![run, task, seq],
    )?
    .map(StoredCall::of)
    .transpose()
}

/// Up to `limit` calls of run `run` after chain position `after`, in chain
/// order, as a replay reads them, input as stored: a page of a replay's
/// read-ahead.
pub fn calls_after(
    db: &dyn Db,
    run: &str,
    after: i64,
    limit: usize,
) -> db::Result<Vec<StoredCall>> {
    calls_where(
        "run = ?1 AND n > ?2 ORDER BY n LIMIT ?3",
        db,
        vals![run, after, limit],
    )
}

/// The calls `SELECT`ed with `filter` (what follows `WHERE`), as a replay
/// reads them.
fn calls_where(filter: &str, db: &dyn Db, params: &[Val]) -> db::Result<Vec<StoredCall>> {
    let mut found = Vec::new();
    db.each(
        &format!("SELECT {REPLAY_COLUMNS} FROM calls WHERE {filter}"),
        params,
        &mut |row| {
            found.push(StoredCall::of(row)?);
            Ok(())
        },
    )?;
    Ok(found)
}

/// The calls of run `run` whose task is `task` or one of its descendants
/// (`task.…`) and whose outcome is known, as a replay reads them, input as
/// stored.
pub fn calls_under(db: &dyn Db, run: &str, task: &str) -> db::Result<Vec<StoredCall>> {
    // The prefix is given whole: PostgreSQL infers no type for a
    // parameter inside `length()` or `||`.
    let prefix = format!("{task}.");
    calls_where(
        "run = ?1 AND status IS NOT NULL
           AND (task = ?2 OR substr(task, 1, length(CAST(?3 AS TEXT))) = ?3)",
        db,
        vals![run, task, prefix],
    )
}

/// How many calls run `run` holds.
pub fn call_count(db: &dyn Db, run: &str) -> db::Result<i64> {
    let n = db.value("SELECT count(*) FROM calls WHERE run = ?1", vals![run])?;
    Ok(n.unwrap_or(0))
}

/// Hands each call row of `run` to `f` in chain order, its input whole,
/// without holding them all (a run may hold thousands of calls with large
/// outputs); `err` words a failed read in the caller's error.
pub fn each_call<E>(
    db: &dyn Db,
    run: &str,
    output: Output,
    err: impl Fn(db::Error) -> E,
    mut f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    let mut bodies = Bodies::new(db);
    each_stored_call(db, run, output, &err, |mut c| {
        bodies.assemble(&mut c).map_err(&err)?;
        f(c)
    })
}

/// [`each_call`] with each input as its column stores it: what `verify`
/// hashes.
pub fn each_stored_call<E>(
    db: &dyn Db,
    run: &str,
    output: Output,
    err: impl Fn(db::Error) -> E,
    f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    each_stored_where(db, run, output, "TRUE", err, f)
}

/// Hands `f` each row of `run` as the store returns it, in chain order,
/// its columns those of [`StoredCall`] with the output inline only: a
/// reader that needs no copy of them (verify's hashes) borrows them from
/// the row instead.
pub fn each_stored_row<E>(
    db: &dyn Db,
    run: &str,
    err: impl Fn(db::Error) -> E,
    f: impl FnMut(Row) -> Result<(), E>,
) -> Result<(), E> {
    let pages = Pages {
        columns: INLINE_COLUMNS,
        filter: "TRUE",
        args: Vec::new(),
        size: PAGE,
    };
    each_page(db, run, pages, err, f)
}

/// [`each_stored_call`] of the rows that keep input items by content only.
pub fn each_call_with_parts<E>(
    db: &dyn Db,
    run: &str,
    err: impl Fn(db::Error) -> E,
    f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    each_stored_where(db, run, Output::Inline, "parts IS NOT NULL", err, f)
}

/// [`each_stored_call`] of the rows `filter` (an SQL condition) holds for.
fn each_stored_where<E>(
    db: &dyn Db,
    run: &str,
    output: Output,
    filter: &str,
    err: impl Fn(db::Error) -> E,
    mut f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    let (columns, size) = match output {
        Output::Resolved => (CALL_COLUMNS, RESOLVED_PAGE),
        Output::Inline => (INLINE_COLUMNS, PAGE),
    };
    let pages = Pages {
        columns,
        filter,
        args: Vec::new(),
        size,
    };
    each_page(db, run, pages, &err, |row| {
        f(StoredCall::of(row).map_err(&err)?)
    })
}

/// Hands `f` the output (inline, and the key of one kept by content) of
/// each call of `flow` in run `run` that ended `ok`, in chain order.
pub fn each_ok_output(
    db: &dyn Db,
    run: &str,
    flow: &str,
    mut f: impl FnMut(Option<String>, Option<String>),
) -> db::Result<()> {
    let pages = Pages {
        columns: "run, task, seq, n, output, output_ref",
        filter: "status = 'ok' AND flow = ?2",
        args: vec![Val::from(flow)],
        size: PAGE,
    };
    each_page(
        db,
        run,
        pages,
        |e| e,
        |row| {
            let mut r = Take(row);
            f(r.opt_text(4)?, r.opt_text(5)?);
            Ok(())
        },
    )
}

/// The flows of run `run`'s calls that ended `ok`, each once.
pub fn ok_flows(db: &dyn Db, run: &str) -> db::Result<Vec<String>> {
    db.column(
        "SELECT DISTINCT flow FROM calls WHERE run = ?1 AND status = 'ok'",
        vals![run],
    )
}

/// Hands `f` each hash of run `run`'s rows, in chain order.
pub fn each_row_hash(
    db: &dyn Db,
    run: &str,
    mut f: impl FnMut(String) -> db::Result<()>,
) -> db::Result<()> {
    let pages = Pages {
        columns: "run, task, seq, n, hash",
        filter: "TRUE",
        args: Vec::new(),
        size: PAGE,
    };
    each_page(db, run, pages, |e| e, |row| f(Take(row).text(4)?))
}

/// The hash of run `run`'s last row in chain order (the order of
/// A run's tip, the newest of its hashes (its seal, else its last row's,
/// else its head), and how many rows it holds.
pub fn tip(db: &dyn Db, run: &str, head: &str, seal: Option<&str>) -> db::Result<(String, i64)> {
    let rows = call_count(db, run)?;
    let tip = match seal {
        Some(seal) => seal.to_string(),
        None => last_row_hash(db, run)?.unwrap_or_else(|| head.to_string()),
    };
    Ok((tip, rows))
}

/// [`each_row_hash`]); `None` for a run without rows.
pub fn last_row_hash(db: &dyn Db, run: &str) -> db::Result<Option<String>> {
    db.value(
        "SELECT hash FROM calls WHERE run = ?1 ORDER BY n DESC, task DESC, seq DESC LIMIT 1",
        vals![run],
    )
}

/// The bodies of inputs' items read so far, parsed: every later call of a
/// conversation sends its earlier messages again, so each is read once.
/// The lists of keys of the last rows are kept too, for the rows that
/// continue them.
pub struct Bodies<'c> {
    db: &'c dyn Db,
    kept: Kept,
}

/// What [`Bodies`] keeps at hand between reads: a reader that reads one
/// call at a time (a replay) keeps it between its reads, so a list is not
/// looked for again from its start for every call.
#[derive(Debug, Default)]
pub struct Kept {
    seen: HashMap<String, Option<Value>>,
    lists: Vec<KeptList>,
}

/// Item bodies kept at hand at most; past this many they are all
/// forgotten and read again as needed.
const KEPT_BODIES: usize = 4096;

/// A row's list of keys kept at hand: the row (run, task, seq), its place
/// `n` in its chain, its keys.
type KeptList = ((String, String, i64), i64, Vec<String>);

/// Lists of keys a reader keeps at hand; an older one is read again.
const KEPT_LISTS: usize = 16;

impl<'c> Bodies<'c> {
    /// None read yet.
    pub fn new(db: &'c dyn Db) -> Bodies<'c> {
        Bodies::with(db, Kept::default())
    }

    /// Reads with what an earlier reader kept at hand.
    pub fn with(db: &'c dyn Db, kept: Kept) -> Bodies<'c> {
        Bodies { db, kept }
    }

    /// What it keeps at hand, for a later reader.
    pub fn kept(self) -> Kept {
        self.kept
    }

    /// The item kept as `key`, parsed; `None` when `outputs` lacks it.
    fn get(&mut self, key: &str) -> db::Result<Option<Value>> {
        if let Some(v) = self.kept.seen.get(key) {
            return Ok(v.clone());
        }
        let v = body(self.db, key)?.map(|b| parts::parse_body(&b));
        if self.kept.seen.len() >= KEPT_BODIES {
            self.kept.seen.clear();
        }
        self.kept.seen.insert(key.to_string(), v.clone());
        Ok(v)
    }

    /// Finds the keys of `c`'s list when its column continues another
    /// row's; leaves them unknown when that row or that many keys is not
    /// in the record, or the continuation does not lead back through ever
    /// earlier rows to a list written whole.
    pub fn resolve(&mut self, c: &mut StoredCall) -> db::Result<()> {
        let Some(p) = c.parts.as_mut() else {
            return Ok(());
        };
        if p.named.is_none() {
            if let Some((
                field,
                Listed::After {
                    task,
                    seq,
                    keep,
                    add,
                },
            )) = p.listed.clone()
            {
                let base = self.list_of(&c.run, &task, seq, c.n)?;
                p.named = base.filter(|b| keep <= b.len()).map(|mut keys| {
                    keys.truncate(keep);
                    keys.extend(add);
                    (field, keys)
                });
            }
        }
        if let Some((_, keys)) = &p.named {
            if self.kept.lists.len() == KEPT_LISTS {
                self.kept.lists.remove(0);
            }
            let at = (c.run.clone(), c.task.clone(), c.seq);
            self.kept.lists.push((at, c.n, keys.clone()));
        }
        Ok(())
    }

    /// The keys of call (`task`, `seq`) of `run`, from those at hand or
    /// read from its row, following its continuation back. The writer
    /// continues only a list of a row before the one it writes, so every
    /// step must go to a row earlier in the chain than the one that named
    /// it (`below` for the first): a step that does not (a loop, a later
    /// row) is a damaged record, and the list is unknown. So the walk ends,
    /// without recursion, in at most as many steps as the run has rows.
    fn list_of(
        &mut self,
        run: &str,
        task: &str,
        seq: i64,
        below: i64,
    ) -> db::Result<Option<Vec<String>>> {
        let (mut task, mut seq, mut below) = (task.to_string(), seq, below);
        // The continuations met on the way back, newest first.
        let mut steps: Vec<(usize, Vec<String>)> = Vec::new();
        let mut keys = loop {
            let at = (run.to_string(), task.clone(), seq);
            if let Some((_, n, keys)) = self.kept.lists.iter().rev().find(|(k, _, _)| *k == at) {
                if *n >= below {
                    return Ok(None);
                }
                break keys.clone();
            }
            let row = self.db.first(
                "SELECT n, parts FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3",
                vals![run, &task, seq],
            )?;
            let Some(row) = row else {
                return Ok(None);
            };
            let n: i64 = row.get(0)?;
            let Some(column) = row.text(1)? else {
                return Ok(None);
            };
            if n >= below {
                return Ok(None);
            }
            let Some((_, listed)) = parts::listed(column) else {
                return Ok(None);
            };
            match listed {
                Listed::Keys(keys) => break keys,
                Listed::After {
                    task: t,
                    seq: s,
                    keep,
                    add,
                } => {
                    steps.push((keep, add));
                    (task, seq, below) = (t, s, n);
                }
            }
        };
        for (keep, add) in steps.into_iter().rev() {
            if keep > keys.len() {
                return Ok(None);
            }
            keys.truncate(keep);
            keys.extend(add);
        }
        Ok(Some(keys))
    }

    /// Puts `c`'s input back together when its items are kept by content;
    /// an item gone from `outputs` stands as `null`, and `missing` says so.
    pub fn assemble(&mut self, c: &mut StoredCall) -> db::Result<()> {
        self.resolve(c)?;
        let Some(p) = c.parts.as_mut() else {
            return Ok(());
        };
        let Some((field, keys)) = &p.named else {
            p.missing.get_or_insert(0);
            return Ok(());
        };
        let mut items = Vec::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let item = self.get(key)?;
            if item.is_none() {
                p.missing.get_or_insert(i);
            }
            items.push(item.unwrap_or(Value::Null));
        }
        if let Some(whole) = parts::assemble(&p.input, field, items) {
            c.input = whole;
        }
        Ok(())
    }
}

/// The body `outputs` keeps as `key`, if it is there.
pub fn body(db: &dyn Db, key: &str) -> db::Result<Option<String>> {
    db.value("SELECT body FROM outputs WHERE sha256 = ?1", vals![key])
}

/// Hands `f` each output run `run` keeps by content, as (SHA-256 key,
/// body), until `f` says to stop; each is read once, however many rows
/// return it, in the order of their keys.
pub fn each_output(
    db: &dyn Db,
    run: &str,
    f: impl FnMut(String, String) -> bool,
) -> db::Result<()> {
    // Each page of keys costs a pass over the run's rows (no index leads
    // from a row's key to its run): SQLite, which streams, reads them in
    // one query; PostgreSQL, which holds a query's rows, in pages.
    let size = match db.backend() {
        Backend::Sqlite => None,
        Backend::Postgres => Some(BODY_PAGE),
    };
    each_output_paged(db, run, size, f)
}

/// [`each_output`], a page of `size` bodies a query (all in one: `None`).
fn each_output_paged(
    db: &dyn Db,
    run: &str,
    size: Option<usize>,
    mut f: impl FnMut(String, String) -> bool,
) -> db::Result<()> {
    let select = "SELECT sha256, body FROM outputs
        WHERE sha256 IN (SELECT output_ref FROM calls WHERE run = ?1)";
    let limit = size.map_or(String::new(), |n| format!(" LIMIT {n}"));
    let first = format!("{select} ORDER BY sha256{limit}");
    let next = format!("{select} AND sha256 > ?2 ORDER BY sha256{limit}");
    let mut params = vec![Val::from(run)];
    let mut sql = &first;
    // The last key handed over: the next page starts after it.
    let mut last = String::new();
    loop {
        let (mut got, mut stop) = (0, false);
        each_until(db, sql, &params, &|e| e, |row| {
            got += 1;
            let mut r = Take(row);
            let key = r.text(0)?;
            if size.is_some() {
                last.clear();
                last.push_str(&key);
            }
            stop = !f(key, r.text(1)?);
            match stop {
                true => Err(db::Error::other("the reader stopped")),
                false => Ok(()),
            }
        })
        .or_else(|e| if stop { Ok(()) } else { Err(e) })?;
        if stop || size.is_none_or(|n| got < n) {
            return Ok(());
        }
        params = vec![Val::from(run), Val::from(&last)];
        sql = &next;
    }
}

/// Hands `f` each clock reading of run `run` in (task, seq) order, the
/// order the seal covers them in, without holding them all: a page a
/// query, each starting after the last reading of the one before.
pub fn each_reading(db: &dyn Db, run: &str, mut f: impl FnMut(StoredReading)) -> db::Result<()> {
    let select = "SELECT task, seq, kind, value FROM readings WHERE run = ?1";
    let order = format!("ORDER BY task, seq LIMIT {PAGE}");
    let first = format!("{select} {order}");
    let next = format!("{select} AND task >= ?2 AND (task > ?2 OR seq > ?3) {order}");
    let mut params = vec![Val::from(run)];
    let mut sql = &first;
    // The last reading handed over: the next page starts after it.
    let (mut task, mut seq) = (String::new(), 0);
    loop {
        let mut got = 0;
        db.each(sql, &params, &mut |row| {
            got += 1;
            let mut r = Take(row);
            let reading = StoredReading {
                task: r.text(0)?,
                seq: r.get(1)?,
                kind: r.text(2)?,
                value: r.get(3)?,
            };
            task.clear();
            task.push_str(&reading.task);
            seq = reading.seq;
            f(reading);
            Ok(())
        })?;
        if got < PAGE {
            return Ok(());
        }
        params = vec![Val::from(run), Val::from(&task), Val::Int(seq)];
        sql = &next;
    }
}

/// Whether an error column's JSON is a refusal: its `code` is
/// `permission_denied` or `permission_required`. A damaged column (not
/// JSON) is none.
fn refusal(error: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(error) else {
        return false;
    };
    matches!(
        v.get("code").and_then(Value::as_str),
        Some("permission_denied" | "permission_required")
    )
}

/// How many calls of run `run` were refused ([`refusal`]).
fn denials(db: &dyn Db, run: &str) -> db::Result<i64> {
    let pages = Pages {
        columns: "run, task, seq, n, error",
        filter: "error IS NOT NULL",
        args: Vec::new(),
        size: PAGE,
    };
    let mut n = 0;
    each_page(
        db,
        run,
        pages,
        |e| e,
        |row| {
            n += i64::from(row.text(4)?.is_some_and(refusal));
            Ok(())
        },
    )?;
    Ok(n)
}

/// The newest `limit` runs (all for a negative one), newest first by place
/// in the chain of runs (the order `last~N` counts in), each
/// with its counts.
pub fn tallies(db: &dyn Db, limit: i64) -> db::Result<Vec<RunTally>> {
    // The limit applies before the join, so only the runs shown are counted.
    // Refusals are told by the error's JSON, read here, not by the store's
    // JSON functions.
    let sql = "SELECT r.id, r.script, r.status, r.started_ms, r.ended_ms, count(c.run),
        CAST(coalesce(sum(CASE WHEN c.tier = 'irreversible' THEN 1 ELSE 0 END), 0) AS BIGINT),
        CAST(coalesce(sum(CASE WHEN c.run IS NOT NULL AND c.status IS NULL THEN 1 ELSE 0 END), 0)
             AS BIGINT)
      FROM (SELECT id, script, status, started_ms, ended_ms, n FROM runs
            ORDER BY n DESC NULLS LAST, started_ms DESC, id DESC LIMIT ?1) r
      LEFT JOIN calls c ON c.run = r.id
      GROUP BY r.id, r.script, r.status, r.started_ms, r.ended_ms, r.n
      ORDER BY r.n DESC NULLS LAST, r.started_ms DESC, r.id DESC";
    let limit = if limit < 0 { i64::MAX } else { limit };
    let mut tallies = Vec::new();
    db.each(sql, vals![limit], &mut |row| {
        let mut r = Take(row);
        tallies.push(RunTally {
            id: r.text(0)?,
            script: r.text(1)?,
            status: r.text(2)?,
            started_ms: r.get(3)?,
            ended_ms: r.get(4)?,
            calls: r.get(5)?,
            irreversible: r.get(6)?,
            denials: 0,
            unfinished: r.get(7)?,
        });
        Ok(())
    })?;
    for t in tallies.iter_mut().filter(|t| t.calls > 0) {
        t.denials = denials(db, &t.id)?;
    }
    Ok(tallies)
}

/// How many runs the record holds.
pub fn run_count(db: &dyn Db) -> db::Result<i64> {
    Ok(db.value("SELECT count(*) FROM runs", &[])?.unwrap_or(0))
}

/// Every run's id, newest first by place in the chain of runs.
pub fn run_ids(db: &dyn Db) -> db::Result<Vec<String>> {
    db.column(
        "SELECT id FROM runs ORDER BY n DESC NULLS LAST, started_ms DESC, id DESC",
        &[],
    )
}

/// The run at place `n` in the chain of runs, if it is still there.
pub fn predecessor(db: &dyn Db, n: i64) -> db::Result<Option<Predecessor>> {
    let found = db.first(
        "SELECT id, head, coalesce(joined, seal) FROM runs WHERE n = ?1",
        vals![n],
    )?;
    found
        .map(|row| {
            let mut r = Take(row);
            Ok(Predecessor {
                id: r.text(0)?,
                head: r.text(1)?,
                seal: r.opt_text(2)?,
            })
        })
        .transpose()
}

/// The hash of call `#n` of run `run`, if the row is there.
pub fn row_hash(db: &dyn Db, run: &str, n: i64) -> db::Result<Option<String>> {
    db.value(
        "SELECT hash FROM calls WHERE run = ?1 AND n = ?2",
        vals![run, n],
    )
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;

/// Hands `f` each call of run `run` from chain position `from` on, in chain
/// order, its output resolved and its input whole; with `settled`, only
/// those whose outcome is written: what a reader following a live run
/// (its OpenTelemetry exporter) has not seen yet.
pub fn each_call_from<E>(
    db: &dyn Db,
    run: &str,
    from: i64,
    settled: bool,
    err: impl Fn(db::Error) -> E,
    mut f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    let mut bodies = Bodies::new(db);
    let pages = Pages {
        columns: CALL_COLUMNS,
        filter: if settled {
            "n >= ?2 AND status IS NOT NULL"
        } else {
            "n >= ?2"
        },
        args: vec![Val::Int(from)],
        size: RESOLVED_PAGE,
    };
    each_page(db, run, pages, &err, |row| {
        let mut c = StoredCall::of(row).map_err(&err)?;
        bodies.assemble(&mut c).map_err(&err)?;
        f(c)
    })
}
