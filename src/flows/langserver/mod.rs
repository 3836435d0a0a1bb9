//! Language servers under policy, shared by the `lsp` flow and the file
//! flows that report diagnostics after a change (`write`, `edit`,
//! `apply_patch`): the operator's declarations (`declare.rs`), the base
//! protocol's framing (`frame.rs`), JSON-RPC with one server
//! (`client.rs`), the run's servers and their lifecycle (`server.rs`),
//! positions and paths (`convert.rs`), and a document's diagnostics
//! (`diagnostics.rs`).

pub mod client;
pub mod convert;
pub mod declare;
pub mod diagnostics;
pub mod frame;
pub mod server;

pub use declare::Declared;
pub use diagnostics::{after_change, Diagnostics};
pub use server::{Server, Servers};
