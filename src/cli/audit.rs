//! `sluice audit`: read the record runs leave (list, show, export, verify),
//! and take its anchor.

use super::print;
use crate::audit::anchor::{self, Anchor};
use crate::audit::db::Db as Store;
use crate::audit::open::{self, Opened};
use crate::audit::{export, list, locate, render, show, store, verify};
use crate::flows::Registry;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Read the audit record: list runs, show a run's calls, export it, verify it, anchor it, copy it, serve it in a browser, report it as HTML.
#[derive(Debug, Args)]
#[command(
    long_about = "Read the audit record. Every `sluice run` records a run (script and its SHA-256, policies, \
arguments, workspace, status) and one row per flow call (input, capabilities and each decision, route, \
tier, output or error, timing) in a record: the workspace's SQLite file .sluice/audit.db unless --audit \
PATH|URL or SLUICE_AUDIT names another (a SQLite file, or a PostgreSQL database many machines share; \
`sluice audit copy` moves runs between them, keeping every hash). Secrets are redacted before they are written, and the record says what was.\n\n\
Rows are hash-chained, each finished run is sealed, and each run commits to the run before it, so `sluice \
audit verify` shows whether anything was edited, removed or reordered since, a whole run included. Against a \
rollback of the whole file, or a deleted newest run, keep `sluice audit anchor`'s line elsewhere and check it \
with `sluice audit verify --anchor`. An irreversible call is written before it runs; if the process died \
during it, its outcome is unknown and every view says OUTCOME UNKNOWN.\n\n\
A RUN is an id, a unique prefix of one, `last` for the newest run, or `last~N` for the Nth run before it \
(`last~1` the one before the newest; the order of `sluice audit list`). --json prints what a program wants.",
    after_help = "Examples:\n  sluice audit list\n  sluice audit show last\n  sluice audit show last --call 4\n  \
sluice audit export last --format csv --output run.csv\n  sluice audit verify\n  \
sluice audit anchor >> ~/anchors.txt\n  sluice audit verify --anchor \"$(tail -1 ~/anchors.txt)\"\n  \
sluice audit list --json --audit /srv/records/audit.db\n  \
sluice audit copy --to postgres://sluice@db.internal:5432/records\n  \
sluice audit serve\n  sluice audit report last --html run.html\n  \
sluice audit export last --otlp http://127.0.0.1:6006"
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
    Anchor(AnchorArgs),
    Copy(CopyArgs),
    Serve(ServeArgs),
    Report(ReportArgs),
}

/// Serve a read-only web page of the record: runs, a run's timeline and calls, each call whole.
#[derive(Debug, Args)]
#[command(
    long_about = "Serve a read-only web page of the record on this machine, and print its URL. The runs \
(script, status, start, duration, calls, model tokens, the worker that ran it, whether its record verifies); \
a run: one timeline lane per task and one bar per call, so calls that ran at the same time show side by side, \
filters by flow, tier, decision and outcome, a search in inputs and outputs, and the list of its calls, \
however many (the page asks for the rows it shows); a call whole: input, output or error, each decision with \
the rule that made it and the policy file and line, who answered an ask, the sandbox facts, route and \
timings, a file change as a diff, a command's streams, a model call as its conversation with tokens and \
latency; the run's plan (update_plan). `sluice audit verify`'s verdict is on the page, and a broken chain is \
marked at the call where it breaks. A run in progress gains its calls as they are recorded.\n\n\
Nothing on the page can change the record (GET alone), and nothing in the record can run in it: every \
value is shown as text, under a Content-Security-Policy that allows the page's own script alone. It serves \
on 127.0.0.1 by default, and refuses a request whose Host or Origin is not its own (a page elsewhere \
cannot read it, even through DNS rebinding). Served on any other address it needs --token: open the \
URL it prints (which carries the token once; the browser keeps it in a cookie).",
    after_help = "Examples:\n  sluice audit serve\n  sluice audit serve --http 127.0.0.1:9000 --workspace ~/agent\n  \
sluice audit serve --audit postgres://sluice@db.internal:5432/records\n  \
sluice audit serve --http 0.0.0.0:7878 --token \"$(openssl rand -hex 16)\""
)]
pub struct ServeArgs {
    /// The address to serve on; another than 127.0.0.1, ::1 or localhost needs --token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub http: String,
    /// The token a browser must bring (given once in the printed URL) [default: $SLUICE_VIEWER_TOKEN].
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub db: Db,
}

/// Write a run as one self-contained HTML file: the viewer's page, no server or network needed.
#[derive(Debug, Args)]
#[command(
    long_about = "Write one run as a single HTML file: the page `sluice audit serve` shows for it (timeline, \
filters, search, every call whole, the record's verdict), with the run inside it. It opens from disk in \
any browser, needs no server, and makes no request: its own Content-Security-Policy allows its inline \
script and style alone, by their hashes. Every value is shown as text; values over 64 KiB are cut, saying \
how much (`sluice audit show RUN --call N --json` has them whole).",
    after_help = "Examples:\n  sluice audit report last --html run.html\n  \
sluice audit report 3f9c --html /tmp/review.html --audit postgres://sluice@db.internal:5432/records"
)]
pub struct ReportArgs {
    /// The run: an id, a unique prefix of one, `last` (the newest) or `last~N` (N runs before it).
    pub run: String,
    /// The file to write.
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    #[command(flatten)]
    pub db: Db,
}

/// Where the record is, and how to print it: shared by every subcommand.
#[derive(Debug, Args)]
pub struct Db {
    /// The record: a SQLite file's path (or sqlite:PATH), or postgres://USER@HOST:PORT/DB
    /// [default: $SLUICE_AUDIT, else DIR/.sluice/audit.db of --workspace]. A PostgreSQL
    /// password comes from the credential named `audit`, PGPASSWORD or ~/.pgpass, never the URL.
    #[arg(long, value_name = "PATH|URL")]
    pub audit: Option<String>,
    /// The credentials file that may hold the PostgreSQL record's password as `audit`
    /// [default: SLUICE_CREDENTIAL_AUDIT, PGPASSWORD, ~/.pgpass].
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
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
error, version, the run it resumed, whether it is sealed, counts, and what its model calls spent: calls, \
input, cached and output tokens, latency) and a timeline with one line per flow call \
in chain order: #N, time from the run's start, flow, tier, decision (allow; deny by the rule or hook; \
ask→approved by whom), route (host sandbox mode or container; — for a flow that runs no process), outcome \
(ok, the error code, or OUTCOME UNKNOWN for a call whose process died before its outcome was written), \
duration, and the gist of its input, after a model call's model, tokens and latency. When more than one task \
made calls (sluice.spawn, sluice.map, coroutines), a TASK column names each call's task (0 the main chunk, 0.1 \
the first task it made, ...); when some call came from outside the script (an MCP client), a CLIENT column \
names who made each (its name and version; — for the script's own calls and job operations); when calls ran at the same time, an OVERLAPS column names, for each, the calls \
that were running while it ran (#3, #5), from each call's recorded start (kept to the millisecond) and \
duration, so an overlap shorter than a millisecond may not show. A resume's copies did not run and overlap \
nothing, nor does a call whose outcome is unknown.\n\n\
--json prints {run, calls, models}: each call has its task and seq, client (the MCP client's name and version, \
or null), and overlaps, the numbers of the calls \
that ran while it did ([] for none); models sums the model calls up as {calls, inputTokens, cachedTokens, \
outputTokens, latencyMs, replayed} (replayed: those a resume copied, left out of the sums).\n\n\
--call N prints call #N whole: every field, input, output and error as JSON, each decision with its rule and \
reason, what was redacted, whether the output was capped, and its hashes.",
    after_help = "Examples:\n  sluice audit show last\n  sluice audit show 3f9c --call 12\n  sluice audit show last --call 2 --json | jq .output"
)]
pub struct ShowArgs {
    /// The run: an id, a unique prefix of one, `last` (the newest) or `last~N` (N runs before it).
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
text exactly as stored, the bytes the hashes cover, but for an input whose list items the record keeps once \
each by content (a model call's messages): it is whole, and the column parts holds {FIELD: [sha256 \
of each item's JSON]} as stored (the hash covers the input without FIELD, and parts). The last column, \
client, names the MCP client that made the call (empty for the script's own calls); jsonl has it as client, \
a string or null.\n\n\
--json is --format jsonl.\n\n\
--otlp URL sends the run instead to an OpenTelemetry receiver (Arize Phoenix, Jaeger, a Collector) as one \
trace over OTLP/HTTP: the run's span, a span per task under the task that started it, a span per call under its \
task (a call a flow made while it ran under that call): a model call as `chat MODEL` with the GenAI \
conventions' gen_ai.* attributes and token counts, any other as `execute_tool FLOW`, each with sluice.decision, \
sluice.tier, sluice.outcome and sluice.error.code. Inputs, outputs and errors stay out unless --otlp-content. \
The trace and span ids derive from the run, so a run sent again (after `sluice run --otlp`) is the same \
trace with the same spans (a receiver that keys spans by id keeps the first copy). Exits 0 once the receiver took every span, 1 when it cannot be reached or refuses, 2 for a wrong \
URL or run.",
    after_help = "Examples:\n  sluice audit export last > run.jsonl\n  sluice audit export last --format csv --output run.csv\n  sluice audit export 3f9c | jq -c 'select(.type == \"call\" and .outcome != \"ok\")'\n  sluice audit export last --otlp http://127.0.0.1:6006\n  sluice audit export 3f9c --otlp https://otel.example.com:4318 --otlp-content"
)]
pub struct ExportArgs {
    /// The run: an id, a unique prefix of one, `last` (the newest) or `last~N` (N runs before it).
    pub run: String,
    /// jsonl (one JSON object a line) or csv.
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    /// Write the export to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub otlp: super::otlp::ExportOtlp,
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
Runs are chained to each other too: a run's own fields commit to its place among the runs and to the seal \
of the run before it (or, when that run had no seal yet because it was still running or had been killed, to \
its last row written by then). So a whole run deleted, replaced or edited shows at the run after it \
(predecessor missing, predecessor seal does not match). Runs recorded before this (an audit database of \
schema 1, migrated) are checked each on its own, and verify says so.\n\n\
What verify alone cannot show: the newest run deleted, or the whole file rolled back to an older copy, \
leaves a shorter chain that is intact. Keep an anchor elsewhere (`sluice audit anchor`) and pass it with \
--anchor: verify then also proves the record still holds it (the anchored state is a prefix of the chain \
now), or says how it does not (rolled back, newest run gone, forked).\n\n\
For a run that does not match, the first row that does not is named (#N, task, seq, flow) with what failed: \
content edited, a row missing before it, rows out of order, outcome edited, the seal, or its predecessor. A \
run killed before it could seal is reported intact with a warning: rows removed from its end could not show.\n\n\
An empty file, a file that is not SQLite, or a SQLite database that is not an audit store is an error naming \
it, not an empty record.\n\n\
Exits 0 when every run checked is intact (and the anchor, if given, is held), 1 when any is not, 2 when the \
record cannot be read.",
    after_help = "Examples:\n  sluice audit verify\n  sluice audit verify last\n  \
sluice audit verify --anchor sluice-anchor:v1:42:3f9c...\n  sluice audit verify --json --audit /srv/records/audit.db"
)]
pub struct VerifyArgs {
    /// The run: an id, a unique prefix of one, `last` (the newest) or `last~N` (N runs before it) [default: every run].
    pub run: Option<String>,
    /// Also prove the record still holds this anchor, as `sluice audit anchor` printed it
    /// (sluice-anchor:v1:RUNS:HEX); checks every run, so give no RUN with it.
    #[arg(long, value_name = "ANCHOR", conflicts_with = "run")]
    pub anchor: Option<String>,
    #[command(flatten)]
    pub db: Db,
}

/// Print the record's head, to keep elsewhere and check later with `verify --anchor`.
#[derive(Debug, Args)]
#[command(
    long_about = "Print the record's anchor: one line, sluice-anchor:v1:RUNS:HEX, where RUNS is how many runs \
the record holds (the newest run's place) and HEX hashes that count with the newest run's seal (or, while it \
is still running or after it was killed, its last row written so far, or its head). Since every run commits \
to the one before it, the anchor covers the whole record.\n\n\
Keep the line where whoever can change the database cannot (another machine, a ticket, a commit, a printout). \
Later, `sluice audit verify --anchor LINE` proves the record still holds that state, whatever was added \
since, and fails naming what happened if not: the file rolled back to an older copy, the newest run deleted, \
or the record forked (rolled back and other runs recorded since).\n\n\
--json prints {anchor, runs, run, status, covers (seal, row or head), rows}.",
    after_help = "Examples:\n  sluice audit anchor\n  sluice audit anchor >> ~/anchors.txt\n  \
sluice audit anchor --json | jq -r .anchor"
)]
pub struct AnchorArgs {
    #[command(flatten)]
    pub db: Db,
}

/// Copy runs from one record to another (SQLite or PostgreSQL), keeping every hash.
#[derive(Debug, Args)]
#[command(
    long_about = "Copy runs from one record to another: a laptop's SQLite file into the team's PostgreSQL, \
and back. A copied run keeps its head, every row and outcome, its clock readings, every body it keeps by \
content and its seal, byte for byte: each hash is the one it was recorded with, and `sluice audit verify` \
checks it whole in the target.\n\n\
A run's head covers its place among the runs of the record it was recorded in, so in the target it keeps \
that link (its origin, which verify hashes it with) and takes the next place there, with a hash of that \
place, its rows and its seal, which the next run recorded there commits to. So a copied run deleted, \
moved or cut short in the target shows like any other run; copied on again, it keeps its origin.\n\n\
A run is copied only when it verifies in the source, is not still running, and is not in the target \
already: one already there with the same head is left as it is (copying twice changes nothing), another \
run with its id is refused. Each run is written whole in one transaction of the target, so a copy cut \
short leaves no part of a run behind. Into a SQLite file, other writers of that file wait while a run is \
written; into PostgreSQL, only runs starting meanwhile wait.\n\n\
Both records' passwords (for PostgreSQL) come from the credential named `audit` (--credentials, \
SLUICE_CREDENTIAL_AUDIT), PGPASSWORD or ~/.pgpass, which can hold one line per server.\n\n\
Prints one line per run (copied as #N, already there, or refused and why); --json prints {runs: [{run, \
outcome, ...}]}. Exits 0 when every run is in the target, 1 when any was refused, 2 when a record cannot be \
read or written.",
    after_help = "Examples:\n  sluice audit copy --to postgres://sluice@db.internal:5432/records?sslmode=verify-full\n  \
sluice audit copy --to postgres://sluice@127.0.0.1:5432/records last\n  \
sluice audit copy --from postgres://sluice@db.internal/records --to ./audit-copy.db 3f9c 7a1e\n  \
sluice audit verify --audit ./audit-copy.db"
)]
pub struct CopyArgs {
    /// The runs to copy: ids, unique prefixes, `last` or `last~N` [default: every run of --from, oldest first].
    pub runs: Vec<String>,
    /// The record to copy from: a SQLite file (or sqlite:PATH) or postgres://USER@HOST:PORT/DB
    /// [default: $SLUICE_AUDIT, else DIR/.sluice/audit.db of --workspace].
    #[arg(long, value_name = "PATH|URL")]
    pub from: Option<String>,
    /// The record to copy into (a SQLite file is created when missing; a PostgreSQL
    /// database gets its schema on first use).
    #[arg(long, value_name = "PATH|URL")]
    pub to: String,
    /// The credentials file that may hold a PostgreSQL record's password as `audit`.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// The workspace whose record --from defaults to [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print JSON for programs instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn audit(args: AuditArgs) -> ExitCode {
    let result = match args.command {
        AuditCommand::List(a) => list(a),
        AuditCommand::Show(a) => show(a),
        AuditCommand::Export(a) => export(a),
        AuditCommand::Verify(a) => verify(a),
        AuditCommand::Anchor(a) => anchor(a),
        AuditCommand::Copy(a) => copy(a),
        AuditCommand::Serve(a) => serve(a),
        AuditCommand::Report(a) => report(a),
    };
    result.unwrap_or_else(|e| {
        eprintln!("sluice: {e}");
        ExitCode::from(2)
    })
}

/// The record `db` names, opened to read.
fn opened(db: &Db) -> Result<Opened, String> {
    let workspace = match &db.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot tell the current folder ({e}); give --workspace DIR"))?,
    };
    let at = locate(db.audit.as_deref(), &workspace)?;
    open::to_read(&at, db.credentials.as_deref())
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

fn serve(a: ServeArgs) -> Result<ExitCode, String> {
    let addr = resolve_addr(&a.http)?;
    let token = a
        .token
        .or_else(|| std::env::var(crate::viewer::ENV_TOKEN).ok())
        .filter(|t| !t.is_empty());
    let opened = opened(&a.db)?;
    let name = opened.name.clone();
    crate::viewer::serve(opened, addr, token, |url| {
        eprintln!("sluice audit serve: {url} (the record {name}; read-only; Ctrl-C stops)");
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `ADDR` as a socket address: `HOST:PORT`, a name resolved.
fn resolve_addr(given: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    given
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            format!("--http {given:?} is not an address to serve on; give HOST:PORT, e.g. 127.0.0.1:7878")
        })
}

fn report(a: ReportArgs) -> Result<ExitCode, String> {
    let opened = opened(&a.db)?;
    let id = store::find_run(&*opened.db, &a.run)?;
    let written = crate::viewer::report(&*opened.db, &id, &a.html)?;
    eprintln!(
        "sluice: wrote run {id} ({} calls) to {} ({} KiB); open it in a browser",
        written.calls,
        a.html.display(),
        written.bytes.div_ceil(1024)
    );
    Ok(ExitCode::SUCCESS)
}

fn list(a: ListArgs) -> Result<ExitCode, String> {
    let opened = opened(&a.db)?;
    let conn = &*opened.db;
    let listing = list::list(conn, a.limit)?;
    Ok(emit(a.db.json, &listing, render::render_list))
}

fn show(a: ShowArgs) -> Result<ExitCode, String> {
    let opened = opened(&a.db)?;
    let conn = &*opened.db;
    let id = store::find_run(conn, &a.run)?;
    match a.call {
        Some(n) => {
            let (run, call) = show::call(conn, &id, n)?;
            Ok(emit(a.db.json, &call, |c| render::render_call(&run, c)))
        }
        None => {
            // Read one call at a time: a run may hold hundreds of
            // thousands (an MCP server's lives for days).
            let (run, calls) = show::Recorded::open(conn, &id)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let written = if a.db.json {
                show::write_json(&run, &calls, &mut out)
            } else {
                render::write_show(&run, &calls, &Registry::standard(), &mut out)
            };
            match written.and_then(|()| {
                std::io::Write::flush(&mut out).map_err(|e| format!("cannot write the view: {e}"))
            }) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                // A reader that went away (`| head`) is not an error of ours.
                Err(e) if e.contains("Broken pipe") => Ok(ExitCode::SUCCESS),
                Err(e) => Err(e),
            }
        }
    }
}

fn export(a: ExportArgs) -> Result<ExitCode, String> {
    if let Some(url) = &a.otlp.otlp {
        let opened = opened(&a.db)?;
        let id = store::find_run(&*opened.db, &a.run)?;
        return Ok(super::otlp::export(
            &*opened.db,
            &id,
            url,
            a.otlp.otlp_content,
        ));
    }
    let format = match (a.format, a.db.json) {
        (ExportFormat::Csv, true) => {
            return Err("--json exports JSON lines; drop it for --format csv".to_string())
        }
        (ExportFormat::Csv, false) => export::Format::Csv,
        (ExportFormat::Jsonl, _) => export::Format::Jsonl,
    };
    let opened = opened(&a.db)?;
    let conn = &*opened.db;
    let id = store::find_run(conn, &a.run)?;
    match &a.output {
        Some(path) => export_to_file(conn, &id, format, path),
        None => Ok(export_to_stdout(conn, &id, format)),
    }
}

fn export_to_file(
    conn: &dyn Store,
    id: &str,
    format: export::Format,
    path: &std::path::Path,
) -> Result<ExitCode, String> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).map_err(|e| format!("--output {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let written = export::export(conn, id, format, &mut out)
        .and_then(|()| out.flush().map_err(export::ExportError::Write));
    match written {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(export::ExportError::Db(e)) => Err(e),
        Err(export::ExportError::Write(e)) => {
            eprintln!("sluice: cannot write {}: {e}", path.display());
            Ok(ExitCode::from(1))
        }
    }
}

/// Streams to stdout rather than through `print`: a run's export can be
/// far larger than is worth holding in memory. A reader that went away
/// (`| head`) is not an error.
fn export_to_stdout(conn: &dyn Store, id: &str, format: export::Format) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = export::export(conn, id, format, &mut out)
        .and_then(|()| out.flush().map_err(export::ExportError::Write));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(export::ExportError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(export::ExportError::Db(e)) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
        Err(export::ExportError::Write(e)) => {
            eprintln!("sluice: cannot write the output: {e}");
            ExitCode::from(1)
        }
    }
}

/// What `verify --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verification {
    intact: bool,
    runs: Vec<verify::Verdict>,
    /// Runs #1 to this were recorded before runs were chained to each other.
    unchained_runs: i64,
    /// The anchor check, when --anchor was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    anchor: Option<anchor::Check>,
}

fn verify(a: VerifyArgs) -> Result<ExitCode, String> {
    let given = a.anchor.as_deref().map(Anchor::parse).transpose()?;
    let opened = opened(&a.db)?;
    let conn = &*opened.db;
    // One snapshot: a run writing meanwhile does not tear what is read.
    verify::snapshot(conn)?;
    let runs = match &a.run {
        Some(given) => vec![verify::verify(conn, &store::find_run(conn, given)?)?],
        None => verify::verify_all(conn)?,
    };
    let anchor = given.map(|g| anchor::check(conn, &g)).transpose()?;
    let unchained_runs = store::unchained_runs(conn).map_err(|e| e.to_string())?;
    let report = Verification {
        intact: runs.iter().all(|v| v.intact) && anchor.as_ref().is_none_or(|c| c.held),
        runs,
        unchained_runs,
        anchor,
    };
    let printed = emit(a.db.json, &report, render_verification);
    if printed != ExitCode::SUCCESS {
        return Ok(printed);
    }
    Ok(if report.intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn render_verification(r: &Verification) -> String {
    let mut out = render::render_verify(&r.runs);
    out.extend(render::unchained_note(&r.runs, r.unchained_runs));
    if let Some(c) = &r.anchor {
        out.push_str(&anchor::render_check(c));
    }
    out
}

fn anchor(a: AnchorArgs) -> Result<ExitCode, String> {
    let opened = opened(&a.db)?;
    let conn = &*opened.db;
    verify::snapshot(conn)?;
    let head = anchor::head(conn)?;
    Ok(emit(a.db.json, &head, |h| format!("{}\n", h.anchor)))
}

#[cfg(test)]
mod tests {
    use crate::audit::render::input_summary;
    use crate::flows::Registry;
    use serde_json::json;

    /// Each flow words its own input's gist on the timeline; the audit,
    /// below the flows, only asks.
    #[test]
    fn the_timeline_sums_up_each_flows_input_as_the_flow_says() {
        let facts = Registry::standard();
        let patch =
            "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** Delete File: b.txt\n*** End Patch\n";
        for (flow, input, gist) in [
            ("read", json!({"path": "src/a.rs"}), "src/a.rs"),
            ("write", json!({"path": "b.txt", "content": "x"}), "b.txt"),
            ("edit", json!({"path": "c.rs", "new_string": "y"}), "c.rs"),
            ("ls", json!({}), "{}"),
            ("glob", json!({"pattern": "*.rs"}), "*.rs"),
            ("grep", json!({"pattern": "fn", "root": "src"}), "fn in src"),
            (
                "bash",
                json!({"command": "echo a\necho b"}),
                "echo a↵echo b",
            ),
            (
                "bash",
                json!({"script": "print(1)", "interpreter": "python3"}),
                "python3: print(1)",
            ),
            ("bash", json!({"script": "echo s"}), "bash: echo s"),
            ("shell_command", json!({"command": "ls -la"}), "ls -la"),
            (
                "fetch",
                json!({"url": "https://a.example/x"}),
                "https://a.example/x",
            ),
            (
                "webfetch",
                json!({"url": "https://b.example/"}),
                "https://b.example/",
            ),
            (
                "http-post",
                json!({"url": "https://c.example/"}),
                "https://c.example/",
            ),
            ("websearch", json!({"query": "rust"}), "rust"),
            ("apply_patch", json!({"input": patch}), "patch a.txt, b.txt"),
            ("apply_patch", json!({"input": "garbage"}), "garbage"),
            (
                "job.wait",
                json!({"jobId": 1, "ms": null}),
                r#"{"jobId":1,"ms":null}"#,
            ),
            ("nope", json!({"path": "x"}), r#"{"path":"x"}"#),
        ] {
            assert_eq!(input_summary(flow, &input, &facts), gist, "{flow} {input}");
        }
    }

    #[test]
    fn only_bash_starts_jobs() {
        use crate::audit::FlowFacts;
        let facts = Registry::standard();
        let starts: Vec<&str> = facts
            .specs()
            .map(|s| s.name)
            .filter(|name| facts.starts_jobs(name))
            .collect();
        assert_eq!(starts, ["bash"]);
        assert!(!facts.starts_jobs("job.read"));
    }
}

/// What `audit copy --json` prints.
#[derive(Serialize)]
struct Copies {
    runs: Vec<crate::audit::copy::Copied>,
}

fn copy(a: CopyArgs) -> Result<ExitCode, String> {
    use crate::audit::copy::{self, Copied, Outcome};
    // The source is found as every other subcommand finds its record.
    let from = Db {
        audit: a.from.clone(),
        credentials: a.credentials.clone(),
        workspace: a.workspace.clone(),
        json: a.json,
    };
    let source = opened(&from).map_err(|e| e.replace("--audit", "--from"))?;
    let to = crate::audit::location::Location::parse(&a.to).map_err(|e| format!("--to: {e}"))?;
    let target = open::for_writing(
        &to,
        open::password(&to, a.credentials.as_deref()).as_deref(),
    )?;
    let (src, dst) = (&*source.db, &*target.db);
    verify::snapshot(src)?;
    let ids = copy::runs_to_copy(src, &a.runs)?;
    let mut done = Vec::new();
    for id in ids {
        let outcome = copy::copy_run(src, dst, &id)?;
        if !a.json {
            print(&render_copy(&id, &outcome, &target.name));
        }
        done.push(Copied { run: id, outcome });
    }
    let refused = done
        .iter()
        .any(|c| matches!(c.outcome, Outcome::Refused { .. }));
    if a.json {
        emit(true, &Copies { runs: done }, |_| String::new());
    } else if done.is_empty() {
        print(&format!("{}: no runs to copy\n", source.name));
    }
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One run's line of `audit copy`.
fn render_copy(id: &str, outcome: &crate::audit::copy::Outcome, target: &str) -> String {
    use crate::audit::copy::Outcome;
    match outcome {
        Outcome::Copied { n, calls } => {
            format!("{id}  copied into {target} as run #{n} ({calls} calls)\n")
        }
        Outcome::AlreadyThere { n } => {
            format!("{id}  already in {target} as run #{n}: left as it is\n")
        }
        Outcome::Refused { reason } => format!("{id}  NOT COPIED: {reason}\n"),
    }
}
