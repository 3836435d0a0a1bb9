//! The HTTP transport's bearer token: there always is one. The operator's
//! (`--token`, `SLUICE_MCP_TOKEN`), or one generated at start, shown once
//! on standard error and kept in a file only the user can read, in a
//! folder the run withholds from its own commands and flows
//! ([`crate::runtime::RuntimeBuilder::withheld`]): a command the run
//! starts cannot read it, so it cannot call the server it runs under.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where generated tokens are kept: `$XDG_RUNTIME_DIR/sluice/mcp` (a
/// folder of the user's alone that the system empties at logout), else
/// `$XDG_STATE_HOME/sluice/mcp`, else `~/.local/state/sluice/mcp`.
pub fn folder() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = env("XDG_RUNTIME_DIR")
        .filter(|d| d.is_dir())
        .or_else(|| env("XDG_STATE_HOME"))
        .or_else(|| env("HOME").map(|h| h.join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("sluice/mcp")
}

/// Makes [`folder`] (mode 0700), so that its real path is known when the
/// run is built; the folder.
pub fn prepare() -> Result<PathBuf, String> {
    let dir = folder();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| format!("cannot make {} for the HTTP token: {e}", dir.display()))?;
    Ok(dir)
}

/// 256 random bits as hex.
pub fn generate() -> String {
    format!(
        "{}{}",
        super::asks::unguessable(),
        super::asks::unguessable()
    )
}

/// Writes `token` to `dir/ADDR-PORT.token`, mode 0600, replacing what a
/// server on that address left; the file.
pub fn keep(dir: &Path, addr: SocketAddr, token: &str) -> Result<PathBuf, String> {
    let file = dir.join(format!("{}-{}.token", addr.ip(), addr.port()));
    let _ = std::fs::remove_file(&file);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| writeln!(f, "{token}"))
        .map_err(|e| format!("cannot write the HTTP token to {}: {e}", file.display()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_is_kept_for_its_user_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (generate(), generate());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        let addr: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let file = keep(dir.path(), addr, &a).unwrap();
        assert_eq!(file, dir.path().join("127.0.0.1-8765.token"));
        let again = keep(dir.path(), addr, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&again).unwrap(), format!("{b}\n"));
        let mode = std::fs::metadata(&again).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
