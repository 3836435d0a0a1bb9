//! One audit suite, two stores: a test written once runs against a SQLite
//! file and against a real PostgreSQL database ([`both_stores!`]). The
//! store a test is on is the thread's: every `sluice` the test's helpers
//! start (`sluice_in`, `sluice_run`) gets it through `SLUICE_AUDIT` and
//! the credential named `audit`, and [`Store::db`] opens it for the test's
//! own reads and tampering, through sluice's own backends.

use super::postgres::PgServer;
use sluice::internals::audit::db::{Db, Val};
use sluice::internals::audit::{location, postgres, store};
use std::cell::RefCell;
use std::path::Path;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The workspace's `.sluice/audit.db`, as a user who sets nothing has.
    Sqlite,
    /// A fresh database of the process's shared PostgreSQL server.
    Postgres,
}

/// The store a test runs on.
#[derive(Debug, Clone)]
pub struct Store {
    /// Its backend.
    pub kind: Kind,
    /// The PostgreSQL URL and password (none for SQLite).
    pg: Option<(String, String)>,
}

thread_local! {
    static CURRENT: RefCell<Option<Store>> = const { RefCell::new(None) };
}

impl Store {
    /// A store of `kind`, made the thread's.
    pub fn enter(kind: Kind) -> Store {
        let pg = (kind == Kind::Postgres).then(|| {
            let server = PgServer::shared();
            (server.fresh_database(), server.password().to_string())
        });
        let store = Store { kind, pg };
        CURRENT.with(|c| *c.borrow_mut() = Some(store.clone()));
        store
    }

    /// The thread's store: the one [`both_stores!`] entered, else the
    /// workspace's SQLite file, as for a `sluice` started with no store
    /// in its environment.
    pub fn current() -> Store {
        CURRENT.with(|c| c.borrow().clone()).unwrap_or(Store {
            kind: Kind::Sqlite,
            pg: None,
        })
    }

    /// What a `sluice` process needs in its environment to use this store.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match &self.pg {
            Some((url, password)) => vec![
                ("SLUICE_AUDIT", url.clone()),
                ("SLUICE_CREDENTIAL_AUDIT", password.clone()),
            ],
            None => Vec::new(),
        }
    }

    /// The value `--audit` takes for this store in workspace `ws`.
    pub fn arg(&self, ws: &Path) -> String {
        match &self.pg {
            Some((url, _)) => url.clone(),
            None => store::default_path(ws).display().to_string(),
        }
    }

    /// Opens the store (of workspace `ws`, for SQLite) through sluice's
    /// backend. The SQLite file is opened as it is, as any SQLite client
    /// would (sluice's own `store::open` would sweep and migrate it first,
    /// and its probe of the file, opened and closed beside a connection
    /// the test holds, drops that connection's locks).
    pub fn db(&self, ws: &Path) -> Box<dyn Db + Send> {
        match &self.pg {
            Some((url, password)) => {
                let location::Location::Postgres(at) = location::Location::parse(url).unwrap()
                else {
                    unreachable!("a postgres:// URL")
                };
                Box::new(postgres::open(&at, Some(password)).expect("open the PostgreSQL store"))
            }
            None => Box::new(
                rusqlite::Connection::open(store::default_path(ws)).expect("open the SQLite store"),
            ),
        }
    }

    /// The PostgreSQL role's password, which sluice is given as the
    /// credential named `audit` (none for SQLite).
    pub fn password(&self) -> Option<&str> {
        self.pg.as_ref().map(|(_, pw)| pw.as_str())
    }

    /// The PostgreSQL database's name (none for SQLite).
    fn database(&self) -> Option<&str> {
        let (url, _) = self.pg.as_ref()?;
        let path = url.rsplit('/').next().unwrap();
        Some(path.split('?').next().unwrap())
    }

    /// Every byte the record is kept as, for searching it for what must
    /// never reach it: SQLite's database file, its write-ahead log and
    /// shared memory; PostgreSQL's every row as text (`pg_dump`).
    pub fn bytes(&self, ws: &Path) -> Vec<u8> {
        match self.database() {
            Some(db) => PgServer::shared().dump(db),
            None => {
                let file = store::default_path(ws);
                let mut all = Vec::new();
                for suffix in ["", "-wal", "-shm"] {
                    if let Ok(b) = std::fs::read(format!("{}{suffix}", file.display())) {
                        all.extend(b);
                    }
                }
                all
            }
        }
    }

    /// The whole store as it is now, for [`Store::restore`]: SQLite's
    /// file (whole in its main file once no run is live), PostgreSQL's
    /// dump.
    pub fn snapshot(&self, ws: &Path) -> Vec<u8> {
        match self.database() {
            Some(db) => PgServer::shared().dump(db),
            None => {
                let file = store::default_path(ws);
                assert!(
                    !Path::new(&format!("{}-wal", file.display())).exists(),
                    "a write-ahead log is left: the copy would miss it"
                );
                std::fs::read(file).unwrap()
            }
        }
    }

    /// Puts the store back as [`Store::snapshot`] took it, as an attacker
    /// (or an operator restoring a backup) would: the file copied over,
    /// the database dropped and loaded again.
    pub fn restore(&self, ws: &Path, snapshot: &[u8]) {
        match self.database() {
            Some(db) => PgServer::shared().restore(db, snapshot),
            None => std::fs::write(store::default_path(ws), snapshot).unwrap(),
        }
    }
}

/// The thread's store's environment (nothing outside [`both_stores!`]).
pub fn current_env() -> Vec<(&'static str, String)> {
    CURRENT.with(|c| c.borrow().as_ref().map(Store::env).unwrap_or_default())
}

/// Runs `sql` with `params` on `db`; how many rows it changed.
pub fn exec(db: &dyn Db, sql: &str, params: &[Val]) -> u64 {
    db.execute(sql, params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The first column of the first row `sql` returns.
pub fn one<T: sluice::internals::audit::db::FromVal>(db: &dyn Db, sql: &str, params: &[Val]) -> T {
    db.value(sql, params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// The first column of every row `sql` returns.
pub fn column<T: sluice::internals::audit::db::FromVal>(
    db: &dyn Db,
    sql: &str,
    params: &[Val],
) -> Vec<T> {
    db.column(sql, params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The first row `sql` returns.
pub fn row(db: &dyn Db, sql: &str, params: &[Val]) -> sluice::internals::audit::db::Row {
    db.first(sql, params)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// Writes each test once, run on both stores: `both_stores! { fn name(store) { ... } }`
/// makes `name::sqlite` and `name::postgres`, each with `store: &Store` entered.
///
/// `fn name(store) pending_on_postgres("why") { ... }` marks the PostgreSQL
/// variant `#[ignore = "why"]`: for a behaviour sluice does not have on
/// PostgreSQL yet, named where the test is, and run with
/// `cargo test -- --include-ignored` until it does.
#[macro_export]
macro_rules! both_stores {
    ($($(#[$meta:meta])* fn $name:ident($store:ident) $(pending_on_postgres($why:literal))? $body:block)*) => {
        $(
            $(#[$meta])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                #[allow(unused_variables)]
                fn body($store: &$crate::common::stores::Store) $body

                #[test]
                fn sqlite() {
                    body(&$crate::common::stores::Store::enter($crate::common::stores::Kind::Sqlite));
                }

                #[test]
                $(#[ignore = $why])?
                fn postgres() {
                    body(&$crate::common::stores::Store::enter($crate::common::stores::Kind::Postgres));
                }
            }
        )*
    };
}
