//! What a confined command may read, through the real binary under each
//! runner: only what the policy's `fs:read` rules open. Credential stores,
//! `/etc/shadow`, `.env` files and sluice's own process stay out of reach,
//! and out of the record, while the workspace, the system trees and the
//! toolchains stay visible.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A home folder of the test's own, beside the workspace, holding a key,
/// cloud credentials, a toolchain program and a private note.
fn fake_home(ws: &Workspace) -> PathBuf {
    let home = ws.path().parent().unwrap().join("home");
    let put = |rel: &str, text: &str| {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    };
    put(".ssh/id_ed25519", "SSH-KEY-SECRET\n");
    put(
        ".aws/credentials",
        "[default]\naws_secret_access_key = AWS-SECRET\n",
    );
    put(
        ".git-credentials",
        "https://u:GIT-CRED-SECRET@example.org\n",
    );
    put(
        ".config/sluice/credentials",
        "github = SLUICE-FILE-SECRET\n",
    );
    put("notes.txt", "HOME-NOTE-SECRET\n");
    put(".cargo/bin/hello-tool", "#!/bin/sh\necho tool-ran\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        home.join(".cargo/bin/hello-tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::canonicalize(home).unwrap()
}

/// Python that reads each path and prints `path: content` or `path: ERR`.
fn reader(paths: &[String]) -> String {
    format!(
        "import sys\nfor p in {paths:?}:\n    try:\n        print(p + ': ' + open(p).read().strip())\n    except OSError as e:\n        print(p + ': ERR ' + type(e).__name__)\n"
    )
}

/// Runs `program` (Python) under `runner` with `flags`, the fake `home`
/// as HOME, and `env` on sluice itself; the result as JSON and the
/// record's bytes.
fn run_python(
    ws: &Workspace,
    runner: &str,
    flags: &[&str],
    home: &Path,
    env: &[(&str, &str)],
    program: &str,
) -> (Value, Vec<u8>) {
    let mut all: Vec<(&str, &str)> = vec![("HOME", home.to_str().unwrap())];
    all.extend_from_slice(env);
    let out = confined_python(ws.path(), runner, flags, &all, program);
    (
        out,
        std::fs::read(ws.file(".sluice/audit.db")).unwrap_or_default(),
    )
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn keys_credentials_shadow_and_env_files_cannot_be_read_and_never_reach_the_record() {
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        std::fs::write(ws.file(".env"), "TOKEN=WS-ENV-SECRET\n").unwrap();
        std::fs::create_dir_all(ws.file("deploy/prod")).unwrap();
        std::fs::write(ws.file("deploy/prod/.env"), "TOKEN=DEEP-ENV-SECRET\n").unwrap();
        std::fs::write(ws.file("notes.txt"), "workspace-note\n").unwrap();
        let h = home.display();
        let paths: Vec<String> = [
            format!("{h}/.ssh/id_ed25519"),
            format!("{h}/.aws/credentials"),
            format!("{h}/.git-credentials"),
            format!("{h}/.config/sluice/credentials"),
            format!("{h}/notes.txt"),
            "/etc/shadow".into(),
            ".env".into(),
            "deploy/prod/.env".into(),
            "notes.txt".into(),
            "/etc/passwd".into(),
        ]
        .into();
        let (out, record) = run_python(&ws, &runner, &[], &home, &[], &reader(&paths));
        let text = out["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{runner}: {out}"));
        for secret in [
            "SSH-KEY-SECRET",
            "AWS-SECRET",
            "GIT-CRED-SECRET",
            "SLUICE-FILE-SECRET",
            "HOME-NOTE-SECRET",
            "WS-ENV-SECRET",
            "DEEP-ENV-SECRET",
        ] {
            assert!(
                !text.contains(secret),
                "{runner}: {secret} was read: {text}"
            );
            assert!(
                !contains(&record, secret),
                "{runner}: {secret} is in the record"
            );
        }
        let shadow = std::fs::read_to_string("/etc/shadow").unwrap();
        let root_line = shadow.lines().find(|l| l.starts_with("root:")).unwrap();
        assert!(
            !text.contains(root_line),
            "{runner}: /etc/shadow was read: {text}"
        );
        // The control: the workspace and the system trees are there.
        assert!(
            text.contains("notes.txt: workspace-note"),
            "{runner}: {text}"
        );
        assert!(text.contains("/etc/passwd: root:"), "{runner}: {text}");
        // Nothing was past the search's bounds: landlock's result is
        // partial for its own standing gaps alone.
        let reasons = out["sandbox"]["partial"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match runner.as_str() {
            "bwrap" => assert_eq!(out["sandbox"]["enforcement"], "full", "{runner}: {out}"),
            _ => assert!(
                !reasons.is_empty()
                    && reasons
                        .iter()
                        .all(|r| r.as_str().unwrap().starts_with("landlock ")),
                "{runner}: {out}"
            ),
        }
    }
}

#[test]
fn no_command_reads_sluices_own_environment_or_process() {
    // The attack that printed SLUICE_CREDENTIAL_GITHUB: every process's
    // environ, command line and open files, sluice's first.
    let program = r#"
import os
needle = ('GH-CRED-' + 'SECRET').encode()
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    for what in ['environ', 'cmdline']:
        try:
            data = open('/proc/%s/%s' % (pid, what), 'rb').read()
            if needle in data:
                print('LEAK', pid, what)
        except OSError:
            pass
    try:
        for fd in os.listdir('/proc/%s/fd' % pid):
            try:
                # Never blocking on a pipe of someone else's.
                f = os.open('/proc/%s/fd/%s' % (pid, fd), os.O_RDONLY | os.O_NONBLOCK)
                try:
                    if needle in os.read(f, 1 << 16):
                        print('LEAK', pid, 'fd', fd)
                finally:
                    os.close(f)
            except OSError:
                pass
    except OSError:
        pass
print('own status:', open('/proc/self/status').read().splitlines()[0])
"#;
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        let env = [("SLUICE_CREDENTIAL_GITHUB", "GH-CRED-SECRET")];
        let (out, record) = run_python(&ws, &runner, &[], &home, &env, program);
        let text = out["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{runner}: {out}"));
        assert!(!text.contains("LEAK"), "{runner}: {text}");
        assert!(text.contains("own status: Name:"), "{runner}: {text}");
        assert!(!contains(&record, "GH-CRED-SECRET"), "{runner}");
    }
}

#[test]
fn only_what_the_policy_opens_is_visible_and_toolchains_still_run() {
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        let h = home.display();
        let program = format!(
            "import os, subprocess\n\
             def ls(p):\n    try:\n        return sorted(os.listdir(p))\n    except OSError as e:\n        return e.errno\n\
             print('home:', ls('{h}'))\n\
             print('cargo:', ls('{h}/.cargo'))\n\
             print('tool:', subprocess.run(['{h}/.cargo/bin/hello-tool'], capture_output=True, text=True).stdout.strip())\n\
             def readable(p):\n    try:\n        return bool(os.listdir(p)) if os.path.isdir(p) else bool(open(p, 'rb').read(1))\n    except OSError:\n        return False\n\
             for p in ['/var/lib/dpkg/status', '/root', '/home', '/srv', '/boot']:\n    print(p, readable(p))\n"
        );
        let (out, _) = run_python(&ws, &runner, &[], &home, &[], &program);
        let text = out["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{runner}: {out}"));
        // Under the fake home only the toolchain folder is opened; under
        // landlock the folder itself is there, unreadable.
        assert!(text.contains("tool: tool-ran"), "{runner}: {out}");
        assert!(
            text.contains("cargo: ['bin']") || runner == "landlock",
            "{runner}: {text}"
        );
        for p in ["/var/lib/dpkg/status", "/root", "/home", "/srv", "/boot"] {
            assert!(
                text.contains(&format!("{p} False")),
                "{runner}: {p} is readable: {text}"
            );
        }
        assert!(
            !text.contains("notes.txt"),
            "{runner}: the home folder is listed: {text}"
        );
    }
}

#[test]
fn an_env_file_a_command_makes_is_hidden_from_the_next_command() {
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        need_bwrap();
        // `a` is there before: under landlock nothing new can be made at
        // the top of the workspace, which holds the hidden `.sluice`.
        std::fs::create_dir_all(ws.file("a")).unwrap();
        // Python makes the file: the kernel refuses a redirection to a
        // .env, but cannot see into a script.
        let script = r#"
local function run(input)
  local r, e = sluice.bash(input)
  return (r and r.stdout or tostring(e)):gsub("\n", " ")
end
local make = "import os\nos.makedirs('a/b', exist_ok=True)\nopen('a/b/.env', 'w').write('NEW-ENV-SECRET')\nprint(open('a/b/.env').read())\n"
print("made: " .. run{script = make, interpreter = "python3"})
print("next: " .. run{command = "cat a/b/.env; echo end"})
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
        // The command that makes the file may read what it wrote; the next
        // one finds it masked (bubblewrap: an empty file) or refused.
        assert!(
            run.stdout.contains("made: NEW-ENV-SECRET"),
            "{runner}: {}",
            run.stdout
        );
        let next = run.stdout.lines().find(|l| l.starts_with("next:")).unwrap();
        assert!(!next.contains("NEW-ENV-SECRET"), "{runner}: {next}");
        assert!(next.contains("end"), "{runner}: {next}");
        // The file itself is left as it was.
        assert_eq!(
            std::fs::read_to_string(ws.file("a/b/.env")).unwrap(),
            "NEW-ENV-SECRET"
        );
    }
}

#[test]
fn a_deny_glob_rooted_in_a_folder_outside_the_workspace_hides_what_it_matches_there() {
    // As the default policy's /etc/ssh/ssh_host_*_key: a glob whose folder
    // is known is expanded in that folder, wherever it is.
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        let dir = outside_tmp(&ws, "keys");
        std::fs::write(dir.join("host_rsa_key"), "HOST-KEY-SECRET").unwrap();
        std::fs::write(dir.join("host_rsa_key.pub"), "public-part").unwrap();
        let d = dir.display();
        let extra = policy(
            &ws,
            "keys.lua",
            &format!(
                "local p = require('sluice.policy')\nreturn {{rules = {{p.allow 'fs:read:{d}/**', p.deny('fs:*:{d}/host_*_key', 'host keys')}}}}\n"
            ),
        );
        let paths = vec![format!("{d}/host_rsa_key"), format!("{d}/host_rsa_key.pub")];
        let flags = ["--policy", "default", "--policy", extra.as_str()];
        let (out, _) = run_python(&ws, &runner, &flags, &home, &[], &reader(&paths));
        let text = out["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{runner}: {out}"));
        assert!(
            !text.contains("HOST-KEY-SECRET"),
            "{runner}: the key was read: {text}"
        );
        assert!(
            text.contains("host_rsa_key.pub: public-part"),
            "{runner}: {text}"
        );
        let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    }
}

#[test]
fn the_credentials_file_given_to_sluice_is_hidden_even_where_the_policy_opens_it() {
    for runner in runners() {
        let ws = workspace();
        let home = fake_home(&ws);
        // Kept in the workspace, which the default policy opens whole.
        std::fs::write(ws.file("creds"), "exa = CREDS-FILE-SECRET\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(ws.file("creds"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(ws.file("plain.txt"), "plain\n").unwrap();
        let creds = ws.file("creds").display().to_string();
        // --credentials goes with a search provider (never called here).
        let flags = [
            "--search",
            "searxng=http://127.0.0.1:9",
            "--credentials",
            creds.as_str(),
        ];
        let paths = ["creds".to_string(), "plain.txt".to_string()];
        let (out, _) = run_python(&ws, &runner, &flags, &home, &[], &reader(&paths));
        let text = out["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{runner}: {out}"));
        assert!(!text.contains("CREDS-FILE-SECRET"), "{runner}: {text}");
        assert!(text.contains("plain.txt: plain"), "{runner}: {text}");
    }
}
