//! Blocking work off the run's thread: every task of a run shares one
//! thread (a tokio current-thread runtime), so a flow that blocks it stalls
//! every other call. These tests run two calls at once on that one thread,
//! through the library (`Runtime::call`, polled together by `join!`, which
//! is how concurrent tasks share it), and check that the one that should be
//! quick finishes while the long one is still under way: a grep or a glob
//! of a tree of thousands of files, a read of a 50 MB file, a write or an
//! irreversible call waiting for the audit record's commit. Each also checks
//! the long call's answer is still exactly right, and the audit tests that
//! the record's ordering holds (intent on disk before the call runs, the
//! outcome committed before it returns).

mod common;

use serde_json::{json, Value};
use sluice::embed::{CustomFlow, FlowInfo, Granted, Reach};
use sluice::{FlowError, Runtime, Tier};
use std::cell::{Cell, RefCell};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Files in the big tree: enough that a debug build's grep of it takes
/// hundreds of milliseconds.
const TREE_FILES: usize = 6000;
/// Every this many files holds a `needle` line.
const NEEDLE_EVERY: usize = 60;

/// `tree/dNN/fNNNNN.txt`, `n` files of 400 lines, 100 per folder; file `i`
/// holds `needle i` on line 20 when `i` is a multiple of [`NEEDLE_EVERY`].
/// Returns the shown paths of the files holding a needle, in output order.
fn tree(ws: &Path, n: usize) -> Vec<String> {
    let mut needles = Vec::new();
    let filler: String = (1..=400)
        .map(|l| format!("line {l} of a file that holds nothing to find\n"))
        .collect();
    for i in 0..n {
        let dir = ws.join(format!("tree/d{:02}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        let name = format!("f{i:05}.txt");
        let body = if i % NEEDLE_EVERY == 0 {
            needles.push(format!("tree/d{:02}/{name}", i / 100));
            filler.replacen("line 20 of", &format!("needle {i} of"), 1)
        } else {
            filler.clone()
        };
        fs::write(dir.join(name), body).unwrap();
    }
    needles
}

/// A run that records nothing: what is timed is the reads alone.
fn runtime(ws: &Path) -> Runtime {
    Runtime::builder().workspace(ws).no_audit().build().unwrap()
}

/// Calls `read` of `small.txt` `n` times, checking each page, and returns
/// when the first and the last finished, counted from `t0`.
async fn small_reads(rt: &Runtime, t0: Instant, n: usize) -> (Duration, Duration) {
    let mut first = None;
    for _ in 0..n {
        let out = rt.call("read", json!({"path": "small.txt"})).await.unwrap();
        assert_eq!(out["content"], "one\ntwo");
        first.get_or_insert(t0.elapsed());
    }
    (first.unwrap(), t0.elapsed())
}

/// Held by the tests here that start grep threads in this process, so
/// [`threads_named`] counts only one test's.
static GREPS: Mutex<()> = Mutex::new(());

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn small_reads_finish_while_a_grep_of_thousands_of_files_runs() {
    let _one = GREPS.lock().unwrap_or_else(|e| e.into_inner());
    let ws = common::workspace();
    let needles = tree(ws.path(), TREE_FILES);
    fs::write(ws.path().join("small.txt"), "one\ntwo\n").unwrap();
    let rt = runtime(ws.path());
    let t0 = Instant::now();
    let grep = async {
        let input = json!({"pattern": r"needle \d+", "root": "tree"});
        let out = rt.call("grep", input).await.unwrap();
        (out, t0.elapsed())
    };
    let ((out, grep_done), (first, last)) =
        block_on(async { tokio::join!(grep, small_reads(&rt, t0, 20)) });
    assert!(
        grep_done >= Duration::from_millis(150),
        "the tree is too small to show anything: grep took {grep_done:?}"
    );
    assert!(
        last < grep_done,
        "the reads waited for the grep: first read at {first:?}, last at {last:?}, grep done at {grep_done:?}"
    );
    // The control: the grep found exactly what is there.
    assert_eq!(out["files"], json!(needles));
    assert_eq!(out["totalFiles"], needles.len());
    assert_eq!(out["totalMatches"], needles.len());
    assert_eq!(out["filesSearched"], TREE_FILES);
    assert_eq!(out["truncated"], false);
    let matches = out["matches"].as_array().unwrap();
    assert_eq!(matches.len(), needles.len());
    for (m, (file, i)) in matches
        .iter()
        .zip(needles.iter().zip((0..).step_by(NEEDLE_EVERY)))
    {
        let text = format!("needle {i} of a file that holds nothing to find");
        assert_eq!(m, &json!({"file": file, "line": 20, "text": text}));
    }
}

#[test]
fn small_reads_finish_while_a_glob_of_thousands_of_files_runs() {
    let ws = common::workspace();
    tree(ws.path(), TREE_FILES);
    fs::write(ws.path().join("small.txt"), "one\ntwo\n").unwrap();
    let rt = runtime(ws.path());
    let t0 = Instant::now();
    let glob = async {
        let input = json!({"pattern": "**/f*.txt", "root": "tree"});
        let out = rt.call("glob", input).await.unwrap();
        (out, t0.elapsed())
    };
    let ((out, glob_done), (first, last)) =
        block_on(async { tokio::join!(glob, small_reads(&rt, t0, 20)) });
    assert!(
        glob_done >= Duration::from_millis(100),
        "the tree is too small to show anything: glob took {glob_done:?}"
    );
    assert!(
        last < glob_done,
        "the reads waited for the glob: first read at {first:?}, last at {last:?}, glob done at {glob_done:?}"
    );
    let expected: Vec<String> = (0..TREE_FILES)
        .map(|i| format!("tree/d{:02}/f{i:05}.txt", i / 100))
        .collect();
    assert_eq!(out["total"], expected.len());
    assert_eq!(out["paths"], json!(expected[..1000]));
    assert_eq!(out["truncated"], true);
    assert_eq!(out["skippedDenied"], 0);
}

/// Ticks every 10 ms until `done`, returning when each tick ended,
/// counted from `t0`.
async fn ticks(t0: Instant, done: &Cell<bool>) -> Vec<Duration> {
    let mut at = Vec::new();
    while !done.get() {
        tokio::time::sleep(Duration::from_millis(10)).await;
        at.push(t0.elapsed());
    }
    at
}

/// How many of `ticks` fell strictly between `from` and `to`.
fn ticks_within(ticks: &[Duration], from: Duration, to: Duration) -> usize {
    ticks.iter().filter(|t| **t > from && **t < to).count()
}

#[test]
fn a_ticking_loop_keeps_ticking_while_a_50_mb_file_is_read() {
    let ws = common::workspace();
    let lines = 5_000_000;
    let mut big = String::with_capacity(50 << 20);
    for i in 1..=lines {
        big.push_str(&format!("line {i:07}\n"));
    }
    assert!(big.len() >= 50_000_000);
    fs::write(ws.path().join("big.txt"), &big).unwrap();
    drop(big);
    let rt = runtime(ws.path());
    let done = Cell::new(false);
    let t0 = Instant::now();
    let read = async {
        let input = json!({"path": "big.txt", "offset": lines - 1});
        let out = rt.call("read", input).await;
        done.set(true);
        (out.unwrap(), t0.elapsed())
    };
    let ((out, read_done), ticked) = block_on(async { tokio::join!(read, ticks(t0, &done)) });
    assert!(
        read_done >= Duration::from_millis(80),
        "the file is read too fast to show anything: {read_done:?}"
    );
    let during = ticks_within(&ticked, Duration::ZERO, read_done);
    let expected = (read_done.as_millis() / 10 / 4) as usize;
    assert!(
        during >= expected.max(3),
        "the loop stalled while the file was read: {during} ticks in {read_done:?}: {ticked:?}"
    );
    assert_eq!(
        out,
        json!({
            "content": format!("line {:07}\nline {lines:07}", lines - 1),
            "startLine": lines - 1,
            "endLine": lines,
            "totalLines": lines,
            "truncated": false,
        })
    );
}

/// The audit database's write lock, held from another connection on a
/// thread of its own for `hold`, so the run's writer must wait for it.
struct DbLock {
    /// When it was let go, and whether `marker` existed just before.
    released: mpsc::Receiver<(Instant, bool)>,
}

impl DbLock {
    /// Takes the lock on `db` and returns once it is held.
    fn take(db: PathBuf, hold: Duration, marker: PathBuf) -> DbLock {
        let (taken_tx, taken_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&db).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            taken_tx.send(()).unwrap();
            std::thread::sleep(hold);
            let existed = marker.exists();
            let released = Instant::now();
            conn.execute_batch("COMMIT").unwrap();
            done_tx.send((released, existed)).unwrap();
        });
        taken_rx.recv().unwrap();
        DbLock { released: done_rx }
    }
}

/// Whether the record at `db` holds a `write` call's row.
fn write_recorded(db: &Path) -> bool {
    // Read-only: opening it must not create the file before sluice does.
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, flags) else {
        return false;
    };
    conn.query_row("SELECT count(*) FROM calls WHERE flow = 'write'", [], |r| {
        r.get::<_, i64>(0)
    })
    .is_ok_and(|n| n > 0)
}

#[test]
fn a_write_waiting_for_its_commit_leaves_the_run_s_thread_free() {
    let ws = common::workspace();
    let db = ws.path().join("audit.db");
    let rt = Runtime::builder()
        .workspace(ws.path())
        .audit(&db)
        .build()
        .unwrap();
    let hold = Duration::from_millis(600);
    let lock = DbLock::take(db.clone(), hold, ws.path().join("none"));
    let done = Cell::new(false);
    let t0 = Instant::now();
    let write = async {
        let input = json!({"path": "a.txt", "content": "written\n"});
        let out = rt.call("write", input).await;
        done.set(true);
        (out, t0.elapsed())
    };
    let ((out, write_done), ticked) = block_on(async { tokio::join!(write, ticks(t0, &done)) });
    let (let_go, _) = lock.released.recv().unwrap();
    out.unwrap();
    assert!(
        t0 + write_done >= let_go,
        "the write returned before its row could be committed"
    );
    let during = ticks_within(&ticked, Duration::ZERO, write_done);
    assert!(
        during >= 20,
        "the loop stalled while the write waited for its commit: {during} ticks in {write_done:?}"
    );
    assert_eq!(
        fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "written\n"
    );
    // The outcome was committed before the call returned: another
    // connection sees it now, before the run ends.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let status: String = conn
        .query_row("SELECT status FROM calls WHERE flow = 'write'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "ok");
    rt.end("ok", None).unwrap();
}

/// `mark`: an irreversible flow that touches nothing the policy judges,
/// and notes when it ran.
#[derive(Clone, Default)]
struct Mark {
    ran: Arc<Mutex<Option<Instant>>>,
    file: Arc<Mutex<Option<PathBuf>>>,
}

impl CustomFlow for Mark {
    fn info(&self) -> FlowInfo {
        FlowInfo {
            name: "mark".into(),
            description: "Notes that it ran.".into(),
            tier: Tier::Irreversible,
            input_schema: json!({"type": "object"}),
            output_schema: json!({"type": "object"}),
        }
    }

    fn plan(&self, _input: &Value, _workspace: &Path) -> Result<Reach, FlowError> {
        Ok(Reach::default())
    }

    fn run(&self, _input: Value, _granted: &Granted) -> Result<Value, FlowError> {
        *self.ran.lock().unwrap() = Some(Instant::now());
        if let Some(f) = self.file.lock().unwrap().as_ref() {
            fs::write(f, "ran").unwrap();
        }
        Ok(json!({"ran": true}))
    }
}

#[test]
fn an_irreversible_call_waiting_for_its_intent_leaves_the_run_s_thread_free_and_runs_after_it() {
    let ws = common::workspace();
    let db = ws.path().join("audit.db");
    let mark = Mark::default();
    let marker = ws.path().join("ran");
    *mark.file.lock().unwrap() = Some(marker.clone());
    let rt = Runtime::builder()
        .workspace(ws.path())
        .audit(&db)
        .flow(mark.clone())
        .build()
        .unwrap();
    let hold = Duration::from_millis(600);
    let lock = DbLock::take(db.clone(), hold, marker.clone());
    let done = Cell::new(false);
    let t0 = Instant::now();
    let call = async {
        let out = rt.call("mark", json!({})).await;
        done.set(true);
        (out, t0.elapsed())
    };
    let ((out, call_done), ticked) = block_on(async { tokio::join!(call, ticks(t0, &done)) });
    let (let_go, existed) = lock.released.recv().unwrap();
    assert_eq!(out.unwrap(), json!({"ran": true}));
    // The intent could not be written while the lock was held, so the
    // call did not run: it ran only after the lock was let go.
    assert!(
        !existed,
        "the irreversible call ran before its intent was recorded"
    );
    let ran = mark.ran.lock().unwrap().expect("mark ran");
    assert!(
        ran >= let_go,
        "mark ran {:?} before the intent could be synced",
        let_go - ran
    );
    let during = ticks_within(&ticked, Duration::ZERO, call_done);
    assert!(
        during >= 20,
        "the loop stalled while the call waited for its intent: {during} ticks in {call_done:?}"
    );
    rt.end("ok", None).unwrap();
}

/// Not a check: how long a grep of 1,000 files takes alone, the median of
/// 15 runs, to compare builds (`cargo test --test concurrent_blocking --
/// --ignored --nocapture`). Its control is the answer.
/// A grep dropped mid-search (its task cancelled) stops its threads at
/// their next read buffer instead of searching on for nobody; the
/// control, the same grep left to finish, takes far longer than that.
#[test]
fn a_grep_dropped_mid_search_stops_its_threads() {
    let _one = GREPS.lock().unwrap_or_else(|e| e.into_inner());
    let ws = common::workspace();
    let big = "a line that holds no such word\n".repeat(2_000_000);
    fs::write(ws.path().join("big.txt"), big).unwrap();
    let rt = runtime(ws.path());
    let input = json!({"pattern": "[a-z]+[0-9]", "root": "big.txt"});
    let t = Instant::now();
    let out = block_on(rt.call("grep", input.clone())).unwrap();
    let whole = t.elapsed();
    assert_eq!(out["filesSearched"], 1);
    assert_eq!(out["totalMatches"], 0);
    assert!(
        whole >= Duration::from_millis(1200),
        "the file is searched too fast: {whole:?}"
    );
    block_on(async {
        let cut = tokio::time::timeout(Duration::from_millis(100), rt.call("grep", input)).await;
        assert!(cut.is_err(), "the grep ended before it was dropped");
    });
    let dropped = Instant::now();
    while threads_named("sluice-grep") > 0 {
        assert!(
            dropped.elapsed() < whole / 2,
            "the dropped grep's threads searched on ({:?} after the drop; the whole search takes {whole:?})",
            dropped.elapsed()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[ignore]
fn timing_grep_over_1000_files_alone() {
    let _one = GREPS.lock().unwrap_or_else(|e| e.into_inner());
    let ws = common::workspace();
    let needles = tree(ws.path(), 1000);
    let rt = runtime(ws.path());
    let times = RefCell::new(Vec::new());
    block_on(async {
        for _ in 0..15 {
            let t = Instant::now();
            let input = json!({"pattern": r"needle \d+", "root": "tree", "filesWithMatches": true});
            let out = rt.call("grep", input).await.unwrap();
            times.borrow_mut().push(t.elapsed());
            assert_eq!(out["files"], json!(needles));
            assert_eq!(out["filesSearched"], 1000);
        }
    });
    let mut times = times.into_inner();
    times.sort();
    eprintln!(
        "grep over 1,000 files: median {:?} (min {:?}, max {:?})",
        times[7], times[0], times[14]
    );
}

/// Not a check: what handing work to tokio's blocking threads costs, and
/// how long a `read` of files of a few sizes takes, to weigh where a read
/// moves off the run's thread (`cargo test --test concurrent_blocking --
/// --ignored --nocapture`). Its control is each page.
#[test]
#[ignore]
fn timing_read_sizes_and_the_hand_off() {
    let ws = common::workspace();
    let rt = runtime(ws.path());
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    block_on(async {
        let mut hand_off = Vec::new();
        for _ in 0..1000 {
            let t = Instant::now();
            tokio::task::spawn_blocking(|| ()).await.unwrap();
            hand_off.push(t.elapsed());
        }
        eprintln!("spawn_blocking round trip: median {:?}", median(hand_off));
        for kib in [4, 64, 128, 255, 256, 1024, 4096] {
            let line = "0123456789abcdef0123456789abcdef0123456789abcdef012345678901234\n";
            let text = line.repeat(kib * 1024 / line.len());
            fs::write(ws.path().join("f.txt"), &text).unwrap();
            let mut took = Vec::new();
            for _ in 0..30 {
                let t = Instant::now();
                let out = rt
                    .call("read", json!({"path": "f.txt", "limit": 1}))
                    .await
                    .unwrap();
                took.push(t.elapsed());
                assert_eq!(out["totalLines"], text.len() / line.len());
            }
            eprintln!("read of {kib} KiB: median {:?}", median(took));
        }
    });
}

// The same through the binary: tasks of a script (`sluice.spawn`), times
// from `sluice.now()` as the script saw them.

/// Lua: `reads(n)`, `n` reads of `small.txt`, each checked, returning
/// when the first and the last ended (ms since `t0`).
const READS: &str = r#"
local t0 = sluice.now()
local function reads(n)
  local first
  for _ = 1, n do
    local out = assert(sluice.read{path = "small.txt"})
    assert(out.content == "one\ntwo", out.content)
    first = first or sluice.now() - t0
  end
  return {first = first, last = sluice.now() - t0}
end
"#;

/// A number the script emitted.
fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_task_s_reads_finish_while_another_task_greps_thousands_of_files() {
    let ws = common::workspace();
    let needles = tree(ws.path(), TREE_FILES);
    fs::write(ws.path().join("small.txt"), "one\ntwo\n").unwrap();
    let body = format!(
        r#"{READS}
        local grep = sluice.spawn(function()
          local out = assert(sluice.grep{{pattern = "needle \\d+", root = "tree", filesWithMatches = true}})
          return {{done = sluice.now() - t0, files = out.files, searched = out.filesSearched}}
        end)
        local read = sluice.spawn(function() return reads(20) end)
        emit(sluice.all{{grep, read}})
        "#
    );
    let out = common::lua_json(ws.path(), &body);
    let (grep, read) = (&out[0][0], &out[0][1]);
    assert!(ms(&grep["done"]) >= 150.0, "the tree is too small: {grep}");
    assert!(
        ms(&read["last"]) < ms(&grep["done"]),
        "the reads waited for the grep: {read} {}",
        grep["done"]
    );
    assert_eq!(grep["files"], json!(needles));
    assert_eq!(grep["searched"], TREE_FILES);
}

#[test]
fn a_task_s_reads_finish_while_another_task_globs_thousands_of_files() {
    // More files than the grep's tree: a walk that only matches names
    // takes 30 ms over 6,000 of them on a quiet machine, under the 50 ms
    // the reads need to show they did not wait.
    const FILES: usize = 4 * TREE_FILES;
    let ws = common::workspace();
    tree(ws.path(), FILES);
    fs::write(ws.path().join("small.txt"), "one\ntwo\n").unwrap();
    let body = format!(
        r#"{READS}
        local glob = sluice.spawn(function()
          local out = assert(sluice.glob{{pattern = "**/f*25.txt", root = "tree"}})
          return {{done = sluice.now() - t0, paths = out.paths, total = out.total}}
        end)
        local read = sluice.spawn(function() return reads(20) end)
        emit(sluice.all{{glob, read}})
        "#
    );
    let out = common::lua_json(ws.path(), &body);
    let (glob, read) = (&out[0][0], &out[0][1]);
    assert!(ms(&glob["done"]) >= 50.0, "the tree is too small: {glob}");
    assert!(
        ms(&read["last"]) < ms(&glob["done"]),
        "the reads waited for the glob: {read} {}",
        glob["done"]
    );
    let mut expected: Vec<String> = (25..FILES)
        .step_by(100)
        .map(|i| format!("tree/d{:02}/f{i:05}.txt", i / 100))
        .collect();
    // In name order, as glob gives them: d100 comes before d11.
    expected.sort();
    assert_eq!(glob["total"], expected.len());
    assert_eq!(glob["paths"], json!(expected));
}

#[test]
fn a_task_s_sleep_loop_keeps_ticking_while_another_task_reads_a_50_mb_file() {
    let ws = common::workspace();
    let lines = 5_000_000;
    let big: String = (1..=lines).map(|i| format!("line {i:07}\n")).collect();
    fs::write(ws.path().join("big.txt"), &big).unwrap();
    drop(big);
    let body = format!(
        r#"
        local t0, done = sluice.now(), false
        local read = sluice.spawn(function()
          local out = assert(sluice.read{{path = "big.txt", offset = {from}}})
          done = true
          return {{done = sluice.now() - t0, content = out.content, total = out.totalLines}}
        end)
        local tick = sluice.spawn(function()
          local ticks = {{}}
          while not done do
            sluice.sleep(10)
            ticks[#ticks + 1] = sluice.now() - t0
          end
          return ticks
        end)
        emit(sluice.all{{read, tick}})
        "#,
        from = lines - 1
    );
    let out = common::lua_json(ws.path(), &body);
    let (read, ticks) = (&out[0][0], out[0][1].as_array().unwrap());
    let done = ms(&read["done"]);
    assert!(
        done >= 80.0,
        "the file is read too fast to show anything: {read}"
    );
    let during = ticks.iter().filter(|t| ms(t) < done).count();
    let expected = (done / 10.0 / 4.0) as usize;
    assert!(
        during >= expected.max(3),
        "the loop stalled while the file was read: {during} ticks in {done} ms"
    );
    assert_eq!(read["total"], lines);
    assert_eq!(
        read["content"],
        format!("line {:07}\nline {lines:07}", lines - 1)
    );
}

/// The attack on the awaited intent: a task cancelled (the script ended)
/// while its irreversible call waits for the intent's sync. The call must
/// not run, and its outcome must complete the intent the writer already
/// holds, not be written as a second row of the same call, which would
/// fail the record. The control: a write before it, recorded as it ran.
#[test]
fn a_task_cancelled_while_its_irreversible_call_waits_for_its_intent_leaves_the_record_whole() {
    let ws = common::workspace();
    let script = r#"
        assert(sluice.write{path = "ready", content = "1"})
        sluice.sleep(1000)
        sluice.spawn(function() return sluice.bash{command = "touch ran"} end)
        sluice.sleep(200)
        print("main ended")
    "#;
    let child = common::spawn_lua(ws.path(), script, &[]);
    let db = ws.path().join(".sluice/audit.db");
    // The file appears a moment before the write's row is committed: the
    // lock is taken once the row is in, or the write itself would wait
    // for it and the script would spawn the command only after.
    let t = Instant::now();
    while !write_recorded(&db) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the script never recorded its write"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let lock = DbLock::take(db, Duration::from_millis(2000), ws.path().join("ran"));
    let run = child.wait_with_output().unwrap();
    let (_, existed) = lock.released.recv().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&run.stdout), "main ended\n");
    assert!(
        !existed && !ws.path().join("ran").exists(),
        "the cancelled call ran"
    );
    assert!(!stderr.contains("incomplete"), "{stderr}");
    let verify = common::sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    let calls = common::exported_calls(ws.path());
    let bash: Vec<&Value> = calls.iter().filter(|c| c["flow"] == "bash").collect();
    assert_eq!(bash.len(), 1, "{calls:?}");
    assert_eq!(bash[0]["error"]["cancelled"], "0.1", "{}", bash[0]);
    let write = calls.iter().find(|c| c["flow"] == "write").unwrap();
    assert!(write["error"].is_null(), "{write}");
}
