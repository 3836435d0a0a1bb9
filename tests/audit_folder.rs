//! The record's folder, `.sluice/`: kept out of git by a `.gitignore` that
//! sluice writes in it (never over the user's own), and out of reach of
//! the flows whatever that file says.

mod common;

use common::{run_lua, workspace};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_run_in_a_git_repository_leaves_git_status_clean() {
    let ws = workspace();
    git(ws.path(), &["init", "-q"]);
    assert_eq!(git(ws.path(), &["status", "--porcelain"]), "");
    run_lua(ws.path(), "sluice.read{path = '.'}\n", &[]);
    assert!(ws.file(".sluice/audit.db").is_file());
    assert_eq!(
        git(ws.path(), &["status", "--porcelain", "--ignored=no"]),
        ""
    );
    // `git add -A` would commit nothing of the record.
    git(ws.path(), &["add", "-A"]);
    assert_eq!(git(ws.path(), &["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        std::fs::read_to_string(ws.file(".sluice/.gitignore")).unwrap(),
        "# sluice's audit record: never commit it.\n*\n"
    );
}

#[test]
fn an_existing_record_folder_without_a_gitignore_gets_one() {
    let ws = workspace();
    run_lua(ws.path(), "", &[]).ok();
    std::fs::remove_file(ws.file(".sluice/.gitignore")).unwrap();
    git(ws.path(), &["init", "-q"]);
    assert_eq!(git(ws.path(), &["status", "--porcelain"]), "?? .sluice/\n");
    run_lua(ws.path(), "", &[]).ok();
    assert_eq!(git(ws.path(), &["status", "--porcelain"]), "");
}

#[test]
fn a_gitignore_of_the_users_own_in_the_folder_is_never_overwritten() {
    let ws = workspace();
    std::fs::create_dir(ws.file(".sluice")).unwrap();
    std::fs::write(ws.file(".sluice/.gitignore"), "audit.db-wal\n").unwrap();
    run_lua(ws.path(), "", &[]).ok();
    assert_eq!(
        std::fs::read_to_string(ws.file(".sluice/.gitignore")).unwrap(),
        "audit.db-wal\n"
    );
}

#[test]
fn a_record_elsewhere_gets_no_gitignore_beside_it() {
    let ws = workspace();
    let db = ws.path().parent().unwrap().join("records").join("a.db");
    let script = common::script_file(ws.path(), "");
    common::run_script_with(ws.path(), &script, &["--audit", db.to_str().unwrap()], &[]).ok();
    assert!(db.is_file());
    assert!(!db.with_file_name(".gitignore").exists());
}

#[test]
fn the_gitignore_does_not_open_the_folder_to_flows() {
    // The file sluice wrote is inside the audit store: a write is refused
    // as before, and a confined command can neither remove it nor write
    // beside it (the control: the same command in a workspace folder can).
    let ws = workspace();
    std::fs::create_dir(ws.file("ctl")).unwrap();
    std::fs::write(ws.file("ctl/.gitignore"), "*\n").unwrap();
    let out = run_lua(
        ws.path(),
        r#"local ok = sluice.write{path = "fine.txt", content = "x"}
local _, e = sluice.write{path = ".sluice/.gitignore", content = ""}
print(ok and "wrote", e and e.code)
local function try(dir)
  local r, e = sluice.bash{interpreter = "python3", args = {dir}, script = [[
import os, sys
for attempt in (lambda: os.remove(sys.argv[1] + "/.gitignore"), lambda: open(sys.argv[1] + "/x", "w")):
    try:
        attempt()
        print("done")
    except OSError as e:
        print("refused")
]]}
  print(r and r.stdout or e.message)
end
try("ctl")
try(".sluice")
"#,
        &[],
    )
    .ok();
    assert_eq!(
        out.stdout, "wrote\tpermission_denied\ndone\ndone\n\nrefused\nrefused\n\n",
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(ws.file(".sluice/.gitignore")).unwrap(),
        "# sluice's audit record: never commit it.\n*\n"
    );
    assert!(!ws.file(".sluice/x").exists());
}
