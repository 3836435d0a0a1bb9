//! The record as stored: the one reader of the schema, whose SELECTs and
//! row mappings `show`, `export`, `verify`, `list` and the replay all use,
//! so a column added or renamed is read in one place.
//!
//! JSON columns are kept as their text: the hashes cover those bytes, and
//! each view parses what it shows. An input whose list items are kept by
//! content is put back together here, so every reader but `verify` sees
//! the input whole. Functions return rusqlite's errors, so each caller
//! words a failure as it always has.

use super::chain::{CallIntent, CallOutcome, RunHead, RunLink};
use super::parts::{self, Listed};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;
use std::collections::HashMap;

const RUN_COLUMNS: &str = "id, script, script_sha256, policies, args, workspace, started_ms, \
ended_ms, status, error, version, random_seed, resumed_from, pid, pid_start, head, seal, ceiling, \
n, prior, prior_rows";

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
}

impl StoredRun {
    fn read(r: &rusqlite::Row) -> rusqlite::Result<StoredRun> {
        Ok(StoredRun {
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
            link: chained.then(|| RunLink {
                n: self.n.unwrap_or(0),
                prior: self.prior.as_deref(),
                prior_rows: self.prior_rows,
            }),
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
    pub(super) fn read(r: &rusqlite::Row) -> rusqlite::Result<StoredCall> {
        let input: String = r.get(6)?;
        Ok(StoredCall {
            parts: Parts::of(r.get(23)?, &input),
            run: r.get(0)?,
            task: r.get(1)?,
            seq: r.get(2)?,
            n: r.get(3)?,
            flow: r.get(4)?,
            tier: r.get(5)?,
            input,
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
            client: r.get(24)?,
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
    pub(super) seal: Option<String>,
}

/// How the views word a failed read.
pub fn db(e: rusqlite::Error) -> String {
    format!("reading the audit database: {e}")
}

/// Run `id`, if the record holds it.
pub fn run(conn: &Connection, id: &str) -> rusqlite::Result<Option<StoredRun>> {
    conn.query_row(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        [id],
        StoredRun::read,
    )
    .optional()
}

/// Run `id`, or what to do when there is no such run: as the views say it.
pub fn load_run(conn: &Connection, id: &str) -> Result<StoredRun, String> {
    run(conn, id).map_err(db)?.ok_or_else(|| {
        format!("no run {id:?} in the audit database; `sluice audit list` shows the runs")
    })
}

/// Call `#n` of run `run`, its output resolved and its input whole.
pub fn call(conn: &Connection, run: &str, n: i64) -> rusqlite::Result<Option<StoredCall>> {
    let found = conn
        .query_row(
            &format!("SELECT {CALL_COLUMNS} FROM calls WHERE run = ?1 AND n = ?2"),
            rusqlite::params![run, n],
            StoredCall::read,
        )
        .optional()?;
    let Some(mut c) = found else {
        return Ok(None);
    };
    Bodies::new(conn).assemble(&mut c)?;
    Ok(Some(c))
}

/// Call (`task`, `seq`) of run `run` as a replay reads it
/// ([`REPLAY_COLUMNS`]), its input as stored: an indexed look-up, for a
/// call the replay's read-ahead did not find.
pub fn call_at(
    conn: &Connection,
    run: &str,
    task: &str,
    seq: i64,
) -> rusqlite::Result<Option<StoredCall>> {
    conn.prepare_cached(&format!(
        "SELECT {REPLAY_COLUMNS} FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3"
    ))?
    .query_row(rusqlite::params![run, task, seq], StoredCall::read)
    .optional()
}

/// Up to `limit` calls of run `run` after chain position `after`, in chain
/// order, as a replay reads them, input as stored: a page of a replay's
/// read-ahead.
pub fn calls_after(
    conn: &Connection,
    run: &str,
    after: i64,
    limit: usize,
) -> rusqlite::Result<Vec<StoredCall>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {REPLAY_COLUMNS} FROM calls WHERE run = ?1 AND n > ?2 ORDER BY n LIMIT ?3"
    ))?;
    let found = stmt.query_map(
        rusqlite::params![run, after, limit as i64],
        StoredCall::read,
    )?;
    found.collect()
}

/// The calls of run `run` whose task is `task` or one of its descendants
/// (`task.…`) and whose outcome is known, as a replay reads them, input as
/// stored.
pub fn calls_under(conn: &Connection, run: &str, task: &str) -> rusqlite::Result<Vec<StoredCall>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {REPLAY_COLUMNS} FROM calls WHERE run = ?1 AND status IS NOT NULL
           AND (task = ?2 OR substr(task, 1, length(?2) + 1) = ?2 || '.')"
    ))?;
    let found = stmt.query_map(rusqlite::params![run, task], StoredCall::read)?;
    found.collect()
}

/// How many calls run `run` holds.
pub fn call_count(conn: &Connection, run: &str) -> rusqlite::Result<i64> {
    conn.query_row("SELECT count(*) FROM calls WHERE run = ?1", [run], |r| {
        r.get(0)
    })
}

/// Hands each call row of `run` to `f` in chain order, its input whole,
/// without holding them all (a run may hold thousands of calls with large
/// outputs); `err` words a failed read in the caller's error.
pub fn each_call<E>(
    conn: &Connection,
    run: &str,
    output: Output,
    err: impl Fn(rusqlite::Error) -> E,
    mut f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    let mut bodies = Bodies::new(conn);
    each_stored_call(conn, run, output, &err, |mut c| {
        bodies.assemble(&mut c).map_err(&err)?;
        f(c)
    })
}

/// [`each_call`] with each input as its column stores it: what `verify`
/// hashes.
pub fn each_stored_call<E>(
    conn: &Connection,
    run: &str,
    output: Output,
    err: impl Fn(rusqlite::Error) -> E,
    f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    each_stored_where(conn, run, output, "TRUE", err, f)
}

/// Hands `f` each row of `run` as SQLite holds it, in chain order, its
/// columns those of [`StoredCall`] with the output inline only: a reader
/// that needs no copy of them (verify's hashes) borrows them instead.
pub fn each_stored_row<E>(
    conn: &Connection,
    run: &str,
    err: impl Fn(rusqlite::Error) -> E,
    mut f: impl FnMut(&rusqlite::Row) -> Result<(), E>,
) -> Result<(), E> {
    let sql = format!("SELECT {INLINE_COLUMNS} FROM calls WHERE run = ?1 ORDER BY n");
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([run]).map_err(&err)?;
    while let Some(row) = rows.next().map_err(&err)? {
        f(row)?;
    }
    Ok(())
}

/// [`each_stored_call`] of the rows that keep input items by content only.
pub fn each_call_with_parts<E>(
    conn: &Connection,
    run: &str,
    err: impl Fn(rusqlite::Error) -> E,
    f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    each_stored_where(conn, run, Output::Inline, "parts IS NOT NULL", err, f)
}

/// [`each_stored_call`] of the rows `filter` (an SQL condition) holds for.
fn each_stored_where<E>(
    conn: &Connection,
    run: &str,
    output: Output,
    filter: &str,
    err: impl Fn(rusqlite::Error) -> E,
    mut f: impl FnMut(StoredCall) -> Result<(), E>,
) -> Result<(), E> {
    let columns = match output {
        Output::Resolved => CALL_COLUMNS,
        Output::Inline => INLINE_COLUMNS,
    };
    let sql = format!("SELECT {columns} FROM calls WHERE run = ?1 AND ({filter}) ORDER BY n");
    let mut stmt = conn.prepare(&sql).map_err(&err)?;
    let mut rows = stmt.query([run]).map_err(&err)?;
    while let Some(row) = rows.next().map_err(&err)? {
        f(StoredCall::read(row).map_err(&err)?)?;
    }
    Ok(())
}

/// The bodies of inputs' items read so far, parsed: every later call of a
/// conversation sends its earlier messages again, so each is read once.
/// The lists of keys of the last rows are kept too, for the rows that
/// continue them.
pub struct Bodies<'c> {
    conn: &'c Connection,
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
    pub fn new(conn: &'c Connection) -> Bodies<'c> {
        Bodies::with(conn, Kept::default())
    }

    /// Reads with what an earlier reader kept at hand.
    pub fn with(conn: &'c Connection, kept: Kept) -> Bodies<'c> {
        Bodies { conn, kept }
    }

    /// What it keeps at hand, for a later reader.
    pub fn kept(self) -> Kept {
        self.kept
    }

    /// The item kept as `key`, parsed; `None` when `outputs` lacks it.
    fn get(&mut self, key: &str) -> rusqlite::Result<Option<Value>> {
        if let Some(v) = self.kept.seen.get(key) {
            return Ok(v.clone());
        }
        let v = body(self.conn, key)?.map(|b| parts::parse_body(&b));
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
    pub fn resolve(&mut self, c: &mut StoredCall) -> rusqlite::Result<()> {
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
    ) -> rusqlite::Result<Option<Vec<String>>> {
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
            let row: Option<(i64, Option<String>)> = self
                .conn
                .prepare_cached(
                    "SELECT n, parts FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3",
                )?
                .query_row(rusqlite::params![run, task, seq], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            let Some((n, Some(column))) = row else {
                return Ok(None);
            };
            if n >= below {
                return Ok(None);
            }
            let Some((_, listed)) = parts::listed(&column) else {
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
    pub fn assemble(&mut self, c: &mut StoredCall) -> rusqlite::Result<()> {
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
pub fn body(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT body FROM outputs WHERE sha256 = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

/// Hands `f` each output run `run` keeps by content, as (SHA-256 key,
/// body), until `f` says to stop; each is read once, however many rows
/// return it.
pub fn each_output(
    conn: &Connection,
    run: &str,
    mut f: impl FnMut(String, String) -> bool,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(
        "SELECT sha256, body FROM outputs WHERE sha256 IN (SELECT output_ref FROM calls WHERE run = ?1)",
    )?;
    let mut rows = stmt.query([run])?;
    while let Some(r) = rows.next()? {
        if !f(r.get(0)?, r.get(1)?) {
            break;
        }
    }
    Ok(())
}

/// Hands `f` each clock reading of run `run` in (task, seq) order, the
/// order the seal covers them in, without holding them all.
pub fn each_reading(
    conn: &Connection,
    run: &str,
    mut f: impl FnMut(StoredReading),
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT task, seq, kind, value FROM readings WHERE run = ?1 ORDER BY task, seq",
    )?;
    let mut rows = stmt.query([run])?;
    while let Some(r) = rows.next()? {
        f(StoredReading {
            task: r.get(0)?,
            seq: r.get(1)?,
            kind: r.get(2)?,
            value: r.get(3)?,
        });
    }
    Ok(())
}

/// The newest `limit` runs (all for a negative one), newest first by place
/// in the chain of runs (the order `last~N` counts in), each
/// with its counts.
pub fn tallies(conn: &Connection, limit: i64) -> rusqlite::Result<Vec<RunTally>> {
    // The limit applies before the join, so only the runs shown are counted.
    // A damaged error column must not fail the listing: json_extract
    // raises on malformed JSON, so it is only reached through json_valid.
    let sql = "SELECT r.id, r.script, r.status, r.started_ms, r.ended_ms, count(c.run),
        coalesce(sum(c.tier = 'irreversible'), 0),
        coalesce(sum(CASE WHEN json_valid(c.error) THEN json_extract(c.error, '$.code') END
                     IN ('permission_denied', 'permission_required')), 0),
        coalesce(sum(c.run IS NOT NULL AND c.status IS NULL), 0)
      FROM (SELECT rowid AS rid, * FROM runs ORDER BY n DESC LIMIT ?1) r
      LEFT JOIN calls c ON c.run = r.id
      GROUP BY r.rid ORDER BY r.n DESC";
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([limit], |r| {
        Ok(RunTally {
            id: r.get(0)?,
            script: r.get(1)?,
            status: r.get(2)?,
            started_ms: r.get(3)?,
            ended_ms: r.get(4)?,
            calls: r.get(5)?,
            irreversible: r.get(6)?,
            denials: r.get(7)?,
            unfinished: r.get(8)?,
        })
    })?;
    rows.collect()
}

/// How many runs the record holds.
pub fn run_count(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
}

/// Every run's id, newest first by place in the chain of runs.
pub fn run_ids(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT id FROM runs ORDER BY n DESC, started_ms DESC, rowid DESC")?;
    let ids = stmt.query_map([], |r| r.get::<_, String>(0))?;
    ids.collect()
}

/// The run at place `n` in the chain of runs, if it is still there.
pub fn predecessor(conn: &Connection, n: i64) -> rusqlite::Result<Option<Predecessor>> {
    conn.query_row("SELECT id, head, seal FROM runs WHERE n = ?1", [n], |r| {
        Ok(Predecessor {
            id: r.get(0)?,
            head: r.get(1)?,
            seal: r.get(2)?,
        })
    })
    .optional()
}

/// The hash of call `#n` of run `run`, if the row is there.
pub fn row_hash(conn: &Connection, run: &str, n: i64) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT hash FROM calls WHERE run = ?1 AND n = ?2",
        rusqlite::params![run, n],
        |r| r.get(0),
    )
    .optional()
}
