//! Tasks side by side, each part against the same work done one call after
//! another in one run (the peer: sluice without tasks):
//!
//! - `concurrency-fetch`: 8 tasks each `fetch` a loopback endpoint that
//!   answers after 200 ms. Target: under 300 ms in all (sequential: 1.6 s).
//! - `concurrency-sleep`: 8 tasks each run `sleep 0.2` confined by
//!   bubblewrap (hermetic, declaring no paths, so nothing orders them;
//!   `--max-procs 8`, as the default is the machine's cores). Target: under
//!   400 ms in all.
//! - `concurrency-grep`: 300 small `read`s in one task while another greps
//!   a 1,000-file tree over and over. Target: the reads take at most 2x
//!   their time alone.
//!
//! Times are the script's own (`sluice.now()` around the work), so the
//! run's start-up is not in them; each figure is the median of 5 runs.
//! Not a criterion bench: each sample is a whole run.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{slow_server, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const TURNS: usize = 5;

fn main() {
    let wanted = support::wanted();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    if wanted("concurrency-fetch") {
        fetch(dir.path(), &ws);
    }
    if wanted("concurrency-sleep") {
        sleep(dir.path(), &ws);
    }
    if wanted("concurrency-grep") {
        grep(dir.path(), &ws);
    }
}

/// Runs `script` in `ws` with `flags` and the milliseconds it printed last.
fn timed(dir: &Path, ws: &Path, name: &str, script: &str, flags: &[&str]) -> f64 {
    let lua = dir.join(name);
    std::fs::write(&lua, script).unwrap();
    let out = Command::new(SLUICE)
        .arg("run")
        .arg(&lua)
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .env("SLUICE_CACHE_DIR", dir.join("caches"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} printed no time: {stdout}"))
}

/// The medians of `TURNS` interleaved runs of two scripts.
fn medians(mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) -> (f64, f64) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for _ in 0..TURNS {
        xs.push(a());
        ys.push(b());
    }
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        v[v.len() / 2]
    };
    (mid(&mut xs), mid(&mut ys))
}

fn fetch(dir: &Path, ws: &Path) {
    let origin = slow_server(Duration::from_millis(200));
    let call = format!(
        "local r, err = sluice.fetch{{url = \"{origin}/x\"}}; assert(r and r.body == \"ok\", tostring(err))"
    );
    let tasks = format!(
        "local t0 = sluice.now()\nsluice.map({{1,2,3,4,5,6,7,8}}, function() {call} end)\nprint(sluice.now() - t0)\n"
    );
    let sequential =
        format!("local t0 = sluice.now()\nfor i = 1, 8 do {call} end\nprint(sluice.now() - t0)\n");
    let grant = format!("net:private:{origin}");
    let flags = ["--approve", grant.as_str()];
    let (t, s) = medians(
        || timed(dir, ws, "fetch-tasks.lua", &tasks, &flags),
        || timed(dir, ws, "fetch-seq.lua", &sequential, &flags),
    );
    println!(
        "ratio concurrency-fetch tasks/sequential = {:.2}x (target: 8 fetches of a 200 ms endpoint under 300 ms): {} [medians of {TURNS}: {t:.0} ms / {s:.0} ms]",
        t / s,
        verdict(t < 300.0)
    );
}

fn sleep(dir: &Path, ws: &Path) {
    let call = "local r, err = sluice.bash{command = \"sleep 0.2\", mode = \"hermetic\", reads = {}, writes = {}}; \
                assert(r and r.exitCode == 0 and r.sandbox, tostring(err))";
    let tasks = format!(
        "local t0 = sluice.now()\nsluice.map({{1,2,3,4,5,6,7,8}}, function() {call} end)\nprint(sluice.now() - t0)\n"
    );
    let sequential =
        format!("local t0 = sluice.now()\nfor i = 1, 8 do {call} end\nprint(sluice.now() - t0)\n");
    let flags = ["--sandbox", "bwrap", "--max-procs", "8"];
    let (t, s) = medians(
        || timed(dir, ws, "sleep-tasks.lua", &tasks, &flags),
        || timed(dir, ws, "sleep-seq.lua", &sequential, &flags),
    );
    println!(
        "ratio concurrency-sleep tasks/sequential = {:.2}x (target: 8 confined `sleep 0.2` under 400 ms): {} [medians of {TURNS}: {t:.0} ms / {s:.0} ms]",
        t / s,
        verdict(t < 400.0)
    );
}

fn grep(dir: &Path, ws: &Path) {
    let tree = ws.join("tree");
    for d in 0..20 {
        let sub = tree.join(format!("d{d:02}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..50 {
            std::fs::write(
                sub.join(format!("f{f:02}.txt")),
                support::text_file(8 * 1024, 80),
            )
            .unwrap();
        }
    }
    std::fs::write(ws.join("small.txt"), support::text_file(2 * 1024, 80)).unwrap();
    let reads = "local t0 = sluice.now()\n\
                 for i = 1, 300 do assert(sluice.read{path = \"small.txt\"}) end\n\
                 return sluice.now() - t0";
    let alone = format!("local ms = (function() {reads} end)()\nprint(ms)\n");
    let beside = format!(
        "local done = false\n\
         local g = sluice.spawn(function()\n\
           local n = 0\n\
           repeat n = n + 1; assert(sluice.grep{{pattern = \"juliet kilo\", root = \"tree\", filesWithMatches = true}}) until done\n\
           return n\n\
         end)\n\
         sluice.sleep(5)\n\
         local ms = (function() {reads} end)()\n\
         done = true\n\
         assert(g:await() >= 1)\n\
         print(ms)\n"
    );
    let (b, a) = medians(
        || timed(dir, ws, "grep-beside.lua", &beside, &[]),
        || timed(dir, ws, "grep-alone.lua", &alone, &[]),
    );
    println!(
        "ratio concurrency-grep reads-beside-grep/reads-alone = {:.2}x (target <= 2x): {} [medians of {TURNS}: {b:.1} ms / {a:.1} ms for 300 reads]",
        b / a.max(0.001),
        verdict(b <= 2.0 * a)
    );
}
