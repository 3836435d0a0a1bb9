//! Containers: where the policy's `route` sends a command, and how the
//! host reaches it.
//!
//! - [`engine`]: `podman` or `docker`, and the only host variables their
//!   processes get;
//! - [`check`]: whether an engine starts a container here (`sluice
//!   doctor`), and what to do when it does not;
//! - [`transport`]: a request becomes `ENGINE exec ... NAME sh -lc ...`;
//! - [`declared`]: containers a policy declares and the run starts itself;
//! - [`Containers`]: one run's routes: which names it can reach, the
//!   containers it started (removed when it ends), and the container the
//!   host is sealed to, if any.
//!
//! A command routed into a container runs outside sluice's own sandbox:
//! the container's mounts, not the policy's fs rules, bound what it
//! touches, and its result says so (`enforcement = "partial"`). A container
//! the run starts gets the protections a confined host command gets over
//! its mounts ([`declared::Protections`]: repositories read-only, the audit
//! store and what the policy hides masked, a repository a command makes
//! removed when it ends), and its result lists them; one
//! the run only reaches keeps the mounts it was made with, which its
//! result says too. The transport process runs on the host, but no
//! confined host command can reach the engine's socket or storage.

pub mod check;
pub mod declared;
pub mod engine;
pub mod files;
pub mod transport;

pub use declared::{Declaration, Protections};
pub use engine::Engine;
pub use files::ContainerFiles;
pub use transport::Transport;

/// Whether a command's exit and first words are the engine's own failure
/// (engines exit 125 and say `Error: ...` when they, not the command,
/// failed), not the command's.
pub fn engine_failed(exit_code: i32, said: &str) -> bool {
    exit_code == 125 && said.starts_with("Error")
}

use crate::error::{ErrorCode, FlowError, FlowResult};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Where one call runs, as step 4½ of the pipeline decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Route {
    /// On the host, confined as the run's grants say.
    #[default]
    Host,
    /// In the named container, through its transport.
    Container {
        name: String,
        /// The caller's own `container`, when it asked for one.
        requested: Option<String>,
    },
}

impl Route {
    /// The route as the audit records it.
    pub fn record(&self, engine: Option<&str>) -> Value {
        match self {
            Route::Host => json!({"host": "sandbox"}),
            Route::Container { name, requested } => {
                let mut v = json!({"container": name});
                if let Some(e) = engine {
                    v["engine"] = json!(e);
                }
                if let Some(r) = requested {
                    v["requested"] = json!(r);
                }
                v
            }
        }
    }

    /// The container, when the call runs in one.
    pub fn container(&self) -> Option<&str> {
        match self {
            Route::Host => None,
            Route::Container { name, .. } => Some(name),
        }
    }
}

/// Where a routed command ran, on its result (`sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    /// Always `"container"`.
    pub mode: &'static str,
    pub container: String,
    pub engine: String,
    /// The engine, not sluice, saw the command's file operations.
    pub denied: bool,
    /// Always `"partial"`: sluice's fs rules do not reach inside.
    pub enforcement: &'static str,
    pub partial: Vec<String>,
    /// Whether the run started the container, with the policy's
    /// protections over its mounts (`readOnly`, `hidden`); false for a
    /// container it only reached, which has none of them.
    pub protected: bool,
    /// The container's paths its mounts keep read-only: repositories, the
    /// policies' files, what deny rules keep from writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<String>,
    /// The container's paths masked: the audit store, sluice's
    /// credentials, what deny rules keep from reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// Repositories and git control files the command made in the host
    /// folders the container's mounts bring in, removed when it ended (a
    /// container the run started).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<std::path::PathBuf>,
}

impl Facts {
    /// The facts of a command that ran through `t`.
    pub fn of(t: &Transport) -> Facts {
        let mounts = format!(
            "the command ran in container {}: its mounts and user, not the policy's fs and network rules, bound what it could touch",
            t.name
        );
        let Some(applied) = &t.protections else {
            return Facts {
                partial: vec![format!(
                    "{mounts}; the run did not start container {0}, so none of the policy's protections apply in it (the workspace's .git, the audit store and what the policy hides are as its own mounts leave them)",
                    t.name
                )],
                ..Facts::bare(t, false)
            };
        };
        let mut partial = vec![format!(
            "{mounts}; the run started it with repositories and the policies' files read-only (readOnly) and the audit store and what the policy hides masked (hidden), as they were when it started"
        )];
        partial.extend(applied.partial.iter().cloned());
        Facts {
            partial,
            read_only: applied.read_only.clone(),
            hidden: applied.hidden.clone(),
            ..Facts::bare(t, true)
        }
    }

    /// The facts of a command that ended in `t` with `exit_code` and
    /// `stderr`, whose repositories `reverted` were removed and `kept`
    /// kept though changed (each saying why): a command that met the
    /// run's read-only mounts, or made a repository, was refused a file
    /// operation (`denied`).
    pub fn ended(
        t: &Transport,
        (reverted, kept): (Vec<std::path::PathBuf>, Vec<String>),
        exit_code: i32,
        stderr: &str,
    ) -> Facts {
        let mut facts = Facts::of(t);
        let refused = facts.protected && exit_code != 0 && stderr.contains("Read-only file system");
        facts.partial.extend(kept);
        Facts {
            denied: refused || !reverted.is_empty(),
            reverted,
            ..facts
        }
    }

    fn bare(t: &Transport, protected: bool) -> Facts {
        Facts {
            mode: "container",
            container: t.name.clone(),
            engine: t.engine.kind.clone(),
            denied: false,
            enforcement: "partial",
            partial: Vec::new(),
            protected,
            read_only: Vec::new(),
            hidden: Vec::new(),
            reverted: Vec::new(),
        }
    }
}

/// The container routes of one run.
#[derive(Debug)]
pub struct Containers {
    run_id: String,
    /// `--container-engine`: any named container is reached through it.
    engine: Option<String>,
    declared: BTreeMap<String, Declaration>,
    /// `SLUICE_BASH_CONTAINER`: commands run only there.
    sealed: Option<String>,
    /// `SLUICE_TEST_CWD`: the sealed container's folder for relative paths.
    sealed_cwd: Option<String>,
    /// Transports made so far (declared containers started), by name.
    reached: Mutex<BTreeMap<String, Arc<Transport>>>,
    /// Declared containers this run started, to remove when it ends.
    started: Mutex<Vec<Arc<Transport>>>,
}

impl Containers {
    /// A run with no container route: every routed call is refused.
    pub fn new(run_id: &str) -> Containers {
        Containers {
            run_id: run_id.to_string(),
            engine: None,
            declared: BTreeMap::new(),
            sealed: None,
            sealed_cwd: None,
            reached: Mutex::new(BTreeMap::new()),
            started: Mutex::new(Vec::new()),
        }
    }

    /// Reaches any named container through `kind` (`podman` or `docker`).
    pub fn with_engine(mut self, kind: &str) -> Containers {
        self.engine = Some(kind.to_string());
        self
    }

    /// Containers the run may start itself.
    pub fn with_declared(mut self, declared: BTreeMap<String, Declaration>) -> Containers {
        self.declared = declared;
        self
    }

    /// Seals the host to `name`: commands run there or not at all, and the
    /// file flows act on its files.
    pub fn sealed_to(mut self, name: &str, cwd: Option<String>) -> Containers {
        self.sealed = Some(name.to_string());
        self.sealed_cwd = cwd;
        self
    }

    /// The sealed container's folder for relative paths (`SLUICE_TEST_CWD`).
    pub fn sealed_cwd(&self) -> Option<&str> {
        self.sealed_cwd.as_deref()
    }

    /// The container the host is sealed to.
    pub fn sealed(&self) -> Option<&str> {
        self.sealed.as_deref()
    }

    /// The folder a call into `name` runs in: `given` when absolute, else
    /// under the container's own folder (a declaration's `workdir`, the
    /// sealed host's `SLUICE_TEST_CWD`); `None` leaves it to the container.
    pub fn folder(&self, name: &str, given: Option<&str>) -> Option<String> {
        let base = self
            .declared
            .get(name)
            .and_then(|d| d.workdir.clone())
            .or_else(|| {
                (self.sealed.as_deref() == Some(name))
                    .then(|| self.sealed_cwd.clone())
                    .flatten()
            });
        match (given, base) {
            (Some(g), _) if g.starts_with('/') => Some(g.to_string()),
            (Some(g), Some(b)) => Some(format!("{}/{g}", b.trim_end_matches('/'))),
            (Some(g), None) => Some(format!("/{g}")),
            (None, base) => base,
        }
    }

    /// Whether this run has a way to reach `name`.
    pub fn reaches(&self, name: &str) -> bool {
        self.declared.contains_key(name)
            || self.engine.is_some()
            || self.sealed.as_deref() == Some(name)
    }

    /// The engine kind a call into `name` uses, when known without
    /// starting anything.
    pub fn engine_of(&self, name: &str) -> Option<String> {
        if let Some(t) = lock(&self.reached).get(name) {
            return Some(t.engine.kind.clone());
        }
        self.declared
            .get(name)
            .and_then(|d| d.engine.clone())
            .or_else(|| self.engine.clone())
    }

    /// The transport into `name`, starting it on first use when the policy
    /// declared it, with what `protect` says to keep from its commands in
    /// the host paths its mounts bring in. A run with no route there is
    /// `provider_unavailable`.
    pub async fn transport(
        &self,
        name: &str,
        protect: impl FnOnce(&[std::path::PathBuf]) -> FlowResult<Protections>,
    ) -> FlowResult<Arc<Transport>> {
        if let Some(t) = lock(&self.reached).get(name) {
            return Ok(t.clone());
        }
        let unavailable = |message: String| {
            FlowError::new(ErrorCode::ProviderUnavailable, message).with("container", name)
        };
        let engine = |kind: Option<&str>| match kind {
            Some(k) => Engine::find(k),
            None => Engine::detect(),
        };
        let transport = if let Some(d) = self.declared.get(name) {
            let kind = d.engine.as_deref().or(self.engine.as_deref());
            let engine = engine(kind).map_err(|e| {
                unavailable(format!("container {name}: {e}; the command did not run"))
            })?;
            let protections = protect(&d.sources())?;
            let t = Arc::new(
                d.start(name, engine, &self.run_id, &protections)
                    .await
                    .map_err(|e| unavailable(format!("{e}; the command did not run")))?,
            );
            if !d.keep {
                lock(&self.started).push(t.clone());
            }
            t
        } else if self.reaches(name) {
            let engine = engine(self.engine.as_deref()).map_err(|e| {
                unavailable(format!("container {name}: {e}; the command did not run"))
            })?;
            Arc::new(Transport {
                name: name.to_string(),
                target: name.to_string(),
                engine,
                protections: None,
            })
        } else {
            return Err(no_route(name));
        };
        lock(&self.reached).insert(name.to_string(), transport.clone());
        Ok(transport)
    }

    /// Removes the containers this run started (not those declared with
    /// `keep = true`). Blocking; for the run's end, after Ctrl-C too.
    pub fn shutdown(&self) {
        let started: Vec<_> = lock(&self.started).drain(..).collect();
        for t in started {
            if let Err(e) = declared::remove(&t) {
                eprintln!(
                    "sluice: could not remove container {} ({}): {e}; remove it with `{} rm -f {}`",
                    t.name, t.target, t.engine.kind, t.target
                );
            }
        }
        lock(&self.reached).clear();
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The refusal of a call routed where this run has no transport.
pub fn no_route(name: &str) -> FlowError {
    FlowError::new(
        ErrorCode::ProviderUnavailable,
        format!(
            "this run has no route into container {name:?}: it is not declared in the policy's `containers`, and no engine was chosen (sluice run --container-engine podman|docker); the command did not run. Drop `container` to run on the host, or declare the container"
        ),
    )
    .with("container", name)
    .with("field", "container")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
