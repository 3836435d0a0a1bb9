//! Reading a run that may still be being recorded, one call at a time
//! (the OpenTelemetry export, and its live reader beside a run): the run
//! as it stands, and the calls from a chain position on, so a reader that
//! follows a run never reads again the ones it has already seen.

use super::db::Db;
use super::rows;
use super::show::{Call, Run};

/// Run `run_id` as the record holds it now.
pub fn run(db: &dyn Db, run_id: &str) -> Result<Run, String> {
    Ok(Run::of(&rows::load_run(db, run_id)?))
}

/// Hands `f` each call of run `run_id` from chain position `from` on, in
/// chain order. While the run is `live`, only calls whose outcome is
/// written; once it has ended, every one (a call without an outcome then
/// has an unknown one).
pub fn calls_from(
    db: &dyn Db,
    run_id: &str,
    from: i64,
    live: bool,
    f: &mut dyn FnMut(Call) -> Result<(), String>,
) -> Result<(), String> {
    rows::each_call_from(db, run_id, from, live, rows::db, |c| f(Call::of(&c, live)))
}
