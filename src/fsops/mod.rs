//! Filesystem services under the file flows: resolving a user's path against
//! the workspace, opening what the policy checked without following a link
//! (`checked`), loading a file as text, the sibling-directory lock protocol,
//! and atomic replacement. Flows touch files only through these.

pub mod atomic;
pub mod checked;
pub mod lock;
pub mod path;
pub mod text;

pub use path::Target;

/// Files larger than this are refused whole (`response_too_large`).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
