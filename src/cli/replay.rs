//! `sluice replay` and `sluice resume`: re-run a recorded script against its
//! record, or continue an interrupted run from where its record ends.

use super::run::{drive, AuditRetry, Grants, RunArgs, RunOptions, Work};
use crate::audit::db::{vals, Db};
use crate::audit::lease;
use crate::audit::open::{self, Opened};
use crate::audit::replay::{calls, Mode, Opener, Record};
use crate::audit::{locate, store};
use crate::kernel::approval::Prompt;
use crate::runtime::Runtime;
use clap::Args;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// Re-run a recorded run against its record, touching nothing.
#[derive(Debug, Args)]
#[command(
    long_about = "Re-run a recorded run's script against its record: every flow call returns its recorded result \
without touching files, processes or the network, and no policy is consulted. Clock readings (sluice.now, \
os.time, os.date, os.clock) and math.random's seed come from the record too.\n\n\
Calls are matched by task and call number within the task, whatever order concurrent tasks make them in this \
time (sluice.sleep is not recorded, so a script may sleep differently). The first call whose flow or input \
differs from the record stops the replay with replay_diverged, naming its task and call (task 0.2, call 3), \
showing the recorded and the new call side by side and the script line that made it. A replay that completes says the run \
reproduced (exit 0); a divergence exits 1.\n\n\
By default the script runs as the record keeps it: its text, and the text of each module it required from its \
folder, so a script file edited or deleted since does not matter (a file that differs from the recorded text is \
named on one line, with both SHA-256 prefixes). A run recorded before the record kept texts runs its file, which \
is refused when its SHA-256 changed since. --script FILE runs another script, and its modules from disk (to see \
where an edited script departs from the record).",
    after_help = "Examples:\n  sluice replay last\n  sluice replay 18c2f3a9 --workspace /tmp/w\n  sluice replay 18c2f3a9 --script fix-v2.lua"
)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub recorded: RecordedRun,
    /// The credentials file that may hold a PostgreSQL record's password as `audit`.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
}

/// Which recorded run, where its record is, and what script to run.
#[derive(Debug, Args)]
pub struct RecordedRun {
    /// The run: an id, a unique prefix of one, `last` (the newest) or `last~N` (N runs before it).
    pub run: String,
    /// Run this script instead of the recorded file.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The record: a SQLite file's path (or sqlite:PATH), or postgres://USER@HOST:PORT/DB
    /// [default: $SLUICE_AUDIT, else WORKSPACE/.sluice/audit.db]. A PostgreSQL password comes
    /// from the credential named `audit` (--credentials, SLUICE_CREDENTIAL_AUDIT), PGPASSWORD or
    /// ~/.pgpass.
    #[arg(long, value_name = "PATH|URL")]
    pub audit: Option<String>,
    /// The workspace whose database holds the run [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Go on even when `sluice audit verify` finds the record tampered with.
    #[arg(long)]
    pub force: bool,
    /// The run's arguments again, when the record keeps some redacted
    /// (they looked like credentials); after `--`.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// Continue an interrupted run: recorded calls replay, then it runs live.
#[derive(Debug, Args)]
#[command(
    long_about = "Continue a run that was interrupted (or failed): the script runs again from the start, calls the \
record holds return their recorded results without running again, and from the first call the record lacks the \
run is live, under the current policy (the policies given now, else the ones the run used). The continued run is \
recorded as a new run whose resumed_from names the old one.\n\n\
Calls are answered by task and call number within the task, so tasks (sluice.spawn, sluice.map) may interleave \
differently this time. Each task goes live on its own, at its first call the record lacks (or a call a stop cut \
short that runs again): another task's recorded calls are still answered, not run twice. A refusal judged \
again under today's policy makes live what every task recorded after that call began, since the recorded run \
went on without its effect.\n\n\
An irreversible call whose outcome is unknown (the process died after recording its intent) is not run again: \
the resume stops there, so you can check by hand whether it happened: then --retry-unknown runs it again (it \
did not happen) or --unknown-ran goes on without it (it did). Nor is an irreversible call that a stop \
request cut short (Ctrl-C or SIGTERM while a command ran: sluice killed it and recorded it STOPPED with what it \
had printed): the resume stops there and shows that output. --retry-unknown runs either again. A call a stop \
cut short that is not irreversible (a grep, a sealed command) runs again without it.\n\n\
After fixing the script: --script FILE runs the new script, replaying as far as it makes the recorded calls and \
stopping (replay_diverged) at the first call that differs; --live-from N also runs live from call #N on, N as \
`sluice audit show RUN` numbers the run's calls (the timeline's #N, one numbering across tasks), even where the \
record holds them: the calls before #N must still match, and #N or later runs under the policy and is recorded. \
N is 1 to the run's calls + 1 (that one: replay them all, then live). A run that ended ok can be resumed this way. \
`sluice audit show` of the new run says from which call it ran live.",
    after_help = "Examples:\n  sluice resume last\n  sluice resume 18c2f3a9 --approve 'net:post:api.example.com'\n  sluice resume 18c2f3a9 --retry-unknown\n  sluice resume last --script fix-v2.lua --live-from 3"
)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub recorded: RecordedRun,
    /// As `sluice run`'s: what a fleet worker tells the resumed run.
    #[command(flatten)]
    pub fleet: super::run::FleetChild,
    /// Run again an irreversible call whose outcome is unknown, or that a stop request cut short
    /// (recorded STOPPED), instead of stopping there.
    #[arg(long, conflicts_with = "unknown_ran")]
    pub retry_unknown: bool,
    /// You checked: the irreversible call whose outcome is unknown did happen. It is not run again;
    /// it returns {resolved = "ran"} (its real result is not known), recorded as its outcome, and
    /// the run goes on.
    #[arg(long)]
    pub unknown_ran: bool,
    /// Before going live, check that every file the run's file flows wrote still holds what they
    /// wrote (the SHA-256 recorded with each write); otherwise stop, naming the files. For a
    /// workspace other machines also reach (a fleet's takeover does this).
    #[arg(long)]
    pub check_workspace: bool,
    /// Take over a run that still says `running` because its process is stopped, stuck or on a
    /// machine that is gone: its lease moves to this process, so its old writer's next write is
    /// refused and it starts no further call; then the run resumes here.
    #[arg(long)]
    pub take_over: bool,
    /// Replay the calls before call #N and run live from #N on, N as `sluice audit show RUN`
    /// numbers the run's calls (its timeline's #N); for a script fixed since, with --script.
    #[arg(long, value_name = "N")]
    pub live_from: Option<String>,
    #[command(flatten)]
    pub grants: Grants,
    /// A model provider for the live part of the run, as `sluice run --provider` (NAME=API:URL,
    /// repeatable); providers the run's policies declare are there already.
    #[arg(long, value_name = "NAME=API:URL")]
    pub provider: Vec<String>,
    /// The model explore's sub-agent runs on in the live part of the run, as `sluice run
    /// --explore-model` (PROVIDER/MODEL).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub explore_model: Option<String>,
    /// The credentials file, as `sluice run --credentials`.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    #[command(flatten)]
    pub retry: AuditRetry,
}

pub fn replay(args: ReplayArgs) -> ExitCode {
    let creds = args.credentials.as_deref();
    let Found {
        record,
        script,
        verifying,
        source,
        ..
    } = match prepare(&args.recorded, creds, Verify::Beside) {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    // Whatever this command says waits for the verdict: a record that does
    // not verify is refused before anything else is shown.
    let said = Said::new(verifying);
    said.push(source.note);
    let settled = |code: ExitCode| {
        said.flush();
        code
    };
    let given = &args.recorded.args;
    let script_args =
        match crate::credentials::restore_args(&record.run.id, &record.run.args, given) {
            Ok(a) => a,
            Err(e) => return settled(fail(e)),
        };
    let recorded_status = record.run.status.clone();
    let id = record.run.id.clone();
    let expected = record.len();
    let mut builder = Runtime::builder()
        .workspace(existing_workspace(&record.run.workspace))
        .args(script_args)
        .script(&script)
        .prompt(Prompt::Unattended)
        .no_audit()
        .source_notes(said.sink())
        .replay(record, Mode::Replay);
    if let Some(text) = source.text {
        builder = builder.recorded_script(text);
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => return settled(fail(e.to_string())),
    };
    let held = said.clone();
    if let Err(e) = runtime.before_output(move || held.flush()) {
        return settled(fail(format!("cannot hold the script's output: {e}")));
    }
    let ended = drive(
        &runtime,
        async {
            let ended = runtime.run_script(&script).await;
            said.flush();
            ended
        },
        Work::Script,
    );
    let answered = runtime.replayed_calls() as usize;
    if runtime.halted().is_some() {
        // An interrupted run's record ends where it stopped: a replay
        // that matched all of it reproduced what there is.
        if recorded_status == "interrupted" && runtime.replay_past_end() && answered == expected {
            eprintln!(
                "sluice: run {id} reproduced up to where it was interrupted: {} answered from the record",
                calls(answered)
            );
            return ExitCode::SUCCESS;
        }
        return ended.exit;
    }
    verdict(&id, &recorded_status, answered, expected, ended)
}

/// Whether the replay reproduced the run: every recorded call answered and
/// the script ended as the run did.
fn verdict(
    id: &str,
    recorded: &str,
    answered: usize,
    expected: usize,
    ended: super::run::Ended,
) -> ExitCode {
    let now = if ended.error.is_some() {
        "failed"
    } else {
        "ok"
    };
    if answered < expected {
        eprintln!(
            "sluice: replay diverged: the script ended after {answered} of the {} of run {id}",
            calls(expected)
        );
        return ExitCode::from(1);
    }
    if now != recorded && !(recorded == "interrupted" && now == "ok") {
        eprintln!("sluice: replay diverged: run {id} ended {recorded}, the replay ended {now}");
        return ExitCode::from(1);
    }
    eprintln!(
        "sluice: run {id} reproduced: {} answered from the record, and it ended {now} as recorded",
        calls(answered)
    );
    ExitCode::SUCCESS
}

pub fn resume(args: ResumeArgs) -> ExitCode {
    let Found {
        store,
        record,
        script,
        source,
        ..
    } = match prepare(&args.recorded, args.credentials.as_deref(), Verify::First) {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    if let Some(note) = &source.note {
        eprintln!("sluice: {note}");
    }
    let live_from = match args.live_from.as_deref().map(|n| live_from(n, &record)) {
        Some(Err(e)) => return fail(e),
        Some(Ok(n)) => Some(n),
        None => None,
    };
    // Held until the resume ends: a second resume started meanwhile would
    // pass the check below too, and run the same calls live.
    let _claim = match open::claim_resume(&store, &record.run.id) {
        Ok(claim) => claim,
        Err(e) => return fail(e),
    };
    if let Some(next) = successor(&*store.db, &record.run.id) {
        return fail(format!(
            "run {} was already resumed as run {next}; resume that one instead (sluice resume {next}), \
             so no call runs twice",
            record.run.id
        ));
    }
    let finished = record.run.status == "ok" && live_from.is_none();
    let running = record.run.status == "running" && !args.take_over;
    if finished || running {
        return fail(format!(
            "run {} is {}; resume continues a run that was interrupted or failed{}",
            record.run.id,
            record.run.status,
            if finished {
                " (or, with --live-from N, runs a finished one live from its call #N)"
            } else {
                " (if its process is stopped, stuck or on a machine that is gone, --take-over fences it \
                 and resumes the run here)"
            }
        ));
    }
    // The run's lease moves here: a writer of it still alive somewhere
    // (stopped, partitioned) is refused at its next write.
    let floor = args.fleet.lease_attempt.unwrap_or(0);
    if let Err(e) = lease::take_over(&*store.db, &record.run.id, &lease::me(), floor) {
        eprintln!("sluice: {e}");
        // Held: the same takeover succeeds once the lease runs out (a fleet
        // worker tries again then).
        return ExitCode::from(if e.held { lease::EXIT_TRY_LATER } else { 2 });
    }
    if args.check_workspace {
        if let Err(e) = check_workspace(&*store.db, &record.run.id) {
            return fail(e);
        }
    }
    let given = &args.recorded.args;
    let script_args =
        match crate::credentials::restore_args(&record.run.id, &record.run.args, given) {
            Ok(a) => a,
            Err(e) => return fail(e),
        };
    let mut run = RunArgs {
        script: script.clone(),
        args: script_args,
        // A resume is a run of its own, which names the run it resumes.
        run_id: None,
        otlp: super::otlp::RunOtlp::default(),
        options: RunOptions {
            workspace: Some(PathBuf::from(&record.run.workspace)),
            grants: Grants {
                // The run's own ceiling still holds: a resume may narrow
                // authority, never widen it.
                ceiling: record
                    .run
                    .ceiling
                    .iter()
                    .cloned()
                    .chain(args.grants.ceiling)
                    .collect(),
                ..args.grants
            },
            keep_spill: false,
            max_jobs: 16,
            max_procs: None,
            max_requests: crate::pipeline::DEFAULT_MAX_REQUESTS as u16,
            resolve: Vec::new(),
            search: None,
            credentials: args.credentials,
            provider: args.provider,
            // A resume's servers are its policies' `lsp` tables.
            lsp: Vec::new(),
            explore_model: args.explore_model,
            // The record is given to the builder below, as opened.
            audit: None,
            no_audit: false,
            retry: args.retry,
            fleet: args.fleet.clone(),
        },
    };
    if run.options.grants.policy.is_empty() {
        run.options.grants.policy = recorded_policies(&*store.db, &record.run.id);
    }
    let id = record.run.id.clone();
    let mode = Mode::Resume {
        retry_unknown: args.retry_unknown,
        unknown_ran: args.unknown_ran,
        live_from,
    };
    let builder = match super::run::configure(&run) {
        Ok(b) => b
            .audit(store.at.clone())
            .audit_retry(run.options.retry.audit_retry)
            .replay(record, mode),
        Err(e) => return fail(e),
    };
    let builder = match source.text {
        Some(text) => builder.recorded_script(text),
        None => builder,
    };
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => return fail(e.to_string()),
    };
    let ended = drive(&runtime, runtime.run_script(&script), Work::Script);
    if runtime
        .halted()
        .is_some_and(|e| crate::audit::replay::record_unreachable(&e))
    {
        eprintln!(
            "sluice: the record could not be reached while run {id} was resumed as run {}: resume that \
             run again once the store is back",
            runtime.run_id()
        );
        return ExitCode::from(lease::EXIT_TRY_LATER);
    }
    eprintln!(
        "sluice: resumed run {id} as run {}: {} answered from the record{}",
        runtime.run_id(),
        calls(runtime.replayed_calls() as usize),
        match (runtime.went_live(), live_from) {
            (true, Some(n)) => format!(", then live (--live-from {n})"),
            (true, None) => ", then live".to_string(),
            (false, _) => String::new(),
        }
    );
    ended.exit
}

/// Whether the workspace holds what run `id` wrote (`audit::store::written_files`):
/// the files that do not, each named with what it should hold, in an
/// error that says the run is not continued on that tree.
fn check_workspace(db: &dyn crate::audit::db::Db, id: &str) -> Result<usize, String> {
    let files = crate::audit::store::written_files(db, id)
        .map_err(|e| format!("cannot read what run {id} wrote: {e}"))?;
    let mut wrong = Vec::new();
    for (path, (want, n)) in &files {
        let now = std::fs::read(path)
            .ok()
            .map(|b| crate::digest::sha256_hex(&b));
        if &now != want {
            let said = match (want, &now) {
                (Some(_), None) => "is missing",
                (None, Some(_)) => "exists again",
                _ => "holds other bytes",
            };
            wrong.push(format!(
                "{path} {said} (call #{n} left it {})",
                match want {
                    Some(h) => format!("with SHA-256 {}", &h[..12]),
                    None => "removed".into(),
                }
            ));
        }
    }
    if wrong.is_empty() {
        return Ok(files.len());
    }
    Err(format!(
        "the workspace does not hold what run {id} wrote, so the run is not continued on it: {}. \
         Restore those files (or give the workspace the run used), then resume again",
        wrong.join("; ")
    ))
}

/// `--live-from N`: a call's number in the run's timeline, from 1 to its
/// calls + 1.
fn live_from(given: &str, record: &Record) -> Result<u64, String> {
    let count = record.own_len() as u64;
    let range = format!(
        "run {} recorded {} (`sluice audit show {}` numbers them #1 to #{count}), so N is 1 to {} ({}: replay them \
         all, then live)",
        record.run.id,
        calls(count as usize),
        record.run.id,
        count + 1,
        count + 1
    );
    let digits = !given.is_empty() && given.bytes().all(|b| b.is_ascii_digit());
    match given.parse::<u64>() {
        Ok(n) if digits && (1..=count + 1).contains(&n) => Ok(n),
        Ok(n) if digits => Err(format!("--live-from {n} is past the run's end: {range}")),
        _ => Err(format!(
            "--live-from {given:?} is not a call number: give N as the #N of `sluice audit show`'s timeline; {range}"
        )),
    }
}

/// When a record is verified: before anything runs (a resume, whose calls
/// go live), or beside a replay (which has no effect but its output).
#[derive(Clone, Copy, PartialEq)]
enum Verify {
    First,
    Beside,
}

/// The verdict on a record verified beside its replay, on a thread of its
/// own: [`Verifying::settle`] waits for it, and a record that does not
/// verify ends the process there with the refusal. Verifying a run of
/// 10,000 calls costs about what replaying it does; the second core does it.
#[derive(Clone, Default)]
struct Verifying(Rc<RefCell<Option<std::thread::JoinHandle<()>>>>);

impl Verifying {
    /// Verifies run `id` of the record `again` opens, on a thread of its own.
    fn start(again: Opener, id: String) -> std::io::Result<Verifying> {
        let handle = std::thread::Builder::new()
            .name("sluice-verify".into())
            .spawn(move || {
                let verdict = again().and_then(|db| crate::audit::verify::verify(&*db, &id));
                if let Err(refusal) = verdict.and_then(|v| refuse_unless_intact(&id, v)) {
                    // Nothing was shown yet: all of it waits for this thread.
                    eprintln!("sluice: {refusal}");
                    std::process::exit(2);
                }
            })?;
        Ok(Verifying(Rc::new(RefCell::new(Some(handle)))))
    }

    /// Returns once the record verified (or never, when it did not).
    fn settle(&self) {
        let handle = self.0.borrow_mut().take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// The refusal of run `id`'s record, unless `verdict` found it intact.
fn refuse_unless_intact(id: &str, verdict: crate::audit::verify::Verdict) -> Result<(), String> {
    if verdict.intact {
        return Ok(());
    }
    Err(format!(
        "the record of run {id} does not verify ({}); `sluice audit verify {id}` shows where. \
         Give --force to go on anyway",
        verdict
            .problem
            .map_or_else(|| "its chain is broken".into(), |p| p.message)
    ))
}

/// What a replay says of itself, held (as the script's output is) until
/// the record's verdict: a tampered record is refused with nothing shown.
#[derive(Clone)]
struct Said {
    verifying: Verifying,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Said {
    fn new(verifying: Verifying) -> Said {
        Said {
            verifying,
            lines: Arc::default(),
        }
    }

    /// Holds `line`, if any, until the next [`Said::flush`].
    fn push(&self, line: Option<String>) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.extend(line);
    }

    /// What the runtime says while the script runs (a module whose file
    /// differs from the recorded text), held the same way.
    fn sink(&self) -> Arc<dyn Fn(&str) + Send + Sync> {
        let lines = self.lines.clone();
        Arc::new(move |line: &str| {
            let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
            lines.push(line.to_string());
        })
    }

    /// Waits for the verdict, then says what was held.
    fn flush(&self) {
        self.verifying.settle();
        let held = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        for line in held {
            eprintln!("sluice: {line}");
        }
    }
}

/// What a replay or a resume starts from.
struct Found {
    /// The record, opened.
    store: Opened,
    /// The run's record.
    record: Record,
    /// The script to run.
    script: PathBuf,
    /// Its text as the record keeps it, and what to say of its file.
    source: Source,
    /// The record's verdict, when it is reached `Beside` the replay.
    verifying: Verifying,
}

/// The recorded script's text, which runs in place of its file, and the
/// line that says the file differs from it; neither for a script given
/// with `--script`, or recorded before the record kept texts.
#[derive(Default)]
struct Source {
    text: Option<String>,
    note: Option<String>,
}

/// The record, the run's record in it, the script to run, and the
/// record's verdict when it is reached `Beside` the replay.
fn prepare(given: &RecordedRun, creds: Option<&Path>, when: Verify) -> Result<Found, String> {
    let ws = match &given.workspace {
        Some(ws) => ws.clone(),
        None => {
            std::env::current_dir().map_err(|e| format!("cannot read the current folder: {e}"))?
        }
    };
    let at = locate(given.audit.as_deref(), &ws)?;
    let store = open::to_read(&at, creds)?;
    let conn = &*store.db;
    let id = store::find_run(conn, &given.run)?;
    // --force reads a record that may not verify: it is judged first, to
    // know how to read it.
    let beside = (when == Verify::Beside && !given.force)
        .then(|| Verifying::start(store.again.clone(), id.clone()).ok())
        .flatten();
    let (record, verifying) = match beside {
        // The verification beside it checks its items kept by content (a
        // replay that meets a lost one stops there): loading does not
        // read every row for them first.
        Some(verifying) => (Record::load_verified(&store, &id), verifying),
        None => {
            let verdict = crate::audit::verify::verify(conn, &id)?;
            let intact = verdict.intact;
            if !given.force {
                refuse_unless_intact(&id, verdict)?;
            }
            let record = if intact {
                Record::load_verified(&store, &id)
            } else {
                Record::load(&store, &id)
            };
            (record, Verifying::default())
        }
    };
    let found = record.and_then(|record| {
        let (script, source) = match &given.script {
            Some(file) => (file.clone(), Source::default()),
            None => recorded_script(&record)?,
        };
        Ok((record, script, source))
    });
    match found {
        Ok((record, script, source)) => Ok(Found {
            store,
            record,
            script,
            source,
            verifying,
        }),
        Err(e) => {
            verifying.settle();
            Err(e)
        }
    }
}

/// The newest run that resumed run `id`, if any.
fn successor(store: &dyn Db, id: &str) -> Option<String> {
    crate::audit::store::successor(store, id).ok().flatten()
}

/// The recorded script: its file, and its text as the record keeps it
/// (said when the file differs, or is gone); a run whose text the record
/// does not keep runs its file, refused when it changed since the run.
fn recorded_script(record: &Record) -> Result<(PathBuf, Source), String> {
    let path = PathBuf::from(&record.run.script);
    if record.run.script.is_empty() {
        return Err(format!(
            "run {} was not made from a script file; give one with --script FILE",
            record.run.id
        ));
    }
    if record.run.script == crate::mcp::RUN_NAME && record.run.script_sha256.is_none() {
        return Err(format!(
            "run {} was served by sluice mcp: its calls came from an MCP client, not a script, so there is \
             nothing to re-run; `sluice audit show {}` lists them, and `sluice audit verify` checks them",
            record.run.id, record.run.id
        ));
    }
    if let Some(text) = record.script_text() {
        let note = differs(record, &path, &text);
        let source = Source {
            text: Some(text),
            note,
        };
        return Ok((path, source));
    }
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "the recorded script {} cannot be read ({e}); give it with --script FILE",
            path.display()
        )
    })?;
    let now = crate::digest::sha256_hex(&bytes);
    match &record.run.script_sha256 {
        Some(then) if *then != now => Err(format!(
            "the script {} changed since run {} (SHA-256 {} then, {} now); replay it with --script {} to see \
             where it departs from the record, or restore the recorded version",
            path.display(),
            record.run.id,
            &then[..12],
            &now[..12],
            path.display()
        )),
        _ => Ok((path, Source::default())),
    }
}

/// The line that says the script file at `path` is not the `text` run
/// `record` kept (edited, or gone), if it is not.
fn differs(record: &Record, path: &Path, text: &str) -> Option<String> {
    let recorded = crate::digest::sha256_hex(text.as_bytes());
    let (then, id) = (&recorded[..12], &record.run.id);
    match std::fs::read(path) {
        Ok(bytes) => {
            let now = crate::digest::sha256_hex(&bytes);
            (now != recorded).then(|| {
                format!(
                    "the script {} differs from the text run {id} recorded (SHA-256 {then} recorded, {} on \
disk); the recorded text runs (--script {} runs the file)",
                    path.display(),
                    &now[..12],
                    path.display()
                )
            })
        }
        Err(_) => Some(format!(
            "the script {} is gone (SHA-256 {then} recorded, none on disk); the text run {id} recorded runs",
            path.display()
        )),
    }
}

/// The policies the run used, by the name they were given.
fn recorded_policies(store: &dyn Db, id: &str) -> Vec<String> {
    let names = store
        .value::<String>("SELECT policies FROM runs WHERE id = ?1", vals![id])
        .ok()
        .flatten();
    let files: Vec<crate::audit::recorder::PolicyFile> = names
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    files.into_iter().map(|p| p.name).collect()
}

/// The recorded workspace, or the current folder when it is gone: a replay
/// touches neither.
fn existing_workspace(recorded: &str) -> PathBuf {
    let path = PathBuf::from(recorded);
    if path.is_dir() {
        path
    } else {
        PathBuf::from(".")
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("sluice: {message}");
    ExitCode::from(2)
}
