//! Containers the run starts get the policy's protections over their
//! mounts, through the real `sluice` binary and real podman containers: a
//! routed command in a declared container cannot write the workspace's
//! `.git` (its hooks run at the user's next `git`, outside any sandbox) or
//! the audit store, nor read what the policy hides (`**/.env`), and its
//! result lists what was protected; beside the control, a declared
//! container that builds and tests a project in the workspace and reads
//! `.git`. A container the run only reaches says it has none of them.

mod common;
#[path = "common/containers.rs"]
mod containers;

use common::{policy, sluice_run, workspace, Run, Workspace, EMIT};
use serde_json::{json, Value};
use std::process::Command;

/// A policy that allows every command and the workspace but hides `.env`
/// files, with `extra` fields in its table.
fn guarded(extra: &str) -> String {
    format!(
        r#"local p = require("sluice.policy")
return {{
  rules = {{ p.programs, p.allow "proc:spawn:*", p.allow "fs:*:${{workspace}}/**",
    p.deny("fs:*:**/.env", "secrets stay out of agents' reach") }},
  {extra}
}}"#
    )
}

/// [`guarded`] with container `box` declared on the workspace (`mounts`)
/// and every command routed there.
fn declared(mounts: &str) -> String {
    guarded(&format!(
        r#"containers = {{ box = {{ image = "{}", engine = "podman", mounts = {{{mounts}}}, workdir = "/srv" }} }},
  route = function(req) return "box" end,"#,
        containers::image()
    ))
}

/// Runs `body` (with `emit` and `try(input)`, which emits a bash result
/// or its error) under policy text `pol` and `flags`; each stdout line.
fn run(ws: &Workspace, pol: &str, flags: &[&str], body: &str) -> (Run, Vec<Value>) {
    let pol = policy(ws, "p.lua", pol);
    let mut all = vec!["--policy", pol.as_str()];
    all.extend_from_slice(flags);
    let body = format!(
        "{EMIT}local function try(input) local r, e = sluice.bash(input) emit(r or e) end\n{body}"
    );
    let script = common::script_file(ws.path(), &body);
    let out: Run = sluice_run(ws.path(), &script, &all, &[])
        .envs(containers::env())
        .output()
        .expect("spawn sluice")
        .into();
    let lines = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}\n{}", out.stderr))
        })
        .collect();
    (out, lines)
}

/// A workspace that is a git repository, with secrets in `.env` files.
fn repository() -> Workspace {
    let ws = workspace();
    let git = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(ws.path())
        .output()
        .expect("git is installed (apt-get install -y git)");
    assert!(git.status.success(), "{git:?}");
    std::fs::write(ws.file(".env"), "TOKEN=top-secret-1\n").unwrap();
    std::fs::create_dir_all(ws.file("sub")).unwrap();
    std::fs::write(ws.file("sub/.env"), "TOKEN=top-secret-2\n").unwrap();
    ws
}

#[test]
fn a_declared_containers_commands_cannot_write_git_or_the_audit_store_nor_read_env() {
    let ws = repository();
    let (out, lines) = run(
        &ws,
        &declared(r#""${workspace}:/srv""#),
        &[],
        r#"try{command = "printf 'echo pwned\\n' | tee .git/hooks/pre-commit"}
try{command = "mv .git moved-git"}
try{command = "rm -rf .git/hooks"}
try{command = "touch .sluice/injected"}
try{command = "ls -A .sluice"}
try{command = "cat .env sub/.env"}
try{command = "grep -r top-secret . ; true"}
try{command = "mkdir -p sub/.git/hooks && printf 'echo pwned\\n' | tee sub/.git/hooks/pre-commit"}
local job = sluice.bash{command = "mkdir -p bg/.git/hooks && touch bg/.git/hooks/post-checkout", background = true}
job:wait(30000)
emit({status = job.status, sandbox = job.sandbox})"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    for (i, l) in lines.iter().enumerate().take(4) {
        assert_ne!(l["exitCode"], 0, "attack {i} succeeded: {l}");
    }
    assert!(
        lines[0]["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[4]["stdout"], "", "the audit store was visible");
    for l in &lines[5..7] {
        assert!(
            !l["stdout"].as_str().unwrap().contains("top-secret"),
            "a hidden file was read: {l}"
        );
    }
    // On the host: no hook, the repository where it was, the record
    // untouched by the container.
    assert!(!ws.file(".git/hooks/pre-commit").exists());
    assert!(ws.file(".git/HEAD").is_file() && ws.file(".git/hooks").is_dir());
    assert!(!ws.file("moved-git").exists());
    assert!(!ws.file(".sluice/injected").exists());
    assert!(ws.file(".sluice").is_dir());
    assert_eq!(
        std::fs::read_to_string(ws.file(".env")).unwrap(),
        "TOKEN=top-secret-1\n"
    );
    // A repository the command made where there was none is removed when
    // it ends, as on the host, and the result says so.
    assert_eq!(lines[7]["exitCode"], 0, "{}", lines[7]);
    assert!(!ws.file("sub/.git").exists());
    assert_eq!(
        lines[7]["sandbox"]["reverted"],
        json!([ws.file("sub/.git").display().to_string()])
    );
    assert_eq!(lines[7]["sandbox"]["denied"], true);
    assert_eq!(lines[0]["sandbox"]["denied"], true, "{}", lines[0]);
    // A background job's too, when it ends.
    assert!(!ws.file("bg/.git").exists());
    assert_eq!(
        lines[8]["sandbox"]["reverted"],
        json!([ws.file("bg/.git").display().to_string()]),
        "{}",
        lines[8]
    );
    // The result says what was protected.
    let facts = &lines[0]["sandbox"];
    assert_eq!(facts["mode"], "container");
    assert_eq!(facts["protected"], true, "{facts}");
    assert_eq!(facts["enforcement"], "partial");
    assert_eq!(facts["readOnly"], json!(["/srv/.git"]), "{facts}");
    assert_eq!(
        facts["hidden"],
        json!(["/srv/.env", "/srv/.sluice", "/srv/sub/.env"]),
        "{facts}"
    );
}

#[test]
fn a_declared_container_still_builds_and_tests_a_project_in_the_workspace() {
    let ws = repository();
    std::fs::create_dir_all(ws.file("proj/src")).unwrap();
    std::fs::write(ws.file("proj/src/a.txt"), "hello\n").unwrap();
    std::fs::write(ws.file("proj/src/b.txt"), "world\n").unwrap();
    std::fs::write(
        ws.file("proj/build.sh"),
        "set -e\nmkdir -p out\ncat src/*.txt > out/all.txt\necho built\n",
    )
    .unwrap();
    std::fs::write(
        ws.file("proj/test.sh"),
        "grep -q hello out/all.txt && grep -q world out/all.txt && echo PASS\n",
    )
    .unwrap();
    let (out, lines) = run(
        &ws,
        &declared(r#""${workspace}:/srv""#),
        &[],
        r#"try{command = "sh build.sh && sh test.sh", cwd = "proj"}
try{command = "cat .git/HEAD; ls .git/hooks | head -1"}"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["exitCode"], 0, "{}", lines[0]);
    assert_eq!(lines[0]["stdout"], "built\nPASS\n");
    assert_eq!(
        std::fs::read_to_string(ws.file("proj/out/all.txt")).unwrap(),
        "hello\nworld\n"
    );
    assert_eq!(lines[1]["exitCode"], 0, "{}", lines[1]);
    let said = lines[1]["stdout"].as_str().unwrap();
    assert!(said.starts_with("ref: refs/heads/main\n"), "{said}");
    assert_eq!(lines[1]["sandbox"]["protected"], true);
}

#[test]
fn a_mount_that_brings_in_a_hidden_path_whole_is_refused() {
    let ws = repository();
    let (out, lines) = run(
        &ws,
        &declared(r#""${workspace}/sub/.env:/secrets.env""#),
        &[],
        r#"try{command = "cat /secrets.env"}"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "provider_unavailable", "{}", lines[0]);
    let message = lines[0]["message"].as_str().unwrap();
    let env = ws.file("sub/.env").display().to_string();
    assert!(
        message.contains(&format!(
            "containers.box.mounts[1] brings in {env}, which commands may not see"
        )),
        "{message}"
    );
    assert!(message.ends_with("the command did not run"), "{message}");
}

#[test]
fn a_container_the_run_only_reaches_says_it_has_none_of_the_protections() {
    let c = containers::Container::start();
    let ws = repository();
    let route = format!(r#"route = function(req) return "{}" end,"#, c.name);
    let (out, lines) = run(
        &ws,
        &guarded(&route),
        &["--container-engine", "podman"],
        r#"try{command = "true"}"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let facts = &lines[0]["sandbox"];
    assert_eq!(facts["protected"], false, "{facts}");
    assert!(facts.get("readOnly").is_none() && facts.get("hidden").is_none());
    assert!(
        facts["partial"][0].as_str().unwrap().contains(&format!(
            "the run did not start container {}, so none of the policy's protections apply in it",
            c.name
        )),
        "{facts}"
    );
}

/// A policy kept in the workspace (`policy/p.lua`) that declares `box` on
/// the workspace, routes every command there and keeps `secret.txt` from
/// the flows.
fn kept_in_workspace() -> String {
    guarded(&format!(
        r#"containers = {{ box = {{ image = "{}", engine = "podman", mounts = {{"${{workspace}}:/srv"}}, workdir = "/srv" }} }},
  route = function(req) return "box" end,"#,
        containers::image()
    ))
    .replace(
        "p.deny(\"fs:*:**/.env\"",
        "p.deny(\"fs:read:${workspace}/secret.txt\", \"the policy's own deny\"), p.deny(\"fs:*:**/.env\"",
    )
}

/// What an agent puts in the policy's place: everything allowed.
const EVIL_POLICY: &str = "local p = require('sluice.policy') return { rules = { p.allow 'fs:*', p.allow 'proc:spawn:*' } }";

// A declared container gets the policy's files mounted read-only, and
// every folder above them bound over itself (pinned): on the host,
// bubblewrap and landlock keep those from being renamed (README, "nor can
// the folders above it be renamed away"). The attack (found by review at
// 05550c0): a routed command renames the policy's folder aside (`mv
// /srv/policy /srv/old`; a read-only mount would move with it), makes a
// new folder by the old name and writes a policy of its own there, so that
// the policy's path on the host holds the agent's file, which the run
// reloads at the next call: the read of `secret.txt` the policy denied
// would succeed. The rename must fail (the folder is a mount point:
// EBUSY), the policy stay the user's, the denied read stay denied.
#[test]
fn a_declared_containers_command_cannot_rename_a_policy_kept_in_the_workspace_away_and_replace_it()
{
    let ws = repository();
    std::fs::create_dir_all(ws.file("policy")).unwrap();
    std::fs::create_dir_all(ws.file("work")).unwrap();
    std::fs::write(ws.file("policy/p.lua"), kept_in_workspace()).unwrap();
    std::fs::write(ws.file("secret.txt"), "the secret\n").unwrap();
    let pol = ws.file("policy/p.lua").display().to_string();
    let body = format!(
        r#"{EMIT}local function read() local r, e = sluice.read{{path = "secret.txt"}} return r and r.content or e.code end
emit(read())
-- The control: the policy's file itself is read-only in the container.
local function sh(input) local r, e = sluice.bash(input) return r and {{r.exitCode, r.stderr}} or e.message end
assert(sluice.write{{path = "work/evil.lua", content = {evil:?}}})
emit(sh{{command = "d=pol; d=${{d}}icy; cp work/evil.lua $d/p.lua"}})
emit(sh{{command = "d=pol; d=${{d}}icy; mv $d old-policy && mkdir $d && cp work/evil.lua $d/p.lua"}})
emit(read())"#,
        evil = EVIL_POLICY
    );
    let script = common::script_file(ws.path(), &body);
    let out: Run = sluice_run(ws.path(), &script, &["--policy", &pol], &[])
        .envs(containers::env())
        .output()
        .expect("spawn sluice")
        .into();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0], "permission_denied", "{lines:?}");
    assert_ne!(lines[1][0], 0, "the policy's file was writable: {lines:?}");
    let said = lines[1][1].as_str().unwrap();
    assert!(said.contains("Read-only file system"), "{said}");
    // The attack: the rename is refused, so nothing after it runs.
    assert_ne!(lines[2][0], 0, "the policy's folder was renamed: {lines:?}");
    let said = lines[2][1].as_str().unwrap();
    assert!(said.contains("Device or resource busy"), "{said}");
    assert!(!ws.file("old-policy").exists());
    let now = std::fs::read_to_string(ws.file("policy/p.lua")).unwrap();
    assert_eq!(
        now,
        kept_in_workspace(),
        "the policy kept in the workspace changed"
    );
    assert_eq!(
        lines[3], "permission_denied",
        "the read the policy denied gave {}",
        lines[3]
    );
}

// The same rename, of the folder holding a nested repository (`sub/.git`;
// found by review at 05550c0): were `sub` not pinned, the read-only mount
// of `sub/.git` would move away with it, and a copy made by the old name
// (`cp -a sub-old sub`) would be the command's to write: a hook put there
// runs at the user's next `git` in `sub`, outside any sandbox; and the
// guard, knowing repositories by path, took the copy at `sub/.git` for
// the one it knew and removed the user's real one, moved to
// `sub-old/.git`, as new. The host's runners refuse the rename (bwrap:
// EBUSY, landlock: EACCES); so must the container, leaving the user's
// repository where it was, whole (the guard knows it by device and inode:
// `sandbox::guard`'s unit tests pin that a moved one is kept).
#[test]
fn a_declared_containers_command_cannot_rename_a_nested_repository_away_and_write_its_hooks() {
    let ws = repository();
    std::fs::create_dir_all(ws.file("sub")).unwrap();
    let git = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(ws.file("sub"))
        .output()
        .unwrap();
    assert!(git.status.success(), "{git:?}");
    let (out, lines) = run(
        &ws,
        &declared(r#""${workspace}:/srv""#),
        &[],
        r##"assert(sluice.write{path = "work/hook", content = "#!/bin/sh\necho pwned\n"})
-- The control: the nested repository's hooks are read-only.
try{command = "d=sub; cp work/hook $d/.git/hooks/post-checkout"}
try{command = "d=sub; mv $d sub-old && cp -a sub-old $d && cp work/hook $d/.git/hooks/post-checkout && chmod +x $d/.git/hooks/post-checkout && echo planted"}"##,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_ne!(lines[0]["exitCode"], 0, "{}", lines[0]);
    assert!(
        lines[0]["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{}",
        lines[0]
    );
    // The attack: the rename is refused; nothing is planted or removed.
    assert_ne!(lines[1]["exitCode"], 0, "{}", lines[1]);
    let said = lines[1]["stderr"].as_str().unwrap();
    assert!(said.contains("Device or resource busy"), "{said}");
    assert!(!ws.file("sub-old").exists());
    assert!(
        ws.file("sub/.git/HEAD").is_file(),
        "the user's repository is gone"
    );
    assert!(
        lines[1]["sandbox"].get("reverted").is_none(),
        "{}",
        lines[1]["sandbox"]
    );
    let hook = ws.file("sub/.git/hooks/post-checkout");
    assert!(
        !hook.exists(),
        "a routed command planted {} (said {}; sandbox {}); sub-old/.git exists: {}",
        hook.display(),
        lines[1]["stdout"],
        lines[1]["sandbox"],
        ws.file("sub-old/.git").exists()
    );
}
