//! `sluice man`: the manual page in roff, made by clap_mangen from the same
//! definitions the command line parses with.

use clap::{Args, CommandFactory};
use std::process::ExitCode;

/// Print sluice's manual page (roff).
#[derive(Debug, Args)]
#[command(
    long_about = "Print the manual page on stdout, in roff: sluice(1), or a subcommand's own page (sluice-audit(1)) \
when one is named. Generated from the same definitions `sluice --help` shows.",
    after_help = "Examples:\n  sluice man | man -l -\n  sluice man audit | man -l -\n  \
sluice man > ~/.local/share/man/man1/sluice.1   # then `man sluice`\n  \
for c in run audit mcp; do sluice man $c > ~/.local/share/man/man1/sluice-$c.1; done"
)]
pub struct ManArgs {
    /// A subcommand whose page to print (sluice-SUBCOMMAND(1)) instead of sluice(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Option<String>,
}

pub fn man(args: ManArgs) -> ExitCode {
    let cmd = super::Cli::command();
    let page = match &args.subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            // The page's title is sluice-NAME, its synopsis `sluice NAME`.
            // clap names a command by a `'static` string; the process prints
            // one page and ends, so the name lives as long.
            Some(sub) => sub
                .clone()
                .name(&*Box::leak(format!("sluice-{name}").into_boxed_str()))
                .bin_name(format!("sluice {name}"))
                .version(env!("CARGO_PKG_VERSION")),
            None => {
                let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
                eprintln!(
                    "sluice man: no subcommand named {name:?}; the subcommands are: {}",
                    names.join(", ")
                );
                return ExitCode::from(2);
            }
        },
    };
    let mut roff = Vec::new();
    if let Err(e) = clap_mangen::Man::new(page).render(&mut roff) {
        eprintln!("sluice man: cannot render the page: {e}");
        return ExitCode::from(1);
    }
    super::print(&String::from_utf8_lossy(&roff))
}
