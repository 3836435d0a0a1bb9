//! `sluice doctor` starts a throwaway container with each engine that
//! answers, never pulling an image, and names the fix of what fails: real
//! podman with the project's image, real podman refused a resource limit by
//! its runtime, an image that is not there, and a broken engine on PATH
//! (one that prints the runtime's rlimit refusal, one that holds no image).

mod common;
// The helper's `image()` leaves its `tar` to the pipe.
#[path = "common/containers.rs"]
mod containers;

use common::{sluice_bin, workspace, Run};
use serde_json::Value;
use std::path::Path;

/// The runtime's words when it may not set the open-files limit podman
/// asks for (runc's; what a default containers.conf gives on some hosts).
const RLIMIT_REFUSAL: &str = "Error: runc: runc create failed: unable to start container process: error during \
container init: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted: \
OCI permission denied";

/// `sluice doctor ARGS` with `env` set.
fn doctor(args: &[&str], env: &[(&str, String)]) -> Run {
    let ws = workspace();
    std::process::Command::new(sluice_bin())
        .arg("doctor")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(ws.path())
        .output()
        .expect("spawn sluice doctor")
        .into()
}

/// [`doctor`] with `--json`, parsed.
fn doctor_json(args: &[&str], env: &[(&str, String)]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = doctor(&all, env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// A containers.conf of the project's settings (cgroupfs, runc) whose
/// default limits ask for more open files than any process may have
/// (`fs.nr_open` + 1): the runtime refuses it on every host, as a default
/// configuration's limit is refused on some.
fn refused_conf(dir: &Path) -> String {
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let n = nr_open + 1;
    let path = dir.join("containers.conf");
    std::fs::write(
        &path,
        format!(
            "[containers]\ndefault_ulimits = [\"nofile={n}:{n}\"]\n\n[engine]\ncgroup_manager = \"cgroupfs\"\nruntime = \"runc\"\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn doctor_starts_a_throwaway_container_from_a_local_image() {
    let image = containers::image();
    let report = doctor_json(&["--image", image], &containers::env());
    let podman = &report["engines"]["podman"];
    assert_eq!(podman["works"], true, "{report:#}");
    assert_eq!(
        podman["container"],
        serde_json::json!({"started": true, "image": image}),
        "{report:#}"
    );
    let text = doctor(&["--image", image], &containers::env());
    assert!(
        text.stdout.contains(&format!(
            "started a throwaway container: podman run --rm --network none --pull never {image} true\n"
        )),
        "{}",
        text.stdout
    );
    // Without --image, the first local image: the project's is one.
    let report = doctor_json(&[], &containers::env());
    assert_eq!(
        report["engines"]["podman"]["container"]["started"], true,
        "{report:#}"
    );
}

#[test]
fn a_limit_the_runtime_refuses_is_named_with_its_fix() {
    let image = containers::image();
    let dir = tempfile::tempdir().unwrap();
    let env = [("CONTAINERS_CONF", refused_conf(dir.path()))];
    let report = doctor_json(&["--image", image], &env);
    let podman = &report["engines"]["podman"];
    assert_eq!(podman["works"], false, "{report:#}");
    let container = &podman["container"];
    assert_eq!(container["started"], false, "{report:#}");
    let why = container["why"].as_str().unwrap();
    assert!(
        why.contains("error setting rlimit type 7: operation not permitted")
            || why.contains("setrlimit `RLIMIT_NOFILE`: Operation not permitted"),
        "{report:#}"
    );
    let fix = container["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "podman asks the runtime to set RLIMIT_NOFILE higher than this host lets it"
        ),
        "{fix}"
    );
    assert!(
        fix.contains("Add `default_ulimits = []` under `[containers]` in "),
        "{fix}"
    );
    let text = doctor(&["--image", image], &env);
    assert_eq!(text.code, 0, "an engine that fails changes no exit code");
    assert!(
        text.stdout.contains("podman    does not work: ")
            && text.stdout.contains(" answers, but it cannot start a container: `podman run --rm --network none --pull never"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("          fix: podman asks the runtime to set RLIMIT_NOFILE"),
        "{}",
        text.stdout
    );
}

#[test]
fn an_image_that_is_not_here_is_never_pulled() {
    let missing = "localhost/sluice-doctor-absent";
    let report = doctor_json(&["--image", missing], &containers::env());
    let container = &report["engines"]["podman"]["container"];
    assert_eq!(container["started"], false, "{report:#}");
    assert!(
        container["fix"].as_str().unwrap().starts_with(&format!(
            "image {missing} is not present locally and doctor never pulls one"
        )),
        "{report:#}"
    );
    assert!(
        !containers::podman(&["image", "exists", missing])
            .status
            .success(),
        "doctor pulled {missing}"
    );
}

/// A folder holding a fake `podman` whose `run` prints `run_says` on
/// stderr and exits 126, and whose `images` lists `images`.
fn fake_podman(dir: &Path, images: &str, run_says: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("podman");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'podman version 9.9.9' ;;\n  ps) ;;\n  images) printf '%s' '{images}' ;;\n  run) echo '{run_says}' >&2; exit 126 ;;\n  *) exit 125 ;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// PATH with `dir` first.
fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_broken_engine_on_path_gets_the_rlimit_advice() {
    let dir = tempfile::tempdir().unwrap();
    fake_podman(
        dir.path(),
        "localhost/box:latest 0123456789ab\n",
        RLIMIT_REFUSAL,
    );
    let env = [("PATH", path_with(dir.path()))];
    let out = doctor(&[], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let program = dir.path().join("podman");
    assert!(
        out.stdout.contains(&format!(
            "podman    does not work: {} (podman version 9.9.9) answers, but it cannot start a container: \
             `podman run --rm --network none --pull never localhost/box:latest true` failed: {RLIMIT_REFUSAL}\n",
            program.display()
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "          fix: podman asks the runtime to set RLIMIT_NOFILE higher than this host lets it (this \
             process's hard limit is "
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "or in a file of your own that CONTAINERS_CONF names in sluice's environment"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn an_engine_without_images_says_how_to_make_one_offline() {
    let dir = tempfile::tempdir().unwrap();
    fake_podman(dir.path(), "", "never reached");
    let report = doctor_json(&[], &[("PATH", path_with(dir.path()))]);
    let podman = &report["engines"]["podman"];
    assert_eq!(podman["works"], true, "{report:#}");
    assert_eq!(podman["container"]["started"], false, "{report:#}");
    assert_eq!(podman["container"]["image"], Value::Null, "{report:#}");
    let fix = podman["container"]["fix"].as_str().unwrap();
    for offline in [
        "`podman build -t localhost/box -f Containerfile DIR`",
        "`podman import ROOTFS.tar localhost/box`",
        "`sluice doctor --image localhost/box`",
    ] {
        assert!(fix.contains(offline), "{offline}: {fix}");
    }
}
