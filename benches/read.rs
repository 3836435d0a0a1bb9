//! What a `read` costs from Lua, against what plain Rust pays for the same
//! bytes. BENCHMARKS.md has the targets, the command and the figures.
//!
//! Two groups, each a sluice side and a std baseline on the same file:
//!
//! - `read-4KiB`: `sluice.read{path = ...}` of a 4 KiB text file from Lua,
//!   against `std::fs::read_to_string` of that file.
//! - `read-64MiB`: the default page of a 64 MiB text file (80-byte lines),
//!   read through the same Lua flow, against a `BufRead::lines()` scan of that
//!   file counting its lines.
//!
//! Each group also has a `rust-call` row, the flow called from Rust through
//! `Runtime::call` without Lua, so a report can say whether time goes to the
//! Lua boundary or to the flow.
//!
//! The Lua side runs `iters` reads in one loop inside one `call_async`, driven
//! by a current-thread tokio runtime's `block_on`, so the cost of entering Lua
//! and the executor is spread over the whole sample.
//!
//! After criterion's groups, the bench measures each sluice/baseline pair
//! again, interleaved (sluice, baseline, sluice, ...), and prints the ratio of
//! the medians as `ratio ...` lines: one command gives the figures.

use criterion::measurement::WallTime;
use criterion::{black_box, BenchmarkGroup, Criterion};
use mlua::Function;
use serde_json::json;
use sluice::Runtime;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

const SMALL_NAME: &str = "small.txt";
const SMALL_BYTES: usize = 4 * 1024;
const SMALL_LINE: usize = 64;
const LARGE_NAME: &str = "large.txt";
const LARGE_BYTES: usize = 64 * 1024 * 1024;
const LARGE_LINE: usize = 80;

/// The targets the issue sets: sluice at most this many times the baseline.
const SMALL_TARGET: f64 = 3.0;
const LARGE_TARGET: f64 = 2.0;

/// `n` reads of path `p` from Lua; an error stops the loop and the bench.
const LUA_LOOP: &str = "return function(n, p)
  for i = 1, n do
    local out, err = sluice.read{path = p}
    if not out then error(tostring(err)) end
  end
end";

/// One read, returning what the page says, to check the fixture once.
const LUA_ONCE: &str = "return function(p)
  local out, err = sluice.read{path = p}
  if not out then error(tostring(err)) end
  return out.totalLines, out.endLine, #out.content
end";

/// The workspace, its files and the runtime reading them.
struct Fixture {
    _dir: TempDir,
    small: PathBuf,
    large: PathBuf,
    executor: tokio::runtime::Runtime,
    // `lua_loop` belongs to `runtime`'s Lua state; declared first, dropped first.
    lua_loop: Function,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temp folder");
        let small = dir.path().join(SMALL_NAME);
        let large = dir.path().join(LARGE_NAME);
        fs::write(&small, text_file(SMALL_BYTES, SMALL_LINE)).expect("write the 4 KiB file");
        fs::write(&large, text_file(LARGE_BYTES, LARGE_LINE)).expect("write the 64 MiB file");
        let runtime = Runtime::builder()
            .workspace(dir.path())
            .build()
            .expect("a runtime over the temp folder");
        let lua_loop = runtime.function(LUA_LOOP).expect("the Lua read loop");
        let executor = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let fixture = Fixture {
            _dir: dir,
            small,
            large,
            executor,
            lua_loop,
            runtime,
        };
        fixture.check();
        fixture
    }

    /// Both sides see the file the same way: the Lua read succeeds, counts
    /// the lines the baseline counts, and the large file's page is the default
    /// one (cut by the byte budget, not the whole file).
    fn check(&self) {
        let once = self
            .runtime
            .function(LUA_ONCE)
            .expect("the Lua single read");
        for (name, path) in [(SMALL_NAME, &self.small), (LARGE_NAME, &self.large)] {
            let (total, end, content): (u64, u64, usize) = self
                .executor
                .block_on(once.call_async(name))
                .unwrap_or_else(|e| panic!("sluice.read{{path = {name:?}}} failed: {e}"));
            assert_eq!(total, scan_lines(path), "{name}: totalLines");
            assert_eq!(
                read_to_string(path).len(),
                fs::metadata(path).unwrap().len() as usize
            );
            if name == SMALL_NAME {
                assert_eq!(
                    (end, content + 1),
                    (total, SMALL_BYTES),
                    "{name}: the whole file"
                );
            } else {
                assert!(
                    end < total && content <= sluice::flows::read::PAGE_BYTES,
                    "{name}: one page"
                );
            }
        }
    }

    /// `iters` Lua reads of `name` in one call, timed with the block_on.
    fn lua_reads(&self, name: &str, iters: u64) -> Duration {
        let start = Instant::now();
        self.executor
            .block_on(self.lua_loop.call_async::<()>((iters, name)))
            .unwrap_or_else(|e| panic!("Lua read loop over {name}: {e}"));
        start.elapsed()
    }

    /// `iters` reads of `name` through `Runtime::call`, without Lua.
    fn rust_calls(&self, name: &str, iters: u64) -> Duration {
        let input = json!({ "path": name });
        let start = Instant::now();
        self.executor.block_on(async {
            for _ in 0..iters {
                let out = self.runtime.call("read", input.clone()).await;
                black_box(out.unwrap_or_else(|e| panic!("read {name}: {e:?}")));
            }
        });
        start.elapsed()
    }
}

/// Text of exactly `bytes` bytes in `\n`-ended lines of `line` bytes (the last
/// one shorter when `line` does not divide `bytes`), words varying by line.
fn text_file(bytes: usize, line: usize) -> String {
    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    let mut out = String::with_capacity(bytes);
    let mut n = 0usize;
    while out.len() < bytes {
        let len = line.min(bytes - out.len());
        let start = out.len();
        out.push_str(&format!("{n:07}"));
        let mut w = n;
        while out.len() - start < len - 1 {
            out.push(' ');
            out.push_str(WORDS[w % WORDS.len()]);
            w = w / 3 + 7;
        }
        out.truncate(start + len - 1);
        out.push('\n');
        n += 1;
    }
    out
}

/// The small file's baseline: the whole file as a `String`.
fn read_to_string(path: &Path) -> String {
    fs::read_to_string(path).expect("read_to_string")
}

/// The large file's baseline: the idiomatic `BufRead` scan,
/// `BufReader::new(File::open(p)?).lines()`, counting the lines.
fn scan_lines(path: &Path) -> u64 {
    let reader = BufReader::new(File::open(path).expect("open"));
    let mut n = 0;
    for line in reader.lines() {
        black_box(line.expect("a UTF-8 line"));
        n += 1;
    }
    n
}

fn time_baseline(iters: u64, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed()
}

fn bench_small(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("read-4KiB");
    g.warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .sample_size(50);
    g.bench_function("lua sluice.read", |b| {
        b.iter_custom(|iters| fx.lua_reads(SMALL_NAME, iters))
    });
    g.bench_function("rust-call Runtime::call", |b| {
        b.iter_custom(|iters| fx.rust_calls(SMALL_NAME, iters))
    });
    g.bench_function("std::fs::read_to_string", |b| {
        b.iter_custom(|iters| time_baseline(iters, || drop(black_box(read_to_string(&fx.small)))))
    });
    g.finish();
}

fn bench_large(c: &mut Criterion, fx: &Fixture) {
    let mut g: BenchmarkGroup<'_, WallTime> = c.benchmark_group("read-64MiB");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .sample_size(10);
    g.bench_function("lua sluice.read page", |b| {
        b.iter_custom(|iters| fx.lua_reads(LARGE_NAME, iters))
    });
    g.bench_function("rust-call Runtime::call page", |b| {
        b.iter_custom(|iters| fx.rust_calls(LARGE_NAME, iters))
    });
    g.bench_function("BufRead::lines count", |b| {
        b.iter_custom(|iters| {
            time_baseline(iters, || {
                black_box(scan_lines(&fx.large));
            })
        })
    });
    g.finish();
}

/// Median per-iteration times of `a` and `b` over `reps` interleaved runs of
/// `iters` iterations each.
fn paired_medians(
    reps: usize,
    iters: u64,
    mut a: impl FnMut(u64) -> Duration,
    mut b: impl FnMut(u64) -> Duration,
) -> (Duration, Duration) {
    a(iters);
    b(iters);
    let (mut ta, mut tb) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        ta.push(a(iters) / iters as u32);
        tb.push(b(iters) / iters as u32);
    }
    ta.sort();
    tb.sort();
    (ta[reps / 2], tb[reps / 2])
}

fn report(name: &str, sides: &str, target: f64, reps: usize, (s, base): (Duration, Duration)) {
    let ratio = s.as_secs_f64() / base.as_secs_f64();
    let verdict = if ratio <= target { "met" } else { "MISSED" };
    println!(
        "ratio {name} {sides} = {ratio:.2}x (target <= {target}x): {verdict} \
         [sluice {s:.2?}, baseline {base:.2?}; medians of {reps} interleaved runs]"
    );
}

fn ratios(fx: &Fixture) {
    println!();
    let small = paired_medians(
        31,
        2000,
        |n| fx.lua_reads(SMALL_NAME, n),
        |n| time_baseline(n, || drop(black_box(read_to_string(&fx.small)))),
    );
    let large = paired_medians(
        15,
        1,
        |n| fx.lua_reads(LARGE_NAME, n),
        |n| {
            time_baseline(n, || {
                black_box(scan_lines(&fx.large));
            })
        },
    );
    report(
        "read-4KiB",
        "lua/std::fs::read_to_string",
        SMALL_TARGET,
        31,
        small,
    );
    report("read-64MiB", "lua/BufRead::lines", LARGE_TARGET, 15, large);
}

/// `cargo bench` passes `--bench`; `cargo test --benches` does not, and then
/// criterion runs each routine once as a test and the ratios are skipped.
fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    has("--bench") && !has("--test") && !has("--list") && !has("--profile-time")
}

fn main() {
    let fx = Fixture::new();
    let mut c = Criterion::default().configure_from_args();
    bench_small(&mut c, &fx);
    bench_large(&mut c, &fx);
    c.final_summary();
    if benchmarking() {
        ratios(&fx);
    }
}
