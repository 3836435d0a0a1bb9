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

    /// Opens the store (of workspace `ws`, for SQLite) as sluice does.
    pub fn db(&self, ws: &Path) -> Box<dyn Db + Send> {
        match &self.pg {
            Some((url, password)) => {
                let location::Location::Postgres(at) = location::Location::parse(url).unwrap()
                else {
                    unreachable!("a postgres:// URL")
                };
                Box::new(postgres::open(&at, Some(password)).expect("open the PostgreSQL store"))
            }
            None => Box::new(store::open(&store::default_path(ws)).expect("open the SQLite store")),
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

/// Writes each test once, run on both stores: `both_stores! { fn name(store) { ... } }`
/// makes `name::sqlite` and `name::postgres`, each with `store: &Store` entered.
#[macro_export]
macro_rules! both_stores {
    ($(fn $name:ident($store:ident) $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                fn body($store: &$crate::common::stores::Store) $body

                #[test]
                fn sqlite() {
                    body(&$crate::common::stores::Store::enter($crate::common::stores::Kind::Sqlite));
                }

                #[test]
                fn postgres() {
                    body(&$crate::common::stores::Store::enter($crate::common::stores::Kind::Postgres));
                }
            }
        )*
    };
}
