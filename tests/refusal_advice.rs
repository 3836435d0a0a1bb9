//! A refusal's advice works when followed, and grants nothing else: for a
//! corpus of command lines an ask refuses (no terminal), the `--approve`
//! flags the error suggests make the same call pass, and the rules its
//! reason suggests, added to the policy, make it pass too; the same
//! approvals do not pass a line they do not name.

mod common;

use common::{lua_str, policy, run_lua_with, workspace, EMIT};
use serde_json::Value;

/// One refusal of the corpus: a policy, a call's `bash` input as Lua, and
/// a line the advice must not grant.
struct Case {
    name: &'static str,
    rules: &'static str,
    input: &'static str,
    other: &'static str,
}

const CORPUS: [Case; 4] = [
    Case {
        // Issue 41's: a function defined and called, under an allow-all
        // policy, with PATH set for the call (no wildcard grants PATH).
        name: "a function and its call with PATH set",
        rules: r#"p.allow "*""#,
        input: r#"{command = "in_box() { echo hi; }; in_box", env = {PATH = "/usr/bin:/bin"}}"#,
        other: r#"{command = "in_box() { id; }; in_box", env = {PATH = "/usr/bin:/bin"}}"#,
    },
    Case {
        name: "two commands, one allowed",
        rules: r#"p.programs, p.allow "fs:*:${workspace}/**", p.allow "proc:spawn:echo *""#,
        input: r#"{command = "echo a; uname -s"}"#,
        other: r#"{command = "echo a; uname -a"}"#,
    },
    Case {
        name: "an assignment no wildcard grants",
        rules: r#"p.allow "*""#,
        input: r#"{command = "LD_PRELOAD=/nonexistent.so echo hi"}"#,
        other: r#"{command = "LD_PRELOAD=/other.so echo hi"}"#,
    },
    Case {
        name: "one command",
        rules: r#"p.programs, p.allow "fs:*:${workspace}/**""#,
        input: r#"{command = "uname -s"}"#,
        other: r#"{command = "uname -r"}"#,
    },
];

fn policy_text(rules: &str) -> String {
    format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ {rules} }}, otherwise = \"ask\" }}\n")
}

/// Runs `bash(input)` under `policy` with `flags`: its result or error.
fn call(ws: &common::Workspace, policy: &str, input: &str, flags: &[&str]) -> Value {
    let script = format!("{EMIT}local r, e = sluice.bash({input})\nemit(r or e)\n");
    let mut all = vec!["--policy", policy];
    all.extend_from_slice(flags);
    let run = run_lua_with(ws.path(), &script, &all, &[]).ok();
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// The `--approve` patterns of an error's `approve` detail.
fn approvals(advice: &str) -> Vec<String> {
    advice
        .split("--approve '")
        .skip(1)
        .map(|s| s[..s.rfind('\'').unwrap()].replace(r"'\''", "'"))
        .collect()
}

/// The rules the reason suggests granting every part with, else its one
/// example rule.
fn suggested_rules(reason: &str) -> Vec<String> {
    let tail = match reason.split_once("these rules grant them all: ") {
        Some((_, all)) => all,
        None => reason.rsplit_once("e.g. ").map_or("", |(_, r)| r),
    };
    tail.split("p.allow \"")
        .skip(1)
        .map(|s| {
            format!(
                "p.allow {}",
                lua_str(&s[..s.find('"').unwrap()].replace("\\\\", "\\"))
            )
        })
        .collect()
}

#[test]
fn the_approvals_a_refusal_suggests_grant_the_call_and_nothing_else() {
    for case in &CORPUS {
        let ws = workspace();
        let p = policy(&ws, "p.lua", &policy_text(case.rules));
        let refused = call(&ws, &p, case.input, &[]);
        assert_eq!(
            refused["code"], "permission_required",
            "{}: {refused}",
            case.name
        );
        let advice = refused["approve"].as_str().unwrap().to_string();
        let patterns = approvals(&advice);
        assert!(!patterns.is_empty(), "{}: {advice}", case.name);
        let mut flags: Vec<&str> = Vec::new();
        for pattern in &patterns {
            flags.extend(["--approve", pattern]);
        }
        let passed = call(&ws, &p, case.input, &flags);
        assert_eq!(
            passed["exitCode"], 0,
            "{}: following {advice}: {passed}",
            case.name
        );
        let other = call(&ws, &p, case.other, &flags);
        assert_eq!(
            other["code"], "permission_required",
            "{}: {advice} also granted {}: {other}",
            case.name, case.other
        );
    }
}

#[test]
fn the_rules_a_refusal_suggests_grant_the_call() {
    for case in CORPUS.iter().filter(|c| c.rules.contains("\"*\"")) {
        let ws = workspace();
        let p = policy(&ws, "p.lua", &policy_text(case.rules));
        let refused = call(&ws, &p, case.input, &[]);
        let reason = refused["reason"].as_str().unwrap_or_default().to_string();
        let rules = suggested_rules(&reason);
        assert!(
            !rules.is_empty(),
            "{}: no rule suggested in {reason}",
            case.name
        );
        let fixed = policy(
            &ws,
            "fixed.lua",
            &policy_text(&format!("{}, {}", case.rules, rules.join(", "))),
        );
        let passed = call(&ws, &fixed, case.input, &[]);
        assert_eq!(
            passed["exitCode"], 0,
            "{}: following {rules:?}: {passed}",
            case.name
        );
    }
}

/// A refusal of `bash{script = ..., interpreter = ...}` names the script
/// in the caller's words first, then the line the policy judged
/// (`python3 -`), and its suggested approval grants that line.
#[test]
fn a_refused_script_is_named_in_the_callers_words() {
    let ws = workspace();
    let p = policy(
        &ws,
        "p.lua",
        &policy_text(r#"p.programs, p.allow "fs:*:${workspace}/**""#),
    );
    let input = r#"{script = "print(6 * 7)\nprint('done')\n", interpreter = "python3"}"#;
    let refused = call(&ws, &p, input, &[]);
    assert_eq!(refused["code"], "permission_required", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the script `print(6 * 7)…` runs as `python3 -` (its text on standard input), so the policy judges that line: proc:spawn:python3 - needs approval"
        ),
        "{message}"
    );
    let patterns = approvals(refused["approve"].as_str().unwrap());
    assert_eq!(patterns, ["proc:spawn:python3 -"]);
    let passed = call(&ws, &p, input, &["--approve", &patterns[0]]);
    assert_eq!(passed["stdout"], "42\ndone\n", "{passed}");
}

/// A wrapper does not hide what it runs: `env git push origin main` is
/// refused by the deny rule on `git push`, and the refusal names that rule
/// and where it is written, not "no rule matched".
#[test]
fn a_refusal_through_env_names_the_deny_rule_on_what_env_runs() {
    let ws = workspace();
    let p = policy(
        &ws,
        "p.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.allow \"proc:spawn:*\",\n  p.deny(\"proc:spawn:git push *\", \"pushing is for people\"),\n}, otherwise = \"ask\" }\n",
    );
    let refused = call(&ws, &p, r#"{command = "env git push origin main"}"#, &[]);
    assert_eq!(refused["code"], "permission_denied", "{refused}");
    assert_eq!(
        refused["by"],
        format!("deny \"proc:spawn:git push *\" (rules[2] of {p})").as_str()
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with("for `git push origin main` in the line: pushing is for people."),
        "{refused}"
    );
}
