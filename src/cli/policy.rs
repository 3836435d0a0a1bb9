//! `sluice policy`: tools for policy authors — explain a decision, test a
//! policy against its `*_test.lua` files.

use super::policy_source;
use super::policy_suite::{self, default_flow};
use crate::call::Tier;
use crate::flows::Registry;
use crate::kernel::pattern::{Pattern, Role, Vars};
use crate::kernel::policy::{Placement, Policy, Request, Verdict};
use crate::kernel::{Action, Capability, Kernel};
use crate::sandbox::{Choice, Mode, Profile, Runner, Sandbox};
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Explain and test policies.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sluice policy explain 'fs:write:/w/.git/config' --workspace /w\n  sluice policy explain --policy org.lua --policy project.lua 'net:post:api.example.com'\n  sluice policy test policies/"
)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    Explain(ExplainArgs),
    Test(TestArgs),
}

/// Print the decision on one capability and the rule or hook that made it.
#[derive(Debug, Args)]
#[command(
    long_about = "Print the decision the kernel makes on one capability (allow, deny or ask), the rule or hook \
that made it and why, and for proc:spawn where the command would run: a container, or the host with the sandbox \
runner and the profile the command gets (what it may write, what stays read-only or hidden, the network), with a \
hint when a rule opens a folder's contents for writing but not the folder. Policies are loaded as `sluice run` \
loads them, with ${workspace} standing for --workspace; one that does not load is an error (exit 2).",
    after_help = "Examples:\n  sluice policy explain 'fs:read:/w/src/main.rs' --workspace /w\n  sluice policy explain --policy ci 'proc:spawn:cargo test' --flow bash\n  sluice policy explain --policy ci 'proc:spawn:git status' --env GIT_SSH_COMMAND='ssh -i k'\n  sluice policy explain --policy mine.lua --ceiling 'fs:*:/w/**' 'net:get:example.org'"
)]
pub struct ExplainArgs {
    /// The capability, `action:resource`, e.g. `fs:write:/w/a.txt`.
    pub capability: String,
    /// Policy files, as for `sluice run` [default: the built-in default].
    #[arg(long, value_name = "FILE")]
    pub policy: Vec<String>,
    /// What `${workspace}` stands for [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The flow asking [default: the usual one for the action, e.g. read for fs:read].
    #[arg(long, value_name = "NAME")]
    pub flow: Option<String>,
    /// The run's ceiling, as for `sluice run` (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub ceiling: Vec<String>,
    /// An entry of the call's `env`, for proc:spawn: judged as the leading
    /// assignment of each command (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// The sandbox runner a command would get, as for `sluice run`: auto,
    /// bwrap or landlock.
    #[arg(long, value_name = "RUNNER", default_value = "auto", value_parser = ["auto", "bwrap", "bubblewrap", "landlock"])]
    pub sandbox: String,
    /// Print the facts as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Run the test_* functions of *_test.lua files next to policies.
#[derive(Debug, Args)]
#[command(
    long_about = "Run every test_* function of the *_test.lua files at PATH (a file, or a folder). \
x_test.lua tests the policy x.lua beside it, through a `policy` table: policy.allows(cap), \
policy.denies(cap), policy.asks(cap) assert a decision (an optional second argument gives {flow =, input =}), \
policy.decide(cap) returns {decision, by, reason}, and policy.workspace is what ${workspace} stands for (/workspace). \
Exits 1 when a test fails.",
    after_help = "Examples:\n  sluice policy test policies/\n  sluice policy test policies/default_test.lua"
)]
pub struct TestArgs {
    /// A *_test.lua file or a folder holding them [default: policies].
    pub path: Option<PathBuf>,
}

pub fn policy(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Explain(a) => explain(a),
        PolicyCommand::Test(a) => test(a),
    }
}

fn explain(args: ExplainArgs) -> ExitCode {
    match explained(&args) {
        Ok(facts) if args.json => super::print(&format!("{}\n", facts.json())),
        Ok(facts) => super::print(&facts.text()),
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
    }
}

/// What `explain` found: the verdict, and for a command where it runs.
struct Explained {
    cap: Capability,
    flow: String,
    verdict: Verdict,
    /// For proc:spawn only.
    place: Option<Place>,
}

/// Where a command would run.
enum Place {
    Container(String),
    /// The route refused it, or failed: why.
    Refused(String),
    /// On the host: the runner (or why none works) and the profile.
    Host {
        runner: Result<Runner, String>,
        profile: Box<Profile>,
        hints: Vec<String>,
    },
}

/// Paths a text list shows before "and N more".
const SHOWN: usize = 8;

impl Explained {
    fn text(&self) -> String {
        let v = &self.verdict;
        let mut out = format!(
            "capability: {}\nflow:       {}\ndecision:   {}\nby:         {}\nreason:     {}\n",
            self.cap, self.flow, v.decision, v.by, v.reason
        );
        match &self.place {
            None => {}
            Some(Place::Container(c)) => out += &format!("runs on:    container {c}\n"),
            Some(Place::Refused(why)) => out += &format!("runs on:    {why}\n"),
            Some(Place::Host {
                runner,
                profile,
                hints,
            }) => {
                out += &format!("runs on:    {}\n", host_text(runner, profile));
                out += &profile_text(profile);
                for hint in hints {
                    out += &format!("hint:       {hint}\n");
                }
            }
        }
        out
    }

    fn json(&self) -> serde_json::Value {
        let v = &self.verdict;
        let mut out = json!({
            "capability": self.cap.to_string(),
            "flow": self.flow,
            "decision": v.decision,
            "by": v.by,
            "reason": v.reason,
        });
        let runs_on = match &self.place {
            None => return out,
            Some(Place::Container(c)) => json!({"place": "container", "container": c}),
            Some(Place::Refused(why)) => json!({"place": "refused", "reason": why}),
            Some(Place::Host {
                runner,
                profile,
                hints,
            }) => {
                let mut host = json!({
                    "place": "host",
                    "confined": !profile.confines_nothing(),
                    "mode": profile.mode.as_str(),
                });
                match runner {
                    Ok(r) => host["runner"] = json!(r.name()),
                    Err(why) => host["runnerError"] = json!(why),
                }
                let (hiding, keeping) = globs(profile);
                out["sandbox"] = json!({
                    "mode": profile.mode.as_str(),
                    "network": if profile.network { "open" } else { "closed" },
                    "writable": profile.writable,
                    "readOnly": existing(&profile.read_only),
                    "readOnlyByGlob": keeping,
                    "hidden": profile.hidden,
                    "hiddenByGlob": hiding,
                    "readable": profile.readable,
                    "partial": profile.partial,
                    "hints": hints,
                });
                host
            }
        };
        out["runsOn"] = runs_on;
        out
    }
}

/// Where a host command runs, in words: the runner and mode, unconfined,
/// or refused for want of a runner.
fn host_text(runner: &Result<Runner, String>, profile: &Profile) -> String {
    if profile.confines_nothing() {
        return "the host, unconfined (the policies grant every file and the network, and nothing stays read-only or hidden)".into();
    }
    match runner {
        Ok(r) => format!(
            "the host, confined by {} ({})",
            match r {
                Runner::Bwrap(_) => "bubblewrap",
                Runner::Landlock => "landlock",
            },
            profile.mode.as_str()
        ),
        Err(why) => format!(
            "the host, but no sandbox runner works here, so the command would be refused: {why}"
        ),
    }
}

/// The profile's facts, one line each: what the command may write, what
/// stays read-only or hidden inside, and the network.
fn profile_text(profile: &Profile) -> String {
    let writable = match profile.mode {
        Mode::ReadOnly => {
            "nothing but private temp storage (no fs:write rule opens a folder and its contents)"
                .to_string()
        }
        _ => format!(
            "{} (and the private caches and temp storage)",
            listed(&profile.writable)
        ),
    };
    let mut out = format!("writable:   {writable}\n");
    let (hiding, keeping) = globs(profile);
    let matched = |g: &str| format!("what {g} matches");
    let mut kept: Vec<String> = existing(&profile.read_only)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    kept.extend(keeping.into_iter().map(matched));
    if !kept.is_empty() {
        out += &format!("read-only:  {}\n", bounded(&kept));
    }
    let mut hidden: Vec<String> = profile
        .hidden
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    hidden.extend(hiding.into_iter().map(matched));
    if !hidden.is_empty() {
        out += &format!("hidden:     {}\n", bounded(&hidden));
    }
    out += &format!(
        "network:    {}\n",
        if profile.network {
            "open"
        } else {
            "closed (commands get the network only with net:get:*, net:post:* and net:private:* allowed, and no deny, ask or decide hook on the network)"
        }
    );
    for why in &profile.partial {
        out += &format!("partial:    {why}\n");
    }
    out
}

/// The deny globs expanded when a command starts: those whose matches are
/// hidden (a deny on reads), and those kept read-only (on writes alone).
fn globs(profile: &Profile) -> (Vec<&str>, Vec<&str>) {
    let (hide, keep): (Vec<&Pattern>, Vec<&Pattern>) = profile
        .hide_globs
        .iter()
        .partition(|g| g.selects(Action::FsRead));
    (texts(hide), texts(keep))
}

fn texts(list: Vec<&Pattern>) -> Vec<&str> {
    list.into_iter().map(Pattern::as_str).collect()
}

/// Paths that exist: what a runner keeps read-only is what is there.
fn existing(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().filter(|p| p.exists()).cloned().collect()
}

fn listed(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    bounded(&shown)
}

/// The first [`SHOWN`] items, then how many more.
fn bounded(items: &[String]) -> String {
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text += &format!(" and {} more", items.len() - SHOWN);
    }
    text
}

fn explained(args: &ExplainArgs) -> Result<Explained, String> {
    let mut cap = Capability::parse(&args.capability)?;
    // As a flow's envelope would name it: canonical, links resolved.
    if matches!(cap.action, Action::FsRead | Action::FsWrite) {
        let path = Path::new(&cap.resource);
        if !path.is_absolute() {
            return Err(format!(
                "{cap} names a relative path; fs capabilities name absolute paths"
            ));
        }
        if let Ok(real) = crate::fsops::path::canonical_lenient(path) {
            cap.resource = real.display().to_string();
        }
    }
    let given = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let workspace = std::fs::canonicalize(&given).unwrap_or(given);
    let vars = Vars::new(workspace.clone());
    let sources = if args.policy.is_empty() {
        vec![policy_source("default")]
    } else {
        args.policy.iter().map(|p| policy_source(p)).collect()
    };
    let policies: Vec<Policy> = sources
        .into_iter()
        .map(|s| Policy::load(s, vars.clone()))
        .collect();
    let ceiling = args
        .ceiling
        .iter()
        .map(|t| Pattern::parse_for(t, &vars, Role::Bound).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    // As `sluice run` refuses to start: a policy that does not load (or
    // that a command could replace) would only deny, which is not what the
    // author asked about.
    if let Some(e) = crate::kernel::refusal(&policies, &ceiling) {
        return Err(e);
    }
    let kernel = Kernel::new(policies, ceiling, vars);
    let flow = args
        .flow
        .clone()
        .unwrap_or_else(|| default_flow(&cap).to_string());
    let tier = Registry::standard()
        .get(&flow)
        .map_or(Tier::Irreversible, |f| f.spec().tier);
    let mut env = serde_json::Map::new();
    for entry in &args.env {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(format!("--env {entry:?} is not NAME=VALUE"));
        };
        env.insert(name.to_string(), value.into());
    }
    let input = if env.is_empty() {
        json!({})
    } else {
        json!({ "env": env })
    };
    let req = Request {
        capability: &cap,
        flow: &flow,
        tier,
        input: &input,
        run_id: "explain",
        task: "0",
        script: "explain",
        cwd: None,
    };
    let verdict = kernel.decide(&req);
    let place = (cap.action == Action::ProcSpawn).then(|| match kernel.route(&req) {
        Ok(Some(Placement::Container(c))) => Place::Container(c),
        Ok(Some(Placement::Refused(why))) => Place::Refused(format!("refused by route: {why}")),
        Ok(Some(Placement::Host)) | Ok(None) => {
            let choice = Choice::parse(&args.sandbox).unwrap_or_default();
            let (profile, hints) = kernel.with_static(|view| {
                (
                    crate::sandbox::derive(view, &workspace),
                    crate::sandbox::hints(view, &workspace),
                )
            });
            Place::Host {
                runner: Sandbox::new(choice, "explain").runner(),
                profile: Box::new(profile),
                hints,
            }
        }
        Err(v) => Place::Refused(format!("refused ({}: {})", v.by, v.reason)),
    });
    Ok(Explained {
        cap,
        flow,
        verdict,
        place,
    })
}

fn test(args: TestArgs) -> ExitCode {
    let path = args.path.unwrap_or_else(|| PathBuf::from("policies"));
    let files = match policy_suite::find_tests(&path) {
        Ok(f) if f.is_empty() => {
            eprintln!(
                "sluice: no *_test.lua files at {}. {}",
                path.display(),
                policy_suite::HOW_TO_TEST
            );
            return ExitCode::from(1);
        }
        Ok(f) => f,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    let (mut passed, mut failed) = (0, 0);
    let mut report = String::new();
    for file in &files {
        match policy_suite::run_file(file) {
            Ok(outcomes) => {
                for o in outcomes {
                    match &o.failure {
                        None => {
                            passed += 1;
                            report += &format!("PASS {} {}\n", shown(file), o.test);
                        }
                        Some(why) => {
                            failed += 1;
                            report += &format!("FAIL {} {}\n     {why}\n", shown(file), o.test);
                        }
                    }
                }
            }
            Err(e) => {
                failed += 1;
                report += &format!("FAIL {} (did not load)\n     {e}\n", shown(file));
            }
        }
    }
    report += &format!("{passed} passed, {failed} failed\n");
    let printed = super::print(&report);
    if failed > 0 {
        ExitCode::from(1)
    } else {
        printed
    }
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
