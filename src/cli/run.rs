//! `sluice run`: run a workflow script.

use crate::runtime::{interrupt, Runtime, ScriptError};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a workflow script in a workspace.
#[derive(Debug, Args)]
#[command(
    long_about = "Run a workflow script in a workspace. The script sees the flows as sluice.read, sluice.write, \
sluice.edit, sluice.ls (and sluice.call(name, input)), its arguments as sluice.args and the workspace as \
sluice.workspace. Relative paths resolve against the workspace, and only paths inside it may be read or written.\n\n\
A script error exits 1 and prints the Lua message with file:line and a traceback.",
    after_help = "Examples:\n  sluice run examples/hello.lua --workspace /tmp/w\n  sluice run fix.lua src/main.rs -- --flag-for-the-script"
)]
pub struct RunArgs {
    /// The Lua workflow to run.
    pub script: PathBuf,
    /// Arguments for the script (sluice.args); put them after `--` if they start with a dash.
    pub args: Vec<String>,
    /// The folder the workflow works in [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

pub fn run(args: RunArgs) -> ExitCode {
    let script_dir = args
        .script
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        })
        .unwrap_or_else(|| PathBuf::from("."));
    let mut builder = Runtime::builder().args(args.args).script_dir(script_dir);
    if let Some(ws) = args.workspace {
        builder = builder.workspace(ws);
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: {e}\nGive an existing folder with --workspace DIR.");
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
    // Whatever the script was doing when a stop came, it has been dropped.
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
