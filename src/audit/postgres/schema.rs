//! The record's schema on PostgreSQL: the tables and columns of SQLite's
//! (schema version 4, see [`crate::audit::store`]), created on first use
//! in one transaction under the store's lock, and a version table,
//! `sluice_schema (version, application)`, that later versions migrate
//! from, as SQLite's `user_version` is.
//!
//! Integers are BIGINT, reals DOUBLE PRECISION, text TEXT in the "C"
//! collation: text sorts and compares byte by byte, as in SQLite, so a
//! listing orders ids the same in both. As in SQLite, the `REFERENCES`
//! of `calls` and `readings` to `runs` are not enforced (SQLite's are not
//! turned on): `verify` is what finds a run deleted under its calls.
//!
//! A database written by a newer sluice (a version past
//! [`store::SCHEMA_VERSION`]) is refused and never altered; one that holds
//! tables but no `sluice_schema` is not an audit store, and is refused
//! naming its tables, never touched.

use super::client::Postgres;
use crate::audit::db::{Begin, Db, Error, Result};
use crate::audit::store;

/// What `sluice_schema.application` holds in a sluice audit store.
pub const APPLICATION: &str = "sluice audit store";

/// The version [`CREATE`] builds.
const CREATED: i64 = 4;

/// Each step takes the schema from version `CREATED + index` to the next.
/// A new SQLite migration needs its step here too (the
/// assertion below holds the two together).
const STEPS: &[&str] = &[
    // Schema 5, as SQLite's: the lease of the process writing a run, and
    // the lease each row was written under.
    "ALTER TABLE runs ADD COLUMN owner TEXT COLLATE \"C\";
     ALTER TABLE runs ADD COLUMN attempt BIGINT NOT NULL DEFAULT 1;
     ALTER TABLE runs ADD COLUMN lease_ms BIGINT;
     ALTER TABLE calls ADD COLUMN attempt BIGINT;",
    // Schema 6, as SQLite's: a run copied in from another store.
    "ALTER TABLE runs ADD COLUMN origin TEXT COLLATE \"C\";
     ALTER TABLE runs ADD COLUMN joined TEXT COLLATE \"C\";",
    // Schema 7, as SQLite's: the modules a run's script required.
    "CREATE TABLE modules (
       run TEXT COLLATE \"C\" NOT NULL,
       k BIGINT NOT NULL,
       name TEXT COLLATE \"C\" NOT NULL,
       path TEXT COLLATE \"C\" NOT NULL,
       sha256 TEXT COLLATE \"C\" NOT NULL,
       PRIMARY KEY (run, k)
     );",
];

const _: () = assert!(
    CREATED + STEPS.len() as i64 == store::SCHEMA_VERSION,
    "the PostgreSQL schema needs a step for each SQLite migration past version 4"
);

/// The whole schema at version [`CREATED`].
const CREATE: &str = r#"
CREATE TABLE runs (
  id TEXT COLLATE "C" PRIMARY KEY,
  script TEXT COLLATE "C" NOT NULL,
  script_sha256 TEXT COLLATE "C",
  policies TEXT COLLATE "C" NOT NULL,
  args TEXT COLLATE "C" NOT NULL,
  workspace TEXT COLLATE "C" NOT NULL,
  started_ms BIGINT NOT NULL,
  ended_ms BIGINT,
  status TEXT COLLATE "C" NOT NULL,
  error TEXT COLLATE "C",
  version TEXT COLLATE "C" NOT NULL,
  random_seed BIGINT NOT NULL,
  resumed_from TEXT COLLATE "C",
  ceiling TEXT COLLATE "C" NOT NULL,
  pid BIGINT NOT NULL,
  pid_start BIGINT NOT NULL,
  head TEXT COLLATE "C" NOT NULL,
  seal TEXT COLLATE "C",
  n BIGINT,
  prior TEXT COLLATE "C",
  prior_rows BIGINT
);
CREATE UNIQUE INDEX runs_chain ON runs (n);
CREATE TABLE calls (
  run TEXT COLLATE "C" NOT NULL,
  task TEXT COLLATE "C" NOT NULL,
  seq BIGINT NOT NULL,
  n BIGINT NOT NULL,
  flow TEXT COLLATE "C" NOT NULL,
  tier TEXT COLLATE "C" NOT NULL,
  input TEXT COLLATE "C" NOT NULL,
  capabilities TEXT COLLATE "C" NOT NULL,
  decisions TEXT COLLATE "C" NOT NULL,
  route TEXT COLLATE "C",
  redacted TEXT COLLATE "C" NOT NULL,
  replayed_from TEXT COLLATE "C",
  started_ms BIGINT NOT NULL,
  prev TEXT COLLATE "C" NOT NULL,
  hash TEXT COLLATE "C" NOT NULL,
  status TEXT COLLATE "C",
  output TEXT COLLATE "C",
  output_ref TEXT COLLATE "C",
  error TEXT COLLATE "C",
  capped BIGINT NOT NULL DEFAULT 0,
  duration_us BIGINT,
  late_decisions TEXT COLLATE "C",
  outcome_hash TEXT COLLATE "C",
  parts TEXT COLLATE "C",
  client TEXT COLLATE "C",
  PRIMARY KEY (run, task, seq)
);
CREATE UNIQUE INDEX calls_chain ON calls (run, n);
CREATE TABLE outputs (
  sha256 TEXT COLLATE "C" PRIMARY KEY,
  body TEXT COLLATE "C" NOT NULL
);
CREATE TABLE readings (
  run TEXT COLLATE "C" NOT NULL,
  task TEXT COLLATE "C" NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (run, task, seq)
);
CREATE TABLE meta (
  key TEXT COLLATE "C" PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('unchained_runs', 0);
CREATE TABLE sluice_schema (
  version BIGINT NOT NULL,
  application TEXT NOT NULL
);
"#;

/// What the database holds, as far as the schema goes.
#[derive(Debug, PartialEq)]
enum Found {
    /// No table: a store is created.
    Empty,
    /// A sluice store at this version.
    Version(i64),
    /// Something else, and why it is refused.
    Foreign(String),
}

/// Brings the database to [`store::SCHEMA_VERSION`]: created when empty,
/// migrated when older, under the store's lock so that processes opening
/// a new database at once create it once. A database that is not a sluice
/// store, or is newer, is refused untouched.
pub fn ensure(db: &Postgres) -> std::result::Result<(), String> {
    match found(db).map_err(|e| e.message)? {
        Found::Version(v) if v == store::SCHEMA_VERSION => return Ok(()),
        Found::Version(v) => check_version(v)?,
        Found::Foreign(why) => return Err(why),
        Found::Empty => {}
    }
    let d: &dyn Db = db;
    d.transaction(Begin::Store, || match found(db)? {
        Found::Empty => {
            db.batch(CREATE)?;
            d.execute(
                "INSERT INTO sluice_schema (version, application) VALUES (?1, ?2)",
                crate::audit::db::vals![CREATED, APPLICATION],
            )?;
            migrate(db, CREATED)
        }
        Found::Version(v) => {
            check_version(v).map_err(Error::other)?;
            migrate(db, v)
        }
        Found::Foreign(why) => Err(Error::other(why)),
    })
    .map_err(|e| e.message)
}

/// That a store at version `v` is one this sluice can bring up to date.
fn check_version(v: i64) -> std::result::Result<(), String> {
    let current = store::SCHEMA_VERSION;
    if v > current {
        return Err(format!(
            "the store is at schema version {v}, newer than this sluice knows ({current}): it was \
             written by a newer sluice. sluice leaves it as it is: use that version of sluice (or a \
             newer one) with it"
        ));
    }
    if v < CREATED {
        return Err(format!(
            "the store's sluice_schema says version {v}, but no sluice made a PostgreSQL store before \
             version {CREATED}: its sluice_schema table was changed by hand. sluice leaves it as it is"
        ));
    }
    Ok(())
}

/// Applies the steps from version `from` on, each recorded as it is done,
/// inside the caller's transaction.
fn migrate(db: &Postgres, from: i64) -> Result<()> {
    let first = usize::try_from(from - CREATED).unwrap_or(0);
    let d: &dyn Db = db;
    for (i, step) in STEPS.iter().enumerate().skip(first) {
        db.batch(step)?;
        d.execute(
            "UPDATE sluice_schema SET version = ?1",
            crate::audit::db::vals![CREATED + i as i64 + 1],
        )?;
    }
    Ok(())
}

/// Reads what the database's current schema holds.
fn found(db: &Postgres) -> Result<Found> {
    let d: &dyn Db = db;
    let tables: Vec<String> = d.column(
        "SELECT c.relname FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace \
         WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
         ORDER BY c.relname",
        &[],
    )?;
    if tables.is_empty() {
        return Ok(Found::Empty);
    }
    if !tables.iter().any(|t| t == "sluice_schema") {
        return Ok(Found::Foreign(format!(
            "it is a PostgreSQL database, but not a sluice audit store: its schema holds the tables {} \
             and no sluice_schema. sluice neither reads it as a record nor starts one there: give \
             --audit (or SLUICE_AUDIT) an empty database, or create one (CREATE DATABASE ...)",
            tables.join(", ")
        )));
    }
    let rows = d.query("SELECT version, application FROM sluice_schema", &[])?;
    match rows.as_slice() {
        [row] if row.get::<String>(1)? == APPLICATION => Ok(Found::Version(row.get(0)?)),
        _ => Ok(Found::Foreign(format!(
            "it holds a sluice_schema table that is not a sluice audit store's ({} rows, not one row \
             marked `{APPLICATION}`): sluice leaves it as it is",
            rows.len()
        ))),
    }
}
