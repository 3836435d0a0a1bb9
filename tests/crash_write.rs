//! A `sluice run` killed (SIGKILL) while `write` is staging its bytes leaves
//! the original file byte for byte: the new bytes go to a sibling staging
//! file that is renamed over the target only once complete, so a crash leaves
//! at most that orphan staging file (and the lock its dead owner held).

mod common;

use common::names_in;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bytes of the replacement: large enough that staging them takes a while.
const BIG: usize = 256 * 1024 * 1024;
const ORIGINAL: &[u8] = b"original line 1\noriginal line 2\r\nno final newline";
const ATTEMPTS: usize = 5;
/// No new attempt starts after this much time has gone by.
const BUDGET: Duration = Duration::from_secs(15);
/// One attempt gives up waiting for the staging file after this long.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

fn is_staging(name: &str) -> bool {
    name.starts_with(".sluice-") && name.ends_with(".tmp")
}

/// The target holds exactly the complete replacement.
fn holds_the_whole_replacement(target: &Path) -> bool {
    let bytes = fs::read(target).unwrap();
    bytes.len() == BIG && bytes.iter().all(|&b| b == b'n')
}

enum Outcome {
    /// Killed before the rename: the original survived. Carries the child's pid.
    Caught { pid: u32 },
    /// The write finished (or renamed) before the kill landed.
    Missed(String),
}

fn attempt(ws: &Path) -> Outcome {
    let root = fs::canonicalize(ws).unwrap();
    let target = root.join("target.bin");
    fs::write(&target, ORIGINAL).unwrap();
    let script = format!(
        "local big = string.rep(\"n\", {BIG})\n\
         local out, err = sluice.write{{path = \"target.bin\", content = big}}\n\
         print(out and \"written\" or tostring(err))\n"
    );
    let mut child = common::spawn_lua(ws, &script, &[]);
    let pid = child.id();
    let started = Instant::now();
    let staged: PathBuf = loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0), "the writer failed on its own");
            assert_eq!(fs::read(&target).unwrap().len(), BIG);
            assert!(holds_the_whole_replacement(&target));
            return Outcome::Missed(format!("the writer finished first ({status})"));
        }
        if let Some(name) = names_in(&root).into_iter().find(|n| is_staging(n)) {
            break root.join(name);
        }
        if started.elapsed() > ATTEMPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no staging file appeared within {ATTEMPT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    child.kill().unwrap();
    let status = child.wait().unwrap();
    if status.signal() != Some(nix::libc::SIGKILL) {
        // It exited between our look and the kill: a complete write.
        assert_eq!(status.code(), Some(0), "the writer failed on its own");
        assert!(holds_the_whole_replacement(&target));
        return Outcome::Missed(format!("the writer exited before the kill ({status})"));
    }
    if !staged.exists() {
        // Killed after the rename: the new bytes are whole, never a mix.
        assert!(
            holds_the_whole_replacement(&target),
            "after the rename the target must hold the whole replacement"
        );
        return Outcome::Missed("the rename completed before the kill".into());
    }
    // Killed mid-write: the original is intact, byte for byte.
    let after = fs::read(&target).unwrap();
    assert_eq!(after.len(), ORIGINAL.len(), "the target was resized");
    assert_eq!(after, ORIGINAL, "the target's bytes changed");
    // What remains beside it: the orphan staging file and the dead owner's lock.
    let staged_name = staged.file_name().unwrap().to_string_lossy().into_owned();
    let mut expected = vec![
        ".sluice-target.bin.lock".to_string(),
        staged_name,
        "target.bin".to_string(),
    ];
    expected.sort();
    assert_eq!(names_in(&root), expected);
    let staged_bytes = fs::metadata(&staged).unwrap().len();
    assert!(staged_bytes <= BIG as u64);
    eprintln!("killed pid {pid} with {staged_bytes} of {BIG} bytes staged");
    Outcome::Caught { pid }
}

#[test]
fn write_killed_mid_write_leaves_the_original_bytes_intact() {
    let begun = Instant::now();
    let mut misses = Vec::new();
    for _ in 0..ATTEMPTS {
        if begun.elapsed() > BUDGET {
            break;
        }
        let ws = common::workspace();
        let outcome = attempt(ws.path());
        if let Outcome::Missed(why) = &outcome {
            eprintln!("missed: {why}");
        }
        match outcome {
            Outcome::Caught { pid } => {
                // The dead writer's lock now refuses the next write as stale,
                // and the original stays as it was.
                let root = fs::canonicalize(ws.path()).unwrap();
                let out = common::lua_json(
                    ws.path(),
                    "local out, err = sluice.write{path = \"target.bin\", content = \"x\"}\n\
                     emit({out = out, code = err.code, stale = err.stale, pid = err.pid, lock = err.lock})\n",
                );
                assert_eq!(
                    out,
                    vec![serde_json::json!({
                        "code": "no_match",
                        "stale": true,
                        "pid": pid,
                        "lock": root.join(".sluice-target.bin.lock").display().to_string(),
                    })]
                );
                assert_eq!(fs::read(root.join("target.bin")).unwrap(), ORIGINAL);
                return;
            }
            Outcome::Missed(why) => misses.push(why),
        }
    }
    panic!(
        "never killed a writer mid-write in {} attempt(s) over {:?}: {misses:?}",
        misses.len(),
        begun.elapsed()
    );
}
