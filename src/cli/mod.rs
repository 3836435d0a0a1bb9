//! The command line: one file per subcommand; this file holds the grammar.

mod audit;
mod completions;
mod doctor;
#[cfg(feature = "fleet")]
mod fleet;
#[cfg(feature = "fleet")]
mod fleet_ops;
mod flows;
mod hide;
mod man;
mod mcp;
mod otlp;
mod policy;
mod policy_suite;
mod replay;
mod run;
mod worker_link;

use crate::kernel::policy::{shipped, Source};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Run agent workflows written in Lua, with every tool call checked and confined.",
    long_about = "sluice runs agent workflows written in Lua. Each tool a workflow uses (read, write, edit, ls, ...) \
is a flow: a Lua function backed by Rust that passes one door, where its input is checked, its effects are \
declared and authorized, and only then does it run.",
    after_help = "Examples:\n  sluice run examples/hello.lua --workspace /tmp/w\n  sluice flows\n  sluice flows edit\n  sluice policy explain 'fs:write:/tmp/w/.git/config' --workspace /tmp/w\n  sluice audit list --workspace /tmp/w\n  sluice replay last --workspace /tmp/w\n  sluice doctor\n  sluice mcp --workspace /tmp/w\n  sluice worker --temporal 127.0.0.1:7233 --task-queue agents --audit postgres://sluice@db:5432/record\n  sluice submit fix.lua --temporal 127.0.0.1:7233 --task-queue agents --workspace /shared/app --wait\n  sluice completions bash > ~/.local/share/bash-completion/completions/sluice\n  sluice man | man -l -"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Run(run::RunArgs),
    Flows(flows::FlowsArgs),
    Policy(policy::PolicyArgs),
    Audit(audit::AuditArgs),
    Replay(replay::ReplayArgs),
    Resume(replay::ResumeArgs),
    Doctor(doctor::DoctorArgs),
    Mcp(mcp::McpArgs),
    #[cfg(feature = "fleet")]
    Worker(fleet::WorkerArgs),
    #[cfg(feature = "fleet")]
    Submit(fleet::SubmitArgs),
    #[cfg(feature = "fleet")]
    Runs(fleet_ops::RunsArgs),
    #[cfg(feature = "fleet")]
    Status(fleet_ops::StatusArgs),
    #[cfg(feature = "fleet")]
    Cancel(fleet_ops::CancelArgs),
    #[cfg(feature = "fleet")]
    Resolve(fleet_ops::ResolveArgs),
    #[cfg(feature = "fleet")]
    Asks(fleet_ops::AsksArgs),
    #[cfg(feature = "fleet")]
    Answer(fleet_ops::AnswerArgs),
    Completions(completions::CompletionsArgs),
    Man(man::ManArgs),
}

/// `--policy NAME`: a file when one exists there, else a built-in policy
/// (`default`, `readonly`, `ci`), else the file (whose absence the load reports).
pub(crate) fn policy_source(given: &str) -> Source {
    let path = std::path::Path::new(given);
    if path.exists() {
        return Source::File(path.to_path_buf());
    }
    shipped(given).unwrap_or_else(|| Source::File(path.to_path_buf()))
}

/// Prints `text` to stdout; a reader that went away (`| head`) is not an
/// error worth a panic.
pub(crate) fn print(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("sluice: cannot write the output: {e}");
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// The `sluice` command: parses the process's command line and runs it.
///
/// Process-wide hardening first: sluice holds credentials (in its
/// environment, its memory, its open files) that no command it runs may
/// read. Non-dumpable, the process is out of reach of any process of the
/// same user without CAP_SYS_PTRACE (confined commands have no capability):
/// `/proc/<sluice>/environ`, `mem`, `fd/*`, `maps`, ptrace. Its command line
/// is not guarded so (anyone may read `/proc/<pid>/cmdline`), so once parsed
/// it is overwritten: `ps` then shows `sluice` alone, without the script,
/// its arguments or the flags.
pub fn main() -> ExitCode {
    crate::sandbox::serve_if_asked();
    if let Err(e) = crate::sandbox::landlock::shield_process() {
        eprintln!("sluice: cannot make the process non-dumpable ({e}); refusing to run");
        return ExitCode::from(1);
    }
    let cli = Cli::parse();
    hide::hide_arguments();
    run_parsed(cli)
}

/// Runs a parsed command line (the binary parses it first, then hides its
/// arguments from other processes).
pub fn run_parsed(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Flows(args) => flows::flows(args),
        Command::Policy(args) => policy::policy(args),
        Command::Audit(args) => audit::audit(args),
        Command::Replay(args) => replay::replay(args),
        Command::Resume(args) => replay::resume(args),
        Command::Doctor(args) => doctor::doctor(args),
        Command::Mcp(args) => mcp::mcp(args),
        #[cfg(feature = "fleet")]
        Command::Worker(args) => fleet::worker(args),
        #[cfg(feature = "fleet")]
        Command::Submit(args) => fleet::submit(args),
        #[cfg(feature = "fleet")]
        Command::Runs(args) => fleet_ops::runs(args),
        #[cfg(feature = "fleet")]
        Command::Status(args) => fleet_ops::status(args),
        #[cfg(feature = "fleet")]
        Command::Cancel(args) => fleet_ops::cancel(args),
        #[cfg(feature = "fleet")]
        Command::Resolve(args) => fleet_ops::resolve(args),
        #[cfg(feature = "fleet")]
        Command::Asks(args) => fleet_ops::asks(args),
        #[cfg(feature = "fleet")]
        Command::Answer(args) => fleet_ops::answer(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => man::man(args),
    }
}
