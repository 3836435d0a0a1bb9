//! `sluice flows`: print the manifest.

use crate::flows::{spec_json, Registry};
use clap::Args;
use std::process::ExitCode;

/// List the flows: name, tier, capabilities and what each does.
#[derive(Debug, Args)]
#[command(
    long_about = "List the flows a workflow can call, with each one's tier (sealed: changes nothing; \
compensable: changes files the run can restore; irreversible: cannot be taken back), the capabilities \
its calls need, and a one-line description. Name a flow to see its input schema.",
    after_help = "Examples:\n  sluice flows\n  sluice flows --json\n  sluice flows edit"
)]
pub struct FlowsArgs {
    /// Show one flow in full, with its input schema.
    pub name: Option<String>,
    /// Print JSON (the whole manifest, with the readOnly set) instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn flows(args: FlowsArgs) -> ExitCode {
    let registry = Registry::standard();
    let text = if let Some(name) = &args.name {
        let Some(flow) = registry.get(name) else {
            let names: Vec<&str> = registry.specs().map(|s| s.name).collect();
            eprintln!(
                "sluice: no flow named {name:?}; the flows are: {}",
                names.join(", ")
            );
            return ExitCode::from(2);
        };
        pretty(&spec_json(flow.spec()))
    } else if args.json {
        pretty(&registry.manifest())
    } else {
        table(&registry)
    };
    super::print(&text)
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

fn table(registry: &Registry) -> String {
    let mut out = format!(
        "{:<8} {:<12} {:<18} DESCRIPTION\n",
        "FLOW", "TIER", "CAPABILITIES"
    );
    for s in registry.specs() {
        let caps: Vec<&str> = s.actions.iter().map(|a| a.as_str()).collect();
        out += &format!(
            "{:<8} {:<12} {:<18} {}\n",
            s.name,
            s.tier.as_str(),
            caps.join(","),
            s.description
        );
    }
    out + &format!("\nread-only seat: {}\n", registry.read_only().join(", "))
}
