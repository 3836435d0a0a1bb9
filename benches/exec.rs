//! What running a command through sluice costs, next to the shell doing it
//! alone. Whole processes on both sides, timed in interleaved turns, so
//! the ratio of medians holds on a noisy machine. BENCHMARKS.md has the
//! targets, the command and the figures.
//!
//! - `exec-spawn`: one `sluice run` of a script making 500
//!   `sluice.bash{command = "true"}` calls, against one `sh` loop running
//!   `sh -c true` 500 times. Target: at most 1.5x.
//! - `exec-1GiB`: one `sluice run` of a script whose `bash` call writes
//!   1 GiB to stdout, against `sh -c` of the same command redirected to
//!   /dev/null. Targets: at most 2x the time; sluice's peak memory (max RSS
//!   of the `sluice` process) under 64 MiB. A third side, the command piped
//!   through `cat` to /dev/null, is the floor any pipe reader pays.
//!
//! Both run under `--policy unconfined --no-audit`: the commands run without
//! a sandbox, whose cost `sandbox-true` measures against bare bubblewrap.
//!
//! Not a criterion bench: each sample is a process tree of a second or more.

mod support;

use std::path::Path;
use std::process::Command;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 500;
const GIB: u64 = 1 << 30;

/// `sluice run` of `script` with nothing to confine or record, so that
/// what is timed is the process flow itself: confinement has its own bench
/// against bare bubblewrap (sandbox.rs), the record its own (audit.rs).
fn sluice_run(script: &Path, ws: &Path) -> Command {
    let mut c = Command::new(SLUICE);
    c.arg("run").arg(script).arg("--workspace").arg(ws);
    c.args(["--policy", "unconfined", "--no-audit"]);
    c
}

fn sh(line: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(line);
    c
}

fn main() {
    // `cargo bench -- FILTER`: run only when the filter names this bench.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty()
        && !filter
            .iter()
            .any(|f| "exec-spawn exec-1GiB".contains(f.as_str()))
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();

    let spawn_lua = scripts.path().join("spawn.lua");
    std::fs::write(
        &spawn_lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0, tostring(err))\nend\n"
        ),
    )
    .unwrap();
    let loop_line = format!("i=0; while [ $i -lt {CALLS} ]; do sh -c true; i=$((i+1)); done");

    let writer = format!("head -c {GIB} /dev/zero");
    let big_lua = scripts.path().join("big.lua");
    std::fs::write(
        &big_lua,
        format!(
            "local r, err = sluice.bash{{command = \"{writer}\"}}\n\
             assert(r, tostring(err))\n\
             assert(r.stdoutDroppedBytes == {} - 30000, r.stdoutDroppedBytes)\n",
            GIB
        ),
    )
    .unwrap();
    let baseline_big = format!("{writer} > /dev/null");
    // What any reader of a pipe pays: the same bytes through `cat`.
    let floor_big = format!("{writer} | cat > /dev/null");

    // Warm both sides once (page cache, binary loading).
    measure(&mut sluice_run(&spawn_lua, &ws));
    measure(&mut sh(&loop_line));

    let turns = 7;
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..turns {
        a.push(measure(&mut sluice_run(&spawn_lua, &ws)).0);
        b.push(measure(&mut sh(&loop_line)).0);
    }
    let (ma, mb) = (median(&mut a), median(&mut b));
    let ratio = ma.as_secs_f64() / mb.as_secs_f64();
    println!(
        "exec-spawn: {CALLS} sluice.bash{{command=\"true\"}} {ma:.2?} / {CALLS} sh -c true {mb:.2?} \
         (per call {:.0?} / {:.0?})",
        ma / CALLS as u32,
        mb / CALLS as u32
    );
    let spawn_line = format!(
        "ratio exec-spawn sluice.bash/sh-loop = {ratio:.2}x (target <= 1.5x): {} \
         [medians of {turns} interleaved turns: {ma:.2?} / {mb:.2?}]",
        verdict(ratio <= 1.5)
    );

    let turns = 5;
    let (mut a, mut b, mut c, mut rss) = (vec![], vec![], vec![], vec![]);
    for _ in 0..turns {
        let (t, kib) = measure(&mut sluice_run(&big_lua, &ws));
        a.push(t);
        rss.push(kib);
        b.push(measure(&mut sh(&baseline_big)).0);
        c.push(measure(&mut sh(&floor_big)).0);
    }
    let (ma, mb, mc) = (median(&mut a), median(&mut b), median(&mut c));
    let peak_mib = *rss.iter().max().unwrap() as f64 / 1024.0;
    let ratio = ma.as_secs_f64() / mb.as_secs_f64();
    println!(
        "exec-1GiB: through bash {ma:.2?} / to /dev/null {mb:.2?} / through cat {mc:.2?}; \
         peak RSS of sluice {peak_mib:.1} MiB"
    );
    println!();
    println!("{spawn_line}");
    println!(
        "ratio exec-1GiB bash/devnull = {ratio:.2}x (target <= 2x): {} \
         [medians of {turns} interleaved turns: {ma:.2?} / {mb:.2?}; command: {writer}]",
        verdict(ratio <= 2.0)
    );
    println!(
        "ratio exec-1GiB bash/cat-floor = {:.2}x (no target, information: cat/devnull = {:.2}x is what \
         reading the pipe at all costs)",
        ma.as_secs_f64() / mc.as_secs_f64(),
        mc.as_secs_f64() / mb.as_secs_f64()
    );
    println!(
        "ratio exec-1GiB peak RSS of sluice = {peak_mib:.1} MiB (target < 64 MiB): {}",
        verdict(peak_mib < 64.0)
    );
}
