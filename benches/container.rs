//! What routing a command into a container costs, side by side in one run:
//! 200 `bash` calls of `true` routed into a running podman container
//! through sluice (`--container-engine podman`, the caller naming the
//! container), against 200 `podman exec NAME true` from a shell loop.
//! Target: sluice at most 1.2x. BENCHMARKS.md has the figures.
//!
//! The container is a busybox root filesystem started with `podman run -d
//! --rootfs` (tests/common/containers.rs: no image can be pulled here).
//! The sluice side runs with `--no-audit`, so the figure is the transport's
//! (the audit bench measures the record); a line with the audit on follows
//! as information.
//!
//! Not a criterion bench: each sample is a process tree of a minute.

// The helper's `image()` leaves its `tar` to the pipe.
#[path = "../tests/common/containers.rs"]
mod containers;
mod support;

use std::path::Path;
use std::process::Command;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 200;

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if filter.is_empty() || filter.iter().any(|f| "container-true".contains(f.as_str())) {
        container_true();
    }
}

/// The `sluice run` of a script of `CALLS` routed `true` calls.
fn routed_calls(ws: &Path, dir: &Path, name: &str) -> impl Fn(bool) -> Command {
    let lua = dir.join("true.lua");
    std::fs::write(
        &lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\", container = \"{name}\"}}\n  \
             assert(r and r.exitCode == 0 and r.sandbox.mode == \"container\", tostring(err))\nend\n"
        ),
    )
    .unwrap();
    let ws = ws.to_path_buf();
    move |audit: bool| {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(&lua)
            .arg("--workspace")
            .arg(&ws)
            .args(["--container-engine", "podman"])
            .envs(containers::env());
        if !audit {
            c.arg("--no-audit");
        }
        c
    }
}

fn container_true() {
    let c = containers::Container::start();
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let run = routed_calls(&ws, scripts.path(), &c.name);
    let peer = || {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!(
                "i=0; while [ $i -lt {CALLS} ]; do podman exec {} true; i=$((i+1)); done",
                c.name
            ))
            .envs(containers::env());
        cmd
    };
    // Warm both sides once.
    measure(&mut run(false));
    measure(&mut peer());
    let turns = 3;
    let (mut s, mut p) = (vec![], vec![]);
    for _ in 0..turns {
        s.push(measure(&mut run(false)).0);
        p.push(measure(&mut peer()).0);
    }
    let audited = measure(&mut run(true)).0;
    let (ms, mp) = (median(&mut s), median(&mut p));
    let per = |d: std::time::Duration| d / CALLS as u32;
    println!(
        "container-true: {CALLS} calls: sluice routed {ms:.2?} ({:.2?} each) / podman exec {mp:.2?} ({:.2?}); sluice with the audit on {audited:.2?}",
        per(ms),
        per(mp)
    );
    println!();
    let r = ms.as_secs_f64() / mp.as_secs_f64();
    println!(
        "ratio container-true sluice/podman-exec = {r:.2}x (target <= 1.2x): {} [medians of {turns} interleaved turns: {ms:.2?} / {mp:.2?}]",
        verdict(r <= 1.2)
    );
    println!(
        "ratio container-true sluice-audited/podman-exec = {:.2}x (no target, information: with each call's intent synced) [{audited:.2?} / {mp:.2?}]",
        audited.as_secs_f64() / mp.as_secs_f64()
    );
}
