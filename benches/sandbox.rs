//! What confining a command costs, side by side in one run, in interleaved
//! turns: 300 confined `true` calls through sluice (`sluice.bash{command =
//! "true"}` under the default policy, which confines), 300 bare
//! `sh -c true`, 300 runs of a bare `bwrap` command line with the same
//! mounts (a namespace made per command: the floor a per-call sandbox
//! pays), and 300 runs of Codex's sandbox (`codex sandbox -- true`, its
//! native binary from the npm package `@openai/codex`). Targets (issue
//! 21, where one sandbox per run serves every command): sluice at most
//! 1.5x the bare shell, at least 4x faster per call than the bwrap floor,
//! at least 20x faster than Codex's sandbox. BENCHMARKS.md has the figures.
//!
//! The sluice side runs with `--no-audit`, so the figure is confinement's
//! (the audit bench measures the record); a line with the audit on follows
//! as information. The bwrap floor's options are the ones sluice passes
//! for the default policy, built by sluice's own code. Every side's loop
//! stops at its first failing command, which fails the bench: a sandbox
//! that refused `true` must not pass for a fast one.
//!
//! A second part, `sandbox-env`, measures what expanding the default
//! policy's `**/.env` deny over a 20,000-file workspace adds to a command
//! (target: under 20 ms, or reused while the tree is unchanged).
//!
//! A third, `sandbox-limits`, measures what a policy's resource limits
//! cost a confined command (issue 36): the same `CALLS` confined `true`
//! calls under the default policy as a file, with its `limits` (on: memory
//! and pids cgroups where the machine allows them, rlimits) and with its
//! `limits` table cut out (off), under each runner, in 9 interleaved
//! turns. Target: on/off at most 1.1x. With cgroups turned off (`SLUICE_CGROUPS=off`, rlimits alone) as
//! information.
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
use std::time::Duration;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 300;

fn sh(line: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(line);
    c
}

/// A shell loop running `line` `CALLS` times, failing at the first failure.
fn repeat(line: &str) -> Command {
    sh(&format!(
        "i=0; while [ $i -lt {CALLS} ]; do {line} || exit 1; i=$((i+1)); done"
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
    if wanted("sandbox-limits") {
        sandbox_limits();
    }
}

/// The default policy's text with its `limits` table cut out.
fn without_limits(text: &str) -> String {
    let start = text
        .find("  limits = {")
        .expect("the default policy sets limits");
    let end = start
        + text[start..]
            .find("\n  },\n")
            .expect("its limits table ends")
        + 5;
    let cut = format!("{}{}", &text[..start], &text[end..]);
    assert!(!cut.contains("limits ="), "{cut}");
    cut
}

/// `CALLS` confined `true` calls in `ws` under `runner` and the policy
/// file `policy`, with `env` for sluice.
fn true_calls_under(
    ws: &Path,
    lua: &Path,
    runner: &'static str,
    policy: &Path,
    env: &'static [(&'static str, &'static str)],
) -> impl Fn() -> Command {
    let (ws, lua, policy) = (ws.to_path_buf(), lua.to_path_buf(), policy.to_path_buf());
    move || {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(&lua)
            .arg("--workspace")
            .arg(&ws)
            .args(["--sandbox", runner, "--no-audit", "--policy"])
            .arg(&policy)
            .env("SLUICE_CACHE_DIR", lua.with_file_name("caches"))
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null());
        c
    }
}

/// Confined `true` with the default policy's limits on against off, under
/// bubblewrap and landlock.
fn sandbox_limits() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let lua = scripts.path().join("true.lua");
    std::fs::write(
        &lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0 and r.sandbox, tostring(err))\nend\n\
             local r = sluice.bash{{command = \"true\"}}\nprint(sluice.json.encode(r.sandbox.limits or {{}}))\n"
        ),
    )
    .unwrap();
    let text = include_str!("../policies/default.lua");
    let (on, off) = (
        scripts.path().join("on.lua"),
        scripts.path().join("off.lua"),
    );
    std::fs::write(&on, text).unwrap();
    std::fs::write(&off, without_limits(text)).unwrap();
    const NONE: &[(&str, &str)] = &[];
    const RLIMITS: &[(&str, &str)] = &[("SLUICE_CGROUPS", "off")];
    // What is measured is a fraction of a millisecond a call, on a machine
    // other work shares: more turns than the other parts.
    let turns = 9;
    let mut lines = Vec::new();
    for runner in ["bwrap", "landlock"] {
        let sides = [
            true_calls_under(&ws, &lua, runner, &on, NONE),
            true_calls_under(&ws, &lua, runner, &off, NONE),
            true_calls_under(&ws, &lua, runner, &on, RLIMITS),
        ];
        let shown = sides[0]()
            .stdout(std::process::Stdio::piped())
            .output()
            .unwrap();
        println!(
            "sandbox-limits: {runner}: the limits a call reports: {}",
            String::from_utf8_lossy(&shown.stdout).trim()
        );
        for side in &sides {
            measure(&mut side());
        }
        let mut t: [Vec<Duration>; 3] = Default::default();
        for _ in 0..turns {
            for (i, side) in sides.iter().enumerate() {
                t[i].push(measure(&mut side()).0);
            }
        }
        let [on_t, off_t, rl_t] = t.map(|mut v| median(&mut v));
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        let ratio = r(on_t, off_t);
        println!(
            "sandbox-limits: {runner}: {CALLS} calls: limits on {on_t:.2?} ({:.2?} each) / off {off_t:.2?} ({:.2?}) / \
             rlimits alone {rl_t:.2?} ({:.2?})",
            on_t / CALLS as u32,
            off_t / CALLS as u32,
            rl_t / CALLS as u32
        );
        lines.push(format!(
            "ratio sandbox-limits {runner} on/off = {ratio:.2}x (target <= 1.1x): {} \
             [medians of {turns} interleaved turns of {CALLS} calls: {on_t:.2?} / {off_t:.2?}]",
            verdict(ratio <= 1.1)
        ));
        lines.push(format!(
            "ratio sandbox-limits {runner} rlimits-alone/off = {:.2}x (no target, information: SLUICE_CGROUPS=off) \
             [{rl_t:.2?} / {off_t:.2?}]",
            r(rl_t, off_t)
        ));
    }
    println!();
    for line in lines {
        println!("{line}");
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

/// Codex's sandbox binary, or a panic saying how to install it.
fn codex() -> std::path::PathBuf {
    if let Some(how) = peers::codex_missing() {
        panic!("{how}");
    }
    codex_binary()
}

/// The medians of one `sandbox-true` run, each for `CALLS` calls.
struct Sides {
    sluice: Duration,
    sh: Duration,
    bwrap: Duration,
    codex: Duration,
    audited: Duration,
}

/// 300 confined `true` against the shell, the bwrap floor and Codex's
/// sandbox.
fn sandbox_true() {
    let codex = codex();
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
    let mut t: [Vec<Duration>; 5] = Default::default();
    for _ in 0..turns {
        t[0].push(measure(&mut run(false)).0);
        t[1].push(measure(&mut repeat("sh -c true")).0);
        t[2].push(measure(&mut repeat(&floor)).0);
        t[3].push(measure(&mut repeat(&codex_line)).0);
        t[4].push(measure(&mut run(true)).0);
    }
    let [sluice, sh, bwrap, codex, audited] = t.map(|mut v| median(&mut v));
    let sides = Sides {
        sluice,
        sh,
        bwrap,
        codex,
        audited,
    };
    print_sides(&sides, &floor);
    println!();
    for line in ratio_lines(&sides, turns) {
        println!("{line}");
    }
}

fn print_sides(s: &Sides, floor: &str) {
    let per = |d: Duration| d / CALLS as u32;
    println!(
        "sandbox-true: {CALLS} calls: sluice confined {:.2?} ({:.2?} each) / sh -c true {:.2?} ({:.2?}) / \
         bare bwrap {:.2?} ({:.2?}) / codex sandbox {:.2?} ({:.2?}); sluice with the audit on {:.2?}",
        s.sluice,
        per(s.sluice),
        s.sh,
        per(s.sh),
        s.bwrap,
        per(s.bwrap),
        s.codex,
        per(s.codex),
        s.audited
    );
    println!("sandbox-true: the floor's command line: {floor}");
}

/// The ratio lines: each against its target (issue 21).
fn ratio_lines(s: &Sides, turns: usize) -> Vec<String> {
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let (sh, bwrap, codex) = (
        r(s.sluice, s.sh),
        r(s.bwrap, s.sluice),
        r(s.codex, s.sluice),
    );
    vec![
        format!(
            "ratio sandbox-true sluice/sh = {sh:.2}x (target <= 1.5x): {} \
             [medians of {turns} interleaved turns of {CALLS} calls: {:.2?} / {:.2?}]",
            verdict(sh <= 1.5),
            s.sluice,
            s.sh
        ),
        format!(
            "ratio sandbox-true bwrap-floor/sluice = {bwrap:.2}x (sluice faster per call than a bare bwrap per command; \
             target >= 4x): {} [{:.2?} / {:.2?}]",
            verdict(bwrap >= 4.0),
            s.bwrap,
            s.sluice
        ),
        format!(
            "ratio sandbox-true codex-sandbox/sluice = {codex:.2}x (sluice faster than Codex's sandbox; target >= 20x): {} \
             [{:.2?} / {:.2?}]",
            verdict(codex >= 20.0),
            s.codex,
            s.sluice
        ),
        format!(
            "ratio sandbox-true sluice-audited/sh = {:.2}x (no target, information: with each call's intent synced) \
             [{:.2?} / {:.2?}]",
            r(s.audited, s.sh),
            s.audited,
            s.sh
        ),
    ]
}
