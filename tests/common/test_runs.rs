//! Helpers of the `sluice.test` tests (tests/test_flow.rs,
//! tests/test_flow_attacks.rs): the peer runners `scripts/test` installs,
//! a policy declaring the runner, and a run of `sluice.test` through the
//! real binary under the default policy and that one.
//!
//! Reached as `common::test_runs`.

use super::{lua_str, policy, run_lua_env, Workspace, EMIT};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A runner of `sh odd.sh` whose invalid probes a model judges: the
/// model `judge-1` of provider `local` (the tests' loopback server).
pub const JUDGED_ODD_SH: &str =
    "command = \"sh odd.sh\", judge = {provider = \"local\", model = \"judge-1\"}";

/// The project's folder of peer tools (`scripts/test` fills it).
pub fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/peers")
}

/// Fails, saying how to install it, when `path` is missing.
pub fn need_file(path: &Path, install: &str) {
    assert!(
        path.exists(),
        "this test needs {}: {install} (scripts/test installs it)",
        path.display()
    );
}

/// The runner's `env` entry that finds pytest from PyPI, as `scripts/test`
/// installs it.
pub fn pytest_env() -> String {
    let dir = peers().join("pytest");
    need_file(
        &dir.join("pytest"),
        "python3 -m pip install --target target/peers/pytest pytest",
    );
    format!("PYTHONPATH = {}", lua_str(&dir.display().to_string()))
}

/// The fields of a runner running that pytest quietly.
pub fn pytest_runner() -> String {
    format!(
        "command = \"python3 -m pytest -q -p no:cacheprovider\", env = {{ {} }}",
        pytest_env()
    )
}

/// Writes `text` at `rel` in the workspace, making its folders.
pub fn put(ws: &Workspace, rel: &str, text: &str) {
    let path = ws.file(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A policy that declares the runner `test` (a Lua table's fields) and
/// lets commands read the peer tools.
pub fn runner_policy(ws: &Workspace, test: &str) -> String {
    let peers = peers().display().to_string();
    policy(
        ws,
        "runner.lua",
        &format!(
            "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{ p.allow(\"fs:read:{peers}/**\"), p.allow(\"fs:read:{peers}\") }},\n  test = {{ {test} }},\n}}\n"
        ),
    )
}

/// Runs `body` (with `emit`) under `policies` (each a `--policy` value)
/// and `flags`, with `env` set on sluice (and the project's
/// containers.conf); each stdout line as JSON.
pub fn run_lines(
    ws: &Workspace,
    policies: &[&str],
    flags: &[&str],
    env: &[(&str, &str)],
    body: &str,
) -> Vec<Value> {
    let mut all: Vec<&str> = Vec::new();
    for p in policies {
        all.extend(["--policy", p]);
    }
    all.extend_from_slice(flags);
    let conf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/containers.conf");
    let conf = conf.display().to_string();
    let mut env = env.to_vec();
    env.push(("CONTAINERS_CONF", &conf));
    let run = run_lua_env(ws.path(), &format!("{EMIT}{body}"), &all, &[], &env).ok();
    run.stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}\n{}", run.stderr))
        })
        .collect()
}

/// Runs `body` under the default policy and a runner policy declaring
/// `test`, with `flags`.
pub fn run_with(ws: &Workspace, test: &str, flags: &[&str], body: &str) -> Vec<Value> {
    let pol = runner_policy(ws, test);
    run_lines(ws, &["default", &pol], flags, &[], body)
}

/// `sluice.test(input)`'s result or error, for runner `test`, with `flags`.
pub fn test_call_with(ws: &Workspace, test: &str, flags: &[&str], input: &str) -> Value {
    let body = format!("local r, e = sluice.test({input})\nemit(r or e)\n");
    run_with(ws, test, flags, &body).remove(0)
}

/// [`test_call_with`] without flags.
pub fn test_call(ws: &Workspace, test: &str, input: &str) -> Value {
    test_call_with(ws, test, &[], input)
}

/// `git ARGS` in `dir` as a test author, which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Commits `tests/test_s.py` as `base` on `main` in `ws` (a repository),
/// puts `now` in its place and runs `sluice.test{against = "base"}` with
/// pytest: the output.
pub fn compare_with_base(ws: &Workspace, base: &str, now: &str) -> Value {
    put(ws, "tests/test_s.py", base);
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "base"]);
    put(ws, "tests/test_s.py", now);
    let runner = format!("{}, baseRef = \"main\"", pytest_runner());
    test_call(ws, &runner, "{against = \"base\"}")
}

/// Asserts what a comparison with the base says of a suite whose
/// `test_old_bug` fails in both, `test_regresses` fails now alone and
/// `test_fixed_later` failed in the base alone, two more passing in both.
pub fn assert_each_kind_of_failure(out: &Value) {
    use serde_json::json;
    assert_eq!(
        out["introduced"],
        json!(["tests/test_s.py::test_regresses"]),
        "{out}"
    );
    assert_eq!(
        out["preexisting"],
        json!(["tests/test_s.py::test_old_bug"]),
        "{out}"
    );
    assert_eq!(
        out["fixed"],
        json!(["tests/test_s.py::test_fixed_later"]),
        "{out}"
    );
    assert_eq!(out["base"]["passed"], 2, "{out}");
    assert_eq!(out["passed"], 2, "{out}");
}
