//! What the permission kernel costs. BENCHMARKS.md has the targets, the
//! command and the figures.
//!
//! - `kernel-decision`: one decision against a policy file of 50 rules plus a
//!   `decide` hook, for a capability the hook has no opinion on, so every step
//!   of the order runs (ceiling, deny rules, the hook, allow rules) and the
//!   file is checked for changes, as in a run. Target: median under 10 µs.
//! - `kernel-share`: a `sluice.read` of a 4 KiB file from Lua under the
//!   built-in default policy, and the kernel's decision on that read's
//!   capability alone. The kernel's share is decision / (read - decision):
//!   what authorization adds to a read that skipped it. Target: under 20%.
//!
//! After criterion's groups the bench prints `ratio ...` lines from medians
//! of a separate interleaved run.

use criterion::{black_box, Criterion};
use serde_json::json;
use sluice::internals::kernel::pattern::Vars;
use sluice::internals::kernel::policy::{shipped, Policy, Request, Source};
use sluice::internals::kernel::{Action, Capability, Kernel};
use sluice::Runtime;
use sluice::Tier;
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A policy of 50 rules and a decide hook; the last allow rule is the one
/// that grants `fs:read:${workspace}/src/...`.
fn fifty_rules() -> String {
    fifty_rules_text(true)
}

fn fifty_rules_text(hook: bool) -> String {
    let mut rules = String::new();
    for i in 0..20 {
        rules += &format!("    p.deny \"fs:*:${{workspace}}/secret{i}/**\",\n");
    }
    for i in 0..10 {
        rules += &format!("    p.ask \"net:post:api{i}.example.com\",\n");
    }
    for i in 0..19 {
        rules += &format!("    p.allow \"proc:spawn:tool{i} *\",\n");
    }
    rules += "    p.allow \"fs:read:${workspace}/src/**\",\n";
    let decide = if hook {
        "  decide = function(req)\n    if req.flow == \"bash\" and req.resource:find(\"curl\", 1, true) then\n      \
         return {decision = \"deny\", reason = \"no curl\"}\n    end\n  end,\n"
    } else {
        ""
    };
    format!(
        "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{\n{rules}  }},\n{decide}}}\n"
    )
}

struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    fifty: Kernel,
    fifty_no_hook: Kernel,
    fifty_embedded: Kernel,
    default: Kernel,
    executor: tokio::runtime::Runtime,
    // Belongs to `_runtime`'s Lua state: declared before it, so dropped first.
    lua_loop: mlua::Function,
    _runtime: Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = fs::canonicalize(dir.path())
            .unwrap()
            .join("home/user/src/project");
        fs::create_dir_all(workspace.join("src")).unwrap();
        // The 4 KiB file of the read bench: 64 lines of 64 bytes.
        fs::write(
            workspace.join("src/small.txt"),
            format!("{}\n", "x".repeat(63)).repeat(64),
        )
        .unwrap();
        let policy_file = dir.path().join("fifty.lua");
        fs::write(&policy_file, fifty_rules()).unwrap();
        let vars = Vars::new(workspace.clone());
        let fifty = Kernel::new(
            vec![Policy::load(Source::File(policy_file), vars.clone())],
            vec![],
            vars.clone(),
        );
        assert_eq!(fifty_rules().matches("p.").count(), 50, "fifty rules");
        let embedded = |text: String| Source::Embedded {
            name: "bench.lua",
            text: Box::leak(text.into_boxed_str()),
        };
        let fifty_no_hook = Kernel::new(
            vec![Policy::load(
                embedded(fifty_rules_text(false)),
                vars.clone(),
            )],
            vec![],
            vars.clone(),
        );
        let fifty_embedded = Kernel::new(
            vec![Policy::load(embedded(fifty_rules()), vars.clone())],
            vec![],
            vars.clone(),
        );
        let default = Kernel::new(
            vec![Policy::load(shipped("default").unwrap(), vars.clone())],
            vec![],
            vars.clone(),
        );
        // Unrecorded: the kernel's cost alone.
        let runtime = Runtime::builder()
            .workspace(&workspace)
            .no_audit()
            .build()
            .unwrap();
        let lua_loop = runtime
            .function(
                "return function(n, p) for i = 1, n do local out, err = sluice.read{path = p}; \
                 if not out then error(tostring(err)) end end end",
            )
            .unwrap();
        let executor = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            workspace,
            fifty,
            fifty_no_hook,
            fifty_embedded,
            default,
            executor,
            lua_loop,
            _runtime: runtime,
        }
    }

    fn capability(&self) -> Capability {
        Capability::fs(Action::FsRead, &self.workspace.join("src/small.txt"))
    }

    /// Time per decision over `n` decisions of `kernel` on the read's capability.
    fn decide(&self, kernel: &Kernel, n: u64) -> Duration {
        let cap = self.capability();
        let input = json!({"path": "src/small.txt"});
        let req = Request {
            capability: &cap,
            flow: "read",
            tier: Tier::Sealed,
            input: &input,
            run_id: "bench",
            task: "0",
            script: "bench",
            cwd: None,
        };
        let start = Instant::now();
        for _ in 0..n {
            let v = kernel.decide(black_box(&req));
            assert_eq!(v.decision.as_str(), "allow", "{v:?}");
        }
        start.elapsed()
    }

    /// Time for `n` Lua reads of the small file.
    fn read(&self, n: u64) -> Duration {
        let start = Instant::now();
        self.executor
            .block_on(self.lua_loop.call_async::<()>((n, "src/small.txt")))
            .unwrap();
        start.elapsed()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let fx = Fixture::new();
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("kernel-decision");
    g.bench_function("50 rules + decide hook", |b| {
        b.iter_custom(|n| fx.decide(&fx.fifty, n))
    });
    g.bench_function("same, built in (no file to check)", |b| {
        b.iter_custom(|n| fx.decide(&fx.fifty_embedded, n))
    });
    g.bench_function("50 rules, no hook, built in", |b| {
        b.iter_custom(|n| fx.decide(&fx.fifty_no_hook, n))
    });
    g.finish();
    let mut g = c.benchmark_group("kernel-share");
    g.bench_function("lua sluice.read 4KiB", |b| b.iter_custom(|n| fx.read(n)));
    g.bench_function("default policy decision", |b| {
        b.iter_custom(|n| fx.decide(&fx.default, n))
    });
    g.finish();
    c.final_summary();
    if std::env::args().any(|a| a == "--bench") {
        report(&fx);
    }
}

/// Medians of interleaved turns, printed as the ratio lines.
fn report(fx: &Fixture) {
    const TURNS: usize = 31;
    const N: u64 = 2000;
    let (mut fifty, mut read, mut default) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..TURNS {
        fifty.push(fx.decide(&fx.fifty, N).as_secs_f64() / N as f64);
        read.push(fx.read(N).as_secs_f64() / N as f64);
        default.push(fx.decide(&fx.default, N).as_secs_f64() / N as f64);
    }
    let (fifty, read, default) = (median(fifty), median(read), median(default));
    let share = default / (read - default);
    println!(
        "ratio kernel-decision 50 rules + decide hook = {:.2}µs per decision (target < 10µs): {}",
        fifty * 1e6,
        if fifty < 10e-6 { "met" } else { "MISSED" }
    );
    println!(
        "ratio kernel-share decision/(read - decision) = {:.1}% [default policy decision {:.2}µs, Lua read {:.2}µs] (target < 20%): {}",
        share * 100.0,
        default * 1e6,
        read * 1e6,
        if share < 0.20 { "met" } else { "MISSED" }
    );
}
