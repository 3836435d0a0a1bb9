//! Fencing, on both stores: a run's rows carry the lease of the process
//! writing it; a process that takes the run over raises the lease, and the
//! old writer's next write is refused, after which it starts no call. Two
//! resumes of one run: exactly one proceeds, the other names the owner.

mod common;

use common::stores::one;
use common::*;
use sluice::internals::audit::db::Val;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `sluice run SCRIPT` in `ws`, in the background, output piped.
fn spawn(ws: &Path, script: &Path, flags: &[&str]) -> Child {
    sluice_run(ws, script, flags, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice run")
}

/// `sluice resume ARGS` in `ws`, in the background, output piped.
fn spawn_resume(ws: &Path, args: &[&str]) -> Child {
    std::process::Command::new(sluice_bin())
        .arg("resume")
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .envs(common::stores::current_env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice resume")
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(ws: &Path, name: &str) -> usize {
    std::fs::read_to_string(ws.join(name))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, sig).expect("signal the run");
}

fn stderr_of(child: Child) -> (i32, String) {
    let out = child.wait_with_output().expect("wait for sluice");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

both_stores! {
    fn two_resumes_of_one_run_one_proceeds_and_the_other_names_the_owner(store) {
        let ws = workspace();
        let script = script_file(
            ws.path(),
            "assert(sluice.write{path = 'one', content = ''})\nsluice.sleep(30000)\n\
             assert(sluice.write{path = 'two', content = ''})\nsluice.sleep(30000)\n",
        );
        let mut first = spawn(ws.path(), &script, &[]);
        wait_for("the first run's write", Duration::from_secs(20), || ws.path().join("one").exists());
        first.kill().unwrap();
        first.wait().unwrap();
        let db = store.db(ws.path());
        let run: String = one(&*db, "SELECT id FROM runs ORDER BY n DESC LIMIT 1", &[]);

        // The resume writes `two` before it sleeps, where the run was cut.
        let again = script_file(
            ws.path(),
            "assert(sluice.write{path = 'one', content = ''})\n\
             assert(sluice.write{path = 'two', content = ''})\nsluice.sleep(30000)\n",
        );
        let flags = [run.as_str(), "--script", again.to_str().unwrap()];
        let a = spawn_resume(ws.path(), &flags);
        let b = spawn_resume(ws.path(), &flags);
        let mut both = [Some(a), Some(b)];
        // The loser exits at once; the winner sleeps in the live part.
        let deadline = Instant::now() + Duration::from_secs(20);
        let loser = loop {
            if let Some(i) = (0..2).find(|&i| {
                both[i].as_mut().is_some_and(|c| c.try_wait().unwrap().is_some())
            }) {
                break i;
            }
            assert!(Instant::now() < deadline, "neither resume ended");
            std::thread::sleep(Duration::from_millis(20));
        };
        let (code, err) = stderr_of(both[loser].take().unwrap());
        let mut winner = both[1 - loser].take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ws.path().join("two").exists() {
            if winner.try_wait().unwrap().is_some() || Instant::now() > deadline {
                let _ = winner.kill();
                let (its_code, its_err) = stderr_of(winner);
                panic!("the winner did not proceed (exit {its_code}): {its_err}\nthe loser said: {err}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(winner.try_wait().unwrap().is_none(), "the winner proceeds");
        winner.kill().unwrap();
        winner.wait().unwrap();
        assert_eq!(code, 2, "{err}");
        let owner = format!("is being resumed right now by {}:{}:", hostname(), winner.id());
        assert!(err.contains(&owner), "the loser names the winner ({owner}): {err}");
        // The winner took the run's lease: one takeover, one new run.
        assert_eq!(one::<i64>(&*db, "SELECT attempt FROM runs WHERE id = ?1", &[Val::from(&run)]), 2);
        assert_eq!(
            one::<i64>(&*db, "SELECT count(*) FROM runs WHERE resumed_from = ?1", &[Val::from(&run)]),
            1
        );
    }

    fn a_writer_stopped_while_its_run_is_taken_over_starts_no_call_after_it_wakes(store) {
        let ws = workspace();
        let script = script_file(
            ws.path(),
            "for i = 1, 400 do\n  assert(sluice.write{path = 'w' .. i, content = ''})\n  \
             assert(sluice.bash{command = 'echo ' .. i .. ' >> marker'})\n  sluice.sleep(50)\nend\n",
        );
        let writer = spawn(ws.path(), &script, &[]);
        wait_for("three marked calls", Duration::from_secs(30), || lines(ws.path(), "marker") >= 3);
        signal(&writer, nix::sys::signal::Signal::SIGSTOP);
        let db = store.db(ws.path());
        let run: String = one(&*db, "SELECT id FROM runs ORDER BY n DESC LIMIT 1", &[]);
        let empty = script_file(ws.path(), "-- takes the run over, makes no call\n");
        let resume = |ws: &Path| {
            let child = spawn_resume(ws, &[&run, "--take-over", "--script", empty.to_str().unwrap()]);
            stderr_of(child)
        };

        // Control: a live lease is not taken while it holds; the refusal
        // says to try later (75, EX_TEMPFAIL), as a fleet's next attempt does.
        let (code, err) = resume(ws.path());
        assert_eq!(code, 75, "{err}");
        let held = format!("its lease held by {}:{}:", hostname(), writer.id());
        assert!(err.contains(&held), "{err}");
        assert_eq!(one::<i64>(&*db, "SELECT attempt FROM runs WHERE id = ?1", &[Val::from(&run)]), 1);

        // A stopped writer stops renewing: its lease runs out, the run is
        // taken over.
        std::thread::sleep(Duration::from_secs(11));
        let (_, err) = resume(ws.path());
        assert!(!err.contains("lease held"), "{err}");
        assert_eq!(one::<i64>(&*db, "SELECT attempt FROM runs WHERE id = ?1", &[Val::from(&run)]), 2);
        let marked = lines(ws.path(), "marker");
        let written: i64 = one(&*db, "SELECT count(*) FROM calls WHERE run = ?1", &[Val::from(&run)]);

        signal(&writer, nix::sys::signal::Signal::SIGCONT);
        let mut writer = writer;
        let deadline = Instant::now() + Duration::from_secs(20);
        while writer.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the fenced writer never stopped");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (code, err) = stderr_of(writer);
        assert_ne!(code, 0, "{err}");
        assert!(err.contains("was taken over by"), "{err}");
        assert_eq!(lines(ws.path(), "marker"), marked, "no command ran after the takeover");
        let after: i64 = one(&*db, "SELECT count(*) FROM calls WHERE run = ?1", &[Val::from(&run)]);
        assert_eq!(after, written, "no row of the old writer was written after the takeover");
    }
}
