//! The PostgreSQL backend of [`Db`](super::db::Db): the store a fleet
//! shares. A connection ([`Postgres`]) renumbers the portable dialect's
//! `?N` into `$N` (`sql`), binds and reads [`Val`](super::db::Val)s by
//! the column's type (`value`), encrypts with rustls as the location's
//! `sslmode` asks (`tls`), tells the kinds of errors apart (`error`), and
//! [`open`] creates or checks the schema (`schema`).
//!
//! Behind the cargo feature `postgres` (on by default). Built without it,
//! [`Postgres`] is a type with no value and [`open`] says how to build
//! one that has it.
//!
//! The client is the blocking `postgres` crate, which runs its own
//! single-threaded tokio runtime per connection: a [`Postgres`] must not be
//! used from inside a tokio runtime's thread (the writer's thread, or a
//! `spawn_blocking`, are where it belongs).

use super::location::PgLocation;

/// What a sluice built without the `postgres` feature says when a
/// `postgres://` location is used.
#[cfg_attr(feature = "postgres", allow(dead_code))]
pub const NOT_BUILT: &str =
    "this sluice was built without PostgreSQL support: build with --features postgres";

#[cfg(feature = "postgres")]
mod client;
#[cfg(feature = "postgres")]
mod error;
#[cfg(feature = "postgres")]
mod schema;
#[cfg(feature = "postgres")]
mod sql;
#[cfg(feature = "postgres")]
mod tls;
#[cfg(feature = "postgres")]
mod value;

#[cfg(feature = "postgres")]
pub use client::Postgres;
// The lock's key and the schema's marker: the tests see them (internals).
#[cfg(all(feature = "postgres", feature = "internals"))]
pub use client::STORE_LOCK;
#[cfg(all(feature = "postgres", feature = "internals"))]
pub use schema::APPLICATION;

/// Connects to the store at `loc` with `password` (from
/// [`super::location::password`]), and brings its schema up to date:
/// created on first use, migrated when older. A database that is not a
/// sluice store, or one written by a newer sluice, is refused untouched.
/// No error holds the password.
#[cfg(feature = "postgres")]
pub fn open(loc: &PgLocation, password: Option<&str>) -> Result<Postgres, String> {
    let db = Postgres::connect(loc, password).map_err(|e| cannot_connect(loc, &e, password))?;
    schema::ensure(&db).map_err(|e| format!("audit store {loc}: {e}"))?;
    Ok(db)
}

/// Why a connection failed, with what to do about the usual causes.
#[cfg(feature = "postgres")]
fn cannot_connect(loc: &PgLocation, e: &super::db::Error, password: Option<&str>) -> String {
    use super::db::ErrorKind;
    let m = &e.message;
    let hint = if m.contains("password") || m.contains("authentication") {
        let found = if password.is_some() {
            "the password given was refused"
        } else {
            "no password was found"
        };
        format!(
            "; {found}: give the role's password as the credential named `audit` \
             (SLUICE_CREDENTIAL_AUDIT), or as PGPASSWORD or in ~/.pgpass (mode 0600)"
        )
    } else if m.contains("TLS") || m.contains("certificate") {
        format!(
            "; sslmode={} checks the server's certificate against the public roots and \
             sslrootcert=PATH (a PEM file of the certificate or its CA)",
            loc.sslmode.name()
        )
    } else if e.kind == ErrorKind::Unreachable {
        format!(
            "; is the server running and accepting TCP connections at {}:{}?",
            loc.host, loc.port
        )
    } else {
        String::new()
    };
    format!("cannot connect to the audit store {loc}: {m}{hint}")
}

#[cfg(not(feature = "postgres"))]
mod absent {
    use crate::audit::db::{Backend, Begin, Db, Result, Row, Val};

    /// A PostgreSQL store's connection, in a build without the `postgres`
    /// feature: there is none.
    #[derive(Debug)]
    pub enum Postgres {}

    impl Db for Postgres {
        fn backend(&self) -> Backend {
            match *self {}
        }
        fn query(&self, _: &str, _: &[Val]) -> Result<Vec<Row>> {
            match *self {}
        }
        fn each(&self, _: &str, _: &[Val], _: &mut dyn FnMut(Row) -> Result<()>) -> Result<()> {
            match *self {}
        }
        fn first(&self, _: &str, _: &[Val]) -> Result<Option<Row>> {
            match *self {}
        }
        fn execute(&self, _: &str, _: &[Val]) -> Result<u64> {
            match *self {}
        }
        fn begin(&self, _: Begin) -> Result<()> {
            match *self {}
        }
        fn commit(&self) -> Result<()> {
            match *self {}
        }
        fn rollback(&self) -> Result<()> {
            match *self {}
        }
        fn durable(&self, _: bool) -> Result<()> {
            match *self {}
        }
    }
}

#[cfg(not(feature = "postgres"))]
pub use absent::Postgres;

/// In a build without the `postgres` feature: always [`NOT_BUILT`].
#[cfg(not(feature = "postgres"))]
pub fn open(_loc: &PgLocation, _password: Option<&str>) -> Result<Postgres, String> {
    Err(NOT_BUILT.to_string())
}
