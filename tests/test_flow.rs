//! `sluice.test` through the real binary, with real runners confined under
//! the default policy (plus a policy declaring the runner): a passing and a
//! failing suite, a selection naming a missing test, a missing module, a
//! missing file and a missing runner, each runner's report parsed with its
//! counts and names (pytest from PyPI, unittest, cargo test, cargo nextest,
//! go test, prove, node's runner, jest, vitest), a run routed into a podman
//! container, a base comparison in a real git repository, a Lua judge and a
//! model judge against a loopback model server; the selection as
//! arguments, never shell text.
//!
//! `scripts/test` installs what these need: pytest into target/peers/pytest,
//! jest and vitest into target/peers/node_modules, cargo-nextest into
//! target/peers/nextest, Debian's golang-go, perl's prove.

mod common;
#[path = "common/containers.rs"]
mod containers;
#[path = "common/model_server.rs"]
mod model_server;

use common::test_runs::*;
use common::*;
use serde_json::{json, Value};

use std::process::Command;

const PYTEST_OK: &str = "import pytest\n\ndef test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    assert 'a' in 'abc'\n\n@pytest.mark.skip(reason='not today')\ndef test_three():\n    pass\n";

const PYTEST_MIXED: &str = "def test_good():\n    assert True\n\ndef test_bad():\n    x = 1\n    assert x == 2, 'x is off'\n";

#[test]
fn a_passing_pytest_suite_is_parsed_with_its_counts_and_no_probe() {
    let ws = workspace();
    put(&ws, "tests/test_ok.py", PYTEST_OK);
    let out = test_call(&ws, &pytest_runner(), "{}");
    assert_eq!(out["exitCode"], 0, "{out}");
    assert_eq!(out["parsed"], true, "{out}");
    assert_eq!(out["runner"], "pytest");
    assert_eq!(out["passed"], 2);
    assert_eq!(out["skipped"], 1);
    assert_eq!(out["failed"], json!([]));
    assert!(out.get("invalidProbe").is_none(), "{out}");
    assert!(
        out.get("judgedBy").is_none(),
        "exit 0 is never judged: {out}"
    );
    assert_eq!(out["command"], "python3 -m pytest -q -p no:cacheprovider");
    assert!(
        out["tail"]
            .as_str()
            .unwrap()
            .contains("2 passed, 1 skipped"),
        "{out}"
    );
    assert_eq!(out["tailTruncated"], false);
    assert_eq!(out["sandbox"]["mode"], "workspace-write", "{out}");
}

#[test]
fn a_failing_pytest_suite_names_each_failure_with_its_file_line_and_message() {
    let ws = workspace();
    put(&ws, "tests/test_mixed.py", PYTEST_MIXED);
    let out = test_call(&ws, &pytest_runner(), "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    assert_eq!(out["passed"], 1);
    let failed = out["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(failed[0]["name"], "tests/test_mixed.py::test_bad");
    assert_eq!(failed[0]["file"], "tests/test_mixed.py");
    assert_eq!(failed[0]["line"], 6);
    assert!(
        failed[0]["message"].as_str().unwrap().contains("x is off"),
        "{out}"
    );
    assert!(
        out.get("invalidProbe").is_none(),
        "a real failure is the code's: {out}"
    );
    assert_eq!(out["judgedBy"], "rules");
}

fn probe_of(out: &Value, reason: &str, evidence: &str) {
    let probe = &out["invalidProbe"];
    assert_eq!(probe["reason"], reason, "{out}");
    assert!(
        probe["evidence"].as_str().unwrap().contains(evidence),
        "evidence should quote {evidence:?}: {out}"
    );
    assert!(
        probe["message"]
            .as_str()
            .unwrap()
            .contains("no verdict on that code"),
        "{out}"
    );
    assert_eq!(out["judgedBy"], "rules", "{out}");
}

#[test]
fn a_selection_naming_a_missing_test_is_an_unknown_test_probe() {
    let ws = workspace();
    put(&ws, "tests/test_ok.py", PYTEST_OK);
    let out = test_call(
        &ws,
        &pytest_runner(),
        "{selection = {\"tests/test_ok.py::test_nope\"}}",
    );
    assert_ne!(out["exitCode"], 0, "{out}");
    probe_of(&out, "unknown-test", "ERROR: not found:");
    assert_eq!(
        out["command"],
        "python3 -m pytest -q -p no:cacheprovider tests/test_ok.py::test_nope"
    );
}

#[test]
fn a_missing_module_at_collection_is_an_unknown_module_probe() {
    let ws = workspace();
    put(
        &ws,
        "tests/test_imp.py",
        "import no_such_module_here\n\ndef test_x():\n    assert no_such_module_here\n",
    );
    let out = test_call(&ws, &pytest_runner(), "{}");
    assert_ne!(out["exitCode"], 0, "{out}");
    probe_of(
        &out,
        "unknown-module",
        "No module named 'no_such_module_here'",
    );
}

#[test]
fn a_missing_test_file_is_an_unknown_path_probe() {
    let ws = workspace();
    put(&ws, "tests/test_ok.py", PYTEST_OK);
    let out = test_call(
        &ws,
        &pytest_runner(),
        "{selection = {\"tests/test_gone.py\"}}",
    );
    assert_eq!(out["exitCode"], 4, "{out}");
    probe_of(
        &out,
        "unknown-path",
        "file or directory not found: tests/test_gone.py",
    );
}

#[test]
fn a_missing_runner_is_an_unknown_command_probe_with_exit_127() {
    let ws = workspace();
    let out = test_call(&ws, "command = \"no-such-runner-7f3a --quiet\"", "{}");
    assert_eq!(out["exitCode"], 127, "{out}");
    assert_eq!(out["parsed"], false);
    probe_of(&out, "unknown-command", "no-such-runner-7f3a");
}

#[test]
fn a_runner_module_missing_from_the_interpreter_is_an_unknown_environment_probe() {
    let ws = workspace();
    let out = test_call(&ws, "command = \"python3 -m no_such_runner_mod\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    probe_of(
        &out,
        "unknown-environment",
        "No module named no_such_runner_mod",
    );
}

#[test]
fn the_selection_reaches_the_runner_as_arguments_never_as_shell_text() {
    let ws = workspace();
    // The runner prints its arguments one per line.
    put(
        &ws,
        "args.py",
        "import sys\nfor a in sys.argv[1:]:\n    print('ARG<' + a + '>')\n",
    );
    let out = test_call(
        &ws,
        "command = \"python3 args.py\"",
        "{selection = {\"a b\", \"x; touch pwned\", \"$(touch pwned2)\", \"`id`\"}}",
    );
    assert_eq!(out["exitCode"], 0, "{out}");
    let tail = out["tail"].as_str().unwrap();
    for arg in [
        "ARG<a b>",
        "ARG<x; touch pwned>",
        "ARG<$(touch pwned2)>",
        "ARG<`id`>",
    ] {
        assert!(tail.contains(arg), "{arg} missing: {out}");
    }
    assert!(!ws.file("pwned").exists() && !ws.file("pwned2").exists());
    assert_eq!(
        out["command"],
        "python3 args.py 'a b' 'x; touch pwned' '$(touch pwned2)' '`id`'"
    );
}

#[test]
fn a_selection_item_that_reads_as_an_option_is_refused_naming_it() {
    let ws = workspace();
    let out = test_call(
        &ws,
        "command = \"python3 -m pytest\"",
        "{selection = {\"tests\", \"-p\", \"evil\"}}",
    );
    assert_eq!(out["code"], "invalid_input", "{out}");
    assert_eq!(out["field"], "selection[2]", "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("test.command"),
        "{out}"
    );
}

#[test]
fn without_a_declared_runner_the_call_is_provider_unavailable_naming_the_fix() {
    let ws = workspace();
    let out = lua(&ws, &[], "local r, e = sluice.test{}\nemit(e)\n").remove(0);
    assert_eq!(out["code"], "provider_unavailable", "{out}");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("test = {command ="),
        "{out}"
    );
}

#[test]
fn the_policy_judges_the_runners_command_line_with_the_selection() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "deny.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.deny(\"proc:spawn:python3 * secret*\", \"not that one\") } }",
    );
    let body = "local r, e = sluice.test{selection = {\"secret_test.py\"}}\nemit(r or e)\nlocal r2, e2 = sluice.test{selection = {\"ok_test.py\"}}\nemit(r2 or e2)\n";
    let run = run_with(
        &ws,
        "command = \"python3 -c pass\"",
        &["--policy", &pol],
        body,
    );
    assert_eq!(run[0]["code"], "permission_denied", "{}", run[0]);
    assert_eq!(run[1]["exitCode"], 0, "the control runs: {}", run[1]);
}

#[test]
fn two_policies_declaring_a_runner_is_an_error_at_start() {
    let ws = workspace();
    let a = policy(&ws, "a.lua", "return { test = { command = \"pytest\" } }");
    let b = policy(
        &ws,
        "b.lua",
        "return { test = { command = \"cargo test\" } }",
    );
    let run = run_lua_with(
        ws.path(),
        "print(1)",
        &["--policy", &a, "--policy", &b],
        &[],
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("declare the test runner in one policy"),
        "{}",
        run.stderr
    );
}

// ---- each runner's report ----

fn parsed(out: &Value, runner: &str, passed: u64, failed: &[&str], skipped: u64) {
    assert_eq!(out["parsed"], true, "{out}");
    assert_eq!(out["runner"], runner, "{out}");
    assert_eq!(out["passed"], passed, "{out}");
    assert_eq!(out["skipped"], skipped, "{out}");
    let names: Vec<&str> = out["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, failed, "{out}");
    assert!(out.get("invalidProbe").is_none(), "{out}");
}

#[test]
fn python_unittest_reports_are_parsed() {
    let ws = workspace();
    put(
        &ws,
        "test_calc.py",
        "import unittest\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n\n    def test_sub(self):\n        self.assertEqual(3 - 1, 1)\n\n    @unittest.skip('later')\n    def test_mul(self):\n        pass\n",
    );
    let out = test_call(&ws, "command = \"python3 -m unittest\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "unittest", 1, &["test_calc.Calc.test_sub"], 1);
}

/// unittest reports a name it cannot find as an error of a test it makes
/// up (`unittest.loader._FailedTest.test_nope`): the probe says so, and
/// no test that never existed is listed as failed.
#[test]
fn an_unknown_unittest_name_is_a_probe_with_no_made_up_failure() {
    let ws = workspace();
    put(
        &ws,
        "test_calc.py",
        "import unittest\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n",
    );
    for selection in ["test_calc.Calc.test_nope", "test_calc.Nope"] {
        let out = test_call(
            &ws,
            "command = \"python3 -m unittest\"",
            &format!("{{selection = {{\"{selection}\"}}}}"),
        );
        assert_eq!(out["exitCode"], 1, "{out}");
        assert_eq!(out["invalidProbe"]["reason"], "unknown-test", "{out}");
        assert!(
            out["invalidProbe"]["evidence"]
                .as_str()
                .unwrap()
                .contains("has no attribute"),
            "{out}"
        );
        assert_eq!(out["failed"], json!([]), "{selection}: {out}");
        assert_eq!(out["passed"], 0, "{out}");
    }
}

fn cargo_crate(ws: &Workspace) {
    put(
        ws,
        "calc/Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    put(
        ws,
        "calc/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 1), 2); }\n    #[test]\n    fn breaks() { assert_eq!(super::add(1, 1), 3, \"math\"); }\n    #[test]\n    #[ignore]\n    fn later() {}\n}\n",
    );
}

#[test]
fn cargo_test_reports_are_parsed() {
    let ws = workspace();
    cargo_crate(&ws);
    let out = test_call(
        &ws,
        "command = \"cargo test --offline -q\", cwd = \"calc\"",
        "{}",
    );
    assert_eq!(out["exitCode"], 101, "{out}");
    parsed(&out, "libtest", 1, &["tests::breaks"], 1);
    assert_eq!(out["failed"][0]["file"], "src/lib.rs", "{out}");
    assert_eq!(out["failed"][0]["line"], 8, "{out}");
}

#[test]
fn cargo_nextest_reports_are_parsed() {
    let ws = workspace();
    cargo_crate(&ws);
    let bin = peers().join("nextest/bin");
    need_file(
        &bin.join("cargo-nextest"),
        "cargo install cargo-nextest --locked --root target/peers/nextest",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let runner = format!(
        "command = \"cargo nextest run --offline --no-fail-fast\", cwd = \"calc\", env = {{PATH = {}}}",
        lua_str(&path)
    );
    let out = test_call(&ws, &runner, "{}");
    assert_eq!(out["exitCode"], 100, "{out}");
    parsed(&out, "nextest", 1, &["tests::breaks"], 1);
}

#[test]
fn go_test_reports_are_parsed() {
    need_program("go", "apt-get install golang-go");
    let ws = workspace();
    put(&ws, "gomod/go.mod", "module example.com/calc\n\ngo 1.19\n");
    put(
        &ws,
        "gomod/calc.go",
        "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    );
    put(
        &ws,
        "gomod/calc_test.go",
        "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 1) != 2 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n\nfunc TestBroken(t *testing.T) {\n\tif Add(1, 1) != 3 {\n\t\tt.Errorf(\"got %d, want 3\", Add(1, 1))\n\t}\n}\n\nfunc TestLater(t *testing.T) {\n\tt.Skip(\"later\")\n}\n",
    );
    let out = test_call(&ws, "command = \"go test -v ./...\", cwd = \"gomod\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "go", 1, &["TestBroken"], 1);
    assert_eq!(out["failed"][0]["file"], "calc_test.go", "{out}");
    assert_eq!(out["failed"][0]["line"], 13, "{out}");
}

#[test]
fn prove_tap_reports_are_parsed() {
    need_program("prove", "apt-get install perl");
    let ws = workspace();
    put(
        &ws,
        "t/a.t",
        "print \"1..3\\nok 1 - first\\nnot ok 2 - second\\nok 3 - third # SKIP no db\\n\";\n",
    );
    let out = test_call(&ws, "command = \"prove -v\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "tap", 1, &["second"], 1);
}

#[test]
fn node_test_runner_reports_are_parsed() {
    need_program("node", "apt-get install nodejs");
    let ws = workspace();
    put(
        &ws,
        "test/calc.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => { assert.strictEqual(1 + 1, 2); });\ntest('breaks', () => { assert.strictEqual(1 + 1, 3); });\ntest('later', { skip: true }, () => {});\n",
    );
    let out = test_call(&ws, "command = \"node --test\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "node", 1, &["breaks"], 1);
}

fn js_suite(ws: &Workspace) {
    put(
        ws,
        "calc.test.js",
        "describe('calc', () => {\n  test('adds', () => { expect(1 + 1).toBe(2); });\n  test('breaks', () => { expect(1 + 1).toBe(3); });\n  test.skip('later', () => {});\n});\n",
    );
}

#[test]
fn jest_reports_are_parsed() {
    let jest = peers().join("node_modules/jest/bin/jest.js");
    need_file(&jest, "npm install --prefix target/peers jest");
    let ws = workspace();
    js_suite(&ws);
    put(&ws, "package.json", "{\"name\": \"calc\"}\n");
    let runner = format!(
        "command = {}",
        lua_str(&format!("node {} --ci --no-cache", jest.display()))
    );
    let out = test_call(&ws, &runner, "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "jest", 1, &["calc > breaks"], 1);
}

#[test]
fn vitest_reports_are_parsed() {
    let vitest = peers().join("node_modules/vitest/vitest.mjs");
    need_file(&vitest, "npm install --prefix target/peers vitest");
    let ws = workspace();
    put(
        &ws,
        "calc.test.mjs",
        "import { describe, test, expect } from 'vitest';\ndescribe('calc', () => {\n  test('adds', () => { expect(1 + 1).toBe(2); });\n  test('breaks', () => { expect(1 + 1).toBe(3); });\n  test.skip('later', () => {});\n});\n",
    );
    let runner = format!(
        "command = {}, env = {{NODE_PATH = {}}}",
        lua_str(&format!("node {} run", vitest.display())),
        lua_str(&peers().join("node_modules").display().to_string())
    );
    let out = test_call(&ws, &runner, "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "vitest", 1, &["calc > breaks"], 1);
    assert_eq!(out["failed"][0]["file"], "calc.test.mjs", "{out}");
}

// ---- routed into a container ----

#[test]
fn a_runner_routed_into_a_podman_container_runs_there_and_is_parsed() {
    let c = containers::Container::start();
    std::fs::create_dir_all(c.root.join("suite")).unwrap();
    std::fs::write(
        c.root.join("suite/run.sh"),
        "echo 1..2\necho ok 1 - inside\necho not ok 2 - broken\nexit 1\n",
    )
    .unwrap();
    let ws = workspace();
    let runner = format!(
        "command = \"sh /suite/run.sh\", container = {}",
        lua_str(&c.name)
    );
    let body = "local r, e = sluice.test{}\nemit(r or e)\n";
    let out = run_with(&ws, &runner, &["--container-engine", "podman"], body).remove(0);
    assert_eq!(out["exitCode"], 1, "{out}");
    parsed(&out, "tap", 1, &["broken"], 0);
    assert_eq!(out["sandbox"]["container"], json!(c.name), "{out}");
}

#[test]
fn a_container_that_does_not_exist_is_an_unknown_environment_probe() {
    let ws = workspace();
    let runner = "command = \"sh run.sh\", container = \"sluice-test-no-such-box\"";
    let body = "local r, e = sluice.test{}\nemit(r or e)\n";
    let out = run_with(&ws, runner, &["--container-engine", "podman"], body).remove(0);
    assert_eq!(
        out["invalidProbe"]["reason"], "unknown-environment",
        "{out}"
    );
    assert!(
        out["invalidProbe"]["evidence"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("no such container")
            || out["invalidProbe"]["evidence"]
                .as_str()
                .unwrap()
                .contains("no container with name"),
        "{out}"
    );
}

// ---- against the base ----

#[test]
fn against_base_reports_introduced_preexisting_and_fixed_failures_and_removes_the_worktree() {
    let ws = workspace();
    git(ws.path(), &["init", "-q", "-b", "main"]);
    // The base: `old_bug` and `fixed_later` fail, `regresses` passes.
    let suite = |regresses: bool, fixed: bool| {
        format!(
            "def test_old_bug():\n    assert False, 'old'\n\ndef test_regresses():\n    assert {}\n\ndef test_fixed_later():\n    assert {}\n\ndef test_fine():\n    assert True\n",
            if regresses { "False, 'new'" } else { "True" },
            if fixed { "True" } else { "False, 'was broken'" }
        )
    };
    let out = compare_with_base(&ws, &suite(false, false), &suite(true, true));
    assert_each_kind_of_failure(&out);
    // The worktree is gone, and git no longer knows it.
    let list = Command::new("git")
        .args(["worktree", "list"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&list.stdout).lines().count(),
        1,
        "{}",
        String::from_utf8_lossy(&list.stdout)
    );
}

#[test]
fn against_base_without_a_base_ref_is_refused_naming_the_fix() {
    let ws = workspace();
    let out = test_call(&ws, "command = \"true\"", "{against = \"base\"}");
    assert_eq!(out["code"], "invalid_input", "{out}");
    assert_eq!(out["field"], "against");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("baseRef = \"main\""),
        "{out}"
    );
}

#[test]
fn a_base_worktree_hook_never_runs() {
    let ws = workspace();
    git(ws.path(), &["init", "-q", "-b", "main"]);
    put(&ws, "a.txt", "a\n");
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "base"]);
    let hook = ws.file(".git/hooks/post-checkout");
    let marker = ws.path().parent().unwrap().join("hook-ran");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    let out = test_call(
        &ws,
        "command = \"true\", baseRef = \"main\"",
        "{against = \"base\"}",
    );
    assert_eq!(out["exitCode"], 0, "{out}");
    assert_eq!(out["base"]["exitCode"], 0, "{out}");
    assert!(!marker.exists(), "the post-checkout hook ran");
}

// ---- judges ----

#[test]
fn a_lua_judge_replaces_or_keeps_the_rules_verdict() {
    let ws = workspace();
    put(
        &ws,
        "flaky.sh",
        "echo 'INFRA: database unreachable'\nexit 3\n",
    );
    let runner = "command = \"sh flaky.sh\", judge = function(run)\n    if run.output:find('INFRA:') then\n      return {reason = 'unknown-environment', evidence = 'INFRA line', message = 'the database was down'}\n    end\n    return nil\n  end";
    let out = test_call(&ws, runner, "{}");
    assert_eq!(out["exitCode"], 3, "{out}");
    assert_eq!(out["judgedBy"], "lua", "{out}");
    assert_eq!(out["invalidProbe"]["reason"], "unknown-environment");
    assert_eq!(out["invalidProbe"]["message"], "the database was down");
    // The control: nil keeps the rules' verdict (here: none decided).
    put(&ws, "flaky.sh", "echo 'just broken'\nexit 3\n");
    let out = test_call(&ws, runner, "{}");
    assert!(out.get("invalidProbe").is_none(), "{out}");
    assert!(out.get("judgedBy").is_none(), "{out}");
}

#[test]
fn a_lua_judge_that_returns_a_reason_off_the_list_leaves_a_note_and_the_rules_verdict() {
    let ws = workspace();
    let runner =
        "command = \"no-such-runner-7f3a\", judge = function(run) return {reason = 'gremlins'} end";
    let out = test_call(&ws, runner, "{}");
    assert_eq!(out["invalidProbe"]["reason"], "unknown-command", "{out}");
    assert!(
        out["judgeNote"].as_str().unwrap().contains("gremlins"),
        "{out}"
    );
}

#[test]
fn a_model_judge_is_asked_when_no_rule_decides_and_counts_only_when_confident() {
    use model_server::{openai_text, Answer, ModelServer};
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'fixture dir /data/fixtures absent'\nexit 2\n",
    );
    let confident = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.9}).to_string();
    let unsure = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.4}).to_string();
    let server = ModelServer::start(vec![
        Answer::json(openai_text(&confident)),
        Answer::json(openai_text(&unsure)),
    ]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runner = JUDGED_ODD_SH;
    let body = "for i = 1, 2 do local r, e = sluice.test{} emit(r or e) end\n";
    let outs = run_with(&ws, runner, &flags, body);
    assert_eq!(outs[0]["judgedBy"], "model", "{}", outs[0]);
    assert_eq!(outs[0]["invalidProbe"]["reason"], "unknown-path");
    assert!(outs[1].get("invalidProbe").is_none(), "{}", outs[1]);
    assert!(
        outs[1]["judgeNote"].as_str().unwrap().contains("0.4"),
        "{}",
        outs[1]
    );
    // The judge saw the run and was asked for the closed list.
    let asked = &server.requests()[0].body;
    let text = asked.to_string();
    assert!(
        text.contains("unknown-environment") && text.contains("fixture dir"),
        "{text}"
    );
    // Each model call is a call of the record, beside the test calls.
    let flows: Vec<String> = exported_calls(ws.path())
        .iter()
        .map(|c| c["flow"].as_str().unwrap().to_string())
        .collect();
    // A test call's intent is on disk before it runs, so its row comes
    // first; the model call it made while it ran follows.
    assert_eq!(flows, ["test", "model", "test", "model"], "{flows:?}");
}

#[test]
fn a_model_judge_is_not_asked_when_a_rule_decides() {
    use model_server::ModelServer;
    let ws = workspace();
    let server = ModelServer::start(vec![]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runner =
        "command = \"no-such-runner-7f3a\", judge = {provider = \"local\", model = \"judge-1\"}";
    let out = run_with(
        &ws,
        runner,
        &flags,
        "local r, e = sluice.test{} emit(r or e)\n",
    )
    .remove(0);
    assert_eq!(out["invalidProbe"]["reason"], "unknown-command", "{out}");
    assert_eq!(server.count(), 0);
}

#[test]
fn a_model_judges_evidence_that_is_not_in_the_output_does_not_count() {
    use model_server::{openai_text, Answer, ModelServer};
    let ws = workspace();
    put(&ws, "odd.sh", "echo 'something broke'\nexit 2\n");
    let lying = json!({"belongsTo": "command", "reason": "unknown-test", "evidence": "ERROR: not found: test_x", "confidence": 0.99}).to_string();
    let server = ModelServer::start(vec![Answer::json(openai_text(&lying))]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runner = JUDGED_ODD_SH;
    let out = run_with(
        &ws,
        runner,
        &flags,
        "local r, e = sluice.test{} emit(r or e)\n",
    )
    .remove(0);
    assert!(out.get("invalidProbe").is_none(), "{out}");
    assert!(
        out["judgeNote"]
            .as_str()
            .unwrap()
            .contains("not a line of the output"),
        "{out}"
    );
}

#[test]
fn a_run_whose_test_call_asked_the_model_judge_replays_without_the_model() {
    use model_server::{openai_text, Answer, ModelServer};
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'fixture dir /data/fixtures absent'\nexit 2\n",
    );
    let confident = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.9}).to_string();
    let mut server = ModelServer::start(vec![Answer::json(openai_text(&confident))]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runner = JUDGED_ODD_SH;
    let body = "local r = sluice.test{} emit(r) local b = sluice.bash{command = 'echo after'} emit(b.stdout)\n";
    let live = run_with(&ws, runner, &flags, body);
    server.stop();
    let replay = sluice_in(ws.path(), &["replay", "last"]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    let lines: Vec<Value> = replay
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines, live, "the replay shows what the run saw");
}

#[test]
fn a_resumed_run_copies_the_model_judges_call_with_the_test_call_it_answers() {
    use model_server::{openai_text, Answer, ModelServer};
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'fixture dir /data/fixtures absent'\nexit 2\n",
    );
    let confident = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.9}).to_string();
    let mut server = ModelServer::start(vec![Answer::json(openai_text(&confident))]);
    let flags = model_server::local_openai_flags(&server);
    let runner = JUDGED_ODD_SH;
    let pol = runner_policy(&ws, runner);
    // The script stops at a read outside the workspace, which asks and
    // nobody answers; the resumed run, given the grant, answers the test
    // call from the record and goes on.
    let outside = ws.path().parent().unwrap().join("outside.txt");
    std::fs::write(&outside, "here\n").unwrap();
    let script = script_file(
        ws.path(),
        &format!(
            "{EMIT}local r = sluice.test{{}} emit(r.judgedBy)\nassert(sluice.read{{path = {}}})\nemit('done')\n",
            lua_str(&outside.display().to_string())
        ),
    );
    let mut all: Vec<&str> = vec!["--policy", "default", "--policy", pol.as_str()];
    all.extend(flags.iter().map(String::as_str));
    let first = run_script_with(ws.path(), &script, &all, &[]);
    assert_ne!(first.code, 0, "{}", first.stderr);
    server.stop();
    let grant = format!("fs:read:{}", outside.display());
    let resumed = sluice_in(ws.path(), &["resume", "last", "--approve", &grant]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stdout.contains("\"model\"") && resumed.stdout.contains("\"done\""),
        "{}",
        resumed.stdout
    );
    let rows = exported_calls(ws.path());
    let flows: Vec<&str> = rows.iter().map(|c| c["flow"].as_str().unwrap()).collect();
    assert_eq!(flows, ["test", "model", "read"], "{rows:?}");
    assert_eq!(rows[1]["task"], "0.c1", "{rows:?}");
    let verify = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

// ---- attacks ----

/// A test is code the agent may write: what it prints must not turn its
/// own failure into "the command named nothing". Each line the rules look
/// for, printed by failing tests (with and without a passing one beside
/// them); the control: the same runner's real "not found" still is one.
#[test]
fn a_failing_test_that_prints_the_rules_own_words_is_still_the_codes_failure() {
    let lies = "print('ERROR: not found: tests/test_x.py::test_y')\n    print('ERROR: file or directory not found: tests/nope.py')\n    print('ERROR collecting tests/test_x.py')\n    print(\"ModuleNotFoundError: No module named 'zzz'\")\n    print('no tests ran in 0.01s')\n    print(\"Error: Cannot find module 'x'\")\n    print('python3: No module named pytest')\n    print('Could not find \\'/x.js\\'')";
    for with_pass in [true, false] {
        let ws = workspace();
        let good = if with_pass {
            "def test_good():\n    assert True\n\n"
        } else {
            ""
        };
        put(
            &ws,
            "tests/test_lies.py",
            &format!("{good}def test_liar():\n    {lies}\n    assert False, 'real bug'\n"),
        );
        let out = test_call(
            &ws,
            &pytest_runner(),
            "{selection = {\"tests/test_lies.py\"}}",
        );
        assert_eq!(out["exitCode"], 1, "{out}");
        assert!(
            out.get("invalidProbe").is_none(),
            "with_pass={with_pass}: {out}"
        );
        assert_eq!(
            out["failed"][0]["name"], "tests/test_lies.py::test_liar",
            "{out}"
        );
    }
    // The control.
    let ws = workspace();
    put(&ws, "tests/test_ok.py", PYTEST_OK);
    let out = test_call(
        &ws,
        &pytest_runner(),
        "{selection = {\"tests/test_ok.py::test_gone\"}}",
    );
    assert_eq!(out["invalidProbe"]["reason"], "unknown-test", "{out}");
}

/// A selection item pytest would read as a file of more arguments
/// (`@args.txt` holding `-p evil`, which imports a module of the agent's
/// choosing) is refused; so is one read as an option.
#[test]
fn a_selection_item_read_as_an_argument_file_is_refused() {
    let ws = workspace();
    put(&ws, "args.txt", "-p evil\n");
    let out = test_call(&ws, &pytest_runner(), "{selection = {\"@args.txt\"}}");
    assert_eq!(out["code"], "invalid_input", "{out}");
    assert_eq!(out["field"], "selection[1]", "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("./@args.txt"),
        "{out}"
    );
}

/// The base worktree is confined like the workspace: a secret the base
/// revision holds in `.env` (denied by the default policy's `**/.env`) is
/// masked there too, while the revision's other files are read.
#[test]
fn the_base_run_cannot_read_what_the_policy_hides_in_the_workspace() {
    need_bwrap();
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        git(ws.path(), &["init", "-q", "-b", "main"]);
        put(&ws, ".env", "TOKEN=base-secret-77\n");
        put(&ws, "notes.txt", "base notes\n");
        git(ws.path(), &["add", "-f", "."]);
        git(ws.path(), &["commit", "-q", "-m", "base"]);
        std::fs::remove_file(ws.file(".env")).unwrap();
        // The base run fails only if it could read the secret; the
        // workspace run has no .env at all.
        let steal =
            "command = \"grep -q base-secret-77 .env && exit 1 || exit 0\", baseRef = \"main\"";
        let out = test_call_with(&ws, steal, &sandbox, "{against = \"base\"}");
        assert_eq!(
            out["base"]["exitCode"], 0,
            "{runner}: the base run read the hidden .env: {out}"
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        // The control: the base run did run in the base checkout, and
        // reads its other files.
        let read =
            "command = \"grep -q 'base notes' notes.txt && exit 1 || exit 0\", baseRef = \"main\"";
        put(&ws, "notes.txt", "new notes\n");
        let out = test_call_with(&ws, read, &sandbox, "{against = \"base\"}");
        assert_eq!(
            out["base"]["exitCode"], 1,
            "{runner}: the base run saw the base's notes.txt: {out}"
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
    }
}

/// Under each runner, the selection stays arguments and the test command
/// is confined like bash's: it cannot write outside the workspace.
#[test]
fn under_each_runner_the_test_command_is_confined_like_bash() {
    need_bwrap();
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        let outside = ws
            .path()
            .parent()
            .unwrap()
            .join(format!("escaped-{runner}"));
        let escape = format!(
            "command = {}",
            lua_str(&format!("touch {} && touch inside", outside.display()))
        );
        // (Under bubblewrap the write lands in the sandbox's own /tmp and
        // succeeds there; under landlock it is refused. Either way the
        // host's folder stays as it was.)
        let out = test_call_with(&ws, &escape, &sandbox, "{}");
        assert!(
            !outside.exists(),
            "{runner}: the test command wrote outside the workspace: {out}"
        );
        // The control: inside the workspace it writes.
        // The control: inside the workspace it writes (in a project folder:
        // under landlock nothing new can be made at the workspace's top,
        // which holds the hidden .sluice).
        std::fs::create_dir(ws.file("proj")).unwrap();
        let out = test_call_with(
            &ws,
            "command = \"touch inside\", cwd = \"proj\"",
            &sandbox,
            "{selection = {\"x; touch pwned\"}}",
        );
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert!(ws.file("proj/inside").exists(), "{runner}");
        assert!(
            ws.file("proj/x; touch pwned").exists() && !ws.file("proj/pwned").exists(),
            "{runner}"
        );
    }
}

/// A long run (over 1 MiB of output, parsed off the run's thread): the
/// report is read whole from the spill file, the result shows the last
/// 30,000 bytes and says how much came before.
#[test]
fn a_long_runs_report_is_parsed_whole_and_its_tail_is_the_last_30000_bytes() {
    let ws = workspace();
    put(
        &ws,
        "long.py",
        "print('1..2')\nfor i in range(60000):\n    print('# noise line %06d' % i)\nprint('ok 1 - first')\nprint('not ok 2 - second')\n",
    );
    let out = test_call(&ws, "command = \"python3 long.py\"", "{}");
    assert_eq!(
        out["parsed"],
        true,
        "{}",
        out["tail"].as_str().unwrap().len()
    );
    assert_eq!(out["runner"], "tap");
    assert_eq!(out["passed"], 1);
    assert_eq!(out["failed"][0]["name"], "second");
    let total = 5 + 60000 * 20 + 13 + 18;
    let tail = out["tail"].as_str().unwrap();
    assert_eq!(tail.len(), 30_000);
    assert!(
        tail.ends_with("ok 1 - first\nnot ok 2 - second\n"),
        "{}",
        &tail[tail.len() - 80..]
    );
    assert_eq!(out["tailTruncated"], true);
    assert_eq!(out["tailDroppedBytes"], total - 30_000);
    assert!(out["spillPath"].is_string(), "{}", out["spillPath"]);
}
