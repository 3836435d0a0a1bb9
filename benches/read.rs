//! What a `read` costs from Lua, against what plain Rust pays for the same
//! bytes. BENCHMARKS.md has the targets, the command and the figures.
//!
//! Two groups, each a sluice side and a std baseline on the same file:
//!
//! - `read-4KiB`: `sluice.read{path = ...}` of a 4 KiB text file from Lua,
//!   against `std::fs::read_to_string` of that file. Target: at most 3x.
//! - `read-64MiB`: the default page of a 64 MiB text file (80-byte lines),
//!   read through the same Lua flow, against the idiomatic `BufRead` scan,
//!   `BufReader::new(File::open(p)?).lines()` counting the lines. Target:
//!   under 2x. A `read_line` into one reused `String` is measured too, as
//!   information: it is the faster scan, and the issue allowed either.
//!
//! Each group also has a `rust-call` row, the flow called from Rust through
//! `Runtime::call` without Lua, so a report can tell the Lua boundary's share
//! from the flow's.
//!
//! The Lua side runs `iters` reads in one loop inside one `call_async`, driven
//! by a current-thread tokio runtime's `block_on`, so entering Lua and the
//! executor is paid once per sample, not once per read.
//!
//! After criterion's groups the bench prints one `ratio ...` line per target:
//! the ratio of medians from a separate run where the sides take turns
//! (sluice, baseline, sluice, ...), so drift on a noisy machine hits both,
//! and, as a cross-check, the ratio of the medians of criterion's own samples.

mod support;

use criterion::{black_box, Criterion};
use mlua::Function;
use serde_json::json;
use sluice::Runtime;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::text_file;
use tempfile::TempDir;

const SMALL_NAME: &str = "small.txt";
const SMALL_BYTES: usize = 4 * 1024;
const SMALL_LINE: usize = 64;
const LARGE_NAME: &str = "large.txt";
/// Exactly the largest file `read` accepts (`sluice::internals::read::MAX_FILE_BYTES`).
const LARGE_BYTES: usize = 64 * 1024 * 1024;
const LARGE_LINE: usize = 80;

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
    // Belongs to `runtime`'s Lua state: declared before it, so dropped first.
    lua_loop: Function,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temp folder");
        // As deep as a real project folder: path resolution must not grow
        // with the workspace's depth.
        let ws = dir.path().join("home/user/src/project");
        fs::create_dir_all(&ws).expect("create the workspace");
        let small = ws.join(SMALL_NAME);
        let large = ws.join(LARGE_NAME);
        fs::write(&small, text_file(SMALL_BYTES, SMALL_LINE)).expect("write the 4 KiB file");
        fs::write(&large, text_file(LARGE_BYTES, LARGE_LINE)).expect("write the 64 MiB file");
        // Unrecorded, as the figures in BENCHMARKS.md were taken: the
        // read path alone.
        let runtime = Runtime::builder()
            .workspace(&ws)
            .no_audit()
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

    /// Both sides see each file the same way: the Lua read succeeds and counts
    /// the lines the baselines count; the small file comes back whole and the
    /// large one as the default page, cut by the byte budget.
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
            assert_eq!(
                total,
                lines_count(path),
                "{name}: totalLines against lines()"
            );
            assert_eq!(
                total,
                read_line_count(path),
                "{name}: totalLines against read_line"
            );
            if name == SMALL_NAME {
                assert_eq!(read_to_string(path).len(), SMALL_BYTES);
                assert_eq!((end, content + 1), (total, SMALL_BYTES), "{name}: whole");
            } else {
                let page = sluice::internals::read::PAGE_BYTES;
                assert!(end < total && content <= page, "{name}: one page");
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

/// The 4 KiB baseline: the whole file as a `String`.
fn read_to_string(path: &Path) -> String {
    fs::read_to_string(path).expect("read_to_string")
}

/// The 64 MiB baseline: the idiomatic `BufRead` scan, a `String` per line.
fn lines_count(path: &Path) -> u64 {
    let reader = BufReader::new(File::open(path).expect("open"));
    let mut n = 0;
    for line in reader.lines() {
        black_box(line.expect("a UTF-8 line"));
        n += 1;
    }
    n
}

/// The faster scan, for information: `read_line` into one reused `String`.
fn read_line_count(path: &Path) -> u64 {
    let mut reader = BufReader::new(File::open(path).expect("open"));
    let mut line = String::new();
    let mut n = 0;
    while reader.read_line(&mut line).expect("a UTF-8 line") > 0 {
        black_box(&line);
        line.clear();
        n += 1;
    }
    n
}

/// `iters` runs of `f`, timed.
fn repeat<T>(iters: u64, mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

/// Times `iters` iterations of one row.
type Routine<'a> = Box<dyn Fn(u64) -> Duration + 'a>;

/// One benchmark group: its rows, criterion's settings for it, and the ratios
/// it reports.
struct Group<'a> {
    name: &'static str,
    warm_up: Duration,
    measurement: Duration,
    sample_size: usize,
    rows: Vec<(&'static str, Routine<'a>)>,
    /// Iterations in one turn of the interleaved ratio run, and turns per side.
    turn_iters: u64,
    turns: usize,
    ratios: Vec<Ratio>,
}

/// `sluice` row time over `baseline` row time, against `target` if any.
struct Ratio {
    sluice: &'static str,
    baseline: &'static str,
    label: &'static str,
    target: Option<f64>,
}

fn groups(fx: &Fixture) -> Vec<Group<'_>> {
    vec![
        Group {
            name: "read-4KiB",
            warm_up: Duration::from_secs(2),
            measurement: Duration::from_secs(5),
            sample_size: 50,
            rows: vec![
                ("lua sluice.read", Box::new(|n| fx.lua_reads(SMALL_NAME, n))),
                (
                    "rust Runtime::call",
                    Box::new(|n| fx.rust_calls(SMALL_NAME, n)),
                ),
                (
                    "std::fs::read_to_string",
                    Box::new(|n| repeat(n, || read_to_string(&fx.small))),
                ),
            ],
            turn_iters: 2000,
            turns: 51,
            ratios: vec![Ratio {
                sluice: "lua sluice.read",
                baseline: "std::fs::read_to_string",
                label: "lua/std::fs::read_to_string",
                target: Some(3.0),
            }],
        },
        Group {
            name: "read-64MiB",
            warm_up: Duration::from_secs(1),
            measurement: Duration::from_secs(6),
            sample_size: 10,
            rows: vec![
                (
                    "lua sluice.read page",
                    Box::new(|n| fx.lua_reads(LARGE_NAME, n)),
                ),
                (
                    "rust Runtime::call page",
                    Box::new(|n| fx.rust_calls(LARGE_NAME, n)),
                ),
                (
                    "BufRead::lines count",
                    Box::new(|n| repeat(n, || lines_count(&fx.large))),
                ),
                (
                    "BufRead::read_line count",
                    Box::new(|n| repeat(n, || read_line_count(&fx.large))),
                ),
            ],
            turn_iters: 1,
            turns: 21,
            ratios: vec![
                Ratio {
                    sluice: "lua sluice.read page",
                    baseline: "BufRead::lines count",
                    label: "lua/BufRead::lines",
                    target: Some(2.0),
                },
                Ratio {
                    sluice: "lua sluice.read page",
                    baseline: "BufRead::read_line count",
                    label: "lua/BufRead::read_line",
                    target: None,
                },
            ],
        },
    ]
}

/// Per-iteration times of every call criterion made, by benchmark id.
type Samples = RefCell<HashMap<String, Vec<Duration>>>;

fn run_criterion(c: &mut Criterion, g: &Group<'_>, samples: &Samples) {
    let mut group = c.benchmark_group(g.name);
    group
        .warm_up_time(g.warm_up)
        .measurement_time(g.measurement)
        .sample_size(g.sample_size);
    for (row, routine) in &g.rows {
        let id = format!("{}/{row}", g.name);
        group.bench_function(*row, |b| {
            b.iter_custom(|iters| {
                let took = routine(iters);
                let per_iter = took.div_f64(iters as f64);
                samples
                    .borrow_mut()
                    .entry(id.clone())
                    .or_default()
                    .push(per_iter);
                took
            })
        });
    }
    group.finish();
}

fn median(mut xs: Vec<Duration>) -> Option<Duration> {
    xs.sort();
    xs.get(xs.len() / 2).copied()
}

/// The median of criterion's measurement samples of `id`: its last
/// `sample_size` calls (the calls before them are its warm-up).
fn criterion_median(samples: &Samples, id: &str, sample_size: usize) -> Option<Duration> {
    let all = samples.borrow();
    let calls = all.get(id)?;
    median(calls[calls.len().saturating_sub(sample_size)..].to_vec())
}

/// Median per-iteration time of each named row over `g.turns` turns, the rows
/// taking turns in order, after one untimed turn each.
fn interleaved(g: &Group<'_>, names: &[&'static str]) -> HashMap<&'static str, Duration> {
    let rows: Vec<(&'static str, &Routine<'_>)> = names
        .iter()
        .map(|name| {
            let (_, routine) = g.rows.iter().find(|(row, _)| row == name).expect("a row");
            (*name, routine)
        })
        .collect();
    for (_, routine) in &rows {
        routine(g.turn_iters);
    }
    let mut times: HashMap<&'static str, Vec<Duration>> = HashMap::new();
    for _ in 0..g.turns {
        for (name, routine) in &rows {
            let per_iter = routine(g.turn_iters).div_f64(g.turn_iters as f64);
            times.entry(name).or_default().push(per_iter);
        }
    }
    times
        .into_iter()
        .map(|(name, t)| (name, median(t).expect("at least one turn")))
        .collect()
}

fn report(g: &Group<'_>, samples: &Samples) {
    let mut names: Vec<&'static str> = Vec::new();
    for r in &g.ratios {
        for name in [r.sluice, r.baseline] {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let turns = interleaved(g, &names);
    for r in &g.ratios {
        let (s, base) = (turns[r.sluice], turns[r.baseline]);
        let ratio = s.as_secs_f64() / base.as_secs_f64();
        let target = match r.target {
            Some(t) if ratio <= t => format!("target <= {t}x): met"),
            Some(t) => format!("target <= {t}x): MISSED"),
            None => "no target, information)".to_string(),
        };
        let id = |row: &str| format!("{}/{row}", g.name);
        let cross = match (
            criterion_median(samples, &id(r.sluice), g.sample_size),
            criterion_median(samples, &id(r.baseline), g.sample_size),
        ) {
            (Some(cs), Some(cb)) => format!(
                "{:.2}x ({cs:.2?} / {cb:.2?})",
                cs.as_secs_f64() / cb.as_secs_f64()
            ),
            _ => "not run".to_string(),
        };
        println!(
            "ratio {} {} = {ratio:.2}x ({target} \
             [medians of {} interleaved turns: {s:.2?} / {base:.2?}; criterion's samples: {cross}]",
            g.name, r.label, g.turns
        );
    }
}

/// `cargo bench` passes `--bench`; `cargo test --benches` does not, and then
/// criterion runs each routine once as a test, and no ratios are printed.
fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    has("--bench") && !has("--test") && !has("--list") && !has("--profile-time")
}

fn main() {
    let fx = Fixture::new();
    let groups = groups(&fx);
    let samples = Samples::default();
    let mut c = Criterion::default().configure_from_args();
    for g in &groups {
        run_criterion(&mut c, g, &samples);
    }
    c.final_summary();
    if benchmarking() {
        println!();
        for g in &groups {
            report(g, &samples);
        }
    }
}
