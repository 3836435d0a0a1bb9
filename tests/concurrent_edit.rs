//! Two writers of one file: the sibling lock keeps concurrent `sluice run`
//! processes from losing each other's edits, and a file whose lock is held is
//! refused (`no_match`, `busy`) without being touched.

mod common;

use common::{hostname, names_in};

use serde_json::{json, Value};
use std::fs;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{SystemTime, UNIX_EPOCH};

/// Edits per process in the race.
const N: usize = 40;

/// A child process killed and reaped when dropped, even if the test panics.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Makes the lock folder sluice would make for `file` (a canonical path in
/// `ws`), with an owner file naming `pid` on `host`, as src/fsops/lock.rs
/// writes and reads it.
fn hold_lock_by_hand(lock: &Path, file: &Path, pid: u32, host: &str) {
    fs::create_dir(lock).unwrap();
    fs::write(
        lock.join("owner"),
        format!("pid={pid}\nhost={host}\nfile={}\n", file.display()),
    )
    .unwrap();
}

/// Each process inserts `<tag>-<i>` before `END`, N times, retrying while the
/// file is busy; it prints how many busy refusals it met.
const RACER: &str = r#"
local retry = require("sluice.retry")
local tag, n, start = sluice.args[1], tonumber(sluice.args[2]), tonumber(sluice.args[3])
-- Both processes begin at the same moment, so their edits overlap.
while sluice.now() < start do sluice.sleep(1) end
local busy = 0
for i = 1, n do
  local out, err = retry.busy(function()
    local out, err = sluice.edit{path = "shared.txt", oldString = "END", newString = tag .. "-" .. i .. "\nEND"}
    if err and err.busy then busy = busy + 1 end
    return out, err
  end, {attempts = 500, delayMs = 2})
  if not out then error(tag .. " edit " .. i .. " failed: " .. tostring(err)) end
  if out.replacements ~= 1 then error("replacements " .. tostring(out.replacements)) end
end
print(sluice.json.encode({tag = tag, busy = busy}))
"#;

#[test]
fn two_processes_editing_one_file_concurrently_lose_no_update() {
    let ws = common::workspace();
    let file = ws.file("shared.txt");
    fs::write(&file, "BEGIN\nEND\n").unwrap();
    let n = N.to_string();
    let start = (now_ms() + 700).to_string();
    let a = common::spawn_lua(ws.path(), RACER, &["alpha", &n, &start]);
    let b = common::spawn_lua(ws.path(), RACER, &["beta", &n, &start]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut busy_total = 0;
    for (tag, out) in [("alpha", &a), ("beta", &b)] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{tag} failed\nstdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(report["tag"], tag);
        let busy = report["busy"].as_u64().unwrap();
        println!("{tag}: {busy} busy retries over {N} edits");
        busy_total += busy;
    }
    println!("busy retries in total: {busy_total}");

    let text = fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(text.ends_with("END\n"), "{text:?}");
    assert_eq!(lines.len(), 2 * N + 2, "{text}");
    assert_eq!(lines[0], "BEGIN");
    assert_eq!(lines[lines.len() - 1], "END");
    let inserted = &lines[1..lines.len() - 1];
    for tag in ["alpha", "beta"] {
        // Every insertion exactly once, and each process's in its own order.
        let mine: Vec<&str> = inserted
            .iter()
            .copied()
            .filter(|l| l.starts_with(&format!("{tag}-")))
            .collect();
        let wanted: Vec<String> = (1..=N).map(|i| format!("{tag}-{i}")).collect();
        assert_eq!(mine, wanted, "{tag}'s lines in {text}");
    }
    assert_eq!(names_in(ws.path()), vec!["shared.txt".to_string()]);
}

#[test]
fn a_file_whose_lock_is_held_by_a_live_process_is_refused_as_busy_and_left_unchanged() {
    let ws = common::workspace();
    let file = ws.file("busy.txt");
    fs::write(&file, "one\ntwo\n").unwrap();
    let lock = ws.file(".sluice-busy.txt.lock");
    let sleeper = KillOnDrop(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = sleeper.pid();
    hold_lock_by_hand(&lock, &file, pid, &hostname());

    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.edit{path = "busy.txt", oldString = "two", newString = "TWO"}
        emit({out = out or false, err = err})
        -- retry.busy tries again while the file stays busy, then hands back the refusal.
        local calls = 0
        local out2, err2 = require("sluice.retry").busy(function()
          calls = calls + 1
          return sluice.edit{path = "busy.txt", startLine = 1, endLine = 1, newString = "ONE"}
        end, {attempts = 3, delayMs = 1})
        emit({out = out2 or false, code = err2.code, busy = err2.busy, calls = calls})"#,
    );
    let shown = file.display().to_string();
    let lock_shown = lock.display().to_string();
    assert_eq!(
        out[0],
        json!({
            "out": false,
            "err": {
                "code": "no_match",
                "message": format!(
                    "{shown} is busy: another writer (process {pid}) holds the lock {lock_shown}. \
                     Re-read the file and retry after it finishes."
                ),
                "path": shown,
                "lock": lock_shown,
                "busy": true,
            },
        })
    );
    assert_eq!(
        out[1],
        json!({"out": false, "code": "no_match", "busy": true, "calls": 3})
    );
    assert_eq!(fs::read(&file).unwrap(), b"one\ntwo\n");
    // The refused writer leaves the other writer's lock exactly as it was.
    assert_eq!(
        fs::read_to_string(lock.join("owner")).unwrap(),
        format!("pid={pid}\nhost={}\nfile={}\n", hostname(), file.display())
    );
    assert_eq!(
        names_in(ws.path()),
        vec![".sluice-busy.txt.lock".to_string(), "busy.txt".to_string()]
    );

    // Once the holder is gone and the lock removed, the same edit lands.
    drop(sleeper);
    fs::remove_dir_all(&lock).unwrap();
    let out = common::lua_json(
        ws.path(),
        r#"emit((assert(sluice.edit{path = "busy.txt", oldString = "two", newString = "TWO"})))"#,
    );
    assert_eq!(
        out[0],
        json!({"startLine": 1, "endLine": 2, "replacements": 1, "hunk": "one\nTWO"})
    );
    assert_eq!(names_in(ws.path()), vec!["busy.txt".to_string()]);
}

#[test]
fn a_lock_left_by_a_dead_process_is_stale_kept_and_not_retried() {
    let ws = common::workspace();
    let file = ws.file("stale.txt");
    fs::write(&file, "one\n").unwrap();
    let lock = ws.file(".sluice-stale.txt.lock");
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    hold_lock_by_hand(&lock, &file, pid, &hostname());

    let out = common::lua_json(
        ws.path(),
        r#"local calls = 0
        local out, err = require("sluice.retry").busy(function()
          calls = calls + 1
          return sluice.edit{path = "stale.txt", oldString = "one", newString = "ONE"}
        end, {attempts = 5, delayMs = 1})
        emit({out = out or false, err = err, calls = calls})"#,
    );
    let shown = file.display().to_string();
    let lock_shown = lock.display().to_string();
    assert_eq!(
        out[0],
        json!({
            "out": false,
            "calls": 1,
            "err": {
                "code": "no_match",
                "message": format!(
                    "{shown} is locked by {lock_shown}, left by process {pid}, which is no longer running. \
                     sluice never reclaims a lock by age: stop every writer of this file, inspect its contents, \
                     then remove only that lock folder and retry."
                ),
                "path": shown,
                "lock": lock_shown,
                "stale": true,
                "pid": pid,
            },
        })
    );
    assert_eq!(fs::read(&file).unwrap(), b"one\n");
    assert!(
        lock.join("owner").is_file(),
        "a stale lock is never reclaimed"
    );
}

#[test]
fn a_lock_whose_owner_is_on_another_host_counts_as_busy_even_if_the_pid_is_gone_here() {
    let ws = common::workspace();
    let file = ws.file("remote.txt");
    fs::write(&file, "one\n").unwrap();
    let lock = ws.file(".sluice-remote.txt.lock");
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    hold_lock_by_hand(&lock, &file, pid, "another-host.invalid");
    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.edit{path = "remote.txt", oldString = "one", newString = "ONE"}
        emit({out = out or false, busy = err.busy or false, stale = err.stale or false})"#,
    );
    assert_eq!(out[0], json!({"out": false, "busy": true, "stale": false}));
    assert_eq!(fs::read(&file).unwrap(), b"one\n");
}

#[test]
fn a_lock_without_an_owner_file_counts_as_busy() {
    let ws = common::workspace();
    let file = ws.file("bare.txt");
    fs::write(&file, "one\n").unwrap();
    let lock = ws.file(".sluice-bare.txt.lock");
    fs::create_dir(&lock).unwrap();
    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.edit{path = "bare.txt", oldString = "one", newString = "ONE"}
        emit({out = out or false, err = err})"#,
    );
    let shown = file.display().to_string();
    let lock_shown = lock.display().to_string();
    assert_eq!(
        out[0],
        json!({
            "out": false,
            "err": {
                "code": "no_match",
                "message": format!(
                    "{shown} is busy: another writer holds the lock {lock_shown}. Re-read the file and retry after it finishes. \
                     The lock names no owner: if no sluice process is changing the file, a crash left it; remove that folder."
                ),
                "path": shown,
                "lock": lock_shown,
                "busy": true,
            },
        })
    );
    assert_eq!(fs::read(&file).unwrap(), b"one\n");
}

#[test]
fn a_held_lock_also_refuses_edits_through_a_symlink_alias_and_a_case_variant_name() {
    let ws = common::workspace();
    let file = ws.file("Notes.TXT");
    fs::write(&file, "one\n").unwrap();
    std::os::unix::fs::symlink("Notes.TXT", ws.file("alias.txt")).unwrap();
    // The key is the resolved file's name, case-folded.
    let lock = ws.file(".sluice-notes.txt.lock");
    let sleeper = KillOnDrop(Command::new("sleep").arg("30").spawn().unwrap());
    hold_lock_by_hand(&lock, &file, sleeper.pid(), &hostname());
    let out = common::lua_json(
        ws.path(),
        r#"for _, path in ipairs({"Notes.TXT", "alias.txt"}) do
          local out, err = sluice.edit{path = path, oldString = "one", newString = "ONE"}
          emit({out = out or false, busy = err.busy or false, lock = err.lock, path = err.path})
        end"#,
    );
    let lock_shown = lock.display().to_string();
    assert_eq!(
        out,
        vec![
            json!({"out": false, "busy": true, "lock": lock_shown, "path": file.display().to_string()}),
            json!({"out": false, "busy": true, "lock": lock_shown, "path": ws.file("alias.txt").display().to_string()}),
        ]
    );
    assert_eq!(fs::read(&file).unwrap(), b"one\n");
    drop(sleeper);
}
