//! `sluice policy`: tools for policy authors — explain a decision, test a
//! policy against its `*_test.lua` files.

use super::policy_source;
use super::policy_suite::{self, default_flow};
use crate::call::Tier;
use crate::flows::Registry;
use crate::kernel::pattern::Vars;
use crate::kernel::policy::{Placement, Policy, Request};
use crate::kernel::{Action, Capability, Kernel};
use clap::{Args, Subcommand};
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
that made it and why, and for proc:spawn where the command would run. Policies are loaded as `sluice run` \
loads them, with ${workspace} standing for --workspace.",
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
    match explain_text(&args) {
        Ok(text) => super::print(&text),
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
    }
}

fn explain_text(args: &ExplainArgs) -> Result<String, String> {
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
    let vars = Vars::new(workspace);
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
        .map(|t| crate::kernel::pattern::Pattern::parse(t, &vars).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
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
        serde_json::json!({})
    } else {
        serde_json::json!({ "env": env })
    };
    let req = Request {
        capability: &cap,
        flow: &flow,
        tier,
        input: &input,
        run_id: "explain",
        script: "explain",
        cwd: None,
    };
    let v = kernel.decide(&req);
    let mut out = format!(
        "capability: {cap}\nflow:       {flow}\ndecision:   {}\nby:         {}\nreason:     {}\n",
        v.decision, v.by, v.reason
    );
    if cap.action == Action::ProcSpawn {
        let route = match kernel.route(&req) {
            Ok(Some(Placement::Container(c))) => format!("container {c}"),
            Ok(Some(Placement::Refused(why))) => format!("refused by route: {why}"),
            Ok(Some(Placement::Host)) | Ok(None) => "the host".to_string(),
            Err(v) => format!("refused ({}: {})", v.by, v.reason),
        };
        out += &format!("runs on:    {route}\n");
    }
    Ok(out)
}

fn test(args: TestArgs) -> ExitCode {
    let path = args.path.unwrap_or_else(|| PathBuf::from("policies"));
    let files = match policy_suite::find_tests(&path) {
        Ok(f) if f.is_empty() => {
            eprintln!("sluice: no *_test.lua files at {}", path.display());
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
