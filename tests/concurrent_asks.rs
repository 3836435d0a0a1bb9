//! Asks under concurrency (issue 18). An ask a call makes before it runs is
//! answered on tokio's blocking pool while the asking task waits, so the
//! run's other tasks go on; asks are shown one at a time; a "for the run"
//! answer settles an identical ask that waited behind it, but not a
//! different capability, nor an ask that counts once. With nobody to ask,
//! an ask is `permission_required` at once, as before.
//!
//! The library tests drive a `Runtime` whose approver is a person the test
//! controls, and an embedded `mark` flow that writes into the same ordered
//! log, so "B finished before A's ask was answered" is read off one list.
//! The terminal test drives the `sluice` binary on a pseudo-terminal
//! (`script(1)`), where the prompt goes to `/dev/tty` as it would for a
//! person.

mod common;

use common::{run_lua_with, sluice_bin, workspace};
use serde_json::{json, Value};
use sluice::embed::{CustomFlow, FlowInfo, Granted, Reach};
use sluice::policy::{Answer, Approver, Ask, Source};
use sluice::{FlowError, Runtime, Tier};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for what it expects before it fails.
const LIMIT: Duration = Duration::from_secs(15);

/// One ordered log the approver and the script's `mark` calls write to,
/// from whichever thread they run on.
#[derive(Clone, Default)]
struct Log(Arc<(Mutex<Vec<String>>, Condvar)>);

impl Log {
    fn push(&self, line: impl Into<String>) {
        self.0 .0.lock().unwrap().push(line.into());
        self.0 .1.notify_all();
    }

    /// Waits until a line starts with `prefix`; false when the limit passed.
    fn wait_for(&self, prefix: &str) -> bool {
        let lines = self.0 .0.lock().unwrap();
        let (_lines, waited) = self
            .0
             .1
            .wait_timeout_while(lines, LIMIT, |l| !l.iter().any(|x| x.starts_with(prefix)))
            .unwrap();
        !waited.timed_out()
    }

    fn lines(&self) -> Vec<String> {
        self.0 .0.lock().unwrap().clone()
    }
}

/// `sluice.mark{tag = TEXT}`: writes TEXT to the log. It touches nothing,
/// so it needs no capability.
struct Mark(Log);

impl CustomFlow for Mark {
    fn info(&self) -> FlowInfo {
        FlowInfo {
            name: "mark".into(),
            description: "Writes its tag to the test's log.".into(),
            tier: Tier::Sealed,
            input_schema: json!({"type": "object"}),
            output_schema: json!({"type": "object"}),
        }
    }

    fn plan(&self, _: &Value, _: &Path) -> Result<Reach, FlowError> {
        Ok(Reach::default())
    }

    fn run(&self, input: Value, _: &Granted) -> Result<Value, FlowError> {
        self.0.push(input["tag"].as_str().unwrap_or("?"));
        Ok(json!({}))
    }
}

/// The person asked: logs each ask as it comes in (`asked CAP`) and once
/// answered (`answered CAP`), answers as `decide` says (which may take its
/// time, holding the ask open), and counts the asks it is in at once.
struct Person {
    log: Log,
    decide: Box<dyn Fn(&Ask) -> Answer + Send + Sync>,
    shown: Mutex<Vec<Ask>>,
    inside: AtomicUsize,
    most: AtomicUsize,
}

impl Person {
    fn new(log: &Log, decide: impl Fn(&Ask) -> Answer + Send + Sync + 'static) -> Arc<Person> {
        Arc::new(Person {
            log: log.clone(),
            decide: Box::new(decide),
            shown: Mutex::new(Vec::new()),
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        })
    }

    fn shown(&self) -> Vec<Ask> {
        self.shown.lock().unwrap().clone()
    }

    fn most_at_once(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

impl Approver for Person {
    fn ask(&self, ask: &Ask) -> Answer {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.shown.lock().unwrap().push(ask.clone());
        self.log.push(format!("asked {}", ask.capability));
        let answer = (self.decide)(ask);
        self.log.push(format!("answered {}", ask.capability));
        self.inside.fetch_sub(1, Ordering::SeqCst);
        answer
    }

    fn who(&self) -> String {
        "the test's person".into()
    }
}

/// Reads anywhere in the workspace; asks before any write there.
const ASKS_FOR_WRITES: &str = "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.allow \"fs:read:${workspace}/**\",\n  p.ask \"fs:write:${workspace}/**\",\n} }\n";

/// A runtime in `ws` (recorded in `ws/audit.db`) whose asks go to `person`,
/// with `sluice.mark` writing to `log`, under `policy` (`None`: the
/// default).
fn runtime(ws: &Path, policy: Option<&str>, person: &Arc<Person>, log: &Log) -> Runtime {
    let mut b = Runtime::builder()
        .workspace(ws)
        .audit(ws.join("audit.db"))
        .approver(person.clone())
        .flow(Mark(log.clone()));
    if let Some(text) = policy {
        let path = ws.parent().unwrap().join("policy.lua");
        std::fs::write(&path, text).unwrap();
        b = b.policy(Source::File(path));
    }
    b.build().unwrap()
}

/// Runs `script` to its end on a one-thread runtime, as `sluice run` does,
/// and ends its record.
fn run(rt: &Runtime, script: &str) {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(rt.run_source("asks.lua", script));
    result.unwrap_or_else(|e| panic!("the script failed: {}", e.message));
    rt.end("ok", None).unwrap();
}

/// One call's input field and who approved each of its decisions.
type Approved = (String, Value);

/// Who approved each decision of the run's `flow` calls (those made
/// before each ran, then those made while it ran), by the input `field`
/// (the path, the command): the tasks' calls, then the main chunk's, each
/// in the order they were numbered.
fn approvals_of(ws: &Path, flow: &str, field: &str) -> (Vec<Approved>, Vec<Approved>) {
    let conn = sluice::record::open_existing(&ws.join("audit.db")).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT task, input, decisions, COALESCE(late_decisions, '[]') FROM calls \
             WHERE flow = ?1 ORDER BY task, seq",
        )
        .unwrap();
    let rows: Vec<(String, String, Value)> = stmt
        .query_map([flow], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .map(
            |(task, input, before, during): (String, String, String, String)| {
                let input: Value = serde_json::from_str(&input).unwrap();
                let decisions = [before, during].into_iter().flat_map(|d| {
                    let d: Value = serde_json::from_str(&d).unwrap();
                    d.as_array().unwrap().clone()
                });
                let by = decisions.map(|d| d["approvedBy"].clone()).collect();
                (task, input[field].as_str().unwrap().to_string(), by)
            },
        )
        .collect();
    let (main, tasks): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.0 == "0");
    let strip = |v: Vec<(String, String, Value)>| v.into_iter().map(|(_, f, by)| (f, by)).collect();
    (strip(tasks), strip(main))
}

#[test]
fn while_one_task_s_ask_is_unanswered_another_task_s_sleep_and_read_complete() {
    let ws = workspace();
    std::fs::write(ws.file("b.txt"), "bee").unwrap();
    let log = Log::default();
    // The person answers only once B has finished, or gives up.
    let waits = log.clone();
    let person = Person::new(&log, move |_| {
        if waits.wait_for("B done") {
            Answer::Once
        } else {
            Answer::No(Some("B never finished while the ask was open".into()))
        }
    });
    let rt = runtime(ws.path(), Some(ASKS_FOR_WRITES), &person, &log);
    run(
        &rt,
        r#"
        local a = sluice.spawn(function()
          local ok, err = sluice.write{path = "a.txt", content = "A"}
          sluice.mark{tag = ok and "A wrote" or ("A " .. err.code .. ": " .. tostring(err.reason))}
        end)
        local b = sluice.spawn(function()
          assert(sluice.sleep(200))
          local page = assert(sluice.read{path = "b.txt"})
          sluice.mark{tag = "B done: " .. page.content}
        end)
        sluice.all{a, b}
        "#,
    );
    let cap = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        log.lines(),
        [
            format!("asked {cap}"),
            "B done: bee".to_string(),
            format!("answered {cap}"),
            "A wrote".to_string(),
        ]
    );
    assert_eq!(std::fs::read_to_string(ws.file("a.txt")).unwrap(), "A");
    // The decision is recorded as an ask on one thread always was.
    let (tasks, _) = approvals_of(ws.path(), "write", "path");
    assert_eq!(
        tasks,
        [("a.txt".to_string(), json!(["the test's person, once"]))]
    );
}

#[test]
fn asks_of_tasks_at_once_are_shown_one_at_a_time_and_for_the_run_answers_the_identical_one() {
    let ws = workspace();
    let log = Log::default();
    // Each ask is held open a while, so a second one shown beside it
    // would be counted; a.txt is allowed for the run, c.txt once.
    let person = Person::new(&log, |ask| {
        std::thread::sleep(Duration::from_millis(300));
        if ask.capability.ends_with("/a.txt") {
            Answer::ForRun
        } else {
            Answer::Once
        }
    });
    let rt = runtime(ws.path(), Some(ASKS_FOR_WRITES), &person, &log);
    run(
        &rt,
        r#"
        local function put(path, content)
          return function()
            local ok, err = sluice.write{path = path, content = content}
            sluice.mark{tag = path .. " " .. (ok and "written" or err.code)}
          end
        end
        sluice.all{sluice.spawn(put("a.txt", "1")), sluice.spawn(put("a.txt", "2")),
                   sluice.spawn(put("c.txt", "3"))}
        -- Later, alone: the answer for the run still covers a.txt; c.txt asks again.
        put("a.txt", "4")()
        put("c.txt", "5")()
        "#,
    );
    assert_eq!(person.most_at_once(), 1, "two asks were shown at once");
    let a = format!("fs:write:{}", ws.file("a.txt").display());
    let c = format!("fs:write:{}", ws.file("c.txt").display());
    let mut shown: Vec<String> = person.shown().into_iter().map(|s| s.capability).collect();
    let last = shown.pop();
    shown.sort();
    assert_eq!(
        shown,
        [a.clone(), c.clone()],
        "a.txt once, c.txt once at first"
    );
    assert_eq!(last, Some(c), "then c.txt again, and not a.txt");
    let mut marks = log.lines();
    marks.retain(|l| !l.starts_with("asked") && !l.starts_with("answered"));
    marks[..3].sort();
    assert_eq!(
        marks,
        [
            "a.txt written",
            "a.txt written",
            "c.txt written",
            "a.txt written",
            "c.txt written"
        ]
    );
    let run_long = json!(["the test's person, for the rest of the run"]);
    let once = json!(["the test's person, once"]);
    let (mut by, later) = approvals_of(ws.path(), "write", "path");
    by.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        by,
        [
            ("a.txt".to_string(), run_long.clone()),
            ("a.txt".to_string(), run_long.clone()),
            ("c.txt".to_string(), once.clone()),
        ]
    );
    assert_eq!(
        later,
        [("a.txt".to_string(), run_long), ("c.txt".to_string(), once)]
    );
}

#[test]
fn an_ask_that_counts_once_is_asked_again_whatever_was_answered_for_the_run() {
    let ws = workspace();
    let log = Log::default();
    let person = Person::new(&log, |_| {
        std::thread::sleep(Duration::from_millis(100));
        Answer::ForRun
    });
    let rt = runtime(ws.path(), None, &person, &log);
    run(
        &rt,
        r#"
        local function wide()
          local out = assert(sluice.bash{command = "echo hi", sandboxPermissions = "danger-full-access",
                                         justification = "it needs the whole disk"})
          sluice.mark{tag = "ran " .. out.stdout}
        end
        sluice.all{sluice.spawn(wide), sluice.spawn(wide)}
        "#,
    );
    let shown = person.shown();
    assert_eq!(shown.len(), 2, "asked each time: {shown:?}");
    assert!(shown
        .iter()
        .all(|a| a.once_only && a.capability == "proc:spawn:echo hi"));
    assert_eq!(person.most_at_once(), 1);
    // Each counted once: the record says so, after the allow of echo.
    let (approved, _) = approvals_of(ws.path(), "bash", "command");
    let once = (
        "echo hi".to_string(),
        json!([null, "the test's person, once"]),
    );
    assert_eq!(approved, [once.clone(), once]);
}

/// A command's question for a wider sandbox is put before the call waits
/// for a place among `--max-procs`: with one place, another task's command
/// that overlaps it in nothing runs while the question is open (it was
/// asked once the call held the place, so the other command waited for the
/// answer, and the person, waiting for that command, never gave one).
#[test]
fn a_question_for_a_wider_sandbox_holds_no_place_among_the_commands_in_flight() {
    let ws = workspace();
    let log = Log::default();
    let waits = log.clone();
    let person = Person::new(&log, move |_| {
        if waits.wait_for("B done") {
            Answer::Once
        } else {
            Answer::No(Some("B never ran while the question was open".into()))
        }
    });
    let rt = Runtime::builder()
        .workspace(ws.path())
        .audit(ws.path().join("audit.db"))
        .approver(person.clone())
        .flow(Mark(log.clone()))
        .max_procs(1)
        .build()
        .unwrap();
    run(
        &rt,
        r#"
        local quiet = {mode = "hermetic", reads = {}, writes = {}}
        local function bash(input)
          for k, v in pairs(quiet) do input[k] = v end
          return sluice.bash(input)
        end
        local a = sluice.spawn(function()
          local r, err = bash{command = "echo a", sandboxPermissions = "danger-full-access",
                              justification = "the test"}
          sluice.mark{tag = r and ("A " .. r.stdout) or ("A " .. err.code .. ": " .. err.message)}
        end)
        local b = sluice.spawn(function()
          local r = assert(bash{command = "echo b"})
          sluice.mark{tag = "B done: " .. r.stdout}
        end)
        sluice.all{a, b}
        "#,
    );
    assert_eq!(
        log.lines(),
        [
            "asked proc:spawn:echo a".to_string(),
            "B done: b\n".to_string(),
            "answered proc:spawn:echo a".to_string(),
            "A a\n".to_string(),
        ]
    );
    // Asked before it ran: among the decisions the call was admitted by,
    // none made while it ran.
    let conn = sluice::record::open_existing(&ws.path().join("audit.db")).unwrap();
    let (before, during): (String, Option<String>) = conn
        .query_row(
            "SELECT decisions, late_decisions FROM calls WHERE flow = 'bash' AND input LIKE '%echo a%'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let by: Vec<Value> = serde_json::from_str::<Vec<Value>>(&before)
        .unwrap()
        .iter()
        .map(|d| d["approvedBy"].clone())
        .collect();
    assert_eq!(by, [json!(null), json!("the test's person, once")]);
    assert!(during.as_deref().is_none_or(|d| d == "[]"), "{during:?}");
}

#[test]
fn an_unattended_run_fails_each_task_s_ask_permission_required_while_the_others_go_on() {
    let ws = workspace();
    std::fs::write(ws.file("b.txt"), "bee").unwrap();
    let pol = common::policy(&ws, "asks.lua", ASKS_FOR_WRITES);
    let started = Instant::now();
    let out = run_lua_with(
        ws.path(),
        r#"
        local function put(path)
          return function()
            local ok, err = sluice.write{path = path, content = "x"}
            return ok and "written" or (err.code .. " " .. err.approve)
          end
        end
        local got = sluice.all{sluice.spawn(put("a.txt")), sluice.spawn(put("c.txt")),
                               sluice.spawn(function() return sluice.read{path = "b.txt"}.content end)}
        print(table.concat(got, "\n"))
        "#,
        &["--policy", &pol],
        &[],
    )
    .ok();
    let a = ws.file("a.txt").display().to_string();
    let c = ws.file("c.txt").display().to_string();
    assert_eq!(
        out.stdout,
        format!(
            "permission_required --approve 'fs:write:{a}'\npermission_required --approve 'fs:write:{c}'\nbee\n"
        )
    );
    assert!(!ws.file("a.txt").exists() && !ws.file("c.txt").exists());
    assert!(started.elapsed() < LIMIT, "nobody was waited for");
}

/// `sluice run` on a pseudo-terminal that is its controlling terminal,
/// through `script(1)`: what the test types reaches `/dev/tty`.
struct Terminal {
    child: Child,
    rx: mpsc::Receiver<Vec<u8>>,
    /// Everything shown so far, carriage returns dropped.
    shown: String,
}

const PROMPT: &str = "Allow? [y] once, [a] for the rest of the run, [n] no: ";

impl Terminal {
    fn start(ws: &Path, script: &str, policy: &str) -> Terminal {
        let path = common::script_file(ws, script);
        let line = [
            sluice_bin().display().to_string(),
            "run".into(),
            path.display().to_string(),
            "--workspace".into(),
            ws.display().to_string(),
            "--policy".into(),
            policy.into(),
        ]
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .join(" ");
        common::need_program("script", "apt-get install -y bsdutils");
        let mut child = Command::new("script")
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("SLUICE_CACHE_DIR", common::caches_of(ws))
            .spawn()
            .expect("spawn script(1)");
        let mut out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = out.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            child,
            rx,
            shown: String::new(),
        }
    }

    /// Waits until the terminal has shown `needle` `times` times in all;
    /// everything shown so far.
    fn expect(&mut self, needle: &str, times: usize) -> &str {
        let deadline = Instant::now() + LIMIT;
        while self.shown.matches(needle).count() < times {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self
                    .shown
                    .push_str(&String::from_utf8_lossy(&bytes).replace('\r', "")),
                Err(_) => panic!(
                    "the terminal never showed {needle:?} {times} times; it showed:\n{}",
                    self.shown
                ),
            }
        }
        &self.shown
    }

    fn answer(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the run to end; everything it showed.
    fn finish(mut self) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "the run failed; it showed:\n{}",
                    self.shown
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the run did not end; it showed:\n{}",
                self.shown
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        while let Ok(bytes) = self.rx.recv_timeout(Duration::from_secs(2)) {
            self.shown
                .push_str(&String::from_utf8_lossy(&bytes).replace('\r', ""));
        }
        std::mem::take(&mut self.shown)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn at_the_terminal_one_prompt_at_a_time_other_tasks_go_on_and_a_answers_the_identical_ask() {
    let ws = workspace();
    std::fs::write(ws.file("b.txt"), "bee").unwrap();
    let pol = common::policy(&ws, "asks.lua", ASKS_FOR_WRITES);
    let mut tty = Terminal::start(
        ws.path(),
        r#"
        local function put(path, content)
          return function()
            local ok, err = sluice.write{path = path, content = content}
            print(path .. " " .. (ok and "written" or err.code))
          end
        end
        local b = sluice.spawn(function()
          assert(sluice.sleep(300))
          print("B read " .. assert(sluice.read{path = "b.txt"}).content)
        end)
        sluice.all{sluice.spawn(put("a.txt", "1")), sluice.spawn(put("a.txt", "2")), b}
        put("c.txt", "3")()
        "#,
        &pol,
    );
    let a = ws.file("a.txt").display().to_string();
    let c = ws.file("c.txt").display().to_string();
    tty.expect(PROMPT, 1);
    // The prompt is open; the reading task finishes meanwhile, and no
    // second prompt is shown beside the first.
    let shown = tty.expect("B read bee\n", 1).to_string();
    assert_eq!(shown.matches(PROMPT).count(), 1, "{shown}");
    assert!(
        shown.contains(&format!("sluice: write asks for fs:write:{a}\n")),
        "{shown}"
    );
    tty.answer("a");
    tty.expect("a.txt written\n", 2);
    // A different capability is asked.
    let shown = tty.expect(PROMPT, 2).to_string();
    assert!(shown.ends_with(&format!("sluice: write asks for fs:write:{c}\n  input: {{\"content\":\"3\",\"path\":\"c.txt\"}}\n  why: ask \"fs:write:${{workspace}}/**\" (rules[2] of {pol}): the policy asks a person first\n{PROMPT}")), "{shown}");
    tty.answer("y");
    let shown = tty.finish();
    assert_eq!(shown.matches(PROMPT).count(), 2, "{shown}");
    assert!(shown.contains("c.txt written\n"), "{shown}");
    assert_eq!(std::fs::read_to_string(ws.file("c.txt")).unwrap(), "3");
}
