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
    let rows: Vec<[String; 4]> = registry
        .specs()
        .map(|s| {
            let caps: Vec<&str> = s.actions.iter().map(|a| a.as_str()).collect();
            [
                s.name.to_string(),
                s.tier.as_str().to_string(),
                caps.join(","),
                s.description.to_string(),
            ]
        })
        .collect();
    let head = ["FLOW", "TIER", "CAPABILITIES", "DESCRIPTION"].map(String::from);
    let width = |i: usize| {
        rows.iter()
            .chain([&head])
            .map(|r| r[i].len())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for r in [&head].into_iter().chain(&rows) {
        out += &format!("{:<w0$} {:<w1$} {:<w2$} {}\n", r[0], r[1], r[2], r[3]);
    }
    out + &format!("\nread-only seat: {}\n", registry.read_only().join(", "))
}
