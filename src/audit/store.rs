//! The audit database: where it lives, how an existing file is recognised
//! as one (or refused), its schema and migrations, where a new run joins the
//! chain of runs, and the sweep that marks runs whose process died as
//! `interrupted`.
//!
//! A database is created whole (schema and all, in a file beside it, then
//! linked into place), so a file at the path that is empty, not SQLite, or
//! SQLite without this schema was truncated or belongs to something else:
//! it is refused, never re-initialised.
//!
//! Schema (version 4). Times are milliseconds since the Unix epoch; JSON
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
//!        head: it had no seal yet when this run started)
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
//!        and every row written before schema 4
//! outputs sha256 PK, body: larger outputs, and the items of inputs' list
//!        fields, by their content, each kept once however many calls
//!        returned or sent it (agents re-read the same files and re-run the
//!        same commands; an agent loop sends the whole conversation every
//!        turn). A rowid table since schema 3 (it was WITHOUT ROWID):
//!        an index b-tree keeps under 1 KiB of a row in its page and
//!        spills the rest to an overflow page of its own, so each body of
//!        a few KiB took a page and a half
//! readings (run, task, seq) PK, kind (ms|time|cpu|seed), value (REAL)
//! meta   key PK, value: `unchained_runs`, how many runs a schema 1 database
//!        held when it was migrated (runs #1..#that were recorded before
//!        runs were chained to each other, and are checked each on its own)
//! ```
//!
//! `PRAGMA application_id` is [`APPLICATION_ID`] from schema 2 on.
//!
//! A call's output is `coalesce(output, outputs.body)`; the hashes cover
//! that text either way. A call's whole input is `input` with FIELD set to
//! the list of its items' bodies, serialized as the writer serialized it
//! (`parts.rs` puts it back together); its hash covers `input` and `parts`
//! as stored, and each body must hash to its key. A row's hash covers its
//! `client` too, when it has one.

use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this build writes; older databases are migrated.
pub const SCHEMA_VERSION: i64 = 4;

/// What `PRAGMA application_id` holds in a sluice audit database: "slcA".
pub const APPLICATION_ID: i64 = 0x736c_6341;

/// The first bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A call's output as the database gives it back, stored inline or by
/// content: use it where a query selects `output` (a macro, so `concat!`
/// can build query text with it).
macro_rules! output_column {
    () => {
        "coalesce(output, (SELECT body FROM outputs WHERE outputs.sha256 = calls.output_ref))"
    };
}
pub(crate) use output_column;

/// Each migration takes the database from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  script TEXT NOT NULL,
  script_sha256 TEXT,
  policies TEXT NOT NULL,
  args TEXT NOT NULL,
  workspace TEXT NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  status TEXT NOT NULL,
  error TEXT,
  version TEXT NOT NULL,
  random_seed INTEGER NOT NULL,
  resumed_from TEXT,
  ceiling TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start INTEGER NOT NULL,
  head TEXT NOT NULL,
  seal TEXT
);
CREATE TABLE calls (
  run TEXT NOT NULL REFERENCES runs(id),
  task TEXT NOT NULL,
  seq INTEGER NOT NULL,
  n INTEGER NOT NULL,
  flow TEXT NOT NULL,
  tier TEXT NOT NULL,
  input TEXT NOT NULL,
  capabilities TEXT NOT NULL,
  decisions TEXT NOT NULL,
  route TEXT,
  redacted TEXT NOT NULL,
  replayed_from TEXT,
  started_ms INTEGER NOT NULL,
  prev TEXT NOT NULL,
  hash TEXT NOT NULL,
  status TEXT,
  output TEXT,
  output_ref TEXT,
  error TEXT,
  capped INTEGER NOT NULL DEFAULT 0,
  duration_us INTEGER,
  late_decisions TEXT,
  outcome_hash TEXT,
  PRIMARY KEY (run, task, seq)
);
CREATE UNIQUE INDEX calls_chain ON calls(run, n);
CREATE TABLE outputs (
  sha256 TEXT PRIMARY KEY,
  body TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE readings (
  run TEXT NOT NULL REFERENCES runs(id),
  task TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (run, task, seq)
);
"#,
    r#"
ALTER TABLE runs ADD COLUMN n INTEGER;
ALTER TABLE runs ADD COLUMN prior TEXT;
ALTER TABLE runs ADD COLUMN prior_rows INTEGER;
UPDATE runs SET n = (
  SELECT k FROM (SELECT rowid AS r, row_number() OVER (ORDER BY started_ms, rowid) AS k FROM runs)
  WHERE r = runs.rowid);
CREATE UNIQUE INDEX runs_chain ON runs(n);
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) SELECT 'unchained_runs', count(*) FROM runs;
"#,
    r#"
ALTER TABLE calls ADD COLUMN parts TEXT;
CREATE TABLE contents (
  sha256 TEXT PRIMARY KEY,
  body TEXT NOT NULL
);
INSERT INTO contents (sha256, body) SELECT sha256, body FROM outputs;
DROP TABLE outputs;
ALTER TABLE contents RENAME TO outputs;
"#,
    r#"
ALTER TABLE calls ADD COLUMN client TEXT;
"#,
];

/// The default database of a workspace.
pub fn default_path(workspace: &Path) -> PathBuf {
    workspace.join(FOLDER).join("audit.db")
}

/// Opens (creating when missing) the database at `path`, in WAL mode, at
/// the current schema, and marks runs whose process is gone as interrupted.
/// An existing file that is not an audit database (empty, not SQLite, or
/// SQLite of another schema) is refused, naming what it is.
pub fn open(path: &Path) -> Result<Connection, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)?;
        ignore_in_git(dir);
    }
    if !check_file(path)? {
        create(path)?;
    }
    let conn = Connection::open(path).map_err(|e| describe(path, &e))?;
    restrict(path);
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(|e| describe(path, &e))?;
    recognise(&conn, path)?;
    // Switching a new database to WAL is refused at once, without waiting,
    // while another process opens it too: try again for a while.
    let started = std::time::Instant::now();
    loop {
        match prepare(&conn) {
            Err(e) if is_busy(&e) && started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done.map(|()| conn).map_err(|e| describe(path, &e)),
        }
    }
}

/// Whether a file is at `path` (`false`: none yet), and if one is, that it
/// can be an audit database: not empty, and SQLite.
fn check_file(path: &Path) -> Result<bool, String> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("audit database {}: {e}", path.display())),
    };
    if meta.is_dir() {
        return Err(refusal(path, "is a folder"));
    }
    if meta.len() == 0 {
        return Err(refusal(
            path,
            "is empty (0 bytes): it was truncated, or never written by sluice",
        ));
    }
    let mut start = Vec::with_capacity(SQLITE_MAGIC.len());
    std::fs::File::open(path)
        .and_then(|f| f.take(SQLITE_MAGIC.len() as u64).read_to_end(&mut start))
        .map_err(|e| format!("audit database {}: {e}", path.display()))?;
    if start != SQLITE_MAGIC {
        let shown: Vec<String> = start.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let what = format!(
            "is not a SQLite database ({} bytes, beginning {})",
            meta.len(),
            shown.join(" ")
        );
        return Err(refusal(path, &what));
    }
    Ok(true)
}

/// That the SQLite database `conn` opened is a sluice audit store: this
/// schema's application id, or a schema 1 store (from before the id was
/// set) with its tables.
fn recognise(conn: &Connection, path: &Path) -> Result<(), String> {
    let pragma = |name: &str| {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .map_err(|e| describe(path, &e))
    };
    let (app, version) = (pragma("application_id")?, pragma("user_version")?);
    let tables = table_names(conn).map_err(|e| describe(path, &e))?;
    if app == APPLICATION_ID || (app == 0 && version == 1 && schema_1(conn)) {
        return Ok(());
    }
    let what = match (app, tables.as_slice()) {
        (0, []) => "is an empty SQLite database, not a sluice audit store".to_string(),
        (0, _) => format!(
            "is a SQLite database, but not a sluice audit store: it holds the tables {} \
             (an audit store holds runs, calls, outputs and readings)",
            tables.join(", ")
        ),
        (other, _) => format!(
            "is a SQLite database of another program (application id {other:#x}), not a sluice audit store"
        ),
    };
    Err(refusal(path, &what))
}

/// Why the file at `path` is not used, with what to do about it.
fn refusal(path: &Path, what: &str) -> String {
    let p = path.display();
    format!(
        "audit database {p} {what}. sluice neither reads it as a record nor starts a new one over it: \
         restore the record from a copy, or move the file aside (mv {p} {p}.bad) and a run starts a new \
         record there; or give --audit (or SLUICE_AUDIT) another path"
    )
}

/// Whether the tables hold schema 1's chain columns (a schema 1 store
/// carries no application id to tell it by).
fn schema_1(conn: &Connection) -> bool {
    [
        "SELECT id, head, seal FROM runs",
        "SELECT run, n, prev, hash FROM calls",
    ]
    .iter()
    .all(|q| conn.prepare(&format!("{q} LIMIT 0")).is_ok())
}

fn table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt.query_map([], |r| r.get(0))?;
    names.collect()
}

/// Creates a new database at `path` whole: built in a private file beside
/// it, then linked into place, so no process ever sees a half-made one. If
/// another process made one there first, that one is used.
fn create(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = path.with_file_name(format!(".{name}.{}-{nanos}.new", std::process::id()));
    let made = (|| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| format!("cannot create the audit database {}: {e}", temp.display()))?;
        let conn = Connection::open(&temp).map_err(|e| describe(&temp, &e))?;
        build(&conn).map_err(|e| describe(&temp, &e))?;
        conn.close().map_err(|(_, e)| describe(&temp, &e))?;
        // Synced once, whole, before it takes its name.
        let synced = std::fs::File::open(&temp).and_then(|f| f.sync_all());
        synced.map_err(|e| format!("cannot create the audit database {}: {e}", temp.display()))?;
        match std::fs::hard_link(&temp, path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(format!(
                "cannot create the audit database {}: {e}",
                path.display()
            )),
            _ => {
                sync_dir(path);
                Ok(())
            }
        }
    })();
    let _ = std::fs::remove_file(&temp);
    made
}

/// Builds the schema in a new file no one else sees yet, already in WAL
/// mode: without a journal or a sync per step (a crash leaves only the
/// unnamed file), which cost a new record a dozen syncs.
fn build(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "OFF")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    migrate(conn)?;
    conn.pragma_update(None, "journal_mode", "WAL")
}

/// Makes the name just given to a file in `path`'s folder durable.
fn sync_dir(path: &Path) {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn prepare(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    migrate(conn)?;
    sweep(conn)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Opens an existing database to read it: a missing file is an error that
/// says how one comes to exist, and a file that is not an audit database
/// is an error naming what it is.
pub fn open_existing(path: &Path) -> Result<Connection, String> {
    if !check_file(path)? {
        return Err(format!(
            "no audit database at {}; `sluice run` records there by default (or give --audit PATH / SLUICE_AUDIT)",
            path.display()
        ));
    }
    let read_only = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| describe(path, &e))?;
    recognise(&read_only, path)?;
    // A record on read-only media is still readable, without the sweep.
    Ok(open(path).unwrap_or(read_only))
}

fn describe(path: &Path, e: &rusqlite::Error) -> String {
    format!("audit database {}: {e}", path.display())
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the audit folder {}: {e}", dir.display()))
}

/// The name of the folder sluice keeps a workspace's record in.
pub const FOLDER: &str = ".sluice";

/// Keeps a `.sluice` folder out of git (`git status`, `git add -A`): a
/// `.gitignore` holding `*` inside it, written when the folder lacks one,
/// whether sluice just made the folder or found it, and never over a file
/// already there (the user's own). A folder of another name (`--audit
/// PATH` elsewhere), or one a `.sluice` symlink leads to, is the user's
/// to manage. Best effort: a folder that
/// cannot take the file still holds a usable record.
fn ignore_in_git(dir: &Path) {
    use std::io::Write;
    // A `.sluice` that is a symlink leads to a folder of the user's (whose
    // other files a `*` would hide from git).
    let linked = std::fs::symlink_metadata(dir).map_or(true, |m| m.file_type().is_symlink());
    if dir.file_name() != Some(std::ffi::OsStr::new(FOLDER)) || linked {
        return;
    }
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(".gitignore"));
    if let Ok(mut file) = made {
        let _ = file.write_all(b"# sluice's audit record: never commit it.\n*\n");
    }
}

/// The record holds inputs and outputs: only its owner reads it.
fn restrict(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

/// Brings the schema to [`SCHEMA_VERSION`]. The version is read under the
/// write lock, so two runs starting at once on a new database do not both
/// create it.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let version = |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
    if version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }
    begin_immediate(conn)?;
    let result = (|| {
        let from = version(conn)?;
        if from > SCHEMA_VERSION {
            return Err(failure(format!(
                "schema version {from} is newer than this sluice knows ({SCHEMA_VERSION}); use a newer sluice"
            )));
        }
        for (at, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            conn.execute_batch(sql)?;
            conn.pragma_update(None, "user_version", at as i64 + 1)?;
        }
        conn.pragma_update(None, "application_id", APPLICATION_ID)
    })();
    conn.execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
    result
}

/// Takes the write lock (`BEGIN IMMEDIATE`), waiting while another writer
/// holds it: up to a minute (SQLite's own wait is 10 s).
pub fn begin_immediate(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        match conn.execute_batch("BEGIN IMMEDIATE") {
            Err(e) if is_busy(&e) && started.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
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

/// The link a run starting now gets. Call it under the write lock
/// ([`begin_immediate`]) and insert the run in the same transaction, so two
/// runs starting at once get two places, the later one committing to the
/// earlier. The predecessor is committed to by its seal; one without a seal
/// (still live, or killed) by its last row committed so far, or its head:
/// what it adds later is covered by its own seal, if it gets one.
pub fn next_link(conn: &Connection) -> rusqlite::Result<NextLink> {
    let newest = conn
        .query_row(
            "SELECT id, n, head, seal FROM runs ORDER BY n DESC LIMIT 1",
            [],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            },
        )
        .optional()?;
    let Some((id, n, head, seal)) = newest else {
        return Ok(NextLink {
            n: 1,
            prior: None,
            prior_rows: None,
        });
    };
    if let Some(seal) = seal {
        return Ok(NextLink {
            n: n + 1,
            prior: Some(seal),
            prior_rows: None,
        });
    }
    let last = conn
        .query_row(
            "SELECT n, hash FROM calls WHERE run = ?1 ORDER BY n DESC LIMIT 1",
            [&id],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
        )
        .optional()?;
    let (rows, prior) = last.unwrap_or((0, head));
    Ok(NextLink {
        n: n + 1,
        prior: Some(prior),
        prior_rows: Some(rows),
    })
}

/// How many runs were recorded before runs were chained to each other
/// (those of a schema 1 database when it was migrated): runs #1 to this.
pub fn unchained_runs(conn: &Connection) -> rusqlite::Result<i64> {
    Ok(conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'unchained_runs'",
            [],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// A run still `running` whose process no longer exists was killed or
/// crashed: it is marked `interrupted`, so no view shows it as live.
fn sweep(conn: &Connection) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare("SELECT id, pid, pid_start FROM runs WHERE status = 'running'")?;
    let running: Vec<(String, u32, u64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, pid, start) in running {
        if !process_alive(pid, start) {
            conn.execute(
                "UPDATE runs SET status = 'interrupted', error = ?2 WHERE id = ?1 AND status = 'running'",
                params![
                    id,
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
pub fn find_run(conn: &Connection, given: &str) -> Result<String, String> {
    if let Some(back) = back_from_last(given)? {
        return nth_newest(conn, given, back);
    }
    let exact = conn
        .query_row("SELECT id FROM runs WHERE id = ?1", [given], |r| {
            r.get::<_, String>(0)
        })
        .optional()
        .map_err(|e| e.to_string())?;
    if let Some(id) = exact {
        return Ok(id);
    }
    let pattern = format!("{}%", given.replace(['%', '_'], ""));
    let mut stmt = conn
        .prepare("SELECT id FROM runs WHERE id LIKE ?1 ORDER BY n DESC LIMIT 6")
        .map_err(|e| e.to_string())?;
    let ids: Vec<String> = stmt
        .query_map([pattern], |r| r.get(0))
        .map_err(|e| e.to_string())?
        .collect::<rusqlite::Result<_>>()
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
fn nth_newest(conn: &Connection, given: &str, back: u64) -> Result<String, String> {
    let found = conn
        .query_row(
            "SELECT id FROM runs ORDER BY n DESC LIMIT 1 OFFSET ?1",
            [i64::try_from(back).unwrap_or(i64::MAX)],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .map_err(|e| e.to_string())?;
    if let Some(id) = found {
        return Ok(id);
    }
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    Err(match runs {
        0 => "the audit database holds no runs yet".to_string(),
        1 => format!("{given:?} names no run: the audit database holds 1 run, `last`"),
        n => format!(
            "{given:?} names no run: the audit database holds {n} runs, `last` the newest and `last~{}` the oldest",
            n - 1
        ),
    })
}

/// An error of ours in rusqlite's type, so it travels with the database's.
fn failure(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(1), Some(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{
        db, insert_run, messages, model_input, model_row, record_run, standard, T0,
    };
    use crate::audit::verify::verify_all;

    /// A database as schema `version` made it (its migrations only),
    /// holding run `old`.
    fn schema_at(path: &Path, version: usize) {
        let conn = Connection::open(path).unwrap();
        for sql in &MIGRATIONS[..version] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        standard(&conn, "old");
    }

    /// The one number a `SELECT count(*) ...` gives.
    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_schema_2_database_migrates_and_its_runs_verify_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        schema_at(&path, 2);
        let conn = open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let parts: Option<String> = conn
            .query_row(
                "SELECT parts FROM calls WHERE run = 'old' AND n = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(parts, None);
        // A conversation recorded after it chains on, kept compactly.
        let msgs = messages(3);
        let rows = (0..3).map(|k| model_row(k as u64 + 1, model_input(&msgs, k)));
        record_run(&path, "new", rows.collect());
        let verdicts = verify_all(&conn).unwrap();
        assert_eq!(verdicts.len(), 2);
        assert!(
            verdicts.iter().all(|v| v.intact && v.chained),
            "{verdicts:?}"
        );
        let kept: i64 = count(&conn, "SELECT count(*) FROM calls WHERE parts IS NOT NULL");
        assert_eq!(kept, 3);
    }

    #[test]
    fn a_schema_3_database_gains_the_client_column_and_its_runs_verify_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        schema_at(&path, 3);
        let conn = open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 4);
        // The old rows have no client: NULL, which their hashes never covered.
        let without: i64 = count(
            &conn,
            "SELECT count(*) FROM calls WHERE run = 'old' AND client IS NULL",
        );
        assert_eq!(without, 5);
        // A run an MCP client's calls made, recorded after it, chains on.
        let msgs = messages(2);
        let rows = (0..2).map(|k| {
            let mut row = model_row(k as u64 + 1, model_input(&msgs, k));
            row.client = Some("claude-code 1.2.3".into());
            row
        });
        record_run(&path, "new", rows.collect());
        let verdicts = verify_all(&conn).unwrap();
        assert_eq!(verdicts.len(), 2);
        assert!(
            verdicts.iter().all(|v| v.intact && v.chained),
            "{verdicts:?}"
        );
        let clients: i64 = count(
            &conn,
            "SELECT count(*) FROM calls WHERE run = 'new' AND client = 'claude-code 1.2.3'",
        );
        assert_eq!(clients, 2);
    }

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
