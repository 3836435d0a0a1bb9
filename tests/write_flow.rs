//! `sluice.write` driven through the real binary: creating and replacing
//! files atomically, keeping modes, links and hard links as the seed says,
//! and the sibling lock protocol that refuses to write under a held or stale
//! lock.

mod common;

use common::{canon, hostname, lua_str, mode_of, names_in};

use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Calls `sluice.write{path = path, content = content}` and returns
/// `(out, err)`, each JSON null when absent. Both go through sluice.args so
/// any bytes survive quoting.
fn write(ws: &Path, path: &str, content: &str) -> (Value, Value) {
    let script = format!(
        "{}local out, err = sluice.write{{path = sluice.args[1], content = sluice.args[2]}}\n\
         emit({{out = out, err = err}})\n",
        common::EMIT
    );
    let run = common::run_lua(ws, &script, &[path, content]).ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one emitted line: {:?}", run.stdout);
    let mut v: Value = serde_json::from_str(lines[0]).unwrap();
    (v["out"].take(), v["err"].take())
}

fn write_ok(ws: &Path, path: &str, content: &str) -> Value {
    let (out, err) = write(ws, path, content);
    assert_eq!(err, Value::Null, "unexpected error");
    out
}

fn write_err(ws: &Path, path: &str, content: &str) -> Value {
    let (out, err) = write(ws, path, content);
    assert_eq!(out, Value::Null, "unexpected success");
    err
}

/// The pid of a process that has already exited.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A running process, killed when dropped.
struct Alive(Child);

impl Alive {
    fn start() -> Alive {
        Alive(Command::new("sleep").arg("60").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Creates the lock folder of `file` (a canonical path) as a writer would
/// leave it, with an `owner` file holding `owner`; returns the folder.
fn plant_lock(file: &Path, lock_name: &str, owner: Option<&str>) -> PathBuf {
    let lock = file.with_file_name(lock_name);
    fs::create_dir(&lock).unwrap();
    if let Some(owner) = owner {
        fs::write(lock.join("owner"), owner).unwrap();
    }
    lock
}

#[test]
fn write_creates_a_new_file_and_its_missing_parent_folders() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let content = "héllo ✓\n";
    let out = write_ok(ws.path(), "a/b/c/new.txt", content);
    assert_eq!(out, json!({"bytesWritten": 11, "created": true}));
    assert_eq!(content.len(), 11);
    assert_eq!(
        fs::read(root.join("a/b/c/new.txt")).unwrap(),
        content.as_bytes()
    );
    assert!(root.join("a/b").is_dir());
    assert_eq!(names_in(&root.join("a/b/c")), vec!["new.txt"]);
}

#[test]
fn write_of_empty_content_creates_an_empty_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let out = write_ok(ws.path(), "empty.txt", "");
    assert_eq!(out, json!({"bytesWritten": 0, "created": true}));
    assert_eq!(fs::read(root.join("empty.txt")).unwrap(), b"");
}

#[test]
fn write_over_an_existing_file_reports_created_false_and_the_new_byte_count() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(root.join("f.txt"), "a much longer original text\n").unwrap();
    let out = write_ok(ws.path(), "f.txt", "short\r\nno final newline");
    assert_eq!(out, json!({"bytesWritten": 23, "created": false}));
    assert_eq!(
        fs::read(root.join("f.txt")).unwrap(),
        b"short\r\nno final newline"
    );
}

#[test]
fn write_keeps_the_file_mode_0751() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("run.sh");
    fs::write(&p, "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o751)).unwrap();
    let out = write_ok(ws.path(), "run.sh", "#!/bin/sh\necho new\n");
    assert_eq!(out, json!({"bytesWritten": 19, "created": false}));
    assert_eq!(mode_of(&p), 0o751);
    assert_eq!(fs::read_to_string(&p).unwrap(), "#!/bin/sh\necho new\n");
}

#[test]
fn write_keeps_a_read_only_0444_file_read_only() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("ro.txt");
    fs::write(&p, "old\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
    let out = write_ok(ws.path(), "ro.txt", "new\n");
    assert_eq!(out, json!({"bytesWritten": 4, "created": false}));
    assert_eq!(mode_of(&p), 0o444);
    assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
}

#[test]
fn write_over_a_directory_is_command_failed_and_leaves_it_untouched() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(root.join("d")).unwrap();
    fs::write(root.join("d/keep.txt"), "kept\n").unwrap();
    let err = write_err(ws.path(), "d", "x");
    let p = root.join("d");
    assert_eq!(
        err,
        json!({
            "code": "command_failed",
            "message": format!(
                "{} is a directory; write replaces files only. Name a file inside it.",
                p.display()
            ),
            "path": p.display().to_string(),
        })
    );
    assert!(p.is_dir());
    assert_eq!(names_in(&p), vec!["keep.txt"]);
    assert_eq!(fs::read_to_string(p.join("keep.txt")).unwrap(), "kept\n");
    assert_eq!(names_in(&root), vec!["d"], "no staging or lock files");
}

#[test]
fn write_through_a_symlink_keeps_the_link_and_replaces_its_target() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(root.join("real")).unwrap();
    fs::write(root.join("real/config.toml"), "old = 1\n").unwrap();
    std::os::unix::fs::symlink("real/config.toml", root.join("config.toml")).unwrap();
    let out = write_ok(ws.path(), "config.toml", "new = 2\n");
    assert_eq!(out, json!({"bytesWritten": 8, "created": false}));
    let link = root.join("config.toml");
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_link(&link).unwrap(),
        PathBuf::from("real/config.toml")
    );
    assert_eq!(
        fs::read_to_string(root.join("real/config.toml")).unwrap(),
        "new = 2\n"
    );
    assert_eq!(names_in(&root), vec!["config.toml", "real"]);
    assert_eq!(names_in(&root.join("real")), vec!["config.toml"]);
}

#[test]
fn write_leaves_hard_links_to_the_old_file_with_the_old_contents() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(root.join("a.txt"), "old\n").unwrap();
    fs::hard_link(root.join("a.txt"), root.join("b.txt")).unwrap();
    let out = write_ok(ws.path(), "a.txt", "new\n");
    assert_eq!(out, json!({"bytesWritten": 4, "created": false}));
    assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "new\n");
    assert_eq!(fs::read_to_string(root.join("b.txt")).unwrap(), "old\n");
    assert_eq!(fs::metadata(root.join("b.txt")).unwrap().nlink(), 1);
}

#[test]
fn write_leaves_no_staging_or_lock_files_behind() {
    let ws = common::workspace();
    let root = canon(ws.path());
    write_ok(ws.path(), "notes.md", "# one\n");
    write_ok(ws.path(), "notes.md", "# two\n");
    write_ok(ws.path(), "sub/deep.md", "deep\n");
    assert_eq!(names_in(&root), vec!["notes.md", "sub"]);
    assert_eq!(names_in(&root.join("sub")), vec!["deep.md"]);
    assert_eq!(
        fs::read_to_string(root.join("notes.md")).unwrap(),
        "# two\n"
    );
}

#[test]
fn write_outside_the_workspace_needs_approval_and_creates_nothing() {
    let ws = common::workspace();
    let outside = common::workspace();
    let target = canon(outside.path()).join("x/new.txt");
    let err = write_err(ws.path(), &target.display().to_string(), "pwned\n");
    let cap = format!("fs:write:{}", target.display());
    assert_eq!(err, common::needs_approval(&cap));
    assert_eq!(names_in(outside.path()), Vec::<String>::new());
}

#[test]
fn write_through_a_symlink_pointing_outside_the_workspace_needs_approval() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let outside = common::workspace();
    let secret = canon(outside.path()).join("secret.txt");
    fs::write(&secret, "original\n").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("innocent.txt")).unwrap();
    let err = write_err(ws.path(), "innocent.txt", "pwned\n");
    assert_eq!(err["code"], "permission_required");
    assert_eq!(err["capability"], format!("fs:write:{}", secret.display()));
    assert_eq!(fs::read_to_string(&secret).unwrap(), "original\n");
    assert_eq!(names_in(outside.path()), vec!["secret.txt"]);
    assert_eq!(names_in(&root), vec!["innocent.txt"]);
}

#[test]
fn write_refuses_a_stale_lock_left_by_a_dead_process_and_keeps_it() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let file = root.join("Notes.TXT");
    fs::write(&file, "original\n").unwrap();
    let pid = dead_pid();
    let owner = format!("pid={pid}\nhost={}\n", hostname());
    let lock = plant_lock(&file, ".sluice-notes.txt.lock", Some(&owner));
    let err = write_err(ws.path(), "Notes.TXT", "replacement\n");
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "{} is locked by {}, left by process {pid}, which is no longer running. \
                 sluice never reclaims a lock by age: stop every writer of this file, inspect its contents, \
                 then remove only that lock folder and retry.",
                file.display(),
                lock.display()
            ),
            "path": file.display().to_string(),
            "lock": lock.display().to_string(),
            "stale": true,
            "pid": pid,
        })
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "original\n");
    assert!(lock.is_dir(), "a stale lock is never reclaimed");
    assert_eq!(fs::read_to_string(lock.join("owner")).unwrap(), owner);
    assert_eq!(names_in(&root), vec![".sluice-notes.txt.lock", "Notes.TXT"]);
    // Once a person removes the lock the refusal named, the write goes through.
    fs::remove_dir_all(&lock).unwrap();
    let out = write_ok(ws.path(), "Notes.TXT", "replacement\n");
    assert_eq!(out, json!({"bytesWritten": 12, "created": false}));
    assert_eq!(names_in(&root), vec!["Notes.TXT"]);
}

#[test]
fn write_refuses_a_lock_held_by_a_live_process_as_busy() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let file = root.join("f.txt");
    fs::write(&file, "original\n").unwrap();
    let holder = Alive::start();
    let owner = format!("pid={}\nhost={}\n", holder.pid(), hostname());
    let lock = plant_lock(&file, ".sluice-f.txt.lock", Some(&owner));
    let err = write_err(ws.path(), "f.txt", "replacement\n");
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "{} is busy: another writer (process {}) holds the lock {}. \
                 Re-read the file and retry after it finishes.",
                file.display(),
                holder.pid(),
                lock.display()
            ),
            "path": file.display().to_string(),
            "lock": lock.display().to_string(),
            "busy": true,
        })
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "original\n");
    assert_eq!(fs::read_to_string(lock.join("owner")).unwrap(), owner);
    assert_eq!(names_in(&root), vec![".sluice-f.txt.lock", "f.txt"]);
}

#[test]
fn write_treats_a_lock_from_another_host_as_busy_even_if_its_pid_is_dead_here() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let file = root.join("f.txt");
    fs::write(&file, "original\n").unwrap();
    let pid = dead_pid();
    let owner = format!("pid={pid}\nhost=not-{}\n", hostname());
    let lock = plant_lock(&file, ".sluice-f.txt.lock", Some(&owner));
    let err = write_err(ws.path(), "f.txt", "replacement\n");
    assert_eq!(err["code"], "no_match");
    assert_eq!(err["busy"], true);
    assert_eq!(err["stale"], Value::Null);
    assert_eq!(err["lock"], lock.display().to_string());
    assert_eq!(fs::read_to_string(&file).unwrap(), "original\n");
}

#[test]
fn write_treats_a_lock_without_an_owner_file_as_busy() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let file = root.join("f.txt");
    fs::write(&file, "original\n").unwrap();
    let lock = plant_lock(&file, ".sluice-f.txt.lock", None);
    let err = write_err(ws.path(), "f.txt", "replacement\n");
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "{} is busy: another writer holds the lock {}. Re-read the file and retry after it finishes. \
                 The lock names no owner: if no sluice process is changing the file, a crash left it; remove that folder.",
                file.display(),
                lock.display()
            ),
            "path": file.display().to_string(),
            "lock": lock.display().to_string(),
            "busy": true,
        })
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "original\n");
}

#[test]
fn write_of_a_new_file_is_refused_under_a_held_lock_and_creates_nothing() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let holder = Alive::start();
    let owner = format!("pid={}\nhost={}\n", holder.pid(), hostname());
    let lock = plant_lock(&root.join("new.txt"), ".sluice-new.txt.lock", Some(&owner));
    let err = write_err(ws.path(), "new.txt", "x");
    assert_eq!(err["code"], "no_match");
    assert_eq!(err["busy"], true);
    assert_eq!(err["lock"], lock.display().to_string());
    assert_eq!(names_in(&root), vec![".sluice-new.txt.lock"]);
}

#[test]
fn write_through_a_symlink_shares_the_lock_of_the_resolved_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let real = root.join("real.txt");
    fs::write(&real, "original\n").unwrap();
    std::os::unix::fs::symlink("real.txt", root.join("alias.txt")).unwrap();
    let holder = Alive::start();
    let owner = format!("pid={}\nhost={}\n", holder.pid(), hostname());
    let lock = plant_lock(&real, ".sluice-real.txt.lock", Some(&owner));
    let err = write_err(ws.path(), "alias.txt", "replacement\n");
    assert_eq!(err["code"], "no_match");
    assert_eq!(err["busy"], true);
    assert_eq!(err["path"], root.join("alias.txt").display().to_string());
    assert_eq!(err["lock"], lock.display().to_string());
    assert_eq!(fs::read_to_string(&real).unwrap(), "original\n");
}

#[test]
fn write_case_variants_of_a_name_share_one_lock() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let holder = Alive::start();
    let owner = format!("pid={}\nhost={}\n", holder.pid(), hostname());
    fs::write(root.join("readme.md"), "lower\n").unwrap();
    let lock = plant_lock(
        &root.join("readme.md"),
        ".sluice-readme.md.lock",
        Some(&owner),
    );
    let err = write_err(ws.path(), "README.MD", "upper\n");
    assert_eq!(err["code"], "no_match");
    assert_eq!(err["busy"], true);
    assert_eq!(err["lock"], lock.display().to_string());
    assert!(!root.join("README.MD").exists());
}

#[test]
fn write_missing_content_is_invalid_input_naming_content() {
    let ws = common::workspace();
    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.write{path = "f.txt"}
emit({out = out, err = err})
local out2, err2 = sluice.write{path = "f.txt", content = 5}
emit({out = out2, err = err2})
"#,
    );
    assert_eq!(
        out,
        vec![
            json!({"err": {
                "code": "invalid_input",
                "field": "content",
                "message": "write: `content`: missing field `content`. `sluice flows write` shows every field.",
            }}),
            json!({"err": {
                "code": "invalid_input",
                "field": "content",
                "message": "write: `content`: invalid type: integer `5`, expected a string. \
                            `sluice flows write` shows every field.",
            }}),
        ]
    );
    assert_eq!(names_in(ws.path()), Vec::<String>::new());
}

#[test]
fn write_of_non_utf8_content_is_invalid_input_naming_content() {
    let ws = common::workspace();
    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.write{path = "bin.dat", content = "ab\255cd"}
emit({out = out, err = err})
"#,
    );
    assert_eq!(
        out,
        vec![json!({"err": {
            "code": "invalid_input",
            "field": "content",
            "message": "`content` is not UTF-8 text (invalid byte at 2); flows carry text only.",
        }})]
    );
    assert_eq!(names_in(ws.path()), Vec::<String>::new());
}

#[test]
fn write_by_absolute_path_inside_the_workspace_works() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("abs.txt");
    let out = common::lua_json(
        ws.path(),
        &format!(
            "emit(sluice.write{{path = {}, content = \"abs\\n\"}})\n",
            lua_str(&p.display().to_string())
        ),
    );
    assert_eq!(out, vec![json!({"bytesWritten": 4, "created": true})]);
    assert_eq!(fs::read_to_string(&p).unwrap(), "abs\n");
}

#[test]
fn write_then_read_round_trips_crlf_bytes() {
    let ws = common::workspace();
    let out = common::lua_json(
        ws.path(),
        r#"emit(sluice.write{path = "crlf.txt", content = "one\r\ntwo\r\n"})
emit(sluice.read{path = "crlf.txt"})
"#,
    );
    assert_eq!(
        out,
        vec![
            json!({"bytesWritten": 10, "created": true}),
            json!({"content": "one\r\ntwo\r", "startLine": 1, "endLine": 2, "totalLines": 2, "truncated": false}),
        ]
    );
}

#[test]
fn write_over_a_fifo_is_not_a_file_and_leaves_it() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("pipe");
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let err = write_err(ws.path(), "pipe", "x");
    assert_eq!(
        err,
        json!({
            "code": "not_a_file",
            "message": format!(
                "{} is not a regular file (a device, socket or pipe); file flows only handle regular files.",
                p.display()
            ),
            "path": p.display().to_string(),
        })
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&p).unwrap().file_type().is_fifo());
    assert_eq!(names_in(&root), vec!["pipe"]);
}

#[test]
fn write_file_with_a_long_multibyte_name_works() {
    // 80 three-byte characters: a 240-byte name, legal under NAME_MAX (255).
    let ws = common::workspace();
    let root = canon(ws.path());
    let name = "漢".repeat(80);
    assert_eq!(name.len(), 240);
    let (out, err) = write(ws.path(), &name, "text\n");
    assert_eq!(err, Value::Null, "a legal file name must be writable");
    assert_eq!(out, json!({"bytesWritten": 5, "created": true}));
    assert_eq!(fs::read_to_string(root.join(&name)).unwrap(), "text\n");
    assert_eq!(names_in(&root), vec![name]);
}
