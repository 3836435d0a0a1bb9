//! The kernel's decision order, through `sluice run --policy FILE`: the run's
//! ceiling, then any matching deny (from any policy), then the `decide`
//! hooks (strictest wins), then allow, then ask; nothing matched is the
//! policies' `otherwise` (ask). Every refusal names the capability, the rule
//! or hook that made it (`by`) and why (`reason`).

mod common;

use common::*;
use serde_json::{json, Value};
use sluice::internals::kernel::approval::{Approvals as Approver, Prompt};
use sluice::internals::kernel::pattern::{Pattern, Vars};
use sluice::internals::kernel::policy::{Decision, Request, Verdict};
use sluice::internals::kernel::Capability;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ok(flow: &str) -> Value {
    json!({ "ok": flow })
}

fn required(cap: &str, by: &str, reason: &str) -> Value {
    json!({
        "code": "permission_required",
        "message": format!(
            "{cap} needs approval ({by}: {reason}) and there is no terminal to ask. \
             Pre-approve it with --approve '{cap}', or change the policy."
        ),
        "capability": cap,
        "by": by,
        "reason": reason,
        "approve": format!("--approve '{cap}'"),
    })
}

/// `by` for a static rule.
fn rule(decision: &str, pattern: &str, index: usize, file: &str) -> String {
    format!("{decision} \"{pattern}\" (rules[{index}] of {file})")
}

/// `by` for a decide hook defined at `file:line`.
fn hook(file: &str, line: usize) -> String {
    format!("decide hook at {file}:{line}")
}

fn cap(action: &str, path: &Path) -> String {
    format!("{action}:{}", path.display())
}

const HEAD: &str = "local p = require(\"sluice.policy\")\n";

#[test]
fn deny_rule_beats_an_allow_rule_listed_before_it() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    fs::write(ws.file("secret.txt"), "s\n").unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{ rules = {{\n  p.allow \"fs:read:${{workspace}}/**\",\n  p.deny(\"fs:read:${{workspace}}/secret.txt\", \"not this one\"),\n}} }}\n"
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("read", {path = "a.txt"}) try("read", {path = "secret.txt"})"#,
    );
    let secret = cap("fs:read", &ws.file("secret.txt"));
    assert_eq!(
        out,
        vec![
            ok("read"),
            denied(
                &secret,
                &rule("deny", "fs:read:${workspace}/secret.txt", 2, &pol),
                "not this one"
            ),
        ]
    );
}

#[test]
fn deny_from_a_second_policy_beats_allow_from_the_first_in_either_order() {
    let ws = workspace();
    fs::create_dir(ws.file("locked")).unwrap();
    let org = policy(
        &ws,
        "org.lua",
        &format!("{HEAD}return {{ rules = {{ p.allow \"fs:*:${{workspace}}/**\" }} }}\n"),
    );
    let project = policy(
        &ws,
        "project.lua",
        &format!("{HEAD}return {{ rules = {{ p.deny \"fs:write:${{workspace}}/locked/**\" }} }}\n"),
    );
    let body = r#"try("write", {path = "open.txt", content = "x"}) try("write", {path = "locked/x.txt", content = "x"})"#;
    let locked = cap("fs:write", &ws.file("locked/x.txt"));
    let want = vec![
        ok("write"),
        denied(
            &locked,
            &rule("deny", "fs:write:${workspace}/locked/**", 1, &project),
            "the policy denies it",
        ),
    ];
    assert_eq!(
        lua(&ws, &["--policy", &org, "--policy", &project], body),
        want
    );
    assert_eq!(
        lua(&ws, &["--policy", &project, "--policy", &org], body),
        want
    );
    assert!(!ws.file("locked/x.txt").exists());
}

#[test]
fn deny_rule_beats_a_decide_hook_that_allows() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{\n  rules = {{ p.deny(\"fs:write\", \"read-only here\") }},\n  decide = function(req) return \"allow\" end,\n}}\n"
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "a.txt", content = "x"})"#,
    );
    assert_eq!(
        out,
        vec![denied(
            &cap("fs:write", &ws.file("a.txt")),
            &rule("deny", "fs:write", 1, &pol),
            "read-only here"
        )]
    );
}

#[test]
fn decide_runs_before_allow_rules_and_nil_falls_through() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let text = format!(
        r#"{HEAD}return {{
  rules = {{ p.allow "fs:*:${{workspace}}/**", p.allow "fs:read:${{workspace}}" }},
  decide = function(req)
    if req.flow == "write" then return "deny" end
    if req.flow == "edit" then return "ask" end
    return nil
  end,
}}
"#
    );
    let pol = policy(&ws, "p.lua", &text);
    let line = line_of(&text, "decide = function");
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"
        try("read", {path = "a.txt"})
        try("write", {path = "a.txt", content = "b\n"})
        try("edit", {path = "a.txt", oldString = "a", newString = "b"})
        try("ls", {})
        "#,
    );
    let a = ws.file("a.txt");
    assert_eq!(
        out,
        vec![
            ok("read"),
            denied(
                &cap("fs:write", &a),
                &hook(&pol, line),
                "the decide hook says deny"
            ),
            required(
                &cap("fs:read", &a),
                &hook(&pol, line),
                "the decide hook says ask"
            ),
            ok("ls"),
        ]
    );
    assert_eq!(fs::read_to_string(&a).unwrap(), "a\n");
}

#[test]
fn decide_nil_with_no_rule_matching_is_an_ask_by_the_policy() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        "return { decide = function(req) return nil end }\n",
    );
    let out = lua(&ws, &["--policy", &pol], r#"try("read", {path = "a.txt"})"#);
    let c = cap("fs:read", &ws.file("a.txt"));
    assert_eq!(
        out,
        vec![required(
            &c,
            &pol,
            &format!("no rule or hook of the policy matched {c}")
        )]
    );
}

#[test]
fn decide_table_carries_its_reason_and_its_decision() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let text = r#"return {
  decide = function(req)
    if req.flow == "write" then return {decision = "deny", reason = "friday freeze"} end
    if req.flow == "edit" then return {decision = "ask", reason = "edits need a look"} end
    return {decision = "allow", reason = "reads are fine"}
  end,
}
"#;
    let pol = policy(&ws, "p.lua", text);
    let line = line_of(text, "decide = function");
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"
        try("read", {path = "a.txt"})
        try("write", {path = "a.txt", content = "b\n"})
        try("edit", {path = "a.txt", oldString = "a", newString = "b"})
        "#,
    );
    let a = ws.file("a.txt");
    assert_eq!(
        out,
        vec![
            ok("read"),
            denied(&cap("fs:write", &a), &hook(&pol, line), "friday freeze"),
            required(&cap("fs:read", &a), &hook(&pol, line), "edits need a look"),
        ]
    );
}

#[test]
fn strictest_decide_opinion_across_policies_wins() {
    let ws = workspace();
    for f in ["one.txt", "two.txt", "three.txt", "four.txt", "five.txt"] {
        fs::write(ws.file(f), "x\n").unwrap();
    }
    // Opinions by file: A then B.
    // one: allow / deny -> deny (B); two: ask / allow -> ask (A);
    // three: nil / allow -> allow; four: deny "a" / deny "b" -> the first, A;
    // five: allow / ask -> ask (B).
    let a_text = r#"local say = {
  ["one.txt"] = "allow",
  ["two.txt"] = "ask",
  ["four.txt"] = {decision = "deny", reason = "a says no"},
  ["five.txt"] = "allow",
}
return { decide = function(req) return say[req.input.path] end }
"#;
    let b_text = r#"local say = {
  ["one.txt"] = {decision = "deny", reason = "b says no"},
  ["two.txt"] = "allow",
  ["three.txt"] = "allow",
  ["four.txt"] = {decision = "deny", reason = "b says no"},
  ["five.txt"] = {decision = "ask", reason = "b wants a person"},
}
return { decide = function(req) return say[req.input.path] end }
"#;
    let a = policy(&ws, "a.lua", a_text);
    let b = policy(&ws, "b.lua", b_text);
    let (la, lb) = (
        line_of(a_text, "decide = function"),
        line_of(b_text, "decide = function"),
    );
    let out = lua(
        &ws,
        &["--policy", &a, "--policy", &b],
        r#"for _, f in ipairs{"one.txt", "two.txt", "three.txt", "four.txt", "five.txt"} do
          try("read", {path = f})
        end"#,
    );
    let c = |f: &str| cap("fs:read", &ws.file(f));
    assert_eq!(
        out,
        vec![
            denied(&c("one.txt"), &hook(&b, lb), "b says no"),
            required(&c("two.txt"), &hook(&a, la), "the decide hook says ask"),
            ok("read"),
            denied(&c("four.txt"), &hook(&a, la), "a says no"),
            required(&c("five.txt"), &hook(&b, lb), "b wants a person"),
        ]
    );
}

#[test]
fn allow_rule_grants_the_call() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "p.lua",
        &format!("{HEAD}return {{ rules = {{ p.allow \"fs:write:${{workspace}}/out/**\" }} }}\n"),
    );
    fs::create_dir(ws.file("out")).unwrap();
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "out/a.txt", content = "hello\n"})"#,
    );
    assert_eq!(out, vec![ok("write")]);
    assert_eq!(fs::read_to_string(ws.file("out/a.txt")).unwrap(), "hello\n");
}

#[test]
fn ask_rule_unattended_is_permission_required_naming_the_approve_flag() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\", p.ask(\"fs:write:${{workspace}}/**\", \"writes need a person\") }} }}\n"
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"try("write", {path = "a.txt", content = "x"})"#,
    );
    let c = cap("fs:write", &ws.file("a.txt"));
    assert_eq!(
        out,
        vec![required(
            &c,
            &rule("ask", "fs:write:${workspace}/**", 2, &pol),
            "writes need a person"
        )]
    );
    assert_eq!(out[0]["approve"], format!("--approve '{c}'"));
    assert!(!ws.file("a.txt").exists());
}

#[test]
fn nothing_matched_is_an_ask_naming_every_policy() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    fs::write(ws.file("b.txt"), "b\n").unwrap();
    let one = policy(
        &ws,
        "one.lua",
        &format!("{HEAD}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/a.txt\" }} }}\n"),
    );
    let two = policy(&ws, "two.lua", "return {}\n");
    let body = r#"try("read", {path = "a.txt"}) try("read", {path = "b.txt"})"#;
    let b = cap("fs:read", &ws.file("b.txt"));
    let reason = format!("no rule or hook of the policy matched {b}");
    assert_eq!(
        lua(&ws, &["--policy", &one], body),
        vec![ok("read"), required(&b, &one, &reason)]
    );
    assert_eq!(
        lua(&ws, &["--policy", &one, "--policy", &two], body),
        vec![ok("read"), required(&b, &format!("{one}, {two}"), &reason)]
    );
}

#[test]
fn otherwise_deny_denies_what_nothing_matched_and_the_strictest_otherwise_wins() {
    let ws = workspace();
    fs::write(ws.file("b.txt"), "b\n").unwrap();
    let strict = policy(&ws, "strict.lua", "return { otherwise = \"deny\" }\n");
    let lax = policy(&ws, "lax.lua", "return { otherwise = \"ask\" }\n");
    let body = r#"try("read", {path = "b.txt"})"#;
    let b = cap("fs:read", &ws.file("b.txt"));
    let reason = format!("no rule or hook of the policy matched {b}");
    assert_eq!(
        lua(&ws, &["--policy", &strict], body),
        vec![denied(&b, &strict, &reason)]
    );
    assert_eq!(
        lua(&ws, &["--policy", &lax, "--policy", &strict], body),
        vec![denied(&b, &format!("{lax}, {strict}"), &reason)]
    );
    assert_eq!(
        lua(&ws, &["--policy", &lax], body),
        vec![required(&b, &lax, &reason)]
    );
}

#[test]
fn ceiling_denies_what_a_policy_allows_a_hook_allows_or_approve_names() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{\n  rules = {{ p.allow \"fs:*:${{workspace}}/**\" }},\n  decide = function(req) if req.flow == \"edit\" then return \"allow\" end end,\n}}\n"
        ),
    );
    let flags = [
        "--policy",
        &pol,
        "--ceiling",
        "fs:read:${workspace}/**",
        "--ceiling",
        "net:get",
        "--approve",
        "fs:write:${workspace}/**",
    ];
    let out = lua(
        &ws,
        &flags,
        r#"
        try("read", {path = "a.txt"})
        try("write", {path = "a.txt", content = "b\n"})
        try("edit", {path = "a.txt", oldString = "a", newString = "b"})
        "#,
    );
    let w = cap("fs:write", &ws.file("a.txt"));
    let reason = "outside the run's ceiling (fs:read:${workspace}/**, net:get)";
    assert_eq!(
        out,
        vec![
            ok("read"),
            denied(&w, "the run's ceiling", reason),
            denied(&w, "the run's ceiling", reason),
        ]
    );
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "a\n");
}

#[test]
fn ceiling_grants_nothing_by_itself() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let pol = policy(&ws, "p.lua", "return {}\n");
    let out = lua(
        &ws,
        &["--policy", &pol, "--ceiling", "fs:*"],
        r#"try("read", {path = "a.txt"})"#,
    );
    let c = cap("fs:read", &ws.file("a.txt"));
    assert_eq!(
        out,
        vec![required(
            &c,
            &pol,
            &format!("no rule or hook of the policy matched {c}")
        )]
    );
}

#[test]
fn approve_pre_approves_asks_from_rules_hooks_and_nothing_matched() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{\n  rules = {{ p.ask \"fs:write:${{workspace}}/**\" }},\n  decide = function(req) if req.flow == \"ls\" then return \"ask\" end end,\n}}\n"
        ),
    );
    let body = r#"
        try("write", {path = "a.txt", content = "b\n"})
        try("ls", {})
        try("read", {path = "a.txt"})
    "#;
    let out = lua(
        &ws,
        &[
            "--policy",
            &pol,
            "--approve",
            "fs:write:${workspace}/**",
            "--approve",
            "fs:read",
        ],
        body,
    );
    assert_eq!(out, vec![ok("write"), ok("ls"), ok("read")]);
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "b\n");
    // A pre-approval that does not match leaves the ask unanswered.
    let out = lua(
        &ws,
        &["--policy", &pol, "--approve", "fs:write:/elsewhere/**"],
        r#"try("write", {path = "a.txt", content = "c\n"})"#,
    );
    assert_eq!(
        out,
        vec![required(
            &cap("fs:write", &ws.file("a.txt")),
            &rule("ask", "fs:write:${workspace}/**", 1, &pol),
            "the policy asks a person first"
        )]
    );
}

#[test]
fn approve_does_not_override_a_deny() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "p.lua",
        &format!("{HEAD}return {{ rules = {{ p.deny(\"fs:write\", \"no writes\") }} }}\n"),
    );
    let out = lua(
        &ws,
        &["--policy", &pol, "--approve", "*"],
        r#"try("write", {path = "a.txt", content = "x"})"#,
    );
    assert_eq!(
        out,
        vec![denied(
            &cap("fs:write", &ws.file("a.txt")),
            &rule("deny", "fs:write", 1, &pol),
            "no writes"
        )]
    );
}

#[test]
fn approve_never_grants_net_private_by_a_wildcard() {
    let vars = Vars {
        workspace: PathBuf::from("/w"),
        home: None,
    };
    let pat = |t: &str| Pattern::parse(t, &vars).unwrap();
    let private = Capability::parse("net:private:http://127.0.0.1:8080").unwrap();
    let public = Capability::parse("net:get:example.org").unwrap();
    let input = json!({"url": "http://127.0.0.1:8080/"});
    let req = |c| Request {
        capability: c,
        flow: "fetch",
        tier: sluice::Tier::Sealed,
        input: &input,
        run_id: "r",
        task: "0",
        script: "s.lua",
        cwd: None,
    };
    let verdict = Verdict {
        decision: Decision::Ask,
        by: "test".into(),
        reason: "asks".into(),
        source: None,
    };
    for wild in [
        "*",
        "*:*",
        "net:*",
        "net:private",
        "net:private:*",
        "net:private:http://127.0.0.1:*",
    ] {
        let approver = Approver::new(vec![pat(wild)], Prompt::Unattended);
        let e = approver.approve(&req(&private), &verdict).unwrap_err();
        assert_eq!(e.code, sluice::ErrorCode::PermissionRequired, "{wild}");
        assert_eq!(
            e.details["approve"], "--approve 'net:private:http://127.0.0.1:8080'",
            "{wild}"
        );
        if wild != "net:private" && !wild.starts_with("net:private:") {
            assert!(approver.approve(&req(&public), &verdict).is_ok(), "{wild}");
        }
    }
    let exact = Approver::new(
        vec![pat("net:private:http://127.0.0.1:8080")],
        Prompt::Unattended,
    );
    assert!(exact.approve(&req(&private), &verdict).is_ok());
    let other_port = Capability::parse("net:private:http://127.0.0.1:8081").unwrap();
    assert_eq!(
        exact.approve(&req(&other_port), &verdict).unwrap_err().code,
        sluice::ErrorCode::PermissionRequired
    );
}

/// `sluice policy explain` output for one capability.
fn explain(ws: &Workspace, pol: &str, capability: &str) -> String {
    let out = Command::new(sluice_bin())
        .args(["policy", "explain", "--policy", pol, "--workspace"])
        .arg(ws.path())
        .arg(capability)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn allow_rules_never_grant_net_private_by_a_wildcard_but_deny_rules_catch_it() {
    let ws = workspace();
    let origin = "net:private:http://127.0.0.1:8080";
    let wild = policy(
        &ws,
        "wild.lua",
        &format!(
            "{HEAD}return {{ rules = {{ p.allow \"*\", p.allow \"net:*\", p.allow \"net:private\", p.allow \"net:private:*\" }} }}\n"
        ),
    );
    assert_eq!(
        explain(&ws, &wild, origin),
        format!(
            "capability: {origin}\nflow:       fetch\ndecision:   ask\nby:         {wild}\nreason:     an allow rule matches {origin} only by a wildcard, \
             and net:private is granted only by a rule naming its origin exactly\n"
        )
    );
    let exact = policy(
        &ws,
        "exact.lua",
        &format!("{HEAD}return {{ rules = {{ p.allow \"{origin}\" }} }}\n"),
    );
    assert_eq!(
        explain(&ws, &exact, origin),
        format!(
            "capability: {origin}\nflow:       fetch\ndecision:   allow\nby:         {}\nreason:     the policy allows it\n",
            rule("allow", origin, 1, &exact)
        )
    );
    let deny = policy(
        &ws,
        "deny.lua",
        &format!("{HEAD}return {{ rules = {{ p.deny \"net:*\", p.allow \"{origin}\" }} }}\n"),
    );
    assert_eq!(
        explain(&ws, &deny, origin),
        format!(
            "capability: {origin}\nflow:       fetch\ndecision:   deny\nby:         {}\nreason:     the policy denies it\n",
            rule("deny", "net:*", 1, &deny)
        )
    );
}

#[test]
fn hooks_see_capability_action_resource_flow_tier_input_and_run() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let text = r#"return {
  decide = function(req)
    local keys = {}
    for k in pairs(req.input) do keys[#keys + 1] = k end
    table.sort(keys)
    return {decision = "deny", reason = table.concat({
      req.capability, req.action, req.resource, req.flow, req.tier,
      table.concat(keys, ","), tostring(req.input.path), req.run.id, req.run.script,
    }, "|")}
  end,
}
"#;
    let pol = policy(&ws, "see.lua", text);
    let line = line_of(text, "decide = function");
    let script = script_file(
        ws.path(),
        &format!(
            r#"{EMIT}{TRY}
emit({{run_id = sluice.run_id}})
try("read", {{path = "a.txt"}})
try("write", {{path = "a.txt", content = "b"}})
try("edit", {{path = "a.txt", oldString = "a", newString = "b"}})
try("ls", {{}})
"#
        ),
    );
    let run = run_script_with(ws.path(), &script, &["--policy", &pol], &[]).ok();
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let run_id = out[0]["run_id"].as_str().unwrap().to_string();
    assert!(!run_id.is_empty());
    let script = script.display().to_string();
    let a = ws.file("a.txt").display().to_string();
    let w = ws.path().display().to_string();
    let seen = |action: &str, res: &str, flow: &str, tier: &str, keys: &str, path: &str| {
        let c = format!("{action}:{res}");
        let reason = format!("{c}|{action}|{res}|{flow}|{tier}|{keys}|{path}|{run_id}|{script}");
        denied(&c, &hook(&pol, line), &reason)
    };
    assert_eq!(
        out[1..],
        [
            seen("fs:read", &a, "read", "sealed", "path", "a.txt"),
            seen(
                "fs:write",
                &a,
                "write",
                "compensable",
                "content,path",
                "a.txt"
            ),
            seen(
                "fs:read",
                &a,
                "edit",
                "compensable",
                "newString,oldString,path",
                "a.txt"
            ),
            seen("fs:read", &w, "ls", "sealed", "", "nil"),
        ]
    );
}

#[test]
fn a_hook_cannot_change_the_call_through_req() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "mine\n").unwrap();
    fs::write(ws.file("b.txt"), "other\n").unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{\n  rules = {{ p.allow \"fs:*:${{workspace}}/**\" }},\n  decide = function(req) req.input.path = \"b.txt\"; req.capability = \"x\"; return nil end,\n}}\n"
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol],
        r#"local input = {path = "a.txt"}
           emit(sluice.read(input).content) emit(input.path)"#,
    );
    assert_eq!(out, vec![json!("mine"), json!("a.txt")]);
}

#[test]
fn a_link_inside_the_workspace_does_not_escape_a_workspace_grant() {
    let ws = workspace();
    let outside = ws.path().parent().unwrap().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("s.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.file("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("s.txt"), ws.file("s-link.txt")).unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\", p.allow \"fs:write:${{workspace}}/**\" }} }}\n"
        ),
    );
    let out = lua(
        &ws,
        &["--policy", &pol, "--approve", "fs:*:${workspace}/link/**"],
        r#"
        try("read", {path = "link/s.txt"})
        try("read", {path = "s-link.txt"})
        try("write", {path = "link/new.txt", content = "x"})
        try("edit", {path = "link/s.txt", oldString = "secret", newString = "public"})
        try("ls", {path = "link"})
        "#,
    );
    let s = outside.join("s.txt");
    let unmatched = |c: String| {
        let reason = format!("no rule or hook of the policy matched {c}");
        required(&c, &pol, &reason)
    };
    assert_eq!(
        out,
        vec![
            unmatched(cap("fs:read", &s)),
            unmatched(cap("fs:read", &s)),
            unmatched(cap("fs:write", &outside.join("new.txt"))),
            unmatched(cap("fs:read", &s)),
            unmatched(cap("fs:read", &outside)),
        ]
    );
    assert_eq!(fs::read_to_string(&s).unwrap(), "secret\n");
    assert!(!outside.join("new.txt").exists());
}

#[test]
fn workspace_expands_to_the_canonical_folder_and_tilde_to_home() {
    let ws = workspace();
    let root = ws.path().parent().unwrap();
    let home = root.join("home");
    fs::create_dir_all(home.join("notes")).unwrap();
    fs::write(home.join("notes/n.txt"), "note\n").unwrap();
    fs::write(home.join("other.txt"), "other\n").unwrap();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    // The workspace given through a link: ${workspace} is its canonical path.
    let via = root.join("ws-via-link");
    std::os::unix::fs::symlink(ws.path(), &via).unwrap();
    let pol = policy(
        &ws,
        "p.lua",
        &format!(
            "{HEAD}return {{ rules = {{ p.allow \"fs:read:${{workspace}}/**\", p.allow \"fs:read:~/notes/**\" }}, otherwise = \"deny\" }}\n"
        ),
    );
    let script = script_file(
        ws.path(),
        &format!(
            r#"{EMIT}{TRY}
try("read", {{path = "a.txt"}})
try("read", {{path = {notes}}})
try("read", {{path = {other}}})
"#,
            notes = lua_str(&home.join("notes/n.txt").display().to_string()),
            other = lua_str(&home.join("other.txt").display().to_string()),
        ),
    );
    let out = Command::new(sluice_bin())
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(&via)
        .args(["--policy", &pol])
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out).ok();
    let out: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let other = cap("fs:read", &home.join("other.txt"));
    assert_eq!(
        out,
        vec![
            ok("read"),
            ok("read"),
            denied(
                &other,
                &pol,
                &format!("no rule or hook of the policy matched {other}")
            ),
        ]
    );
}
