//! Containers a run starts itself, declared by a policy:
//!
//! ```lua
//! containers = { box = { image = "localhost/app", engine = "podman",
//!   mounts = {"${workspace}:/srv"}, workdir = "/srv", network = "none",
//!   env = {LANG = "C.UTF-8"}, keep = false } }
//! ```
//!
//! The first call routed to `box` starts it (`run -d`, labelled with the
//! run, the run id in its name), later calls reuse it, and the run removes
//! it when it ends, after Ctrl-C too, unless `keep = true`.

use super::engine::Engine;
use super::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

/// One declared container, as the policy wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    pub image: String,
    pub engine: Option<String>,
    #[serde(default)]
    pub mounts: Vec<String>,
    pub workdir: Option<String>,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub keep: bool,
}

/// A declared container's network: none unless the policy says `host`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    #[default]
    None,
    Host,
}

/// How long starting a container may take (an image already here).
const START_LIMIT: Duration = Duration::from_secs(120);

/// What keeps a declared container alive: its image's command may exit at
/// once, so the container runs a shell that waits until it is stopped.
const IDLE: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

/// A name the engines accept, and that reads as one word in a policy.
pub fn valid_name(name: &str) -> bool {
    crate::kernel::policy::container_name(name)
}

impl Declaration {
    /// Reads `containers.NAME` of policy `policy`, naming the bad field.
    pub fn parse(
        policy: &str,
        name: &str,
        value: &Value,
        workspace: &Path,
    ) -> Result<Declaration, String> {
        let at = format!("policy {policy}: containers.{name}");
        if !valid_name(name) {
            return Err(format!("{at}: a container's name is letters, digits, '_', '.' and '-', starting with a letter or digit"));
        }
        let mut d: Declaration = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { String::new() } else { format!(".{path}") };
            format!("{at}{field}: {}; a declaration is {{image = \"...\", engine = \"podman\"|\"docker\", mounts = {{\"HOST:CONTAINER\"}}, workdir = \"/srv\", network = \"none\"|\"host\", env = {{K = \"v\"}}, keep = false}}", e.inner())
        })?;
        if d.image.is_empty() {
            return Err(format!(
                "{at}.image is empty; name the image to start, e.g. \"localhost/app:latest\""
            ));
        }
        if let Some(engine) = &d.engine {
            if !super::engine::KINDS.contains(&engine.as_str()) {
                return Err(format!(
                    "{at}.engine is {engine:?}; it is \"podman\" or \"docker\""
                ));
            }
        }
        for (i, m) in d.mounts.iter_mut().enumerate() {
            *m = expand(m, workspace);
            let parts: Vec<&str> = m.split(':').collect();
            if !(2..=3).contains(&parts.len())
                || !parts[0].starts_with('/')
                || !parts[1].starts_with('/')
            {
                return Err(format!("{at}.mounts[{}] is {m:?}; a mount is \"HOST:CONTAINER\" or \"HOST:CONTAINER:ro\", both absolute (${{workspace}} and ~ are expanded)", i + 1));
            }
        }
        if let Some(k) = d.env.keys().find(|k| !crate::exec::env::is_shell_name(k)) {
            return Err(format!(
                "{at}.env.{k}: not a POSIX shell name ([A-Za-z_][A-Za-z0-9_]*)"
            ));
        }
        if d.workdir.as_ref().is_some_and(|w| !w.starts_with('/')) {
            return Err(format!(
                "{at}.workdir must be an absolute path inside the container, e.g. \"/srv\""
            ));
        }
        Ok(d)
    }

    /// Starts the container for run `run_id` and returns its transport.
    pub async fn start(
        &self,
        name: &str,
        engine: Engine,
        run_id: &str,
    ) -> Result<Transport, String> {
        let target = format!("sluice-{}-{name}", short(run_id));
        let mut args: Vec<OsString> = ["run", "-d", "--name", &target]
            .iter()
            .map(OsString::from)
            .collect();
        args.extend(["--label".into(), format!("sluice.run={run_id}").into()]);
        args.extend(["--label".into(), format!("sluice.container={name}").into()]);
        let network = match self.network {
            Network::None => "none",
            Network::Host => "host",
        };
        args.extend(["--network".into(), network.into()]);
        for m in &self.mounts {
            args.extend(["-v".into(), m.into()]);
        }
        if let Some(w) = &self.workdir {
            args.extend(["-w".into(), w.into()]);
        }
        // Values travel in the engine's environment, not its argv.
        for k in self.env.keys() {
            args.extend(["-e".into(), k.into()]);
        }
        args.extend([
            self.image.clone().into(),
            "sh".into(),
            "-c".into(),
            IDLE.into(),
        ]);
        let env = self.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let out = engine.output(&args, env, None, START_LIMIT).await?;
        if !out.status.success() {
            return Err(format!(
                "{} could not start container {name} from image {}: {}",
                engine.kind,
                self.image,
                super::engine::said(&out)
            ));
        }
        Ok(Transport {
            name: name.to_string(),
            target,
            engine,
        })
    }
}

/// Removes a container the run started; what the engine said when it
/// could not.
pub fn remove(t: &Transport) -> Result<(), String> {
    // podman would wait 10 s for the idle shell to stop; docker kills.
    let mut args: Vec<OsString> = vec!["rm".into(), "-f".into()];
    if t.engine.kind == "podman" {
        args.extend(["-t".into(), "0".into()]);
    }
    args.push(t.target.clone().into());
    let out = t.engine.output_blocking(&args, START_LIMIT)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(super::engine::said(&out))
    }
}

/// The run id as a container name's part: its characters the engines
/// accept.
fn short(run_id: &str) -> String {
    run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn expand(text: &str, workspace: &Path) -> String {
    let text = text.replace("${workspace}", &workspace.to_string_lossy());
    match (text.strip_prefix('~'), std::env::var("HOME")) {
        (Some(rest), Ok(home)) if rest.is_empty() || rest.starts_with('/') => {
            format!("{home}{rest}")
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Declaration, String> {
        Declaration::parse("p.lua", "box", &v, Path::new("/w"))
    }

    #[test]
    fn a_declaration_expands_the_workspace_in_mounts() {
        let d = parse(json!({"image": "img", "mounts": ["${workspace}:/srv"], "network": "host"}))
            .unwrap();
        assert_eq!(d.mounts, ["/w:/srv"]);
        assert_eq!(d.network, Network::Host);
        assert!(!d.keep);
    }

    #[test]
    fn bad_fields_are_named() {
        let e = parse(json!({"image": "img", "network": "bridge"})).unwrap_err();
        assert!(
            e.starts_with("policy p.lua: containers.box.network: unknown variant `bridge`"),
            "{e}"
        );
        let e = parse(json!({"image": "img", "mount": []})).unwrap_err();
        assert!(e.contains("unknown field `mount`"), "{e}");
        let e = parse(json!({"image": "img", "mounts": ["relative:/srv"]})).unwrap_err();
        assert!(
            e.contains("containers.box.mounts[1] is \"relative:/srv\""),
            "{e}"
        );
        let e = parse(json!({"image": "img", "engine": "lxc"})).unwrap_err();
        assert!(e.contains("containers.box.engine is \"lxc\""), "{e}");
        let e = parse(json!({"engine": "podman"})).unwrap_err();
        assert!(e.contains("missing field `image`"), "{e}");
        let e =
            Declaration::parse("p.lua", "-x", &json!({"image": "i"}), Path::new("/w")).unwrap_err();
        assert!(e.contains("a container's name is"), "{e}");
    }
}
