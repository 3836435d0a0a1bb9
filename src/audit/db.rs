//! The record's store, as the rest of `audit/` sees it: one small trait,
//! [`Db`], that SQLite ([`super::sqlite`]) and PostgreSQL
//! ([`super::postgres`]) both implement, in the manner of
//! `tokio-postgres`'s `GenericClient`. Nothing above it knows which backend
//! it has.
//!
//! The dialect is the common ground of both: numbered parameters `?1`,
//! `?2`... (the PostgreSQL backend numbers them `$1`, `$2`...), integers
//! as 64-bit, reals as doubles, text as text; no `rowid`, no JSON
//! functions, no `INSERT OR ...` (`ON CONFLICT ... DO NOTHING` works in
//! both), no arithmetic on booleans (`CASE WHEN ... THEN 1 ELSE 0 END`).
//! What the two cannot share (how the write lock is taken, what makes a
//! commit durable, the schema's creation) is a method of the trait.

use std::fmt;

/// A value bound to a query or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// SQL NULL.
    Null,
    /// A 64-bit integer (every integer column of the record).
    Int(i64),
    /// A double (the readings' values).
    Real(f64),
    /// Text (ids, hashes, JSON).
    Text(String),
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}

impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::Int(i64::from(v))
    }
}

impl From<u64> for Val {
    /// Sequence numbers and pids: a value past `i64::MAX` is kept as
    /// `i64::MAX` (no run reaches it).
    fn from(v: u64) -> Val {
        Val::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Val {
    fn from(v: usize) -> Val {
        Val::from(v as u64)
    }
}

impl From<bool> for Val {
    fn from(v: bool) -> Val {
        Val::Int(i64::from(v))
    }
}

impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Real(v)
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.to_string())
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Val {
        Val::Text(v.clone())
    }
}

impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map_or(Val::Null, Into::into)
    }
}

impl<T: Clone + Into<Val>> From<&Option<T>> for Val {
    fn from(v: &Option<T>) -> Val {
        v.clone().map_or(Val::Null, Into::into)
    }
}

/// Builds a query's parameter list: `vals![id, n, None::<String>]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => {
        &[$($crate::audit::db::Val::from($v)),*][..]
    };
}
pub(crate) use vals;

/// One row a query returned, its columns in the order selected.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Val>);

impl Row {
    /// Column `i` as a `T`; a NULL or a value of another kind where `T`
    /// does not take it is an error naming the column's place.
    pub fn get<T: FromVal>(&self, i: usize) -> Result<T> {
        match self.0.get(i) {
            Some(v) => T::from_val(v).map_err(|e| e.at(i)),
            None => Err(Error::other(format!(
                "the query returned {} columns, not {}",
                self.0.len(),
                i + 1
            ))),
        }
    }

    /// Column `i`'s text, borrowed; `None` for NULL.
    pub fn text(&self, i: usize) -> Result<Option<&str>> {
        match self.0.get(i) {
            Some(Val::Text(s)) => Ok(Some(s)),
            Some(Val::Null) => Ok(None),
            Some(other) => Err(Error::other(format!(
                "column {} holds {other:?} where text belongs",
                i + 1
            ))),
            None => Err(Error::other(format!("no column {}", i + 1))),
        }
    }

    /// Takes column `i`'s value out of the row (NULL is left behind).
    pub fn take(&mut self, i: usize) -> Val {
        self.0
            .get_mut(i)
            .map_or(Val::Null, |v| std::mem::replace(v, Val::Null))
    }
}

/// What a column's value converts into.
pub trait FromVal: Sized {
    /// The value as `Self`, or why it is not one.
    fn from_val(v: &Val) -> Result<Self>;
}

impl FromVal for i64 {
    fn from_val(v: &Val) -> Result<i64> {
        match v {
            Val::Int(i) => Ok(*i),
            other => Err(Error::kind_of("an integer", other)),
        }
    }
}

impl FromVal for u64 {
    fn from_val(v: &Val) -> Result<u64> {
        let i = i64::from_val(v)?;
        u64::try_from(i).map_err(|_| Error::kind_of("a whole number", v))
    }
}

impl FromVal for u32 {
    fn from_val(v: &Val) -> Result<u32> {
        let i = i64::from_val(v)?;
        u32::try_from(i).map_err(|_| Error::kind_of("a 32-bit whole number", v))
    }
}

impl FromVal for usize {
    fn from_val(v: &Val) -> Result<usize> {
        let i = i64::from_val(v)?;
        usize::try_from(i).map_err(|_| Error::kind_of("a whole number", v))
    }
}

impl FromVal for bool {
    fn from_val(v: &Val) -> Result<bool> {
        Ok(i64::from_val(v)? != 0)
    }
}

impl FromVal for f64 {
    fn from_val(v: &Val) -> Result<f64> {
        match v {
            Val::Real(r) => Ok(*r),
            Val::Int(i) => Ok(*i as f64),
            other => Err(Error::kind_of("a number", other)),
        }
    }
}

impl FromVal for String {
    fn from_val(v: &Val) -> Result<String> {
        match v {
            Val::Text(s) => Ok(s.clone()),
            other => Err(Error::kind_of("text", other)),
        }
    }
}

impl<T: FromVal> FromVal for Option<T> {
    fn from_val(v: &Val) -> Result<Option<T>> {
        match v {
            Val::Null => Ok(None),
            other => T::from_val(other).map(Some),
        }
    }
}

/// What kind of failure a store reported, for the few callers that act on
/// the kind (a busy store is waited for; an unreachable one retried).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Another writer holds the lock.
    Busy,
    /// The store cannot be reached (a server down, a connection lost).
    Unreachable,
    /// A unique key already holds the row.
    Conflict,
    /// A run's writer whose lease another process took over.
    Fenced,
    /// Anything else: a malformed query, a damaged file, a value of the
    /// wrong kind.
    Other,
}

/// A store's error: its kind and what the store said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// The store's own words, or ours.
    pub message: String,
}

impl Error {
    /// An error of kind [`ErrorKind::Other`] saying `message`.
    pub fn other(message: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Other,
            message: message.into(),
        }
    }

    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    fn kind_of(wanted: &str, found: &Val) -> Error {
        Error::other(format!("{found:?} where {wanted} belongs"))
    }

    fn at(self, i: usize) -> Error {
        Error {
            message: format!("column {}: {}", i + 1, self.message),
            ..self
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// A store's result.
pub type Result<T> = std::result::Result<T, Error>;

/// Which store a [`Db`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file (the embedded default).
    Sqlite,
    /// A PostgreSQL database (what a fleet shares).
    Postgres,
}

/// How a transaction begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// Rows of one run: writers of other runs need not wait for it.
    Rows,
    /// The store-wide write lock, held to the commit: a run joining the
    /// chain of runs, a migration. SQLite's `BEGIN IMMEDIATE` (waited for
    /// up to a minute), PostgreSQL's transaction-scoped advisory lock.
    Store,
    /// A read of one snapshot, writing nothing: what a run writing
    /// meanwhile adds is not seen until the rollback. SQLite's deferred
    /// `BEGIN`, PostgreSQL's `REPEATABLE READ READ ONLY`.
    Read,
}

/// The record's store: SQLite or PostgreSQL. Every query of `audit/` goes
/// through it.
pub trait Db {
    /// Which store this is.
    fn backend(&self) -> Backend;

    /// Every row `sql` returns, bound to `params`.
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>>;

    /// Hands each row `sql` returns to `each`, in order; an error from
    /// `each` stops the query and is returned. SQLite streams; PostgreSQL
    /// reads the rows first, so `each` may query the store too on both.
    fn each(
        &self,
        sql: &str,
        params: &[Val],
        each: &mut dyn FnMut(Row) -> Result<()>,
    ) -> Result<()>;

    /// The first row `sql` returns, if any (the rest are not read).
    fn first(&self, sql: &str, params: &[Val]) -> Result<Option<Row>>;

    /// Runs a statement that returns no rows; how many rows it changed.
    fn execute(&self, sql: &str, params: &[Val]) -> Result<u64>;

    /// Runs `sql`, a statement that returns no rows, once for each of
    /// `rows`, in order. A backend a round trip away sends an `INSERT` of
    /// many rows as few statements (PostgreSQL); the others run it row by
    /// row, as this does.
    fn execute_many(&self, sql: &str, rows: &[&[Val]]) -> Result<()> {
        for params in rows {
            self.execute(sql, params)?;
        }
        Ok(())
    }

    /// Begins a transaction.
    fn begin(&self, how: Begin) -> Result<()>;

    /// Commits the open transaction.
    fn commit(&self) -> Result<()>;

    /// Rolls the open transaction back; nothing when none is open.
    fn rollback(&self) -> Result<()>;

    /// Whether commits from now on wait until the rows are on disk
    /// (`true`: an irreversible call's intent) or may be lost in a power
    /// cut, never corrupted (`false`: rows of sealed calls, which the seal
    /// covers when the run ends).
    fn durable(&self, on: bool) -> Result<()>;

    /// How many connections to the store this handle has made so far. It
    /// changes when a lost connection was made again, perhaps to a server
    /// that restarted and lost the commits made without [`Db::durable`]
    /// (PostgreSQL); the writer then looks for them. An embedded store
    /// (SQLite) keeps its one connection, whose commits a crash of this
    /// process never loses: 0.
    fn connections(&self) -> u64 {
        0
    }
}

impl dyn Db + '_ {
    /// The first column of the first row `sql` returns, as a `T`; `None`
    /// when it returns no row.
    pub fn value<T: FromVal>(&self, sql: &str, params: &[Val]) -> Result<Option<T>> {
        self.first(sql, params)?.map(|r| r.get(0)).transpose()
    }

    /// The first column of every row `sql` returns.
    pub fn column<T: FromVal>(&self, sql: &str, params: &[Val]) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, params, &mut |r| {
            out.push(r.get(0)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Runs `f` in a transaction begun as `how`: committed when it
    /// returns `Ok`, rolled back when it returns an error.
    pub fn transaction<T>(&self, how: Begin, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.begin(how)?;
        match f() {
            Ok(v) => self.commit().map(|()| v),
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }
}
