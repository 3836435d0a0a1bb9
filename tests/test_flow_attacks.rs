//! Attacks on `sluice.test`, from a hostile script (or a prompt-injected
//! model) that calls `sluice.test{selection, against, timeoutMs}` and
//! writes files in the workspace, and from a hostile test suite whose
//! output is the attacker's. Each attack has a control that must still
//! work. A test that passes pins a defence that holds; one that fails
//! pins a weakness (see the comment on each).
//!
//! Run with `cargo test --test test_flow_attacks`; the peers come from
//! `scripts/test` (pytest in target/peers/pytest, jest in
//! target/peers/node_modules), plus perl's prove, go, node and git.

mod common;
#[path = "common/model_server.rs"]
mod model_server;

use common::test_runs::*;
use common::*;
use serde_json::{json, Value};

use std::process::Command;

// ---- helpers (copied from tests/test_flow.rs, trimmed) ----

fn failed_names(out: &Value) -> Vec<String> {
    out["failed"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

// ---- 1. the selection ----

/// prove (Getopt::Long) reads `+X` as the option `-X`, as it reads `-X`:
/// `+D` is `--dry`, so the failing test never runs and the call says exit
/// 0 (never judged). An item that a declared runner reads as an option
/// must be refused like `-X`. The control: `./t/a.t` and `t/a.t` run the
/// test and name its failure.
#[test]
fn a_selection_item_prove_reads_as_an_option_is_refused() {
    need_program("prove", "apt-get install perl");
    let ws = workspace();
    put(
        &ws,
        "t/a.t",
        "print \"1..2\\nok 1 - first\\nnot ok 2 - second\\n\";\n",
    );
    // The control: the selection runs the failing test.
    for item in ["t/a.t", "./t/a.t"] {
        let out = test_call(
            &ws,
            "command = \"prove\"",
            &format!("{{selection = {{\"{item}\"}}}}"),
        );
        assert_eq!(out["exitCode"], 1, "{item}: {out}");
        assert_eq!(out["parsed"], true, "{item}: {out}");
    }
    // The attack: `+D` (dry run) hides the failure behind exit 0.
    let out = test_call(
        &ws,
        "command = \"prove\"",
        "{selection = {\"+D\", \"t/a.t\"}}",
    );
    assert_eq!(
        out["code"], "invalid_input",
        "prove read the selection item +D as its --dry option: the failing test never ran and the call says exit {}: {out}",
        out["exitCode"]
    );
    assert_eq!(out["field"], "selection[1]", "{out}");
}

/// Holds: shell text, newlines and NUL-free oddities stay one argument each.
#[test]
fn selection_items_with_newlines_and_shell_words_stay_single_arguments() {
    let ws = workspace();
    put(
        &ws,
        "args.py",
        "import sys\nfor a in sys.argv[1:]:\n    print('ARG<' + a.replace('\\n', '\\\\n') + '>')\n",
    );
    let out = test_call(
        &ws,
        "command = \"python3 args.py\"",
        "{selection = {\"a\\n-p evil\", \"x\\\"; touch pwned; \\\"\", \"' ; touch pwned3 ; '\", \"${IFS}touch${IFS}pwned4\"}}",
    );
    assert_eq!(out["exitCode"], 0, "{out}");
    let tail = out["tail"].as_str().unwrap();
    for arg in [
        "ARG<a\\n-p evil>",
        "ARG<x\"; touch pwned; \">",
        "ARG<' ; touch pwned3 ; '>",
        "ARG<${IFS}touch${IFS}pwned4>",
    ] {
        assert!(tail.contains(arg), "{arg} missing: {out}");
    }
    for f in ["pwned", "pwned3", "pwned4"] {
        assert!(!ws.file(f).exists(), "{f} was made: {out}");
    }
}

// ---- 3. attribution ----

/// A failing test prints another runner's summary line (libtest's `test
/// result: FAILED.`), so the output carries two runners' signatures and
/// is not parsed; the rules then read every line, and the test's own
/// print of another runner's "not found" words makes its real failure an
/// `invalidProbe`. The control: a real missing test is still one.
#[test]
fn a_failing_test_that_prints_a_second_runners_summary_cannot_forge_an_invalid_probe() {
    let forged = [
        "Error: Cannot find module './helpers'",
        "error: no test target named `calc`.",
        "No tests found, exiting with code 1",
        "stat /w/nope: directory not found",
        "error: could not find `Cargo.toml` in `/w` or any parent directory",
    ];
    let mut broke = Vec::new();
    for (n, line) in forged.iter().enumerate() {
        let ws = workspace();
        put(
            &ws,
            &format!("tests/test_lie{n}.py"),
            &format!(
                "def test_liar():\n    print('test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s')\n    print({})\n    assert False, 'real bug'\n",
                serde_json::to_string(line).unwrap()
            ),
        );
        let out = test_call(
            &ws,
            &pytest_runner(),
            &format!("{{selection = {{\"tests/test_lie{n}.py\"}}}}"),
        );
        assert_eq!(out["exitCode"], 1, "{out}");
        if out.get("invalidProbe").is_some() {
            broke.push(format!(
                "{line:?} -> {} (parsed {}, failed {:?})",
                out["invalidProbe"]["reason"],
                out["parsed"],
                failed_names(&out)
            ));
        }
    }
    // The control.
    let ws = workspace();
    put(
        &ws,
        "tests/test_ok.py",
        "def test_one():\n    assert True\n",
    );
    let out = test_call(
        &ws,
        &pytest_runner(),
        "{selection = {\"tests/test_ok.py::test_gone\"}}",
    );
    assert_eq!(out["invalidProbe"]["reason"], "unknown-test", "{out}");
    assert!(
        broke.is_empty(),
        "a failing test's own print made its real failure the command's:\n{}",
        broke.join("\n")
    );
}

/// unittest: a test class whose name holds `_FailedTest` (unittest's
/// stand-in for a module it could not load) makes its real failure a
/// "load failure", and a line it prints then becomes `unknown-module`.
/// The control: a real missing attribute is `unknown-test`.
#[test]
fn a_unittest_class_named_like_a_failed_load_cannot_forge_an_invalid_probe() {
    let ws = workspace();
    put(
        &ws,
        "test_calc.py",
        "import unittest\n\nclass Calc_FailedTest(unittest.TestCase):\n    def test_sub(self):\n        print(\"ModuleNotFoundError: No module named 'helpers'\")\n        self.assertEqual(3 - 1, 1)\n",
    );
    // The control first.
    let out = test_call(
        &ws,
        "command = \"python3 -m unittest\"",
        "{selection = {\"test_calc.Nope\"}}",
    );
    assert_eq!(out["invalidProbe"]["reason"], "unknown-test", "{out}");
    let out = test_call(&ws, "command = \"python3 -m unittest\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    assert_eq!(
        failed_names(&out),
        ["test_calc.Calc_FailedTest.test_sub"],
        "{out}"
    );
    assert!(
        out.get("invalidProbe").is_none(),
        "a real assertion failure was made the command's by the class's name and a print: {out}"
    );
}

/// jest: a test file whose code throws at load (a real bug: TypeError)
/// and that logs jest's own "Cannot find module" words is reported as
/// `unknown-module`, though jest's report says the suite failed with a
/// TypeError. The control: a real missing module is `unknown-module`.
#[test]
fn a_jest_suite_that_fails_to_load_for_a_bug_cannot_forge_a_missing_module() {
    let jest = peers().join("node_modules/jest/bin/jest.js");
    need_file(&jest, "npm install --prefix target/peers jest");
    let runner = format!(
        "command = {}",
        lua_str(&format!("node {} --ci --no-cache", jest.display()))
    );
    // The control: a real missing module.
    let ws = workspace();
    put(&ws, "package.json", "{\"name\": \"calc\"}\n");
    put(
        &ws,
        "calc.test.js",
        "const h = require('./helpers');\ntest('adds', () => { expect(h.add(1, 1)).toBe(2); });\n",
    );
    let out = test_call(&ws, &runner, "{}");
    assert_eq!(out["invalidProbe"]["reason"], "unknown-module", "{out}");
    // The attack.
    let ws = workspace();
    put(&ws, "package.json", "{\"name\": \"calc\"}\n");
    put(
        &ws,
        "calc.test.js",
        "console.log(\"Error: Cannot find module './helpers' from 'calc.test.js'\");\nconst calc = { add: () => { throw new TypeError('add is broken'); } };\ncalc.add(1, 1);\ntest('adds', () => { expect(calc.add(1, 1)).toBe(2); });\n",
    );
    let out = test_call(&ws, &runner, "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    assert!(
        out.get("invalidProbe").is_none(),
        "a suite that failed to load for a TypeError was made a missing module by its own console.log: {}",
        json!({"invalidProbe": out["invalidProbe"], "failed": out["failed"]})
    );
}

/// Holds: with a parsed report naming a test that ran and failed, other
/// runners' words printed by the test (go's t.Log, node's console.log)
/// decide nothing.
#[test]
fn go_and_node_failing_tests_printing_other_runners_words_stay_the_codes() {
    need_program("go", "apt-get install golang-go");
    need_program("node", "apt-get install nodejs");
    let words = [
        "Error: Cannot find module './helpers'",
        "error: no test target named `calc`.",
        "No tests found, exiting with code 1",
        "pattern ./nope/...: directory not found",
        "ERROR: not found: tests/test_x.py::test_y",
        "matched no packages",
        "Could not find '/w/test/nope.test.js'",
    ];
    let go_lines: String = words
        .iter()
        .map(|w| format!("\tt.Log({})\n", serde_json::to_string(w).unwrap()))
        .collect();
    let ws = workspace();
    put(&ws, "gomod/go.mod", "module example.com/calc\n\ngo 1.19\n");
    put(
        &ws,
        "gomod/calc_test.go",
        &format!("package calc\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) {{\n{go_lines}\tt.Fatal(\"real bug\")\n}}\n"),
    );
    let out = test_call(&ws, "command = \"go test -v ./...\", cwd = \"gomod\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    assert_eq!(failed_names(&out), ["TestBroken"], "{out}");
    assert!(out.get("invalidProbe").is_none(), "go: {out}");

    let js_lines: String = words
        .iter()
        .map(|w| format!("  console.log({});\n", serde_json::to_string(w).unwrap()))
        .collect();
    let ws = workspace();
    put(
        &ws,
        "test/calc.test.js",
        &format!("const test = require('node:test');\nconst assert = require('node:assert');\ntest('breaks', () => {{\n{js_lines}  assert.strictEqual(1 + 1, 3);\n}});\n"),
    );
    let out = test_call(&ws, "command = \"node --test\"", "{}");
    assert_eq!(out["exitCode"], 1, "{out}");
    assert_eq!(failed_names(&out), ["breaks"], "{out}");
    assert!(out.get("invalidProbe").is_none(), "node: {out}");
}

// ---- 4. the model judge ----

/// The model's evidence must be a line of the output; a fragment of one
/// (here a single word) is not, yet counts. The control: the whole line
/// counts.
#[test]
fn a_model_judges_evidence_that_is_only_a_fragment_of_a_line_does_not_count() {
    use model_server::{openai_text, Answer, ModelServer};
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'something in the code broke at step 3'\nexit 2\n",
    );
    let whole = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "something in the code broke at step 3", "confidence": 0.9}).to_string();
    let fragment = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "e", "confidence": 0.9}).to_string();
    let server = ModelServer::start(vec![
        Answer::json(openai_text(&whole)),
        Answer::json(openai_text(&fragment)),
    ]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runner = JUDGED_ODD_SH;
    let outs = run_with(
        &ws,
        runner,
        &flags,
        "for i = 1, 2 do local r, e = sluice.test{} emit(r or e) end\n",
    );
    // The control.
    assert_eq!(outs[0]["judgedBy"], "model", "{}", outs[0]);
    assert_eq!(
        outs[0]["invalidProbe"]["reason"], "unknown-path",
        "{}",
        outs[0]
    );
    // The attack.
    assert!(
        outs[1].get("invalidProbe").is_none(),
        "the model's evidence \"e\" is no line of the output, yet its answer counted: {}",
        outs[1]
    );
    assert!(
        outs[1]["judgeNote"]
            .as_str()
            .unwrap_or_default()
            .contains("not a line of the output"),
        "{}",
        outs[1]
    );
}

/// A credential the host put in the runner's `env` that a failing test
/// prints must not reach the model judge's provider: the request the
/// loopback server receives holds the secret neither whole, nor in part
/// where the judge's 8,000-byte tail starts inside it (the second run pads
/// the output so the tail begins mid-secret). The control: the judge still
/// gets the output otherwise (the line its evidence quotes, the secret's
/// line with `[redacted]`) and its answer counts.
#[test]
fn a_runner_env_secret_printed_by_a_test_never_reaches_the_model_judge() {
    use model_server::{openai_text, Answer, ModelServer};
    let secret = "tok-5b2e81c4d97a03f6";
    let ws = workspace();
    let confident = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.9}).to_string();
    let server = ModelServer::start(vec![
        Answer::json(openai_text(&confident)),
        Answer::json(openai_text(&confident)),
    ]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // After the secret's first 8 bytes, exactly 8,000 bytes of output (its
    // other 12 and a newline, the padding and a newline, the two lines
    // after): the judge's tail starts inside the secret.
    let after = (secret.len() - 8) + 1 + 1 + "token is \n".len() + secret.len();
    let pad = 8_000 - after - "fixture dir /data/fixtures absent\n".len();
    put(
        &ws,
        "odd.sh",
        &format!(
            "echo 'fixture dir /data/fixtures absent'\nif [ -n \"$PAD\" ]; then printf '%s\\n' \"$DEPLOY_TOKEN\"; head -c {pad} /dev/zero | tr '\\0' x; echo; fi\necho \"token is $DEPLOY_TOKEN\"\necho 'fixture dir /data/fixtures absent'\nexit 2\n"
        ),
    );
    let runner = format!("{JUDGED_ODD_SH}, env = {{DEPLOY_TOKEN = '{secret}'}}");
    let body = "local r, e = sluice.test{} emit(r or e)\n";
    let first = run_with(&ws, &runner, &flags, body).remove(0);
    let runner = format!("{JUDGED_ODD_SH}, env = {{DEPLOY_TOKEN = '{secret}', PAD = '1'}}");
    let second = run_with(&ws, &runner, &flags, body).remove(0);
    // The control: the judge was asked, saw the output, and its answer counted.
    for out in [&first, &second] {
        assert_eq!(out["judgedBy"], "model", "{out}");
        assert_eq!(out["invalidProbe"]["reason"], "unknown-path", "{out}");
    }
    let asked = server.requests();
    assert_eq!(asked.len(), 2);
    for (n, request) in asked.iter().enumerate() {
        let sent = &request.text;
        // The attack: the secret, or its last 12 bytes, in the request.
        assert!(
            !sent.contains(secret) && !sent.contains(&secret[8..]),
            "run {}: the runner's DEPLOY_TOKEN, printed by a test, was sent to the model judge's provider",
            n + 1
        );
        assert!(
            sent.contains("fixture dir /data/fixtures absent")
                && sent.contains("token is [redacted]"),
            "run {}: the judge did not get the output: {sent}",
            n + 1
        );
    }
}

/// Holds: a policy denying `model:call:local/judge-1` stops the judge's
/// call (the server is never asked), the result has a `judgeNote` and no
/// probe, and the denied call is a call of the record of its own. The
/// control: without the deny, the same run asks the model.
#[test]
fn a_policy_denying_the_model_judge_stops_its_call_and_notes_it() {
    use model_server::{openai_text, Answer, ModelServer};
    let confident = json!({"belongsTo": "command", "reason": "unknown-path", "evidence": "fixture dir /data/fixtures absent", "confidence": 0.9}).to_string();
    let runner = JUDGED_ODD_SH;
    let body = "local r, e = sluice.test{} emit(r or e)\n";
    // The attack's setting: the deny.
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'fixture dir /data/fixtures absent'\nexit 2\n",
    );
    let server = ModelServer::start(vec![Answer::json(openai_text(&confident))]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let deny = policy(
        &ws,
        "nojudge.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.deny(\"model:call:local/judge-1\", \"no model judges here\") } }",
    );
    let pol = runner_policy(&ws, runner);
    let out = run_lines(&ws, &["default", &deny, &pol], &flags, &[], body).remove(0);
    assert_eq!(server.count(), 0, "the denied judge was asked: {out}");
    assert!(out.get("invalidProbe").is_none(), "{out}");
    let note = out["judgeNote"].as_str().unwrap_or_default();
    assert!(note.contains("permission_denied"), "{out}");
    let rows = exported_calls(ws.path());
    let flows: Vec<&str> = rows.iter().map(|c| c["flow"].as_str().unwrap()).collect();
    assert_eq!(flows, ["test", "model"], "{rows:?}");
    let verify = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    // The control: without the deny the model is asked and counts.
    let ws = workspace();
    put(
        &ws,
        "odd.sh",
        "echo 'fixture dir /data/fixtures absent'\nexit 2\n",
    );
    let server = ModelServer::start(vec![Answer::json(openai_text(&confident))]);
    let flags = model_server::local_openai_flags(&server);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = run_with(&ws, runner, &flags, body).remove(0);
    assert_eq!(server.count(), 1, "{out}");
    assert_eq!(out["judgedBy"], "model", "{out}");
}

// ---- 5. the record ----

/// A credential the host put in the runner's `env` (a name holding TOKEN)
/// that a test prints reaches the record in the test call's `tail`: the
/// record cuts credential-shaped `env` entries' values from a call, but
/// the runner's env is never part of the call's input. The control: the
/// same value in a `bash` call's env is cut from the record, and the chain
/// verifies.
#[test]
fn a_runner_env_credential_printed_by_a_test_stays_out_of_the_record() {
    let secret = "tok-7c1e9a44f02b5d68";
    // The control: bash's env.
    let ws = workspace();
    let run = run_lines(
        &ws,
        &["default"],
        &[],
        &[],
        &format!(
            "local r = sluice.bash{{command = 'echo $DEPLOY_TOKEN', env = {{DEPLOY_TOKEN = '{secret}'}}}}\nemit(r.exitCode)\n"
        ),
    );
    assert_eq!(run[0], 0);
    assert!(
        record_files_holding(ws.path(), secret).is_empty(),
        "the control: bash's env value is cut"
    );
    // The attack: the runner's env.
    let ws = workspace();
    put(&ws, "leak.sh", "echo \"token is $DEPLOY_TOKEN\"\nexit 1\n");
    let out = test_call(
        &ws,
        &format!("command = \"sh leak.sh\", env = {{DEPLOY_TOKEN = '{secret}'}}"),
        "{}",
    );
    assert_eq!(out["exitCode"], 1, "{out}");
    let verify = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    let holding = record_files_holding(ws.path(), secret);
    assert!(
        holding.is_empty(),
        "the runner's DEPLOY_TOKEN, printed by a test, is in the record: {holding:?}"
    );
}

// ---- 2. confinement: the base worktree ----

/// Under a policy that grants writes to one folder of the workspace
/// (`out`), the base revision commits `out` as a symlink to a folder
/// outside: mirroring the grant onto the worktree (`copy/out`, which
/// exists through the link) must not grant the link's target. The
/// control: in the workspace the same command writes `out/` and is
/// refused outside.
#[test]
fn a_symlink_committed_in_the_base_cannot_carry_a_write_grant_outside() {
    need_bwrap();
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        let victim = outside_tmp(&ws, &format!("victim-{runner}"));
        git(ws.path(), &["init", "-q", "-b", "main"]);
        std::os::unix::fs::symlink(&victim, ws.file("out")).unwrap();
        git(ws.path(), &["add", "out"]);
        git(ws.path(), &["commit", "-q", "-m", "base"]);
        std::fs::remove_file(ws.file("out")).unwrap();
        // (Under landlock a writable root gets no new entries at its top
        // when read-only names lie in it: the workspace run writes in
        // out/sub.)
        std::fs::create_dir_all(ws.file("out/sub")).unwrap();
        let pol = policy(
            &ws,
            "outonly.lua",
            &format!(
                "local p = require(\"sluice.policy\")\nreturn {{ rules = {{\n  p.deny(\"fs:write:${{workspace}}/.git\", \"x\"), p.deny(\"fs:write:${{workspace}}/.git/**\", \"x\"),\n  p.deny(\"fs:*:${{workspace}}/.sluice\", \"x\"), p.deny(\"fs:*:${{workspace}}/.sluice/**\", \"x\"),\n  p.programs,\n  p.allow \"fs:read:${{workspace}}\", p.allow \"fs:read:${{workspace}}/**\",\n  p.allow \"fs:write:${{workspace}}/out\", p.allow \"fs:write:${{workspace}}/out/**\",\n  p.allow \"proc:spawn:*\",\n}},\n  test = {{ command = {}, baseRef = \"main\" }} }}\n",
                lua_str(&format!(
                    "touch out/sub/made-$$; touch out/made-$$; touch {}/direct-$$; exit 0",
                    victim.display()
                ))
            ),
        );
        let body = "local r, e = sluice.test{}\nemit(r or e)\nlocal r2, e2 = sluice.test{against = \"base\"}\nemit(r2 or e2)\n";
        let outs = run_lines(&ws, &[&pol], &sandbox, &[], body);
        // The control: the workspace run writes out/ and nothing outside.
        assert_eq!(outs[0]["exitCode"], 0, "{runner}: {}", outs[0]);
        assert!(
            names_in(&ws.file("out/sub"))
                .iter()
                .any(|n| n.starts_with("made-")),
            "{runner}: {}",
            outs[0]
        );
        // The attack: the base run (or its refusal) leaves the victim as it was.
        let written = names_in(&victim);
        assert!(
            written.is_empty(),
            "{runner}: the base run wrote {written:?} into {} through the committed symlink `out` (the workspace's out/ holds {:?}): {}",
            victim.display(),
            names_in(&ws.file("out")),
            outs[1]
        );
    }
}

/// A base repository for the checkout attacks: `a.txt` and `.gitattributes`
/// (holding `attributes`) committed on `main`.
fn base_repo(ws: &Workspace, attributes: &str) {
    git(ws.path(), &["init", "-q", "-b", "main"]);
    put(ws, "a.txt", "a\n");
    put(ws, ".gitattributes", attributes);
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "base"]);
}

/// `git config KEY VALUE` in the workspace's repository, as a hostile
/// repository (or an agent that wrote `.git/config` before) holds it.
fn set(ws: &Workspace, key: &str, value: &str) {
    git(ws.path(), &["config", key, value]);
}

/// An executable file at `path` running `sh` text.
fn executable(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{text}\n")).unwrap();
    Command::new("chmod").arg("+x").arg(path).status().unwrap();
}

/// Making the base checkout must run nothing of the repository's: each
/// hostile repository below would run `touch MARKER` on the host,
/// unconfined, under `git worktree add` with only hooks and fsmonitor
/// switched off. A smudge filter and a `process` filter the repository's
/// config defines for its committed `.gitattributes`; a filter defined in
/// a file the workspace holds, reached by `include.path`; attributes files
/// the agent wrote (`core.attributesFile` naming one in the workspace,
/// `.git/info/attributes`); a `post-checkout` hook; `core.fsmonitor`; and
/// a partial clone whose missing blobs git would fetch lazily from its
/// promisor remote, an `ext::` command. The git steps are the host's, not
/// a command's, so no sandbox runner is involved. The control (next
/// test): a repository with ordinary attributes still compares.
#[test]
fn making_the_base_checkout_runs_nothing_of_the_repositorys() {
    type Plant = fn(&Workspace, &str);
    let attacks: Vec<(&str, Plant)> = vec![
        ("a smudge filter", |ws, touch| {
            base_repo(ws, "* filter=x\n");
            set(ws, "filter.x.smudge", &format!("sh -c '{touch}; cat'"));
        }),
        ("a process filter", |ws, touch| {
            base_repo(ws, "* filter=p\n");
            set(ws, "filter.p.process", &format!("sh -c '{touch}; exit 1'"));
        }),
        (
            "a filter defined in a file include.path names",
            |ws, touch| {
                base_repo(ws, "* filter=i\n");
                put(
                    ws,
                    "evil.gitconfig",
                    &format!("[filter \"i\"]\n\tsmudge = \"sh -c '{touch}; cat'\"\n"),
                );
                set(ws, "include.path", "../evil.gitconfig");
            },
        ),
        (
            "an attributes file the agent wrote (core.attributesFile)",
            |ws, touch| {
                base_repo(ws, "*.txt text\n");
                put(ws, "agent.attributes", "* filter=f\n");
                set(
                    ws,
                    "core.attributesFile",
                    &ws.file("agent.attributes").display().to_string(),
                );
                set(ws, "filter.f.smudge", &format!("sh -c '{touch}; cat'"));
            },
        ),
        (
            "an attributes file the agent wrote (.git/info/attributes)",
            |ws, touch| {
                base_repo(ws, "*.txt text\n");
                put(ws, ".git/info/attributes", "* filter=g\n");
                set(ws, "filter.g.smudge", &format!("sh -c '{touch}; cat'"));
            },
        ),
        ("a post-checkout hook", |ws, touch| {
            base_repo(ws, "*.txt text\n");
            executable(&ws.file(".git/hooks/post-checkout"), touch);
            executable(&ws.file(".git/hooks/reference-transaction"), touch);
        }),
        ("core.fsmonitor", |ws, touch| {
            base_repo(ws, "*.txt text\n");
            set(ws, "core.fsmonitor", &format!("sh -c '{touch}'"));
        }),
        (
            "a lazy fetch from a partial clone's promisor remote",
            |ws, touch| {
                let src = ws.path().parent().unwrap().join("origin");
                std::fs::create_dir_all(&src).unwrap();
                git(&src, &["init", "-q", "-b", "main"]);
                git(&src, &["config", "uploadpack.allowFilter", "true"]);
                std::fs::write(src.join("a.txt"), "a\n").unwrap();
                git(&src, &["add", "."]);
                git(&src, &["commit", "-q", "-m", "base"]);
                let url = format!("file://{}", src.display());
                git(
                    ws.path(),
                    &[
                        "clone",
                        "-q",
                        "--no-local",
                        "--filter=blob:none",
                        "--no-checkout",
                        &url,
                        ".",
                    ],
                );
                set(
                    ws,
                    "remote.origin.url",
                    &format!("ext::sh -c {}", touch.replace(' ', "% ")),
                );
                set(ws, "protocol.ext.allow", "always");
            },
        ),
    ];
    let mut ran = Vec::new();
    for (what, plant) in attacks {
        let ws = workspace();
        let marker = ws.path().parent().unwrap().join("ran");
        plant(&ws, &format!("touch {}", marker.display()));
        assert!(
            !marker.exists(),
            "{what}: the marker exists before the checkout"
        );
        let out = test_call(
            &ws,
            "command = \"true\", baseRef = \"HEAD\"",
            "{against = \"base\"}",
        );
        if marker.exists() {
            ran.push(format!(
                "{what} ran on the host while the base checkout was made: {out}"
            ));
        } else if what.contains("lazy fetch") {
            // The blobs are not there to check out, and are not fetched.
            assert_eq!(out["code"], "command_failed", "{what}: {out}");
            assert!(
                out["message"].as_str().unwrap().contains("not fetched"),
                "{what}: {out}"
            );
        } else {
            // The checkout was made, without what the repository added.
            assert_eq!(out["base"]["exitCode"], 0, "{what}: {out}");
        }
    }
    assert!(ran.is_empty(), "{}", ran.join("\n"));
}

/// The control of the attacks above: in a repository with ordinary
/// attributes (`*.py text eol=lf`, and `*.dat text eol=crlf`, which the
/// base's tests check they get), the base checkout applies git's own
/// conversions, and the comparison still reports introduced, preexisting
/// and fixed failures.
#[test]
fn a_base_comparison_with_ordinary_attributes_still_reports_each_kind_of_failure() {
    let ws = workspace();
    git(ws.path(), &["init", "-q", "-b", "main"]);
    let suite = |regresses: bool, fixed: bool| {
        format!(
            "def test_old_bug():\n    assert False, 'old'\n\ndef test_regresses():\n    assert {}\n\ndef test_fixed_later():\n    assert {}\n\ndef test_crlf_data():\n    assert open('data.dat', 'rb').read() == b'x\\r\\ny\\r\\n'\n",
            if regresses { "False, 'new'" } else { "True" },
            if fixed { "True" } else { "False, 'was broken'" }
        )
    };
    put(
        &ws,
        ".gitattributes",
        "*.py text eol=lf\n*.dat text eol=crlf\n",
    );
    put(&ws, "data.dat", "x\r\ny\r\n");
    let out = compare_with_base(&ws, &suite(false, false), &suite(true, true));
    // test_crlf_data passes in both: the base got data.dat with CRLF.
    assert_each_kind_of_failure(&out);
}

/// A test run that times out is stopped before the sandbox's guard looks
/// for the repositories it made, so a `.git` the test code made (under
/// bubblewrap a workspace without one cannot mask it) stays; the next
/// `against = "base"` then runs `git worktree add` on the host against
/// that repository, whose config (a smudge filter) runs unconfined. The
/// workspace here is a folder of a monorepo (its repository is the
/// parent's). The control: before the attack the base run works against
/// the parent repository.
#[test]
fn a_timed_out_test_run_cannot_leave_a_repository_whose_config_the_base_checkout_runs() {
    need_bwrap();
    let mut broke = Vec::new();
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        let marker_dir = outside_tmp(&ws, &format!("smudge-{runner}"));
        let marker = marker_dir.join("pwned");
        let mono = ws.path().parent().unwrap();
        git(mono, &["init", "-q", "-b", "main"]);
        put(&ws, "a.txt", "a\n");
        put(
            &ws,
            "plant.sh",
            &format!(
                "case \"$PWD\" in *sluice-base-*) exit 0;; esac\nif [ -n \"$PLANT\" ] && [ ! -e .git ]; then\n  git init -q -b main . 2>&1 || exit 0\n  echo '* filter=x' > .gitattributes\n  git add .gitattributes a.txt plant.sh\n  git -c user.name=a -c user.email=a@b commit -q -m x 2>&1\n  git config filter.x.smudge \"sh -c 'touch {}; cat'\"\n  sleep 60\nfi\nexit 0\n",
                marker.display()
            ),
        );
        git(mono, &["add", "ws/a.txt", "ws/plant.sh"]);
        git(mono, &["commit", "-q", "-m", "base"]);
        let test = "command = \"sh plant.sh\", baseRef = \"main\"";
        // The control: the base run works against the parent's repository.
        let out = test_call_with(&ws, test, &sandbox, "{against = \"base\"}");
        assert_eq!(out["base"]["exitCode"], 0, "{runner}: {out}");
        // The attack: a run that plants a repository and outlives its limit.
        let pol = runner_policy(&ws, &format!("{test}, env = {{PLANT = \"1\"}}"));
        let body = "local r, e = sluice.test{timeoutMs = 4000}\nemit(r or e)\nlocal r2, e2 = sluice.test{against = \"base\"}\nemit(r2 or e2)\n";
        let outs = run_lines(&ws, &["default", &pol], &sandbox, &[], body);
        // (Under landlock the plant is refused at once: nothing new can be
        // made at the workspace's top, and the run ends without a timeout.)
        let left = ws.file(".git").exists();
        let ran = marker.exists();
        if left || ran {
            broke.push(format!(
                "{runner}: the timed-out run ({}) left a .git in the workspace ({left}), and the base checkout ran its smudge filter on the host ({ran}): {}",
                outs[0]["code"],
                outs[1]
            ));
        }
    }
    assert!(broke.is_empty(), "{}", broke.join("\n"));
}

/// Holds: a base run stopped by its time limit still removes its worktree,
/// its private folder and git's record of it.
#[test]
fn a_base_run_that_times_out_leaves_no_worktree_behind() {
    let ws = workspace();
    git(ws.path(), &["init", "-q", "-b", "main"]);
    put(&ws, "a.txt", "a\n");
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "base"]);
    let tmp = ws.path().parent().unwrap().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let pol = runner_policy(&ws, "command = \"sleep 60\", baseRef = \"main\"");
    let out = run_lines(
        &ws,
        &["default", &pol],
        &[],
        &[("TMPDIR", tmp.to_str().unwrap())],
        "local r, e = sluice.test{against = \"base\", timeoutMs = 1500}\nemit(r or e)\n",
    )
    .remove(0);
    assert_eq!(out["code"], "timeout", "{out}");
    let left: Vec<String> = names_in(&tmp)
        .into_iter()
        .filter(|n| n.starts_with("sluice-base-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
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

/// Holds: symlinks committed in the base that point at the workspace's
/// hidden files (its `.env`, the audit store `.sluice/audit.db`) read
/// nothing there, under each runner. The control: the base run reads the
/// base's own notes.
#[test]
fn the_base_run_cannot_read_hidden_workspace_files_through_committed_symlinks() {
    need_bwrap();
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        git(ws.path(), &["init", "-q", "-b", "main"]);
        put(&ws, "notes.txt", "base notes\n");
        std::os::unix::fs::symlink(ws.file(".env"), ws.file("leak-env")).unwrap();
        std::os::unix::fs::symlink(ws.file(".sluice/audit.db"), ws.file("leak-db")).unwrap();
        git(ws.path(), &["add", "notes.txt", "leak-env", "leak-db"]);
        git(ws.path(), &["commit", "-q", "-m", "base"]);
        std::fs::remove_file(ws.file("leak-env")).unwrap();
        std::fs::remove_file(ws.file("leak-db")).unwrap();
        put(&ws, ".env", "TOKEN=ws-secret-5521\n");
        let steal = "command = \"if grep -q ws-secret-5521 leak-env; then exit 11; fi; if head -c 15 leak-db | grep -q SQLite; then exit 12; fi; grep -q 'base notes' notes.txt || exit 13; exit 0\", baseRef = \"main\"";
        // A first run makes the audit store.
        let _ = test_call_with(&ws, "command = \"true\"", &sandbox, "{}");
        assert!(ws.file(".sluice/audit.db").exists());
        let out = test_call_with(&ws, steal, &sandbox, "{against = \"base\"}");
        assert_eq!(
            out["base"]["exitCode"], 0,
            "{runner}: 11: read .env, 12: read the audit db, 13: the control failed: {out}"
        );
    }
}

/// Holds: a selection naming a test file outside the workspace (here in
/// /var/tmp, which the policy does not open to commands) does not run it,
/// under each runner. The control: the same file inside the workspace runs.
#[test]
fn a_selection_naming_a_test_file_outside_the_workspace_does_not_run_it() {
    need_bwrap();
    let body = "def test_outside():\n    assert False, 'OUTSIDE-RAN'\n";
    for runner in runners() {
        let sandbox = ["--sandbox", runner.as_str()];
        let ws = workspace();
        let dir = outside_tmp(&ws, &format!("suite-{runner}"));
        std::fs::write(dir.join("test_outside.py"), body).unwrap();
        let far = dir.join("test_outside.py").display().to_string();
        let out = test_call_with(
            &ws,
            &pytest_runner(),
            &sandbox,
            &format!("{{selection = {{{}}}}}", lua_str(&far)),
        );
        assert!(
            !out["tail"]
                .as_str()
                .unwrap_or_default()
                .contains("OUTSIDE-RAN"),
            "{runner}: a test file outside the workspace ran: {out}"
        );
        assert_eq!(out["passed"], 0, "{runner}: {out}");
        // The control.
        put(&ws, "tests/test_outside.py", body);
        let out = test_call_with(
            &ws,
            &pytest_runner(),
            &sandbox,
            "{selection = {\"tests/test_outside.py\"}}",
        );
        assert!(
            out["tail"]
                .as_str()
                .unwrap_or_default()
                .contains("OUTSIDE-RAN"),
            "{runner}: {out}"
        );
    }
}

/// A failing test that prints the shell's "not found" words and ends its
/// runner with status 127 is reported as `unknown-command`, though the
/// host found the runner's program (python3) and the test ran. The exit
/// status and the output are both the test's. The control: a runner whose
/// program is missing is `unknown-command`.
#[test]
fn a_test_that_exits_127_with_the_shells_words_cannot_forge_an_unknown_command() {
    let ws = workspace();
    put(
        &ws,
        "test_calc.py",
        "import os, unittest\n\ndef add(a, b):\n    return a - b\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        if add(1, 1) != 2:\n            print('sluice-test: 1: pytset: not found', flush=True)\n            os._exit(127)\n",
    );
    let out = test_call(&ws, "command = \"python3 -m unittest\"", "{}");
    assert_eq!(out["exitCode"], 127, "{out}");
    // The control.
    let control = test_call(&ws, "command = \"pytset-7f3a -q\"", "{}");
    assert_eq!(
        control["invalidProbe"]["reason"], "unknown-command",
        "{control}"
    );
    assert!(
        out.get("invalidProbe").is_none(),
        "a test that ran (python3 exists) and printed the shell's words was made a missing program: {out}"
    );
}
