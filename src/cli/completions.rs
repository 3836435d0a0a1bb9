//! `sluice completions SHELL`: a completion script for the shell, made by
//! clap_complete from the same definitions the command line parses with,
//! so it cannot name a subcommand or flag that does not exist.

use clap::{Args, CommandFactory};
use std::process::ExitCode;

/// Print a shell completion script for sluice.
#[derive(Debug, Args)]
#[command(
    long_about = "Print a completion script for SHELL on stdout: subcommands, flags and their fixed values (--sandbox \
auto|bwrap|landlock, ...) complete as you type. Generated from the same definitions `sluice --help` shows, so \
regenerate it after upgrading sluice.",
    after_help = "Examples:\n  sluice completions bash > ~/.local/share/bash-completion/completions/sluice\n  \
sluice completions zsh > ~/.zfunc/_sluice     # with fpath+=(~/.zfunc) before compinit in ~/.zshrc\n  \
sluice completions fish > ~/.config/fish/completions/sluice.fish\n  \
source <(sluice completions bash)             # this shell only"
)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "sluice", &mut script);
    super::print(&String::from_utf8_lossy(&script))
}
