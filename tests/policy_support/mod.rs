//! Helpers for the tests of what a command line may run under a policy
//! (policy_env, policy_forms, policy_programs, control_files): policies that
//! allow a few programs and open what programs need to start, a real git
//! repository, and one call through the real `sluice` binary.
#![allow(dead_code)]

use crate::common;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The PATH the tests give sluice (and so its commands): system folders
/// only, so a program resolves the same way on every machine.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// A policy allowing `rules` (each a pattern, or a full `p.allow(...)` /
/// `p.deny(...)` expression when it starts with `p.`), reads of the system
/// trees programs start from and of the workspace, and writes in the
/// workspace (so a marker could be made if a command ran); anything else
/// is denied.
pub fn policy_text(rules: &[&str]) -> String {
    let mut lines = String::new();
    for r in rules {
        if r.starts_with("p.") {
            lines += &format!("    {r},\n");
        } else {
            lines += &format!("    p.allow {},\n", common::lua_str(r));
        }
    }
    for tree in [
        "/usr", "/bin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/tmp",
    ] {
        lines += &format!("    p.allow \"fs:read:{tree}\",\n    p.allow \"fs:read:{tree}/**\",\n");
    }
    format!(
        r#"local p = require("sluice.policy")
return {{
  rules = {{
{lines}    p.allow "fs:read:${{workspace}}",
    p.allow "fs:read:${{workspace}}/**",
    p.allow "fs:write:${{workspace}}",
    p.allow "fs:write:${{workspace}}/**",
  }},
  otherwise = "deny",
}}
"#
    )
}

/// Writes the policy of [`policy_text`] beside the workspace; its path.
pub fn policy(ws: &common::Workspace, name: &str, rules: &[&str]) -> String {
    common::policy(ws, name, &policy_text(rules))
}

/// One call of `flow` with `input` under the policy file `policy`:
/// `(output, error)`, each `Null` when absent.
pub fn call(ws: &common::Workspace, policy: &str, flow: &str, input: Value) -> (Value, Value) {
    let text = input.to_string();
    let script = format!(
        "local out, err = sluice.call({flow:?}, sluice.json.decode({}))\n\
         print(sluice.json.encode({{out = out or sluice.json.null, err = err or sluice.json.null}}))\n",
        common::lua_str(&text)
    );
    let run = common::run_lua_env(
        ws.path(),
        &script,
        &["--policy", policy, "--no-audit"],
        &[],
        &[("PATH", PATH)],
    );
    assert_eq!(
        run.code, 0,
        "sluice run failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let line = run.stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}\nstderr:\n{}", run.stderr));
    (v["out"].clone(), v["err"].clone())
}

/// `bash{command = line}` (plus `extra` fields) under `policy`.
pub fn bash(ws: &common::Workspace, policy: &str, line: &str, extra: Value) -> (Value, Value) {
    let mut input = serde_json::json!({ "command": line });
    if let Value::Object(more) = extra {
        input.as_object_mut().unwrap().extend(more);
    }
    call(ws, policy, "bash", input)
}

/// Asserts the call was refused by the policy (denied, or an ask nobody
/// answered) and says so with the line.
#[track_caller]
pub fn refused(what: &str, out: &Value, err: &Value) {
    let code = err["code"].as_str().unwrap_or("");
    assert!(
        code == "permission_denied" || code == "permission_required",
        "{what} was not refused: out {out}, err {err}"
    );
}

/// Asserts the command ran to its end with exit code 0.
#[track_caller]
pub fn ran(what: &str, out: &Value, err: &Value) {
    assert_eq!(
        out["exitCode"], 0,
        "{what} did not run to exit 0: out {out}, err {err}"
    );
}

/// Runs git in `dir` (outside sluice), failing the test if it fails.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.org",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("PATH", PATH)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs (install it with: apt-get install git)");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git repository in `dir` with two commits (`a.txt`, then a change to
/// it) and an uncommitted change, so diff, rebase and bisect have work.
pub fn repo(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-qm", "one"]);
    std::fs::write(dir.join("a.txt"), "two\n").unwrap();
    git(dir, &["commit", "-qam", "two"]);
    std::fs::write(dir.join("a.txt"), "three\n").unwrap();
}

/// Whether `program` can be found on [`PATH`].
pub fn installed(program: &str) -> bool {
    PATH.split(':')
        .any(|d| Path::new(d).join(program).is_file())
}

/// Fails the test unless `program` is installed, naming the Debian package
/// that provides it (`scripts/test` installs it).
#[track_caller]
pub fn require(program: &str, package: &str) {
    assert!(
        installed(program),
        "{program} is needed by this test and is not installed; install it with: \
         apt-get install {package} (scripts/test does)"
    );
}
