//! The transport: a request becomes the argv the host spawns,
//!
//! ```text
//! ENGINE exec -i [--workdir=CWD] [-e SLUICE_CONTAINER_ENV_KEY ...] -e SLUICE_CONTAINER_CALL NAME \
//!     sh -lc 'export KEY="$SLUICE_CONTAINER_ENV_KEY"; unset ...; "$@"; ...' sh ARGV...
//! ```
//!
//! - Always a login shell: images activate the project's interpreter from
//!   `/etc/profile.d`, which a program `exec` starts directly never sees.
//! - Each `env` entry reaches the host child as `SLUICE_CONTAINER_ENV_KEY`
//!   and is renamed to `KEY` inside, so a requested `PATH` or `LD_PRELOAD`
//!   never configures the host's engine process.
//! - The argv runs as the script's arguments (`"$@"`), never spliced into
//!   its text: nothing of the command is quoted or parsed twice.
//! - Every process of the call inside the container carries
//!   `SLUICE_CONTAINER_CALL=TOKEN` (a fixed-length token, so none is a
//!   prefix of another): a stop finds them all in `/proc`, whatever group or
//!   session they moved to, because a signal to the host's `exec` client
//!   does not reach them. The same sweep ends what the command left running
//!   when it exits.

use super::engine::Engine;
use crate::exec::{Remote, Wrap};
use nix::sys::signal::Signal;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The prefix under which a command's `env` entries cross the host.
pub const ENV_PREFIX: &str = "SLUICE_CONTAINER_ENV_";

/// The variable that marks every process of one call inside a container.
pub const CALL_VAR: &str = "SLUICE_CONTAINER_CALL";

/// The managed facts a routed command still gets, under their own names.
const MANAGED: [&str; 2] = ["SLUICE_RUN_ID", "SLUICE_CALL_SEQ"];

/// How long a stop may take inside the container.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// One container a run can reach.
#[derive(Debug)]
pub struct Transport {
    /// The name the policy and the caller use.
    pub name: String,
    /// The engine's name for it (a declared container's carries the run).
    pub target: String,
    pub engine: Engine,
    /// What the run laid over its mounts when it started it; `None` for a
    /// container it only reached, whose mounts it did not choose.
    pub protections: Option<super::declared::Applied>,
}

impl Transport {
    /// The engine could not run `what` ("the command", "the tests") in
    /// this container: `provider_unavailable`, in the engine's own words,
    /// with how to check it.
    pub fn failed(&self, said: &str, what: &str) -> crate::error::FlowError {
        crate::error::FlowError::new(
            crate::error::ErrorCode::ProviderUnavailable,
            format!(
                "{} could not run {what} in container {}: {said}; the command did not run. Check that the container exists and is running (`{} ps`)",
                self.engine.kind, self.name, self.engine.kind
            ),
        )
        .with("container", self.name.clone())
        .with("engine", self.engine.kind.clone())
    }

    /// The wrapper of one call whose `env` declares `keys`, run in folder
    /// `cwd` of the container (`None`: the container's own).
    pub fn call(
        self: &Arc<Self>,
        keys: impl IntoIterator<Item = String>,
        cwd: Option<String>,
    ) -> Arc<Call> {
        let mut keys: BTreeSet<String> = keys.into_iter().collect();
        keys.extend(MANAGED.iter().map(|k| k.to_string()));
        Arc::new(Call {
            transport: self.clone(),
            keys,
            cwd,
            token: token(),
        })
    }

    /// `exec -i TARGET args...`: the transport's argv for a helper program
    /// (the file flows' `cat`, `stat`, `find`), run without a login shell.
    pub fn exec_args(&self, args: &[&str]) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["exec".into(), "-i".into(), self.target.clone().into()];
        argv.extend(args.iter().map(OsString::from));
        argv
    }

    /// Signals every process of the call `token` inside the container.
    fn stop(&self, token: &str, sig: Signal) {
        let script = sweep(&format!("{CALL_VAR}={token}"), sig);
        let args = self.exec_args(&["sh", "-c", &script]);
        // A container that is gone has nothing left to stop.
        let _ = self.engine.output_blocking(&args, STOP_LIMIT);
    }
}

/// A shell loop that sends `sig` to every process whose environment holds
/// `marker`, but the shell running it. It looks twice: a process that
/// forked while the first look went by, or was in the middle of an `exec`
/// (when its environment reads empty), is found by the second.
fn sweep(marker: &str, sig: Signal) -> String {
    let name = sig.as_str().trim_start_matches("SIG");
    format!(
        "for look in 1 2; do for f in $(grep -lsF '{marker}' /proc/[0-9]*/environ 2>/dev/null); do \
         p=${{f#/proc/}}; p=${{p%/environ}}; [ \"$p\" = \"$$\" ] || kill -{name} \"$p\" 2>/dev/null; done; done"
    )
}

/// A fixed-length token no other call of this host shares.
fn token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!(
        "{}:{}:{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    crate::digest::sha256_hex(seed.as_bytes())[..24].to_string()
}

/// One routed call: the [`Wrap`] that carries its argv into the container.
#[derive(Debug)]
pub struct Call {
    transport: Arc<Transport>,
    /// The names renamed inside: the caller's `env`, and the managed facts.
    keys: BTreeSet<String>,
    cwd: Option<String>,
    token: String,
}

impl Call {
    /// The login shell's program: the renames, the command, then the sweep
    /// of what the command left running.
    fn script(&self) -> String {
        let mut s = String::new();
        for k in &self.keys {
            // Names are POSIX shell names (validated), safe in the text.
            s += &format!("if [ -n \"${{{ENV_PREFIX}{k}+x}}\" ]; then export {k}=\"${ENV_PREFIX}{k}\"; unset {ENV_PREFIX}{k}; fi; ");
        }
        s += "\"$@\"; s=$?; ";
        s += &sweep(&format!("{CALL_VAR}={}", self.token), Signal::SIGKILL);
        s += "; exit $s";
        s
    }
}

impl Wrap for Call {
    /// The host's folder is not the container's: the call's own `cwd` is.
    fn wrap(&self, argv: Vec<OsString>, _host_cwd: &Path) -> Result<Vec<OsString>, String> {
        let t = &self.transport;
        let mut out: Vec<OsString> =
            vec![t.engine.program.clone().into(), "exec".into(), "-i".into()];
        // One word, so no folder name can read as an option of the engine's.
        if let Some(cwd) = &self.cwd {
            out.push(format!("--workdir={cwd}").into());
        }
        for k in &self.keys {
            out.push("-e".into());
            out.push(format!("{ENV_PREFIX}{k}").into());
        }
        out.push("-e".into());
        out.push(CALL_VAR.into());
        out.push(t.target.clone().into());
        out.extend(["sh".into(), "-lc".into(), self.script().into(), "sh".into()]);
        out.extend(argv);
        Ok(out)
    }

    fn remote(&self, resolved: &[(OsString, OsString)]) -> Option<Remote> {
        let carried = resolved.iter().filter_map(|(k, v)| {
            let k = k.to_str()?;
            self.keys
                .contains(k)
                .then(|| (OsString::from(format!("{ENV_PREFIX}{k}")), v.clone()))
        });
        let mut extra: Vec<(OsString, OsString)> = carried.collect();
        extra.push((CALL_VAR.into(), self.token.clone().into()));
        let (transport, token) = (self.transport.clone(), self.token.clone());
        Some(Remote {
            env: self.transport.engine.env(extra),
            host_cwd: PathBuf::from("/"),
            stop: Arc::new(move |sig| transport.stop(&token, sig)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> Arc<Transport> {
        Arc::new(Transport {
            name: "box".into(),
            target: "sluice-r1-box".into(),
            engine: Engine {
                kind: "podman".into(),
                program: "/usr/bin/podman".into(),
            },
            protections: None,
        })
    }

    #[test]
    fn the_argv_is_exec_with_renamed_env_and_a_login_shell() {
        let call = transport().call(["PATH".to_string()], Some("/srv".into()));
        let argv = call
            .wrap(
                vec!["/bin/sh".into(), "-c".into(), "echo hi".into()],
                Path::new("/srv"),
            )
            .unwrap();
        let argv: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            &argv[..4],
            ["/usr/bin/podman", "exec", "-i", "--workdir=/srv"]
        );
        let name_at = argv.iter().position(|a| a == "sluice-r1-box").unwrap();
        let flags: Vec<&str> = argv[4..name_at].iter().map(String::as_str).collect();
        assert_eq!(
            flags,
            [
                "-e",
                "SLUICE_CONTAINER_ENV_PATH",
                "-e",
                "SLUICE_CONTAINER_ENV_SLUICE_CALL_SEQ",
                "-e",
                "SLUICE_CONTAINER_ENV_SLUICE_RUN_ID",
                "-e",
                "SLUICE_CONTAINER_CALL"
            ]
        );
        assert_eq!(argv[name_at + 1..name_at + 3], ["sh", "-lc"]);
        assert!(argv[name_at + 3].contains("export PATH=\"$SLUICE_CONTAINER_ENV_PATH\""));
        assert_eq!(argv[name_at + 4..], ["sh", "/bin/sh", "-c", "echo hi"]);
    }

    #[test]
    fn the_host_child_gets_engine_variables_and_the_renamed_entries_only() {
        let call = transport().call(["LD_PRELOAD".to_string()], None);
        let resolved: Vec<(OsString, OsString)> = [
            ("PATH", "/evil"),
            ("LD_PRELOAD", "/x.so"),
            ("HOME", "/root"),
        ]
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let remote = call.remote(&resolved).unwrap();
        let names: Vec<String> = remote
            .env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(
            names.contains(&"SLUICE_CONTAINER_ENV_LD_PRELOAD".to_string()),
            "{names:?}"
        );
        for absent in ["PATH", "LD_PRELOAD", "HOME", "SLUICE_CONTAINER_ENV_PATH"] {
            assert!(
                !names.contains(&absent.to_string()),
                "{absent} in {names:?}"
            );
        }
        for n in &names {
            assert!(
                super::super::engine::ENGINE_VARS.contains(&n.as_str())
                    || n.starts_with("SLUICE_CONTAINER_"),
                "{n} reached the engine"
            );
        }
    }

    #[test]
    fn tokens_have_one_length_so_none_is_a_prefix_of_another() {
        let (a, b) = (token(), token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 24);
        assert_eq!(b.len(), 24);
    }
}
