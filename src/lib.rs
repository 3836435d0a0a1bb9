//! sluice: a runtime for agent workflows written in Lua. Every tool call (a
//! "flow") passes one door: decode, validate, envelope, authorize, route,
//! record, execute. ARCHITECTURE.md draws the layers and the door.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = sluice::Runtime::builder().workspace("/tmp/w").build()?;
//! let page = rt.call("read", serde_json::json!({"path": "notes.md"})).await?;
//! println!("{}", page["content"]);
//! # Ok(()) }
//! ```
//!
//! The public surface is what an embedder needs: the [`Runtime`] and its
//! [`RuntimeBuilder`], the errors, the [`manifest`], the audit reader
//! ([`record`]) and the types the builder takes, among them the
//! embedder's own flows ([`embed::CustomFlow`]) and approver
//! ([`policy::Approver`]). Flows, the kernel and the pipeline are private,
//! so nothing outside the crate can run a flow without the pipeline
//! authorizing and recording it:
//!
//! ```compile_fail
//! // The flows are not reachable from outside the crate.
//! let flows = sluice::flows::Registry::standard();
//! ```
//!
//! ```compile_fail
//! // Nor is the pipeline's core, whose door is the only way to a flow.
//! let core: sluice::pipeline::Core = todo!();
//! ```
#![cfg_attr(not(feature = "internals"), warn(missing_docs))]

// Layers from the bottom up (ARCHITECTURE.md; `tests/layers.rs` checks that
// no module imports from a layer above its own).
mod calendar;
mod call;
mod digest;
mod error;
mod interrupt;
mod luastate;

mod credentials;
mod exec;
mod fsops;

mod audit;

mod kernel;

mod container;
mod net;
mod otel;
mod sandbox;

mod model;

mod flows;

mod pipeline;

mod runtime;

#[cfg(feature = "fleet")]
mod fleet;
mod mcp;
mod viewer;

mod cli;

#[cfg(feature = "internals")]
pub mod internals;

pub use call::Tier;
pub use cli::main as cli_main;
pub use error::{ErrorCode, FlowError, FlowResult};
pub use net::dns::{Dns, Lookup};
pub use runtime::{BuildError, BuildErrorKind, Closer, Runtime, RuntimeBuilder, ScriptError};
pub use sandbox::serve_if_asked;
pub use sandbox::Choice as SandboxChoice;

/// The manifest of every flow sluice ships: name, description, tier,
/// capabilities, whether a read-only seat sees it, and its input and output
/// schemas, as `sluice flows --json` prints it.
pub fn manifest() -> serde_json::Value {
    flows::Registry::standard().manifest()
}

/// Where a run's policies come from and who answers their asks: a
/// built-in [`Prompt`](policy::Prompt), or an embedder's own
/// [`Approver`](policy::Approver).
pub mod policy {
    pub use crate::kernel::approval::{Answer, Approver, Ask, Later, Prompt, Shared};
    pub use crate::kernel::policy::Source;
}

/// What an embedding program adds to its runs: its own flows
/// ([`CustomFlow`](embed::CustomFlow), given to `RuntimeBuilder::flow`), which pass the same
/// door as sluice's.
pub mod embed {
    pub use crate::runtime::extend::{CustomFlow, FlowInfo, Granted, Reach};
}

/// The audit reader: a run's record, loaded to replay or resume it, and
/// where a record is ([`Location`](record::Location): a SQLite file or a
/// PostgreSQL database, which `RuntimeBuilder::audit` takes).
pub mod record {
    pub use crate::audit::location::{Location, PgLocation, SslMode};
    pub use crate::audit::open::{for_reading, password, Opened};
    pub use crate::audit::replay::{Mode, Opener, Record, Reopen, RunRecord};
    pub use crate::audit::store::{open_existing, SCHEMA_VERSION};
}
