//! `sluice audit verify`: each run's chain and seal recomputed, and its
//! link to the run before it checked, and every body kept by content (a
//! large output, an input's message) hashed against its key; the first
//! thing that does not match is named.

use super::chain::{self, CallIntent, CallOutcome, Reading, RunEnd, Seal};
use super::db::{self, vals, Db, Row, Val};
use super::rows::{self, Origin, StoredCall, StoredRun};
use super::store;
use serde::Serialize;
use std::collections::HashMap;

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
    /// The text of the script, or of a module it required, kept in the
    /// record was changed or is gone (since schema 7).
    SourceEdited,
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
/// run before it. The run's rows are read one at a time, in passes, never
/// held together: a run of any length verifies in the same memory.
pub fn verify(db: &dyn Db, run_id: &str) -> Result<Verdict, String> {
    let run = rows::load_run(db, run_id)?;
    let unchained = store::unchained_runs(db).map_err(rows::db)?;
    // A run without a place is judged as chained: every run since has one.
    let chained = run.n.is_none_or(|n| n > unchained);
    let (mut verdict, items) = judge(db, &run, chained)?;
    if verdict.intact && chained {
        verdict.problem = match check_prior(db, &run)? {
            None => check_joined(db, &run)?,
            some => some,
        };
        verdict.intact = verdict.problem.is_none();
    }
    if verdict.intact {
        // Only rows that keep input items by content need their items
        // checked: most runs have none, and need no pass for them.
        let parts = if items {
            check_parts(db, run_id)?
        } else {
            None
        };
        let found = match parts {
            None => check_outputs(db, run_id)?,
            some => some,
        };
        let found = match found {
            None => check_sources(db, &run)?,
            some => some,
        };
        verdict.intact = found.is_none();
        verdict.problem = found;
    }
    Ok(verdict)
}

/// Each item an input keeps by content (a model call's message) must still
/// be in `outputs` and hash to its key (the row's hash covers the keys);
/// the first row, by `n`, whose item was edited or deleted is named, with
/// the item's place in its field.
fn check_parts(db: &dyn Db, run_id: &str) -> Result<Option<Problem>, String> {
    // A conversation's messages recur in every later call: each key is
    // checked once.
    let mut judged: HashMap<String, Option<&'static str>> = HashMap::new();
    let mut lists = rows::Bodies::new(db);
    let mut found = None;
    rows::each_call_with_parts(db, run_id, rows::db, |mut c| {
        // A row may list its keys as the continuation of an earlier row's.
        lists.resolve(&mut c).map_err(rows::db)?;
        if found.is_none() {
            found = parts_problem(db, &c, &mut judged)?;
        }
        Ok(())
    })?;
    Ok(found)
}

/// What is wrong with the items row `c` keeps by content, if anything.
fn parts_problem(
    db: &dyn Db,
    c: &StoredCall,
    judged: &mut HashMap<String, Option<&'static str>>,
) -> Result<Option<Problem>, String> {
    let Some(parts) = &c.parts else {
        return Ok(None);
    };
    let field = parts.field().unwrap_or("?");
    if parts.unresolved() {
        let m = format!(
            "content edited: the keys of {field} of its input name a list the record does not hold"
        );
        return Ok(Some(row_problem(c, Failure::ContentEdited, m)));
    }
    for (i, key) in parts.keys().iter().enumerate() {
        let fault = match judged.get(key.as_str()) {
            Some(fault) => *fault,
            None => {
                let fault = body_fault(db, key)?;
                judged.insert(key.clone(), fault);
                fault
            }
        };
        if let Some(what) = fault {
            let m = format!("content edited: {field}[{i}] of its input, kept by content, {what}");
            return Ok(Some(row_problem(c, Failure::ContentEdited, m)));
        }
    }
    Ok(None)
}

/// What is wrong with the body kept as `key`, if anything.
fn body_fault(db: &dyn Db, key: &str) -> Result<Option<&'static str>, String> {
    Ok(match rows::body(db, key).map_err(rows::db)? {
        None => Some("is gone from the record"),
        Some(b) if crate::digest::sha256_hex(b.as_bytes()) != key => {
            Some("was changed: its body no longer hashes to its key")
        }
        Some(_) => None,
    })
}

/// The script's text and each module's the run keeps must still hash to
/// their keys (the head covers the script's, the seal each module's).
fn check_sources(db: &dyn Db, run: &StoredRun) -> Result<Option<Problem>, String> {
    let found = super::sources::problem(db, &run.id, run.script_sha256.as_deref());
    Ok(found
        .map_err(rows::db)?
        .map(|m| run_problem(Failure::SourceEdited, &m)))
}

/// Whether the run before `run` still holds the hash `run` committed to
/// when it started; when not, what is wrong.
fn check_prior(db: &dyn Db, run: &StoredRun) -> Result<Option<Problem>, String> {
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
    let pred = rows::predecessor(db, p).map_err(rows::db)?;
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
        Some(k) => (
            format!("row #{k}"),
            rows::row_hash(db, &pred.id, k).map_err(rows::db)?,
        ),
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

/// A run copied in from another store: whether its hash of its place here
/// still covers its tip, its rows and its link; when not, what is wrong.
/// Its head was checked against the link it was recorded with (`origin`).
fn check_joined(db: &dyn Db, run: &StoredRun) -> Result<Option<Problem>, String> {
    let edited = |m: &str| Ok(Some(run_problem(Failure::RunEdited, m)));
    let joined = match (&run.origin, &run.joined) {
        (None, None) => return Ok(None),
        (Some(Origin::Unreadable(text)), _) => {
            return edited(&format!(
                "run edited: its origin (the link it was recorded with, in the store it was copied from) \
is not one sluice writes: {text}"
            ))
        }
        (Some(_), Some(joined)) => joined,
        (Some(_), None) => {
            return edited("run edited: it was copied in from another store, and its copy link (its hash of \
its place here) is gone")
        }
        (None, Some(_)) => {
            return edited("run edited: it was recorded here, yet it carries a copy link as if it had been \
copied in")
        }
    };
    let (tip, rows) = rows::tip(db, &run.id, &run.head, run.seal.as_deref()).map_err(rows::db)?;
    if chain::joined(&run.head, &tip, rows, &run.link()) == *joined {
        return Ok(None);
    }
    edited(
        "copy link does not match: the run was copied in from another store, and its place here (#n, the \
run before it) or what it held when copied (its rows, its seal) is not what it is now",
    )
}

/// Each output the run keeps by content must still hash to its key (rows
/// hold the key, and their outcome hashes cover it); the first row whose
/// output was edited, or is gone, is named.
fn check_outputs(db: &dyn Db, run_id: &str) -> Result<Option<Problem>, String> {
    let mut edited = None;
    rows::each_output(db, run_id, |key, body| {
        if crate::digest::sha256_hex(body.as_bytes()) != key {
            edited = Some(key);
            return false;
        }
        true
    })
    .map_err(rows::db)?;
    let (filter, args, message) = match &edited {
        Some(key) => (
            "output_ref = ?2",
            vals![run_id, key],
            "outcome edited: the output it keeps by content was changed",
        ),
        None => (
            "output_ref IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM outputs WHERE sha256 = calls.output_ref)",
            vals![run_id],
            "outcome edited: the output it keeps by content is gone",
        ),
    };
    let first = first_row(db, filter, args).map_err(rows::db)?;
    Ok(first.map(|at| at.problem(Failure::OutcomeEdited, message.to_string())))
}

/// Where a row stands, to name it in a problem.
struct At {
    n: i64,
    task: String,
    seq: i64,
    flow: String,
}

impl At {
    fn problem(self, failure: Failure, message: String) -> Problem {
        Problem {
            failure,
            n: Some(self.n),
            task: Some(self.task),
            seq: Some(self.seq),
            flow: Some(self.flow),
            message,
        }
    }
}

/// The first row of run `?1` of `args` (by `n`) that `filter` holds for,
/// its other parameters the rest of `args`.
fn first_row(db: &dyn Db, filter: &str, args: &[Val]) -> db::Result<Option<At>> {
    let sql = format!(
        "SELECT n, task, seq, flow FROM calls WHERE run = ?1 AND {filter} ORDER BY n LIMIT 1"
    );
    db.first(&sql, args)?
        .map(|r| {
            Ok(At {
                n: r.get(0)?,
                task: r.get(1)?,
                seq: r.get(2)?,
                flow: r.get(3)?,
            })
        })
        .transpose()
}

/// Begins reading one snapshot of the record: a run writing while
/// `verify` (or `anchor`) reads does not tear what is read. It lasts until
/// the connection closes.
pub fn snapshot(db: &dyn Db) -> Result<(), String> {
    db.begin(db::Begin::Read).map_err(rows::db)
}

/// Verifies every run, newest first (by place in the chain of runs).
pub fn verify_all(db: &dyn Db) -> Result<Vec<Verdict>, String> {
    let ids = rows::run_ids(db).map_err(rows::db)?;
    ids.iter().map(|id| verify(db, id)).collect()
}

/// The run's head, then its rows one at a time (their links, hashes and
/// outcomes), then its seal: the first mismatch found, and whether any row
/// keeps input items by content.
fn judge(db: &dyn Db, run: &StoredRun, chained: bool) -> Result<(Verdict, bool), String> {
    let mut verdict = Verdict {
        run: run.id.clone(),
        status: run.status.clone(),
        calls: 0,
        sealed: run.seal.is_some(),
        intact: true,
        chained,
        warning: None,
        problem: None,
    };
    let head = chain::head(&run.head_fields(chained));
    if head != run.head {
        verdict.calls = rows::call_count(db, &run.id).map_err(rows::db)? as usize;
        verdict.intact = false;
        verdict.problem = Some(run_problem(
            Failure::RunEdited,
            "run edited: its fields (script, policies, args, workspace, start, version, seed, its place \
among the runs and its link to the run before it) do not hash to its head",
        ));
        return Ok((verdict, false));
    }
    let mut walk = Walk::new(db, &run.id, &head);
    // As stored: the hashes cover an input without its items kept by
    // content, and those items' keys.
    rows::each_stored_row(db, &run.id, rows::db, |r| walk.row(r).map_err(rows::db))?;
    verdict.calls = walk.rows;
    let problem = match walk.problem {
        Some(p) => Some(p),
        None => check_seal(db, run, walk.seal, &mut verdict)?,
    };
    verdict.intact = problem.is_none();
    verdict.problem = problem;
    Ok((verdict, walk.items))
}

/// One pass over a run's rows in chain order: what the next row must link
/// to, the seal so far, and the first problem.
struct Walk<'a> {
    db: &'a dyn Db,
    run: &'a str,
    head: &'a str,
    prev: String,
    rows: usize,
    seal: Seal,
    problem: Option<Problem>,
    /// Whether a row keeps input items by content (its `parts`).
    items: bool,
}

impl<'a> Walk<'a> {
    fn new(db: &'a dyn Db, run: &'a str, head: &'a str) -> Walk<'a> {
        Walk {
            db,
            run,
            head,
            prev: head.to_string(),
            rows: 0,
            seal: Seal::new(head),
            problem: None,
            items: false,
        }
    }

    /// Checks row `r`, found at the next chain position; after a problem
    /// the rows are only counted. A row that holds is hashed from its
    /// columns as the store returned them, copying nothing; one that does
    /// not is read whole to say why.
    fn row(&mut self, r: Row) -> db::Result<()> {
        self.rows += 1;
        self.items |= !matches!(r.0.get(23), Some(Val::Null) | None);
        if self.problem.is_some() {
            return Ok(());
        }
        let (hash, outcome_hash) = (text(&r, 14)?, r.text(21)?);
        if self.holds(&r, hash, outcome_hash)? {
            self.seal.row(hash, outcome_hash);
            self.prev.clear();
            self.prev.push_str(hash);
            return Ok(());
        }
        let c = StoredCall::of(r)?;
        self.problem = self.check(&c)?;
        self.seal.row(&c.hash, c.outcome_hash.as_deref());
        self.prev.clear();
        self.prev.push_str(&c.hash);
        Ok(())
    }

    /// Whether row `r` (hash `hash`) is numbered and linked as the next
    /// position requires and hashes to its hash and outcome hash.
    fn holds(&self, r: &Row, hash: &str, outcome_hash: Option<&str>) -> db::Result<bool> {
        let (prev, n): (&str, i64) = (text(r, 13)?, r.get(3)?);
        if n != self.rows as i64 || prev != self.prev {
            return Ok(false);
        }
        let parts = r.text(23)?;
        let intent = CallIntent {
            task: text(r, 1)?,
            seq: r.get(2)?,
            n,
            flow: text(r, 4)?,
            tier: text(r, 5)?,
            input: text(r, 6)?,
            capabilities: text(r, 7)?,
            decisions: text(r, 8)?,
            route: r.text(9)?,
            replayed_from: r.text(11)?,
            started_ms: r.get(12)?,
            parts,
            client: r.text(24)?,
        };
        if chain::call(prev, &intent) != hash {
            return Ok(false);
        }
        outcome_holds(r, hash, outcome_hash)
    }

    /// Whether row `c` is numbered, linked and hashed as its place
    /// requires, and its outcome too; when not, why.
    fn check(&self, c: &StoredCall) -> db::Result<Option<Problem>> {
        if let Some(p) = check_link(c, self.rows as i64, &self.prev, self.head, |hash| {
            position(self.db, self.run, hash)
        })? {
            return Ok(Some(p));
        }
        if chain::call(&c.prev, &c.intent()) != c.hash {
            let m = "content edited: its fields do not hash to its recorded hash".to_string();
            return Ok(Some(row_problem(c, Failure::ContentEdited, m)));
        }
        Ok(check_outcome(c))
    }
}

/// Whether row `r`'s outcome hashes to its outcome hash, or it has none
/// and holds no outcome fields; `false` sends the row to [`check_outcome`],
/// which says what is wrong.
fn outcome_holds(r: &Row, hash: &str, outcome_hash: Option<&str>) -> db::Result<bool> {
    let (status, output, error) = (r.text(15)?, r.text(16)?, r.text(17)?);
    let duration: Option<i64> = r.get(19)?;
    let late = r.text(20)?;
    let (Some(status), Some(duration_us), Some(late), Some(expected)) =
        (status, duration, late, outcome_hash)
    else {
        let empty = status.is_none() && output.is_none() && error.is_none() && duration.is_none();
        return Ok(empty && outcome_hash.is_none());
    };
    let output_ref = r.text(22)?;
    let o = CallOutcome {
        status,
        output,
        error,
        capped: r.get(18)?,
        duration_us,
        late_decisions: late,
        redacted: text(r, 10)?,
    };
    let digest = match (output_ref, output) {
        (Some(key), _) => Some(key.to_string()),
        (None, text) => text.map(|t| crate::digest::sha256_hex(t.as_bytes())),
    };
    Ok(chain::outcome_of(hash, &o, digest.as_deref()) == expected)
}

/// Column `i` of `r` as text, borrowed; NULL is an error naming it.
fn text(r: &Row, i: usize) -> db::Result<&str> {
    r.text(i)?
        .ok_or_else(|| db::Error::other(format!("column {}: NULL where text belongs", i + 1)))
}

/// The position of the row of run `run` whose hash is `hash`, if any (the
/// last, should two share one).
fn position(db: &dyn Db, run: &str, hash: &str) -> db::Result<Option<i64>> {
    db.value(
        "SELECT n FROM calls WHERE run = ?1 AND hash = ?2 ORDER BY n DESC LIMIT 1",
        vals![run, hash],
    )
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

fn row_problem(c: &StoredCall, failure: Failure, message: String) -> Problem {
    Problem {
        failure,
        n: Some(c.n),
        task: Some(c.task.clone()),
        seq: Some(c.seq),
        flow: Some(c.flow.clone()),
        message,
    }
}

/// Whether row `c`, found at chain position `expected`, is numbered and
/// linked as that position requires; when not, why.
fn check_link(
    c: &StoredCall,
    expected: i64,
    prev: &str,
    head: &str,
    position: impl FnOnce(&str) -> db::Result<Option<i64>>,
) -> db::Result<Option<Problem>> {
    if c.n > expected {
        let gap = if c.n - 1 == expected {
            format!("#{expected} is")
        } else {
            format!("#{expected}–#{} are", c.n - 1)
        };
        let m = format!("a row is missing before it: {gap} absent from the chain");
        return Ok(Some(row_problem(c, Failure::RowMissing, m)));
    }
    if c.n < expected {
        let m = format!(
            "rows out of order: it is numbered #{} where #{expected} belongs",
            c.n
        );
        return Ok(Some(row_problem(c, Failure::OutOfOrder, m)));
    }
    if c.prev == prev {
        return Ok(None);
    }
    let (failure, m) = if c.prev == head {
        (
            Failure::OutOfOrder,
            "rows out of order: it links to the run's head, as the first row does".to_string(),
        )
    } else if let Some(j) = position(&c.prev)? {
        (
            Failure::OutOfOrder,
            format!("rows out of order: it links to #{j}, not to the row before it"),
        )
    } else {
        (Failure::LinkBroken, "a row is missing before it, or the row before it was replaced: its link matches no row of the run".to_string())
    };
    Ok(Some(row_problem(c, failure, m)))
}

fn check_outcome(c: &StoredCall) -> Option<Problem> {
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
    db: &dyn Db,
    run: &StoredRun,
    rows_sealed: Seal,
    verdict: &mut Verdict,
) -> Result<Option<Problem>, String> {
    let Some(seal) = &run.seal else {
        return Ok(match run.status.as_str() {
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
        });
    };
    let Some(ended_ms) = run.ended_ms else {
        return Ok(Some(run_problem(
            Failure::SealMismatch,
            "seal mismatch: the run has a seal but no end time",
        )));
    };
    let mut s = rows_sealed;
    rows::each_reading(db, &run.id, |r| {
        s.reading(&Reading {
            task: &r.task,
            seq: r.seq,
            kind: &r.kind,
            value: r.value,
        });
    })
    .map_err(rows::db)?;
    for m in super::sources::modules(db, &run.id).map_err(rows::db)? {
        s.module(&m.sealed());
    }
    let end = RunEnd {
        status: &run.status,
        error: run.error.as_deref(),
        ended_ms,
    };
    if s.finish(&end) == *seal {
        return Ok(None);
    }
    Ok(Some(run_problem(
        Failure::SealMismatch,
        "seal mismatch: the run's status, error or end time, a clock reading, a module it required, or rows at its end changed after it was sealed",
    )))
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
