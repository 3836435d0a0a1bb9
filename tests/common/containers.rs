//! Real podman containers for the container tests: a busybox root
//! filesystem folder per container (no image can be pulled here), started
//! with `podman run -d --rootfs`, and removed when dropped. podman reads a
//! containers.conf of the project's own (`CONTAINERS_CONF`), which
//! `scripts/test` writes; the machine's /etc is left alone.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The local image the declared-container tests start.
pub const IMAGE: &str = "localhost/sluice-test";

/// The project's containers.conf: `[containers] default_ulimits = []`,
/// cgroupfs, runc. Written here when `scripts/test` has not.
pub fn conf() -> &'static Path {
    static CONF: OnceLock<PathBuf> = OnceLock::new();
    CONF.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/containers.conf");
        if !path.exists() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                &path,
                "[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = \"cgroupfs\"\nruntime = \"runc\"\n",
            )
            .unwrap();
        }
        path
    })
}

/// The variables a `sluice` process needs to reach these containers.
pub fn env() -> Vec<(&'static str, String)> {
    vec![("CONTAINERS_CONF", conf().display().to_string())]
}

/// `podman ARGS` with the project's containers.conf; panics naming how to
/// install podman when it is missing.
pub fn podman(args: &[&str]) -> Output {
    let out = Command::new("podman")
        .args(args)
        .env("CONTAINERS_CONF", conf())
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => o,
        Err(e) => panic!(
            "cannot run podman ({e}): the container tests drive real podman containers; install them with `apt-get install -y podman runc busybox-static` (scripts/test does)"
        ),
    }
}

/// A root filesystem folder: static busybox with a link per applet, the
/// usual folders, and an /etc/profile that sources /etc/profile.d, whose
/// `sluice.sh` exports SLUICE_TEST_PROFILE=loaded (what a login shell sees).
pub fn rootfs(dir: &Path) {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| is_static(Path::new(p)))
        .unwrap_or_else(|| panic!("no static busybox: install it with `apt-get install -y busybox-static` (scripts/test does)"));
    for d in [
        "bin",
        "tmp",
        "proc",
        "sys",
        "dev",
        "etc/profile.d",
        "srv",
        "root",
    ] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(busybox, dir.join("bin/busybox")).unwrap();
    let list = Command::new(busybox).arg("--list").output().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let link = dir.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", link).unwrap();
        }
    }
    std::fs::write(
        dir.join("etc/profile"),
        "for f in /etc/profile.d/*.sh; do [ -r \"$f\" ] && . \"$f\"; done\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("etc/profile.d/sluice.sh"),
        "export SLUICE_TEST_PROFILE=loaded\n",
    )
    .unwrap();
    std::fs::write(dir.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
}

fn is_static(p: &Path) -> bool {
    // A dynamically linked busybox would need the host's libc inside.
    std::fs::read(p).is_ok_and(|b| {
        b.len() > 64
            && !b
                .windows(b"/lib64/ld-linux".len())
                .any(|w| w == b"/lib64/ld-linux")
    })
}

/// A running container, removed when dropped.
pub struct Container {
    pub name: String,
    /// Its root filesystem on the host (what it sees as `/`).
    pub root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Container {
    /// Starts a fresh busybox container (`podman run -d --rootfs`).
    pub fn start() -> Container {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "sluice-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        rootfs(&root);
        let root_arg = root.display().to_string();
        let out = podman(&[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "none",
            "--rootfs",
            &root_arg,
            "/bin/sleep",
            "3600",
        ]);
        assert!(
            out.status.success(),
            "podman run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Container {
            name,
            root,
            _dir: dir,
        }
    }

    /// `podman exec NAME sh -c SCRIPT`: its stdout.
    pub fn sh(&self, script: &str) -> String {
        let out = podman(&["exec", &self.name, "sh", "-c", script]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The processes running in it, as `ps -o args` lists them.
    pub fn processes(&self) -> Vec<String> {
        self.sh("ps -o args")
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    /// The processes whose command line holds `needle`.
    pub fn running(&self, needle: &str) -> Vec<String> {
        self.processes()
            .into_iter()
            .filter(|p| p.contains(needle))
            .collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        podman(&["rm", "-f", "-t", "0", &self.name]);
    }
}

/// Makes [`IMAGE`] from a busybox root filesystem, once per test process.
pub fn image() -> &'static str {
    static MADE: OnceLock<()> = OnceLock::new();
    MADE.get_or_init(|| {
        if podman(&["image", "exists", IMAGE]).status.success() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        rootfs(dir.path());
        let mut tar = Command::new("tar")
            .args(["-C"])
            .arg(dir.path())
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Command::new("podman")
            .args(["import", "-", IMAGE])
            .env("CONTAINERS_CONF", conf())
            .stdin(tar.stdout.take().unwrap())
            .output()
            .unwrap();
        assert!(
            tar.wait().unwrap().success(),
            "tar of the root filesystem failed"
        );
        // Another test process may have made it meanwhile.
        assert!(
            out.status.success() || podman(&["image", "exists", IMAGE]).status.success(),
            "podman import: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    IMAGE
}

/// Containers labelled with run `run_id` (what a run started), by name.
pub fn of_run(run_id: &str) -> Vec<String> {
    let filter = format!("label=sluice.run={run_id}");
    let out = podman(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Containers whose name starts with `prefix`, running or not.
pub fn named(prefix: &str) -> Vec<String> {
    let out = podman(&["ps", "-a", "--format", "{{.Names}}"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}
