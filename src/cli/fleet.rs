//! `sluice worker` and `sluice submit`: runs on a fleet of workers through
//! Temporal (feature `fleet`). See `crate::fleet`.

use crate::fleet::activity::{Drain, FleetActivities, Outcome};
use crate::fleet::bundle::{Bundle, Carried};
use crate::fleet::workflow::{SluiceRun, Submitted};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};

/// Where the engine is: shared by every fleet command.
#[derive(Debug, Args)]
pub struct Engine {
    /// The Temporal server's frontend, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub temporal: String,
    /// The Temporal namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The task queue the fleet's workers take runs from.
    #[arg(long, value_name = "QUEUE")]
    pub task_queue: String,
}

/// Take runs from a task queue and run them, recording into a shared PostgreSQL record.
#[derive(Debug, Args)]
#[command(
    long_about = "Take runs from a Temporal task queue and run them, recording into a shared PostgreSQL record. \
Each run executes as a sluice process of its own, started from the script and policies the run carries, in the \
workspace it names (a path every worker reaches). The worker heartbeats each run every second; if it dies or \
stalls, Temporal gives the run to another worker, which resumes it from the record (checking the workspace \
first), and the run's process here ends itself. A resume that meets an irreversible call of unknown outcome \
waits for `sluice resolve`; an ask no terminal answers waits for `sluice answer`.\n\n\
SIGTERM drains the worker: it takes no new run, waits --drain-grace for its runs, hands back those still going \
(stopped, as Ctrl-C stops a run) and exits 0. The record's password comes from the `audit` credential \
(--credentials, SLUICE_CREDENTIAL_AUDIT), PGPASSWORD or ~/.pgpass.",
    after_help = "Examples:\n  SLUICE_CREDENTIAL_AUDIT=... sluice worker --temporal 127.0.0.1:7233 --task-queue agents \\\n    --audit postgres://sluice@db.internal:5432/record --max-runs 4"
)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub engine: Engine,
    /// The shared record every worker records into: postgres://USER@HOST:PORT/DB.
    #[arg(long, value_name = "URL")]
    pub audit: String,
    /// The credentials file the runs' named credentials (and the record's password) come from.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// At most N runs at once on this worker.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_runs: u16,
    /// On SIGTERM the worker takes no new run and waits this long for its runs to end; runs still
    /// going then are stopped (TERM) and handed back to another worker.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub drain_grace: u64,
}

/// Submit a run to a fleet; print its id (and with --wait, follow it to its end).
#[derive(Debug, Args)]
#[command(
    long_about = "Submit a run to a fleet of `sluice worker`s and print its id. The run carries the script's text, \
its arguments and every --policy file's text, each with its SHA-256: a worker runs exactly those, never its own \
disk's copy. An argument that looks like a credential is refused (the engine's history keeps arguments): give \
secrets to the workers as named credentials instead. A run id names one run, ever: a second submit of an id is \
refused. --wait follows the run to its end, prints what the script printed and what sluice said, and exits with \
the run's status, as `sluice run` would.",
    after_help = "Examples:\n  sluice submit fix-tests.lua --temporal 127.0.0.1:7233 --task-queue agents --workspace /shared/app \\\n    --policy team.lua --wait\n  sluice submit triage.lua --temporal 127.0.0.1:7233 --task-queue agents --workspace /shared/app -- issue-42"
)]
pub struct SubmitArgs {
    /// The Lua workflow to run: its text is what the run carries.
    pub script: PathBuf,
    /// Arguments for the script (sluice.args); credential-shaped ones are refused.
    pub args: Vec<String>,
    #[command(flatten)]
    pub engine: Engine,
    /// The workspace, a path every worker reaches (shared storage).
    #[arg(long, value_name = "DIR")]
    pub workspace: String,
    /// A policy file the run carries (repeatable); its text and SHA-256 go with the run.
    #[arg(long, value_name = "FILE")]
    pub policy: Vec<PathBuf>,
    /// The run's id [default: a new one]; a second submit of an id is refused.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// How long a worker may go silent before its run is taken elsewhere, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 8)]
    pub heartbeat_timeout: u64,
    /// Follow the run to its end and exit as `sluice run` would.
    #[arg(long)]
    pub wait: bool,
}

/// A client of the engine `e` names.
pub(super) async fn client(e: &Engine) -> Result<Client, String> {
    let url: url::Url = format!("http://{}", e.temporal)
        .parse()
        .map_err(|err| format!("--temporal {}: give HOST:PORT ({err})", e.temporal))?;
    let connection = Connection::connect(ConnectionOptions::new(url).build())
        .await
        .map_err(|err| format!("cannot reach Temporal at {}: {err}", e.temporal))?;
    Client::new(connection, ClientOptions::new(e.namespace.clone()).build())
        .map_err(|err| format!("Temporal client: {err}"))
}

/// A multi-threaded async runtime for a fleet command.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

pub(super) fn fail(e: String) -> ExitCode {
    eprintln!("sluice: {e}");
    ExitCode::from(2)
}

pub fn worker(args: WorkerArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match rt.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

async fn serve(args: WorkerArgs) -> Result<(), String> {
    use temporalio_sdk::{Worker, WorkerOptions};
    let client = client(&args.engine).await?;
    let runtime = temporalio_sdk::Runtime::from_current_tokio(Default::default())
        .map_err(|e| format!("Temporal runtime: {e}"))?;
    let sluice = std::env::current_exe().map_err(|e| format!("cannot find sluice itself: {e}"))?;
    let drain = Drain::default();
    let activities = FleetActivities {
        drain: drain.clone(),
        audit: args.audit.clone(),
        sluice,
        credentials: args.credentials.clone(),
    };
    let options = WorkerOptions::new(args.engine.task_queue.clone())
        .tuner(slots(usize::from(args.max_runs)))
        // A workflow's next decision goes to the worker that made its last
        // one first; when that worker is dead, the engine waits this long
        // before giving it to another (10 s by default): the run's end
        // after a takeover would wait as long.
        .sticky_queue_schedule_to_start_timeout(Duration::from_secs(1))
        .register_workflow::<SluiceRun>()
        .map_err(|e| format!("{e}"))?
        .register_activities(activities)
        .build();
    let mut worker =
        Worker::new(&runtime, client, options).map_err(|e| format!("Temporal worker: {e}"))?;
    let shutdown = worker.shutdown_handle();
    let grace = Duration::from_secs(args.drain_grace);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch for SIGTERM: {e}"))?;
    tokio::spawn(async move {
        if term.recv().await.is_some() {
            eprintln!(
                "sluice: SIGTERM: draining: no new run; runs still going in {} s are handed back",
                grace.as_secs()
            );
            drain.start(std::time::Instant::now() + grace);
            shutdown();
        }
    });
    eprintln!(
        "sluice: worker taking runs from {} on {} (at most {} at once)",
        args.engine.task_queue, args.engine.temporal, args.max_runs
    );
    worker
        .run()
        .await
        .map_err(|e| format!("Temporal worker: {e}"))?;
    eprintln!("sluice: worker drained");
    Ok(())
}

/// At most `runs` runs (activities) at once; workflow tasks (decisions,
/// quick) as the SDK's default.
fn slots(runs: usize) -> temporalio_sdk::runtime::worker_tuner::WorkerTuner {
    use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder};
    let fixed = FixedSizeSlotSupplier::new;
    TunerHolder::builder()
        .workflow_task_slot_supplier(fixed(100))
        .activity_task_slot_supplier(fixed(runs))
        .local_activity_task_slot_supplier(fixed(runs))
        .nexus_task_slot_supplier(fixed(1))
        .build()
        .into()
}

pub fn submit(args: SubmitArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match rt.block_on(start(args)) {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// The bundle `args` describe, checked as a worker will check it.
fn bundle(args: &SubmitArgs) -> Result<Bundle, String> {
    Bundle::refuse_secrets(&args.args)?;
    let run = match &args.run_id {
        Some(id) => id.clone(),
        None => crate::runtime::fresh_run_id(),
    };
    Ok(Bundle {
        run,
        script: Carried::read(&args.script)?,
        args: args.args.clone(),
        policies: args
            .policy
            .iter()
            .map(|p| Carried::read(p))
            .collect::<Result<_, _>>()?,
        workspace: args.workspace.clone(),
    })
}

async fn start(args: SubmitArgs) -> Result<ExitCode, String> {
    use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};
    let bundle = bundle(&args)?;
    let id = bundle.run.clone();
    let client = client(&args.engine).await?;
    let submitted = Submitted {
        bundle,
        heartbeat_timeout_ms: Duration::from_secs(args.heartbeat_timeout).as_millis() as u64,
    };
    // A run's id names one run, ever: a second submit of it is refused.
    let options = WorkflowStartOptions::new(args.engine.task_queue.clone(), id.clone())
        .id_reuse_policy(temporalio_client::WorkflowIdReusePolicy::RejectDuplicate)
        .build();
    let handle = client
        .start_workflow(SluiceRun::run, submitted, options)
        .await
        .map_err(|e| format!("cannot submit run {id}: {e}"))?;
    println!("{id}");
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let outcome: Outcome = handle
        .get_result(WorkflowGetResultOptions::default())
        .await
        .map_err(|e| format!("run {id}: {e}"))?;
    print!("{}", outcome.stdout);
    eprint!("{}", outcome.stderr);
    Ok(ExitCode::from(outcome.exit.clamp(0, 255) as u8))
}
