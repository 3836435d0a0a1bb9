//! `sluice doctor`: what this machine can do for sluice, and why not.

use crate::sandbox;
use clap::Args;
use serde_json::json;
use std::process::ExitCode;

/// Check which sandbox runners work on this machine.
#[derive(Debug, Args)]
#[command(
    long_about = "Check which sandbox runners work on this machine. Commands (bash, shell_command) run confined: \
in bubblewrap when it is installed and can create namespaces, else under landlock with a seccomp filter. With \
neither, every command is refused (provider_unavailable), never run unconfined. Also lists the container \
engines (podman, docker) that answer here, for routed commands (--container-engine, a policy's `containers`), \
and what enforces each of a policy's resource `limits` here (a cgroup v2 or v1, an rlimit, or nothing). \
Exits 0 when a sandbox runner works, 1 when none does; an engine that does not work changes nothing.",
    after_help = "Examples:\n  sluice doctor\n  sluice doctor --json"
)]
pub struct DoctorArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn doctor(args: DoctorArgs) -> ExitCode {
    let bwrap = sandbox::probe_bwrap();
    let landlock = sandbox::landlock::probe();
    let engines: Vec<(&str, Result<String, String>)> = crate::container::engine::KINDS
        .iter()
        .map(|k| (*k, crate::container::engine::probe(k)))
        .collect();
    // How a policy's `limits` would be enforced for this process.
    let limits = crate::exec::resources::describe_cgroups();
    let chosen = match (&bwrap, &landlock) {
        (Ok(_), _) => Some("bwrap"),
        (Err(_), Ok(_)) => Some("landlock"),
        _ => None,
    };
    let text = if args.json {
        let report = json!({
            "bwrap": match &bwrap {
                Ok(p) => json!({"works": true, "program": p.display().to_string()}),
                Err(why) => json!({"works": false, "why": why}),
            },
            "landlock": match &landlock {
                Ok(abi) => json!({"works": true, "abi": abi}),
                Err(why) => json!({"works": false, "why": why}),
            },
            "auto": chosen,
            "engines": engines.iter().map(|(k, r)| (k.to_string(), match r {
                Ok(what) => json!({"works": true, "program": what}),
                Err(why) => json!({"works": false, "why": why}),
            })).collect::<serde_json::Map<_, _>>(),
            "limits": limits.iter().map(|(k, m, detail)| (k.name().to_string(), json!({
                "enforcement": m, "detail": detail,
            }))).collect::<serde_json::Map<_, _>>(),
        });
        format!("{report:#}\n")
    } else {
        let line = |name: &str, r: Result<String, &String>| match r {
            Ok(what) => format!("{name:9} works: {what}\n"),
            Err(why) => format!("{name:9} does not work: {why}\n"),
        };
        let mut t = line("bwrap", bwrap.as_ref().map(|p| p.display().to_string()));
        t += &line(
            "landlock",
            landlock.as_ref().map(|abi| format!("ABI {abi}")),
        );
        t += &match chosen {
            Some(r) => format!("--sandbox auto uses {r}\n"),
            None => "no runner works: commands will be refused. Install bubblewrap (apt-get install bubblewrap) \
                     or use a kernel with landlock enabled\n"
                .to_string(),
        };
        for (kind, r) in &engines {
            let r = match r {
                Ok(what) => Ok(what.clone()),
                Err(why) => Err(why),
            };
            t += &line(kind, r);
        }
        for (kind, mechanism, detail) in &limits {
            let by = serde_json::to_value(mechanism).unwrap_or_default();
            t += &format!(
                "limits.{} enforced by {}: {detail}\n",
                kind.name(),
                by.as_str().unwrap_or_default()
            );
        }
        t
    };
    let printed = super::print(&text);
    if chosen.is_none() {
        return ExitCode::from(1);
    }
    printed
}
