//! What the readers' move onto [`Db`] needs of the SQLite backend while
//! `sqlite.rs` and `recorder.rs` are another change's: kept apart so those
//! files stay with their owner. TODO(i37): the integrator moves the
//! [`Reopen`] impl into `sqlite.rs` and drops the `From` impl once
//! `recorder.rs` returns `db::Result`.

use super::db::{Db, Error};
use super::replay::{Opener, Reopen};
use rusqlite::{Connection, OpenFlags};
use std::sync::Arc;
use std::time::Duration;

/// A SQLite record is opened again from its file, read-only: a replay
/// reads it as the script goes, beside the run's own writer.
impl Reopen for Connection {
    fn opener(&self) -> Result<Opener, String> {
        let path = self
            .path()
            .filter(|p| !p.is_empty())
            .ok_or("the audit database has no file to read a replay from")?
            .to_string();
        Ok(Arc::new(move || {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let own = Connection::open_with_flags(&path, flags)
                .map_err(|e| format!("audit database {path}: {e}"))?;
            own.busy_timeout(Duration::from_secs(5))
                .map_err(|e| format!("audit database {path}: {e}"))?;
            Ok(Box::new(own) as Box<dyn Db + Send>)
        }))
    }
}

/// The store's error where the writer still speaks rusqlite's (its seal
/// reads the readings through [`super::rows::each_reading`]).
impl From<Error> for rusqlite::Error {
    fn from(e: Error) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(1), Some(e.message))
    }
}
