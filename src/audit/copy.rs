//! `sluice audit copy`: runs moved from one store to another (a laptop's
//! SQLite file into the team's PostgreSQL, and back) with every hash they
//! carry.
//!
//! A run's head covers its link to the run before it in the store it was
//! recorded in (its place `n` and `prior`), so a copy cannot take a new
//! place and keep its head. It keeps the head, rows, outcomes, readings,
//! the texts of its script and modules, and seal exactly, and the target
//! records two more things: `origin`, the link the head covers (what
//! `verify` hashes it with), and `joined`, a hash of
//! the run's tip and row count with its place in the target
//! ([`chain::joined`]), which the run after it commits to in place of its
//! seal. So in the target a copied run is checked whole (head, every row,
//! seal, every body), and cannot be moved, deleted or cut short unseen,
//! like a run recorded there. Copying it on keeps `origin`: its head is
//! the same in every store.
//!
//! A run is copied only when it verifies in the source (a copy must not
//! launder a broken run into one that checks), only when it is not still
//! running, and whole in one transaction of the target: a copy cut short
//! leaves nothing behind. A run already in the target with the same head is
//! left as it is; another run with its id is refused.

use super::chain::{self, RunLink};
use super::db::{self, vals, Begin, Db, Row, Val};
use super::parts::{self, Listed};
use super::rows::{self, Origin};
use super::{store, verify};
use serde::Serialize;
use std::collections::HashSet;

/// The columns of `runs` a copy carries as they are; the run's place in
/// the target (`n`, `prior`, `prior_rows`), `origin` and `joined` are the
/// target's own.
const RUN_COLUMNS: &str = "id, script, script_sha256, policies, args, workspace, started_ms, \
ended_ms, status, error, version, random_seed, resumed_from, ceiling, pid, pid_start, head, seal, \
owner, attempt, lease_ms";

/// Every column of `calls`, output as the row holds it (inline, or its key).
const CALL_COLUMNS: &str = "run, task, seq, n, flow, tier, input, capabilities, decisions, route, \
redacted, replayed_from, started_ms, prev, hash, status, output, output_ref, error, capped, \
duration_us, late_decisions, outcome_hash, parts, client, attempt";

/// Rows read from the source at a time: a run of any length copies in
/// the same memory.
const PAGE: i64 = 1000;

/// What became of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    /// Copied: its place in the target, and how many calls it holds.
    Copied { n: i64, calls: i64 },
    /// The target holds it already (the same head), at place `n`.
    AlreadyThere { n: i64 },
    /// Not copied, and why.
    Refused { reason: String },
}

/// One run's copy.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Copied {
    pub run: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The runs to copy: those `given` (each an id, a prefix, `last`,
/// `last~N`), or every run of the source, oldest first, so they keep their
/// order in the target.
pub fn runs_to_copy(from: &dyn Db, given: &[String]) -> Result<Vec<String>, String> {
    if given.is_empty() {
        let mut ids = rows::run_ids(from).map_err(rows::db)?;
        ids.reverse();
        return Ok(ids);
    }
    given.iter().map(|g| store::find_run(from, g)).collect()
}

/// Copies run `id` from `from` into `to`; `to` must not be in a
/// transaction. An error is a store that failed; a run that may not be
/// copied is [`Outcome::Refused`].
pub fn copy_run(from: &dyn Db, to: &dyn Db, id: &str) -> Result<Outcome, String> {
    let run = rows::load_run(from, id)?;
    if let Some(reason) = refusal(from, &run)? {
        return Ok(Outcome::Refused { reason });
    }
    if let Some(outcome) = already_there(to, &run)? {
        return Ok(outcome);
    }
    let unchained = store::unchained_runs(from).map_err(rows::db)?;
    let chained = run.n.is_none_or(|n| n > unchained);
    let origin = Origin::text(run.head_fields(chained).link.as_ref());
    let (tip, calls) = rows::tip(from, id, &run.head, run.seal.as_deref()).map_err(rows::db)?;
    let place = Place { origin, tip, calls };
    let n = to
        .transaction(Begin::Store, || write_run(from, to, &run, &place))
        .map_err(|e| format!("writing run {id} into the target: {e}"))?;
    Ok(Outcome::Copied { n, calls })
}

/// Why `run` may not be copied, if it may not.
fn refusal(from: &dyn Db, run: &rows::StoredRun) -> Result<Option<String>, String> {
    if run.running() {
        return Ok(Some(
            "it is still running in the source: copy it once it has ended (or, if its process \
is gone, once `sluice audit list` shows it interrupted)"
                .to_string(),
        ));
    }
    let verdict = verify::verify(from, &run.id)?;
    Ok(verdict.problem.map(|p| {
        format!(
            "it does not verify in the source ({}), and a copy would carry hashes that check: \
see `sluice audit verify {}`",
            p.message, run.id
        )
    }))
}

/// The outcome when the target holds a run with `run`'s id already.
fn already_there(to: &dyn Db, run: &rows::StoredRun) -> Result<Option<Outcome>, String> {
    let found = to
        .first("SELECT head, n FROM runs WHERE id = ?1", vals![&run.id])
        .map_err(rows::db)?;
    let Some(found) = found else {
        return Ok(None);
    };
    let head: String = found.get(0).map_err(rows::db)?;
    Ok(Some(if head == run.head {
        Outcome::AlreadyThere {
            n: found.get(1).map_err(rows::db)?,
        }
    } else {
        Outcome::Refused {
            reason: "the target holds another run with this id (its head differs): it was not \
touched"
                .to_string(),
        }
    }))
}

/// What the target records of a copied run beside its own columns.
struct Place {
    /// The `origin` column.
    origin: String,
    /// The run's tip and row count, which `joined` covers.
    tip: String,
    calls: i64,
}

/// Inserts the run at the target's next place, then its calls, the
/// bodies they keep by content, its readings, and the texts of its script
/// and modules; its place.
fn write_run(from: &dyn Db, to: &dyn Db, run: &rows::StoredRun, place: &Place) -> db::Result<i64> {
    let next = store::next_link(to)?;
    let link = RunLink {
        n: next.n,
        prior: next.prior.as_deref(),
        prior_rows: next.prior_rows,
    };
    let joined = chain::joined(&run.head, &place.tip, place.calls, &link);
    let Some(Row(mut values)) = from.first(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        vals![&run.id],
    )?
    else {
        return Err(db::Error::other(format!("run {} left the source", run.id)));
    };
    values.extend([
        Val::from(next.n),
        Val::from(next.prior.clone()),
        Val::from(next.prior_rows),
        Val::from(&place.origin),
        Val::from(joined),
    ]);
    to.execute(
        &format!(
            "INSERT INTO runs ({RUN_COLUMNS}, n, prior, prior_rows, origin, joined) VALUES ({})",
            params(values.len())
        ),
        &values,
    )?;
    copy_calls(from, to, &run.id)?;
    copy_readings(from, to, &run.id)?;
    super::sources::copy(from, to, &run.id, run.script_sha256.as_deref())?;
    Ok(next.n)
}

/// `?1, ?2, ... ?count`.
fn params(count: usize) -> String {
    (1..=count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Copies run `id`'s calls a page at a time, in chain order, each body
/// they keep by content before it.
fn copy_calls(from: &dyn Db, to: &dyn Db, id: &str) -> db::Result<()> {
    let insert = format!(
        "INSERT INTO calls ({CALL_COLUMNS}) VALUES ({})",
        params(CALL_COLUMNS.split(',').count())
    );
    let page = format!(
        "SELECT {CALL_COLUMNS} FROM calls WHERE run = ?1 AND n > ?2 ORDER BY n LIMIT {PAGE}"
    );
    // A conversation's messages recur in every later call: each body once.
    let mut bodies = HashSet::new();
    let mut after = 0i64;
    loop {
        let rows = from.query(&page, vals![id, after])?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.get(3)?;
        for row in rows {
            for key in kept_by_content(&row)? {
                if bodies.insert(key.clone()) {
                    copy_body(from, to, &key)?;
                }
            }
            to.execute(&insert, &row.0)?;
        }
    }
}

/// The keys of the bodies a call row adds to those the run keeps by
/// content: its output's, and its input items' (`parts`) that an earlier
/// row's list does not give (see [`super::parts`]).
fn kept_by_content(row: &Row) -> db::Result<Vec<String>> {
    let mut keys: Vec<String> = row.get::<Option<String>>(17)?.into_iter().collect();
    if let Some(column) = row.get::<Option<String>>(23)? {
        match parts::listed(&column) {
            Some((_, Listed::Keys(all))) => keys.extend(all),
            Some((_, Listed::After { add, .. })) => keys.extend(add),
            // The run verified, so this is not reached; were it, the
            // target's verify names the row.
            None => {}
        }
    }
    Ok(keys)
}

/// Copies the body kept under `key`, unless the target has it already.
fn copy_body(from: &dyn Db, to: &dyn Db, key: &str) -> db::Result<()> {
    let body: Option<String> =
        from.value("SELECT body FROM outputs WHERE sha256 = ?1", vals![key])?;
    let body = body.ok_or_else(|| db::Error::other(format!("body {key} left the source")))?;
    to.execute(
        "INSERT INTO outputs (sha256, body) VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING",
        vals![key, body],
    )?;
    Ok(())
}

/// Copies run `id`'s clock readings.
fn copy_readings(from: &dyn Db, to: &dyn Db, id: &str) -> db::Result<()> {
    let readings = from.query(
        "SELECT run, task, seq, kind, value FROM readings WHERE run = ?1",
        vals![id],
    )?;
    for r in readings {
        to.execute(
            "INSERT INTO readings (run, task, seq, kind, value) VALUES (?1, ?2, ?3, ?4, ?5)",
            &r.0,
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
