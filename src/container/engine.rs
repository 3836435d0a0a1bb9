//! The container engine a transport drives: `podman` or `docker`, found
//! on sluice's own PATH (never the command's), and the only host variables
//! its process receives.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The engine's own variables: the transport process gets these from the
/// host environment and nothing else, so a rootless or remote engine is
/// still reached while no credential or loader variable of sluice's
/// configures it.
pub const ENGINE_VARS: [&str; 7] = [
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "CONTAINER_HOST",
    "CONTAINERS_CONF",
];

/// The engines a transport speaks to; both take the `docker exec` form.
pub const KINDS: [&str; 2] = ["podman", "docker"];

/// One engine, resolved to the program the host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    /// `podman` or `docker`.
    pub kind: String,
    /// Its absolute path, from sluice's own PATH.
    pub program: PathBuf,
}

impl Engine {
    /// Finds `kind` (`podman` or `docker`) on sluice's PATH.
    pub fn find(kind: &str) -> Result<Engine, String> {
        if !KINDS.contains(&kind) {
            return Err(format!(
                "container engine {kind:?} is not one sluice drives; use \"podman\" or \"docker\""
            ));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(kind))
            .find(|p| is_executable(p))
            .map(|program| Engine {
                kind: kind.to_string(),
                program,
            })
            .ok_or_else(|| {
                format!(
                    "container engine {kind} is not installed (not found on sluice's PATH); install it, or choose the other engine with --container-engine"
                )
            })
    }

    /// The first engine installed here, podman before docker.
    pub fn detect() -> Result<Engine, String> {
        KINDS.iter().find_map(|k| Engine::find(k).ok()).ok_or_else(|| {
            "no container engine is installed (neither podman nor docker is on sluice's PATH); install one".to_string()
        })
    }

    /// The environment of every process of this engine's: [`ENGINE_VARS`]
    /// from sluice's own, then `extra`.
    pub fn env(
        &self,
        extra: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = ENGINE_VARS
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v)))
            .collect();
        env.extend(extra);
        env
    }

    /// `ENGINE args...` in `/`, with the engine's environment and `env`,
    /// stdin closed and both outputs piped.
    fn command(&self, args: &[OsString], env: Vec<(OsString, OsString)>) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(args)
            .current_dir("/")
            .env_clear()
            .envs(self.env(env))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `ENGINE args...` to its end (at most `limit`), with `stdin`
    /// written to it; its output, or why it could not run.
    pub async fn output(
        &self,
        args: &[OsString],
        env: Vec<(OsString, OsString)>,
        stdin: Option<&[u8]>,
        limit: Duration,
    ) -> Result<std::process::Output, String> {
        let mut cmd = self.command(args, env);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        if let (Some(mut w), Some(bytes)) = (child.stdin.take(), stdin) {
            let bytes = bytes.to_vec();
            tokio::spawn(async move {
                let _ = w.write_all(&bytes).await;
                let _ = w.shutdown().await;
            });
        }
        match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(out) => out.map_err(|e| format!("{} failed: {e}", self.kind)),
            Err(_) => Err(format!(
                "{} did not answer within {} s",
                self.kind,
                limit.as_secs()
            )),
        }
    }

    /// [`Engine::output`] for a thread that cannot await (a stop, the
    /// run's end).
    pub fn output_blocking(
        &self,
        args: &[OsString],
        limit: Duration,
    ) -> Result<std::process::Output, String> {
        let mut child = self
            .command(args, Vec::new())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        let deadline = std::time::Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return child.wait_with_output().map_err(|e| e.to_string()),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "{} did not answer within {} s",
                        self.kind,
                        limit.as_secs()
                    ));
                }
            }
        }
    }
}

/// The engine's own words from a failed run: its stderr, trimmed to the
/// first lines.
pub fn said(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let text = text.trim();
    let lines: Vec<&str> = text.lines().take(4).collect();
    if lines.is_empty() {
        format!("exit status {}", out.status.code().unwrap_or(-1))
    } else {
        lines.join("; ")
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether engine `kind` answers here (`ENGINE ps` succeeds): the engine
/// and its program and version, or why not, in its own words. For `sluice
/// doctor`, which then starts a container with it ([`super::check`]).
pub fn probe(kind: &str) -> Result<(Engine, String), String> {
    let engine = Engine::find(kind)?;
    let limit = Duration::from_secs(20);
    let version = engine.output_blocking(&["--version".into()], limit)?;
    let ps = engine.output_blocking(&["ps".into(), "-q".into()], limit)?;
    if !ps.status.success() {
        return Err(format!(
            "{} is installed but `{kind} ps` failed: {}",
            engine.program.display(),
            said(&ps)
        ));
    }
    let version = String::from_utf8_lossy(&version.stdout);
    let what = format!("{} ({})", engine.program.display(), version.trim());
    Ok((engine, what))
}
