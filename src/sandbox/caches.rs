//! Private caches for confined commands. Package managers write caches
//! under the user's home (`~/.cache/pip`, `~/.npm`, `~/.cargo/registry`);
//! a command that could write those could poison the user's later builds
//! outside sluice. So a command gets caches of its own, one set per
//! workspace, kept between runs (a second `pip install` is fast), never the
//! user's: `$SLUICE_CACHE_DIR`, else `$XDG_CACHE_HOME/sluice`, else
//! `~/.cache/sluice`, then `workspaces/<name>-<hash>`.

use std::path::{Path, PathBuf};

/// The variables that send each tool to its private cache, and the folder
/// each gets under the workspace's cache.
const TOOLS: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "xdg"),
    ("PIP_CACHE_DIR", "pip"),
    ("npm_config_cache", "npm"),
    // Cargo keeps its registry and git checkouts under CARGO_HOME. A
    // private one also leaves out the user's ~/.cargo/config.toml: a
    // project's own .cargo/config.toml still applies.
    ("CARGO_HOME", "cargo"),
    ("GOMODCACHE", "go-mod"),
];

/// One workspace's private caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caches {
    dir: PathBuf,
}

impl Caches {
    /// Where `workspace`'s caches live; `None` when no home folder, cache
    /// folder or temp folder is known.
    pub fn for_workspace(workspace: &Path) -> Option<Caches> {
        let var = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let root = var("SLUICE_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("sluice")))
            .or_else(|| var("HOME").map(|p| p.join(".cache/sluice")))?;
        let digest = crate::digest::sha256_hex(workspace.as_os_str().as_encoded_bytes());
        let hash = &digest[..16];
        let name = workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into());
        Some(Caches {
            dir: root.join("workspaces").join(format!("{name}-{hash}")),
        })
    }

    /// Makes the caches' folders (0700) and returns the top one.
    pub fn make(&self) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        for (_, sub) in TOOLS {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(self.dir.join(sub))?;
        }
        std::fs::canonicalize(&self.dir)
    }

    /// The variables a command gets, pointing each tool at its cache.
    pub fn env(&self) -> Vec<(String, String)> {
        TOOLS
            .iter()
            .map(|(var, sub)| {
                (
                    var.to_string(),
                    self.dir.join(sub).to_string_lossy().into_owned(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workspace_gets_its_own_caches_and_every_tool_a_folder() {
        let a = Caches::for_workspace(Path::new("/w/one")).unwrap();
        let b = Caches::for_workspace(Path::new("/x/one")).unwrap();
        assert_ne!(a, b);
        let env = a.env();
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "XDG_CACHE_HOME",
                "PIP_CACHE_DIR",
                "npm_config_cache",
                "CARGO_HOME",
                "GOMODCACHE"
            ]
        );
        assert!(env.iter().all(|(_, v)| v.contains("/workspaces/one-")));
    }
}
