//! `sluice audit`: read the record runs leave (list, show, export, verify).

use super::print;
use crate::audit::{locate, query, store};
use clap::{Args, Subcommand, ValueEnum};
use rusqlite::Connection;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Read the audit record: list runs, show a run's calls, export it, verify it.
#[derive(Debug, Args)]
#[command(
    long_about = "Read the audit record. Every `sluice run` records a run (script and its SHA-256, policies, \
arguments, workspace, status) and one row per flow call (input, capabilities and each decision, route, \
tier, output or error, timing) in a SQLite database: the workspace's .sluice/audit.db unless --audit PATH \
or SLUICE_AUDIT names another. Secrets are redacted before they are written, and the record says what was.\n\n\
Rows are hash-chained and each finished run is sealed, so `sluice audit verify` shows whether anything was \
edited, removed or reordered since. An irreversible call is written before it runs; if the process died \
during it, its outcome is unknown and every view says OUTCOME UNKNOWN.\n\n\
A RUN is an id, a unique prefix of one, or `last` for the newest run. --json prints what a program wants.",
    after_help = "Examples:\n  sluice audit list\n  sluice audit show last\n  sluice audit show last --call 4\n  \
sluice audit export last --format csv --output run.csv\n  sluice audit verify\n  \
sluice audit list --json --audit /srv/records/audit.db"
)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    List(ListArgs),
    Show(ShowArgs),
    Export(ExportArgs),
    Verify(VerifyArgs),
}

/// Where the record is, and how to print it: shared by every subcommand.
#[derive(Debug, Args)]
pub struct Db {
    /// The audit database [default: $SLUICE_AUDIT, else DIR/.sluice/audit.db of --workspace].
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// The workspace whose record to read [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print JSON for programs instead of text.
    #[arg(long)]
    pub json: bool,
}

/// List the recorded runs, newest first.
#[derive(Debug, Args)]
#[command(
    long_about = "List the recorded runs, newest first: id, script (clipped from the left to fit), status \
(running, ok, failed, or interrupted when the process died), calls, irreversible calls (IRREV), calls the \
policy stopped (DENIED: permission_denied, or permission_required for an ask nobody approved), how long it \
took, and when it started (UTC). Runs holding a call whose outcome is unknown are named under the table.",
    after_help = "Examples:\n  sluice audit list\n  sluice audit list --limit 0\n  sluice audit list --json | jq '.runs[] | select(.denials > 0) | .id'"
)]
pub struct ListArgs {
    /// How many runs to show; 0 shows them all.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub db: Db,
}

/// Show a run's header and the timeline of its calls, or one call whole.
#[derive(Debug, Args)]
#[command(
    long_about = "Show a run: a header (script and its SHA-256, policies, arguments, workspace, status and \
error, version, the run it resumed, whether it is sealed, counts) and a timeline with one line per flow call \
in chain order: #N, time from the run's start, flow, tier, decision (allow; deny by the rule or hook; \
ask→approved by whom), route (host sandbox mode or container; — for a flow that runs no process), outcome \
(ok, the error code, or OUTCOME UNKNOWN for a call whose process died before its outcome was written), \
duration, and the gist of its input.\n\n\
--call N prints call #N whole: every field, input, output and error as JSON, each decision with its rule and \
reason, what was redacted, whether the output was capped, and its hashes.",
    after_help = "Examples:\n  sluice audit show last\n  sluice audit show 3f9c --call 12\n  sluice audit show last --call 2 --json | jq .output"
)]
pub struct ShowArgs {
    /// The run: an id, a unique prefix of one, or `last`.
    pub run: String,
    /// Show call #N whole (N as the timeline numbers them).
    #[arg(long, value_name = "N")]
    pub call: Option<i64>,
    #[command(flatten)]
    pub db: Db,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

/// Export a run's record as JSON lines or CSV.
#[derive(Debug, Args)]
#[command(
    long_about = "Export a run's record to stdout, or to --output FILE.\n\n\
jsonl: a first line {\"type\":\"run\",...} with the run's fields, then one {\"type\":\"call\",...} line per \
call in chain order; input, output, error, decisions, route and the other JSON columns are embedded as JSON. \
`outcome` is ok, error, unknown (the process died before the outcome was written) or pending (the run is \
still live).\n\n\
csv: a header row, then one row per call (RFC 4180 quoting, CRLF line ends); JSON columns hold their JSON \
text exactly as stored, the bytes the hashes cover.\n\n\
--json is --format jsonl.",
    after_help = "Examples:\n  sluice audit export last > run.jsonl\n  sluice audit export last --format csv --output run.csv\n  sluice audit export 3f9c | jq -c 'select(.type == \"call\" and .outcome != \"ok\")'"
)]
pub struct ExportArgs {
    /// The run: an id, a unique prefix of one, or `last`.
    pub run: String,
    /// jsonl (one JSON object a line) or csv.
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    /// Write the export to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: Db,
}

/// Recompute the hash chain of a run (or every run) and say whether it is intact.
#[derive(Debug, Args)]
#[command(
    long_about = "Recompute the hash chain of a run, or of every run, and say whether its record is intact. \
Each call row's hash covers its fields and the hash of the row before it (the first covers the run's own \
fields); each outcome's hash covers the status, output, error and duration; and the seal written when the \
run ends covers every row, every clock reading and the final status. So an edited row, a removed or \
reordered row, an edited outcome or a rewritten status shows.\n\n\
For a run that does not match, the first row that does not is named (#N, task, seq, flow) with what failed: \
content edited, a row missing before it, rows out of order, outcome edited, or the seal. A run killed before \
it could seal is reported intact with a warning: rows removed from its end could not show.\n\n\
Exits 0 when every run checked is intact, 1 when any is not, 2 when the record cannot be read.",
    after_help = "Examples:\n  sluice audit verify\n  sluice audit verify last\n  sluice audit verify --json --audit /srv/records/audit.db"
)]
pub struct VerifyArgs {
    /// The run: an id, a unique prefix of one, or `last` [default: every run].
    pub run: Option<String>,
    #[command(flatten)]
    pub db: Db,
}

pub fn audit(args: AuditArgs) -> ExitCode {
    let result = match args.command {
        AuditCommand::List(a) => list(a),
        AuditCommand::Show(a) => show(a),
        AuditCommand::Export(a) => export(a),
        AuditCommand::Verify(a) => verify(a),
    };
    result.unwrap_or_else(|e| {
        eprintln!("sluice: {e}");
        ExitCode::from(2)
    })
}

/// Opens the database `db` names, for reading.
fn open(db: &Db) -> Result<Connection, String> {
    let workspace = match &db.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot tell the current folder ({e}); give --workspace DIR"))?,
    };
    store::open_existing(&locate(db.audit.as_deref(), &workspace))
}

/// `value` as JSON, or `text` of it.
fn emit<T: Serialize>(json: bool, value: &T, text: impl FnOnce(&T) -> String) -> ExitCode {
    if json {
        let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
        s.push('\n');
        print(&s)
    } else {
        print(&text(value))
    }
}

fn list(a: ListArgs) -> Result<ExitCode, String> {
    let conn = open(&a.db)?;
    let listing = query::list(&conn, a.limit)?;
    Ok(emit(a.db.json, &listing, query::render_list))
}

fn show(a: ShowArgs) -> Result<ExitCode, String> {
    let conn = open(&a.db)?;
    let id = store::find_run(&conn, &a.run)?;
    match a.call {
        Some(n) => {
            let (run, call) = query::call(&conn, &id, n)?;
            Ok(emit(a.db.json, &call, |c| query::render_call(&run, c)))
        }
        None => {
            let view = query::show(&conn, &id)?;
            Ok(emit(a.db.json, &view, query::render_show))
        }
    }
}

fn export(a: ExportArgs) -> Result<ExitCode, String> {
    let format = match (a.format, a.db.json) {
        (ExportFormat::Csv, true) => {
            return Err("--json exports JSON lines; drop it for --format csv".to_string())
        }
        (ExportFormat::Csv, false) => query::Format::Csv,
        (ExportFormat::Jsonl, _) => query::Format::Jsonl,
    };
    let conn = open(&a.db)?;
    let id = store::find_run(&conn, &a.run)?;
    match &a.output {
        Some(path) => export_to_file(&conn, &id, format, path),
        None => Ok(export_to_stdout(&conn, &id, format)),
    }
}

fn export_to_file(
    conn: &Connection,
    id: &str,
    format: query::Format,
    path: &std::path::Path,
) -> Result<ExitCode, String> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).map_err(|e| format!("--output {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let written = query::export(conn, id, format, &mut out)
        .and_then(|()| out.flush().map_err(query::ExportError::Write));
    match written {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(query::ExportError::Db(e)) => Err(e),
        Err(query::ExportError::Write(e)) => {
            eprintln!("sluice: cannot write {}: {e}", path.display());
            Ok(ExitCode::from(1))
        }
    }
}

/// Streams to stdout rather than through `print`: a run's export can be
/// far larger than is worth holding in memory. A reader that went away
/// (`| head`) is not an error.
fn export_to_stdout(conn: &Connection, id: &str, format: query::Format) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = query::export(conn, id, format, &mut out)
        .and_then(|()| out.flush().map_err(query::ExportError::Write));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(query::ExportError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(query::ExportError::Db(e)) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
        Err(query::ExportError::Write(e)) => {
            eprintln!("sluice: cannot write the output: {e}");
            ExitCode::from(1)
        }
    }
}

/// What `verify --json` prints.
#[derive(Serialize)]
struct Verification {
    intact: bool,
    runs: Vec<query::Verdict>,
}

fn verify(a: VerifyArgs) -> Result<ExitCode, String> {
    let conn = open(&a.db)?;
    let runs = match &a.run {
        Some(given) => vec![query::verify(&conn, &store::find_run(&conn, given)?)?],
        None => query::verify_all(&conn)?,
    };
    let report = Verification {
        intact: runs.iter().all(|v| v.intact),
        runs,
    };
    let printed = emit(a.db.json, &report, |r| query::render_verify(&r.runs));
    if printed != ExitCode::SUCCESS {
        return Ok(printed);
    }
    Ok(if report.intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
