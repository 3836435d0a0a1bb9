//! The audit trail: a SQLite record of every run and every flow call, hash
//! chained so tampering shows, and the replay that re-runs a script against
//! it.
//!
//! - [`store`]: where the database lives, what is refused as one, its
//!   schema and migrations, and where a new run joins the chain of runs;
//! - [`chain`]: the hashes that make the record tamper-evident, each run's
//!   and the runs' to each other;
//! - [`redact`]: what never reaches the database (credential-shaped env
//!   entries, secret headers, named credentials) and capping of large outputs;
//! - [`recorder`]: the writer a run records through (a thread of its own);
//! - [`replay`]: a recorded run's calls, answered back in order;
//! - [`session`]: what one run's calls share of all this (sequence numbers
//!   per task, the halt of a diverged replay);
//! - [`query`]: reading the record (`sluice audit list|show|export|verify`);
//! - [`anchor`]: the record's head to keep elsewhere, against rollback
//!   (`sluice audit anchor`, `verify --anchor`).

pub mod anchor;
pub mod chain;
pub mod query;
pub mod recorder;
pub mod redact;
pub mod replay;
pub mod session;
pub mod store;

use std::path::{Path, PathBuf};

/// The environment variable that names the audit database.
pub const ENV_AUDIT: &str = "SLUICE_AUDIT";

/// The database a command uses: `--audit PATH`, else `$SLUICE_AUDIT`, else
/// the workspace's `.sluice/audit.db`.
pub fn locate(flag: Option<&Path>, workspace: &Path) -> PathBuf {
    if let Some(path) = flag {
        return path.to_path_buf();
    }
    match std::env::var_os(ENV_AUDIT) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => store::default_path(workspace),
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
