//! sluice: a runtime for agent workflows written in Lua. Every tool call (a
//! "flow") passes one door: decode, validate, envelope, authorize, execute.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = sluice::Runtime::builder().workspace("/tmp/w").build()?;
//! let page = rt.call("read", serde_json::json!({"path": "notes.md"})).await?;
//! println!("{}", page["content"]);
//! # Ok(()) }
//! ```

pub mod audit;
pub mod cli;
pub mod credentials;
pub mod error;
pub mod exec;
pub mod flows;
pub mod fsops;
pub mod kernel;
pub mod net;
pub mod pipeline;
pub mod runtime;
pub mod sandbox;

pub use error::{ErrorCode, FlowError, FlowResult};
pub use runtime::{Runtime, RuntimeBuilder, ScriptError};
