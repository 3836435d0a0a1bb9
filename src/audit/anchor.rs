//! The record's head, to keep outside the database (`sluice audit anchor`),
//! and the proof that the record still holds it (`sluice audit verify
//! --anchor`).
//!
//! Runs are chained to each other, so the newest run's seal covers every
//! run before it; but a file rolled back to an older copy of itself, or
//! whose newest run was deleted, is a shorter chain that verifies on its
//! own. An anchor taken earlier and kept elsewhere tells: it names how many
//! runs the record held (`runs`, the newest run's place) and hashes that
//! with the newest run's seal, or, while it is live or after it was killed,
//! its last row written so far (or its head), as [`chain::anchor`] does.
//!
//! The record holds an anchor when its run #`runs` still has the seal or a
//! row hashing to it: what the anchor covered is then a prefix of the chain
//! now, which `verify` checks link by link up to the newest run.
//!
//! Text form: `sluice-anchor:v1:RUNS:HEX` (HEX: 64 lowercase hex digits).

use super::chain;
use super::db::{self, vals, Db};
use super::rows;
use serde::Serialize;
use std::fmt;

/// What every anchor's text begins with.
pub const PREFIX: &str = "sluice-anchor:v1:";

/// An anchor: the newest run's place and the hash covering its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The newest run's place when the anchor was taken.
    pub runs: i64,
    /// [`chain::anchor`] of that and the run's seal, last row or head.
    pub hash: String,
}

impl fmt::Display for Anchor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}:{}", self.runs, self.hash)
    }
}

impl Anchor {
    /// Parses an anchor's text form; the error says which part is wrong.
    pub fn parse(text: &str) -> Result<Anchor, String> {
        let text = text.trim();
        let form = "write it as `sluice audit anchor` printed it: sluice-anchor:v1:RUNS:HEX";
        let rest = text
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("--anchor {text:?} does not begin with {PREFIX:?}; {form}"))?;
        let (runs, hash) = rest
            .split_once(':')
            .ok_or_else(|| format!("--anchor {text:?} has no hash after the run count; {form}"))?;
        let runs: i64 = runs.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
            format!("--anchor {text:?}: the run count {runs:?} is not a number from 1; {form}")
        })?;
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if hash.len() != 64 || !hash.chars().all(hex) {
            return Err(format!(
                "--anchor {text:?}: the hash is not 64 lowercase hex digits; {form}"
            ));
        }
        Ok(Anchor {
            runs,
            hash: hash.to_string(),
        })
    }
}

/// Which of the newest run's hashes an anchor covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Covers {
    /// The run ended and is sealed.
    Seal,
    /// The run is live, or was killed unsealed: its rows so far.
    Row,
    /// The run is live and has no row yet.
    Head,
}

/// The record's head now: `sluice audit anchor`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Head {
    /// The anchor's text form, to keep.
    pub anchor: String,
    /// The newest run's place: how many runs the anchor covers.
    pub runs: i64,
    /// The newest run.
    pub run: String,
    /// Its status: `running` while it is live.
    pub status: String,
    /// Which of its hashes the anchor covers.
    pub covers: Covers,
    /// The rows of the newest run the anchor covers.
    pub rows: i64,
}

/// A run's place and the hashes it begins and ends with.
struct Hashes {
    n: i64,
    id: String,
    status: String,
    head: String,
    /// Its seal; for a run copied in from another store, its hash of its
    /// place here, which stands for its seal in this store.
    seal: Option<String>,
}

/// Run #`n` (the newest when `None`), its head and seal.
fn run_at(db: &dyn Db, n: Option<i64>) -> Result<Option<Hashes>, String> {
    let select = "SELECT n, id, status, head, coalesce(joined, seal) FROM runs";
    let found = match n {
        Some(n) => db.first(&format!("{select} WHERE n = ?1"), vals![n]),
        None => db.first(
            &format!("{select} WHERE n = (SELECT max(n) FROM runs)"),
            &[],
        ),
    };
    let Some(r) = found.map_err(rows::db)? else {
        return Ok(None);
    };
    let read = || -> db::Result<Hashes> {
        Ok(Hashes {
            n: r.get(0)?,
            id: r.get(1)?,
            status: r.get(2)?,
            head: r.get(3)?,
            seal: r.get(4)?,
        })
    };
    read().map(Some).map_err(rows::db)
}

/// The anchor of the record as it stands; an error when it holds no run.
pub fn head(db: &dyn Db) -> Result<Head, String> {
    let newest = run_at(db, None)?.ok_or_else(|| {
        "the audit database holds no runs yet: there is nothing to anchor; `sluice run` records one"
            .to_string()
    })?;
    let (tip, rows) =
        rows::tip(db, &newest.id, &newest.head, newest.seal.as_deref()).map_err(rows::db)?;
    let covers = match (newest.seal.is_some(), rows) {
        (true, _) => Covers::Seal,
        (false, 0) => Covers::Head,
        (false, _) => Covers::Row,
    };
    let anchor = Anchor {
        runs: newest.n,
        hash: chain::anchor(newest.n, &tip),
    };
    Ok(Head {
        anchor: anchor.to_string(),
        runs: newest.n,
        run: newest.id,
        status: newest.status,
        covers,
        rows,
    })
}

/// Which of run `run`'s hashes `anchor` hashes, counting its head as 0,
/// its rows in chain order from 1, then its seal; the first that does.
fn anchored_at(db: &dyn Db, run: &Hashes, anchor: &Anchor) -> Result<Option<Found>, String> {
    let holds = |h: &str| chain::anchor(anchor.runs, h) == anchor.hash;
    if holds(&run.head) {
        return Ok(Some(Found::Head));
    }
    let (mut i, mut found) = (0, None);
    rows::each_row_hash(db, &run.id, |h| {
        i += 1;
        if found.is_none() && holds(&h) {
            found = Some(Found::Row(i));
        }
        Ok(())
    })
    .map_err(rows::db)?;
    if found.is_none() && run.seal.as_deref().is_some_and(holds) {
        found = Some(Found::Seal);
    }
    Ok(found)
}

/// Where a run holds an anchor.
enum Found {
    Head,
    Row(i64),
    Seal,
}

/// Why a record does not hold an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The record has fewer runs than the anchor covers.
    RolledBack,
    /// The anchored newest run's place is empty.
    RunMissing,
    /// The run at the anchored place is not the anchored state.
    Forked,
}

/// Whether the record holds an anchor: `sluice audit verify --anchor`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// The anchor checked, in its text form.
    pub anchor: String,
    /// The anchored state is a prefix of the record.
    pub held: bool,
    /// Why not, when not held.
    pub failure: Option<Failure>,
    /// The newest run's place in the record now (0: no run).
    pub runs: i64,
    /// What was found, in words: held (where), or what happened.
    pub message: String,
}

/// Checks that the record still holds `anchor`: its run #`runs` has the
/// seal or a row the anchor hashes.
pub fn check(db: &dyn Db, anchor: &Anchor) -> Result<Check, String> {
    let now: i64 = db
        .value("SELECT coalesce(max(n), 0) FROM runs", &[])
        .map_err(rows::db)?
        .unwrap_or(0);
    let a = anchor.runs;
    let verdict = |failure: Option<Failure>, message: String| Check {
        anchor: anchor.to_string(),
        held: failure.is_none(),
        failure,
        runs: now,
        message,
    };
    if now < a {
        // What a rollback of each store is: a file copied over it, a
        // database restored from a backup.
        let rolled_back = match db.backend() {
            db::Backend::Sqlite => "the file was replaced by an older copy of itself",
            db::Backend::Postgres => "the database was restored to an earlier state of itself",
        };
        return Ok(verdict(
            Some(Failure::RolledBack),
            format!(
                "rolled back: the anchor covers {a} runs and the newest run in the record is #{now}: \
the newest {} deleted, or {rolled_back}",
                match a - now {
                    1 => "run was".to_string(),
                    k => format!("{k} runs were"),
                }
            ),
        ));
    }
    let Some(run) = run_at(db, Some(a))? else {
        return Ok(verdict(
            Some(Failure::RunMissing),
            format!("run #{a}, the newest when the anchor was taken, is gone from the record: it was deleted"),
        ));
    };
    let Some(at) = anchored_at(db, &run, anchor)? else {
        return Ok(verdict(
            Some(Failure::Forked),
            format!(
                "forked: run #{a} ({}) is not the state the anchor covers (neither its seal nor its head \
nor any of its rows hash to it): the record was rolled back and other runs recorded since, or run #{a} was \
rewritten",
                run.id
            ),
        ));
    };
    let what = match at {
        Found::Head => "its head".to_string(),
        Found::Seal => "its seal".to_string(),
        Found::Row(i) => format!("its row #{i}"),
    };
    let after = match now - a {
        0 => "no run after it".to_string(),
        1 => "1 run after it".to_string(),
        k => format!("{k} runs after it"),
    };
    Ok(verdict(
        None,
        format!("held: run #{a} ({}) still has {what}, with {after}", run.id),
    ))
}

/// The line `verify --anchor` adds.
pub fn render_check(c: &Check) -> String {
    let state = if c.held { "" } else { "NOT HELD: " };
    format!("anchor {}: {state}{}\n", c.anchor, c.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_prints_and_parses_back() {
        let a = Anchor {
            runs: 12,
            hash: "ab".repeat(32),
        };
        assert_eq!(
            a.to_string(),
            format!("sluice-anchor:v1:12:{}", "ab".repeat(32))
        );
        assert_eq!(Anchor::parse(&format!(" {a}\n")).unwrap(), a);
    }

    #[test]
    fn a_malformed_anchor_names_the_part_that_is_wrong() {
        let hash = "0".repeat(64);
        for (text, says) in [
            (format!("anchor:v1:3:{hash}"), "does not begin with"),
            (
                "sluice-anchor:v1:3".to_string(),
                "no hash after the run count",
            ),
            (
                format!("sluice-anchor:v1:x:{hash}"),
                "the run count \"x\" is not a number",
            ),
            (
                format!("sluice-anchor:v1:0:{hash}"),
                "the run count \"0\" is not a number",
            ),
            (
                "sluice-anchor:v1:3:abc".to_string(),
                "not 64 lowercase hex digits",
            ),
            (
                format!("sluice-anchor:v1:3:{}", "G".repeat(64)),
                "not 64 lowercase hex digits",
            ),
        ] {
            let e = Anchor::parse(&text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(e.contains("sluice-anchor:v1:RUNS:HEX"), "{e}");
        }
    }
}
