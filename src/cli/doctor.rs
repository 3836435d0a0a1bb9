//! `sluice doctor`: what this machine can do for sluice, and why not.

use crate::container::check::{self, Started};
use crate::sandbox;
use clap::Args;
use serde_json::json;
use std::process::ExitCode;

/// Check which sandbox runners and container engines work on this machine.
#[derive(Debug, Args)]
#[command(
    long_about = "Check which sandbox runners work on this machine. Commands (bash, shell_command) run confined: \
in bubblewrap when it is installed and can create namespaces, else under landlock with a seccomp filter. With \
neither, every command is refused (provider_unavailable), never run unconfined. Also checks the container \
engines (podman, docker) for routed commands (--container-engine, a policy's `containers`): each that answers \
starts a throwaway container (`ENGINE run --rm --network none --pull never IMAGE true`) from --image, else from \
the first image present locally (doctor never pulls one), and a failure is named with its fix (the rlimit \
refusal a default containers.conf gives on some hosts, for one). Last, what enforces each of a policy's \
resource `limits` here (a cgroup v2 or v1, an rlimit, or nothing). Exits 0 when a sandbox runner works, 1 \
when none does; an engine that does not work changes nothing.",
    after_help = "Examples:\n  sluice doctor\n  sluice doctor --json\n  sluice doctor --image localhost/app\n  CONTAINERS_CONF=~/podman.conf sluice doctor   # check the engine with the configuration sluice will pass it"
)]
pub struct DoctorArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
    /// The image each container engine starts a throwaway container from (default: the first image present
    /// locally). It must be present already: doctor never pulls.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
}

/// One container engine's findings: whether it answers (its program and
/// version), and if so whether it started a container.
struct EngineFindings {
    kind: &'static str,
    answers: Result<String, String>,
    started: Option<Started>,
}

impl EngineFindings {
    fn of(kind: &'static str, image: Option<&str>) -> EngineFindings {
        match crate::container::engine::probe(kind) {
            Ok((engine, what)) => EngineFindings {
                kind,
                answers: Ok(what),
                started: Some(check::start(&engine, image)),
            },
            Err(why) => EngineFindings {
                kind,
                answers: Err(why),
                started: None,
            },
        }
    }

    fn works(&self) -> bool {
        self.answers.is_ok() && self.started.as_ref().is_none_or(Started::works)
    }

    fn to_json(&self) -> serde_json::Value {
        let mut v = match &self.answers {
            Ok(what) => json!({"works": self.works(), "program": what}),
            Err(why) => json!({"works": false, "why": why}),
        };
        if let Some(s) = &self.started {
            v["container"] = s.to_json();
            if !s.works() {
                v["why"] = json!(s.describe(self.kind).0);
            }
        }
        v
    }

    /// Its lines of the text report: whether it answers, then what
    /// starting a container found, and the fix, indented under it.
    fn text(&self) -> String {
        let kind = self.kind;
        let what = match &self.answers {
            Err(why) => return format!("{kind:9} does not work: {why}\n"),
            Ok(what) => what,
        };
        let Some(started) = &self.started else {
            return format!("{kind:9} works: {what}\n");
        };
        let (found, fix) = started.describe(kind);
        let mut t = match started {
            Started::Ran { .. } | Started::NoTrue { .. } => format!("{kind:9} works: {what}\n"),
            Started::NoImage { .. } => format!("{kind:9} answers: {what}\n"),
            _ => format!("{kind:9} does not work: {what} answers, but it {found}\n"),
        };
        if started.works() {
            t += &format!("{:9} {found}\n", "");
        }
        if let Some(fix) = fix {
            t += &format!("{:9} fix: {fix}\n", "");
        }
        t
    }
}

/// What doctor found: the runners, the engines and the limits.
struct Findings {
    bwrap: Result<std::path::PathBuf, String>,
    landlock: Result<u32, String>,
    engines: Vec<EngineFindings>,
    limits: Vec<(
        crate::exec::resources::Kind,
        crate::exec::resources::Mechanism,
        String,
    )>,
    /// The runner `--sandbox auto` uses, if any works.
    chosen: Option<&'static str>,
}

pub fn doctor(args: DoctorArgs) -> ExitCode {
    let bwrap = sandbox::probe_bwrap();
    let landlock = sandbox::landlock::probe();
    let chosen = match (&bwrap, &landlock) {
        (Ok(_), _) => Some("bwrap"),
        (Err(_), Ok(_)) => Some("landlock"),
        _ => None,
    };
    let found = Findings {
        bwrap,
        landlock,
        engines: crate::container::engine::KINDS
            .iter()
            .map(|k| EngineFindings::of(k, args.image.as_deref()))
            .collect(),
        // How a policy's `limits` would be enforced for this process.
        limits: crate::exec::resources::describe_cgroups(),
        chosen,
    };
    let text = match args.json {
        true => format!("{:#}\n", found.to_json()),
        false => found.text(),
    };
    let printed = super::print(&text);
    if chosen.is_none() {
        return ExitCode::from(1);
    }
    printed
}

impl Findings {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "bwrap": match &self.bwrap {
                Ok(p) => json!({"works": true, "program": p.display().to_string()}),
                Err(why) => json!({"works": false, "why": why}),
            },
            "landlock": match &self.landlock {
                Ok(abi) => json!({"works": true, "abi": abi}),
                Err(why) => json!({"works": false, "why": why}),
            },
            "auto": self.chosen,
            "engines": self.engines.iter().map(|e| (e.kind.to_string(), e.to_json()))
                .collect::<serde_json::Map<_, _>>(),
            "limits": self.limits.iter().map(|(k, m, detail)| (k.name().to_string(), json!({
                "enforcement": m, "detail": detail,
            }))).collect::<serde_json::Map<_, _>>(),
        })
    }

    fn text(&self) -> String {
        let line = |name: &str, r: Result<String, &String>| match r {
            Ok(what) => format!("{name:9} works: {what}\n"),
            Err(why) => format!("{name:9} does not work: {why}\n"),
        };
        let mut t = line(
            "bwrap",
            self.bwrap.as_ref().map(|p| p.display().to_string()),
        );
        t += &line(
            "landlock",
            self.landlock.as_ref().map(|abi| format!("ABI {abi}")),
        );
        t += &match self.chosen {
            Some(r) => format!("--sandbox auto uses {r}\n"),
            None => "no runner works: commands will be refused. Install bubblewrap (apt-get install bubblewrap) \
                     or use a kernel with landlock enabled\n"
                .to_string(),
        };
        for e in &self.engines {
            t += &e.text();
        }
        for (kind, mechanism, detail) in &self.limits {
            let by = serde_json::to_value(mechanism).unwrap_or_default();
            t += &format!(
                "limits.{} enforced by {}: {detail}\n",
                kind.name(),
                by.as_str().unwrap_or_default()
            );
        }
        t
    }
}
