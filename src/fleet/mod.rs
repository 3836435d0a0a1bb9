//! Runs on a fleet of workers (feature `fleet`): a run is a Temporal
//! workflow whose id is the run id, executed as one heartbeating activity
//! on any `sluice worker`, recorded in a shared PostgreSQL record. When a
//! worker dies, Temporal retries the activity elsewhere and the new worker
//! resumes the run from the record by sluice's own resume rules.
//!
//! - [`bundle`]: what a run carries (its script, arguments and policies,
//!   each by text and SHA-256), checked before a worker runs it;
//! - [`workflow`]: the run's workflow, which holds no I/O;
//! - [`activity`]: one attempt at the run on a worker.

pub mod activity;
pub mod bundle;
pub mod workflow;
