//! Background jobs with real processes via /bin/sh: incremental reads, the
//! unread budget and its spill file, settling, kill, the live-job limit,
//! shutdown and drop. Grace is short (300 ms) so each test stays well under
//! a few seconds.

use super::job::{Delta, Job, Jobs, Snapshot, StartError, Status};
use super::{resolve_with_ambient, Limits, Request, SpawnFailureKind, Spec, SpillDir};
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const GRACE: Duration = Duration::from_millis(300);

fn limits() -> Limits {
    let mut l = Limits::new(std::env::temp_dir());
    l.grace = GRACE;
    l
}

fn ambient() -> Vec<(OsString, OsString)> {
    vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())]
}

fn spec(req: Request) -> Spec {
    resolve_with_ambient(req, &limits(), ambient()).expect("resolve")
}

fn start(jobs: &Jobs, command: &str) -> Arc<Job> {
    jobs.start(spec(Request::shell(command)), command.to_string())
        .expect("start")
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

/// Reads until stdout has produced a complete line; returns everything read
/// (stdout, stderr) in order. Fails after two seconds.
async fn read_until_line(job: &Job) -> (String, String) {
    let t0 = Instant::now();
    let (mut out, mut err) = (String::new(), String::new());
    while !out.contains('\n') {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "no line from job {} (got {out:?})",
            job.id
        );
        let d = job.read();
        out.push_str(&d.stdout);
        err.push_str(&d.stderr);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (out, err)
}

fn snap(status: Status, exit_code: Option<i32>, signal: Option<&str>) -> Snapshot {
    Snapshot {
        status,
        exit_code,
        signal: signal.map(String::from),
        sandbox: None,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn incremental_reads_never_repeat_output_and_drain_after_exit() {
    let jobs = Jobs::new(4, 1024);
    let job = start(
        &jobs,
        "for i in 1 2 3 4 5; do echo $i; echo e$i >&2; sleep 0.1; done",
    );
    // The first read that sees output comes while the job still runs.
    let (mut out, mut err) = read_until_line(&job).await;
    assert!(!job.is_done(), "the job should still be running");
    assert!(out.starts_with("1\n"), "{out:?}");
    let mut reads_while_running = 1;
    while !job.is_done() {
        let d = job.read();
        assert!(!d.lossy);
        if !d.stdout.is_empty() {
            reads_while_running += 1;
        }
        out.push_str(&d.stdout);
        err.push_str(&d.stderr);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(
        reads_while_running >= 2,
        "output should arrive over several reads, got {reads_while_running}"
    );
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    // Whatever was left unread when the job ended is still there, once.
    let rest = job.read();
    out.push_str(&rest.stdout);
    err.push_str(&rest.stderr);
    assert_eq!(out, "1\n2\n3\n4\n5\n");
    assert_eq!(err, "e1\ne2\ne3\ne4\ne5\n");
    assert_eq!(job.read(), Delta::default());
    assert_eq!(job.read(), Delta::default());
}

#[tokio::test(flavor = "current_thread")]
async fn unread_output_after_exit_is_returned_once_then_empty() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, "echo one; echo two >&2; exit 0");
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    assert_eq!(
        job.read(),
        Delta {
            stdout: "one\n".into(),
            stderr: "two\n".into(),
            ..Delta::default()
        }
    );
    assert_eq!(job.read(), Delta::default());
}

#[tokio::test(flavor = "current_thread")]
async fn a_utf8_character_split_across_writes_is_never_split_across_reads() {
    let jobs = Jobs::new(4, 1024);
    // 'a' and the first byte of 'é' (C3 A9) in one write, the rest later.
    let job = start(&jobs, r"printf 'a\303'; sleep 0.3; printf '\251b'");
    let mut reads = Vec::new();
    let t0 = Instant::now();
    while !job.is_done() {
        assert!(t0.elapsed() < Duration::from_secs(3));
        let d = job.read();
        if !d.stdout.is_empty() {
            reads.push(d.stdout);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last = job.read().stdout;
    if !last.is_empty() {
        reads.push(last);
    }
    assert_eq!(reads.concat(), "a\u{e9}b");
    assert!(
        reads.iter().all(|r| !r.contains('\u{FFFD}')),
        "a read split the character: {reads:?}"
    );
    // The read taken between the two writes held the lone lead byte back.
    assert_eq!(reads[0], "a", "{reads:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn an_incomplete_character_at_the_end_of_the_stream_is_flushed_lossily() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, r"printf 'x\303'");
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    assert_eq!(job.read().stdout, "x\u{FFFD}");
    assert_eq!(job.read(), Delta::default());
}

#[tokio::test(flavor = "current_thread")]
async fn output_beyond_the_unread_budget_is_lossy_and_spilled_whole() {
    let parent = tempfile::tempdir().unwrap();
    let dir = Arc::new(SpillDir::create_in(parent.path(), "jobs").unwrap());
    let jobs = Jobs::new(4, 16);
    let mut req =
        Request::shell("printf abc; sleep 0.3; printf 0123456789abcdefghijklmnopqrstuvwxyz");
    req.spill = Some(dir.clone());
    let job = jobs.start(spec(req), "spill".into()).expect("start");

    // Under the budget: nothing lost, nothing spilled.
    let t0 = Instant::now();
    let first = loop {
        let d = job.read();
        if !d.stdout.is_empty() {
            break d;
        }
        assert!(t0.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        first,
        Delta {
            stdout: "abc".into(),
            ..Delta::default()
        }
    );

    assert!(job.wait(Some(Duration::from_secs(5))).await);
    let lossy = job.read();
    assert!(lossy.lossy);
    // Only the newest budget's worth of unread bytes is kept.
    assert_eq!(lossy.stdout, "klmnopqrstuvwxyz");
    assert_eq!(lossy.stderr, "");
    assert_eq!(lossy.stderr_spill_path, None);
    let path = lossy.stdout_spill_path.clone().expect("stdoutSpillPath");
    assert_eq!(path.parent().unwrap(), dir.path());
    // The spill file holds the complete stream, including what was read.
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"abc0123456789abcdefghijklmnopqrstuvwxyz"
    );

    // Nothing was lost since: not lossy; the spill file is still named.
    let next = job.read();
    assert_eq!(
        next,
        Delta {
            stdout_spill_path: Some(path),
            ..Delta::default()
        }
    );
}

#[tokio::test(flavor = "current_thread")]
async fn wait_times_out_while_running_and_is_true_once_exited_with_its_code() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, "sleep 0.4; exit 3");
    assert!(!job.wait(Some(Duration::from_millis(50))).await);
    assert!(!job.is_done());
    assert_eq!(job.snapshot(), snap(Status::Running, None, None));
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    assert!(job.is_done());
    assert_eq!(job.snapshot(), snap(Status::Exited, Some(3), None));
    // Settled: wait returns at once, kill has nothing to do.
    assert!(job.wait(Some(Duration::ZERO)).await);
    assert!(job.wait(None).await);
    assert!(!job.kill());
    assert_eq!(job.snapshot(), snap(Status::Exited, Some(3), None));
}

#[tokio::test(flavor = "current_thread")]
async fn a_job_that_kills_itself_has_exited_by_that_signal() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, "kill -KILL $$");
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    assert_eq!(job.snapshot(), snap(Status::Exited, None, Some("SIGKILL")));
}

#[tokio::test(flavor = "current_thread")]
async fn kill_ends_a_job_with_term_and_reports_killed() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, "exec sleep 30");
    let t0 = Instant::now();
    assert!(job.kill());
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    assert!(t0.elapsed() < GRACE, "TERM sufficed: {:?}", t0.elapsed());
    assert_eq!(job.snapshot(), snap(Status::Killed, None, Some("SIGTERM")));
    assert!(!alive(job.pid as i32));
    assert!(!job.kill(), "kill on a settled job is false");
    assert_eq!(job.snapshot(), snap(Status::Killed, None, Some("SIGTERM")));
    assert_eq!(jobs.live(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_term_ignoring_job_is_killed_after_grace_and_kill_is_idempotent() {
    let jobs = Jobs::new(4, 1024);
    let job = start(
        &jobs,
        "trap '' TERM; echo ready; while :; do sleep 0.05; done",
    );
    read_until_line(&job).await;
    let t0 = Instant::now();
    assert!(job.kill());
    // Dying (TERM ignored, KILL pending): asking again is still true.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!job.is_done());
    assert!(job.kill());
    assert!(!job.wait(Some(Duration::from_millis(100))).await);
    assert!(job.wait(Some(Duration::from_secs(5))).await);
    let el = t0.elapsed();
    assert!(
        el >= GRACE && el < GRACE + Duration::from_millis(700),
        "{el:?}"
    );
    assert_eq!(job.snapshot(), snap(Status::Killed, None, Some("SIGKILL")));
    assert!(!alive(job.pid as i32));
    assert!(!job.kill());
}

#[tokio::test(flavor = "current_thread")]
async fn the_live_job_limit_refuses_a_start_until_one_settles() {
    let jobs = Jobs::new(2, 1024);
    let a = start(&jobs, "exec sleep 30");
    let _b = start(&jobs, "exec sleep 30");
    assert_eq!(jobs.live(), 2);
    let refused = jobs
        .start(spec(Request::shell("exec sleep 30")), "third".into())
        .unwrap_err();
    assert_eq!(refused, StartError::TooMany { max: 2 });
    assert_eq!(jobs.list().len(), 2, "a refused start is not listed");

    assert!(a.kill());
    assert!(a.wait(Some(Duration::from_secs(5))).await);
    assert_eq!(jobs.live(), 1);
    let c = start(&jobs, "exec sleep 30");
    assert_eq!(jobs.live(), 2);
    // Settled jobs stay listed; ids are not spent by refused starts.
    let ids: Vec<u64> = jobs.list().iter().map(|j| j.id).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(c.id, 3);
    assert_eq!(jobs.get(3).unwrap().pid, c.pid);
    jobs.shutdown().await;
    assert_eq!(jobs.live(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_kills_every_live_job_and_its_grandchildren() {
    let jobs = Jobs::new(4, 1024);
    let plain = start(&jobs, "exec sleep 30");
    // A grandchild that outlives TERM: only the group KILL after grace ends it.
    let stubborn = start(
        &jobs,
        "sh -c 'trap \"\" TERM; echo $$; exec sleep 30'; wait",
    );
    let (line, _) = read_until_line(&stubborn).await;
    let grandchild: i32 = line.trim().parse().unwrap();
    let finished = start(&jobs, "exit 0");
    assert!(finished.wait(Some(Duration::from_secs(5))).await);
    assert!(alive(grandchild));

    let t0 = Instant::now();
    jobs.shutdown().await;
    let el = t0.elapsed();
    assert!(el < GRACE + Duration::from_millis(700), "{el:?}");
    assert_eq!(jobs.live(), 0);
    for (what, pid) in [
        ("job", plain.pid as i32),
        ("job", stubborn.pid as i32),
        ("grandchild", grandchild),
    ] {
        assert!(!alive(pid), "{what} {pid} survived shutdown");
    }
    assert_eq!(plain.snapshot().status, Status::Killed);
    assert_eq!(stubborn.snapshot().status, Status::Killed);
    // A job that had already ended keeps its own outcome.
    assert_eq!(finished.snapshot(), snap(Status::Exited, Some(0), None));
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_jobs_without_shutdown_kills_live_groups() {
    let jobs = Jobs::new(4, 1024);
    let job = start(&jobs, "sleep 30 & echo $!; wait");
    let (line, _) = read_until_line(&job).await;
    let grandchild: i32 = line.trim().parse().unwrap();
    let pid = job.pid as i32;
    assert!(alive(pid) && alive(grandchild));
    drop(jobs);
    let t0 = Instant::now();
    while (alive(pid) || alive(grandchild)) && t0.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!alive(pid), "job {pid} survived a dropped Jobs");
    assert!(!alive(grandchild), "grandchild {grandchild} survived");
    // The handle still settles.
    assert!(job.wait(Some(Duration::from_secs(2))).await);
    assert_eq!(job.snapshot().signal.as_deref(), Some("SIGKILL"));
}

#[tokio::test(flavor = "current_thread")]
async fn stdin_reaches_the_job_and_is_closed_without_it() {
    let jobs = Jobs::new(4, 1024);
    let mut req = Request::shell("cat");
    req.stdin = Some(b"payload\nline2".to_vec());
    let fed = jobs.start(spec(req), "cat".into()).expect("start");
    assert!(fed.wait(Some(Duration::from_secs(2))).await);
    assert_eq!(fed.read().stdout, "payload\nline2");
    assert_eq!(fed.snapshot(), snap(Status::Exited, Some(0), None));

    let t0 = Instant::now();
    let closed = start(&jobs, "cat; echo done");
    assert!(closed.wait(Some(Duration::from_secs(2))).await);
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(closed.read().stdout, "done\n");
    assert_eq!(closed.snapshot(), snap(Status::Exited, Some(0), None));
}

#[tokio::test(flavor = "current_thread")]
async fn a_missing_program_is_a_spawn_failure_and_no_job() {
    let jobs = Jobs::new(4, 1024);
    let err = jobs
        .start(
            spec(Request::argv(["/definitely/not/a/program"])),
            "missing".into(),
        )
        .unwrap_err();
    let StartError::Spawn(f) = err else {
        panic!("expected a spawn failure, got {err:?}");
    };
    assert_eq!(f.kind, SpawnFailureKind::ProgramNotFound);
    assert!(f.message.contains("/definitely/not/a/program"), "{f:?}");
    assert!(jobs.list().is_empty());
    assert_eq!(start(&jobs, "exit 0").id, 1, "no id was spent");

    let mut req = Request::shell("true");
    req.cwd = Some(Path::new("/definitely/not/a/dir").to_path_buf());
    match jobs.start(spec(req), "nowhere".into()) {
        Err(StartError::Spawn(f)) => assert_eq!(f.kind, SpawnFailureKind::CwdNotFound),
        other => panic!("expected CwdNotFound, got {other:?}"),
    }
}
