//! The workflow of a fleet run, as Temporal runs it: no I/O, only the
//! decisions. It runs the run's activity ([`super::activity`]) until the
//! run ends; Temporal retries the activity on another worker when one dies
//! or stops heartbeating, and the next attempt resumes the run from the
//! shared record.

use super::activity::{Attempt, FleetActivities, Outcome};
use super::bundle::Bundle;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ActivityOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

/// What a submit starts a run's workflow with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submitted {
    pub bundle: Bundle,
    /// How long a worker may go silent before its run is taken elsewhere.
    pub heartbeat_timeout_ms: u64,
}

/// A run on the fleet.
#[workflow]
pub struct SluiceRun {
    submitted: Submitted,
}

#[workflow_methods]
impl SluiceRun {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, submitted: Submitted) -> Self {
        SluiceRun { submitted }
    }

    /// Runs the run's activity until the run ends.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<Outcome> {
        let submitted = ctx.state(|s| s.submitted.clone());
        let heartbeat = Duration::from_millis(submitted.heartbeat_timeout_ms);
        let options =
            ActivityOptions::with_start_to_close_timeout(Duration::from_secs(30 * 24 * 3600))
                .heartbeat_timeout(heartbeat)
                .build();
        let attempt = Attempt {
            bundle: submitted.bundle,
            heartbeat_timeout_ms: submitted.heartbeat_timeout_ms,
        };
        let outcome = ctx
            .execute_activity(FleetActivities::run_attempt, attempt, options)
            .await?;
        Ok(outcome)
    }
}
