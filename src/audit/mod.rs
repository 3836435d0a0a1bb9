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
//! - [`parts`]: inputs whose list items (a model call's `messages`) the
//!   record keeps once each by content, taken apart and put back together;
//! - [`recorder`]: the writer a run records through (a thread of its own);
//!   [`outage`]: what it does while its store cannot be reached;
//! - [`replay`]: a recorded run's calls, answered back in order;
//!   [`sources`]: the script's and its modules' texts a run keeps, so a
//!   replay does not depend on the files;
//! - [`session`]: what one run's calls share of all this (sequence numbers
//!   per task, the halt of a diverged replay);
//! - reading the record (`sluice audit list|show|export|verify`): [`rows`]
//!   holds the SELECTs every reader shares, the replay too; [`list`],
//!   [`show`], [`export`] and [`verify`] build what `--json` prints, and
//!   [`render`] the text; [`follow`] reads a run while it is recorded;
//! - [`anchor`]: the record's head to keep elsewhere, against rollback
//!   (`sluice audit anchor`, `verify --anchor`).

pub mod anchor;
pub mod browse;
pub mod chain;
pub mod copy;
pub mod db;
pub mod export;
pub mod follow;
pub mod lease;
pub mod list;
pub mod location;
pub mod open;
pub mod outage;
mod parts;
pub mod postgres;
pub mod recorder;
pub mod redact;
pub mod render;
pub mod replay;
mod rows;
pub mod session;
pub mod show;
pub mod sources;
mod sqlite;
pub mod store;
pub mod verify;

#[cfg(test)]
mod conversation_attack_tests;
#[cfg(test)]
mod conversation_tests;
#[cfg(test)]
mod fixtures;

use serde_json::Value;
use std::path::Path;

/// What the record needs to know of the flows, which sit above it: the
/// flows' registry answers, so the audit names no flow itself.
pub trait FlowFacts {
    /// The one-line gist of an input of `flow` (the path it reads, the
    /// command it runs); `None` for a name that is no flow (a job
    /// operation), whose input is shown as its JSON.
    fn summary(&self, flow: &str, input: &Value) -> Option<String>;

    /// Whether a call of `flow` may start a background job, whose id its
    /// output carries.
    fn starts_jobs(&self, flow: &str) -> bool;

    /// The plan a call of `flow` with `input` set, when it sets one
    /// (`update_plan`'s input: `{explanation, plan = {{step, status}}}`):
    /// `sluice audit show` shows the run's latest.
    fn plan<'a>(&self, _flow: &str, _input: &'a Value) -> Option<&'a Value> {
        None
    }
}

/// The environment variable that names the audit database.
pub const ENV_AUDIT: &str = "SLUICE_AUDIT";

/// The record a command uses: `--audit PATH|URL`, else `$SLUICE_AUDIT`,
/// else the workspace's `.sluice/audit.db`. A path or `sqlite:PATH` is a
/// SQLite file, `postgres://user@host:port/db` a PostgreSQL database.
pub fn locate(flag: Option<&str>, workspace: &Path) -> Result<location::Location, String> {
    if let Some(given) = flag {
        return location::Location::parse(given).map_err(|e| format!("--audit: {e}"));
    }
    match std::env::var(ENV_AUDIT) {
        Ok(v) if !v.is_empty() => {
            location::Location::parse(&v).map_err(|e| format!("{ENV_AUDIT}: {e}"))
        }
        _ => Ok(location::Location::Sqlite(store::default_path(workspace))),
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
