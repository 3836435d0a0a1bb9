//! The SQLite backend of [`Db`]: the embedded default, a file per
//! workspace. What is SQLite's own (the file's recognition, its pragmas,
//! WAL) stays in [`super::store`]; this is the query surface.

use super::db::{Backend, Begin, Db, Error, ErrorKind, Result, Row, Val};
use super::replay::{Opener, Reopen};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a writer waits for SQLite's write lock (SQLite's own wait is
/// 10 s, then it is retried).
const LOCK_WAIT: Duration = Duration::from_secs(60);

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Val::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Val::Real(r) => ToSqlOutput::Borrowed(ValueRef::Real(*r)),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

/// A SQLite error as the store's, its kind told apart.
pub fn error(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode::*;
    let kind = match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => ErrorKind::Busy,
        Some(ConstraintViolation) => ErrorKind::Conflict,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e.to_string())
}

fn row_of(r: &rusqlite::Row, width: usize) -> Result<Row> {
    let mut vals = Vec::with_capacity(width);
    for i in 0..width {
        vals.push(match r.get_ref(i).map_err(error)? {
            ValueRef::Null => Val::Null,
            ValueRef::Integer(i) => Val::Int(i),
            ValueRef::Real(f) => Val::Real(f),
            ValueRef::Text(t) | ValueRef::Blob(t) => Val::Text(text(t)),
        });
    }
    Ok(Row(vals))
}

/// Stored bytes as text: checked whole first (what the record writes is
/// always UTF-8), so only a damaged value pays for the lossy conversion,
/// which walks it in small pieces; a replay reads every row's text.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

impl Db for Connection {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.each(sql, params, &mut |r| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    fn each(
        &self,
        sql: &str,
        params: &[Val],
        each: &mut dyn FnMut(Row) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.prepare_cached(sql).map_err(error)?;
        let width = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(error)?;
        while let Some(r) = rows.next().map_err(error)? {
            each(row_of(r, width)?)?;
        }
        Ok(())
    }

    fn first(&self, sql: &str, params: &[Val]) -> Result<Option<Row>> {
        let mut stmt = self.prepare_cached(sql).map_err(error)?;
        let width = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(error)?;
        match rows.next().map_err(error)? {
            Some(r) => row_of(r, width).map(Some),
            None => Ok(None),
        }
    }

    fn execute(&self, sql: &str, params: &[Val]) -> Result<u64> {
        let mut stmt = self.prepare_cached(sql).map_err(error)?;
        let changed = stmt
            .execute(rusqlite::params_from_iter(params))
            .map_err(error)?;
        Ok(changed as u64)
    }

    /// SQLite has one writer at a time: both kinds of write transaction
    /// take the write lock, up front, so two writers never deadlock
    /// upgrading; a read takes none.
    fn begin(&self, how: Begin) -> Result<()> {
        if how == Begin::Read {
            return control(self, "BEGIN");
        }
        let started = Instant::now();
        loop {
            match control(self, "BEGIN IMMEDIATE") {
                Err(e) if e.kind == ErrorKind::Busy && started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    fn commit(&self) -> Result<()> {
        control(self, "COMMIT")
    }

    fn rollback(&self) -> Result<()> {
        if self.is_autocommit() {
            return Ok(());
        }
        self.execute_batch("ROLLBACK").map_err(error)
    }

    fn durable(&self, on: bool) -> Result<()> {
        let sql = if on {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        };
        control(self, sql)
    }
}

/// Runs a statement that takes nothing and returns nothing (a transaction's
/// start or end, a setting), prepared once per connection: the writer runs
/// a few per batch, and parsing them again each time cost more than the
/// lease check between them.
fn control(conn: &Connection, sql: &str) -> Result<()> {
    let mut stmt = conn.prepare_cached(sql).map_err(error)?;
    stmt.raw_execute().map(|_| ()).map_err(error)
}

/// A SQLite record is opened again from its file, read-only: a replay
/// reads it as the script goes, beside the run's own writer.
impl Reopen for Connection {
    fn opener(&self) -> std::result::Result<Opener, String> {
        let path = self
            .path()
            .filter(|p| !p.is_empty())
            .ok_or("the audit database has no file to read a replay from")?;
        Ok(reader(path.to_string()))
    }
}

/// What opens the SQLite record at `path` again, read-only.
pub fn reader(path: String) -> Opener {
    Arc::new(move || {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let own = Connection::open_with_flags(&path, flags)
            .map_err(|e| format!("audit database {path}: {e}"))?;
        own.busy_timeout(Duration::from_secs(5))
            .map_err(|e| format!("audit database {path}: {e}"))?;
        Ok(Box::new(own) as Box<dyn Db + Send>)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::db::vals;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, i INTEGER, r REAL, s TEXT)")
            .unwrap();
        c
    }

    #[test]
    fn each_kind_of_value_comes_back_as_it_was_bound() {
        let c = db();
        let d: &dyn Db = &c;
        d.execute(
            "INSERT INTO t (k, i, r, s) VALUES (?1, ?2, ?3, ?4)",
            vals!["a", -7i64, 2.5f64, None::<String>],
        )
        .unwrap();
        let row = d.first("SELECT k, i, r, s FROM t", &[]).unwrap().unwrap();
        assert_eq!(
            row.0,
            vec![
                Val::Text("a".into()),
                Val::Int(-7),
                Val::Real(2.5),
                Val::Null
            ]
        );
        assert_eq!(row.get::<Option<String>>(3).unwrap(), None);
        let wrong = row.get::<i64>(0).unwrap_err();
        assert!(wrong.message.starts_with("column 1: "), "{wrong}");
    }

    #[test]
    fn text_that_is_not_utf8_comes_back_with_replacement_characters() {
        let c = db();
        c.execute(
            "INSERT INTO t (k, s) VALUES ('a', CAST(X'6869FF21' AS TEXT))",
            [],
        )
        .unwrap();
        let d: &dyn Db = &c;
        let row = d.first("SELECT s FROM t", &[]).unwrap().unwrap();
        assert_eq!(row.0, vec![Val::Text("hi\u{FFFD}!".into())]);
    }

    #[test]
    fn a_failed_transaction_leaves_nothing_and_a_duplicate_is_a_conflict() {
        let c = db();
        let d: &dyn Db = &c;
        let failed: Result<()> = d.transaction(Begin::Rows, || {
            d.execute("INSERT INTO t (k) VALUES (?1)", vals!["x"])?;
            d.execute("INSERT INTO t (k) VALUES (?1)", vals!["x"])?;
            Ok(())
        });
        assert_eq!(failed.unwrap_err().kind, ErrorKind::Conflict);
        assert_eq!(
            d.value::<i64>("SELECT count(*) FROM t", &[]).unwrap(),
            Some(0)
        );
        let kept = d.transaction(Begin::Store, || {
            d.execute(
                "INSERT INTO t (k) VALUES (?1) ON CONFLICT (k) DO NOTHING",
                vals!["y"],
            )
        });
        assert_eq!(kept.unwrap(), 1);
        assert_eq!(
            d.column::<String>("SELECT k FROM t", &[]).unwrap(),
            vec!["y"]
        );
    }
}
