//! The landlock runner on real processes: real landlock, real seccomp, the
//! real supervisor, real sockets. Each attack has a control that must still
//! work.

use super::*;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use tempfile::TempDir;

fn profile(mode: Mode, writable: &[&Path], network: bool, tmp: &Path) -> Profile {
    Profile {
        mode,
        writable: writable.iter().map(|p| p.to_path_buf()).collect(),
        read_only: Vec::new(),
        readable: vec![PathBuf::from("/")],
        links: Vec::new(),
        hidden: Vec::new(),
        hide_globs: Vec::new(),
        env: Vec::new(),
        network,
        tmp: tmp.to_path_buf(),
        partial: Vec::new(),
        limits: Default::default(),
    }
}

/// Runs `program args` confined by `profile`, supervised as sluice does.
fn run_in(profile: &Profile, program: &str, args: &[&str]) -> Output {
    let (prepared, _, _) = prepare(profile).expect("landlock should work on this kernel");
    run_wrapped(
        &LandlockWrap::new(prepared, profile.tmp.clone(), Vec::new()),
        program,
        args,
    )
}

/// Launches through the wrapper's own hooks, as the executor does.
fn run_wrapped(wrap: &LandlockWrap, program: &str, args: &[&str]) -> Output {
    let launch = wrap.launch().expect("launch");
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(step) = launch.pre_exec {
        // SAFETY: the step makes only raw syscalls.
        unsafe { command.pre_exec(move || step()) };
    }
    let child = command.spawn().expect("spawn");
    drop(command);
    let guard = launch
        .started
        .map(|started| started(child.id()).expect("the supervisor starts"));
    let out = child.wait_with_output().expect("wait");
    drop(guard);
    out
}

fn sh(profile: &Profile, script: &str) -> Output {
    run_in(profile, "/bin/sh", &["-c", script])
}

fn python(profile: &Profile, program: &str) -> Output {
    run_in(profile, PYTHON, &["-c", program])
}

/// The system's own Python (the one on PATH may live under $HOME, which a
/// narrow profile does not open).
const PYTHON: &str = "/usr/bin/python3";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A workspace, a folder outside it (and outside /tmp, where the
/// workspace lives) and a private temp folder.
struct Dirs {
    work: TempDir,
    outside: TempDir,
    tmp: TempDir,
}

fn dirs() -> Dirs {
    let new = || tempfile::tempdir().unwrap();
    std::fs::create_dir_all("/var/tmp/sluice-tests").unwrap();
    Dirs {
        work: new(),
        outside: tempfile::tempdir_in("/var/tmp/sluice-tests").unwrap(),
        tmp: new(),
    }
}

fn workspace(d: &Dirs, network: bool) -> Profile {
    let mut p = profile(
        Mode::WorkspaceWrite,
        &[&canon(d.work.path())],
        network,
        &canon(d.tmp.path()),
    );
    p.readable = vec![PathBuf::from("/")];
    p
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

/// The system trees programs need, canonical: what the default policy opens.
fn system_trees() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["/usr", "/bin", "/lib", "/lib64", "/etc"]
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    outermost(out)
}

/// The workspace profile with only the system trees readable.
fn narrow(d: &Dirs) -> Profile {
    let mut p = workspace(d, false);
    p.readable = system_trees();
    p
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn probe_reports_an_abi() {
    let abi = probe().expect("landlock and seccomp should be available");
    assert!(abi >= 1);
}

#[test]
fn writes_inside_the_writable_root_succeed() {
    let d = dirs();
    let file = d.work.path().join("made");
    let out = sh(
        &workspace(&d, false),
        &format!("echo hi > {}", file.display()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(file).unwrap(), "hi\n");
}

#[test]
fn writes_outside_are_denied() {
    let d = dirs();
    let file = d.outside.path().join("made");
    let out = sh(
        &workspace(&d, false),
        &format!("echo hi > {}", file.display()),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!file.exists());
}

#[test]
fn read_only_mode_writes_only_the_temp_folder() {
    let d = dirs();
    let p = profile(Mode::ReadOnly, &[], false, d.tmp.path());
    let script = format!(
        "echo a > {}/t && echo b > {}/w",
        d.tmp.path().display(),
        d.work.path().display()
    );
    let out = sh(&p, &script);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(d.tmp.path().join("t").exists());
    assert!(!d.work.path().join("w").exists());
}

#[test]
fn temp_folder_is_writable() {
    let d = dirs();
    let script = format!(
        "mkdir {0}/sub && echo x > {0}/sub/f",
        d.tmp.path().display()
    );
    let out = sh(&workspace(&d, false), &script);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn usual_devices_work_other_dev_paths_do_not() {
    let d = dirs();
    for p in [workspace(&d, false), narrow(&d)] {
        let out = sh(
            &p,
            "echo x > /dev/null && head -c1 /dev/zero >/dev/null && head -c1 /dev/urandom >/dev/null",
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let out = sh(&p, "echo x > /dev/shm/sluice-landlock-test");
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn stdout_and_stderr_reopen_through_dev() {
    let d = dirs();
    for p in [workspace(&d, false), narrow(&d)] {
        let out = sh(&p, "echo out > /dev/stdout; echo err > /dev/stderr");
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), "out\n");
    }
}

#[test]
fn reads_anywhere_work_when_everything_is_readable() {
    let d = dirs();
    std::fs::write(d.outside.path().join("f"), "outside").unwrap();
    let out = sh(
        &workspace(&d, false),
        &format!("cat {}/f", d.outside.path().display()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "outside");
}

#[test]
fn reads_follow_the_readable_trees() {
    let d = dirs();
    let secret = d.outside.path().join("secret");
    std::fs::write(&secret, "outside").unwrap();
    std::fs::write(d.work.path().join("mine"), "mine").unwrap();
    let p = narrow(&d);
    // Attack: a file and a folder outside every readable tree.
    let out = sh(&p, &format!("cat {}", secret.display()));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("outside"));
    let out = sh(&p, &format!("ls {}", d.outside.path().display()));
    assert!(!out.status.success() && !stdout(&out).contains("secret"));
    // Control: programs run from the system trees, read /etc, the
    // workspace, temp storage, their own /proc.
    let script = format!(
        "cat /etc/hostname >/dev/null && cat {}/mine && ls {} >/dev/null && echo t > $T/t && cat $T/t \
         && cat /proc/self/status >/dev/null && ls /proc/self/fd >/dev/null",
        d.work.path().display(),
        d.work.path().display(),
    );
    let out = sh(
        &p,
        &format!("T={}; {script}", canon(d.tmp.path()).display()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "minet\n");
    let out = python(&p, "import json, os; print(os.cpu_count() > 0)");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn hidden_paths_cannot_be_read_or_written_and_what_is_around_them_can() {
    let d = dirs();
    let w = canon(d.work.path());
    std::fs::create_dir_all(w.join("app/secrets")).unwrap();
    std::fs::write(w.join(".env"), "TOKEN=top").unwrap();
    std::fs::write(w.join("app/.env"), "TOKEN=deep").unwrap();
    std::fs::write(w.join("app/secrets/key"), "KEY").unwrap();
    std::fs::write(w.join("app/main.py"), "print('hi')").unwrap();
    std::fs::write(w.join("README"), "readme").unwrap();
    std::fs::create_dir(w.join("lib")).unwrap();
    for base in [workspace(&d, false), narrow(&d)] {
        let mut p = base;
        p.hidden = vec![w.join(".env"), w.join("app/.env"), w.join("app/secrets")];
        let (_, enforcement, reasons) = prepare(&p).unwrap();
        assert_eq!(enforcement, Enforcement::Partial);
        assert!(reasons.iter().any(|r| r == LOOKUP_GAP), "{reasons:?}");
        let program = "import sys\n\
            def attempt(what, f):\n\
            \x20   try:\n\
            \x20       f()\n\
            \x20       print(what, 'done')\n\
            \x20   except OSError as e:\n\
            \x20       print(what, 'refused', e.errno)\n\
            attempt('read .env', lambda: open('.env').read())\n\
            attempt('read app/.env', lambda: open('app/.env').read())\n\
            attempt('read key', lambda: open('app/secrets/key').read())\n\
            attempt('write .env', lambda: open('.env', 'a').write('x'))\n\
            attempt('write key', lambda: open('app/secrets/key', 'a').write('x'))\n\
            attempt('new in secrets', lambda: open('app/secrets/new', 'w').write('x'))\n\
            attempt('chmod .env', lambda: __import__('os').chmod('.env', 0o777))\n\
            attempt('read README', lambda: open('README').read())\n\
            attempt('read main', lambda: open('app/main.py').read())\n\
            attempt('write main', lambda: open('app/main.py', 'a').write('#'))\n\
            attempt('new in app', lambda: open('app/new.py', 'w').write('x'))\n\
            attempt('new in lib', lambda: open('lib/new.py', 'w').write('x'))\n\
            attempt('list app', lambda: __import__('os').listdir('app'))\n";
        let script = format!("cd {} && {PYTHON} -c \"$0\"", w.display());
        let out = run_in(&p, "/bin/sh", &["-c", &script, program]);
        let text = stdout(&out);
        for refused in [
            "read .env",
            "read app/.env",
            "read key",
            "write .env",
            "write key",
            "new in secrets",
            "chmod .env",
            // The price of splitting `app` around its hidden entries.
            "new in app",
        ] {
            assert!(
                text.contains(&format!("{refused} refused")),
                "{text}\n{}",
                stderr(&out)
            );
        }
        for done in [
            "read README",
            "read main",
            "write main",
            "new in lib",
            "list app",
        ] {
            assert!(
                text.contains(&format!("{done} done")),
                "{text}\n{}",
                stderr(&out)
            );
        }
        assert!(!text.contains("TOKEN") && !text.contains("KEY"));
    }
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "TOKEN=top"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("app/secrets/key")).unwrap(),
        "KEY"
    );
    assert_eq!(mode_of(&w.join(".env")), 0o644);
}

#[test]
fn a_hidden_path_inside_a_readable_system_tree_is_refused() {
    let d = dirs();
    let inside = d.outside.path().join("store");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join("credentials"), "secret").unwrap();
    std::fs::write(d.outside.path().join("public"), "public").unwrap();
    let mut p = workspace(&d, false);
    p.hidden = vec![canon(&inside)];
    let out = sh(
        &p,
        &format!(
            "cat {0}/public; cat {0}/store/credentials",
            d.outside.path().display()
        ),
    );
    assert_eq!(stdout(&out), "public");
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn symlink_out_of_the_root_does_not_open_a_write() {
    let d = dirs();
    let link = d.work.path().join("escape");
    std::os::unix::fs::symlink(d.outside.path(), &link).unwrap();
    let out = sh(
        &workspace(&d, false),
        &format!("echo x > {}/f", link.display()),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!d.outside.path().join("f").exists());
}

#[test]
fn closed_network_refuses_inet_sockets_but_not_unix_ones() {
    let d = dirs();
    let p = workspace(&d, false);
    let inet = "import socket; socket.socket(socket.AF_INET)";
    let out = python(&p, inet);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
    let unix = "import socket; socket.socket(socket.AF_UNIX); socket.socketpair()";
    let out = python(&p, unix);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn connect_script(listener: &TcpListener) -> String {
    let port = listener.local_addr().unwrap().port();
    format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)")
}

#[test]
fn open_network_connects_to_loopback() {
    let d = dirs();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    for p in [workspace(&d, true), {
        // With named sockets supervised, TCP connects go through the
        // supervisor too, blocking and not.
        let mut p = narrow(&d);
        p.network = true;
        p
    }] {
        let out = python(&p, &connect_script(&listener));
        assert!(out.status.success(), "{}", stderr(&out));
        let port = listener.local_addr().unwrap().port();
        let blocking = format!(
            "import socket; s = socket.socket(); s.connect(('127.0.0.1', {port})); print('ok')"
        );
        let out = python(&p, &blocking);
        assert_eq!(stdout(&out), "ok\n", "{}", stderr(&out));
    }
}

#[test]
fn landlock_alone_refuses_tcp_where_the_abi_can() {
    if landlock_abi().unwrap() < 4 {
        return; // TCP rights came with ABI 4; seccomp still closes it.
    }
    let d = dirs();
    let (prepared, _, _) = prepare(&workspace(&d, false)).unwrap();
    let ruleset_only = Prepared {
        filter: assemble(&[]),
        supervised: false,
        ..prepared
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let script = connect_script(&listener);
    let out = run_wrapped(
        &LandlockWrap::new(ruleset_only, d.tmp.path().to_path_buf(), Vec::new()),
        PYTHON,
        &["-c", &script],
    );
    assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
}

#[test]
fn danger_full_access_writes_anywhere_but_network_stays_closed() {
    let d = dirs();
    let p = profile(Mode::DangerFullAccess, &[], false, d.tmp.path());
    let file = d.outside.path().join("made");
    let out = sh(&p, &format!("echo hi > {}", file.display()));
    assert!(out.status.success(), "{}", stderr(&out));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let out = python(&p, &connect_script(&listener));
    assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
}

#[test]
fn one_prepared_confines_many_children() {
    let d = dirs();
    let (prepared, _, _) = prepare(&workspace(&d, false)).unwrap();
    let wrap = LandlockWrap::new(prepared, d.tmp.path().to_path_buf(), Vec::new());
    let before = mode_of(d.outside.path());
    for _ in 0..3 {
        let target = d.outside.path().join("f");
        let script = format!(
            "echo x > {0}; chmod 777 {1}",
            target.display(),
            d.outside.path().display()
        );
        let out = run_wrapped(&wrap, "/bin/sh", &["-c", &script]);
        assert!(!out.status.success());
        assert!(!target.exists());
        assert_eq!(mode_of(d.outside.path()), before);
    }
}

#[test]
fn read_only_paths_inside_a_writable_root_stay_read_only_and_the_rest_writable() {
    let d = dirs();
    let root = canon(d.work.path());
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("top.txt"), "").unwrap();
    std::fs::write(root.join(".git/HEAD"), "").unwrap();
    let mut p = workspace(&d, false);
    p.read_only = vec![root.join(".git/hooks"), root.join(".sluice")];
    let (_, enforcement, reasons) = prepare(&p).unwrap();
    // Only /proc's gap: read-only paths cost nothing more.
    assert_eq!(
        (enforcement, reasons),
        (Enforcement::Partial, vec![PROC_GAP.to_string()])
    );
    let script = format!(
        "cd {}; echo a > src/a; echo b > top.txt; echo c > .git/HEAD; echo h > .git/hooks/pre-commit; \
         mkdir .sluice; echo n > new.txt; true",
        root.display()
    );
    let out = sh(&p, &script);
    assert_eq!(std::fs::read_to_string(root.join("src/a")).unwrap(), "a\n");
    assert_eq!(
        std::fs::read_to_string(root.join("top.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git/HEAD")).unwrap(),
        "c\n"
    );
    assert!(
        !root.join(".git/hooks/pre-commit").exists(),
        "{}",
        stderr(&out)
    );
    assert!(!root.join(".sluice").exists());
    // The price: nothing new at the top of the split tree.
    assert!(!root.join("new.txt").exists());
}

#[test]
fn read_only_outside_writable_roots_adds_no_gap() {
    let d = dirs();
    let mut p = workspace(&d, false);
    p.read_only = vec![d.outside.path().join("x")];
    assert_eq!(prepare(&p).unwrap().2, vec![PROC_GAP.to_string()]);
}

#[test]
fn the_kernel_trees_stay_out_of_reach_even_with_every_file_granted() {
    let d = dirs();
    let everything = profile(Mode::DangerFullAccess, &[], true, d.tmp.path());
    let (_, enforcement, reasons) = prepare(&everything).unwrap();
    assert_eq!(
        (enforcement, reasons),
        (Enforcement::Partial, vec![PROC_GAP.to_string()])
    );
    // Writing back what core_pattern holds changes nothing, if it is let
    // through; a root without capabilities may, outside the sandbox.
    let tries = [
        (
            "core_pattern",
            "v = open('/proc/sys/kernel/core_pattern').read(); open('/proc/sys/kernel/core_pattern', 'w').write(v)",
        ),
        ("console", "os.close(os.open('/dev/console', os.O_RDONLY | os.O_NONBLOCK))"),
        ("tty0", "os.close(os.open('/dev/tty0', os.O_RDONLY | os.O_NONBLOCK))"),
        ("loop-control", "os.close(os.open('/dev/loop-control', os.O_RDONLY))"),
        ("mkdir in dev", "os.mkdir('/dev/sluice-test')"),
        ("null", "open('/dev/null', 'w').write('x')"),
        ("own proc", "open('/proc/self/status').read()"),
        ("list dev", "os.listdir('/dev')"),
    ];
    for p in [everything.clone(), workspace(&d, false), narrow(&d)] {
        let out = python(&p, &attempts("", &tries));
        let text = stdout(&out);
        for (label, _) in &tries[..5] {
            assert_refused(&text, label, libc::EACCES);
        }
        assert_done(&text, "null");
        assert_done(&text, "own proc");
    }
    let out = python(&everything, &attempts("", &tries));
    assert_done(&stdout(&out), "list dev");
    assert!(!Path::new("/dev/sluice-test").exists());
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

fn assert_refused(text: &str, label: &str, errno: i32) {
    assert!(
        text.contains(&format!("{label} refused {errno}\n")),
        "{label}: {text}"
    );
}

fn assert_done(text: &str, label: &str) {
    assert!(text.contains(&format!("{label} done\n")), "{label}: {text}");
}

#[test]
fn metadata_outside_the_writable_trees_is_refused_and_inside_allowed() {
    let d = dirs();
    let outside = d.outside.path().join("victim");
    std::fs::write(&outside, "x").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&outside).unwrap();
    let inside = canon(d.work.path()).join("mine");
    std::fs::write(&inside, "x").unwrap();
    let setup = format!(
        "o = {:?}\ni = {:?}",
        outside.to_str().unwrap(),
        inside.to_str().unwrap()
    );
    let tries = [
        ("chmod out", "os.chmod(o, 0o777)"),
        ("chown out", "os.chown(o, os.getuid(), os.getgid())"),
        ("utime out", "os.utime(o, (1, 1))"),
        ("touch out", "os.utime(o)"),
        ("xattr out", "os.setxattr(o, 'user.sluice', b'x')"),
        ("rmxattr out", "os.removexattr(o, 'user.sluice')"),
        (
            "fchmod out",
            "fd = os.open(o, os.O_RDONLY); os.fchmod(fd, 0o777)",
        ),
        (
            "futimens out",
            "fd = os.open(o, os.O_RDONLY); os.utime(fd, (2, 2))",
        ),
        (
            "fsetxattr out",
            "fd = os.open(o, os.O_RDONLY); os.setxattr(fd, 'user.sluice', b'x')",
        ),
        (
            "fchown out",
            "fd = os.open(o, os.O_RDONLY); os.fchown(fd, os.getuid(), os.getgid())",
        ),
        (
            "opath out",
            "fd = os.open(o, os.O_PATH); os.chmod('/proc/self/fd/%d' % fd, 0o777)",
        ),
        (
            "dirfd out",
            "fd = os.open(os.path.dirname(o), os.O_PATH); os.chmod('victim', 0o777, dir_fd=fd)",
        ),
        ("chmod in", "os.chmod(i, 0o755)"),
        ("chown in", "os.chown(i, os.getuid(), os.getgid())"),
        ("utime in", "os.utime(i, (1000, 2000))"),
        ("xattr in", "os.setxattr(i, 'user.sluice', b'kept')"),
        (
            "fchmod in",
            "fd = os.open(i, os.O_RDONLY); os.fchmod(fd, 0o700)",
        ),
        ("devnull", "os.chmod('/dev/null', 0o600)"),
    ];
    for (p, readable) in [(workspace(&d, false), true), (narrow(&d), false)] {
        let out = python(&p, &attempts(&setup, &tries));
        let text = stdout(&out);
        for (label, _) in &tries[..12] {
            // Where the file is not readable, the fd forms fail earlier:
            // no fd to start from (O_PATH opens nothing: EBADF).
            let fd_form = ["fchmod", "futimens", "fsetxattr", "fchown"]
                .iter()
                .any(|f| label.starts_with(f));
            let errno = match (readable, fd_form) {
                (false, true) => libc::EACCES,
                _ => libc::EPERM,
            };
            assert_refused(&text, label, errno);
        }
        for label in ["chmod in", "chown in", "utime in", "xattr in", "fchmod in"] {
            assert_done(&text, label);
        }
        assert_refused(&text, "devnull", libc::EPERM);
    }
    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mtime(), before.mtime());
    assert_eq!(after.atime(), before.atime());
    assert_eq!(mode_of(Path::new("/dev/null")), 0o666);
    assert_eq!(mode_of(&inside), 0o700);
    assert_eq!(std::fs::metadata(&inside).unwrap().mtime(), 2000);
}

#[test]
fn read_only_paths_and_split_folders_keep_their_metadata() {
    let d = dirs();
    let w = canon(d.work.path());
    std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(w.join(".sluice")).unwrap();
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::write(
        w.join(".git/hooks/pre-commit.sample"),
        "#!/bin/sh\ntouch PWNED\n",
    )
    .unwrap();
    std::fs::write(w.join(".sluice/audit.db"), "db").unwrap();
    std::fs::write(w.join("src/a"), "a").unwrap();
    let mut p = workspace(&d, false);
    p.read_only = vec![w.join(".git/hooks"), w.join(".sluice")];
    let top = mode_of(&w);
    let setup = format!("os.chdir({:?})", w.to_str().unwrap());
    let tries = [
        (
            "enable hook",
            "os.chmod('.git/hooks/pre-commit.sample', 0o755)",
        ),
        ("lock audit", "os.chmod('.sluice/audit.db', 0)"),
        ("lock store", "os.chmod('.sluice', 0)"),
        ("lock workspace", "os.chmod('.', 0)"),
        ("lock git", "os.chmod('.git', 0)"),
        ("chmod src", "os.chmod('src/a', 0o600)"),
        ("chmod src dir", "os.chmod('src', 0o700)"),
    ];
    let out = python(&p, &attempts(&setup, &tries));
    let text = stdout(&out);
    for (label, _) in &tries[..5] {
        assert_refused(&text, label, libc::EPERM);
    }
    assert_done(&text, "chmod src");
    assert_done(&text, "chmod src dir");
    assert_eq!(mode_of(&w.join(".git/hooks/pre-commit.sample")), 0o644);
    assert_eq!(mode_of(&w.join(".sluice/audit.db")), 0o644);
    assert_eq!(mode_of(&w.join(".sluice")), 0o755);
    assert_eq!(mode_of(&w), top);
}

#[test]
fn symlinks_and_hard_links_do_not_carry_changes_outside() {
    let d = dirs();
    let w = canon(d.work.path());
    let outside = d.outside.path().join("victim");
    std::fs::write(&outside, "x").unwrap();
    std::fs::create_dir(w.join("src")).unwrap();
    std::os::unix::fs::symlink(&outside, w.join("src/link")).unwrap();
    let setup = format!(
        "os.chdir({:?})\no = {:?}",
        w.to_str().unwrap(),
        outside.to_str().unwrap()
    );
    let tries = [
        ("chmod through link", "os.chmod('src/link', 0o777)"),
        ("utime through link", "os.utime('src/link', (5, 5))"),
        (
            "xattr through link",
            "os.setxattr('src/link', 'user.x', b'x')",
        ),
        ("hard link", "os.link(o, 'src/hard')"),
        (
            "lutime link",
            "os.utime('src/link', (5, 5), follow_symlinks=False)",
        ),
        (
            "lchown link",
            "os.chown('src/link', os.getuid(), os.getgid(), follow_symlinks=False)",
        ),
    ];
    let out = python(&workspace(&d, false), &attempts(&setup, &tries));
    let text = stdout(&out);
    for label in [
        "chmod through link",
        "utime through link",
        "xattr through link",
    ] {
        assert_refused(&text, label, libc::EPERM);
    }
    // Landlock refuses a link that would widen access.
    assert_refused(&text, "hard link", libc::EXDEV);
    assert_done(&text, "lutime link");
    assert_done(&text, "lchown link");
    assert_eq!(mode_of(&outside), 0o644);
    assert_ne!(std::fs::metadata(&outside).unwrap().mtime(), 5);
    assert_eq!(
        std::fs::symlink_metadata(w.join("src/link"))
            .unwrap()
            .mtime(),
        5
    );
}

#[test]
fn a_racing_thread_cannot_redirect_a_checked_path() {
    let d = dirs();
    let w = canon(d.work.path());
    let outside = d.outside.path().join("victim");
    std::fs::write(&outside, "x").unwrap();
    std::fs::create_dir(w.join("src")).unwrap();
    std::fs::write(w.join("src/f"), "f").unwrap();
    // One thread flips the bytes of the path buffer chmod reads, another
    // swaps a name between a file inside and a symlink to the outside;
    // the main thread calls chmod on both, again and again.
    let program = format!(
        r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
inside = b{inside:?}
outside = b{outside:?}
size = max(len(inside), len(outside)) + 1
buf = ctypes.create_string_buffer(size)
stop = False
def flip():
    a = inside.ljust(size, b'\0'); b = outside.ljust(size, b'\0')
    while not stop:
        ctypes.memmove(buf, a, size)
        ctypes.memmove(buf, b, size)
def swap():
    os.chdir({src:?})
    while not stop:
        try:
            os.symlink(outside.decode(), 'l.new'); os.replace('l.new', 'l')
            open('f.new', 'w').close(); os.replace('f.new', 'l')
        except OSError:
            pass
threads = [threading.Thread(target=flip), threading.Thread(target=swap)]
for t in threads: t.start()
done = 0
for _ in range(3000):
    if libc.chmod(buf, 0o777) == 0: done += 1
    if libc.chmod(b{link:?}, 0o777) == 0: done += 1
stop = True
for t in threads: t.join()
print('done', done)
"#,
        inside = w.join("src/f").to_str().unwrap(),
        outside = outside.to_str().unwrap(),
        src = w.join("src").to_str().unwrap(),
        link = w.join("src/l").to_str().unwrap(),
    );
    let out = python(&workspace(&d, false), &program);
    assert!(stdout(&out).starts_with("done "), "{}", stderr(&out));
    // Some chmods reached the file inside (the control)...
    assert!(stdout(&out).trim() != "done 0", "{}", stdout(&out));
    // ...and none the file outside.
    assert_eq!(mode_of(&outside), 0o644);
}

#[test]
fn the_command_holds_no_capabilities_and_cannot_leave_its_session_or_user() {
    let d = dirs();
    for p in [workspace(&d, false), narrow(&d)] {
        let out = sh(&p, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status");
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 5, "{text}");
        for line in text.lines() {
            assert!(line.ends_with("0000000000000000"), "{text}");
        }
        let program = attempts(
            "import ctypes, fcntl, struct\nlibc = ctypes.CDLL(None, use_errno=True)\n\
             def check(r):\n    if r < 0:\n        e = ctypes.get_errno()\n        raise OSError(e, os.strerror(e))\n    return r",
            &[
                ("setsid", "os.setsid()"),
                ("unshare", "check(libc.unshare(0x10000000))"),
                ("sid", "assert os.getsid(0) == os.getpid()"),
                ("chattr", "fd = os.open('/etc/hostname', os.O_RDONLY); fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x80))"),
                ("uring", "os.close(check(libc.syscall(425, 8, ctypes.create_string_buffer(120))))"),
                ("fork", "pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0)"),
            ],
        );
        let out = python(&p, &program);
        let text = stdout(&out);
        assert_refused(&text, "setsid", libc::EPERM);
        assert_refused(&text, "unshare", libc::EPERM);
        // The command leads its own session.
        assert_done(&text, "sid");
        assert_refused(&text, "chattr", libc::EPERM);
        assert_refused(&text, "uring", libc::EACCES);
        assert_done(&text, "fork");
    }
}

/// A listening Unix socket at `path` that answers each connection "hi".
fn serve(path: &Path) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(8) {
            use std::io::Write;
            if let Ok(mut c) = conn {
                let _ = c.write_all(b"hi");
            }
        }
    })
}

fn connect_program(path: &Path, blocking: bool) -> String {
    let timeout = if blocking { "" } else { "s.settimeout(5)\n" };
    format!(
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n{timeout}try:\n    s.connect({:?})\n    print('got', s.recv(2).decode())\nexcept OSError as e:\n    print('refused', e.errno)\n",
        path.to_str().unwrap()
    )
}

#[test]
fn named_sockets_connect_only_where_the_command_can_see() {
    let d = dirs();
    let w = canon(d.work.path());
    let service = d.outside.path().join("service.sock");
    let control = w.join("control.sock");
    std::fs::create_dir(w.join("secrets")).unwrap();
    let hidden = w.join("secrets/agent.sock");
    let servers = [serve(&service), serve(&control), serve(&hidden)];
    let mut p = narrow(&d);
    p.hidden = vec![w.join("secrets")];
    for blocking in [true, false] {
        // Attack: a service's socket outside, one in a hidden folder, and
        // the outside one through a symlink in the workspace.
        let link = w.join(format!("link-{blocking}.sock"));
        std::os::unix::fs::symlink(&service, &link).unwrap();
        for target in [&service, &hidden, &link] {
            let out = python(&p, &connect_program(target, blocking));
            assert_eq!(
                stdout(&out),
                format!("refused {}\n", libc::EACCES),
                "{target:?}: {}",
                stderr(&out)
            );
        }
        // Control: the workspace's own socket, absolute and relative.
        let out = python(&p, &connect_program(&control, blocking));
        assert_eq!(stdout(&out), "got hi\n", "{}", stderr(&out));
        let script = format!("cd {} && {PYTHON} -c \"$0\"", w.display());
        let relative = connect_program(Path::new("control.sock"), blocking);
        let out = run_in(&p, "/bin/sh", &["-c", &script, &relative]);
        assert_eq!(stdout(&out), "got hi\n", "{}", stderr(&out));
    }
    // With everything visible, nothing is supervised and the service is
    // reachable (the rule: what the command can see).
    let out = python(&workspace(&d, false), &connect_program(&service, true));
    assert_eq!(stdout(&out), "got hi\n", "{}", stderr(&out));
    drop(servers);
}

#[test]
fn abstract_and_datagram_sockets_are_refused_when_sockets_are_supervised() {
    let d = dirs();
    let name = format!("sluice-test-{}", std::process::id());
    let listener = std::os::unix::net::UnixListener::bind_addr(
        &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            name.as_bytes(),
        )
        .unwrap(),
    )
    .unwrap();
    let program = attempts(
        &format!("import socket\nname = b'\\0' + {:?}.encode()", name),
        &[
            ("abstract", "socket.socket(socket.AF_UNIX).connect(name)"),
            ("dgram", "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)"),
            (
                "dgram pair",
                "socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)",
            ),
            ("stream pair", "socket.socketpair()"),
            (
                "seqpacket",
                "socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)",
            ),
        ],
    );
    let out = python(&narrow(&d), &program);
    let text = stdout(&out);
    assert_refused(&text, "abstract", libc::EPERM);
    assert_refused(&text, "dgram", libc::EACCES);
    assert_refused(&text, "dgram pair", libc::EACCES);
    assert_done(&text, "stream pair");
    assert_done(&text, "seqpacket");
    // Everything visible: datagrams are fine, abstract sockets still
    // closed by landlock's scope.
    let out = python(&workspace(&d, false), &program);
    let text = stdout(&out);
    assert_refused(&text, "abstract", libc::EPERM);
    assert_done(&text, "dgram");
    drop(listener);
}

#[test]
fn a_blocking_connect_waits_without_stalling_other_supervised_calls() {
    let d = dirs();
    let w = canon(d.work.path());
    let full = w.join("full.sock");
    // A listener that never accepts, its backlog filled by the test.
    let (listener, fillers) = full_listener(&full);
    std::fs::write(w.join("f"), "f").unwrap();
    let program = format!(
        r#"
import os, socket, struct, threading, time
s = socket.socket(socket.AF_UNIX)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack('ll', 1, 0))
result = []
def waiter():
    t = time.monotonic()
    try:
        s.connect({full:?})
        result.append('connected')
    except OSError as e:
        result.append('gave up %d after %.1f' % (e.errno, time.monotonic() - t))
th = threading.Thread(target=waiter); th.start()
time.sleep(0.2)
t = time.monotonic()
os.chmod({f:?}, 0o600)
print('chmod took %.2f' % (time.monotonic() - t))
th.join()
print(result[0])
"#,
        full = full.to_str().unwrap(),
        f = w.join("f").to_str().unwrap(),
    );
    let out = python(&narrow(&d), &program);
    let text = stdout(&out);
    let took: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("chmod took "))
        .unwrap_or_else(|| panic!("{text}{}", stderr(&out)))
        .parse()
        .unwrap();
    assert!(took < 0.5, "{text}");
    assert!(
        text.contains(&format!("gave up {}", libc::EAGAIN)),
        "{text}"
    );
    assert_eq!(mode_of(&w.join("f")), 0o600);
    drop((listener, fillers));
}

/// A Unix socket listening at `path` with a backlog of one, filled: a
/// blocking connect to it waits until someone accepts (nobody does).
fn full_listener(path: &Path) -> (OwnedFd, Vec<OwnedFd>) {
    let socket = |flags| {
        // SAFETY: socket() returns a new fd or -1.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | flags, 0) };
        assert!(fd >= 0);
        // SAFETY: a new fd, ours.
        unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
    };
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as u16;
    for (i, b) in path.as_os_str().as_encoded_bytes().iter().enumerate() {
        addr.sun_path[i] = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let listener = socket(0);
    // SAFETY: a live socket and address.
    unsafe {
        assert_eq!(
            libc::bind(
                listener.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len
            ),
            0
        );
        assert_eq!(libc::listen(listener.as_raw_fd(), 0), 0);
    }
    let mut fillers = Vec::new();
    loop {
        let s = socket(libc::SOCK_NONBLOCK);
        // SAFETY: as above.
        let rc = unsafe {
            libc::connect(
                s.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        };
        if rc < 0 {
            break;
        }
        fillers.push(s);
        assert!(fillers.len() < 100, "the backlog never filled");
    }
    (listener, fillers)
}

#[test]
fn supervised_toolchain_work_in_the_workspace_keeps_working() {
    let d = dirs();
    let w = canon(d.work.path());
    let src = w.join("pkg");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::write(src.join("bin/tool"), "#!/bin/sh\necho tool\n").unwrap();
    std::fs::set_permissions(src.join("bin/tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = format!(
        "set -e; cd {w}; tar -cf pkg.tar pkg; mkdir out; tar -xpf pkg.tar -C out; \
         cp -a out/pkg copy; install -m 0750 pkg/bin/tool tool2; touch -d @978307200 tool2; \
         chmod -R go-rwx copy; ./copy/bin/tool; stat -c '%a %Y' tool2 copy/bin/tool",
        w = w.display()
    );
    let out = sh(&narrow(&d), &script);
    assert!(out.status.success(), "{}", stderr(&out));
    let kept = std::fs::metadata(src.join("bin/tool")).unwrap().mtime();
    assert_eq!(stdout(&out), format!("tool\n750 978307200\n700 {kept}\n"));
}

#[test]
fn a_supervisor_stops_promptly_when_dropped() {
    let d = dirs();
    let (prepared, _, _) = prepare(&workspace(&d, false)).unwrap();
    let wrap = LandlockWrap::new(prepared, d.tmp.path().to_path_buf(), Vec::new());
    let launch = wrap.launch().unwrap();
    let mut command = Command::new("/bin/sleep");
    command.arg("30");
    if let Some(step) = launch.pre_exec {
        // SAFETY: the step makes only raw syscalls.
        unsafe { command.pre_exec(move || step()) };
    }
    let mut child = command.spawn().unwrap();
    drop(command);
    let guard = launch.started.unwrap()(child.id()).unwrap();
    let started = std::time::Instant::now();
    drop(guard);
    assert!(started.elapsed() < Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
}

use std::time::Duration;

#[test]
fn an_inet_socket_handed_over_cannot_be_connected_with_the_network_closed() {
    let d = dirs();
    let w = canon(d.work.path());
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let path = w.join("handover.sock");
    // An unconfined helper hands every client a fresh TCP socket.
    let helper = format!(
        "import socket\nl = socket.socket(socket.AF_UNIX)\nl.bind({p:?})\nl.listen()\nprint('ready', flush=True)\n\
         for _ in range(2):\n    c, _ = l.accept()\n    t = socket.socket()\n    socket.send_fds(c, [b'x'], [t.fileno()])\n    c.close()\n",
        p = path.to_str().unwrap()
    );
    let mut server = Killed(
        Command::new(PYTHON)
            .args(["-c", &helper])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready, "ready\n");
    let program = attempts(
        &format!(
            "import socket\nu = socket.socket(socket.AF_UNIX)\nu.connect({p:?})\n_, fds, _, _ = socket.recv_fds(u, 1, 1)\n\
             t = socket.socket(fileno=fds[0])",
            p = path.to_str().unwrap()
        ),
        &[("tcp connect", &format!("t.connect(('127.0.0.1', {port}))"))],
    );
    let out = python(&narrow(&d), &program);
    assert_refused(&stdout(&out), "tcp connect", libc::EACCES);
    // Control: with the network open the same socket connects.
    let mut open = narrow(&d);
    open.network = true;
    let out = python(&open, &program);
    assert_done(&stdout(&out), "tcp connect");
}

/// A helper process killed and reaped when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn no_set_id_file_can_be_made_and_ordinary_modes_can() {
    let d = dirs();
    let w = canon(d.work.path());
    std::fs::create_dir(w.join("src")).unwrap();
    std::fs::write(w.join("src/tool"), "#!/bin/sh\n").unwrap();
    let setup = format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nos.chdir({:?})",
        w.join("src").to_str().unwrap()
    );
    let tries = [
        (
            "open setuid",
            "os.close(os.open('suid', os.O_CREAT | os.O_WRONLY, 0o4755))",
        ),
        (
            "open setgid",
            "os.close(os.open('sgid', os.O_CREAT | os.O_WRONLY, 0o2755))",
        ),
        (
            "tmpfile setuid",
            "os.close(os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755))",
        ),
        ("mknod setuid", "os.mknod('node', 0o104755)"),
        ("chmod setuid", "os.chmod('tool', 0o4755)"),
        ("chmod setgid", "os.chmod('tool', 0o2755)"),
        (
            "openat2",
            "r = libc.syscall(437, -100, b'x', ctypes.create_string_buffer(24), 24)\n    \
             if r < 0: raise OSError(ctypes.get_errno(), 'openat2')",
        ),
        (
            "open plain",
            "os.close(os.open('plain', os.O_CREAT | os.O_WRONLY, 0o755))",
        ),
        (
            "open existing",
            "os.close(os.open('tool', os.O_RDONLY, 0o4755))",
        ),
        ("chmod exec", "os.chmod('tool', 0o755)"),
        (
            "setgid folder",
            "os.mkdir('shared', 0o2775); os.chmod('shared', 0o2770)",
        ),
    ];
    let out = python(&workspace(&d, false), &attempts(&setup, &tries));
    let text = stdout(&out);
    for label in [
        "open setuid",
        "open setgid",
        "tmpfile setuid",
        "mknod setuid",
        "chmod setuid",
        "chmod setgid",
    ] {
        assert_refused(&text, label, libc::EPERM);
    }
    assert_refused(&text, "openat2", libc::ENOSYS);
    for label in ["open plain", "open existing", "chmod exec", "setgid folder"] {
        assert_done(&text, label);
    }
    assert!(!w.join("src/suid").exists() && !w.join("src/sgid").exists());
    assert_eq!(mode_of(&w.join("src/tool")), 0o755);
    assert_eq!(mode_of(&w.join("src/shared")) & 0o2000, 0o2000);
}

#[test]
fn a_neighbour_removed_after_listing_grants_nothing_and_fails_nothing() {
    // The race a busy /tmp gives: split lists a folder holding a hidden
    // path, another process removes one of its entries, then the ruleset
    // opens each entry. The gone entry is skipped; the rest are granted.
    let d = dirs();
    let w = canon(d.work.path());
    std::fs::write(w.join(".env"), "TOKEN=top").unwrap();
    std::fs::write(w.join("gone"), "x").unwrap();
    std::fs::write(w.join("kept"), "kept").unwrap();
    let mut p = workspace(&d, false);
    p.hidden = vec![w.join(".env")];
    let grants = Grants::of(&p).unwrap();
    assert!(grants.read.iter().any(|(g, _)| g == &w.join("gone")));
    std::fs::remove_file(w.join("gone")).unwrap();
    let created = Ruleset::default()
        .handle_access(AccessFs::from_all(NEWEST))
        .unwrap()
        .create()
        .unwrap();
    assert!(add_file_rules(created, &grants).is_ok());
    // A named root that is missing is still an error that says so.
    let created = Ruleset::default()
        .handle_access(AccessFs::from_all(NEWEST))
        .unwrap()
        .create()
        .unwrap();
    let err = add_path(created, &w.join("gone"), AccessFs::ReadFile.into()).unwrap_err();
    assert!(err.contains("it must exist"), "{err}");
}
