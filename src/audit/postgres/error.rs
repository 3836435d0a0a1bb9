//! PostgreSQL's errors as the store's: the kinds a caller acts on told
//! apart, the server's words kept.

use crate::audit::db::{Error, ErrorKind};
use postgres::error::SqlState;

/// `e` as the store's error.
pub fn error(e: &postgres::Error) -> Error {
    Error::new(kind(e), describe(e))
}

fn kind(e: &postgres::Error) -> ErrorKind {
    if let Some(code) = e.code() {
        return match code {
            c if *c == SqlState::UNIQUE_VIOLATION => ErrorKind::Conflict,
            c if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::LOCK_NOT_AVAILABLE =>
            {
                ErrorKind::Busy
            }
            // Class 08 (connection exception), a server shutting down or
            // starting, and a session the server ended.
            c if c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT =>
            {
                ErrorKind::Unreachable
            }
            _ => ErrorKind::Other,
        };
    }
    if e.is_closed() || has_io_source(e) {
        return ErrorKind::Unreachable;
    }
    // The client's own kinds of a lost or refused connection, which carry
    // no code (its `Kind` is not public).
    let said = e.to_string();
    let lost = [
        "error connecting to server",
        "timeout waiting for server",
        "error communicating with the server",
    ];
    if lost.iter().any(|l| said.starts_with(l)) {
        ErrorKind::Unreachable
    } else {
        ErrorKind::Other
    }
}

fn has_io_source(e: &postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// What the server said (with its detail and hint), or the client's error
/// with its causes.
fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut said = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            said.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            said.push_str(&format!("; hint: {hint}"));
        }
        return said;
    }
    let mut said = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        said.push_str(&format!(": {s}"));
        source = s.source();
    }
    said
}
