//! What confining a command costs, side by side in one run: 300 confined
//! `true` calls through sluice, 300 runs of a bare `bwrap` command line
//! with the same mounts (the floor: what confinement itself costs), 300
//! runs of Codex's sandbox (`codex sandbox -- true`, its native binary from
//! the npm package `@openai/codex`), and 300 bare `sh -c true`. Targets:
//! sluice at most 1.3x the bwrap floor, and faster than Codex's sandbox.
//! BENCHMARKS.md has the figures.
//!
//! The sluice side runs with `--no-audit`, so the figure is confinement's
//! (the audit bench measures the record); a line with the audit on follows
//! as information. The bwrap floor's options are the ones sluice passes
//! for the default policy, built by sluice's own code.
//!
//! Not a criterion bench: each sample is a process tree of seconds.

#[path = "support/peers.rs"]
#[allow(dead_code)]
mod peers;
mod support;

use peers::codex_binary;
use sluice::kernel::pattern::Vars;
use sluice::kernel::policy::{shipped, Policy};
use sluice::kernel::Kernel;
use sluice::sandbox::{Choice, Sandbox};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 300;

fn sh(line: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(line);
    c
}

/// A shell loop running `line` `CALLS` times.
fn repeat(line: &str) -> Command {
    sh(&format!(
        "i=0; while [ $i -lt {CALLS} ]; do {line}; i=$((i+1)); done"
    ))
}

fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The bwrap command line sluice runs for `sh -c true` in `ws` under the
/// default policy: the same mounts, masks and caches, from the run's own
/// sandbox (kept alive by the caller while the line runs: its masks live in
/// its private temp folder).
fn floor_line(ws: &Path, sandbox: &Sandbox) -> String {
    let vars = Vars::new(ws.to_path_buf());
    let policy = Policy::load(shipped("default").unwrap(), vars.clone());
    let kernel = Kernel::new(vec![policy], Vec::new(), vars);
    let profile = kernel.with_static(|view| sluice::sandbox::derive(view, ws));
    let confined = sandbox
        .confine(profile, ws)
        .expect("the bench needs bubblewrap: apt-get install bubblewrap")
        .expect("the default policy confines commands");
    let argv = confined
        .wrap
        .wrap(["/bin/sh", "-c", "true"].map(OsString::from).to_vec(), ws)
        .unwrap();
    let words: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|f| "sandbox-true".contains(f.as_str())) {
        return;
    }
    let codex = codex_binary();
    assert!(
        codex.exists(),
        "the bench needs Codex's CLI at {}: scripts/test installs it (npm install @openai/codex into target/peers)",
        codex.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let lua = scripts.path().join("true.lua");
    std::fs::write(
        &lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0 and r.sandbox, tostring(err))\nend\n"
        ),
    )
    .unwrap();
    let run = |audit: bool| {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(&lua)
            .arg("--workspace")
            .arg(&ws)
            .args(["--sandbox", "bwrap"]);
        if !audit {
            c.arg("--no-audit");
        }
        c
    };
    let sandbox = Sandbox::new(Choice::Bwrap, "bench");
    let floor = floor_line(&ws, &sandbox);
    let codex_line = format!(
        "{} sandbox -- true >/dev/null 2>&1",
        quote(&codex.display().to_string())
    );

    // Warm every side once.
    measure(&mut run(false));
    measure(&mut repeat(&floor));
    measure(&mut repeat(&codex_line));
    let turns = 5;
    let (mut s, mut f, mut c, mut b, mut a) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..turns {
        s.push(measure(&mut run(false)).0);
        f.push(measure(&mut repeat(&floor)).0);
        c.push(measure(&mut repeat(&codex_line)).0);
        b.push(measure(&mut repeat("sh -c true")).0);
        a.push(measure(&mut run(true)).0);
    }
    let (ms, mf, mc, mb, ma) = (
        median(&mut s),
        median(&mut f),
        median(&mut c),
        median(&mut b),
        median(&mut a),
    );
    let per = |d: std::time::Duration| d / CALLS as u32;
    println!(
        "sandbox-true: {CALLS} calls: sluice confined {ms:.2?} ({:.2?} each) / bare bwrap {mf:.2?} ({:.2?}) / \
         codex sandbox {mc:.2?} ({:.2?}) / sh -c true {mb:.2?} ({:.2?}); sluice with the audit on {ma:.2?}",
        per(ms),
        per(mf),
        per(mc),
        per(mb)
    );
    println!("sandbox-true: the floor's command line: {floor}");
    println!();
    let r_floor = ms.as_secs_f64() / mf.as_secs_f64();
    let r_codex = ms.as_secs_f64() / mc.as_secs_f64();
    println!(
        "ratio sandbox-true sluice/bwrap-floor = {r_floor:.2}x (target <= 1.3x): {} [medians of {turns} interleaved turns: {ms:.2?} / {mf:.2?}]",
        verdict(r_floor <= 1.3)
    );
    println!(
        "ratio sandbox-true sluice/codex-sandbox = {r_codex:.2}x (target < 1x, faster than Codex): {} [{ms:.2?} / {mc:.2?}]",
        verdict(r_codex < 1.0)
    );
    println!(
        "ratio sandbox-true sluice/sh = {:.2}x (no target, information: what confinement adds to a bare spawn) [{ms:.2?} / {mb:.2?}]",
        ms.as_secs_f64() / mb.as_secs_f64()
    );
    println!(
        "ratio sandbox-true sluice-audited/bwrap-floor = {:.2}x (no target, information: with each call's intent synced) [{ma:.2?} / {mf:.2?}]",
        ma.as_secs_f64() / mf.as_secs_f64()
    );
}
