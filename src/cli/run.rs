//! `sluice run`: run a workflow script.

use super::policy_source;
use crate::credentials::Credentials;
use crate::kernel::approval::Prompt;
use crate::net::dns::Hosts;
use crate::net::search;
use crate::runtime::{interrupt, Runtime, ScriptError};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a workflow script in a workspace.
#[derive(Debug, Args)]
#[command(
    long_about = "Run a workflow script in a workspace. The script sees the flows as sluice.read, sluice.write, \
sluice.edit, sluice.apply_patch, sluice.ls, sluice.glob, sluice.grep, sluice.bash, sluice.shell_command, sluice.fetch, sluice.http_post, sluice.webfetch, sluice.websearch (and sluice.call(name, input); `sluice flows` lists them with their fields), its arguments as sluice.args and the workspace as \
sluice.workspace. Relative paths resolve against the workspace. Every call's capabilities pass the \
policies (--policy; the built-in default grants reads and writes inside the workspace, commands and public GETs, and asks for the rest).\n\n\
A script error exits 1 and prints the Lua message with file:line and a traceback.",
    after_help = "Examples:\n  sluice run examples/hello.lua --workspace /tmp/w\n  sluice run fix.lua src/main.rs -- --flag-for-the-script\n  sluice run fix.lua --policy org.lua --policy project.lua --approve 'net:post:api.example.com'\n  sluice run audit.lua --policy readonly --ceiling 'fs:read:/srv/**'\n  SLUICE_CREDENTIAL_EXA=... sluice run research.lua --search exa --approve 'net:post:api.exa.ai'"
)]
pub struct RunArgs {
    /// The Lua workflow to run.
    pub script: PathBuf,
    /// Arguments for the script (sluice.args); put them after `--` if they start with a dash.
    pub args: Vec<String>,
    /// The folder the workflow works in [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A policy file (repeatable: an organisation's, then a project's; a deny from any wins).
    /// `default`, `readonly` and `ci` name the built-in policies. [default: default]
    #[arg(long, value_name = "FILE")]
    pub policy: Vec<String>,
    /// Nothing outside these capability patterns is granted, whatever a policy says (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub ceiling: Vec<String>,
    /// Pre-approve asks matching this capability pattern, e.g. 'net:post:api.example.com' (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub approve: Vec<String>,
    /// Keep the files that hold commands' complete output when it overflowed the in-memory bound
    /// (results name them as stdoutSpillPath/stderrSpillPath); by default they are removed when the run ends.
    #[arg(long)]
    pub keep_spill: bool,
    /// Background jobs (sluice.bash{background = true}) that may run at once; one more is refused.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_jobs: u16,
    /// Resolve HOST to these addresses instead of asking DNS, like curl's --resolve:
    /// HOST=ADDR[,ADDR...] (repeatable). Destination checks judge these addresses.
    #[arg(long, value_name = "HOST=ADDR")]
    pub resolve: Vec<String>,
    /// The provider that answers sluice.websearch (none by default, so websearch fails with
    /// provider_unavailable): `exa` (https://api.exa.ai/search, its key in credential `exa`),
    /// `exa=URL` (Exa's API at another endpoint), or `searxng=URL` (a SearXNG instance's base URL,
    /// with `json` in its search.formats). Calls need net:post for the endpoint's host.
    #[arg(long, value_name = "PROVIDER")]
    pub search: Option<String>,
    /// The credentials file: `name = value` lines, mode 0600 (a file others may read is refused).
    /// SLUICE_CREDENTIAL_<NAME> in the environment comes first (`exa` is SLUICE_CREDENTIAL_EXA).
    /// [default: $XDG_CONFIG_HOME/sluice/credentials, else ~/.config/sluice/credentials]
    #[arg(long, value_name = "FILE", requires = "search")]
    pub credentials: Option<PathBuf>,
}

pub fn run(args: RunArgs) -> ExitCode {
    let mut builder = Runtime::builder()
        .args(args.args)
        .script(&args.script)
        .prompt(Prompt::detect())
        .keep_spill(args.keep_spill)
        .max_jobs(usize::from(args.max_jobs));
    if let Some(ws) = args.workspace {
        builder = builder.workspace(ws);
    }
    for policy in &args.policy {
        builder = builder.policy(policy_source(policy));
    }
    for pattern in args.ceiling {
        builder = builder.ceiling(pattern);
    }
    for pattern in args.approve {
        builder = builder.approve(pattern);
    }
    if !args.resolve.is_empty() {
        let mut hosts = Hosts::over_system();
        for entry in &args.resolve {
            if let Err(e) = hosts.add_entry(entry) {
                eprintln!("sluice: --resolve {e}");
                return ExitCode::from(2);
            }
        }
        builder = builder.dns(std::sync::Arc::new(hosts));
    }
    if let Some(text) = &args.search {
        let store = match args.credentials {
            Some(file) => Credentials::with_file(file),
            None => Credentials::new(),
        };
        match search::from_flag(text, store) {
            Ok(provider) => builder = builder.search(provider),
            Err(e) => {
                eprintln!("sluice: --search {text:?}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = interrupt::install_signal_handlers() {
        eprintln!("sluice: cannot install signal handlers: {e}");
        return ExitCode::from(2);
    }
    let outcome = tokio.block_on(async {
        tokio::select! {
            result = runtime.run_script(&args.script) => result,
            sig = interrupt::wait() => Err(ScriptError { message: format!("interrupted by {}", interrupt::name(sig)) }),
        }
    });
    // Whatever the script was doing when a stop came, it has been dropped;
    // background jobs end with the run, stopped and reaped.
    tokio.block_on(runtime.shutdown());
    if let Some(sig) = interrupt::requested() {
        eprintln!(
            "sluice: interrupted by {}; the run stopped between flow steps",
            interrupt::name(sig)
        );
        return ExitCode::from(128 + sig as u8);
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}
