//! Escapes tried through the real binary, under each runner forced in turn
//! (`--sandbox bwrap|landlock`), each with the control that must still
//! work: reading sluice's own process, changing metadata where the command
//! may not write, leaving something running after the call, reaching a
//! named Unix socket the command cannot see.

mod common;

use common::*;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::Duration;

/// Fails, saying how to install them, when the tools these tests need are
/// missing: the tests must not pass by skipping.
fn need_tools() {
    need_bwrap();
    need_program("python3", "apt-get install python3");
    need_program("setsid", "apt-get install util-linux");
}

fn text(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_string()
}

/// Python that tries each `(label, statement)` and prints `label done` or
/// `label refused ERRNO`.
fn attempts(setup: &str, tries: &[(&str, &str)]) -> String {
    let mut program = format!("import os, sys\n{setup}\n");
    for (label, statement) in tries {
        program.push_str(&format!(
            "try:\n    {statement}\n    print({label:?}, 'done')\nexcept OSError as e:\n    print({label:?}, 'refused', e.errno)\n"
        ));
    }
    program
}

fn assert_refused(out: &str, label: &str) {
    assert!(
        out.lines()
            .any(|l| l.starts_with(&format!("{label} refused "))),
        "{label}: {out}"
    );
}

fn assert_done(out: &str, label: &str) {
    assert!(out.contains(&format!("{label} done\n")), "{label}: {out}");
}

/// Python that prints every environment and command line it can read in
/// /proc, then tries sluice's own process (its parent under landlock) by
/// each door, then its own.
const PROC_PROBE: &str = r#"
import os
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    for f in ('environ', 'cmdline'):
        try:
            print(open('/proc/%s/%s' % (pid, f), 'rb').read().decode('latin-1'))
        except OSError:
            pass
parent = os.getppid()
def attempt(label, f):
    try:
        print(label, 'done', repr(f())[:200])
    except OSError as e:
        print(label, 'refused', e.errno)
base = '/proc/%d/' % parent
attempt('environ', lambda: open(base + 'environ', 'rb').read())
attempt('mem', lambda: open(base + 'mem', 'rb').read(1))
attempt('maps', lambda: open(base + 'maps').read())
attempt('cwd', lambda: os.readlink(base + 'cwd'))
fds = []
try:
    fds = os.listdir(base + 'fd')
except OSError:
    pass
for fd in fds or [str(n) for n in range(64)]:
    attempt('fd link', lambda: os.readlink(base + 'fd/' + fd))
    # Non-blocking: a pipe's other end may never write.
    attempt('fd open', lambda: os.read(os.open(base + 'fd/' + fd, os.O_RDONLY | os.O_NONBLOCK), 64))
attempt('self status', lambda: open('/proc/self/status').read()[:10])
attempt('self fd', lambda: os.listdir('/proc/self/fd'))
attempt('self environ', lambda: open('/proc/self/environ', 'rb').read()[:10])
"#;

/// Checks what [`PROC_PROBE`] printed under `runner`.
fn assert_sluice_unreadable(runner: &str, out: &Value, secret: &str, marker: &str) {
    let stdout = text(out, "stdout");
    assert_eq!(out["exitCode"], 0, "{runner}: {out}");
    assert!(!stdout.contains(secret), "{runner} leaked the credential");
    assert!(
        !stdout.contains(marker),
        "{runner} leaked sluice's arguments"
    );
    // Under landlock the command's parent is sluice itself; under
    // bubblewrap it is bwrap's init, and sluice lies outside the PID
    // namespace (the scan found nothing of it).
    if runner == "landlock" {
        for door in ["environ", "mem", "maps", "cwd", "fd link", "fd open"] {
            assert!(
                !stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("{door} done"))),
                "{runner}: {door} of sluice's process was readable:\n{stdout}"
            );
        }
    }
    for own in ["self status", "self fd", "self environ"] {
        assert!(
            stdout.contains(&format!("{own} done")),
            "{runner}: {own}\n{stdout}"
        );
    }
}

/// A credential and an argument marker of test `test`'s own: the probe
/// scans every process it can see, and the tests of this file run at once,
/// so a marker two tests shared would find the other test's sluice, which
/// is no leak of the probe's own.
fn secret_and_marker(test: &str) -> (String, String) {
    (
        format!("ghp_sluice_test_secret_{test}_{}", std::process::id()),
        format!("sluice-argv-marker-{test}-{}", std::process::id()),
    )
}

#[test]
fn a_command_cannot_read_sluices_own_process() {
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let (secret, marker) = secret_and_marker("own");
        let out = confined_python(
            ws.path(),
            runner,
            &["--", &marker],
            &[("SLUICE_CREDENTIAL_GITHUB", &secret)],
            PROC_PROBE,
        );
        assert_sluice_unreadable(runner, &out, &secret, &marker);
    }
}

/// sluice run by a user without capabilities (here: root with every
/// capability dropped, as an ordinary user has none): the command's lack of
/// capabilities no longer sets it apart from sluice, only sluice being
/// non-dumpable does.
#[test]
fn a_command_cannot_read_the_process_of_a_sluice_without_capabilities() {
    need_tools();
    need_program("setpriv", "apt-get install util-linux");
    let ws = workspace();
    let (secret, marker) = secret_and_marker("no-caps");
    let script = format!(
        "local r, e = sluice.bash{{script = {}, interpreter = 'python3'}}\nprint(sluice.json.encode(r or e))",
        lua_str(PROC_PROBE)
    );
    let path = script_file(ws.path(), &script);
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-all", "--inh-caps", "-all", "--"])
        .arg(sluice_bin())
        .arg("run")
        .arg(&path)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--sandbox", "landlock", "--", &marker])
        .env("SLUICE_CREDENTIAL_GITHUB", &secret)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out).ok();
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_sluice_unreadable("landlock", &out, &secret, &marker);
}

/// sluice is non-dumpable: a process of its own user (no sandbox at all)
/// can neither read its environment nor list its open files; the same
/// process reads those of another process of that user (the control).
#[test]
fn sluice_is_out_of_reach_of_other_processes_of_its_user() {
    need_program("setpriv", "apt-get install util-linux");
    const NOBODY: &str = "65534";
    let as_nobody = |program: &str| {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"]);
        c.arg(program);
        c
    };
    let ws = workspace();
    std::os::unix::fs::chown(ws.path(), Some(65534), Some(65534)).unwrap();
    let script = script_file(ws.path(), "print('up')\nsluice.sleep(3000)\n");
    let mut run = as_nobody(sluice_bin().to_str().unwrap())
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .arg("--no-audit")
        .env("HOME", ws.path())
        .env("SLUICE_CREDENTIAL_GITHUB", "ghp_nobody_secret")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(read_stdout_line(&mut run), "up");
    let pid = run.id();
    let mut sibling = as_nobody("sleep")
        .arg(unique_sleep())
        .env("SIBLING_SECRET", "readable")
        .spawn()
        .unwrap();
    let read = |path: String| {
        as_nobody("cat")
            .arg(path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let environ = read(format!("/proc/{pid}/environ"));
    assert!(
        !environ.status.success(),
        "sluice's environment was readable"
    );
    assert!(!String::from_utf8_lossy(&environ.stdout).contains("ghp_nobody_secret"));
    let fds = as_nobody("ls")
        .arg(format!("/proc/{pid}/fd"))
        .output()
        .unwrap();
    assert!(!fds.status.success(), "sluice's fds were listable");
    let control = read(format!("/proc/{}/environ", sibling.id()));
    assert!(String::from_utf8_lossy(&control.stdout).contains("SIBLING_SECRET=readable"));
    // Its command line shows nothing but its name.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let shown: Vec<&[u8]> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .collect();
    assert_eq!(shown, [b"sluice"]);
    sibling.kill().unwrap();
    sibling.wait().unwrap();
    exit_within(&mut run, Duration::from_secs(20));
}

#[test]
fn a_root_command_under_landlock_holds_no_capability() {
    need_tools();
    let ws = workspace();
    let program = "import re\nfor l in open('/proc/self/status'):\n    if l.startswith('Cap'):\n        print(l.strip())\n";
    let out = confined_python(ws.path(), "landlock", &[], &[], program);
    let caps = text(&out, "stdout");
    assert_eq!(caps.lines().count(), 5, "{out}");
    for line in caps.lines() {
        assert!(line.ends_with("0000000000000000"), "{caps}");
    }
    // Control: still uid 0, so root's own files stay writable by their bits.
    std::fs::create_dir(ws.file("src")).unwrap();
    let out = confined_python(
        ws.path(),
        "landlock",
        &[],
        &[],
        "import os\nopen('src/mine', 'w').write('x')\nprint(os.getuid())",
    );
    assert_eq!(text(&out, "stdout"), format!("{}\n", nix::unistd::getuid()));
}

#[test]
fn metadata_outside_the_writable_trees_and_on_protected_paths_stays_unchanged() {
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let out_dir = outside_tmp(&ws, "outside");
        let victim = out_dir.join("victim");
        std::fs::write(&victim, "x").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir_all(ws.file(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.file("src")).unwrap();
        let hook = ws.file(".git/hooks/pre-commit.sample");
        std::fs::write(&hook, "#!/bin/sh\ntouch PWNED\n").unwrap();
        std::fs::write(ws.file("src/tool"), "#!/bin/sh\necho tool\n").unwrap();
        // A first run makes the audit store.
        confined_python(ws.path(), runner, &[], &[], "print('first')");
        let db = ws.file(".sluice/audit.db");
        let db_mode = std::fs::metadata(&db).unwrap().mode();
        let before = std::fs::metadata(&victim).unwrap();
        let setup = format!("v = {:?}", victim.to_str().unwrap());
        let tries = [
            ("chmod outside", "os.chmod(v, 0o777)"),
            ("chown outside", "os.chown(v, os.getuid(), os.getgid())"),
            ("touch outside", "os.utime(v, (1, 1))"),
            ("xattr outside", "os.setxattr(v, 'user.sluice', b'x')"),
            (
                "fchmod outside",
                "fd = os.open(v, os.O_RDONLY); os.fchmod(fd, 0o777)",
            ),
            (
                "enable hook",
                "os.chmod('.git/hooks/pre-commit.sample', 0o755)",
            ),
            ("lock audit", "os.chmod('.sluice/audit.db', 0)"),
            ("lock store", "os.chmod('.sluice', 0)"),
            ("chmod tool", "os.chmod('src/tool', 0o755)"),
            ("touch tool", "os.utime('src/tool', (1000, 2000))"),
            (
                "xattr tool",
                "os.setxattr('src/tool', 'user.sluice', b'kept')",
            ),
        ];
        let out = confined_python(ws.path(), runner, &[], &[], &attempts(&setup, &tries));
        let said = text(&out, "stdout");
        for (label, _) in &tries[..8] {
            assert_refused(&said, label);
        }
        for label in ["chmod tool", "touch tool", "xattr tool"] {
            assert_done(&said, label);
        }
        assert_eq!(out["sandbox"]["denied"], false, "{runner}: {out}");
        let after = std::fs::metadata(&victim).unwrap();
        assert_eq!(
            (after.mode(), after.mtime(), after.atime()),
            (before.mode(), before.mtime(), before.atime()),
            "{runner}"
        );
        assert_eq!(std::fs::metadata(&hook).unwrap().mode() & 0o777, 0o644);
        assert_eq!(std::fs::metadata(&db).unwrap().mode(), db_mode);
        let tool = std::fs::metadata(ws.file("src/tool")).unwrap();
        assert_eq!((tool.mode() & 0o777, tool.mtime()), (0o755, 2000));
        // The record is intact: the next run writes to it.
        let next = confined_python(ws.path(), runner, &[], &[], "print('next')");
        assert_eq!(next["stdout"], "next\n", "{runner}: {next}");
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
}

/// A command cannot leave a set-id file behind (a setuid-root copy of
/// `/bin/sh` in the workspace would give root, after the run, to whoever
/// reaches it), under either runner and, under bubblewrap, in a sandbox of
/// its own too (a command handed a credential gets one): neither `chmod`
/// nor creating a file with set-id bits works, while an ordinary `chmod`
/// does.
#[test]
fn a_command_leaves_no_set_id_file_behind_under_either_runner() {
    need_tools();
    let tries = [
        ("copy", "import shutil; shutil.copy('/bin/sh', 'src/sh')"),
        // The control: an ordinary mode change on its own file.
        ("chmod plain", "os.chmod('src/sh', 0o755)"),
        ("chmod setuid", "os.chmod('src/sh', 0o4755)"),
        ("chmod setgid", "os.chmod('src/sh', 0o2755)"),
        (
            "create setuid",
            "os.close(os.open('src/new', os.O_CREAT | os.O_WRONLY, 0o4755))",
        ),
    ];
    let program = attempts("", &tries);
    let mut holes = Vec::new();
    for runner in runners() {
        for own in [false, true] {
            if own && runner != "bwrap" {
                continue;
            }
            let ws = workspace();
            std::fs::create_dir(ws.file("src")).unwrap();
            let said = if own {
                in_a_sandbox_of_its_own(ws.path(), &program)
            } else {
                text(
                    &confined_python(ws.path(), &runner, &[], &[], &program),
                    "stdout",
                )
            };
            let case = format!("{runner}{}", if own { " (own sandbox)" } else { "" });
            assert_done(&said, "copy");
            assert_done(&said, "chmod plain");
            for file in ["src/sh", "src/new"] {
                let Ok(meta) = std::fs::metadata(ws.file(file)) else {
                    continue;
                };
                if meta.mode() & 0o6000 != 0 {
                    holes.push(format!(
                        "{case}: {file} has mode {:o}: {said}",
                        meta.mode() & 0o7777
                    ));
                }
            }
        }
    }
    assert!(holes.is_empty(), "{}", holes.join("\n"));
}

/// Runs `program` with python3 under bubblewrap in a sandbox of the
/// command's own (it is handed a credential); its stdout.
fn in_a_sandbox_of_its_own(ws: &std::path::Path, program: &str) -> String {
    let script = format!(
        "local r, e = sluice.bash{{script = {}, interpreter = 'python3', env = {{T = sluice.credential('probe')}}}}\n\
         print(sluice.json.encode(r or e))",
        lua_str(program)
    );
    let run = run_lua_env(
        ws,
        &script,
        &["--sandbox", "bwrap", "--approve", "cred:use:probe@command"],
        &[],
        &[("SLUICE_CREDENTIAL_PROBE", "not-a-real-secret-1234")],
    )
    .ok();
    let out: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    text(&out, "stdout")
}

/// `bash` commands that start something meant to outlive the call: a new
/// session (`setsid -f`, and a fork that ignores setsid's refusal), a
/// subshell's background child, `nohup`, a process group of its own.
fn daemons(tag: &str) -> String {
    format!(
        "setsid -f sleep {tag}1 >/dev/null 2>&1; \
         python3 -c 'import os, time\nif os.fork() == 0:\n    try: os.setsid()\n    except OSError: pass\n    os.execvp(\"sleep\", [\"sleep\", \"{tag}2\"])' ; \
         (sleep {tag}3 >/dev/null 2>&1 &); \
         nohup sleep {tag}4 >/dev/null 2>&1 & \
         python3 -c 'import os\nif os.fork() == 0:\n    os.setpgid(0, 0)\n    os.execvp(\"sleep\", [\"sleep\", \"{tag}5\"])' ; \
         echo started"
    )
}

fn leftovers(tag: &str, limit: Duration) -> Vec<i32> {
    let start = std::time::Instant::now();
    loop {
        let left: Vec<i32> = (1..=5)
            .flat_map(|n| pids_with_arg(&format!("{tag}{n}")))
            .collect();
        if left.is_empty() || start.elapsed() > limit {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A sleep length nobody else uses, without its last digit (the five
/// daemons add theirs).
fn tag() -> String {
    let s = unique_sleep();
    s[..s.len() - 1].to_string()
}

#[test]
fn nothing_a_foreground_call_starts_outlives_it() {
    need_tools();
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let tag = tag();
        // The run goes on after the call: what is left must be gone while
        // sluice still runs, not only once it exits.
        let script = format!(
            "local r = assert(sluice.bash{{command = {}}})\nprint((r.stdout:gsub('\\n', '')))\nsluice.sleep(4000)\n",
            lua_str(&daemons(&tag))
        );
        let mut child = spawn_lua_with(ws.path(), &script, &["--sandbox", runner], &[]);
        let line = read_stdout_line(&mut child);
        assert!(line.starts_with("started"), "{runner}: {line}");
        let left = leftovers(&tag, Duration::from_secs(3));
        assert!(
            left.is_empty(),
            "{runner}: still running after the call: {left:?}"
        );
        assert!(
            pid_alive(child.id() as i32),
            "{runner}: the run ended early"
        );
        exit_within(&mut child, Duration::from_secs(20));
    }
}

#[test]
fn nothing_outlives_a_timeout_a_killed_job_or_the_end_of_the_run() {
    need_tools();
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let (timed, killed, ended) = (tag(), tag(), tag());
        let script = format!(
            "local _, e = sluice.bash{{command = {timed}, timeoutMs = 1500}}\n\
             print(e.code)\n\
             local j = assert(sluice.bash{{command = {killed}, background = true}})\n\
             sluice.sleep(1500)\n\
             j:kill(); j:wait(10000)\n\
             print(j.status)\n\
             local k = assert(sluice.bash{{command = {ended}, background = true}})\n\
             sluice.sleep(1500)\n\
             print(k.status)\n",
            timed = lua_str(&format!("{}; sleep 60", daemons(&timed))),
            killed = lua_str(&format!("{}; sleep 60", daemons(&killed))),
            ended = lua_str(&format!("{}; sleep 60", daemons(&ended))),
        );
        let run = run_lua_with(ws.path(), &script, &["--sandbox", runner], &[]).ok();
        assert_eq!(
            run.stdout, "timeout\nkilled\nrunning\n",
            "{runner}: {}",
            run.stderr
        );
        for t in [&timed, &killed, &ended] {
            let left = leftovers(t, Duration::from_secs(3));
            assert!(left.is_empty(), "{runner}: {t}: still running: {left:?}");
        }
    }
}

#[test]
fn setsid_is_refused_under_landlock_and_ordinary_commands_still_run() {
    need_tools();
    let ws = workspace();
    let out = confined_python(
        ws.path(),
        "landlock",
        &[],
        &[],
        "import os\ntry:\n    os.setsid()\n    print('new session')\nexcept OSError as e:\n    print('refused', e.errno)\nprint(os.getsid(0) == os.getpid())",
    );
    assert_eq!(out["stdout"], "refused 1\nTrue\n", "{out}");
}

/// A Unix socket listening at `path`, answering each connection with "hi"
/// from a thread; counts the connections it got.
struct Service {
    path: PathBuf,
    got: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Service {
    fn at(path: PathBuf) -> Service {
        let listener = UnixListener::bind(&path).unwrap();
        let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                use std::io::Write;
                if let Ok(mut c) = conn {
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = c.write_all(b"hi");
                }
            }
        });
        Service { path, got }
    }

    fn connections(&self) -> usize {
        self.got.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn connect_program(path: &str) -> String {
    format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(5)\ntry:\n    s.connect({path:?})\n    print('got', s.recv(2).decode())\nexcept OSError as e:\n    print('refused', e.errno)\n"
    )
}

#[test]
fn a_socket_inside_the_workspace_connects_and_an_abstract_one_does_not() {
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let control = Service::at(ws.file("control.sock"));
        let out = confined_python(
            ws.path(),
            runner,
            &[],
            &[],
            &connect_program(control.path.to_str().unwrap()),
        );
        assert_eq!(out["stdout"], "got hi\n", "{runner}: {out}");
        assert_eq!(control.connections(), 1);
        // An abstract socket outside: closed with the network.
        let name = format!("sluice-escape-{}-{runner}", std::process::id());
        let listener = std::os::unix::net::UnixListener::bind_addr(
            &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
                name.as_bytes(),
            )
            .unwrap(),
        )
        .unwrap();
        listener.set_nonblocking(true).unwrap();
        let out = confined_python(
            ws.path(),
            runner,
            &[],
            &[],
            &connect_program(&format!("\0{name}")),
        );
        assert!(
            text(&out, "stdout").starts_with("refused"),
            "{runner}: {out}"
        );
        assert!(
            listener.accept().is_err(),
            "{runner}: the abstract socket was reached"
        );
    }
}

/// The read rules a narrowing policy gives (what the default policy is to
/// open), with the workspace writable and its `.env` denied.
const NARROW: &str = r#"local p = require("sluice.policy")
return { rules = {
  p.deny "fs:*:${workspace}/.env",
  p.allow "fs:read:/usr/**", p.allow "fs:read:/bin/**", p.allow "fs:read:/lib/**",
  p.allow "fs:read:/lib64/**", p.allow "fs:read:/etc/**",
  p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
  p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
  p.allow "proc:spawn:*",
} }"#;

#[test]
fn a_named_socket_outside_what_the_command_sees_is_unreachable() {
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let dir = outside_tmp(&ws, "outside");
        let service = Service::at(dir.join("service.sock"));
        let control = Service::at(ws.file("control.sock"));
        let narrow = policy(&ws, "narrow.lua", NARROW);
        let out = confined_python(
            ws.path(),
            runner,
            &["--policy", &narrow],
            &[],
            &connect_program(service.path.to_str().unwrap()),
        );
        assert!(
            text(&out, "stdout").starts_with("refused"),
            "{runner}: {out}"
        );
        assert_eq!(
            service.connections(),
            0,
            "{runner}: the service was reached"
        );
        let out = confined_python(
            ws.path(),
            runner,
            &["--policy", &narrow],
            &[],
            &connect_program(control.path.to_str().unwrap()),
        );
        assert_eq!(out["stdout"], "got hi\n", "{runner}: {out}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn files_outside_the_readable_trees_and_a_denied_env_file_cannot_be_read() {
    for runner in runners() {
        let runner = runner.as_str();
        let ws = workspace();
        let dir = outside_tmp(&ws, "outside");
        std::fs::write(dir.join("secret"), "outside-secret").unwrap();
        std::fs::write(ws.file(".env"), "TOKEN=env-secret").unwrap();
        std::fs::write(ws.file("README"), "readme").unwrap();
        let narrow = policy(&ws, "narrow.lua", NARROW);
        let setup = format!("o = {:?}", dir.join("secret").to_str().unwrap());
        let tries = [
            ("outside", "print(open(o).read())"),
            ("env", "print(repr(open('.env').read()))"),
            ("readme", "open('README').read()"),
        ];
        let out = confined_python(
            ws.path(),
            runner,
            &["--policy", &narrow],
            &[],
            &attempts(&setup, &tries),
        );
        let said = text(&out, "stdout");
        assert_refused(&said, "outside");
        // bwrap masks the denied file with an empty one; landlock never
        // grants it.
        match runner {
            "bwrap" => assert!(said.contains("''\nenv done\n"), "{runner}: {said}"),
            _ => assert_refused(&said, "env"),
        }
        assert_done(&said, "readme");
        assert!(!said.contains("secret"), "{runner}: {said}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
