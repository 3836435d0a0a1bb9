//! The audit record's store as every backend shares it: where a new run
//! joins the chain of runs, the sweep that marks runs whose process died
//! as `interrupted`, finding a run by what a user typed, and where a
//! workspace keeps its record. All of it goes through [`Db`] in the
//! portable dialect, so it works the same on SQLite and PostgreSQL.
//!
//! What is SQLite's own (the file: recognising or refusing it, creating it
//! whole, its pragmas, the schema's SQLite text and migrations) is in
//! [`sqlite_file`], whose `open` and `open_existing` are re-exported here.
//!
//! Schema (version 7). Times are milliseconds since the Unix epoch; JSON
//! columns hold compact JSON, exactly the bytes the hashes cover (object
//! keys sorted, except `decisions`, whose objects keep their field order).
//!
//! ```text
//! runs   id PK, script, script_sha256?, policies (JSON [{name, sha256}]),
//!        args (JSON [string]), workspace, started_ms, ended_ms?, status
//!        (running|ok|failed|interrupted), error?, version, random_seed,
//!        resumed_from?, ceiling (JSON [pattern]), pid, pid_start,
//!        head (chain genesis; covers every field so far, the link too), seal?,
//!        n (place among the runs, from 1; unique), prior? (the hash of the
//!        run before it that this run commits to), prior_rows? (NULL when
//!        `prior` is that run's seal; k when it is its row #k's hash, 0 its
//!        head: it had no seal yet when this run started), owner? (schema 5:
//!        the process holding the run's lease, `HOST:PID:START`), attempt
//!        (schema 5: the lease's number, from 1, raised by each takeover;
//!        a writer whose number is no longer the run's is refused),
//!        lease_ms? (schema 5: until when the owner holds the lease,
//!        renewed as it writes; a takeover of a live run waits for it),
//!        origin? (schema 6: set on a run `sluice audit copy` brought in
//!        from another store: the link its head covers there, JSON
//!        {"n", "prior", "priorRows"}, or {"unchained": true} for a run
//!        recorded before runs were chained; `n`, `prior` and
//!        `prior_rows` are then its place in this store), joined? (schema
//!        6: a copied run's hash of its place here, [`crate::audit::chain::joined`]; what
//!        the run after it commits to, in place of its seal)
//! calls  (run, task, seq) PK, n (chain position, 1-based, unique per run),
//!        flow, tier, input (JSON, redacted), capabilities (JSON [string]),
//!        decisions (JSON [{capability, decision, by, reason, approvedBy?}]),
//!        route (JSON or NULL), redacted (JSON [string]; the input's at the
//!        intent, completed with the outcome's), replayed_from?,
//!        started_ms, prev, hash,
//!        status (ok|error|NULL: outcome unknown), output (JSON, when
//!        under 1 KiB)?, output_ref (the SHA-256 of a larger output's JSON,
//!        kept once in `outputs`)?,
//!        error (JSON)?, capped (0|1), duration_us?, late_decisions (JSON
//!        list like `decisions`: capabilities judged while the call ran, a
//!        redirect's host or a private address DNS returned)?, outcome_hash?,
//!        parts (JSON {FIELD: [sha256]}; schema 3)?: set when the input's
//!        list field FIELD (a model call's `messages`) is kept by content:
//!        `input` then holds the input without FIELD, and each item's
//!        compact JSON (redacted) is a body of `outputs`; NULL for a row
//!        whose input is stored whole,
//!        client (schema 4)?: who made the call when it came from outside
//!        the script, an MCP client's name and version as one string
//!        (`claude-code 1.2.3`, redacted); NULL for the script's own calls
//!        and every row written before schema 4,
//!        attempt (schema 5)?: the run's lease the row was written under
//!        (not covered by the row's hash: the runs row's `attempt` is what
//!        fences; this says which writer wrote what)
//! outputs sha256 PK, body: larger outputs, and the items of inputs' list
//!        fields, by their content, each kept once however many calls
//!        returned or sent it (agents re-read the same files and re-run the
//!        same commands; an agent loop sends the whole conversation every
//!        turn). A rowid table since schema 3 (it was WITHOUT ROWID):
//!        an index b-tree keeps under 1 KiB of a row in its page and
//!        spills the rest to an overflow page of its own, so each body of
//!        a few KiB took a page and a half; since schema 7 also the text
//!        of each run's script (under `runs.script_sha256`) and of each
//!        module it required (under `modules.sha256`), written as the run
//!        seals, unless the text held a secret the run knew by then
//! readings (run, task, seq) PK, kind (ms|time|cpu|seed), value (REAL)
//! modules (schema 7) (run, k) PK, name (as `require` was given it), path
//!        (the file it was loaded from), sha256 (of the text that ran, kept
//!        in `outputs`): the modules a run's script required from its
//!        folder, k from 1 in the order they loaded, written as the run
//!        seals, which covers them
//! meta   key PK, value: `unchained_runs`, how many runs a schema 1 database
//!        held when it was migrated (runs #1..#that were recorded before
//!        runs were chained to each other, and are checked each on its own)
//! ```
//!
//!
//! A call's output is `coalesce(output, outputs.body)`; the hashes cover
//! that text either way. A call's whole input is `input` with FIELD set to
//! the list of its items' bodies, serialized as the writer serialized it
//! (`parts.rs` puts it back together); its hash covers `input` and `parts`
//! as stored, and each body must hash to its key. A row's hash covers its
//! `client` too, when it has one.

use super::db::{self, vals, Backend, Db};
use std::path::{Path, PathBuf};

pub mod sqlite_file;

#[cfg(any(test, feature = "internals"))]
pub use sqlite_file::APPLICATION_ID;
pub use sqlite_file::{open, open_existing};

/// The schema version this build writes; older databases are migrated.
pub const SCHEMA_VERSION: i64 = 7;

/// A call's output as the database gives it back, stored inline or by
/// content: use it where a query selects `output` (a macro, so `concat!`
/// can build query text with it).
macro_rules! output_column {
    () => {
        "coalesce(output, (SELECT body FROM outputs WHERE outputs.sha256 = calls.output_ref))"
    };
}
pub(crate) use output_column;

/// The name of the folder sluice keeps a workspace's record in.
pub const FOLDER: &str = ".sluice";

/// The default database of a workspace.
pub fn default_path(workspace: &Path) -> PathBuf {
    workspace.join(FOLDER).join("audit.db")
}

/// Where a new run joins the chain of runs: the place after the newest run,
/// and the hash of it to commit to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextLink {
    /// The new run's place, from 1.
    pub n: i64,
    /// The predecessor's hash it commits to; `None` for the first run.
    pub prior: Option<String>,
    /// `None` when `prior` is the predecessor's seal, `Some(k)` when it is
    /// its row #k's hash (`Some(0)`: its head).
    pub prior_rows: Option<i64>,
}

/// The link a run starting now gets. Call it in a transaction begun with
/// [`db::Begin::Store`] (SQLite's write lock, PostgreSQL's advisory lock)
/// and insert the run in the same transaction, so two runs starting at
/// once get two places, the later one committing to the earlier. The
/// predecessor is committed to by its seal; one without a seal (still
/// live, or killed) by its last row committed so far, or its head: what it
/// adds later is covered by its own seal, if it gets one.
pub fn next_link(db: &dyn Db) -> db::Result<NextLink> {
    let newest = db.first(
        "SELECT id, n, head, coalesce(joined, seal) FROM runs ORDER BY n DESC LIMIT 1",
        &[],
    )?;
    let Some(newest) = newest else {
        return Ok(NextLink {
            n: 1,
            prior: None,
            prior_rows: None,
        });
    };
    let n: i64 = newest.get(1)?;
    if let Some(seal) = newest.get::<Option<String>>(3)? {
        return Ok(NextLink {
            n: n + 1,
            prior: Some(seal),
            prior_rows: None,
        });
    }
    let last = db.first(
        "SELECT n, hash FROM calls WHERE run = ?1 ORDER BY n DESC LIMIT 1",
        vals![newest.get::<String>(0)?],
    )?;
    let (rows, prior) = match last {
        Some(row) => (row.get(0)?, row.get(1)?),
        None => (0, newest.get(2)?),
    };
    Ok(NextLink {
        n: n + 1,
        prior: Some(prior),
        prior_rows: Some(rows),
    })
}

/// The run that resumed run `id`, if one did (the newest, should there
/// be more).
pub fn successor(db: &dyn Db, id: &str) -> db::Result<Option<String>> {
    db.value(
        "SELECT id FROM runs WHERE resumed_from = ?1 ORDER BY started_ms DESC LIMIT 1",
        vals![id],
    )
}

#[cfg(feature = "fleet")]
/// The chain of resumes that starts at run `id`: `id`, the run that
/// resumed it, the run that resumed that one, and so on to the newest.
pub fn resumes(db: &dyn Db, id: &str) -> db::Result<Vec<String>> {
    let mut chain = vec![id.to_string()];
    // A chain is as long as the resumes made; bounded against a cycle an
    // edited record could hold.
    while chain.len() <= 10_000 {
        match successor(db, chain.last().expect("never empty"))? {
            Some(next) => chain.push(next),
            None => break,
        }
    }
    Ok(chain)
}

#[cfg(feature = "fleet")]
/// The newest run of the chain of resumes that starts at run `id`: what
/// continuing `id` now means (resuming an earlier one is refused, so no
/// call runs twice).
pub fn newest_resume(db: &dyn Db, id: &str) -> db::Result<String> {
    Ok(resumes(db, id)?.pop().expect("never empty"))
}

#[cfg(feature = "fleet")]
/// Whether run `id` is in the record.
pub fn is_recorded(db: &dyn Db, id: &str) -> db::Result<bool> {
    let n: Option<i64> = db.value("SELECT count(*) FROM runs WHERE id = ?1", vals![id])?;
    Ok(n.unwrap_or(0) > 0)
}

#[cfg(feature = "fleet")]
/// The first irreversible call of ended run `id` whose outcome is unknown:
/// its number in the run, flow and input (as recorded, redacted). A resume
/// stops at such a call, and keeps it so, until the person's word.
pub fn unknown_irreversible(db: &dyn Db, id: &str) -> db::Result<Option<(i64, String, String)>> {
    let row = db.first(
        "SELECT c.n, c.flow, c.input FROM calls c JOIN runs r ON r.id = c.run \
         WHERE c.run = ?1 AND r.status <> 'running' AND c.status IS NULL AND c.tier = 'irreversible' \
         ORDER BY c.n LIMIT 1",
        vals![id],
    )?;
    match row {
        Some(r) => Ok(Some((r.get(0)?, r.get(1)?, r.get(2)?))),
        None => Ok(None),
    }
}

/// What run `id`'s file flows left in the workspace, as its record says
/// (its own calls and those it copied from the runs it resumed): each
/// path written, with the SHA-256 its last write recorded (`None`: its
/// last word removed it) and the number of that call.
pub fn written_files(
    db: &dyn Db,
    id: &str,
) -> db::Result<std::collections::BTreeMap<String, (Option<String>, i64)>> {
    let rows = db.query(
        "SELECT c.n, coalesce(c.output, o.body) FROM calls c LEFT JOIN outputs o ON o.sha256 = c.output_ref \
         WHERE c.run = ?1 AND c.status = 'ok' ORDER BY c.n",
        vals![id],
    )?;
    let mut files = std::collections::BTreeMap::new();
    for row in rows {
        let (n, output): (i64, Option<String>) = (row.get(0)?, row.get(1)?);
        let Some(output) = output.filter(|o| o.contains(super::replay::WRITTEN)) else {
            continue;
        };
        let parsed: serde_json::Value = serde_json::from_str(&output).unwrap_or_default();
        let Some(wrote) = parsed
            .get(super::replay::WRITTEN)
            .and_then(|w| w.as_object())
        else {
            continue;
        };
        for (path, hash) in wrote {
            files.insert(path.clone(), (hash.as_str().map(str::to_string), n));
        }
    }
    Ok(files)
}

/// How many runs were recorded before runs were chained to each other
/// (those of a schema 1 database when it was migrated): runs #1 to this.
pub fn unchained_runs(db: &dyn Db) -> db::Result<i64> {
    let n = db.value("SELECT value FROM meta WHERE key = 'unchained_runs'", &[])?;
    Ok(n.unwrap_or(0))
}

/// A run still `running` whose process no longer exists was killed or
/// crashed: it is marked `interrupted`, so no view shows it as live.
///
/// A process is looked for on this machine: a store that runs on other
/// machines also write holds runs whose process this one cannot see, so
/// only a store of one machine (SQLite's file) is swept as it opens.
pub fn sweep(db: &dyn Db) -> db::Result<()> {
    let running = db.query(
        "SELECT id, pid, pid_start, owner FROM runs WHERE status = 'running'",
        &[],
    )?;
    for run in running {
        // A lease names its machine: only this machine's dead processes
        // are judged here. A run from before leases is a local file's.
        let gone = match run.get::<Option<String>>(3)? {
            Some(owner) => super::lease::owner_gone_here(&owner),
            None => db.backend() == Backend::Sqlite && !process_alive(run.get(1)?, run.get(2)?),
        };
        if gone {
            db.execute(
                "UPDATE runs SET status = 'interrupted', error = ?2 WHERE id = ?1 AND status = 'running'",
                vals![
                    run.get::<String>(0)?,
                    "the sluice process ended without closing the run (killed or crashed)"
                ],
            )?;
        }
    }
    Ok(())
}

/// Whether process `pid` is the one that started at `start` (clock ticks
/// after boot, from /proc), so a reused pid does not keep a dead run alive.
pub fn process_alive(pid: u32, start: u64) -> bool {
    match process_start(pid) {
        // Where /proc could not be read when the run began, the pid is all
        // there is to go by.
        Some(_) if start == 0 => true,
        found => found == Some(start),
    }
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// /proc/PID/stat); `None` when there is no such process.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the
    // fields after its last ')' are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The id of the run `given` names: an id, a unique prefix of one, `last`
/// for the newest run, or `last~N` for the Nth before it (`last~1` the
/// one before the newest). Newest means last to join the chain of runs.
pub fn find_run(db: &dyn Db, given: &str) -> Result<String, String> {
    if let Some(back) = back_from_last(given)? {
        return nth_newest(db, given, back);
    }
    let exact = db
        .value::<String>("SELECT id FROM runs WHERE id = ?1", vals![given])
        .map_err(|e| e.to_string())?;
    if let Some(id) = exact {
        return Ok(id);
    }
    let pattern = format!("{}%", given.replace(['%', '_'], ""));
    let ids: Vec<String> = db
        .column(
            "SELECT id FROM runs WHERE id LIKE ?1 ORDER BY n DESC LIMIT 6",
            vals![pattern],
        )
        .map_err(|e| e.to_string())?;
    match ids.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "no run {given:?} in the audit database; `sluice audit list` shows the runs"
        )),
        many => Err(format!(
            "{given:?} names more than one run ({}); give more of the id",
            many.join(", ")
        )),
    }
}

/// How many runs back from the newest `given` names: `last` is 0,
/// `last~N` is N; `None` for anything else (an id or a prefix).
fn back_from_last(given: &str) -> Result<Option<u64>, String> {
    if given == "last" {
        return Ok(Some(0));
    }
    let Some(n) = given.strip_prefix("last~") else {
        return Ok(None);
    };
    // Digits only: `parse` would take `+1` too.
    let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    match n.parse::<u64>() {
        Ok(n) if digits => Ok(Some(n)),
        _ => Err(format!(
            "{given:?}: N in last~N is a whole number of runs back from the newest (last~1 is the run before it); \
             `sluice audit list` shows the runs"
        )),
    }
}

/// The id of the run `back` places before the newest.
fn nth_newest(db: &dyn Db, given: &str, back: u64) -> Result<String, String> {
    let found = db
        .value::<String>(
            "SELECT id FROM runs ORDER BY n DESC LIMIT 1 OFFSET ?1",
            vals![back],
        )
        .map_err(|e| e.to_string())?;
    if let Some(id) = found {
        return Ok(id);
    }
    let runs: i64 = db
        .value("SELECT count(*) FROM runs", &[])
        .map_err(|e| e.to_string())?
        .unwrap_or(0);
    Err(match runs {
        0 => "the audit database holds no runs yet".to_string(),
        1 => format!("{given:?} names no run: the audit database holds 1 run, `last`"),
        n => format!(
            "{given:?} names no run: the audit database holds {n} runs, `last` the newest and `last~{}` the oldest",
            n - 1
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{db, insert_run, T0};
    use rusqlite::Connection;

    /// Three runs, as a database written by older and newer sluices holds
    /// them: an old-style id (the time first), then two new-style ones.
    /// The oldest started last by its clock: `last` follows the chain.
    fn three_runs() -> (tempfile::TempDir, Connection) {
        let (dir, conn) = db();
        insert_run(&conn, "18c2f3a9b2c-1f00", "a.lua", T0 + 9_000);
        insert_run(&conn, "3f9a1c7e-19ad2c4b1e0", "b.lua", T0);
        insert_run(&conn, "b04e22d1-19ad2c4b1e5", "c.lua", T0 + 1);
        (dir, conn)
    }

    #[test]
    fn last_and_last_tilde_n_count_back_from_the_newest_run_in_the_chain() {
        let (_dir, conn) = three_runs();
        assert_eq!(find_run(&conn, "last").unwrap(), "b04e22d1-19ad2c4b1e5");
        assert_eq!(find_run(&conn, "last~0").unwrap(), "b04e22d1-19ad2c4b1e5");
        assert_eq!(find_run(&conn, "last~1").unwrap(), "3f9a1c7e-19ad2c4b1e0");
        assert_eq!(find_run(&conn, "last~2").unwrap(), "18c2f3a9b2c-1f00");
        // `audit list` shows them in the same order.
        let listed: Vec<String> = crate::audit::rows::tallies(&conn, -1)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(
            listed,
            [
                "b04e22d1-19ad2c4b1e5",
                "3f9a1c7e-19ad2c4b1e0",
                "18c2f3a9b2c-1f00"
            ]
        );
    }

    #[test]
    fn last_tilde_n_past_the_oldest_run_says_how_many_runs_there_are() {
        let (_dir, conn) = three_runs();
        assert_eq!(
            find_run(&conn, "last~3").unwrap_err(),
            "\"last~3\" names no run: the audit database holds 3 runs, `last` the newest and `last~2` the oldest"
        );
        let (_dir, empty) = db();
        assert_eq!(
            find_run(&empty, "last~1").unwrap_err(),
            "the audit database holds no runs yet"
        );
    }

    #[test]
    fn a_bad_n_in_last_tilde_n_is_an_error_naming_the_form() {
        let (_dir, conn) = three_runs();
        for bad in [
            "last~",
            "last~x",
            "last~-1",
            "last~+1",
            "last~1.5",
            "last~99999999999999999999",
        ] {
            let e = find_run(&conn, bad).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "{bad:?}: N in last~N is a whole number of runs back from the newest (last~1 is the run before it); \
                     `sluice audit list` shows the runs"
                )
            );
        }
    }

    #[test]
    fn old_and_new_style_ids_resolve_whole_and_by_prefix() {
        let (_dir, conn) = three_runs();
        assert_eq!(
            find_run(&conn, "18c2f3a9b2c-1f00").unwrap(),
            "18c2f3a9b2c-1f00"
        );
        assert_eq!(find_run(&conn, "18c").unwrap(), "18c2f3a9b2c-1f00");
        assert_eq!(find_run(&conn, "3f").unwrap(), "3f9a1c7e-19ad2c4b1e0");
        assert_eq!(
            find_run(&conn, "b04e22d1-19ad2c4b1e5").unwrap(),
            "b04e22d1-19ad2c4b1e5"
        );
        let e = find_run(&conn, "zz").unwrap_err();
        assert!(e.starts_with("no run \"zz\""), "{e}");
    }
}
