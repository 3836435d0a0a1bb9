//! The operator's commands on a fleet's runs: `runs`, `status`, `cancel`,
//! `resolve`, `asks` and `answer`. Each speaks to the engine (the run's
//! workflow: its state query and its signals); `status` also reads the
//! shared record, which says which worker ran which part.

use super::fleet::{client, fail, runtime, Engine};
use crate::fleet::workflow::{Question, Reply, Resolution, SluiceRun, State, Word};
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use temporalio_client::{Client, WorkflowHandle};

/// The engine alone: the task queue does not matter to a run once started.
#[derive(Debug, Args)]
pub struct Reach {
    /// The Temporal server's frontend, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub temporal: String,
    /// The Temporal namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
}

/// List the fleet's runs: id, state on the engine, and what each waits for.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sluice runs --temporal 127.0.0.1:7233\n  sluice runs --temporal 127.0.0.1:7233 --namespace agents --json"
)]
pub struct RunsArgs {
    #[command(flatten)]
    pub reach: Reach,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One run: its state, the operator's word it waits for, its questions, and (with --audit)
/// which worker ran which part.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sluice status r-42 --temporal 127.0.0.1:7233\n  sluice status r-42 --temporal 127.0.0.1:7233 --audit postgres://sluice@db:5432/record --json"
)]
pub struct StatusArgs {
    /// The run's id (its workflow's).
    pub run: String,
    #[command(flatten)]
    pub reach: Reach,
    /// The shared record, to show the run's attempts (run, worker, lease, calls).
    #[arg(long, value_name = "URL")]
    pub audit: Option<String>,
    /// The credentials file the record's password comes from.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Cancel a run: its command is stopped (TERM, then KILL) and the workflow ends cancelled.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  sluice cancel r-42 --temporal 127.0.0.1:7233")]
pub struct CancelArgs {
    /// The run's id, as `sluice submit` printed it.
    pub run: String,
    #[command(flatten)]
    pub reach: Reach,
}

/// Give the operator's word on the irreversible call of unknown outcome a run waits on.
#[derive(Debug, Args)]
#[command(
    after_help = "Words:\n  ran          it happened: the run goes on without running it again (the call \
returns {resolved = \"ran\"})\n  did-not-run  it did not: the run runs it, once\n  abandon      the run ends here\n\n\
Examples:\n  sluice status r-42 --temporal 127.0.0.1:7233      # waits on call #3 (http_post ...)\n  \
sluice resolve r-42 --call 3 did-not-run --temporal 127.0.0.1:7233"
)]
pub struct ResolveArgs {
    /// The run's id, as `sluice submit` printed it.
    pub run: String,
    /// The call's number, as `sluice status` names it.
    #[arg(long, value_name = "N")]
    pub call: i64,
    /// ran, did-not-run or abandon.
    #[arg(value_parser = ["ran", "did-not-run", "abandon"])]
    pub word: String,
    #[command(flatten)]
    pub reach: Reach,
    /// Who gives the word, as the run's history keeps it [default: USER@HOST].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// List the questions fleet runs wait on (of one run, or of every running run).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sluice asks --temporal 127.0.0.1:7233          # every running run's questions\n  sluice asks r-42 --temporal 127.0.0.1:7233 --json"
)]
pub struct AsksArgs {
    /// Only this run's questions.
    pub run: Option<String>,
    #[command(flatten)]
    pub reach: Reach,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Answer a run's question: allow or deny (the answer is recorded as the call's decision,
/// naming who answered).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sluice asks r-42 --temporal 127.0.0.1:7233                # lists ask-1\n  sluice answer r-42 ask-1 allow --temporal 127.0.0.1:7233\n  sluice answer r-42 ask-1 allow --for-run --by alice --temporal 127.0.0.1:7233"
)]
pub struct AnswerArgs {
    /// The run's id, as `sluice submit` printed it.
    pub run: String,
    /// The question's id, as `sluice asks` lists it.
    pub ask: String,
    /// allow or deny.
    #[arg(value_parser = ["allow", "deny"])]
    pub answer: String,
    /// Allow the same ask for the rest of the run, not this once.
    #[arg(long)]
    pub for_run: bool,
    #[command(flatten)]
    pub reach: Reach,
    /// Who answers, as the record names them [default: USER@HOST].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `command` on a fresh async runtime with a client of `reach`'s engine.
fn with_client<F, Fut>(reach: &Reach, command: F) -> ExitCode
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, String>>,
{
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let engine = Engine {
        temporal: reach.temporal.clone(),
        namespace: reach.namespace.clone(),
        task_queue: String::new(),
    };
    rt.block_on(async {
        match client(&engine).await {
            Ok(c) => command(c).await,
            Err(e) => Err(e),
        }
    })
    .unwrap_or_else(fail)
}

type Handle = WorkflowHandle<Client, SluiceRun>;

/// The run's state on the engine: its execution's status (`RUNNING`,
/// `COMPLETED`, ...) and, while it runs, its workflow's state.
async fn engine_state(handle: &Handle, run: &str) -> Result<(String, Option<State>), String> {
    use temporalio_client::{WorkflowDescribeOptions, WorkflowQueryOptions};
    let described = handle
        .describe(WorkflowDescribeOptions::default())
        .await
        .map_err(|e| not_a_run(run, e))?;
    let status = described
        .raw_description
        .workflow_execution_info
        .as_ref()
        .map(|i| {
            i.status()
                .as_str_name()
                .trim_start_matches("WORKFLOW_EXECUTION_STATUS_")
                .to_string()
        })
        .unwrap_or_default();
    if status != "RUNNING" {
        return Ok((status, None));
    }
    let state = handle
        .query(SluiceRun::state, (), WorkflowQueryOptions::default())
        .await
        .map_err(|e| format!("run {run}: its state cannot be read (is a worker running?): {e}"))?;
    Ok((status, Some(state)))
}

fn not_a_run(run: &str, e: impl std::fmt::Display) -> String {
    format!("no fleet run {run} on the engine (`sluice runs` lists them): {e}")
}

/// Who the operator is, unless named: USER@HOST.
fn operator(by: &Option<String>) -> String {
    by.clone().unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_else(|_| "someone".into());
        format!("{user}@{}", crate::audit::lease::host())
    })
}

pub fn resolve(args: ResolveArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        use temporalio_client::WorkflowSignalOptions;
        let handle: Handle = client.get_workflow_handle(args.run.clone());
        let (status, state) = engine_state(&handle, &args.run).await?;
        let waiting = state.as_ref().and_then(|s| s.unknown.clone());
        let Some(unknown) = waiting else {
            return Err(format!(
                "run {} waits for no word (it is {}): `sluice status {}` shows what it does",
                args.run,
                state.map_or(status.to_lowercase(), |s| s.phase),
                args.run
            ));
        };
        if unknown.call != args.call {
            return Err(format!(
                "run {} waits on call #{} ({} {}), not #{}: give --call {}",
                args.run, unknown.call, unknown.flow, unknown.input, args.call, unknown.call
            ));
        }
        let word = Word::parse(&args.word).expect("clap checked the word");
        let given = Resolution {
            call: args.call,
            word,
            by: operator(&args.by),
        };
        handle
            .signal(SluiceRun::resolve, given, WorkflowSignalOptions::default())
            .await
            .map_err(|e| format!("cannot signal run {}: {e}", args.run))?;
        eprintln!(
            "sluice: run {}: call #{} {}",
            args.run, args.call, args.word
        );
        Ok(ExitCode::SUCCESS)
    })
}

pub fn cancel(args: CancelArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        use temporalio_client::WorkflowCancelOptions;
        let handle: Handle = client.get_workflow_handle(args.run.clone());
        handle
            .cancel(WorkflowCancelOptions::default())
            .await
            .map_err(|e| not_a_run(&args.run, e))?;
        eprintln!("sluice: run {} cancelled", args.run);
        Ok(ExitCode::SUCCESS)
    })
}

pub fn answer(args: AnswerArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        use temporalio_client::WorkflowSignalOptions;
        let handle: Handle = client.get_workflow_handle(args.run.clone());
        let (_, state) = engine_state(&handle, &args.run).await?;
        let pending = state
            .as_ref()
            .is_some_and(|s| s.questions.iter().any(|q| q.id == args.ask));
        if !pending {
            return Err(format!(
                "run {} has no pending question {} (answered, timed out, or never put): `sluice asks {}` lists them",
                args.run, args.ask, args.run
            ));
        }
        let reply = Reply {
            ask: args.ask.clone(),
            allow: args.answer == "allow",
            for_run: args.for_run,
            by: operator(&args.by),
        };
        handle
            .signal(SluiceRun::answer, reply, WorkflowSignalOptions::default())
            .await
            .map_err(|e| format!("cannot signal run {}: {e}", args.run))?;
        eprintln!(
            "sluice: run {}: question {} answered {}",
            args.run, args.ask, args.answer
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// The ids of the fleet's runs, newest first, with their engine status.
async fn list(client: &Client, only_running: bool) -> Result<Vec<(String, String)>, String> {
    use futures::StreamExt;
    use temporalio_client::WorkflowListOptions;
    let mut query = "WorkflowType = 'SluiceRun'".to_string();
    if only_running {
        query.push_str(" AND ExecutionStatus = 'Running'");
    }
    let mut stream = client.list_workflows(query, WorkflowListOptions::default());
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        let w = item.map_err(|e| format!("cannot list the fleet's runs: {e}"))?;
        let status = format!("{:?}", w.status()).to_uppercase();
        out.push((w.id().to_string(), status));
    }
    Ok(out)
}

pub fn runs(args: RunsArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        let all = list(&client, false).await?;
        if !args.json {
            println!("{:<40} {:<12} WAITS FOR", "RUN", "STATE");
        }
        for (id, status) in all {
            let handle: Handle = client.get_workflow_handle(id.clone());
            let state = match status.as_str() {
                "RUNNING" => engine_state(&handle, &id).await.ok().and_then(|(_, s)| s),
                _ => None,
            };
            let waits = state.as_ref().map(waits_for).unwrap_or_default();
            if args.json {
                println!("{}", json!({"run": id, "state": status, "waits": waits}));
            } else {
                println!("{id:<40} {status:<12} {waits}");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// What a running run waits for, on one line (empty: nothing).
fn waits_for(state: &State) -> String {
    if let Some(u) = &state.unknown {
        return format!(
            "the operator's word on call #{} ({} {}): sluice resolve --call {} ran|did-not-run|abandon",
            u.call, u.flow, u.input, u.call
        );
    }
    match state.questions.len() {
        0 => String::new(),
        n => format!("{n} question(s): sluice asks"),
    }
}

pub fn asks(args: AsksArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        let runs = match &args.run {
            Some(run) => vec![run.clone()],
            None => list(&client, true)
                .await?
                .into_iter()
                .map(|(id, _)| id)
                .collect(),
        };
        for run in runs {
            let handle: Handle = client.get_workflow_handle(run.clone());
            let Some(state) = engine_state(&handle, &run).await?.1 else {
                continue;
            };
            for q in state.questions {
                print_question(&run, &q, args.json);
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn print_question(run: &str, q: &Question, as_json: bool) {
    if as_json {
        let mut v = serde_json::to_value(q).unwrap_or(Value::Null);
        v["run"] = json!(run);
        println!("{v}");
        return;
    }
    let left = (q.until_ms - crate::audit::now_ms()).max(0) / 1000;
    println!(
        "{run} {}: {} asks {} ({}); {}\n  answer: sluice answer {run} {} allow|deny [--for-run]  ({left} s left)",
        q.id, q.flow, q.capability, q.input, q.reason, q.id
    );
}

pub fn status(args: StatusArgs) -> ExitCode {
    with_client(&args.reach, |client| async move {
        let handle: Handle = client.get_workflow_handle(args.run.clone());
        let (engine, state) = engine_state(&handle, &args.run).await?;
        let outcome = match engine.as_str() {
            "COMPLETED" => handle
                .get_result(Default::default())
                .await
                .ok()
                .map(|o| json!({"status": o.status, "exit": o.exit, "attempts": o.attempts})),
            _ => None,
        };
        let parts = match &args.audit {
            Some(url) => attempts(url, args.credentials.clone(), &args.run).await?,
            None => Vec::new(),
        };
        let report = json!({
            "run": args.run,
            "engine": engine,
            "phase": state.as_ref().map(|s| s.phase.clone()),
            "unknown": state.as_ref().and_then(|s| s.unknown.clone()),
            "questions": state.as_ref().map(|s| s.questions.clone()).unwrap_or_default(),
            "resolutions": state.as_ref().map(|s| s.resolutions.clone()).unwrap_or_default(),
            "outcome": outcome,
            "attempts": parts,
        });
        if args.json {
            println!("{report}");
        } else {
            print_status(&report, state.as_ref());
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn print_status(report: &Value, state: Option<&State>) {
    println!(
        "run {}: {}",
        report["run"].as_str().unwrap_or(""),
        report["engine"].as_str().unwrap_or("")
    );
    if let Some(s) = state {
        let waits = waits_for(s);
        println!(
            "  {}{}",
            s.phase,
            if waits.is_empty() {
                String::new()
            } else {
                format!(": waits for {waits}")
            }
        );
    }
    if let Some(o) = report["outcome"].as_object() {
        println!(
            "  ended {} (exit {})",
            o["status"].as_str().unwrap_or(""),
            o["exit"]
        );
    }
    for a in report["attempts"].as_array().into_iter().flatten() {
        println!(
            "  record run {} {} by {} (lease {}), {} calls",
            a["id"].as_str().unwrap_or(""),
            a["status"].as_str().unwrap_or(""),
            a["owner"].as_str().unwrap_or("?"),
            a["attempt"],
            a["calls"]
        );
    }
}

/// The chain of recorded runs of fleet run `run`: each part, its worker
/// (the lease's owner), lease attempt, status and calls.
async fn attempts(
    url: &str,
    credentials: Option<PathBuf>,
    run: &str,
) -> Result<Vec<Value>, String> {
    let (url, run) = (url.to_string(), run.to_string());
    tokio::task::spawn_blocking(move || {
        use crate::audit::{db::vals, location::Location, open};
        let opened = open::to_read(&Location::parse(&url)?, credentials.as_deref())?;
        let db = &*opened.db;
        let chain = crate::audit::store::resumes(db, &run).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for id in chain {
            let row = db
                .first(
                    "SELECT status, owner, attempt, (SELECT count(*) FROM calls WHERE run = ?1) FROM runs WHERE id = ?1",
                    vals![&id],
                )
                .map_err(|e| e.to_string())?;
            let Some(row) = row else { break };
            let (status, owner, attempt, calls): (String, Option<String>, i64, i64) =
                (row.get(0).map_err(|e| e.to_string())?, row.get(1).map_err(|e| e.to_string())?, row.get(2).map_err(|e| e.to_string())?, row.get(3).map_err(|e| e.to_string())?);
            out.push(json!({"id": id, "status": status, "owner": owner, "attempt": attempt, "calls": calls}));
        }
        Ok(out)
    })
    .await
    .map_err(|e| e.to_string())?
}
