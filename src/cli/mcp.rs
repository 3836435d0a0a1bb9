//! `sluice mcp`: serve the flows as MCP tools.

use super::run::{drive, options, recorded, RunOptions, Work};
use crate::mcp::{self, Catalog, Server, Transport};
use crate::runtime::Runtime;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

const ABOUT: &str = "Serve sluice's flows as MCP tools to an agent (Claude Code, Codex, Cursor, Goose, opencode, ...): \
every call the agent makes passes the policies, runs confined, and is recorded, as a script's calls are.\n\n\
Over stdio by default (the client starts `sluice mcp` itself), or streamable HTTP with --http, where every request \
carries the token (`Authorization: Bearer TOKEN`: SLUICE_MCP_TOKEN or --token, else one generated, printed once on \
stderr and kept in $XDG_RUNTIME_DIR/sluice/mcp/ADDR-PORT.token, else ~/.local/state/sluice/mcp/, mode 0600, a folder \
the run's commands and flows cannot reach), and a connection held by a process of the run is refused. Clients of the \
2026-07-28 protocol (stateless requests, server/discover) and those that start with `initialize` (2025-11-25, \
2025-06-18) are both served.\n\n\
Tools: one per flow the policies could allow (a flow every call of which a policy denies is not listed; --flows narrows \
the list), job_read, job_wait and job_kill beside bash (for background = true), and the Lua tools of --tools DIR: each \
*.lua file there returns {name, description, input = SCHEMA, run = function(input) ... end}, and run's flow calls pass \
the door like a script's.\n\n\
Asks: a call the policy asks about becomes a question to the person behind the client (MCP elicitation), showing the \
capability, the rule that asked and the justification; a client without elicitation gets permission_required naming \
the --approve pattern that would grant it; a client has at most 32 questions open. A client's background jobs and \
its \"yes for the rest of the run\" are its own (--shared-run shares them). Progress carries no loaded secret. A \
client's cancellation stops the call's command (TERM, then KILL after \
3 s), recorded as cancelled.\n\n\
The record: one audit run per server process (`sluice audit show last`), every call with the client's name and \
version. The run ends (sealed ok) when the client ends the session: stdin closes, or SIGINT/SIGTERM comes with no call \
under way (as Claude Code and Codex end it). A signal that comes while a call runs stops it (recorded as stopped by the \
signal) and seals the run interrupted.";

/// Serve sluice's flows as MCP tools to an agent.
#[derive(Debug, Args)]
#[command(
    long_about = ABOUT,
    after_help = "Examples:\n  sluice mcp --workspace ~/src/app\n  sluice mcp --workspace ~/src/app --policy readonly --flows read,grep,glob,ls\n  sluice mcp --workspace ~/src/app --tools ./mcp-tools\n  sluice mcp --workspace ~/src/app --http 127.0.0.1:8765   # prints the token it generated\n  SLUICE_MCP_TOKEN=... sluice mcp --workspace /srv/app --http 0.0.0.0:8765\n\nClaude Code: claude mcp add sluice -- sluice mcp --workspace \"$PWD\"\nCodex (~/.codex/config.toml): [mcp_servers.sluice] command = \"sluice\", args = [\"mcp\", \"--workspace\", \"/path/to/app\"]\nCursor (.cursor/mcp.json): {\"mcpServers\": {\"sluice\": {\"command\": \"sluice\", \"args\": [\"mcp\", \"--workspace\", \"/path/to/app\"]}}}"
)]
pub struct McpArgs {
    #[command(flatten)]
    pub options: RunOptions,
    /// Serve only these flows (comma-separated: read,grep,glob,ls), of those the policies could allow.
    #[arg(long, value_name = "FLOWS", value_delimiter = ',')]
    pub flows: Option<Vec<String>>,
    /// A folder of Lua tools: each *.lua returns {name, description, input, run}; `require` in them loads
    /// modules from this folder only.
    #[arg(long, value_name = "DIR")]
    pub tools: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio: 127.0.0.1:PORT (port 0 picks one, printed
    /// on stderr). Every request needs `Authorization: Bearer TOKEN`: SLUICE_MCP_TOKEN's or --token's, else one generated at start,
    /// shown once on stderr and written to $XDG_RUNTIME_DIR/sluice/mcp/ADDR-PORT.token (else
    /// ~/.local/state/sluice/mcp/), mode 0600, a folder no command or flow of the run can reach.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Let every client share the run's background jobs (any client reads, waits for or kills any job) and
    /// its "for the rest of the run" answers. Without it each client (stdio's, each HTTP session, each 2026 request
    /// over HTTP) reaches only its own jobs, and its yes for the run covers its own calls alone.
    #[arg(long)]
    pub shared_run: bool,
    /// The bearer token HTTP clients must send (`Authorization: Bearer TOKEN`) instead of a generated one.
    /// Prefer SLUICE_MCP_TOKEN: a command line is visible to every process of the machine. [env: SLUICE_MCP_TOKEN]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

pub fn mcp(args: McpArgs) -> ExitCode {
    match setup(&args) {
        Ok(runtime) => serve(&runtime, &args),
        Err(e) => {
            eprintln!("sluice mcp: {e}");
            ExitCode::from(2)
        }
    }
}

/// The run every call of the server belongs to. Over HTTP, the folder of
/// generated tokens is withheld from its commands and flows.
fn setup(args: &McpArgs) -> Result<Runtime, String> {
    let mut builder = options(&args.options)?.serving().name(mcp::RUN_NAME);
    if args.http.is_some() {
        builder = builder.withheld(mcp::token::prepare()?);
    }
    if let Some(dir) = &args.tools {
        builder = builder.modules(dir);
    }
    let builder = recorded(builder, &args.options)?;
    builder.build().map_err(|e| e.to_string())
}

fn serve(runtime: &Runtime, args: &McpArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("sluice mcp: {e}");
        let _ = runtime.end("failed", Some(&e));
        ExitCode::from(2)
    };
    let lua = match &args.tools {
        Some(dir) => match runtime.load_tools(dir, &Catalog::reserved(runtime)) {
            Ok(tools) => tools,
            Err(e) => return fail(e),
        },
        None => Vec::new(),
    };
    let catalog = match Catalog::of(runtime, args.flows.as_deref(), &lua) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    for (flow, why) in &catalog.unavailable {
        eprintln!("sluice mcp: not serving {flow}: {why}");
    }
    if !catalog.hidden.is_empty() {
        eprintln!(
            "sluice mcp: not serving {}: the policies refuse every call of them",
            catalog.hidden.join(", ")
        );
    }
    let (inbox, requests) = tokio::sync::mpsc::unbounded_channel();
    let given = args
        .token
        .clone()
        .or_else(|| std::env::var("SLUICE_MCP_TOKEN").ok())
        .filter(|t| !t.is_empty());
    let token = given.clone().unwrap_or_else(mcp::token::generate);
    let transport = match args.http {
        None => Transport::Stdio,
        Some(addr) => Transport::Http {
            addr,
            token: token.clone(),
        },
    };
    let kept = match mcp::start(Server::new(catalog, inbox, args.shared_run), transport) {
        Ok((_thread, Some(addr))) => {
            eprintln!(
                "sluice mcp: serving http://{addr}{} (run {})",
                mcp::PATH,
                runtime.run_id()
            );
            match given {
                Some(_) => None,
                None => match keep_generated(addr, &token) {
                    Ok(file) => Some(file),
                    Err(e) => return fail(e),
                },
            }
        }
        Ok((_thread, None)) => None,
        Err(e) => return fail(e),
    };
    let exit = drive(runtime, runtime.serve(requests), Work::Served).exit;
    if let Some(file) = kept {
        let _ = std::fs::remove_file(file);
    }
    exit
}

/// Keeps a generated token in its file, and says it once: clients send it.
fn keep_generated(addr: SocketAddr, token: &str) -> Result<PathBuf, String> {
    let file = mcp::token::keep(&mcp::token::folder(), addr, token)?;
    eprintln!(
        "sluice mcp: token {token} (clients send `Authorization: Bearer TOKEN`; kept in {} for your user alone, \
         which no command or flow of this run can reach; removed when the server stops)",
        file.display()
    );
    Ok(file)
}
