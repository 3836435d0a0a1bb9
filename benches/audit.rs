//! What the audit trail costs a run, and what a replay of the record saves.
//! Whole processes on every side, timed in interleaved turns, so the ratio
//! of medians holds on a noisy machine. BENCHMARKS.md has the targets, the
//! command and the figures.
//!
//! - `audit-read`: one `sluice run` of a script making 10,000
//!   `sluice.read{path = "small.txt"}` calls (a 4 KiB text file), recording
//!   to a fresh database each sample, against the same run with
//!   `--no-audit`. Target: at most 1.3x.
//! - `audit-irreversible`: 200 `sluice.bash{command = "true"}` calls, each
//!   an irreversible call whose intent is committed and synced before it
//!   runs, with the audit on against `--no-audit`. Target: at most 1.15x.
//! - `audit-replay`: `sluice replay` of a recorded 10,000-read run against
//!   the recorded run itself (audit on). Target: replay at least 3x faster.
//! - `audit-replay-realistic`: a run of 40 turns, each a read, a grep, an
//!   edit, a `bash` command and a `fetch` of a loopback server (started
//!   here) that answers after 20 ms, recorded, against `sluice replay` of
//!   it. Target: replay at least 20x faster.
//! - `audit-rss`: the peak RSS (the child's `ru_maxrss`) of recorded runs
//!   of 10,000 and of 200,000 sealed reads, and their difference. Target:
//!   the 190,000 more calls cost under 10 MB (a run keeps nothing per call).
//!
//! Every sample is checked before it counts: exit status 0, nothing said on
//! stderr, the record holding every call with its outcome (counted in the
//! database), no record at all with `--no-audit`, and the replay saying the
//! run reproduced. A broken run fails the bench instead of timing fast.
//!
//! Not a criterion bench: each sample is a process of a tenth of a second
//! or more.

mod support;

use rusqlite::Connection;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{measure, median, slow_server, text_file, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const READS: usize = 10_000;
const BASHES: usize = 200;
const SMALL_NAME: &str = "small.txt";
const SMALL_BYTES: usize = 4 * 1024;
const NAMES: [&str; 5] = [
    "audit-read",
    "audit-irreversible",
    "audit-replay",
    "audit-replay-realistic",
    "audit-rss",
];
/// Turns of the realistic run, and its server's latency.
const TURNS_REALISTIC: usize = 40;
const LATENCY: Duration = Duration::from_millis(20);
/// The two run lengths the RSS bench compares.
const RSS_SHORT: usize = 10_000;
const RSS_LONG: usize = 200_000;

/// Where the bench works: the workspace, the scripts, the databases and the
/// file each process's stderr goes to.
struct Bench {
    ws: PathBuf,
    scripts: PathBuf,
    dbs: PathBuf,
    stderr: PathBuf,
    /// Numbers the fresh databases.
    fresh: usize,
    /// `--approve` flags every run is given.
    grants: Vec<String>,
    _dirs: [tempfile::TempDir; 3],
}

/// What one database says of the one run it holds.
#[derive(Debug)]
struct Recorded {
    id: String,
    status: String,
    /// Call rows of `flow` in `tier` whose outcome is `ok`.
    ok: i64,
    /// Call rows of any kind.
    rows: i64,
    bytes: u64,
}

impl Bench {
    fn new() -> Bench {
        let ws_dir = tempfile::tempdir().expect("a workspace");
        let scripts_dir = tempfile::tempdir().expect("a script folder");
        let dbs_dir = tempfile::tempdir().expect("a database folder");
        let ws = fs::canonicalize(ws_dir.path()).unwrap();
        fs::write(ws.join(SMALL_NAME), text_file(SMALL_BYTES, 64)).unwrap();
        Bench {
            ws,
            scripts: scripts_dir.path().to_path_buf(),
            dbs: dbs_dir.path().to_path_buf(),
            stderr: dbs_dir.path().join("stderr.txt"),
            fresh: 0,
            grants: Vec::new(),
            _dirs: [ws_dir, scripts_dir, dbs_dir],
        }
    }

    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.scripts.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    /// A database path no run has used, in a folder of its own.
    fn fresh_db(&mut self) -> PathBuf {
        self.fresh += 1;
        self.dbs
            .join(format!("run-{}", self.fresh))
            .join("audit.db")
    }

    /// `sluice run SCRIPT --workspace WS`, recording to `db` or not at all.
    fn run(&self, script: &Path, db: Option<&Path>) -> Command {
        let mut c = Command::new(SLUICE);
        c.arg("run").arg(script).arg("--workspace").arg(&self.ws);
        c.args(&self.grants);
        match db {
            Some(db) => c.arg("--audit").arg(db),
            None => c.arg("--no-audit"),
        };
        c
    }

    fn replay(&self, id: &str, db: &Path) -> Command {
        let mut c = Command::new(SLUICE);
        c.arg("replay")
            .arg(id)
            .arg("--audit")
            .arg(db)
            .arg("--workspace")
            .arg(&self.ws);
        c
    }

    /// Times `cmd` (which must exit 0) and returns what it said on stderr.
    fn time(&self, cmd: &mut Command) -> (Duration, String) {
        cmd.stderr(File::create(&self.stderr).unwrap());
        let (t, _) = measure(cmd);
        (t, fs::read_to_string(&self.stderr).unwrap())
    }

    /// Times a `sluice run`, which must exit 0 and say nothing on stderr.
    fn time_run(&self, cmd: &mut Command) -> Duration {
        let (t, err) = self.time(cmd);
        assert!(err.is_empty(), "{cmd:?} said on stderr:\n{err}");
        t
    }

    /// Times a run recording to a fresh database, checks the record holds
    /// `calls` completed calls of `flow` in `tier`, and removes it.
    fn time_recorded(&mut self, script: &Path, flow: &str, tier: &str, calls: usize) -> Duration {
        let db = self.fresh_db();
        let t = self.time_run(&mut self.run(script, Some(&db)));
        check(&recorded(&db, flow, tier), calls, &db);
        fs::remove_dir_all(db.parent().unwrap()).unwrap();
        t
    }

    /// Times a `--no-audit` run and checks it left no record.
    fn time_unrecorded(&self, script: &Path) -> Duration {
        let t = self.time_run(&mut self.run(script, None));
        let default = self.ws.join(".sluice");
        assert!(
            !default.exists(),
            "--no-audit left {} behind",
            default.display()
        );
        t
    }

    /// Times `sluice replay` of run `id`, which must say it reproduced.
    /// `n` appends of 4 KiB to one file in the databases' folder, each
    /// followed by `fdatasync`: the least a durable intent per call costs.
    fn time_syncs(&mut self, n: usize) -> Duration {
        use std::io::Write;
        let path = self.fresh_db();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let block = vec![b'x'; 4096];
        let started = std::time::Instant::now();
        let mut file = File::create(&path).unwrap();
        for _ in 0..n {
            file.write_all(&block).unwrap();
            file.sync_data().unwrap();
        }
        let took = started.elapsed();
        drop(file);
        fs::remove_dir_all(path.parent().unwrap()).unwrap();
        took
    }

    fn time_replay(&self, id: &str, db: &Path, calls: usize) -> Duration {
        let (t, err) = self.time(&mut self.replay(id, db));
        let said = format!("run {id} reproduced: {calls} calls answered from the record");
        assert!(err.contains(&said), "the replay did not reproduce:\n{err}");
        t
    }

    /// Peak RSS (MiB) of a run of `script` recording to a fresh database,
    /// which must hold `calls` completed reads.
    fn peak_recorded(&mut self, script: &Path, calls: usize) -> f64 {
        let db = self.fresh_db();
        let mut cmd = self.run(script, Some(&db));
        cmd.stderr(File::create(&self.stderr).unwrap());
        let (_, kib) = measure(&mut cmd);
        check(&recorded(&db, "read", "sealed"), calls, &db);
        fs::remove_dir_all(db.parent().unwrap()).unwrap();
        kib as f64 / 1024.0
    }
}

/// The one run in the database at `db`, and its calls of `flow` in `tier`
/// that completed `ok`.
fn recorded(db: &Path, flow: &str, tier: &str) -> Recorded {
    let conn = Connection::open(db).expect("open the record");
    let (id, status): (String, String) = conn
        .query_row("SELECT id, status FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("exactly one run in the record");
    let (rows, ok): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(*) FILTER (WHERE flow = ?2 AND tier = ?3 AND status = 'ok'
               AND (output IS NOT NULL OR output_ref IS NOT NULL) AND outcome_hash IS NOT NULL)
             FROM calls WHERE run = ?1",
            (&id, flow, tier),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count the calls");
    let bytes = ["", "-wal"]
        .iter()
        .filter_map(|suffix| {
            let mut path = db.as_os_str().to_owned();
            path.push(suffix);
            fs::metadata(path).ok().map(|m| m.len())
        })
        .sum();
    Recorded {
        id,
        status,
        ok,
        rows,
        bytes,
    }
}

fn check(rec: &Recorded, calls: usize, db: &Path) {
    assert!(
        rec.status == "ok" && rec.ok == calls as i64 && rec.rows == calls as i64,
        "{}: expected a run ended ok with {calls} completed calls, found {rec:?}",
        db.display()
    );
}

fn main() {
    let wants = support::wanted();
    if !NAMES.iter().any(|n| wants(n)) {
        return;
    }
    let mut bench = Bench::new();
    let mut lines = Vec::new();
    let read_lua = bench.script("read.lua", &reads(READS));
    if wants("audit-read") || wants("audit-replay") {
        read_and_replay(
            &mut bench,
            &read_lua,
            &mut lines,
            (wants("audit-read"), wants("audit-replay")),
        );
    }
    if wants("audit-replay-realistic") {
        lines.push(realistic(&mut bench));
    }
    if wants("audit-rss") {
        lines.extend(rss(&mut bench, &read_lua));
    }
    if wants("audit-irreversible") {
        lines.extend(irreversible(&mut bench));
    }
    println!();
    for line in lines {
        println!("{line}");
    }
}

/// A script of `n` reads of the small file, each checked.
fn reads(n: usize) -> String {
    format!(
        "for i = 1, {n} do\n  local r, err = sluice.read{{path = \"{SMALL_NAME}\"}}\n  \
         assert(r and #r.content > 0, tostring(err))\nend\n"
    )
}

/// `audit-read` and `audit-replay`: the 10,000-read run recorded, not
/// recorded, and replayed, in interleaved turns.
fn read_and_replay(
    bench: &mut Bench,
    read_lua: &Path,
    lines: &mut Vec<String>,
    wants: (bool, bool),
) {
    let (want_read, want_replay) = wants;
    // The run a replay replays, checked whole; it warms both sides too.
    let reference = bench.fresh_db();
    bench.time_run(&mut bench.run(read_lua, Some(&reference)));
    let rec = recorded(&reference, "read", "sealed");
    check(&rec, READS, &reference);
    bench.time_unrecorded(read_lua);
    bench.time_replay(&rec.id, &reference, READS);
    let after = recorded(&reference, "read", "sealed");
    assert_eq!(after.id, rec.id, "the replay recorded a run of its own");

    let turns = 11;
    let (mut on, mut off, mut replay) = (vec![], vec![], vec![]);
    for _ in 0..turns {
        on.push(bench.time_recorded(read_lua, "read", "sealed", READS));
        if want_read {
            off.push(bench.time_unrecorded(read_lua));
        }
        if want_replay {
            replay.push(bench.time_replay(&rec.id, &reference, READS));
        }
    }
    let m_on = median(&mut on);
    let per_call = |t: Duration| t / READS as u32;
    let mib = rec.bytes as f64 / (1024.0 * 1024.0);
    if want_read {
        let m_off = median(&mut off);
        let ratio = m_on.as_secs_f64() / m_off.as_secs_f64();
        println!(
            "audit-read: {READS} sluice.read{{path=\"{SMALL_NAME}\"}} ({} KiB) audit on {m_on:.2?} / \
             --no-audit {m_off:.2?} (per call {:.2?} / {:.2?}, the record adds {:.2?}); \
             record {mib:.1} MiB",
            SMALL_BYTES / 1024,
            per_call(m_on),
            per_call(m_off),
            per_call(m_on.saturating_sub(m_off)),
        );
        lines.push(format!(
            "ratio audit-read on/off = {ratio:.2}x (target <= 1.3x): {} \
             [medians of {turns} interleaved turns: {m_on:.2?} / {m_off:.2?}]",
            verdict(ratio <= 1.3)
        ));
    }
    if want_replay {
        let m_replay = median(&mut replay);
        let speedup = m_on.as_secs_f64() / m_replay.as_secs_f64();
        println!(
            "audit-replay: sluice replay of the {READS}-read run {m_replay:.2?} / the run recorded \
             {m_on:.2?} (per call {:.2?} / {:.2?})",
            per_call(m_replay),
            per_call(m_on),
        );
        lines.push(format!(
            "ratio audit-replay original/replay = {speedup:.2}x (target >= 3x): {} \
             [medians of {turns} interleaved turns: {m_on:.2?} / {m_replay:.2?}]",
            verdict(speedup >= 3.0)
        ));
    }
    fs::remove_dir_all(reference.parent().unwrap()).unwrap();
}

/// The realistic run's script: each turn reads a file, greps the
/// workspace, edits its own file, runs a command and fetches `origin`.
fn realistic_script(origin: &str) -> String {
    format!(
        r#"for i = 1, {TURNS_REALISTIC} do
  local r, err = sluice.read{{path = "{SMALL_NAME}"}}
  assert(r and #r.content > 0, tostring(err))
  r, err = sluice.grep{{pattern = "charlie", root = "."}}
  assert(r and #r.matches > 0, tostring(err))
  r, err = sluice.edit{{path = "edit-" .. i .. ".txt", oldString = "count = 0", newString = "count = 1"}}
  assert(r, tostring(err))
  r, err = sluice.bash{{command = "wc -l {SMALL_NAME}"}}
  assert(r and r.exitCode == 0, tostring(err))
  r, err = sluice.fetch{{url = "{origin}/turn/" .. i}}
  assert(r and r.body == "ok", tostring(err))
end
"#
    )
}

/// Calls the realistic run makes.
const REALISTIC_CALLS: usize = TURNS_REALISTIC * 5;

/// Puts back the files the realistic run edits.
fn reset_edits(ws: &Path) {
    for i in 1..=TURNS_REALISTIC {
        fs::write(ws.join(format!("edit-{i}.txt")), "name = x\ncount = 0\n").unwrap();
    }
}

/// `audit-replay-realistic`: the realistic run recorded against its replay.
fn realistic(bench: &mut Bench) -> String {
    let origin = slow_server(LATENCY);
    bench.grants = vec!["--approve".into(), format!("net:private:{origin}")];
    let script = bench.script("realistic.lua", &realistic_script(&origin));
    let reference = bench.fresh_db();
    reset_edits(&bench.ws);
    bench.time_run(&mut bench.run(&script, Some(&reference)));
    let rec = recorded(&reference, "fetch", "sealed");
    assert!(
        rec.status == "ok" && rec.rows == REALISTIC_CALLS as i64,
        "{rec:?}"
    );
    bench.time_replay(&rec.id, &reference, REALISTIC_CALLS);
    let turns = 7;
    let (mut run, mut replay) = (vec![], vec![]);
    for _ in 0..turns {
        reset_edits(&bench.ws);
        let db = bench.fresh_db();
        run.push(bench.time_run(&mut bench.run(&script, Some(&db))));
        let r = recorded(&db, "fetch", "sealed");
        assert!(
            r.status == "ok" && r.rows == REALISTIC_CALLS as i64 && r.ok == TURNS_REALISTIC as i64,
            "{r:?}"
        );
        fs::remove_dir_all(db.parent().unwrap()).unwrap();
        replay.push(bench.time_replay(&rec.id, &reference, REALISTIC_CALLS));
    }
    bench.grants.clear();
    fs::remove_dir_all(reference.parent().unwrap()).unwrap();
    let (m_run, m_replay) = (median(&mut run), median(&mut replay));
    let speedup = m_run.as_secs_f64() / m_replay.as_secs_f64();
    println!(
        "audit-replay-realistic: {TURNS_REALISTIC} turns of read, grep, edit, bash and a fetch answered after \
         {LATENCY:?} ({REALISTIC_CALLS} calls): run {m_run:.2?} / replay {m_replay:.2?}"
    );
    format!(
        "ratio audit-replay-realistic run/replay = {speedup:.2}x (target >= 20x): {} \
         [medians of {turns} interleaved turns: {m_run:.2?} / {m_replay:.2?}]",
        verdict(speedup >= 20.0)
    )
}

/// `audit-rss`: peak RSS of a short and a long recorded run of reads.
fn rss(bench: &mut Bench, short_lua: &Path) -> Vec<String> {
    assert_eq!(RSS_SHORT, READS, "the short run is the read bench's script");
    let long_lua = bench.script("read-long.lua", &reads(RSS_LONG));
    let turns = 3;
    let (mut short, mut long) = (vec![], vec![]);
    for _ in 0..turns {
        short.push(bench.peak_recorded(short_lua, RSS_SHORT));
        long.push(bench.peak_recorded(&long_lua, RSS_LONG));
    }
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (s, l) = (mid(&mut short), mid(&mut long));
    let grown = l - s;
    println!(
        "audit-rss: peak RSS of a recorded run of {RSS_SHORT} reads {s:.1} MiB, of {RSS_LONG} reads {l:.1} MiB"
    );
    vec![
        format!("ratio audit-rss {RSS_SHORT}-reads = {s:.1} MiB (no target, information) [median of {turns}]"),
        format!("ratio audit-rss {RSS_LONG}-reads = {l:.1} MiB (no target, information) [median of {turns}]"),
        format!(
            "ratio audit-rss growth for {} more calls = {grown:.1} MiB (target < 10 MB): {} [medians of {turns}]",
            RSS_LONG - RSS_SHORT,
            verdict(grown * 1.048_576 < 10.0)
        ),
    ]
}

/// `audit-irreversible`: commands whose intent is synced first, recorded
/// against not, and the disk's sync floor.
fn irreversible(bench: &mut Bench) -> Vec<String> {
    let bash_lua = bench.script(
        "bash.lua",
        &format!(
            "for i = 1, {BASHES} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0, tostring(err))\nend\n"
        ),
    );
    // Warm both sides once; the first checks its record.
    bench.time_recorded(&bash_lua, "bash", "irreversible", BASHES);
    bench.time_unrecorded(&bash_lua);
    let turns = 11;
    let (mut on, mut off, mut floor) = (vec![], vec![], vec![]);
    for _ in 0..turns {
        on.push(bench.time_recorded(&bash_lua, "bash", "irreversible", BASHES));
        off.push(bench.time_unrecorded(&bash_lua));
        floor.push(bench.time_syncs(BASHES));
    }
    let (m_on, m_off) = (median(&mut on), median(&mut off));
    let m_floor = median(&mut floor);
    println!(
        "audit-irreversible floor: {BASHES} appends of 4 KiB, each fdatasync'd, in the databases' folder: \
         {m_floor:.2?} ({:.2?} each)",
        m_floor / BASHES as u32
    );
    let ratio = m_on.as_secs_f64() / m_off.as_secs_f64();
    println!(
        "audit-irreversible: {BASHES} sluice.bash{{command=\"true\"}} audit on {m_on:.2?} / \
         --no-audit {m_off:.2?} (per call {:.2?} / {:.2?}, the record adds {:.2?})",
        m_on / BASHES as u32,
        m_off / BASHES as u32,
        m_on.saturating_sub(m_off) / BASHES as u32,
    );
    let least = (m_off + m_floor).as_secs_f64() / m_off.as_secs_f64();
    vec![
        format!(
            "ratio audit-irreversible on/off = {ratio:.2}x (target <= 1.15x): {} \
             [medians of {turns} interleaved turns: {m_on:.2?} / {m_off:.2?}]",
            verdict(ratio <= 1.15)
        ),
        format!(
            "ratio audit-irreversible (off + sync floor)/off = {least:.2}x (no target, information: what one \
             durable write per call costs on this disk, before any database work)"
        ),
    ]
}
