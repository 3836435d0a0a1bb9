//! Confined commands through the real binary, with real bubblewrap and real
//! landlock, each runner forced in turn: what a command may write, what
//! stays read-only, the network, private temp storage, a missing runner,
//! and the one-shot wider retry.

mod common;

use common::*;
use serde_json::Value;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

const RUNNERS: [&str; 2] = ["bwrap", "landlock"];

fn python(ws: &Path, runner: &str, flags: &[&str], program: &str) -> Value {
    confined_python(ws, runner, flags, &[], program)
}

/// A policy file that lets commands see `dir` (read it, not write it),
/// to give beside the default one.
fn seeing(ws: &Workspace, dir: &Path) -> String {
    let d = dir.display();
    policy(
        ws,
        "sees",
        &format!("local p = require('sluice.policy')\nreturn {{rules = {{p.allow 'fs:read:{d}', p.allow 'fs:read:{d}/**'}}}}\n"),
    )
}

/// Python that tries to write `path` and prints `ok` or the error.
fn try_write(path: &str) -> String {
    format!(
        "import sys\ntry:\n    open({path:?}, 'w').write('x')\n    print('ok')\nexcept OSError as e:\n    print(e.strerror, file=sys.stderr)\n    sys.exit(1)\n"
    )
}

#[test]
fn a_write_inside_the_workspace_succeeds_and_outside_fails_as_denied() {
    for runner in RUNNERS {
        let ws = workspace();
        std::fs::create_dir(ws.file("src")).unwrap();
        let inside = python(ws.path(), runner, &[], &try_write("src/made.txt"));
        assert_eq!(inside["exitCode"], 0, "{runner}: {inside}");
        assert_eq!(
            inside["sandbox"]["mode"], "workspace-write",
            "{runner}: {inside}"
        );
        assert_eq!(inside["sandbox"]["denied"], false);
        assert_eq!(
            std::fs::read_to_string(ws.file("src/made.txt")).unwrap(),
            "x"
        );
        // A new entry at the top of the workspace: bubblewrap binds the
        // tree; landlock can only grant its entries one by one (to keep
        // .git and .sluice read-only), so nothing new is made there.
        let top = python(ws.path(), runner, &[], &try_write("top.txt"));
        let made = ws.file("top.txt").exists();
        match runner {
            "bwrap" => assert!(made && top["exitCode"] == 0, "{top}"),
            _ => assert!(!made && top["sandbox"]["denied"] == true, "{top}"),
        }

        // Outside, in a folder the command may see (a second policy opens
        // it for reading): the write is refused, and says so.
        let outside = outside_tmp(&ws, "").join("outside.txt");
        let sees = seeing(&ws, &outside_tmp(&ws, ""));
        let flags = ["--policy", "default", "--policy", sees.as_str()];
        let out = python(
            ws.path(),
            runner,
            &flags,
            &try_write(outside.to_str().unwrap()),
        );
        assert_eq!(out["exitCode"], 1, "{runner}: {out}");
        assert_eq!(out["sandbox"]["denied"], true, "{runner}: {out}");
        assert!(!outside.exists(), "{runner} let the write through");
    }
}

#[test]
fn git_hooks_and_the_audit_store_stay_read_only_inside_the_writable_workspace() {
    for runner in RUNNERS {
        let ws = workspace();
        std::fs::create_dir_all(ws.file(".git/hooks")).unwrap();
        std::fs::write(ws.file(".git/config"), "[core]\n").unwrap();
        let program = "import os\nfor p in ['.git/hooks/pre-commit', '.git/config', '.sluice/audit.db', '.sluice/new']:\n    try:\n        open(p, 'a').write('x')\n        print(p, 'written')\n    except OSError as e:\n        print(p, 'refused')\n";
        let out = python(ws.path(), runner, &[], program);
        let text = out["stdout"].as_str().unwrap();
        for p in [
            ".git/hooks/pre-commit",
            ".git/config",
            ".sluice/audit.db",
            ".sluice/new",
        ] {
            assert!(text.contains(&format!("{p} refused")), "{runner}: {text}");
        }
        assert!(!ws.file(".git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(ws.file(".git/config")).unwrap(),
            "[core]\n"
        );
    }
}

#[test]
fn a_symlink_inside_the_workspace_pointing_outside_does_not_open_a_write() {
    for runner in RUNNERS {
        let ws = workspace();
        let outside = outside_tmp(&ws, "").join("target-dir");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ws.file("link")).unwrap();
        let out = python(ws.path(), runner, &[], &try_write("link/escaped.txt"));
        assert_eq!(out["exitCode"], 1, "{runner}: {out}");
        assert!(
            !outside.join("escaped.txt").exists(),
            "{runner} wrote through the link"
        );
    }
}

#[test]
fn temp_files_go_to_private_storage() {
    for runner in RUNNERS {
        let ws = workspace();
        let program = "import os, tempfile\nd = tempfile.gettempdir()\np = os.path.join(d, 'sluice-private-probe')\nopen(p, 'w').write('x')\nprint(d)\n";
        let out = python(ws.path(), runner, &[], program);
        assert_eq!(out["exitCode"], 0, "{runner}: {out}");
        let dir = out["stdout"].as_str().unwrap().trim().to_string();
        let seen = Path::new(&dir).join("sluice-private-probe");
        assert!(
            !seen.exists(),
            "{runner}: the temp file is visible outside the command at {}",
            seen.display()
        );
    }
}

#[test]
fn a_connect_to_a_loopback_server_fails_unless_the_network_is_granted() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let program = format!(
        "import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\nexcept OSError as e:\n    print('refused', e)\n    sys.exit(1)\n"
    );
    let open_net = |ws: &Workspace| {
        policy(
            ws,
            "net.lua",
            r#"local p = require("sluice.policy")
return { rules = {
  p.allow "fs:read:**", p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
  p.allow "proc:spawn:*", p.allow "net:get:*", p.allow "net:post:*", p.allow "net:private:*",
} }"#,
        )
    };
    for runner in RUNNERS {
        let ws = workspace();
        let closed = python(ws.path(), runner, &[], &program);
        assert_eq!(closed["exitCode"], 1, "{runner}: {closed}");
        assert!(
            closed["stdout"].as_str().unwrap().starts_with("refused"),
            "{runner}: {closed}"
        );
        assert_eq!(closed["sandbox"]["network"], "closed", "{runner}: {closed}");
        let granted = open_net(&ws);
        let open = python(ws.path(), runner, &["--policy", &granted], &program);
        assert_eq!(open["exitCode"], 0, "{runner}: {open}");
        assert_eq!(open["stdout"], "connected\n");
        assert_eq!(open["sandbox"]["network"], "open", "{runner}: {open}");
    }
}

#[test]
fn a_result_whose_command_had_no_network_says_so() {
    need_program("curl", "apt-get install curl");
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let script = format!(
        "local r, e = sluice.bash{{command = 'curl -sS -o /dev/null http://127.0.0.1:{port}/'}}\nprint(sluice.json.encode(r or e))"
    );
    for runner in RUNNERS {
        let ws = workspace();
        let run = run_lua_with(ws.path(), &script, &["--sandbox", runner], &[]).ok();
        let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        // curl's own word for a connection that could not be made.
        assert_eq!(out["exitCode"], 7, "{runner}: {out}");
        assert_eq!(out["sandbox"]["network"], "closed", "{runner}: {out}");
        assert_eq!(out["sandbox"]["mode"], "workspace-write", "{runner}: {out}");
    }
    // A policy that narrows the network with an ask keeps it closed too.
    let ws = workspace();
    let narrowed = policy(
        &ws,
        "narrowed.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.allow "fs:read:**", p.allow "proc:spawn:*",
  p.allow "net:get:*", p.allow "net:post:*", p.allow "net:private:*",
  p.ask "net:post:api.example.com",
} }"#,
    );
    for runner in RUNNERS {
        let out = python(ws.path(), runner, &["--policy", &narrowed], "print('x')");
        assert_eq!(out["sandbox"]["network"], "closed", "{runner}: {out}");
    }
}

#[test]
fn without_write_grants_the_mode_is_read_only() {
    for runner in RUNNERS {
        let ws = workspace();
        let reader = policy(
            &ws,
            "reader.lua",
            r#"local p = require("sluice.policy")
return { rules = { p.allow "fs:read:**", p.allow "proc:spawn:*" } }"#,
        );
        let out = python(
            ws.path(),
            runner,
            &["--policy", &reader],
            &try_write("x.txt"),
        );
        assert_eq!(out["sandbox"]["mode"], "read-only", "{runner}: {out}");
        assert_eq!(out["exitCode"], 1);
        assert!(!ws.file("x.txt").exists());
    }
}

#[test]
fn a_runner_that_is_missing_refuses_the_command_saying_what_to_install() {
    let ws = workspace();
    let path = script_file(
        ws.path(),
        "local r, e = sluice.bash{command = 'true'}\nprint(sluice.json.encode(r or e))",
    );
    let out = Command::new(sluice_bin())
        .args([
            "run",
            path.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
            "--sandbox",
            "bwrap",
        ])
        .env("SLUICE_BWRAP", "/nonexistent/bwrap")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "provider_unavailable", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("apt-get install bubblewrap"),
        "{err}"
    );
}

#[test]
fn a_wider_retry_asks_with_its_justification_and_applies_to_that_call_only() {
    need_bwrap();
    let ws = workspace();
    let outside = outside_tmp(&ws, "").join("wider.txt");
    let program = try_write(outside.to_str().unwrap());
    let call = |extra: &str| {
        format!(
            "local r, e = sluice.bash{{script = {}, interpreter = 'python3'{extra}}}\nprint(sluice.json.encode(r or e))\n",
            lua_str(&program)
        )
    };
    let wider = ", sandboxPermissions = 'danger-full-access', justification = 'write the release notes beside the repo'";
    // Unattended, the ask is permission_required and shows the justification.
    let asked = run_lua_with(ws.path(), &call(wider), &[], &[]).ok();
    let err: Value = serde_json::from_str(asked.stdout.trim()).unwrap();
    assert_eq!(err["code"], "permission_required", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("write the release notes beside the repo"),
        "{err}"
    );
    assert!(!outside.exists());
    // Pre-approved, it applies to that call, and the next call is confined again.
    let both = format!("{}{}", call(wider), call(""));
    let run = run_lua_with(
        ws.path(),
        &both,
        &["--approve", "proc:spawn:python3 -"],
        &[],
    )
    .ok();
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["exitCode"], 0, "{}", lines[0]);
    assert_eq!(lines[0]["sandbox"]["mode"], "danger-full-access");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "x");
    std::fs::remove_file(&outside).unwrap();
    assert_eq!(lines[1]["exitCode"], 1, "{}", lines[1]);
    assert_eq!(lines[1]["sandbox"]["mode"], "workspace-write");
    assert!(!outside.exists());
}

#[test]
fn sandbox_permissions_and_justification_come_together() {
    let ws = workspace();
    let out = lua_json(
        ws.path(),
        "local _, a = sluice.bash{command = 'true', sandboxPermissions = 'danger-full-access'}\n\
         local _, b = sluice.bash{command = 'true', justification = 'x'}\n\
         local _, c = sluice.bash{command = 'true', sandboxPermissions = 'read-only', justification = 'x'}\n\
         emit({a.code, a.field, b.code, b.field, c.code, c.field})",
    );
    assert_eq!(
        out[0],
        serde_json::json!([
            "invalid_input",
            "justification",
            "invalid_input",
            "sandboxPermissions",
            "invalid_input",
            "sandboxPermissions"
        ])
    );
}

#[test]
fn full_grants_give_full_access_but_the_policy_file_and_the_record_stay_out_of_reach() {
    need_bwrap();
    let ws = workspace();
    let full = policy(
        &ws,
        "full.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.allow "fs:read:**", p.allow "fs:write:/", p.allow "fs:write:/**",
  p.allow "proc:spawn:*", p.allow "net:get:*", p.allow "net:post:*", p.allow "net:private:*",
} }"#,
    );
    let attempt = |target: &str| {
        let program = try_write(target);
        let script = format!(
            "local r = assert(sluice.bash{{script = {}, interpreter = 'python3'}})\nprint(sluice.json.encode(r))",
            lua_str(&program)
        );
        let run = run_lua_with(ws.path(), &script, &["--policy", &full], &[]).ok();
        serde_json::from_str::<Value>(run.stdout.trim()).unwrap()
    };
    // A rewritten policy would unconfine the next command: it stays read-only.
    let policy_write = attempt(&full);
    assert_eq!(
        policy_write["sandbox"]["mode"], "danger-full-access",
        "{policy_write}"
    );
    assert_eq!(policy_write["sandbox"]["denied"], true, "{policy_write}");
    let record_write = attempt(ws.file(".sluice/audit.db").to_str().unwrap());
    assert_eq!(record_write["sandbox"]["denied"], true, "{record_write}");
    // Anything else is the command's to write.
    let elsewhere = outside_tmp(&ws, "").join("full.txt");
    let ok = attempt(elsewhere.to_str().unwrap());
    assert_eq!(ok["exitCode"], 0, "{ok}");
    assert!(elsewhere.exists());
}

#[test]
fn an_audit_store_kept_elsewhere_in_the_workspace_stays_read_only_too() {
    for runner in RUNNERS {
        let ws = workspace();
        std::fs::create_dir(ws.file("logs")).unwrap();
        let db = ws.file("logs/audit.db");
        let out = python(
            ws.path(),
            runner,
            &["--audit", db.to_str().unwrap()],
            &format!(
                "{}\nopen('logs/other.txt', 'w')",
                try_write("logs/audit.db")
            ),
        );
        assert_eq!(out["exitCode"], 1, "{runner}: {out}");
        assert_eq!(out["sandbox"]["denied"], true, "{runner}: {out}");
    }
}

#[test]
fn a_runner_failure_is_an_error_in_the_foreground_and_a_fact_on_a_background_job() {
    need_bwrap();
    let ws = workspace();
    // bubblewrap mounts a fresh /dev, so a working folder under /dev/shm
    // exists on the host but not inside: bwrap fails before the command.
    let name = ws
        .path()
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let cwd = Path::new("/dev/shm").join(format!("sluice-{name}"));
    std::fs::create_dir_all(&cwd).unwrap();
    let script = format!(
        "local j = assert(sluice.bash{{command = 'echo hi', cwd = {c}, background = true}})\n\
         j:wait(5000)\n\
         print(sluice.json.encode({{exit = j.exitCode, sandbox = j.sandbox}}))\n\
         local r, e = sluice.bash{{command = 'echo hi', cwd = {c}}}\n\
         print(sluice.json.encode(r or e))\n\
         local k = assert(sluice.bash{{script = {w}, interpreter = 'python3', background = true}})\n\
         k:wait(5000)\n\
         print(sluice.json.encode({{exit = k.exitCode, sandbox = k.sandbox}}))\n",
        c = lua_str(cwd.to_str().unwrap()),
        w = lua_str(&try_write("/etc/sluice-job-probe")),
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[]).ok();
    std::fs::remove_dir_all(&cwd).unwrap();
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["sandbox"]["runnerFailed"], true, "{}", lines[0]);
    assert_eq!(lines[1]["code"], "provider_unavailable", "{}", lines[1]);
    assert_eq!(lines[1]["runnerFailed"], true);
    assert!(lines[1]["message"]
        .as_str()
        .unwrap()
        .contains("did not run"));
    assert_eq!(lines[2]["exit"], 1, "{}", lines[2]);
    assert_eq!(lines[2]["sandbox"]["denied"], true, "{}", lines[2]);
    assert_eq!(lines[2]["sandbox"].get("runnerFailed"), None);
}

#[test]
fn the_folders_above_a_read_only_path_cannot_be_renamed_away() {
    need_bwrap();
    let ws = workspace();
    std::fs::create_dir_all(ws.file(".git/hooks")).unwrap();
    std::fs::write(ws.file(".git/config"), "[core]\n").unwrap();
    let open = policy(
        &ws,
        "open.lua",
        r#"local p = require("sluice.policy")
return { rules = { p.allow "fs:read:**", p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**", p.allow "proc:spawn:*" } }"#,
    );
    let program = "import os, sys\ntry:\n    os.rename('.git', '.git-old')\n    os.makedirs('.git/hooks')\n    open('.git/hooks/pre-commit', 'w').write('x')\n    print('replaced')\nexcept OSError as e:\n    print(e.strerror, file=sys.stderr)\n    sys.exit(1)\n";
    let out = python(ws.path(), "bwrap", &["--policy", &open], program);
    assert_eq!(out["exitCode"], 1, "{out}");
    assert!(ws.file(".git/config").exists() && !ws.file(".git-old").exists());
    assert!(!ws.file(".git/hooks/pre-commit").exists());
}

#[test]
fn a_wider_retry_is_not_granted_by_a_wildcard_command_approval() {
    need_bwrap();
    let ws = workspace();
    let run = run_lua_with(
        ws.path(),
        "local _, e = sluice.bash{command = 'true', sandboxPermissions = 'danger-full-access', justification = 'x'}\nprint(e.code)",
        &["--approve", "proc:spawn:*"],
        &[],
    )
    .ok();
    assert_eq!(run.stdout.trim(), "permission_required");
}
