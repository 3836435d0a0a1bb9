//! End-to-end executor tests with real processes via /bin/sh. Grace is short
//! (300 ms) so each test stays well under a few seconds.

use super::*;
use crate::error::ErrorCode;
use std::os::unix::fs::PermissionsExt;
use std::time::Instant;

const GRACE: Duration = Duration::from_millis(300);

fn limits(dir: &Path) -> Limits {
    let mut l = Limits::new(dir);
    l.grace = GRACE;
    l.default_timeout = Duration::from_secs(10);
    l
}

fn ambient() -> Vec<(OsString, OsString)> {
    vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("SECRET_TOKEN".into(), "hunter2".into()),
        ("SLUICE_RUN_ID".into(), "stale-run".into()),
        ("SLUICE_STALE".into(), "stale".into()),
    ]
}

async fn go(req: Request) -> Outcome {
    let dir = std::env::temp_dir();
    let spec = resolve_with_ambient(req, &limits(&dir), ambient()).expect("resolve");
    run(spec).await
}

fn text(c: &Captured) -> String {
    String::from_utf8(c.complete_bytes().expect("complete").to_vec()).unwrap()
}

/// Alive means present and not a zombie (PID 1 may not reap orphans here).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            rest.split_whitespace().next() != Some("Z")
        }
        Err(_) => false,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn exit_codes_and_clean_success() {
    let ok = go(Request::shell("echo hi")).await;
    assert!(ok.success());
    assert_eq!(text(&ok.stdout), "hi\n");
    assert_eq!(ok.signal, None);

    let three = go(Request::shell("exit 3")).await;
    assert_eq!(three.exit_code, Some(3));
    assert!(!three.success() && !three.timed_out && !three.aborted);

    let argv = go(Request::argv(["/bin/sh", "-c", "exit 5"])).await;
    assert_eq!(argv.exit_code, Some(5));
}

#[tokio::test(flavor = "current_thread")]
async fn killed_by_signal_reports_the_signal() {
    let out = go(Request::shell("kill -KILL $$")).await;
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    assert!(!out.timed_out && !out.aborted);
}

#[tokio::test(flavor = "current_thread")]
async fn timeout_kills_and_reports_timed_out() {
    let mut req = Request::shell("sleep 30");
    req.timeout = Some(Duration::from_millis(200));
    let t0 = Instant::now();
    let out = go(req).await;
    assert!(out.timed_out && !out.aborted);
    assert_eq!(out.timeout, Duration::from_millis(200));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(out.signal.is_some() || out.exit_code.is_some());
}

#[tokio::test(flavor = "current_thread")]
async fn term_trapping_script_exiting_zero_still_timed_out() {
    let mut req = Request::shell("trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done");
    req.timeout = Some(Duration::from_millis(500));
    let out = go(req).await;
    assert!(out.timed_out);
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.success());
}

#[tokio::test(flavor = "current_thread")]
async fn term_ignoring_command_is_killed_after_grace() {
    let mut req = Request::shell("trap '' TERM; while :; do sleep 0.05; done");
    req.timeout = Some(Duration::from_millis(500));
    let t0 = Instant::now();
    let out = go(req).await;
    assert!(out.timed_out);
    assert_eq!(out.signal.as_deref(), Some("SIGKILL"));
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(750) && el < Duration::from_secs(2),
        "{el:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_tap_sees_both_streams_as_they_arrive_and_the_capture_is_unchanged() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = seen.clone();
    let mut req = Request::shell("echo one; sleep 0.2; echo two >&2; echo three");
    req.tap = Some(Tap(Arc::new(move |b: &[u8]| {
        sink.lock().unwrap().extend_from_slice(b)
    })));
    let out = go(req).await;
    assert_eq!(text(&out.stdout), "one\nthree\n");
    assert_eq!(text(&out.stderr), "two\n");
    let seen = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
    assert_eq!(
        seen, "one\ntwo\nthree\n",
        "in the order the command wrote them"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn abort_kills_and_is_exclusive_with_timeout() {
    let (handle, signal) = abort_pair();
    let mut req = Request::shell("sleep 30");
    req.abort = Some(signal);
    req.timeout = Some(Duration::from_secs(5));
    let task = tokio::spawn(go(req));
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.abort();
    let out = task.await.unwrap();
    assert!(out.aborted && !out.timed_out);

    // Already aborted: nothing is launched.
    let (handle, signal) = abort_pair();
    handle.abort();
    let mut req = Request::shell("echo never");
    req.abort = Some(signal);
    let out = go(req).await;
    assert!(out.aborted && out.pid.is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn grandchild_that_traps_term_dies_after_timeout() {
    // The grandchild traps TERM and keeps running; the parent exits at once
    // on TERM. The grace timer must keep running and KILL the grandchild.
    // The parent waits until the grandchild has installed its trap, so the
    // test does not depend on scheduling.
    let dir = tempfile::tempdir().unwrap();
    let mut req = Request::shell(
        "sh -c 'trap \"\" TERM; echo $$ > ready; exec sleep 30' & \
         while [ ! -s ready ]; do sleep 0.01; done; sleep 30",
    );
    req.cwd = Some(dir.path().to_path_buf());
    req.timeout = Some(Duration::from_millis(500));
    let out = go(req).await;
    assert!(out.timed_out);
    let pid: i32 = std::fs::read_to_string(dir.path().join("ready"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "grandchild {pid} survived");
}

#[tokio::test(flavor = "current_thread")]
async fn grandchild_outliving_normal_exit_is_killed() {
    let out = go(Request::shell("sleep 30 >/dev/null 2>&1 & echo $!")).await;
    assert_eq!(out.exit_code, Some(0));
    let pid: i32 = text(&out.stdout).trim().parse().unwrap();
    assert!(!alive(pid), "leftover {pid} survived");
}

#[tokio::test(flavor = "current_thread")]
async fn daemon_holding_pipes_does_not_hang() {
    // setsid puts the daemon outside our group: it cannot be killed by the
    // group signal, and it keeps stdout open. Reading must settle at grace.
    let t0 = Instant::now();
    let out = go(Request::shell(
        // Wait until the daemon really left the group (its session id is its
        // own pid), or the group TERM can reach it before setsid runs.
        "setsid sleep 5 & d=$!; \
         while [ \"$(cut -d' ' -f6 /proc/$d/stat)\" != \"$d\" ]; do sleep 0.01; done; \
         echo $d",
    ))
    .await;
    let el = t0.elapsed();
    assert_eq!(out.exit_code, Some(0));
    assert!(el < GRACE + Duration::from_millis(700), "{el:?}");
    assert!(
        out.stdout.cut_short,
        "reading should have been cut at grace"
    );
    let pid: i32 = String::from_utf8_lossy(&out.stdout.head)
        .trim()
        .parse()
        .unwrap();
    // Tidy up the escaped daemon (not the executor's job: it left the group).
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[tokio::test(flavor = "current_thread")]
async fn stdin_closed_unless_given() {
    let t0 = Instant::now();
    let out = go(Request::shell("cat; echo done")).await;
    assert_eq!(text(&out.stdout), "done\n");
    assert!(t0.elapsed() < Duration::from_secs(2));

    let mut req = Request::shell("cat");
    req.stdin = Some(b"payload\nline2".to_vec());
    let out = go(req).await;
    assert_eq!(text(&out.stdout), "payload\nline2");
}

#[tokio::test(flavor = "current_thread")]
async fn interleaved_streams_are_separate() {
    let out = go(Request::shell(
        "for i in 1 2 3; do echo out$i; echo err$i >&2; done",
    ))
    .await;
    assert_eq!(text(&out.stdout), "out1\nout2\nout3\n");
    assert_eq!(text(&out.stderr), "err1\nerr2\nerr3\n");
}

#[tokio::test(flavor = "current_thread")]
async fn large_output_is_bounded_and_spilled() {
    let parent = tempfile::tempdir().unwrap();
    let spill = Arc::new(SpillDir::create_in(parent.path(), "run-1").unwrap());
    let total: u64 = 50_000_000;
    let mut req = Request::shell(format!(
        "head -c {total} /dev/zero | tr '\\0' 'a'; printf END; echo small >&2"
    ));
    req.output_budget = Some(64 * 1024);
    req.spill = Some(spill.clone());
    let out = go(req).await;
    assert_eq!(out.exit_code, Some(0));
    let s = &out.stdout;
    assert_eq!(s.total_bytes, total + 3);
    assert!(s.head.len() + s.tail.len() <= 64 * 1024);
    assert_eq!(
        s.dropped_bytes,
        s.total_bytes - (s.head.len() + s.tail.len()) as u64
    );
    assert!(s.tail.ends_with(b"END"));
    let sp = s.spill.as_ref().expect("spilled");
    assert!(sp.complete);
    assert_eq!(sp.bytes, total + 3);
    let meta = std::fs::metadata(&sp.path).unwrap();
    assert_eq!(meta.len(), total + 3);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(sp.path.parent().unwrap(), spill.path());
    let dmode = std::fs::metadata(spill.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dmode & 0o777, 0o700);
    // stderr stays small and in memory.
    assert_eq!(text(&out.stderr), "small\n");
    assert!(out.stderr.spill.is_none());

    let dir = spill.path().to_path_buf();
    drop(out);
    drop(spill);
    assert!(!dir.exists(), "spill folder not removed on drop");
}

#[tokio::test(flavor = "current_thread")]
async fn environment_is_scrubbed_declared_and_managed() {
    let mut req = Request::shell("env");
    req.env.insert("DECLARED".into(), "yes".into());
    req.env
        .insert("SLUICE_RUN_ID".into(), "caller-override".into());
    req.managed = Managed {
        run_id: Some("run-42".into()),
        call_seq: Some(3),
        workspace: Some(PathBuf::from("/ws")),
    };
    let out = go(req).await;
    let env = text(&out.stdout);
    let lines: Vec<&str> = env.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(!env.contains("SECRET_TOKEN"), "{env}");
    assert!(!env.contains("hunter2"), "{env}");
    assert!(!env.contains("SLUICE_STALE"), "{env}");
    assert!(lines.contains(&"DECLARED=yes"), "{env}");
    assert!(lines.contains(&"SLUICE_RUN_ID=run-42"), "{env}");
    assert!(lines.contains(&"SLUICE_CALL_SEQ=3"), "{env}");
    assert!(lines.contains(&"SLUICE_WORKSPACE=/ws"), "{env}");
    assert!(
        !env.contains("stale-run") && !env.contains("caller-override"),
        "{env}"
    );
}

#[test]
fn invalid_env_name_is_invalid_input_naming_the_field() {
    let mut req = Request::shell("true");
    req.env.insert("BAD-NAME".into(), "x".into());
    let err = resolve_with_ambient(req, &limits(Path::new("/")), ambient()).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    assert_eq!(err.details["field"], "env.BAD-NAME");
}

#[test]
fn resolve_fills_and_caps() {
    let mut l = limits(Path::new("/base"));
    l.max_timeout = Duration::from_secs(60);
    l.max_output_bytes = 1000;
    let mut req = Request::shell("true");
    req.timeout = Some(Duration::from_secs(3600));
    req.output_budget = Some(1 << 30);
    req.cwd = Some("sub".into());
    let spec = resolve_with_ambient(req, &l, ambient()).unwrap();
    assert_eq!(spec.timeout, Duration::from_secs(60));
    assert_eq!(spec.stdout_budget, 1000);
    assert_eq!(spec.stderr_budget, l.default_output_bytes);
    assert_eq!(spec.cwd, PathBuf::from("/base/sub"));
    assert_eq!(spec.argv, ["/bin/sh", "-c", "true"].map(OsString::from));

    let spec = resolve_with_ambient(Request::shell("true"), &l, ambient()).unwrap();
    assert_eq!(spec.timeout, Duration::from_secs(10));

    let mut zero = Request::shell("true");
    zero.timeout = Some(Duration::ZERO);
    let err = resolve_with_ambient(zero, &l, ambient()).unwrap_err();
    assert_eq!(err.details["field"], "timeout");

    let err = resolve_with_ambient(Request::argv(Vec::<String>::new()), &l, ambient()).unwrap_err();
    assert_eq!(err.details["field"], "argv");
}

#[tokio::test(flavor = "current_thread")]
async fn missing_program_and_cwd_are_spawn_failures() {
    let out = go(Request::argv(["/definitely/not/a/program"])).await;
    let f = out.spawn_failure.expect("failure");
    assert_eq!(f.kind, SpawnFailureKind::ProgramNotFound);
    assert!(f.message.contains("/definitely/not/a/program"));
    assert!(out.exit_code.is_none() && out.pid.is_none());

    let mut req = Request::shell("true");
    req.cwd = Some("/definitely/not/a/dir".into());
    let out = go(req).await;
    assert_eq!(
        out.spawn_failure.unwrap().kind,
        SpawnFailureKind::CwdNotFound
    );

    let file = tempfile::NamedTempFile::new().unwrap();
    let mut req = Request::shell("true");
    req.cwd = Some(file.path().to_path_buf());
    let out = go(req).await;
    assert_eq!(
        out.spawn_failure.unwrap().kind,
        SpawnFailureKind::CwdNotDirectory
    );
}

#[tokio::test(flavor = "current_thread")]
async fn wrap_prefix_and_refusal() {
    let mut req = Request::argv(["echo", "wrapped"]);
    req.wrap = Some(Arc::new(Prefix(vec!["env".into()])));
    let out = go(req).await;
    assert_eq!(text(&out.stdout), "wrapped\n");

    #[derive(Debug)]
    struct Refuse;
    impl Wrap for Refuse {
        fn wrap(&self, _: Vec<OsString>, _: &Path) -> Result<Vec<OsString>, String> {
            Err("sandbox unavailable".into())
        }
    }
    let mut req = Request::shell("true");
    req.wrap = Some(Arc::new(Refuse));
    let out = go(req).await;
    let f = out.spawn_failure.unwrap();
    assert_eq!(f.kind, SpawnFailureKind::Wrap);
    assert_eq!(f.message, "sandbox unavailable");
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_run_future_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let req = Request::shell(format!("echo $$ > {}; exec sleep 30", pidfile.display()));
    let r = tokio::time::timeout(Duration::from_millis(300), go(req)).await;
    assert!(r.is_err(), "run should still be going");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let t0 = Instant::now();
    while alive(pid) && t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(pid), "command {pid} survived a dropped run");
}
