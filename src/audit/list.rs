//! `sluice audit list`: the newest runs, each with its counts (what
//! `--json` prints; [`super::render`] makes the table).

use super::db::Db;
use super::rows::{self, RunTally};
use serde::Serialize;

/// A line of `sluice audit list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub script: String,
    pub status: String,
    pub calls: i64,
    pub irreversible: i64,
    /// Calls that ended `permission_denied` or `permission_required`.
    pub denials: i64,
    /// Calls whose outcome is unknown (0 while the run is live).
    pub unknown_outcomes: i64,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<i64>,
}

/// The newest runs, and how many there are in all.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub total: i64,
    pub runs: Vec<RunSummary>,
}

impl RunSummary {
    fn of(t: RunTally) -> RunSummary {
        RunSummary {
            // A live run's last call may simply be running.
            unknown_outcomes: if t.status == "running" {
                0
            } else {
                t.unfinished
            },
            duration_ms: t.ended_ms.map(|e| e - t.started_ms),
            id: t.id,
            script: t.script,
            status: t.status,
            calls: t.calls,
            irreversible: t.irreversible,
            denials: t.denials,
            started_ms: t.started_ms,
            ended_ms: t.ended_ms,
        }
    }
}

/// The newest `limit` runs (0: all), newest first, with their counts.
pub fn list(db: &dyn Db, limit: usize) -> Result<Listing, String> {
    let limit = if limit == 0 { -1 } else { limit as i64 };
    let tallies = rows::tallies(db, limit).map_err(rows::db)?;
    let total = rows::run_count(db).map_err(rows::db)?;
    Ok(Listing {
        total,
        runs: tallies.into_iter().map(RunSummary::of).collect(),
    })
}
