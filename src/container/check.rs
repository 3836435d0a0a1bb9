//! Whether an engine can start a container here, for `sluice doctor`: a
//! throwaway `ENGINE run --rm` of an image already present (never one
//! pulled), run the way a run drives the engine (sluice's PATH, the
//! engine's variables alone), and what to do when it fails.
//!
//! `ENGINE ps` answering says little: the failures a user meets come when
//! the runtime starts the container. The one a default configuration gives
//! on some hosts is the runtime refusing the resource limits the engine
//! asks for (podman asks for more open files than the host's hard limit;
//! runc says "error setting rlimit type 7: operation not permitted", crun
//! "setrlimit `RLIMIT_NOFILE`: Operation not permitted"), which
//! [`rlimit_refused`] recognises so [`advice`] can name the fix.

use super::engine::{said, Engine};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::time::Duration;

/// How long a throwaway container may take to start and end.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// What to do about an image without `true`.
const NO_TRUE_FIX: &str =
    "the engine works; to see a command run in it, give an image that has `true` (--image)";

/// What to do when the engine cannot list its images.
const UNLISTED_FIX: &str = "fix what the engine says, or name an image with --image";

/// How long listing the local images may take.
const LIST_LIMIT: Duration = Duration::from_secs(20);

/// What trying to start a container found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// `ENGINE run --rm IMAGE true` ran and exited 0.
    Ran { image: String },
    /// The runtime started the container, but the image has no `true`:
    /// the engine works.
    NoTrue { image: String },
    /// No image is present locally, so nothing was tried.
    NoImage { fix: String },
    /// The local images could not be listed: the engine's words.
    Unlisted { said: String },
    /// The run failed: the engine's words and what to do.
    Failed {
        image: String,
        said: String,
        fix: String,
    },
}

impl Started {
    /// Whether the engine works as far as this check tells: it started a
    /// container, or had no image to try.
    pub fn works(&self) -> bool {
        matches!(
            self,
            Started::Ran { .. } | Started::NoTrue { .. } | Started::NoImage { .. }
        )
    }

    /// The finding as `sluice doctor --json` gives it.
    pub fn to_json(&self) -> Value {
        match self {
            Started::Ran { image } => json!({"started": true, "image": image}),
            Started::NoTrue { image } => json!({
                "started": true, "image": image,
                "why": "the image has no `true` program", "fix": NO_TRUE_FIX,
            }),
            Started::NoImage { fix } => json!({
                "started": false, "image": null,
                "why": "no image is present locally (doctor never pulls one)", "fix": fix,
            }),
            Started::Unlisted { said } => json!({
                "started": false, "image": null, "why": said, "fix": UNLISTED_FIX,
            }),
            Started::Failed { image, said, fix } => json!({
                "started": false, "image": image, "why": said, "fix": fix,
            }),
        }
    }

    /// The finding in a sentence of `sluice doctor`'s text, and the fix.
    pub fn describe(&self, engine: &str) -> (String, Option<String>) {
        match self {
            Started::Ran { image } => (
                format!(
                    "started a throwaway container: {}",
                    command_line(engine, image)
                ),
                None,
            ),
            Started::NoTrue { image } => (
                format!(
                    "started a throwaway container, whose image has no `true`: {}",
                    command_line(engine, image)
                ),
                Some(NO_TRUE_FIX.into()),
            ),
            Started::NoImage { fix } => (
                "started no container: no image is present locally, and doctor never pulls one"
                    .into(),
                Some(fix.clone()),
            ),
            Started::Unlisted { said } => (
                format!("cannot list its images: {said}"),
                Some(UNLISTED_FIX.into()),
            ),
            Started::Failed { image, said, fix } => (
                format!(
                    "cannot start a container: `{}` failed: {said}",
                    command_line(engine, image)
                ),
                Some(fix.clone()),
            ),
        }
    }
}

/// The arguments of the throwaway run: no network, nothing pulled, the
/// container removed once `true` exits.
fn run_args(image: &str) -> Vec<OsString> {
    [
        "run",
        "--rm",
        "--network",
        "none",
        "--pull",
        "never",
        image,
        "true",
    ]
    .iter()
    .map(OsString::from)
    .collect()
}

fn command_line(engine: &str, image: &str) -> String {
    let args: Vec<String> = run_args(image)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("{engine} {}", args.join(" "))
}

/// Starts a throwaway container from `image`, or from the first image
/// present locally when none is given.
pub fn start(engine: &Engine, image: Option<&str>) -> Started {
    let image = match image {
        Some(i) => i.to_string(),
        None => match first_local_image(engine) {
            Ok(Some(i)) => i,
            Ok(None) => {
                return Started::NoImage {
                    fix: no_image_fix(&engine.kind),
                }
            }
            Err(said) => return Started::Unlisted { said },
        },
    };
    match engine.output_blocking(&run_args(&image), RUN_LIMIT) {
        Ok(out) if out.status.success() => Started::Ran { image },
        Ok(out) => {
            let words = said(&out);
            if missing_true(&words) {
                return Started::NoTrue { image };
            }
            Started::Failed {
                fix: advice(&engine.kind, &image, &words),
                said: words,
                image,
            }
        }
        Err(why) => Started::Failed {
            fix: format!(
                "check that `{}` runs a container by hand, as the user sluice runs as",
                command_line(&engine.kind, &image)
            ),
            said: why,
            image,
        },
    }
}

/// Whether the runtime said the container's program is not there.
fn missing_true(said: &str) -> bool {
    let lower = said.to_ascii_lowercase();
    lower.contains("executable file not found") || lower.contains("\"true\": no such file")
}

/// The first image the engine holds by a name (`repo:tag`), else the
/// first untagged one by its id (often a build's leftover, so tried last);
/// none when it holds none.
fn first_local_image(engine: &Engine) -> Result<Option<String>, String> {
    let args: Vec<OsString> = ["images", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}"]
        .iter()
        .map(OsString::from)
        .collect();
    let out = engine.output_blocking(&args, LIST_LIMIT)?;
    if !out.status.success() {
        return Err(format!("`{} images` failed: {}", engine.kind, said(&out)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let images: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| line.trim().split_once(' '))
        .collect();
    let named = images.iter().find(|(name, _)| !name.contains("<none>"));
    Ok(named
        .map(|(name, _)| name.to_string())
        .or_else(|| images.first().map(|(_, id)| id.trim().to_string())))
}

/// How to make an image without a registry, for an engine that holds none.
fn no_image_fix(engine: &str) -> String {
    format!(
        "make one offline and run doctor again with it: `{engine} build -t localhost/box -f Containerfile DIR` \
         (from a base image you have), or `{engine} import ROOTFS.tar localhost/box` (a root filesystem tarball, \
         e.g. `tar -C rootfs -c .` of a folder with a static busybox in bin/); then `sluice doctor --image localhost/box`"
    )
}

/// What to do about a failed run, from the engine's words `said`.
pub fn advice(engine: &str, image: &str, said: &str) -> String {
    if let Some(limit) = rlimit_refused(said) {
        return rlimit_fix(engine, &limit);
    }
    let lower = said.to_ascii_lowercase();
    if lower.contains("image not known")
        || lower.contains("no such image")
        || lower.contains("unable to find image")
    {
        return format!(
            "image {image} is not present locally and doctor never pulls one: list the local images with \
             `{engine} images`, or {}",
            no_image_fix(engine)
        );
    }
    format!(
        "run `{}` by hand as the user sluice runs as and fix what the engine says; commands routed to a \
         container, and containers a policy declares, fail the same way until it runs",
        command_line(engine, image)
    )
}

/// The limit the runtime refused to set, when `said` is that refusal:
/// runc's "error setting rlimit type N: operation not permitted", crun's
/// "setrlimit `RLIMIT_X`: Operation not permitted".
pub fn rlimit_refused(said: &str) -> Option<String> {
    let lower = said.to_ascii_lowercase();
    let refused = lower.contains("operation not permitted") || lower.contains("permission denied");
    if !refused {
        return None;
    }
    if let Some(at) = lower.find("error setting rlimit type ") {
        let digits: String = lower[at + "error setting rlimit type ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return Some(match digits.parse::<u32>() {
            Ok(n) => rlimit_name(n).map_or(format!("rlimit type {n}"), str::to_string),
            Err(_) => "a resource limit".to_string(),
        });
    }
    let at = said.find("RLIMIT_")?;
    lower.contains("setrlimit").then(|| {
        said[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect()
    })
}

/// The name of Linux resource `n`, as runc numbers them.
fn rlimit_name(n: u32) -> Option<&'static str> {
    const NAMES: [&str; 16] = [
        "RLIMIT_CPU",
        "RLIMIT_FSIZE",
        "RLIMIT_DATA",
        "RLIMIT_STACK",
        "RLIMIT_CORE",
        "RLIMIT_RSS",
        "RLIMIT_NPROC",
        "RLIMIT_NOFILE",
        "RLIMIT_MEMLOCK",
        "RLIMIT_AS",
        "RLIMIT_LOCKS",
        "RLIMIT_SIGPENDING",
        "RLIMIT_MSGQUEUE",
        "RLIMIT_NICE",
        "RLIMIT_RTPRIO",
        "RLIMIT_RTTIME",
    ];
    NAMES.get(n as usize).copied()
}

/// The fix for a refused limit: no default limits in the engine's
/// configuration (the container then gets the engine's own, which the
/// host allows), or a higher hard limit on the host.
fn rlimit_fix(engine: &str, limit: &str) -> String {
    let host = host_hard_limit(limit)
        .map(|n| format!(" (this process's hard limit is {n})"))
        .unwrap_or_default();
    let ulimit = match limit {
        "RLIMIT_NOFILE" => "`ulimit -Hn`",
        "RLIMIT_NPROC" => "`ulimit -Hu`",
        _ => "`ulimit -H`",
    };
    if engine == "docker" {
        return format!(
            "the runtime may not set {limit} as high as dockerd asks{host}: lower or remove `default-ulimits` in \
             /etc/docker/daemon.json and restart dockerd, or raise the host's hard limit ({ulimit}) for dockerd"
        );
    }
    let file = if nix::unistd::geteuid().is_root() {
        "/etc/containers/containers.conf"
    } else {
        "~/.config/containers/containers.conf"
    };
    format!(
        "podman asks the runtime to set {limit} higher than this host lets it{host}, as its \
         default limits do where the host's hard limit is lower. Add `default_ulimits = []` under `[containers]` in {file}, or in a file of your own \
         that CONTAINERS_CONF names in sluice's environment (podman then reads that file alone, and sluice passes \
         CONTAINERS_CONF to it); or raise the hard limit ({ulimit}) of the login or service that starts sluice"
    )
}

/// This process's hard limit of `limit`, when it is one of those a
/// container runtime commonly refuses.
fn host_hard_limit(limit: &str) -> Option<String> {
    use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
    let resource = match limit {
        "RLIMIT_NOFILE" => Resource::RLIMIT_NOFILE,
        "RLIMIT_NPROC" => Resource::RLIMIT_NPROC,
        _ => return None,
    };
    let (_, hard) = getrlimit(resource).ok()?;
    Some(match hard {
        RLIM_INFINITY => "unlimited".into(),
        n => n.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_rlimit_refusals_are_recognised_by_name() {
        let runc = "Error: runc: runc create failed: unable to start container process: error during container \
                    init: error setting rlimits for ready process: error setting rlimit type 7: operation not \
                    permitted: OCI permission denied";
        assert_eq!(rlimit_refused(runc).as_deref(), Some("RLIMIT_NOFILE"));
        let older = "Error: container_linux.go:367: starting container process caused: process_linux.go:459: \
                     container init caused: process_linux.go:382: setting rlimits for ready process caused: \
                     error setting rlimit type 6: operation not permitted: OCI runtime permission denied error";
        assert_eq!(rlimit_refused(older).as_deref(), Some("RLIMIT_NPROC"));
        let crun =
            "Error: setrlimit `RLIMIT_NPROC`: Operation not permitted: OCI permission denied";
        assert_eq!(rlimit_refused(crun).as_deref(), Some("RLIMIT_NPROC"));
        assert_eq!(rlimit_refused("Error: localhost/x: image not known"), None);
        assert_eq!(
            rlimit_refused("the command said: setrlimit is fine, all permitted"),
            None
        );
    }

    #[test]
    fn the_rlimit_advice_names_the_setting_and_the_file() {
        let fix = advice(
            "podman",
            "localhost/box",
            "error setting rlimit type 7: operation not permitted",
        );
        assert!(fix.contains("default_ulimits = []"), "{fix}");
        assert!(fix.contains("[containers]"), "{fix}");
        assert!(fix.contains("RLIMIT_NOFILE"), "{fix}");
        assert!(fix.contains("CONTAINERS_CONF"), "{fix}");
        assert!(fix.contains("`ulimit -Hn`"), "{fix}");
        let missing = advice(
            "podman",
            "localhost/nope",
            "Error: localhost/nope: image not known",
        );
        assert!(missing.contains("never pulls"), "{missing}");
        assert!(missing.contains("podman import ROOTFS.tar"), "{missing}");
    }
}
