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
//! A second part, `sandbox-env`, measures what expanding the default
//! policy's `**/.env` deny over a 20,000-file workspace adds to a command
//! (target: under 20 ms, or reused while the tree is unchanged).
//!
//! Not a criterion bench: each sample is a process tree of seconds.

#[path = "support/peers.rs"]
mod peers;
mod support;

use peers::codex_binary;
use sluice::internals::kernel::pattern::Vars;
use sluice::internals::kernel::policy::{shipped, Policy};
use sluice::internals::kernel::Kernel;
use sluice::internals::sandbox::{Choice, Sandbox};
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

/// What the default policy gives a command run in `ws`.
fn default_profile(ws: &Path) -> sluice::internals::sandbox::Profile {
    let vars = Vars::new(ws.to_path_buf());
    let policy = Policy::load(shipped("default").unwrap(), vars.clone());
    let kernel = Kernel::new(vec![policy], Vec::new(), vars);
    kernel.with_static(|view| sluice::internals::sandbox::derive(view, ws))
}

/// The bwrap command line sluice runs for `sh -c true` in `ws` under the
/// default policy: the same mounts, masks and caches, from the run's own
/// sandbox (kept alive by the caller while the line runs: its masks live in
/// its private temp folder).
fn floor_line(ws: &Path, sandbox: &Sandbox) -> String {
    let confined = sandbox
        .confine(default_profile(ws), ws)
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
    let wanted = support::wanted();
    if wanted("sandbox-true") {
        sandbox_true();
    }
    if wanted("sandbox-env") {
        sandbox_env();
    }
}

/// A script of `CALLS` confined `true` calls, and the `sluice run` of it in
/// `ws` (with the audit record or not).
fn true_calls(ws: &Path, dir: &Path) -> impl Fn(bool) -> Command {
    let lua = dir.join("true.lua");
    std::fs::write(
        &lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0 and r.sandbox, tostring(err))\nend\n"
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
            .args(["--sandbox", "bwrap"])
            .env("SLUICE_CACHE_DIR", lua.with_file_name("caches"));
        if !audit {
            c.arg("--no-audit");
        }
        c
    }
}

/// A workspace of `files` files in folders of 100, with a `.env` in every
/// tenth folder: what the default policy's `**/.env` deny is expanded in.
fn big_workspace(ws: &Path, files: usize) -> usize {
    let mut envs = 0;
    for i in 0..files.div_ceil(100) {
        let dir = ws.join(format!("pkg{:03}/src/mod{i:03}", i / 10));
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..100 {
            std::fs::write(dir.join(format!("f{j:03}.rs")), "fn f() {}\n").unwrap();
        }
        if i % 10 == 0 {
            std::fs::write(dir.join(".env"), "TOKEN=x\n").unwrap();
            envs += 1;
        }
    }
    envs
}

/// What expanding `**/.env` over a 20,000-file workspace adds to a command:
/// the same `CALLS` confined calls in it and in an empty workspace, and
/// the sandbox's scan alone, first (cold) and again (unchanged tree).
fn sandbox_env() {
    const FILES: usize = 20_000;
    let (small_dir, big_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let small = std::fs::canonicalize(small_dir.path()).unwrap();
    let big = std::fs::canonicalize(big_dir.path()).unwrap();
    let envs = big_workspace(&big, FILES);
    let scripts = tempfile::tempdir().unwrap();
    let (s_scripts, b_scripts) = (scripts.path().join("small"), scripts.path().join("big"));
    std::fs::create_dir_all(&s_scripts).unwrap();
    std::fs::create_dir_all(&b_scripts).unwrap();
    let run_small = true_calls(&small, &s_scripts);
    let run_big = true_calls(&big, &b_scripts);
    // The scan alone, in process: the first confine reads every folder,
    // the next ones only stat them.
    let sandbox = Sandbox::new(Choice::Bwrap, "bench-env");
    let profile = default_profile(&big);
    let started = std::time::Instant::now();
    let confined = sandbox.confine(profile.clone(), &big).unwrap().unwrap();
    let cold = started.elapsed();
    assert_eq!(
        confined.enforcement,
        sluice::internals::sandbox::Enforcement::Full
    );
    let mut warm: Vec<std::time::Duration> = (0..21)
        .map(|_| {
            let p = profile.clone();
            let t = std::time::Instant::now();
            sandbox.confine(p, &big).unwrap();
            t.elapsed()
        })
        .collect();
    let warm = median(&mut warm);
    let masked = floor_line(&big, &sandbox)
        .matches(&format!("mask-file' '{}/", big.display()))
        .count();
    assert_eq!(masked, envs, "every .env is masked");

    measure(&mut run_small(false));
    measure(&mut run_big(false));
    let turns = 5;
    let (mut sm, mut bg) = (vec![], vec![]);
    for _ in 0..turns {
        sm.push(measure(&mut run_small(false)).0);
        bg.push(measure(&mut run_big(false)).0);
    }
    let (ms, mb) = (median(&mut sm), median(&mut bg));
    let added = mb.saturating_sub(ms) / CALLS as u32;
    println!(
        "sandbox-env: {CALLS} calls in a {FILES}-file workspace ({envs} .env files masked) {mb:.2?} / in an empty one {ms:.2?}; \
         the scan alone: first {cold:.2?}, unchanged tree {warm:.2?} (median of 21)"
    );
    println!();
    println!(
        "ratio sandbox-env added per command = {:.2}ms (target < 20ms): {} [medians of {turns} interleaved turns: ({mb:.2?} - {ms:.2?}) / {CALLS}]",
        added.as_secs_f64() * 1e3,
        verdict(added < std::time::Duration::from_millis(20))
    );
    println!(
        "ratio sandbox-env first scan = {:.2}ms (no target, information: the first command of a run reads every folder; later ones stat them, {:.2}ms)",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3
    );
}

/// 300 confined `true` against the floor, Codex's sandbox and the shell.
fn sandbox_true() {
    let codex = codex_binary();
    assert!(
        codex.exists(),
        "the bench needs Codex's CLI at {}: scripts/test installs it (npm install @openai/codex into target/peers)",
        codex.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let run = true_calls(&ws, scripts.path());
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
