//! Attacks on one sandbox per run and profile (src/sandbox/shared/): a
//! hostile script, or a prompt-injected model, whose commands run in the
//! run's shared sandbox, against each of its promises. Every test drives
//! the real `sluice` binary under bubblewrap and carries a control that
//! must still work (refusing everything is not a fix).
//!
//! Holes found and fixed (each pinned here):
//! - a command that stopped the helper (SIGSTOP) hung its own call past
//!   its timeout, and the run, forever; a background job that stopped it
//!   made the next call wait 30 s and then fail, and that command could
//!   still start later, unseen; so did a job that stopped the helper's
//!   child between its fork and its exec;
//! - a process whose main thread exited alone while another thread ran
//!   showed as a zombie, was never killed, and outlived its call (and a
//!   command leading its session that way hung its call past its timeout);
//! - a command could lower the helper's resource limits, which every
//!   later command inherits (`prlimit --pid <helper> --fsize=0`);
//! - a huge environment ended the run's sandbox, and every background job
//!   in it, instead of failing as exec would;
//! - a process that forks and exits in a loop got away from the scan that
//!   kills a call's session, and ran on after its call, until the run
//!   ended (a bubblewrap of the call's own ended with the call): now the
//!   sandbox ends with such a call.
//!
//! - an earlier background job could open a later command's pipes through
//!   /proc (steal its stdin, forge its output), trace it, and signal it:
//!   the run's commands share a PID namespace as one user. Each command is
//!   now a landlock domain of its own with signals scoped to it; where the
//!   kernel cannot do that, commands get a bubblewrap each, as before.

mod common;

use common::{exit_within, need_bwrap, run_lua_with, spawn_lua_with, workspace};
use std::io::Read;
use std::time::Duration;

/// Shell words that set `H` to the helper's pid (the process named
/// sluice-sandbox).
const FIND_HELPER: &str =
    "H=; for p in /proc/[0-9]*; do grep -qx sluice-sandbox $p/comm 2>/dev/null && H=${p#/proc/}; done";

/// The pid namespace a command is in.
const PID_NS: &str = "readlink /proc/self/ns/pid";

/// Lua prelude: `sh(command, timeoutMs)` runs a command and returns one
/// line saying what came of it.
const SH: &str = r#"
local function sh(command, ms)
  local r, e = sluice.bash{command = command, timeoutMs = ms}
  if r then
    return "exit=" .. tostring(r.exitCode) .. " out=" .. r.stdout:gsub("\n", " ") .. " err=" .. r.stderr:gsub("\n", " ")
  end
  return "error=" .. e.code .. " " .. e.message
end
"#;

/// Runs `script` under bubblewrap, failing if the run takes longer than
/// `limit` (a hang); its stdout.
fn run_within(ws: &common::Workspace, script: &str, flags: &[&str], limit: Duration) -> String {
    let mut all = vec!["--sandbox", "bwrap"];
    all.extend_from_slice(flags);
    let mut child = spawn_lua_with(ws.path(), script, &all, &[]);
    let status = exit_within(&mut child, limit);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "the run failed\n{out}\n{err}");
    out
}

/// The line of `out` starting with `tag`, without the tag.
fn line<'a>(out: &'a str, tag: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(tag))
        .unwrap_or_else(|| panic!("no {tag:?} line in:\n{out}"))
}

#[test]
fn a_command_that_stops_the_helper_hangs_neither_its_call_nor_the_run() {
    need_bwrap();
    let ws = workspace();
    // A command stops the helper and exits: its end is never told (the
    // call hung past its timeout, forever). A background job stops it and
    // stays: the next command is never started (the call waited 30 s, and
    // the command could start later, after its call had given up on it).
    // Control: the run's next commands run, in a new sandbox.
    let script = format!(
        r#"{SH}
print("first " .. sh("echo first"))
print("stopper " .. sh("{FIND_HELPER}; kill -STOP $H; echo stopped", 3000))
print("after " .. sh("echo after", 3000))
local job = assert(sluice.bash{{command = "{FIND_HELPER}; kill -STOP $H; sleep 30", background = true}})
sluice.sleep(500)
print("victim " .. sh("touch late-marker; echo one"))
print("next " .. sh("echo two"))
sluice.sleep(1000)
print("late " .. sh("test -e late-marker && echo started-late || echo never-started"))
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(25));
    assert!(line(&out, "first ").contains("out=first"), "{out}");
    assert!(line(&out, "after ").contains("out=after"), "{out}");
    assert!(line(&out, "next ").contains("out=two"), "{out}");
    let victim = line(&out, "victim ");
    assert!(
        victim.contains("out=one") || victim.contains("provider_unavailable"),
        "{out}"
    );
    if victim.contains("provider_unavailable") {
        // A call told its command did not run: it never runs later.
        assert!(line(&out, "late ").contains("never-started"), "{out}");
    }
}

/// A Python program that stops (SIGSTOP) every process named like the
/// helper but the helper itself: the helper's child between its fork and
/// the command's exec, counting its catches in `caught.txt`.
const CATCHER: &str = r#"
import os, signal
def named(p):
    try:
        return open("/proc/%s/comm" % p).read().strip() == "sluice-sandbox"
    except OSError:
        return False
helper = [int(p) for p in os.listdir("/proc") if p.isdigit() and named(p)][0]
caught = 0
while True:
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != helper and named(p):
            try:
                os.kill(int(p), signal.SIGSTOP)
                caught += 1
                open("caught.txt", "w").write(str(caught))
            except OSError:
                pass
"#;

#[test]
fn a_job_that_stops_the_helpers_child_before_exec_hangs_no_call() {
    need_bwrap();
    let ws = workspace();
    std::fs::write(ws.file("catch.py"), CATCHER).unwrap();
    // A child stopped before its exec held the helper in its wait: the
    // call waited 30 s, and so would any other. Now the child is outside
    // every command's landlock domain, with signals scoped, so the job
    // cannot stop it (nor the helper, which waits for its exec); a command
    // caught just after its exec is stopped until its call's timeout, as
    // the job could stop any of the run's commands. Control: the calls
    // come back.
    let script = format!(
        r#"{SH}
local job = assert(sluice.bash{{command = "python3 catch.py", background = true}})
sluice.sleep(500)
for i = 1, 4 do
  local t0 = sluice.now()
  local said = sh("echo call" .. i, 3000)
  print("call" .. i .. " " .. (sluice.now() - t0) .. " " .. said)
end
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(60));
    for i in 1..=4 {
        let said = line(&out, &format!("call{i} "));
        let ms: u64 = said.split_whitespace().next().unwrap().parse().unwrap();
        assert!(ms < 10_000, "call {i} took {ms} ms: {out}");
    }
}

/// A Python program whose main thread exits alone while a thread that
/// ignores TERM goes on appending to `hb.txt`: /proc shows the process as
/// a zombie, yet it runs.
const HALF_ZOMBIE: &str = r#"
import ctypes, signal, threading, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
def beat():
    while True:
        with open("hb.txt", "a") as f:
            f.write(".")
        time.sleep(0.05)
threading.Thread(target=beat).start()
time.sleep(0.2)
ctypes.CDLL(None).syscall(60, 0)  # exit(2) of the main thread alone
"#;

#[test]
fn a_process_whose_main_thread_exited_does_not_outlive_its_call() {
    need_bwrap();
    let ws = workspace();
    std::fs::write(ws.file("half.py"), HALF_ZOMBIE).unwrap();
    // Once in the background of a call, once as the command itself with
    // a timeout; then the heartbeat must stand still. Control: it beat
    // while the call ran.
    let script = format!(
        r#"{SH}
print("bg " .. sh("python3 half.py >/dev/null 2>&1 & for i in $(seq 50); do test -s hb.txt && break; sleep 0.1; done; sleep 0.3; wc -c < hb.txt"))
print("still " .. sh("a=$(wc -c < hb.txt); sleep 1; b=$(wc -c < hb.txt); echo $a $b"))
print("leader " .. sh("rm -f hb.txt; exec python3 half.py", 1500))
print("still2 " .. sh("a=$(wc -c < hb.txt); sleep 1; b=$(wc -c < hb.txt); echo $a $b"))
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(40));
    let beats: u64 = line(&out, "bg ")
        .split("out=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(beats > 0, "the heartbeat never beat: {out}");
    for tag in ["still ", "still2 "] {
        let counts: Vec<&str> = line(&out, tag)
            .split("out=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(2)
            .collect();
        assert_eq!(
            counts[0], counts[1],
            "a process outlived its call ({tag}): {out}"
        );
    }
    assert!(line(&out, "leader ").contains("timeout"), "{out}");
}

/// A Python program that forks and exits in a loop, each generation under
/// a new pid, counting in `walk.txt`: by the time a scan of the session
/// signals a pid, it has moved on.
const WALKER: &str = r#"
import os
n = 0
while True:
    if os.fork():
        os._exit(0)
    n += 1
    if n % 50 == 0:
        with open("walk.%d" % os.getpid(), "w") as f:
            f.write(str(n))
        os.replace("walk.%d" % os.getpid(), "walk.txt")
"#;

#[test]
fn a_process_that_forks_and_exits_in_a_loop_does_not_outlive_its_call() {
    need_bwrap();
    let ws = workspace();
    std::fs::write(ws.file("walk.py"), WALKER).unwrap();
    // The scan missed them: they ran on, in the next calls, until the run
    // ended. Now the sandbox ends with the call they got away from.
    // Control: they walked while the call ran; the next call runs.
    let script = format!(
        r#"{SH}
print("walk " .. sh("for i in 1 2 3 4; do python3 walk.py & done; for i in $(seq 50); do test -s walk.txt && break; sleep 0.1; done; cat walk.txt"))
print("still " .. sh("a=$(cat walk.txt); sleep 1; b=$(cat walk.txt); echo $a $b"))
local job = assert(sluice.bash{{command = "rm -f walk.txt; for i in 1 2 3 4; do python3 walk.py & done; sleep 600", background = true}})
print("jobwalk " .. sh("for i in $(seq 50); do test -s walk.txt && break; sleep 0.1; done; cat walk.txt"))
job:kill()
job:wait(20000)
print("jobstill " .. sh("a=$(cat walk.txt); sleep 1; b=$(cat walk.txt); echo $a $b"))
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(90));
    for tag in ["walk ", "jobwalk "] {
        let walked = line(&out, tag);
        assert!(
            walked.contains("exit=0 out=") && !walked.contains("out= "),
            "they never walked ({tag}): {out}"
        );
    }
    for tag in ["still ", "jobstill "] {
        let counts: Vec<&str> = line(&out, tag)
            .split("out=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(2)
            .collect();
        assert_eq!(counts.len(), 2, "{out}");
        assert_eq!(
            counts[0], counts[1],
            "walkers outlived their call ({tag}): {out}"
        );
    }
}

#[test]
fn an_earlier_command_cannot_set_the_limits_later_commands_inherit() {
    need_bwrap();
    let ws = workspace();
    // Every command is forked by the helper and inherits its limits.
    // Controls: a command still sets its own limits and reads the helper's.
    let script = format!(
        r#"{SH}
print("set " .. sh("{FIND_HELPER}; prlimit --pid $H --fsize=0:0 --cpu=1:1 && echo lowered || echo refused"))
print("read " .. sh("{FIND_HELPER}; prlimit --pid $H --fsize --noheadings"))
print("own " .. sh("(ulimit -f 0; echo x > own.txt) 2>/dev/null && echo unlimited || echo limited"))
print("later " .. sh("head -c 4096 /dev/zero > later.bin; wc -c < later.bin; ulimit -f"))
"#
    );
    let out = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[])
        .ok()
        .stdout;
    assert!(line(&out, "set ").contains("refused"), "{out}");
    assert!(line(&out, "read ").contains("FSIZE"), "{out}");
    assert!(line(&out, "own ").contains("limited"), "{out}");
    // The later command has the default policy's fileSizeMb (4096 MiB,
    // which sh counts in 512-byte blocks), not the 0 the first one asked.
    assert!(line(&out, "later ").contains("out=4096 8388608"), "{out}");
}

#[test]
fn a_huge_environment_fails_as_exec_would_and_spares_the_runs_sandbox() {
    need_bwrap();
    let ws = workspace();
    // More than the helper reads in one frame: the sandbox ended, and the
    // background job in it. Control: a merely too large one fails the same
    // way (the kernel's limit), and the sandbox and its job go on.
    let script = format!(
        r#"{SH}
local job = assert(sluice.bash{{command = "sleep 30", background = true}})
print("before " .. sh("{PID_NS}"))
local function huge(n)
  local r, e = sluice.bash{{command = "echo ran", env = {{BIG = string.rep("x", n)}}}}
  return r and ("ran " .. r.stdout) or (e.code .. " " .. e.message)
end
print("huge " .. huge(65 * 1024 * 1024))
print("large " .. huge(200 * 1024))
print("after " .. sh("{PID_NS}; pgrep -x sleep >/dev/null && echo job-alive"))
job:kill()
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(60));
    assert!(
        line(&out, "large ").contains("Argument list too long"),
        "{out}"
    );
    assert!(
        line(&out, "huge ").contains("Argument list too long"),
        "{out}"
    );
    let before = line(&out, "before ");
    let after = line(&out, "after ");
    assert!(after.contains("job-alive"), "{out}");
    let ns = |l: &str| {
        l.split_whitespace()
            .find(|w| w.contains("pid:["))
            .map(String::from)
    };
    assert_eq!(ns(before), ns(after), "the sandbox was replaced: {out}");
}

#[test]
fn the_helper_cannot_be_traced_read_or_reached_from_a_command() {
    need_bwrap();
    let ws = workspace();
    // Controls: the same program traces a process of its own and reads its
    // own descriptors and environment.
    let program = r#"
import ctypes, os, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
links = []
for f in fds[3:]:
    try:
        links.append(os.readlink("/proc/self/fd/%d" % f))
    except OSError:
        pass
print("own-fds", fds[:3], "beyond:", links)
helper = [p for p in os.listdir("/proc") if p.isdigit() and open("/proc/%s/comm" % p).read().strip() == "sluice-sandbox"][0]
def err():
    return os.strerror(ctypes.get_errno())
def tried(what, f):
    try:
        f(); print(what, "ok")
    except OSError as e:
        print(what, "refused", e.strerror)
print("attach-helper", libc.ptrace(16, int(helper), 0, 0), err())
tried("fd-helper", lambda: os.listdir("/proc/%s/fd" % helper) and [os.readlink("/proc/%s/fd/%s" % (helper, f)) for f in os.listdir("/proc/%s/fd" % helper)])
tried("environ-helper", lambda: open("/proc/%s/environ" % helper, "rb").read())
tried("mem-helper", lambda: open("/proc/%s/mem" % helper, "rb").read(1))
pidfd = libc.syscall(434, int(helper), 0)
print("getfd-helper", libc.syscall(438, pidfd, 3, 0), err())
tried("environ-own", lambda: open("/proc/self/environ", "rb").read())
child = subprocess.Popen(["sleep", "5"])
time.sleep(0.1)
print("attach-own", libc.ptrace(16, child.pid, 0, 0))
child.kill()
"#;
    let script = format!(
        "local r = assert(sluice.bash{{script = {}, interpreter = 'python3'}})\nprint(r.stdout .. r.stderr)",
        common::lua_str(program)
    );
    let out = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[])
        .ok()
        .stdout;
    assert!(
        out.contains("attach-helper -1 Operation not permitted"),
        "{out}"
    );
    assert!(out.contains("fd-helper refused"), "{out}");
    assert!(out.contains("environ-helper refused"), "{out}");
    assert!(out.contains("mem-helper refused"), "{out}");
    assert!(
        out.contains("getfd-helper -1 Operation not permitted"),
        "{out}"
    );
    // 0, 1, 2 and Python's own (the listing, its script): nothing of
    // the helper's (its socket, other commands' pipes, pidfds) leaks in.
    let fds = out
        .lines()
        .find(|l| l.starts_with("own-fds [0, 1, 2] beyond:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        !["socket:", "pipe:", "pidfd", "anon_inode"]
            .iter()
            .any(|w| fds.contains(w)),
        "{out}"
    );
    assert!(out.contains("environ-own ok"), "{out}");
    assert!(out.contains("attach-own 0"), "{out}");
}

#[test]
fn nothing_a_command_starts_to_escape_its_session_outlives_its_call() {
    need_bwrap();
    let ws = workspace();
    // A subreaper that double-forks, a sleep that ignores TERM, one that
    // stops itself, one in a process group of its own, one whose name
    // reads like the end of a stat line ("x) Z 1 1 1 1"); a new user
    // namespace (unshare, clone3), io_uring. The second call looks for
    // leftovers in the same sandbox. Control: its own sleep is seen.
    let marks = ["31.1001", "31.1002", "31.1003", "31.1004", "31.1006"];
    let first = format!(
        "python3 -c 'import ctypes,os; ctypes.CDLL(None).prctl(36,1,0,0,0); os.system(\"(sleep {a} &)\")'; \
         (trap \"\" TERM; exec sleep {b}) & \
         sh -c 'kill -STOP $$; exec sleep {c}' & \
         python3 -c 'import os; os.setpgid(0,0); os.execvp(\"sleep\", [\"sleep\", \"{d}\"])' & \
         python3 -c 'import ctypes,time; ctypes.CDLL(None).prctl(15, b\"x) Z 1 1 1 1\"); time.sleep({e})' & \
         unshare -U true 2>/dev/null && echo userns-allowed || echo userns-refused; \
         python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.syscall(435, ctypes.create_string_buffer(88), 88); print(\"clone3\", r, os.strerror(ctypes.get_errno())); r=l.syscall(425, 8, ctypes.create_string_buffer(120)); print(\"io_uring\", r, os.strerror(ctypes.get_errno()))'; \
         sleep 0.3",
        a = marks[0],
        b = marks[1],
        c = marks[2],
        d = marks[3],
        e = marks[4],
    );
    let script = format!(
        r#"{SH}
print("first " .. sh({first:?}))
print("left " .. sh("sleep 31.1005 & sleep 0.5; ps -eo args | grep -c '^sleep 31\\.100[1-4]'; ps -eo args | grep -c '^sleep 31\\.1005'; pgrep -fc 'time.sleep.31.100[6]'"))
"#
    );
    let out = run_within(&ws, &script, &[], Duration::from_secs(60));
    let first = line(&out, "first ");
    assert!(first.contains("userns-refused"), "{out}");
    assert!(
        first.contains("clone3 -1 Function not implemented"),
        "{out}"
    );
    assert!(first.contains("io_uring -1 Permission denied"), "{out}");
    assert!(line(&out, "left ").contains("out=0 1 0"), "{out}");
}

#[test]
fn a_command_in_the_shared_sandbox_cannot_forge_the_runners_failure() {
    need_bwrap();
    let ws = workspace();
    // bubblewrap's own words, its exit 1, and a shell's 128 + signal: in the
    // shared sandbox the helper reports the real exit, so none of them is
    // taken for a broken runner, a missing program or a signal. Control:
    // the exit codes come back as printed.
    let script = r#"
local function show(r, e)
  if not r then return "error=" .. e.code end
  return "exit=" .. tostring(r.exitCode) .. " signal=" .. tostring(r.signal) .. " runnerFailed=" .. tostring(r.sandbox and r.sandbox.runnerFailed)
end
print("mount " .. show(sluice.bash{command = "echo 'bwrap: Can not mount tmpfs on /tmp: No space left on device' >&2; exit 1"}))
print("execvp " .. show(sluice.bash{command = "echo 'bwrap: execvp nope: No such file or directory' >&2; exit 1"}))
print("signal " .. show(sluice.bash{command = "exit 137"}))
local job = assert(sluice.bash{command = "echo 'bwrap: Can not mount tmpfs on /tmp: No space left on device' >&2; exit 1", background = true})
job:wait(10000)
print("job exit=" .. tostring(job.exitCode) .. " runnerFailed=" .. tostring(job.sandbox and job.sandbox.runnerFailed))
"#;
    let out = run_lua_with(ws.path(), script, &["--sandbox", "bwrap"], &[])
        .ok()
        .stdout;
    assert!(
        line(&out, "mount ").contains("exit=1 signal=nil runnerFailed=nil"),
        "{out}"
    );
    assert!(
        line(&out, "execvp ").contains("exit=1 signal=nil runnerFailed=nil"),
        "{out}"
    );
    assert!(
        line(&out, "signal ").contains("exit=137 signal=nil"),
        "{out}"
    );
    assert!(
        line(&out, "job ").contains("exit=1 runnerFailed=nil"),
        "{out}"
    );
}

#[test]
fn a_new_env_file_is_hidden_from_the_commands_started_after_it_appears() {
    need_bwrap();
    let ws = workspace();
    // A command makes the file (through Python, which the shell analysis
    // does not read). A command started after it appears gets a new
    // sandbox that masks it. A background job started before it appeared
    // can read it, as a command of its own bubblewrap could: a long
    // command's mounts are fixed when it starts; that is not new.
    std::fs::write(
        ws.file("mk.py"),
        "open('.e' + 'nv', 'w').write('TOKEN=from-the-env-file\\n')\n",
    )
    .unwrap();
    let read = "python3 -c 'print(open(\\\".e\\\" + \\\"nv\\\").read())'";
    let script = format!(
        r#"{SH}
print("make " .. sh("python3 mk.py; {PID_NS}"))
print("read " .. sh("{read}; {PID_NS}"))
"#
    );
    let out = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[])
        .ok()
        .stdout;
    let on_disk = std::fs::read_to_string(ws.file(".env")).unwrap_or_default();
    assert!(on_disk.contains("from-the-env-file"), "control: {out}");
    let read = line(&out, "read ");
    assert!(!read.contains("from-the-env-file"), "{out}");
    let ns = |l: &str| {
        l.split_whitespace()
            .find(|w| w.contains("pid:["))
            .map(String::from)
    };
    assert_ne!(ns(line(&out, "make ")), ns(read), "{out}");
}

#[test]
fn an_earlier_background_job_cannot_read_or_forge_a_later_commands_streams() {
    need_bwrap();
    let ws = workspace();
    let spy = r#"
import ctypes, glob, os, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + 6
done = set()
while time.time() < end and not done:
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if b"victim-marker" not in open(d + "/cmdline", "rb").read():
                continue
        except OSError:
            continue
        done.add(d)
        try:
            w = os.open(d + "/fd/1", os.O_WRONLY); os.write(w, b"FORGED\n"); os.close(w)
        except OSError as e:
            print("fd1", e.strerror)
        try:
            r = os.open(d + "/fd/0", os.O_RDONLY | os.O_NONBLOCK); time.sleep(0.05)
            print("stolen", os.read(r, 100))
        except OSError as e:
            print("fd0", e.strerror)
        attached = libc.ptrace(16, int(d[6:]), 0, 0)  # PTRACE_ATTACH
        print("attach", attached)
        if attached == 0:
            os.waitpid(int(d[6:]), 0)
            libc.ptrace(17, int(d[6:]), 0, 0)  # PTRACE_DETACH
    time.sleep(0.005)
"#;
    let script = format!(
        r#"
local spy = assert(sluice.bash{{script = {}, interpreter = "python3", background = true}})
sluice.sleep(500)
local r = assert(sluice.bash{{command = "sleep 1; echo victim-marker; cat", stdin = "secret-stdin\n"}})
print("victim " .. r.stdout:gsub("\n", " "))
spy:wait(10000)
print("spy " .. spy:read().stdout:gsub("\n", " "))
"#,
        common::lua_str(spy)
    );
    let out = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[])
        .ok()
        .stdout;
    // Control: the victim's own output and stdin.
    assert!(
        line(&out, "victim ").contains("victim-marker secret-stdin"),
        "{out}"
    );
    assert!(!line(&out, "victim ").contains("FORGED"), "{out}");
    assert!(!line(&out, "spy ").contains("secret-stdin"), "{out}");
    // Without Yama (as here) it could also trace it, and so rewrite its
    // output and exit code.
    assert!(!line(&out, "spy ").contains("attach 0"), "{out}");
    // The spy found the victim and was refused its descriptors (each
    // command is a landlock domain of its own), not merely too late.
    assert!(
        line(&out, "spy ").contains("fd1 Permission denied"),
        "{out}"
    );
}
