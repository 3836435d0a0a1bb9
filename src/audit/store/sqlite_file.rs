//! What is SQLite's own of the record: the file. How a file at the path
//! is recognised as an audit database or refused, how a new one is
//! created whole, its pragmas (WAL, `synchronous`, `application_id`,
//! `user_version`), and the schema's SQLite text with its migrations.
//! What every backend shares (where a run joins the chain of runs, the
//! sweep, finding a run) is in [`super`], through [`Db`].
//!
//! A database is created whole (schema and all, in a file beside it, then
//! linked into place), so a file at the path that is empty, not SQLite, or
//! SQLite without this schema was truncated or belongs to something else:
//! it is refused, never re-initialised.
//!
//! `PRAGMA application_id` is [`APPLICATION_ID`] from schema 2 on;
//! `PRAGMA user_version` is the schema's version.

use super::{sweep, FOLDER, SCHEMA_VERSION};
use crate::audit::db::{self, Begin, Db, ErrorKind};
use crate::audit::sqlite::error;
use rusqlite::Connection;
use std::path::Path;
use std::time::Duration;

/// What `PRAGMA application_id` holds in a sluice audit database: "slcA".
pub const APPLICATION_ID: i64 = 0x736c_6341;

/// The first bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Pages of write-ahead log after which a commit copies it into the
/// database (SQLite's default is 1,000): a run's writer copies the log as
/// the run goes, rather than mostly when the run ends and waits.
const WAL_PAGES: i64 = 256;

/// Prepared statements a connection keeps (rusqlite's default is 16): the
/// writer's and the readers' distinct queries all stay prepared.
const CACHED_STATEMENTS: usize = 64;

/// Each migration takes the database from version `index` to `index + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // Schema 5: the lease of the process writing a run (`runs.owner`,
    // `attempt`, `lease_ms`) and the lease each row was written under.
    r#"
ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN lease_ms INTEGER;
ALTER TABLE calls ADD COLUMN attempt INTEGER;
"#,
    // Schema 6: a run copied in from another store (`sluice audit copy`)
    // keeps the link its head covers (`origin`) and gets a hash of its
    // place in this one (`joined`).
    r#"
ALTER TABLE runs ADD COLUMN origin TEXT;
ALTER TABLE runs ADD COLUMN joined TEXT;
"#,
    // Schema 7: the modules a run's script `require`d, each by name, file
    // and SHA-256 (their texts, and the script's, kept in `outputs`).
    r#"
CREATE TABLE modules (
  run TEXT NOT NULL REFERENCES runs(id),
  k INTEGER NOT NULL,
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (run, k)
);
"#,
];

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
    conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
    recognise(&conn, path)?;
    // Switching a new database to WAL is refused at once, without waiting,
    // while another process opens it too: try again for a while.
    let started = std::time::Instant::now();
    loop {
        match prepare(&conn) {
            Err(e) if e.kind == ErrorKind::Busy && started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done.map(|()| conn).map_err(|e| describe(path, &e)),
        }
    }
}

/// Whether a file is at `path` (`false`: none yet), and if one is, that it
/// can be an audit database: not empty, and SQLite.
fn check_file(path: &Path) -> Result<bool, String> {
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
    // Asked of SQLite, not read through a descriptor of our own: closing a
    // second descriptor of a file drops every POSIX lock this process holds
    // on it, a live connection's too, and another process may then delete
    // the write-ahead log under it.
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let probe = Connection::open_with_flags(path, flags)
        .and_then(|c| c.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)));
    match probe {
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => {
            Err(not_sqlite(path, meta.len()))
        }
        // Busy or locked: a database another writer holds, read later.
        _ => Ok(true),
    }
}

/// The refusal of a file that is not SQLite, naming its first bytes (read
/// here: no connection of ours holds locks on a file SQLite refused).
fn not_sqlite(path: &Path, len: u64) -> String {
    use std::io::Read;
    let mut start = Vec::with_capacity(SQLITE_MAGIC.len());
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(SQLITE_MAGIC.len() as u64).read_to_end(&mut start));
    if let Err(e) = read {
        return format!("audit database {}: {e}", path.display());
    }
    let shown: Vec<String> = start.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let what = format!(
        "is not a SQLite database ({len} bytes, beginning {})",
        shown.join(" ")
    );
    refusal(path, &what)
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
fn build(conn: &Connection) -> db::Result<()> {
    pragma(conn, "journal_mode", "OFF")?;
    pragma(conn, "synchronous", "OFF")?;
    migrate(conn)?;
    pragma(conn, "journal_mode", "WAL")
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

/// Readies an opened database: WAL, commits synced as sealed rows want
/// them (the writer asks for more per batch, [`Db::durable`]), the schema
/// current, dead runs swept.
fn prepare(conn: &Connection) -> db::Result<()> {
    pragma(conn, "journal_mode", "WAL")?;
    pragma(conn, "synchronous", "NORMAL")?;
    // The log is copied into the database as the run goes, on the
    // writer's thread, rather than mostly when the run ends and waits.
    pragma(conn, "wal_autocheckpoint", WAL_PAGES)?;
    migrate(conn)?;
    sweep(conn)
}

/// Sets pragma `name` to `value` on `conn`.
fn pragma(conn: &Connection, name: &str, value: impl rusqlite::ToSql) -> db::Result<()> {
    conn.pragma_update(None, name, value).map_err(error)
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

fn describe(path: &Path, e: &dyn std::fmt::Display) -> String {
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
fn migrate(conn: &Connection) -> db::Result<()> {
    let version = || {
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .map_err(error)
    };
    if version()? == SCHEMA_VERSION {
        return Ok(());
    }
    let db: &dyn Db = conn;
    db.transaction(Begin::Store, || {
        let from = version()?;
        if from > SCHEMA_VERSION {
            return Err(db::Error::other(format!(
                "schema version {from} is newer than this sluice knows ({SCHEMA_VERSION}); use a newer sluice"
            )));
        }
        for (at, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            conn.execute_batch(sql).map_err(error)?;
            pragma(conn, "user_version", at as i64 + 1)?;
        }
        pragma(conn, "application_id", APPLICATION_ID)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{messages, model_input, model_row, record_run, standard};
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

    /// A database made at schema `version` holding run `old`, opened (and
    /// so migrated) as sluice opens one: its folder, path and connection.
    fn migrated_from(version: usize) -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        schema_at(&path, version);
        let conn = open(&path).unwrap();
        let now: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(now, SCHEMA_VERSION);
        (dir, path, conn)
    }

    /// The one number a `SELECT count(*) ...` gives.
    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_schema_2_database_migrates_and_its_runs_verify_as_they_were() {
        let (_dir, path, conn) = migrated_from(2);
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
    fn opening_a_record_again_keeps_a_live_connections_locks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let live = open(&path).unwrap();
        standard(&live, "held");
        let wal = dir.path().join("audit.db-wal");
        assert!(wal.exists(), "WAL mode keeps a log beside the database");
        // Opened again (resume reads, then writes): the check of the file
        // must not drop the live connection's locks.
        drop(open_existing(&path).unwrap());
        // Another process that thinks it is the last connection would
        // checkpoint and delete the log under the live one.
        let other = std::process::Command::new("python3")
            .arg("-c")
            .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM runs').fetchall(); c.close()")
            .arg(&path)
            .status()
            .expect("python3 runs (scripts/test installs it)");
        assert!(other.success());
        assert!(
            wal.exists(),
            "the live connection's log survives another reader's close"
        );
        standard(&live, "after");
        let runs = count(&live, "SELECT count(*) FROM runs");
        assert_eq!(runs, 2);
    }

    #[test]
    fn a_schema_4_database_gains_the_lease_and_its_runs_verify_as_they_were() {
        let (_dir, path, conn) = migrated_from(4);
        // Runs from before leases hold lease 1, no owner; their rows none.
        let old = "SELECT count(*) FROM runs WHERE id = 'old' AND attempt = 1 AND owner IS NULL";
        assert_eq!(count(&conn, old), 1);
        let rows = "SELECT count(*) FROM calls WHERE run = 'old' AND attempt IS NULL";
        assert_eq!(count(&conn, rows), 5);
        // A run recorded after it carries its owner and lease on each row.
        let msgs = messages(2);
        let new = (0..2).map(|k| model_row(k as u64 + 1, model_input(&msgs, k)));
        record_run(&path, "new", new.collect());
        let leased = "SELECT count(*) FROM calls WHERE run = 'new' AND attempt = 1";
        assert_eq!(count(&conn, leased), 2);
        let owner: String = conn
            .query_row("SELECT owner FROM runs WHERE id = 'new'", [], |r| r.get(0))
            .unwrap();
        assert!(owner.starts_with(&format!(
            "{}:{}:",
            crate::audit::lease::host(),
            std::process::id()
        )));
        let verdicts = verify_all(&conn).unwrap();
        assert!(verdicts.iter().all(|v| v.intact), "{verdicts:?}");
    }

    #[test]
    fn a_schema_3_database_gains_the_client_column_and_its_runs_verify_as_they_were() {
        let (_dir, path, conn) = migrated_from(3);
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

    #[test]
    fn a_database_of_a_newer_schema_is_refused_by_name_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        drop(open(&path).unwrap());
        let newer = SCHEMA_VERSION + 1;
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", newer).unwrap();
        let e = open(&path).unwrap_err();
        assert_eq!(
            e,
            format!(
                "audit database {}: schema version {newer} is newer than this sluice knows \
                 ({SCHEMA_VERSION}); use a newer sluice",
                path.display()
            )
        );
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, newer);
    }
}
