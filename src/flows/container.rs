//! The container a call reaches ([`Context::container`]). One the policy
//! declares is started on first use with the protections a confined host
//! command gets, derived from the policies as the host sandbox derives them
//! ([`crate::sandbox::Sandbox::withheld`]) and laid over the mounts that
//! bring them in ([`crate::container::declared`]): repositories and the
//! policies' files read-only; the audit store, sluice's credentials and
//! what the policy hides from commands masked. A command there gets the
//! host's guard over the folders its mounts let it write
//! ([`Context::container_guard`]): a repository it makes is removed when it
//! ends.

use super::Context;
use crate::container::{Facts, Protections, Transport};
use crate::error::FlowResult;
use crate::exec;
use crate::sandbox::{outermost, Guard};
use std::path::PathBuf;
use std::sync::Arc;

/// A command made ready to run in a container (`bash`, `shell_command`,
/// the `test` runner): its spec goes through the container's transport, in
/// the container's folder, and its guard settles what it made there.
pub struct Routed {
    /// The container's transport: its name, engine and protections.
    pub transport: Arc<Transport>,
    /// The command as the executor runs it, wrapped for the container.
    pub spec: exec::Spec,
    /// The container folder it runs in, when one was named or declared.
    pub cwd: Option<String>,
    /// What removes the repositories it makes in writable mounts.
    pub guard: Option<Arc<Guard>>,
}

impl Routed {
    /// The container's facts for a command that ended with `exit_code`,
    /// having said `said`: the guard settled first.
    pub fn facts(guard: Option<Arc<Guard>>, t: &Transport, exit_code: i32, said: &str) -> Facts {
        let settled = guard.map(|g| g.settle()).unwrap_or_default();
        Facts::ended(t, settled.parts(), exit_code, said)
    }
}

impl Context {
    /// `req` made ready to run in container `name`, in the container's
    /// folder for `given_cwd` (the caller's own words: relative means under
    /// the container's workdir); only the variables `req` declares cross.
    pub async fn routed(
        &self,
        name: &str,
        mut req: exec::Request,
        given_cwd: Option<&str>,
    ) -> FlowResult<Routed> {
        let transport = self.container(name).await?;
        let cwd = self.containers.folder(name, given_cwd);
        req.wrap = Some(transport.call(req.env.keys().cloned(), cwd.clone()));
        let spec = exec::resolve(req, &self.exec.limits)?;
        let guard = self.container_guard(&transport)?;
        Ok(Routed {
            transport,
            spec,
            cwd,
            guard,
        })
    }

    /// The transport into container `name`, started with the policy's
    /// protections when this run starts it.
    pub async fn container(&self, name: &str) -> FlowResult<Arc<Transport>> {
        self.containers
            .transport(name, |sources| self.protections(sources))
            .await
    }

    /// What removes the repositories a command in `t` makes in the host
    /// folders its mounts let it write, when it ends, as on the host: for
    /// a container the run started; `None` for one it only reaches.
    pub fn container_guard(&self, t: &Transport) -> FlowResult<Option<Arc<Guard>>> {
        let Some(writable) = t.protections.as_ref().map(|p| &p.writable) else {
            return Ok(None);
        };
        if writable.is_empty() {
            return Ok(None);
        }
        let kernel = self.call_gate()?.kernel();
        let guard =
            kernel.with_static(|view| self.sandbox.guard_mounts(view, &self.workspace, writable));
        Ok(Some(Arc::new(guard)))
    }

    /// What a container whose mounts bring in the host paths `sources`
    /// must keep from its commands there: what the policies keep from a
    /// confined command that could write all of them, every repository
    /// whole, and the audit store and sluice's credentials wherever they
    /// are; canonical, existing, and nothing read-only inside what is
    /// hidden.
    fn protections(&self, sources: &[PathBuf]) -> FlowResult<Protections> {
        let kernel = self.call_gate()?.kernel();
        let mounted = outermost(sources.to_vec());
        let withheld =
            kernel.with_static(|view| self.sandbox.withheld(view, &self.workspace, &mounted));
        let mut hidden = withheld.hidden;
        hidden.extend(self.protected.iter().cloned());
        hidden.extend(self.secrets.iter().cloned());
        hidden.extend(
            mounted
                .iter()
                .chain([&self.workspace])
                .map(|base| base.join(".sluice")),
        );
        let hidden = outermost(existing(hidden));
        let mut read_only = withheld.read_only;
        read_only.extend(withheld.repos);
        let read_only = outermost(existing(read_only))
            .into_iter()
            .filter(|r| !hidden.iter().any(|h| r.starts_with(h)))
            .collect();
        Ok(Protections {
            read_only,
            hidden,
            partial: withheld.partial,
        })
    }
}

/// The paths of `paths` that exist, canonical.
fn existing(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths
        .into_iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}
