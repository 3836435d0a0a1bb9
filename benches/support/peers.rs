//! Where the peer tools the benches and differential tests compare sluice
//! with are installed (`scripts/test` puts them there), shared by both.

use std::path::{Path, PathBuf};

/// The Codex CLI version the apply_patch comparisons are pinned to.
pub const CODEX_VERSION: &str = "0.171.0";

/// Codex's native binary: `$SLUICE_CODEX_APPLY_PATCH`, else the one npm
/// installed under `target/peers`. It may not exist; callers say how to
/// install it.
pub fn codex_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_CODEX_APPLY_PATCH") {
        return PathBuf::from(p);
    }
    let (pkg, triple) = match std::env::consts::ARCH {
        "aarch64" => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        _ => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/peers/node_modules/@openai")
        .join(pkg)
        .join("vendor")
        .join(triple)
        .join("bin/codex")
}
