//! What a confined command may do to git, through the real binary under
//! each runner: every read-only path of several nested profiles refuses a
//! write from inside the running sandbox, and no command leaves behind a
//! git setup (a `commondir`, a new repository, a `gitdir:` file, a bare
//! repository's layout) that runs code in the user's next ordinary `git
//! status`, run here for real outside any sandbox.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn need_tools() {
    need_bwrap();
    need_program("git", "apt-get install git");
}

/// `git ARGS` in `dir`, outside any sandbox, with a clean configuration.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .output()
        .expect("run git")
}

fn init(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let out = git(dir, &["init", "-q"]);
    assert_ran(&out);
}

/// A policy that grants the whole workspace, `.git` included: git's
/// control files stay read-only by the sandbox alone.
const BROAD: &str = r#"local p = require("sluice.policy")
return { rules = {
  p.programs,
  p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
  p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
  p.allow "proc:spawn:*",
} }
"#;

fn python(ws: &Workspace, runner: &str, flags: &[&str], program: &str) -> Value {
    need_tools();
    confined_python(ws.path(), runner, flags, &[], program)
}

/// Python that appends to each path and prints `PATH written` or `PATH refused`.
fn try_each(paths: &[PathBuf]) -> String {
    let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    format!(
        "import os\nfor p in {list:?}:\n    try:\n        os.makedirs(os.path.dirname(p), exist_ok=True)\n        open(p, 'a').write('x')\n        print(p, 'written')\n    except OSError as e:\n        print(p, 'refused')\n"
    )
}

fn snapshot(paths: &[PathBuf]) -> Vec<Option<Vec<u8>>> {
    paths.iter().map(|p| std::fs::read(p).ok()).collect()
}

/// Asserts every path in `refused` was refused and left as it was, and
/// every path in `allowed` was written.
fn check(
    runner: &str,
    what: &str,
    ws: &Workspace,
    flags: &[&str],
    refused: &[PathBuf],
    allowed: &[PathBuf],
) {
    let before = snapshot(refused);
    let all: Vec<PathBuf> = refused.iter().chain(allowed).cloned().collect();
    let out = python(ws, runner, flags, &try_each(&all));
    let text = out["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("{runner} {what}: {out}"));
    for p in refused {
        assert!(
            text.contains(&format!("{} refused", p.display())),
            "{runner} {what}: {}: {text}",
            p.display()
        );
    }
    assert_eq!(
        snapshot(refused),
        before,
        "{runner} {what}: a read-only path changed on disk"
    );
    for p in allowed {
        assert!(
            text.contains(&format!("{} written", p.display())),
            "{runner} {what}: {}: {text}",
            p.display()
        );
    }
}

#[test]
fn every_read_only_path_of_several_nested_profiles_refuses_a_write_from_inside() {
    for runner in runners() {
        let runner = runner.as_str();
        // The default policy: .git wholly read-only, a nested repository's
        // too, the record out of reach.
        let ws = workspace();
        init(ws.path());
        init(&ws.file("vendor/lib"));
        std::fs::create_dir_all(ws.file("src")).unwrap();
        let refused = [
            ws.file(".git/config"),
            ws.file(".git/HEAD"),
            ws.file(".git/hooks/pre-commit"),
            ws.file(".git/info/exclude"),
            ws.file(".git/objects/new"),
            ws.file("vendor/lib/.git/config"),
            ws.file("vendor/lib/.git/hooks/post-checkout"),
            ws.file("vendor/lib/.git/HEAD"),
        ];
        check(
            runner,
            "default",
            &ws,
            &[],
            &refused,
            &[ws.file("src/ok.txt")],
        );

        // A policy granting all of the workspace, .git included, with the
        // policy file inside it: git's control files of every repository
        // and the policy stay read-only; the rest of .git is writable.
        let ws = workspace();
        init(ws.path());
        init(&ws.file("vendor/lib"));
        std::fs::write(ws.file("policy.lua"), BROAD).unwrap();
        let pol = ws.file("policy.lua").display().to_string();
        let extra_tree = outside_tmp(&ws, "extra");
        init(&extra_tree);
        let refused = [
            ws.file(".git/config"),
            ws.file(".git/hooks/pre-commit"),
            ws.file(".git/info/attributes"),
            ws.file("vendor/lib/.git/config"),
            ws.file("vendor/lib/.git/hooks/pre-commit"),
            ws.file("policy.lua"),
        ];
        // The folders written into are there before: under landlock
        // nothing new can be made at the top of a tree holding read-only
        // paths (checked below).
        std::fs::create_dir_all(ws.file("src")).unwrap();
        std::fs::create_dir_all(ws.file("vendor/lib/src")).unwrap();
        let allowed = [
            ws.file(".git/HEAD"),
            ws.file("src/ok.txt"),
            ws.file("vendor/lib/src/lib.rs"),
        ];
        check(
            runner,
            "broad",
            &ws,
            &["--policy", &pol],
            &refused,
            &allowed,
        );
        let top = [ws.file("new.txt")];
        match runner {
            "bwrap" => check(runner, "top", &ws, &["--policy", &pol], &[], &top),
            _ => check(runner, "top", &ws, &["--policy", &pol], &top, &[]),
        }

        // A second writable tree outside the workspace, with a repository:
        // its control files are read-only too.
        let e = extra_tree.display();
        let two = policy(
            &ws,
            "extra.lua",
            &format!("local p = require('sluice.policy')\nreturn {{rules = {{p.allow 'fs:read:{e}/**', p.allow 'fs:write:{e}', p.allow 'fs:write:{e}/**'}}}}\n"),
        );
        let refused = [
            extra_tree.join(".git/config"),
            extra_tree.join(".git/hooks/pre-push"),
            ws.file(".git/config"),
        ];
        std::fs::write(extra_tree.join("notes.txt"), "").unwrap();
        let allowed = [extra_tree.join("notes.txt"), extra_tree.join(".git/HEAD")];
        check(
            runner,
            "two trees",
            &ws,
            &["--policy", &pol, "--policy", &two],
            &refused,
            &allowed,
        );

        // A deny naming the .git folder itself for writes, with the fixed
        // read-only paths inside it: the folder holding them must not be
        // bound writable again around them (the bug that undid it).
        let ws = workspace();
        init(ws.path());
        let entry = policy(
            &ws,
            "entry.lua",
            &format!(
                "{}\n",
                BROAD.replace("p.programs,", "p.programs, p.deny('fs:write:${workspace}/.git', 'not the folder'), p.deny('fs:write:${workspace}/.git/**', 'nor in it'),")
            ),
        );
        let refused = [
            ws.file(".git/HEAD"),
            ws.file(".git/config"),
            ws.file(".git/objects/x"),
            ws.file(".git/commondir"),
        ];
        std::fs::write(ws.file("ok.txt"), "").unwrap();
        check(
            runner,
            "entry deny",
            &ws,
            &["--policy", &entry],
            &refused,
            &[ws.file("ok.txt")],
        );
    }
}

/// `core.fsmonitor` set to a command that makes `marker`, as git config.
fn fsmonitor(marker: &Path) -> String {
    format!("[core]\n\tfsmonitor = \"touch {}\"\n", marker.display())
}

/// Asserts that the chain `plant` (Python run in a folder) really runs code
/// in a later `git status` when nothing undoes it, so the test below can
/// fail: done by hand in a scratch copy, outside sluice.
fn chain_is_live(setup: impl Fn(&Path), plant: &str, status_in: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(scratch.path()).unwrap();
    setup(&dir);
    let out = Command::new("python3")
        .args(["-c", plant])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_ran(&out);
    let marker = dir.join("MARKER");
    let _ = git(&dir.join(status_in), &["status"]);
    assert!(
        marker.exists(),
        "the chain does not run code with this git, so the test proves nothing: {plant}"
    );
}

/// A git chain: its name, how the workspace starts, the Python a command
/// runs, the folder the user later runs `git status` in.
type Chain = (&'static str, fn(&Path), String, &'static str);

#[test]
fn no_command_leaves_a_git_setup_that_runs_code_in_the_users_next_git_status() {
    need_tools();
    // Each chain: how the workspace starts, the Python a command runs (in
    // the workspace, MARKER naming a file there), and the folder the user
    // later runs `git status` in.
    let chains: [Chain; 4] = [
        (
            "commondir",
            |d| init(d),
            format!(
                "import shutil\nshutil.copytree('.git/objects', 'evil/objects')\nshutil.copytree('.git/refs', 'evil/refs')\nopen('evil/config', 'w').write({:?})\nopen('.git/commondir', 'w').write('../evil')\n",
                fsmonitor(Path::new("MARKER"))
            ),
            ".",
        ),
        (
            "git init",
            |_| {},
            format!(
                "import subprocess\nsubprocess.run(['git', 'init', '-q'], check=True)\nopen('.git/config', 'a').write({:?})\n",
                fsmonitor(Path::new("MARKER"))
            ),
            ".",
        ),
        (
            "gitdir file",
            |_| {},
            format!(
                "import subprocess, os\nsubprocess.run(['git', 'init', '-q', '--separate-git-dir', 'hidden.git', 'elsewhere'], check=True)\nopen('hidden.git/config', 'a').write({:?})\nos.makedirs('sub', exist_ok=True)\nopen('sub/.git', 'w').write('gitdir: ../hidden.git\\n')\n",
                fsmonitor(Path::new("../MARKER"))
            ),
            "sub",
        ),
        (
            "nested repo",
            |d| init(d),
            format!(
                "import subprocess\nsubprocess.run(['git', 'init', '-q', 'deep/er'], check=True)\nopen('deep/er/.git/config', 'a').write({:?})\n",
                fsmonitor(Path::new("../../MARKER"))
            ),
            "deep/er",
        ),
    ];
    for runner in runners() {
        for (name, setup, plant, status_in) in &chains {
            chain_is_live(setup, plant, status_in);
            let ws = workspace();
            setup(ws.path());
            let pol = policy(&ws, "broad.lua", BROAD);
            let out = python(&ws, &runner, &["--policy", &pol], plant);
            // The user's next ordinary git, outside any sandbox.
            let dir = ws.file(status_in);
            if dir.is_dir() {
                let _ = git(&dir, &["status"]);
            }
            assert!(
                !ws.file("MARKER").exists(),
                "{runner} {name}: git ran the command's code: {out}"
            );
            assert_eq!(out["sandbox"]["denied"], true, "{runner} {name}: {out}");
            // Control: the workspace is the command's to change otherwise,
            // and a repository that was there still works.
            if ws.file(".git/HEAD").exists() {
                let st = git(ws.path(), &["status", "--short"]);
                assert!(
                    st.status.success(),
                    "{runner} {name}: {}",
                    String::from_utf8_lossy(&st.stderr)
                );
            }
        }
    }
}

#[test]
fn a_command_may_still_use_git_in_an_existing_repository() {
    need_tools();
    for runner in runners() {
        let ws = workspace();
        init(ws.path());
        git(ws.path(), &["config", "user.name", "t"]);
        git(ws.path(), &["config", "user.email", "t@example.org"]);
        std::fs::write(ws.file("a.txt"), "a\n").unwrap();
        let pol = policy(&ws, "broad.lua", BROAD);
        let script = r#"
local r, e = sluice.bash{command = "git add a.txt && git commit -qm first && git log --oneline | wc -l"}
print(sluice.json.encode(r or e))
"#;
        let run = run_lua_with(
            ws.path(),
            script,
            &["--sandbox", &runner, "--policy", &pol],
            &[],
        )
        .ok();
        let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        if runner == "landlock" {
            // Documented: git cannot make its lock file at the top of a
            // `.git` that holds read-only control files.
            assert_ne!(out["exitCode"], 0, "{runner}: {out}");
            assert!(
                out["stderr"].as_str().unwrap().contains("index.lock"),
                "{runner}: {out}"
            );
            let log = git(ws.path(), &["log", "--oneline"]);
            assert!(log.stdout.is_empty(), "{runner}: a commit was made");
            continue;
        }
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        assert_eq!(out["stdout"], "1\n", "{runner}: {out}");
        assert_eq!(out["sandbox"]["denied"], false, "{runner}: {out}");
        assert!(out["sandbox"].get("reverted").is_none(), "{runner}: {out}");
    }
}

#[test]
fn git_runs_where_the_users_git_config_is_out_of_reach() {
    // git stops at a configuration file it may not open; under landlock the
    // user's ~/.gitconfig is there but unreadable, under bubblewrap absent.
    need_tools();
    for runner in runners() {
        let ws = workspace();
        init(ws.path());
        let home = ws.path().parent().unwrap().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n\tname = HIDDEN-NAME\n").unwrap();
        let script = r#"
local r, e = sluice.bash{command = "git config --get user.name; echo rc=$?; git status --short >/dev/null && echo status-ok"}
print(sluice.json.encode(r or e))
"#;
        let home_s = home.to_str().unwrap();
        let run = run_lua_env(
            ws.path(),
            script,
            &["--sandbox", &runner],
            &[],
            &[("HOME", home_s)],
        )
        .ok();
        let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(out["stdout"], "rc=1\nstatus-ok\n", "{runner}: {out}");
    }
}
