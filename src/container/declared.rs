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
//!
//! The run chooses its mounts, so it gives them the protections a confined
//! host command gets ([`Protections`], derived by the run from the
//! policies): over each mount that brings them in, repositories and the
//! policies' files are mounted again read-only, and the audit store,
//! sluice's credentials and what the policy hides from commands are masked
//! (an empty read-only folder, or `/dev/null` over a file). Every folder
//! between a writable mount's root and a protected path is bound over
//! itself (pinned), as bubblewrap does on the host: a mount point cannot be
//! renamed (`EBUSY`), so no command can move a protected path away with
//! its folder and put a writable copy by its name. The container is checked
//! from inside before its first command runs: a protection or pin that is
//! not a mount where it was laid removes it again.

use super::engine::Engine;
use super::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
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

/// What a container the run starts keeps from its commands: host paths,
/// canonical and existing, none inside another of its list and none
/// read-only inside a hidden one, as the run derives them from the
/// policies for a confined command ([`Declaration::sources`] says where).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protections {
    /// Mounted again read-only: repositories, the policies' files, what
    /// deny rules keep from writes.
    pub read_only: Vec<PathBuf>,
    /// Masked: the audit store, sluice's credentials, what deny rules keep
    /// from reads.
    pub hidden: Vec<PathBuf>,
    /// What the derivation could not express.
    pub partial: Vec<String>,
}

/// The protections as they landed: the container's own paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub read_only: Vec<String>,
    pub hidden: Vec<String>,
    /// The folders above protected paths bound over themselves, so that
    /// none can be renamed away.
    pub pinned: Vec<String>,
    pub partial: Vec<String>,
    /// The host folders its mounts let commands write: where a repository
    /// a command makes is looked for when it ends, and removed.
    pub writable: Vec<PathBuf>,
}

/// One mount of a declaration: `HOST:CONTAINER[:OPTIONS]`.
struct Mount<'a> {
    host: &'a str,
    dest: &'a str,
    options: Option<&'a str>,
}

impl<'a> Mount<'a> {
    /// A mount as [`Declaration::parse`] checked it.
    fn of(text: &'a str) -> Mount<'a> {
        let mut parts = text.splitn(3, ':');
        Mount {
            host: parts.next().unwrap_or_default(),
            dest: parts.next().unwrap_or_default(),
            options: parts.next(),
        }
    }

    /// Its host path, canonical when it exists.
    fn source(&self) -> PathBuf {
        std::fs::canonicalize(self.host).unwrap_or_else(|_| PathBuf::from(self.host))
    }

    /// The mount made read-only: its options with `ro` for `rw`.
    fn read_only(&self) -> String {
        let mut options: Vec<&str> = self
            .options
            .map(|o| {
                o.split(',')
                    .filter(|o| *o != "rw" && !o.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !options.contains(&"ro") {
            options.push("ro");
        }
        format!("{}:{}:{}", self.host, self.dest, options.join(","))
    }

    /// Whether commands may write through it.
    fn writable(&self) -> bool {
        !self
            .options
            .is_some_and(|o| o.split(',').any(|o| o == "ro"))
    }

    /// Folder `host` of this mount bound over itself at `dest`, with the
    /// mount's own options but those that act once on the host source
    /// (relabelling, `z`/`Z`; changing owners, `U`).
    fn pin(&self, host: &str, dest: &str) -> String {
        let options: Vec<&str> = self
            .options
            .map(|o| {
                o.split(',')
                    .filter(|o| !["", "z", "Z", "U"].contains(o))
                    .collect()
            })
            .unwrap_or_default();
        if options.is_empty() {
            format!("{host}:{dest}")
        } else {
            format!("{host}:{dest}:{}", options.join(","))
        }
    }
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

    /// The host paths its mounts bring in, canonical when they exist: where
    /// the run looks for what to protect.
    pub fn sources(&self) -> Vec<PathBuf> {
        self.mounts.iter().map(|m| Mount::of(m).source()).collect()
    }

    /// The engine arguments of its mounts with `p` laid over them, and
    /// where the protections land inside; a mount that would bring in a
    /// hidden path whole is refused, naming it.
    fn mounts_with(
        &self,
        name: &str,
        p: &Protections,
        engine: &str,
    ) -> Result<(Vec<OsString>, Applied), String> {
        let mut args: Vec<OsString> = Vec::new();
        let mut laid: Vec<(String, Vec<OsString>)> = Vec::new();
        let mut applied = Applied {
            partial: p.partial.clone(),
            ..Applied::default()
        };
        for (i, text) in self.mounts.iter().enumerate() {
            let m = Mount::of(text);
            let source = m.source();
            if let Some(h) = p.hidden.iter().find(|h| source.starts_with(h)) {
                return Err(format!(
                    "containers.{name}.mounts[{}] brings in {}, which commands may not see (the audit store, sluice's credentials or what the policy hides); mount a folder that does not hold it",
                    i + 1,
                    h.display()
                ));
            }
            if p.read_only.iter().any(|r| source.starts_with(r)) {
                args.extend(["-v".into(), m.read_only().into()]);
                applied.read_only.push(m.dest.to_string());
                continue;
            }
            args.extend(["-v".into(), text.into()]);
            if m.writable() && source.is_dir() {
                applied.writable.push(source.clone());
                for dir in pins(&source, p) {
                    let dest = inside(m.dest, &source, &dir)?;
                    let taken = |d: &str| {
                        self.mounts.iter().any(|o| Mount::of(o).dest == d)
                            || applied.pinned.iter().any(|p| p == d)
                    };
                    if !taken(&dest) {
                        let arg = m.pin(&plain(&dir)?, &dest);
                        laid.push((dest.clone(), vec!["-v".into(), arg.into()]));
                        applied.pinned.push(dest);
                    }
                }
            }
            for r in p.read_only.iter().filter(|r| r.starts_with(&source)) {
                let dest = inside(m.dest, &source, r)?;
                let arg = format!("{}:{dest}:ro", plain(r)?);
                laid.push((dest.clone(), vec!["-v".into(), arg.into()]));
                applied.read_only.push(dest);
            }
            for h in p.hidden.iter().filter(|h| h.starts_with(&source)) {
                let dest = inside(m.dest, &source, h)?;
                laid.push((dest.clone(), mask(h, &dest, engine)));
                applied.hidden.push(dest);
            }
        }
        // Parents before what they hold, whatever the engine sorts.
        laid.sort_by_key(|(dest, _)| dest.matches('/').count());
        args.extend(laid.into_iter().flat_map(|(_, a)| a));
        Ok((args, applied))
    }

    /// Starts the container for run `run_id`, with `protections` laid over
    /// its mounts and checked from inside, and returns its transport.
    pub async fn start(
        &self,
        name: &str,
        engine: Engine,
        run_id: &str,
        protections: &Protections,
    ) -> Result<Transport, String> {
        let (mounts, applied) = self.mounts_with(name, protections, &engine.kind)?;
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
        args.extend(mounts);
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
            let words = super::engine::said(&out);
            // The refusal a default configuration gives on some hosts says
            // nothing of its fix by itself.
            let fix = match super::check::rlimit_refused(&words) {
                Some(_) => format!(
                    ". Fix: {}",
                    super::check::advice(&engine.kind, &self.image, &words)
                ),
                None => String::new(),
            };
            return Err(format!(
                "{} could not start container {name} from image {}: {words}{fix}",
                engine.kind, self.image,
            ));
        }
        let t = Transport {
            name: name.to_string(),
            target,
            engine,
            protections: Some(applied),
        };
        if let Err(why) = check(&t).await {
            let _ = remove(&t);
            return Err(format!(
                "container {name} started without the protections the run laid over its mounts ({why}), so it was removed"
            ));
        }
        Ok(t)
    }
}

/// Where host path `path`, inside mount `source`, is in the container
/// (under the mount's `dest`); a name the engine's mount syntax would
/// split is refused.
fn inside(dest: &str, source: &Path, path: &Path) -> Result<String, String> {
    let rel = path.strip_prefix(source).unwrap_or(path);
    let at = Path::new(dest).join(rel);
    plain(&at)
}

/// The folders of writable mount `source` to pin: each one between its root
/// and a protected path it brings in, but those inside a protected path
/// (read-only or masked already: nothing there can be renamed).
fn pins(source: &Path, p: &Protections) -> Vec<PathBuf> {
    let protected: Vec<&PathBuf> = p.read_only.iter().chain(&p.hidden).collect();
    let mut out: Vec<PathBuf> = protected
        .iter()
        .filter(|x| x.starts_with(source))
        .flat_map(|x| crate::fsops::path::between(source, x))
        .filter(|d| !protected.iter().any(|x| d.starts_with(x)))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `path` as one word of a mount's syntax: no `:` or `,`, which it would
/// split at.
fn plain(path: &Path) -> Result<String, String> {
    let text = path.to_string_lossy().into_owned();
    if text.contains([':', ',']) {
        return Err(format!(
            "cannot protect {text} in the container: its name holds ':' or ',', which a mount's syntax splits at; rename it"
        ));
    }
    Ok(text)
}

/// The engine arguments that mask `host` at `dest`: an empty read-only
/// folder (a tmpfs; podman must not copy what is below into it), or
/// `/dev/null` over a file.
fn mask(host: &Path, dest: &str, engine: &str) -> Vec<OsString> {
    if host.is_dir() {
        let options = if engine == "podman" {
            "ro,notmpcopyup,size=4k"
        } else {
            "ro,size=4k"
        };
        vec!["--tmpfs".into(), format!("{dest}:{options}").into()]
    } else {
        vec!["-v".into(), format!("/dev/null:{dest}:ro").into()]
    }
}

/// Whether each protection and pin of `t` is a mount where it was laid,
/// read-only ones read-only, as the container's own `/proc/self/mountinfo`
/// says.
async fn check(t: &Transport) -> Result<(), String> {
    let Some(applied) = &t.protections else {
        return Ok(());
    };
    if applied.read_only.is_empty() && applied.hidden.is_empty() {
        return Ok(());
    }
    let args = t.exec_args(&["cat", "/proc/self/mountinfo"]);
    let out = t
        .engine
        .output(&args, Vec::new(), None, START_LIMIT)
        .await?;
    if !out.status.success() {
        return Err(format!(
            "its mounts could not be read: {}",
            super::engine::said(&out)
        ));
    }
    let mounts = mount_points(&String::from_utf8_lossy(&out.stdout));
    let read_only = |o: &str| o.split(',').any(|o| o == "ro");
    for dest in &applied.read_only {
        match mounts.get(dest.as_str()) {
            Some(options) if read_only(options) => {}
            _ => return Err(format!("{dest} is not mounted read-only")),
        }
    }
    for dest in &applied.hidden {
        if !mounts.contains_key(dest.as_str()) {
            return Err(format!("{dest} is not masked"));
        }
    }
    for dest in &applied.pinned {
        if !mounts.contains_key(dest.as_str()) {
            return Err(format!("{dest} is not pinned (a mount point of its own)"));
        }
    }
    Ok(())
}

/// The mount points of a `mountinfo` text (its escapes undone), each with
/// the options of the last mount there.
fn mount_points(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) {
            out.insert(unescape(point), options.to_string());
        }
    }
    out
}

/// A `mountinfo` field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

    /// A workspace with a repository, an audit store and a `.env`, and
    /// the protections the run would derive for it.
    fn protected_workspace() -> (tempfile::TempDir, PathBuf, Protections) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        for d in [".git/hooks", ".sluice", "sub"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::write(ws.join("sub/.env"), "K=v\n").unwrap();
        let p = Protections {
            read_only: vec![ws.join(".git")],
            hidden: vec![ws.join(".sluice"), ws.join("sub/.env")],
            partial: vec![],
        };
        (dir, ws, p)
    }

    fn words(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn protections_are_laid_over_the_mounts_that_bring_them_in() {
        let (_dir, ws, p) = protected_workspace();
        let w = ws.display();
        let d =
            parse(json!({"image": "img", "mounts": [format!("{w}:/srv"), "/nowhere:/x"]})).unwrap();
        let (args, applied) = d.mounts_with("box", &p, "podman").unwrap();
        assert_eq!(
            words(&args),
            [
                "-v".to_string(),
                format!("{w}:/srv"),
                "-v".into(),
                "/nowhere:/x".into(),
                "-v".into(),
                format!("{w}/sub:/srv/sub"),
                "-v".into(),
                format!("{w}/.git:/srv/.git:ro"),
                "--tmpfs".into(),
                "/srv/.sluice:ro,notmpcopyup,size=4k".into(),
                "-v".into(),
                "/dev/null:/srv/sub/.env:ro".into(),
            ]
        );
        assert_eq!(applied.read_only, ["/srv/.git"]);
        assert_eq!(applied.hidden, ["/srv/.sluice", "/srv/sub/.env"]);
        assert_eq!(applied.pinned, ["/srv/sub"]);
        // docker copies nothing into a tmpfs, and knows no notmpcopyup.
        let (args, _) = d.mounts_with("box", &p, "docker").unwrap();
        assert!(words(&args).contains(&"/srv/.sluice:ro,size=4k".to_string()));
    }

    #[test]
    fn every_folder_above_a_protected_path_in_a_writable_mount_is_pinned() {
        let (_dir, ws, mut p) = protected_workspace();
        let w = ws.display();
        std::fs::create_dir_all(ws.join("policy/lib/sluice")).unwrap();
        std::fs::create_dir_all(ws.join(".git/modules/m")).unwrap();
        std::fs::create_dir_all(ws.join("sub/.git")).unwrap();
        for f in [
            "policy/p.lua",
            "policy/lib/sluice/x.lua",
            ".git/modules/m/.env",
        ] {
            std::fs::write(ws.join(f), "").unwrap();
        }
        p.read_only.extend([
            ws.join("policy/p.lua"),
            ws.join("policy/lib/sluice/x.lua"),
            ws.join("sub/.git"),
        ]);
        // Masked inside what is read-only: nothing there can be renamed.
        p.hidden.push(ws.join(".git/modules/m/.env"));
        let d =
            parse(json!({"image": "img", "mounts": [format!("{w}:/srv:rw,z,nosuid")]})).unwrap();
        let (args, applied) = d.mounts_with("box", &p, "podman").unwrap();
        let expected = [
            "/srv/policy",
            "/srv/policy/lib",
            "/srv/policy/lib/sluice",
            "/srv/sub",
        ];
        assert_eq!(applied.pinned, expected);
        let args = words(&args);
        for dest in expected {
            let host = dest.replacen("/srv", &w.to_string(), 1);
            assert!(
                args.contains(&format!("{host}:{dest}:rw,nosuid")),
                "{args:?}"
            );
        }
        // Each pin is made before what it holds.
        let at = |a: &str| args.iter().position(|x| x.contains(a)).unwrap();
        assert!(at(":/srv/policy:") < at(":/srv/policy/lib:"));
        assert!(at(":/srv/policy/lib/sluice:") < at(":/srv/policy/lib/sluice/x.lua:"));
        // A read-only mount needs none: nothing in it can be renamed.
        let d = parse(json!({"image": "img", "mounts": [format!("{w}:/srv:ro")]})).unwrap();
        let (_, applied) = d.mounts_with("box", &p, "podman").unwrap();
        assert!(applied.pinned.is_empty());
        // Nor a folder another declared mount already puts there.
        let d = parse(
            json!({"image": "img", "mounts": [format!("{w}:/srv"), format!("{w}/sub:/srv/sub")]}),
        )
        .unwrap();
        let (args, applied) = d.mounts_with("box", &p, "podman").unwrap();
        assert!(!applied.pinned.contains(&"/srv/sub".to_string()));
        assert_eq!(
            words(&args)
                .iter()
                .filter(|a| a.ends_with(":/srv/sub"))
                .count(),
            1
        );
    }

    #[test]
    fn a_mount_of_a_protected_path_is_read_only_or_refused() {
        let (_dir, ws, p) = protected_workspace();
        let w = ws.display();
        let git = format!("{w}/.git/hooks:/hooks:rw,z");
        let d = parse(json!({"image": "img", "mounts": [git]})).unwrap();
        let (args, applied) = d.mounts_with("box", &p, "podman").unwrap();
        assert_eq!(
            words(&args),
            ["-v".to_string(), format!("{w}/.git/hooks:/hooks:z,ro")]
        );
        assert_eq!(applied.read_only, ["/hooks"]);
        let d = parse(json!({"image": "img", "mounts": [format!("{w}/sub/.env:/e")]})).unwrap();
        let e = d.mounts_with("box", &p, "podman").unwrap_err();
        assert!(
            e.starts_with(&format!(
                "containers.box.mounts[1] brings in {w}/sub/.env, which commands may not see"
            )),
            "{e}"
        );
    }

    #[test]
    fn mountinfo_is_read_with_its_escapes_undone() {
        let info = "75 72 254:0 /w /srv rw,relatime - ext4 /dev/vda rw\n\
                    78 75 254:0 /w/.git /srv/.git ro,relatime - ext4 /dev/vda rw\n\
                    80 75 0:46 / /srv/a\\040b ro,nosuid - tmpfs tmpfs rw\n";
        let points = mount_points(info);
        assert_eq!(points["/srv"], "rw,relatime");
        assert_eq!(points["/srv/.git"], "ro,relatime");
        assert_eq!(points["/srv/a b"], "ro,nosuid");
        assert_eq!(unescape("a\\134b\\012"), "a\\b\n");
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
