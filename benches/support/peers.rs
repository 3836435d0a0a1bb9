//! Where the peer tools the benches and differential tests compare sluice
//! with are installed (`scripts/test` and `scripts/bench` put them there,
//! Codex through `scripts/install-codex`), shared by both, and what to say
//! when one is missing.
// Each includer uses some of these.
#![allow(dead_code)]

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

/// How to install Codex's CLI, when [`codex_binary`] does not exist: the
/// message a bench or test stops with. `None` when it is there.
pub fn codex_missing() -> Option<String> {
    let p = codex_binary();
    (!p.is_file()).then(|| {
        format!(
            "Codex's CLI is not installed ({} is missing): run scripts/install-codex (scripts/bench and \
             scripts/test run it), which needs npm, or `npm install --prefix target/peers --no-audit --no-fund \
             @openai/codex@{CODEX_VERSION}`, or set SLUICE_CODEX_APPLY_PATCH to a codex {CODEX_VERSION} binary",
            p.display()
        )
    })
}

/// The Python MCP client and server package version the MCP tests and
/// bench drive (`scripts/test` and `scripts/bench` install it).
pub const MCP_PYTHON_VERSION: &str = "2.3.0";

/// Where the Python `mcp` package is installed (`pip install --target`):
/// the `PYTHONPATH` of the MCP tests' and bench's Python.
pub fn mcp_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/mcp")
}

/// Whether `python3` imports the `mcp` package from [`mcp_python`]; the
/// message to show (how to install it) when it does not.
pub fn mcp_python_missing() -> Option<String> {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp, mcp_types"])
        .env("PYTHONPATH", mcp_python())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| {
        format!(
            "the Python MCP package is missing: run scripts/test (or scripts/bench), which installs it, or \
             python3 -m pip install --target target/peers/mcp 'mcp=={MCP_PYTHON_VERSION}'"
        )
    })
}
