//! The connection: [`Postgres`], the [`Db`] a PostgreSQL store is. One
//! connection, used by one thread at a time (as a SQLite `Connection` is);
//! a connection lost between transactions is made again on the next call,
//! one lost inside a transaction is an error for that transaction.

use super::error::error;
use super::{sql, tls, value};
use crate::audit::db::{Backend, Begin, Db, Error, ErrorKind, Result, Row, Val};
use crate::audit::location::{PgLocation, SslMode};
use postgres::types::ToSql;
use postgres::{Client, Statement};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The key of the store-wide advisory lock ([`Begin::Store`]): "slcA",
/// the record's application id.
pub const STORE_LOCK: i64 = 0x736c_6341;

/// How long a statement waits for a lock (the store's, a row's) before it
/// fails as busy: a minute, as a SQLite writer waits for the write lock.
const LOCK_WAIT: &str = "60s";

/// How long the server keeps a transaction its client left idle (a process
/// stopped or hung holding the store's lock) before ending the session.
/// The record's writers never idle inside a transaction.
const IDLE_IN_TRANSACTION: &str = "60s";

/// Prepared statements kept per connection; past it the cache starts over
/// (the record's queries are a fixed set, so this is only a bound).
const MAX_STATEMENTS: usize = 512;

/// A PostgreSQL audit store's connection.
pub struct Postgres {
    session: RefCell<Session>,
    link: Link,
}

/// What (re)connecting takes: shared with the thread a session's work may
/// run on ([`off_runtime`]).
struct Link {
    config: postgres::Config,
    tls: MakeRustlsConnect,
    /// The location, as errors show it (no password).
    shown: String,
}

// The writer's thread owns its connection: it moves there, and is used
// by one thread at a time (not `Sync`, as a SQLite `Connection`).
const _: fn() = || {
    fn moves<T: Send>() {}
    moves::<Postgres>();
};

/// What one server session holds.
struct Session {
    client: Option<Client>,
    /// Prepared statements, by the query's text as the caller gave it.
    statements: HashMap<String, Statement>,
    /// A transaction is open: `BEGIN` went through, no `COMMIT` or
    /// `ROLLBACK` yet.
    in_tx: bool,
    /// Why the open transaction can only be rolled back: a statement in it
    /// failed (PostgreSQL then refuses the rest, and turns a `COMMIT` into
    /// a rollback without an error).
    failed: Option<String>,
    /// `synchronous_commit` as the session has it, when known.
    durable_now: Option<bool>,
    /// `synchronous_commit` as the caller last asked.
    durable_wanted: bool,
    /// `synchronous_commit` was set inside the open transaction, so a
    /// rollback undoes it.
    durable_in_tx: bool,
    /// Connections made so far ([`Db::connections`]).
    connections: u64,
}

impl fmt::Debug for Postgres {
    /// The location and whether it is connected: never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let connected = self
            .session
            .try_borrow()
            .map(|s| s.client.as_ref().is_some_and(|c| !c.is_closed()));
        f.debug_struct("Postgres")
            .field("location", &self.link.shown)
            .field("connected", &connected.ok())
            .finish()
    }
}

impl Postgres {
    /// Connects to `loc` (with `password`, if any), without looking at the
    /// schema ([`super::open`] does): for tools that only query.
    pub fn connect(loc: &PgLocation, password: Option<&str>) -> Result<Postgres> {
        let mut config = postgres::Config::new();
        config
            .host(&loc.host)
            .port(loc.port)
            .user(&loc.user)
            .dbname(&loc.dbname)
            .application_name("sluice")
            .connect_timeout(loc.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            // Data the server has not acknowledged for this long means it
            // is gone, not slow.
            .tcp_user_timeout(Duration::from_secs(30))
            .ssl_mode(match loc.sslmode {
                SslMode::Disable => postgres::config::SslMode::Disable,
                SslMode::Prefer => postgres::config::SslMode::Prefer,
                SslMode::Require | SslMode::VerifyFull => postgres::config::SslMode::Require,
            });
        if let Some(pw) = password {
            config.password(pw);
        }
        let tls = tls::connector(loc).map_err(Error::other)?;
        let pg = Postgres {
            session: RefCell::new(Session {
                client: None,
                statements: HashMap::new(),
                in_tx: false,
                failed: None,
                durable_now: None,
                durable_wanted: true,
                durable_in_tx: false,
                connections: 0,
            }),
            link: Link {
                config,
                tls,
                shown: loc.to_string(),
            },
        };
        pg.with(|_| Ok(()))?;
        Ok(pg)
    }

    /// Runs `sql`, any number of statements without parameters, in one
    /// round trip (a schema's creation).
    pub fn batch(&self, sql: &str) -> Result<()> {
        self.with(|s| {
            let done = s.client().batch_execute(sql);
            s.settle(done)
        })
    }

    /// Runs `f` on a live session: connected first when none is, or when
    /// the last was lost between transactions.
    fn with<T: Send>(&self, f: impl FnOnce(&mut Session) -> Result<T> + Send) -> Result<T> {
        let mut s = self.session.borrow_mut();
        let s: &mut Session = &mut s;
        let link = &self.link;
        off_runtime(move || {
            let lost = s.client.as_ref().is_none_or(Client::is_closed);
            if lost {
                if s.in_tx {
                    s.client = None;
                    return Err(Error::new(
                        ErrorKind::Unreachable,
                        format!(
                            "the connection to the audit store {} was lost inside a transaction, \
                             which the server rolled back: roll back and begin it again",
                            link.shown
                        ),
                    ));
                }
                link.reconnect(s)?;
            }
            f(s)
        })
    }

    /// Prepares `sql` (or takes it from the cache) and runs `f` with it.
    fn run<T: Send>(
        &self,
        sql: &str,
        f: impl FnOnce(&mut Client, &Statement) -> std::result::Result<T, postgres::Error> + Send,
    ) -> Result<T> {
        self.with(|s| {
            let stmt = s.statement(sql)?;
            let done = f(s.client(), &stmt);
            s.settle(done)
        })
    }
}

/// Runs `work` where the blocking client may run. The client drives a
/// tokio runtime of its own, which tokio refuses to start on a thread
/// that is running another (a replay's record is read from the script's
/// thread, as a SQLite one is): there, `work` runs on a thread beside it,
/// which the caller waits for, as it would for the query itself.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|scope| match scope.spawn(work).join() {
        Ok(done) => done,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

impl Drop for Postgres {
    /// Closing the client runs its runtime too: off a runtime's thread.
    fn drop(&mut self) {
        let client = self.session.get_mut().client.take();
        if client.is_some() {
            off_runtime(move || drop(client));
        }
    }
}

impl Link {
    fn reconnect(&self, s: &mut Session) -> Result<()> {
        s.client = None;
        s.statements.clear();
        s.durable_now = None;
        s.durable_in_tx = false;
        s.failed = None;
        let mut client = self
            .config
            .connect(self.tls.clone())
            .map_err(|e| error(&e))?;
        let settings = format!(
            "SET synchronous_commit = {}; SET lock_timeout = '{LOCK_WAIT}'; \
             SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION}'",
            if s.durable_wanted { "on" } else { "off" }
        );
        client.batch_execute(&settings).map_err(|e| error(&e))?;
        s.durable_now = Some(s.durable_wanted);
        s.client = Some(client);
        s.connections += 1;
        Ok(())
    }
}

impl Session {
    fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("Postgres::with connects before it runs anything")
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(stmt) = self.statements.get(sql) {
            return Ok(stmt.clone());
        }
        let text = sql::numbered(sql)?;
        let prepared = self.client().prepare(&text);
        let stmt = self.settle(prepared).map_err(|e| Error {
            message: format!("{} (in `{}`)", e.message, sql::head(sql)),
            ..e
        })?;
        if self.statements.len() >= MAX_STATEMENTS {
            self.statements.clear();
        }
        self.statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    /// The client's result as the store's; a failure inside a transaction
    /// leaves it good only for a rollback.
    fn settle<T>(&mut self, done: std::result::Result<T, postgres::Error>) -> Result<T> {
        done.map_err(|e| {
            let e = error(&e);
            if self.in_tx && self.failed.is_none() {
                self.failed = Some(e.message.clone());
            }
            e
        })
    }

    /// Ends the open transaction with `sql` (`COMMIT` or `ROLLBACK`).
    fn end(&mut self, sql: &str) -> Result<()> {
        self.in_tx = false;
        self.failed = None;
        let set_inside = std::mem::take(&mut self.durable_in_tx);
        let done = self.client().batch_execute(sql).map_err(|e| error(&e));
        if set_inside && (done.is_err() || sql == "ROLLBACK") {
            // A rollback undid the `SET` made inside it; a failed end
            // leaves it unknown.
            self.durable_now = None;
        }
        done?;
        if self.durable_now.is_none() {
            let wanted = self.durable_wanted;
            self.set_durable(wanted)?;
        }
        Ok(())
    }

    fn set_durable(&mut self, on: bool) -> Result<()> {
        let sql = if on {
            "SET synchronous_commit = on"
        } else {
            "SET synchronous_commit = off"
        };
        let done = self.client().batch_execute(sql);
        self.settle(done)?;
        self.durable_now = Some(on);
        self.durable_in_tx = self.in_tx;
        Ok(())
    }
}

/// How many of `left` rows the next statement inserts: the largest power
/// of two up to 64, so an INSERT has at most seven shapes.
fn chunk(left: usize) -> usize {
    let most = left.min(64);
    1 << (usize::BITS - 1 - most.leading_zeros())
}

fn refs(params: &[Val]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

impl Db for Postgres {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>> {
        let rows = self.run(sql, |c, stmt| c.query(stmt, &refs(params)))?;
        rows.iter().map(value::row_of).collect()
    }

    /// Reads every row first, so `each` may use the store too.
    fn each(
        &self,
        sql: &str,
        params: &[Val],
        each: &mut dyn FnMut(Row) -> Result<()>,
    ) -> Result<()> {
        for row in self.query(sql, params)? {
            each(row)?;
        }
        Ok(())
    }

    fn first(&self, sql: &str, params: &[Val]) -> Result<Option<Row>> {
        use postgres::fallible_iterator::FallibleIterator;
        let row = self.run(sql, |c, stmt| c.query_raw(stmt, params.iter())?.next())?;
        row.as_ref().map(value::row_of).transpose()
    }

    fn execute(&self, sql: &str, params: &[Val]) -> Result<u64> {
        self.run(sql, |c, stmt| c.execute(stmt, &refs(params)))
    }

    /// An `INSERT` of many rows goes as statements of 64, 32, ... 1 rows
    /// (a handful of prepared shapes, each kept), one round trip each
    /// rather than one a row: on loopback the round trips, not the
    /// inserts, are what a recorded call costs.
    fn execute_many(&self, sql: &str, rows: &[&[Val]]) -> Result<()> {
        let per_row = rows.first().map_or(0, |r| r.len());
        let mut rest = rows;
        while !rest.is_empty() {
            let take = chunk(rest.len());
            let (now, later) = rest.split_at(take);
            match (take, sql::multi_row(sql, take, per_row)) {
                (1, _) | (_, None) => {
                    for params in now {
                        self.execute(sql, params)?;
                    }
                }
                (_, Some(text)) => {
                    let params: Vec<Val> = now.iter().flat_map(|r| r.iter().cloned()).collect();
                    self.execute(&text, &params)?;
                }
            }
            rest = later;
        }
        Ok(())
    }

    /// `BEGIN`, at READ COMMITTED: each statement sees what others
    /// committed before it, so a writer that waited for the store's lock
    /// reads the chain of runs as the last holder left it.
    /// [`Begin::Store`] then takes the store-wide advisory lock, held to
    /// the transaction's end. A connection found lost is made again once.
    fn begin(&self, how: Begin) -> Result<()> {
        let sql = match how {
            Begin::Rows => "BEGIN".to_string(),
            Begin::Store => format!("BEGIN; SELECT pg_advisory_xact_lock({STORE_LOCK})"),
            Begin::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_string(),
        };
        let attempt = || {
            self.with(|s| {
                if s.in_tx {
                    return Err(Error::other(
                        "a transaction is already open on this connection: commit or roll it back first",
                    ));
                }
                match s.client().batch_execute(&sql) {
                    Ok(()) => {
                        s.in_tx = true;
                        Ok(())
                    }
                    Err(e) => {
                        // BEGIN went through, the lock did not (its wait ran out).
                        let _ = s.client().batch_execute("ROLLBACK");
                        Err(error(&e))
                    }
                }
            })
        };
        match attempt() {
            Err(e) if e.kind == ErrorKind::Unreachable => attempt(),
            done => done,
        }
    }

    fn commit(&self) -> Result<()> {
        self.with(|s| {
            if !s.in_tx {
                return Err(Error::other("no transaction is open to commit"));
            }
            if let Some(why) = s.failed.clone() {
                let _ = s.end("ROLLBACK");
                return Err(Error::other(format!(
                    "the transaction was rolled back, not committed: a statement in it failed ({why})"
                )));
            }
            s.end("COMMIT").map_err(|e| match e.kind {
                ErrorKind::Unreachable => Error::new(
                    e.kind,
                    format!(
                        "the connection was lost during COMMIT, whose outcome is unknown: read \
                         back what it wrote ({})",
                        e.message
                    ),
                ),
                _ => e,
            })
        })
    }

    /// A transaction whose connection was lost is already rolled back.
    fn rollback(&self) -> Result<()> {
        let mut s = self.session.borrow_mut();
        if !s.in_tx {
            return Ok(());
        }
        if s.client.as_ref().is_none_or(Client::is_closed) {
            s.in_tx = false;
            s.failed = None;
            s.durable_in_tx = false;
            return Ok(());
        }
        let s: &mut Session = &mut s;
        match off_runtime(move || s.end("ROLLBACK")) {
            Err(e) if e.kind == ErrorKind::Unreachable => Ok(()),
            done => done,
        }
    }

    /// `synchronous_commit`, for the session: `off` lets a commit return
    /// before its WAL is flushed (a crash of the server may lose the last
    /// commits, never corrupt), `on` waits for the flush.
    fn durable(&self, on: bool) -> Result<()> {
        self.with(|s| {
            s.durable_wanted = on;
            if s.durable_now == Some(on) {
                return Ok(());
            }
            s.set_durable(on)
        })
    }

    fn connections(&self) -> u64 {
        self.session.borrow().connections
    }
}
