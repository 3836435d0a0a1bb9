//! Stopping a run with SIGINT or SIGTERM: the run stops between flow steps,
//! exits 128 + the signal, and leaves no lock or staging file behind; a
//! second signal stops it at once.

mod common;

use common::{names_in, spawn_lua, workspace};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::{Duration, Instant};

/// Waits until the child prints `line` on stdout (so it is past its setup).
fn wait_for_line(child: &mut Child, line: &str) {
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut got = String::new();
    reader.read_line(&mut got).unwrap();
    assert_eq!(got.trim_end(), line);
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// The child's exit, failing the test if it takes longer than `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("the run did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut s).unwrap();
    s
}

#[test]
fn sigint_stops_a_busy_lua_loop_with_exit_130() {
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\nlocal x = 0\nwhile true do x = x + 1 end\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert!(stderr_of(&mut child)
        .ends_with("sluice: interrupted by SIGINT; the run stopped between flow steps\n"));
}

#[test]
fn sigterm_stops_a_waiting_script_with_exit_143() {
    let ws = workspace();
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\nsluice.sleep(60000)\nprint('woke')\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGTERM);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(143));
    assert!(stderr_of(&mut child).contains("interrupted by SIGTERM"));
}

#[test]
fn an_interrupted_editing_loop_leaves_no_lock_or_staging_file() {
    let ws = workspace();
    fs::write(ws.path().join("log.txt"), "END\n").unwrap();
    let mut child = spawn_lua(
        ws.path(),
        r#"print('ready')
        local i = 0
        while true do
          i = i + 1
          assert(sluice.edit{path = "log.txt", oldString = "END", newString = "line " .. i .. "\nEND"})
        end"#,
        &[],
    );
    wait_for_line(&mut child, "ready");
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert_eq!(names_in(ws.path()), ["log.txt"], "only the file remains");
    let text = fs::read_to_string(ws.path().join("log.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(*lines.last().unwrap(), "END");
    for (i, line) in lines[..lines.len() - 1].iter().enumerate() {
        assert_eq!(
            *line,
            format!("line {}", i + 1),
            "every completed edit is whole"
        );
    }
    assert!(lines.len() > 2, "the loop made progress before the signal");
}

#[test]
fn a_second_signal_stops_a_run_at_once() {
    let ws = workspace();
    // A loop inside a coroutine does not see the first signal's stop request
    // (the hook watches the main thread), so only the second one ends it.
    let mut child = spawn_lua(
        ws.path(),
        "print('ready')\ncoroutine.wrap(function() while true do end end)()\n",
        &[],
    );
    wait_for_line(&mut child, "ready");
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "first signal only asks"
    );
    signal(&child, Signal::SIGINT);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.signal(), Some(Signal::SIGINT as i32));
    assert!(stderr_of(&mut child).contains("send the signal again to stop at once"));
}
