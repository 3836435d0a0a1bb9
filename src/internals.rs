//! Internal types, for sluice's own tests and benches (feature
//! `internals`, which only the dev-dependency turns on). Not a stable API.
//! Nothing here runs a flow: the flows, the registry, the gate that mints
//! the proof a flow needs, and the pipeline are never exposed, so the one
//! door holds with this feature on too.

/// The permission kernel: capabilities, policies, patterns, approvals.
pub mod kernel {
    pub use crate::call::{Action, Capability};
    pub use crate::kernel::Kernel;
    pub use crate::kernel::{approval, pattern, policy};
}

/// The record's hash chain and store.
pub mod audit {
    pub use crate::audit::{chain, db, location, postgres, store};
}

/// How commands are confined.
pub mod sandbox {
    pub use crate::sandbox::{derive, Choice, Enforcement, Profile, Sandbox};
}

/// The HTML renderer behind `webfetch`.
pub mod html {
    pub use crate::flows::webfetch::html::to_markdown;
}

/// Dates as the search providers write them.
pub mod search {
    pub use crate::net::search::rfc3339;
}

/// The limits `read` pages by.
pub mod read {
    pub use crate::flows::read::PAGE_BYTES;
    pub use crate::fsops::MAX_FILE_BYTES;
}

/// The record's content hash.
pub mod digest {
    pub use crate::digest::sha256_hex;
}

/// The test runners' report parsers behind the `test` flow.
pub mod test_reports {
    pub use crate::flows::test::report::{parse, Failure, Parsed, Report};
}

/// How much of an overflowing stream is kept in its spill file.
pub mod exec {
    pub use crate::exec::DEFAULT_SPILL_CAP;
}
