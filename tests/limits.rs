//! A policy's resource limits through the real binary, under bubblewrap
//! and landlock in turn: a command that allocates, writes, forks or spins
//! past its limit is stopped (or refused), and its result says which limit
//! it hit, what enforced it and where to raise it; a command cannot lift
//! its own limits even with every file writable; a real build fits the
//! default policy's limits. On this machine (root, cgroup v1 controllers)
//! memory and pids are cgroups; `SLUICE_CGROUPS=off` shows the rlimit
//! fallback and says what it cannot enforce.

mod common;

use common::*;
use serde_json::Value;

const RUNNERS: [&str; 2] = ["bwrap", "landlock"];

/// A policy beside the default one that sets `limits` (a Lua table body).
fn limits_policy(ws: &Workspace, limits: &str) -> String {
    policy(
        ws,
        "tight.lua",
        &format!("return {{limits = {{{limits}}}}}\n"),
    )
}

/// Runs `line` with bash under `runner`, the default policy and `extra`,
/// with `env` for sluice; the result (or the error).
fn bash(ws: &Workspace, runner: &str, extra: &str, env: &[(&str, &str)], line: &str) -> Value {
    need_bwrap();
    let script = format!(
        "local r, e = sluice.bash{{command = {}, timeoutMs = 60000}}\nprint(sluice.json.encode(r or e))",
        lua_str(line)
    );
    let flags = [
        "--sandbox",
        runner,
        "--policy",
        "default",
        "--policy",
        extra,
        "--no-audit",
    ];
    let run = run_lua_env(ws.path(), &script, &flags, &[], env).ok();
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// The limits a result reports.
fn limits(out: &Value) -> &Value {
    &out["sandbox"]["limits"]
}

/// The names of the limits a result says were hit.
fn hits(out: &Value) -> Vec<String> {
    limits(out)["hit"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| h["limit"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn by_cgroup(mechanism: &Value) -> bool {
    matches!(mechanism.as_str(), Some("cgroup-v1" | "cgroup-v2"))
}

/// Asserts the result hit `limit` alone and its notice says the value and
/// the policy to raise it in.
fn assert_hit(runner: &str, out: &Value, limit: &str, value: u64) {
    assert_eq!(hits(out), [limit], "{runner}: {out}");
    let notice = limits(out)["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains(&format!("limits.{limit} = {value}")) && notice.contains("tight.lua"),
        "{runner}: {notice}"
    );
}

const ALLOCATE: &str = "python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'";

#[test]
fn a_command_allocating_past_memory_mb_is_killed_by_its_memory_cgroup_and_says_so() {
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "memoryMb = 64");
        let out = bash(&ws, runner, &tight, &[], ALLOCATE);
        assert_eq!(out["exitCode"], 137, "{runner}: {out}");
        assert!(
            by_cgroup(&limits(&out)["enforcement"]["memoryMb"]),
            "{runner}: {out}"
        );
        assert_eq!(limits(&out)["memoryMb"], 64);
        assert_hit(runner, &out, "memoryMb", 64);
        assert!(limits(&out)["hit"][0]["how"]
            .as_str()
            .unwrap()
            .contains("OOM killer"));
        // The control: the same command fits a larger limit.
        let tight = limits_policy(&ws, "memoryMb = 1024");
        let out = bash(&ws, runner, &tight, &[], ALLOCATE);
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert_eq!(out["stdout"], "268435456\n");
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

#[test]
fn without_cgroups_an_allocation_past_memory_mb_fails_under_rlimit_data_and_says_partial() {
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "memoryMb = 64");
        let off = [("SLUICE_CGROUPS", "off")];
        let out = bash(&ws, runner, &tight, &off, ALLOCATE);
        assert_eq!(out["exitCode"], 1, "{runner}: {out}");
        assert!(out["stderr"].as_str().unwrap().contains("MemoryError"));
        assert_eq!(limits(&out)["enforcement"]["memoryMb"], "rlimit");
        assert_hit(runner, &out, "memoryMb", 64);
        let partial = limits(&out)["partial"].to_string();
        assert!(
            partial.contains("RLIMIT_DATA") && partial.contains("SLUICE_CGROUPS=off"),
            "{runner}: {partial}"
        );
    }
}

#[test]
fn a_file_written_past_file_size_mb_stops_at_the_limit_and_says_so() {
    for runner in RUNNERS {
        let ws = workspace();
        std::fs::create_dir(ws.file("out")).unwrap();
        let tight = limits_policy(&ws, "fileSizeMb = 1");
        // Python ignores SIGXFSZ: its write fails with EFBIG.
        let out = bash(
            &ws,
            runner,
            &tight,
            &[],
            "python3 -c 'open(\"out/big.bin\", \"wb\").write(b\"x\" * (3 << 20))'",
        );
        assert_eq!(out["exitCode"], 1, "{runner}: {out}");
        assert!(out["stderr"].as_str().unwrap().contains("File too large"));
        assert_eq!(limits(&out)["enforcement"]["fileSizeMb"], "rlimit");
        assert_hit(runner, &out, "fileSizeMb", 1);
        let size = std::fs::metadata(ws.file("out/big.bin")).unwrap().len();
        assert_eq!(size, 1 << 20, "{runner}: the file grew past the limit");
        // A program that keeps the default action dies of SIGXFSZ.
        let out = bash(
            &ws,
            runner,
            &tight,
            &[],
            "head -c 3000000 /dev/zero > out/head.bin",
        );
        assert_eq!(out["exitCode"], 128 + 25, "{runner}: {out}");
        assert_hit(runner, &out, "fileSizeMb", 1);
        assert_eq!(
            std::fs::metadata(ws.file("out/head.bin")).unwrap().len(),
            1 << 20
        );
        // The control: a file under the limit is written whole.
        let out = bash(
            &ws,
            runner,
            &tight,
            &[],
            "head -c 1000000 /dev/zero > out/small.bin",
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

/// Starts 60 sleepers at once, printing a line for each that started.
const FORKS: &str = "for i in $(seq 60); do sleep 3 & echo started; done; wait";

fn started(out: &Value) -> usize {
    out["stdout"].as_str().unwrap().matches("started").count()
}

#[test]
fn forks_past_pids_fail_and_the_result_says_the_pids_limit_refused_them() {
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "pids = 16");
        let out = bash(&ws, runner, &tight, &[], FORKS);
        assert!(
            by_cgroup(&limits(&out)["enforcement"]["pids"]),
            "{runner}: {out}"
        );
        assert!(started(&out) < 16, "{runner}: {} started", started(&out));
        assert!(
            out["stderr"].as_str().unwrap().contains("fork"),
            "{runner}: {out}"
        );
        assert_hit(runner, &out, "pids", 16);
        // The control: the same loop fits a larger limit.
        let roomy = limits_policy(&ws, "pids = 128");
        let out = bash(&ws, runner, &roomy, &[], FORKS);
        assert_eq!(
            (out["exitCode"].clone(), started(&out)),
            (0.into(), 60),
            "{runner}: {out}"
        );
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

#[test]
fn without_cgroups_a_root_sluice_says_pids_is_not_enforced_rather_than_claim_it() {
    assert!(
        nix::unistd::getuid().is_root(),
        "this test pins what a root sluice says (CI and this machine run as root)"
    );
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "pids = 16");
        let out = bash(&ws, runner, &tight, &[("SLUICE_CGROUPS", "off")], FORKS);
        assert_eq!(
            limits(&out)["enforcement"]["pids"],
            "none",
            "{runner}: {out}"
        );
        let partial = limits(&out)["partial"].to_string();
        assert!(
            partial.contains("pids: not enforced"),
            "{runner}: {partial}"
        );
        // Nothing held it, and the result claims no hit.
        assert_eq!(started(&out), 60, "{runner}: {out}");
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

#[test]
fn a_process_spinning_past_cpu_seconds_gets_sigxcpu_and_the_result_says_so() {
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "cpuSeconds = 1");
        let started = std::time::Instant::now();
        let out = bash(&ws, runner, &tight, &[], "python3 -c 'while True: pass'");
        assert!(
            started.elapsed().as_secs() < 20,
            "{runner}: not stopped in time"
        );
        assert_eq!(out["exitCode"], 128 + 24, "{runner}: {out}");
        assert_eq!(limits(&out)["enforcement"]["cpuSeconds"], "rlimit");
        assert_hit(runner, &out, "cpuSeconds", 1);
        // The control: a short computation finishes under the same limit.
        let out = bash(
            &ws,
            runner,
            &tight,
            &[],
            "python3 -c 'print(sum(range(10**5)))'",
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

/// Python that tries to lift the command's own limits: raise its cgroups'
/// limits, move itself to the hierarchy's root; prints what happened.
const LIFT: &str = r#"
import os
for line in open('/proc/self/cgroup').read().splitlines():
    _, ctl, path = line.split(':', 2)
    if ctl not in ('pids', 'memory'):
        continue
    own = '/sys/fs/cgroup/' + ctl + path
    limit = own + ('/pids.max' if ctl == 'pids' else '/memory.limit_in_bytes')
    for target, value in [(limit, 'max' if ctl == 'pids' else '-1'),
                          ('/sys/fs/cgroup/' + ctl + '/cgroup.procs', str(os.getpid()))]:
        try:
            with open(target, 'w') as f:
                f.write(value)
            print('WROTE', target)
        except OSError as e:
            print('refused', target, e.strerror)
print('still in', [l for l in open('/proc/self/cgroup').read().splitlines() if 'sluice-' in l])
"#;

#[test]
fn a_command_with_every_file_writable_cannot_lift_its_own_limits() {
    for runner in RUNNERS {
        let ws = workspace();
        std::fs::write(ws.file("lift.py"), LIFT).unwrap();
        let everything = policy(
            &ws,
            "tight.lua",
            "local p = require('sluice.policy')\nreturn {\n  rules = {p.allow 'fs:read:**', p.allow 'fs:write:/', \
             p.allow 'fs:write:/**', p.allow 'proc:spawn:*'},\n  limits = {pids = 16, memoryMb = 256},\n}\n",
        );
        let out = bash(
            &ws,
            runner,
            &everything,
            &[],
            &format!("python3 lift.py; {FORKS}"),
        );
        assert_eq!(
            out["sandbox"]["mode"], "danger-full-access",
            "{runner}: {out}"
        );
        let said = out["stdout"].as_str().unwrap();
        assert!(!said.contains("WROTE"), "{runner}: {said}");
        assert_eq!(said.matches("refused").count(), 4, "{runner}: {said}");
        assert!(
            said.contains("still in ['8:pids:/sluice-") || said.contains("still in ['0::"),
            "{runner}: {said}"
        );
        // The limit still holds after the attempt.
        assert!(started(&out) < 16, "{runner}: {said}");
        assert_hit(runner, &out, "pids", 16);
    }
}

#[test]
fn a_background_job_that_hits_a_limit_says_so_when_it_settles() {
    for runner in RUNNERS {
        let ws = workspace();
        let tight = limits_policy(&ws, "memoryMb = 64");
        let script = format!(
            "local j = sluice.bash{{command = {}, background = true}}\nj:wait(30000)\n\
             print(sluice.json.encode({{status = j.status, exitCode = j.exitCode, sandbox = j.sandbox}}))",
            lua_str(ALLOCATE)
        );
        let flags = [
            "--sandbox",
            runner,
            "--policy",
            "default",
            "--policy",
            &tight,
            "--no-audit",
        ];
        let run = run_lua_with(ws.path(), &script, &flags, &[]).ok();
        let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(out["status"], "exited", "{runner}: {out}");
        assert_eq!(out["exitCode"], 137, "{runner}: {out}");
        assert_hit(runner, &out, "memoryMb", 64);
    }
}

#[test]
fn a_policy_without_limits_claims_none() {
    for runner in RUNNERS {
        let ws = workspace();
        let plain = policy(
            &ws,
            "plain.lua",
            "local p = require('sluice.policy')\nreturn {rules = {p.programs, p.allow 'fs:read:${workspace}/**', \
             p.allow 'fs:read:${workspace}', p.allow 'proc:spawn:*'}}\n",
        );
        let script =
            "local r, e = sluice.bash{command = 'echo hi'}\nprint(sluice.json.encode(r or e))";
        let flags = ["--sandbox", runner, "--policy", &plain, "--no-audit"];
        let run = run_lua_with(ws.path(), script, &flags, &[]).ok();
        let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert!(out["sandbox"].is_object(), "{runner}: {out}");
        assert!(out["sandbox"].get("limits").is_none(), "{runner}: {out}");
    }
}

/// Runs `line` under `runner` and the default policy alone.
fn default_bash(ws: &Workspace, runner: &str, line: &str) -> Value {
    need_bwrap();
    let script = format!(
        "local r, e = sluice.bash{{command = {}, timeoutMs = 300000}}\nprint(sluice.json.encode(r or e))",
        lua_str(line)
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", runner], &[]).ok();
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

#[test]
fn a_cargo_build_and_a_node_test_run_fit_the_default_limits() {
    need_program("cargo", "install Rust: https://rustup.rs");
    need_program("node", "apt-get install nodejs");
    for runner in RUNNERS {
        let ws = workspace();
        let proj = ws.file("proj");
        std::fs::create_dir_all(proj.join("src")).unwrap();
        std::fs::write(
            proj.join("Cargo.toml"),
            "[package]\nname = \"fits\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(
            proj.join("src/main.rs"),
            "fn main() {\n    let v: Vec<u64> = (0..1000).collect();\n    println!(\"{}\", v.iter().sum::<u64>());\n}\n",
        )
        .unwrap();
        let out = default_bash(
            &ws,
            runner,
            "cd proj && cargo build --offline -q && ./target/debug/fits",
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert_eq!(out["stdout"], "499500\n", "{runner}: {out}");
        let l = limits(&out);
        assert_eq!(
            (
                l["memoryMb"].clone(),
                l["pids"].clone(),
                l["cpuSeconds"].clone(),
                l["fileSizeMb"].clone()
            ),
            (8192.into(), 2048.into(), 7200.into(), 4096.into()),
            "{runner}: {out}"
        );
        assert!(by_cgroup(&l["enforcement"]["memoryMb"]), "{runner}: {out}");
        assert!(by_cgroup(&l["enforcement"]["pids"]), "{runner}: {out}");
        assert!(hits(&out).is_empty(), "{runner}: {out}");

        std::fs::write(
            proj.join("sum.test.mjs"),
            "import test from 'node:test';\nimport assert from 'node:assert';\n\
             test('sums', () => assert.strictEqual([1, 2, 3].reduce((a, b) => a + b), 6));\n",
        )
        .unwrap();
        let out = default_bash(&ws, runner, "cd proj && node --test sum.test.mjs");
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert!(
            out["stdout"].as_str().unwrap().contains("# pass 1"),
            "{runner}: {out}"
        );
        assert!(hits(&out).is_empty(), "{runner}: {out}");
    }
}

#[test]
fn a_command_in_a_bubblewrap_of_its_own_is_bounded_too_bubblewraps_processes_counted() {
    // A command handed a credential never shares the run's sandbox: it is
    // forked into a bubblewrap of its own, which joins the cgroups first.
    need_bwrap();
    let ws = workspace();
    let tight = limits_policy(&ws, "memoryMb = 64, pids = 16");
    let script = format!(
        "local function run(line)\n  local r, e = sluice.bash{{command = line, env = {{TOKEN = sluice.credential('gh')}}}}\n  \
         print(sluice.json.encode(r or e))\nend\nrun({})\nrun({})\n",
        lua_str(ALLOCATE),
        lua_str(FORKS)
    );
    let flags = [
        "--sandbox",
        "bwrap",
        "--policy",
        "default",
        "--policy",
        &tight,
        "--no-audit",
        "--approve",
        "cred:use:gh@command",
    ];
    let run = run_lua_env(
        ws.path(),
        &script,
        &flags,
        &[],
        &[("SLUICE_CREDENTIAL_GH", "s3cret")],
    )
    .ok();
    let outs: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outs[0]["exitCode"], 137, "{}", outs[0]);
    assert_hit("bwrap", &outs[0], "memoryMb", 64);
    // bubblewrap's own two processes (outside and as the namespace's
    // init) count toward the 16.
    assert!(started(&outs[1]) <= 13, "{}", outs[1]);
    assert_hit("bwrap", &outs[1], "pids", 16);
}

/// `sluice doctor --json`'s `limits`, with `env` for sluice.
fn doctor_limits(env: &[(&str, &str)]) -> Value {
    let out = std::process::Command::new(sluice_bin())
        .args(["doctor", "--json"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["limits"].clone()
}

#[test]
fn doctor_says_what_enforces_each_limit_here_and_without_cgroups() {
    let here = doctor_limits(&[]);
    for name in ["memoryMb", "pids"] {
        assert!(by_cgroup(&here[name]["enforcement"]), "{here}");
        let dir = here[name]["detail"].as_str().unwrap();
        assert!(std::path::Path::new(dir).is_dir(), "{here}");
    }
    for name in ["cpuSeconds", "fileSizeMb"] {
        assert_eq!(here[name]["enforcement"], "rlimit", "{here}");
    }
    let off = doctor_limits(&[("SLUICE_CGROUPS", "off")]);
    assert_eq!(off["memoryMb"]["enforcement"], "rlimit", "{off}");
    assert_eq!(off["pids"]["enforcement"], "none", "{off}");
    assert!(off["pids"]["detail"]
        .as_str()
        .unwrap()
        .contains("root is exempt"));
}
