//! The policy author's tools: `sluice policy explain` prints the decision on
//! one capability and the rule or hook that made it; `sluice policy test`
//! runs the `test_*` functions of `*_test.lua` files next to policies; and
//! `sluice run`'s policy flags.

mod common;

use common::*;
use serde_json::json;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn sluice(args: &[&str], cwd: &Path) -> Output {
    Command::new(sluice_bin())
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `sluice policy explain` in `ws`; the output on success.
fn explain(ws: &Workspace, args: &[&str]) -> String {
    let w = ws.path().display().to_string();
    let mut all = vec!["policy", "explain", "--workspace", &w];
    all.extend_from_slice(args);
    let out = sluice(&all, ws.path());
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr), "");
    text(&out.stdout)
}

/// The lines explain prints.
fn lines(cap: &str, flow: &str, decision: &str, by: &str, reason: &str) -> String {
    format!(
        "capability: {cap}\nflow:       {flow}\ndecision:   {decision}\nby:         {by}\nreason:     {reason}\n"
    )
}

const EXPLAINED: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("fs:*:**/.env", "secrets stay out"),
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
    p.ask "net:post:*",
  },
  decide = function(req)
    if req.flow == "edit" then return {decision = "ask", reason = "edits get a second look"} end
  end,
  route = function(req)
    if req.resource:match("^cargo ") then return "rust-builder" end
    if req.resource:match("^boom") then error("no route for that") end
  end,
}
"#;

#[test]
fn explain_names_the_rule_that_allowed_or_denied() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let a = format!("fs:read:{}", ws.file("src/a.rs").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &a]),
        lines(
            &a,
            "read",
            "allow",
            &format!("allow \"fs:read:${{workspace}}/**\" (rules[2] of {pol})"),
            "the policy allows it"
        )
    );
    let env = format!("fs:read:{}", ws.file("deploy/.env").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &env]),
        lines(
            &env,
            "read",
            "deny",
            &format!("deny \"fs:*:**/.env\" (rules[1] of {pol})"),
            "secrets stay out"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "net:post:api.example.com"]),
        lines(
            "net:post:api.example.com",
            "http-post",
            "ask",
            &format!("ask \"net:post:*\" (rules[5] of {pol})"),
            "the policy asks a person first"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "net:get:example.org"]),
        lines(
            "net:get:example.org",
            "fetch",
            "ask",
            &pol,
            "no rule or hook of the policy matched net:get:example.org"
        )
    );
}

#[test]
fn explain_with_flow_runs_the_decide_hook_for_that_flow() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let w = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(&ws, &["--policy", &pol, &w]),
        lines(
            &w,
            "write",
            "allow",
            &format!("allow \"fs:write:${{workspace}}/**\" (rules[3] of {pol})"),
            "the policy allows it"
        )
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, &w, "--flow", "edit"]),
        lines(
            &w,
            "edit",
            "ask",
            &format!("decide hook at {pol}:10"),
            "edits get a second look"
        )
    );
}

#[test]
fn explain_with_a_ceiling_denies_outside_it() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let w = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(
            &ws,
            &[
                "--policy",
                &pol,
                "--ceiling",
                "fs:read:${workspace}/**",
                "--ceiling",
                "net:get",
                &w
            ]
        ),
        lines(
            &w,
            "write",
            "deny",
            "the run's ceiling",
            "outside the run's ceiling (fs:read:${workspace}/**, net:get)"
        )
    );
    let r = format!("fs:read:{}", ws.file("a.txt").display());
    assert_eq!(
        explain(
            &ws,
            &["--policy", &pol, "--ceiling", "fs:read:${workspace}/**", &r]
        ),
        lines(
            &r,
            "read",
            "allow",
            &format!("allow \"fs:read:${{workspace}}/**\" (rules[2] of {pol})"),
            "the policy allows it"
        )
    );
}

#[test]
fn explain_proc_spawn_says_where_the_command_runs() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let by = format!("allow \"proc:spawn:*\" (rules[4] of {pol})");
    assert_eq!(
        explain(&ws, &["--policy", &pol, "proc:spawn:cargo test --all"]),
        lines(
            "proc:spawn:cargo test --all",
            "bash",
            "allow",
            &by,
            "the policy allows it"
        ) + "runs on:    container rust-builder\n"
    );
    let w = ws.path().display();
    assert_eq!(
        explain(
            &ws,
            &[
                "--policy",
                &pol,
                "proc:spawn:ls -l",
                "--flow",
                "shell_command",
                "--sandbox",
                "bwrap"
            ]
        ),
        lines(
            "proc:spawn:ls -l",
            "shell_command",
            "allow",
            &by,
            "the policy allows it"
        ) + "runs on:    the host, confined by bubblewrap (read-only)\n"
            + READ_ONLY
            + "hidden:     what fs:*:**/.env matches\n"
            + CLOSED
            + &format!("hint:       \"fs:write:${{workspace}}/**\" (rules[3]) opens what is in {w} but not the folder itself, so commands cannot write there (a tree is writable to commands only when the folder and its contents both are): add p.allow \"fs:write:${{workspace}}\"\n")
    );
    assert_eq!(
        explain(&ws, &["--policy", &pol, "proc:spawn:boom now"]),
        lines(
            "proc:spawn:boom now",
            "bash",
            "allow",
            &by,
            "the policy allows it"
        ) + &format!(
            "runs on:    refused (route hook at {pol}:13: the hook at {pol}:13 failed: {pol}:15: no route for that)\n"
        )
    );
}

#[test]
fn explain_without_a_policy_uses_the_built_in_default() {
    let ws = workspace();
    let git = format!("fs:write:{}", ws.file(".git/config").display());
    assert_eq!(
        explain(&ws, &[&git]),
        lines(
            &git,
            "write",
            "deny",
            "deny \"fs:write:${workspace}/.git/**\" (rules[2] of policies/default.lua (built in))",
            "the repository's internals (hooks, config) run code later"
        )
    );
    let out = explain(
        &ws,
        &[
            "--policy",
            "readonly",
            "--sandbox",
            "landlock",
            "proc:spawn:ls",
        ],
    );
    let head = lines(
        "proc:spawn:ls",
        "bash",
        "deny",
        "deny \"proc:spawn\" (rules[2] of policies/readonly.lua (built in))",
        "this seat is read-only",
    ) + "runs on:    the host, confined by landlock (read-only)\n"
        + READ_ONLY;
    assert!(out.starts_with(&head), "{out}");
    assert!(out.ends_with(CLOSED), "{out}");
}

/// The `writable:` line of a profile that writes nothing.
const READ_ONLY: &str =
    "writable:   nothing but private temp storage (no fs:write rule opens a folder and its contents)\n";

/// The `network:` line of a profile without the network.
const CLOSED: &str = "network:    closed (commands get the network only with net:get:*, net:post:* and net:private:* allowed, and no deny, ask or decide hook on the network)\n";

const PROFILED: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/src/**",
    p.allow "fs:write:${workspace}/out", p.allow "fs:write:${workspace}/out/**",
    p.deny("fs:*:${workspace}/out/secret", "not for commands"),
    p.deny("fs:write:${workspace}/out/**/*.lock", "the package manager's"),
    p.allow "proc:spawn:*",
  },
}
"#;

#[test]
fn explain_proc_spawn_shows_the_runner_mode_and_profile_the_command_gets() {
    let ws = workspace();
    for dir in ["src", "out/secret"] {
        fs::create_dir_all(ws.file(dir)).unwrap();
    }
    let pol = policy(&ws, "profiled.lua", PROFILED);
    let w = ws.path().display();
    for (runner, name) in [("bwrap", "bubblewrap"), ("landlock", "landlock")] {
        let out = explain(
            &ws,
            &["--policy", &pol, "--sandbox", runner, "proc:spawn:make"],
        );
        assert_eq!(
            out,
            lines(
                "proc:spawn:make",
                "bash",
                "allow",
                &format!("allow \"proc:spawn:*\" (rules[8] of {pol})"),
                "the policy allows it"
            ) + &format!(
                "runs on:    the host, confined by {name} (workspace-write)\n\
                 writable:   {w}/out (and the private caches and temp storage)\n\
                 read-only:  {w}/out/secret, what fs:write:${{workspace}}/out/**/*.lock matches\n\
                 hidden:     {w}/out/secret\n"
            ) + CLOSED
                + &format!("hint:       \"fs:write:${{workspace}}/src/**\" (rules[3]) opens what is in {w}/src but not the folder itself, so commands cannot write there (a tree is writable to commands only when the folder and its contents both are): add p.allow \"fs:write:${{workspace}}/src\"\n"),
            "{runner}"
        );
        let json: serde_json::Value = serde_json::from_str(&explain(
            &ws,
            &[
                "--policy",
                &pol,
                "--sandbox",
                runner,
                "--json",
                "proc:spawn:make",
            ],
        ))
        .unwrap();
        assert_eq!(json["decision"], "allow");
        assert_eq!(
            json["runsOn"],
            json!({"place": "host", "runner": runner, "mode": "workspace-write", "confined": true})
        );
        let sandbox = &json["sandbox"];
        assert_eq!(sandbox["mode"], "workspace-write");
        assert_eq!(sandbox["network"], "closed");
        assert_eq!(sandbox["writable"], json!([ws.file("out")]));
        assert_eq!(sandbox["readOnly"], json!([ws.file("out/secret")]));
        assert_eq!(
            sandbox["readOnlyByGlob"],
            json!(["fs:write:${workspace}/out/**/*.lock"])
        );
        assert_eq!(sandbox["hidden"], json!([ws.file("out/secret")]));
        assert_eq!(sandbox["readable"], json!([ws.path()]));
        assert_eq!(sandbox["hints"].as_array().unwrap().len(), 1);
        assert!(sandbox["hints"][0]
            .as_str()
            .unwrap()
            .ends_with("add p.allow \"fs:write:${workspace}/src\""));
    }
}

#[test]
fn explain_says_when_the_network_is_open_and_when_a_command_runs_unconfined() {
    let ws = workspace();
    let open = policy(
        &ws,
        "open.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.allow "fs:read:**", p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
  p.allow "proc:spawn:*", p.allow "net:get:*", p.allow "net:post:*", p.allow "net:private:*",
} }"#,
    );
    let out = explain(
        &ws,
        &["--policy", &open, "--sandbox", "bwrap", "proc:spawn:curl x"],
    );
    assert!(
        out.contains("runs on:    the host, confined by bubblewrap (workspace-write)\n"),
        "{out}"
    );
    assert!(out.contains("\nnetwork:    open\n"), "{out}");
    let out = explain(&ws, &["--policy", "unconfined", "proc:spawn:curl x"]);
    assert!(
        out.contains("runs on:    the host, unconfined (the policies grant every file and the network, and nothing stays read-only or hidden)\n"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&explain(
        &ws,
        &["--policy", "unconfined", "--json", "proc:spawn:curl x"],
    ))
    .unwrap();
    assert_eq!(json["runsOn"]["confined"], false);
    assert_eq!(json["sandbox"]["network"], "open");
}

#[test]
fn explain_a_container_route_in_json() {
    let ws = workspace();
    let pol = policy(&ws, "mine.lua", EXPLAINED);
    let json: serde_json::Value = serde_json::from_str(&explain(
        &ws,
        &["--policy", &pol, "--json", "proc:spawn:cargo test"],
    ))
    .unwrap();
    assert_eq!(
        json,
        json!({
            "capability": "proc:spawn:cargo test",
            "flow": "bash",
            "decision": "allow",
            "by": format!("allow \"proc:spawn:*\" (rules[4] of {pol})"),
            "reason": "the policy allows it",
            "runsOn": {"place": "container", "container": "rust-builder"},
        })
    );
    // Not a command: no place at all.
    let json: serde_json::Value = serde_json::from_str(&explain(
        &ws,
        &["--policy", &pol, "--json", "net:post:api.example.com"],
    ))
    .unwrap();
    assert_eq!(json["decision"], "ask");
    assert!(
        json.get("runsOn").is_none() && json.get("sandbox").is_none(),
        "{json}"
    );
}

#[test]
fn explain_fails_as_run_does_when_a_policy_does_not_load() {
    let ws = workspace();
    let broken = policy(
        &ws,
        "broken.lua",
        "return { rules = { p.allow 'fs:read' } }\n",
    );
    for pol in ["missing.lua", broken.as_str()] {
        let w = ws.path().display().to_string();
        let out = sluice(
            &[
                "policy",
                "explain",
                "--workspace",
                &w,
                "--policy",
                pol,
                "fs:read:/x",
            ],
            ws.path(),
        );
        let run = run_lua_with(ws.path(), "print('ran')", &["--policy", pol], &[]);
        assert_eq!(out.status.code(), Some(2), "{pol}");
        assert_eq!(run.code, 2, "{pol}");
        assert_eq!(text(&out.stdout), "", "{pol}");
        assert_eq!(text(&out.stderr), run.stderr, "{pol}");
        assert!(run.stderr.starts_with("sluice: "), "{}", run.stderr);
    }
    let out = sluice(
        &["policy", "explain", "--policy", "missing.lua", "fs:read:/x"],
        ws.path(),
    );
    assert_eq!(
        text(&out.stderr),
        "sluice: cannot read policy missing.lua: No such file or directory (os error 2)\n"
    );
}

#[test]
fn a_trailing_star_rule_covers_the_bare_command_and_a_deny_of_it_too() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "bare.lua",
        r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("proc:spawn:rm *", "nothing is removed"),
    p.allow "proc:spawn:true *",
    p.allow "proc:spawn:git status",
    p.allow "proc:spawn:python3 *", p.allow "proc:spawn:echo *",
    p.programs, p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
  },
  otherwise = "deny",
}
"#,
    );
    let decided = |line: &str| {
        let out = explain(&ws, &["--policy", &pol, &format!("proc:spawn:{line}")]);
        let field = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap()
                .to_string()
        };
        (field("decision:   "), field("by:         "))
    };
    let allow = format!("allow \"proc:spawn:true *\" (rules[2] of {pol})");
    let deny = format!("deny \"proc:spawn:rm *\" (rules[1] of {pol})");
    assert_eq!(decided("true"), ("allow".into(), allow.clone()));
    assert_eq!(decided("true --x"), ("allow".into(), allow));
    assert_eq!(decided("rm"), ("deny".into(), deny.clone()));
    assert_eq!(decided("rm -rf /"), ("deny".into(), deny.clone()));
    // By path too: a deny follows every spelling of its program.
    assert_eq!(decided("/bin/rm"), ("deny".into(), deny));
    // Without the star, exactly what it says.
    assert_eq!(decided("git status").0, "allow");
    assert_eq!(decided("git status --short"), ("deny".into(), pol.clone()));
    // The bare match is no exact grant: a bare interpreter fed its
    // program on standard input still needs a rule naming the command.
    assert_eq!(decided("python3").0, "allow");
    let (decision, by) = decided("echo 'import os' | python3");
    assert_eq!((decision.as_str(), by.as_str()), ("deny", pol.as_str()));
    // And through a run: the bare command runs, the bare rm is refused.
    let out = lua(
        &ws,
        &["--policy", &pol, "--no-audit"],
        r#"local r, e = sluice.bash{command = "true"}
emit(r and r.exitCode or e.code)
r, e = sluice.bash{command = "rm"}
emit(r and r.exitCode or e.by)"#,
    );
    assert_eq!(
        out,
        vec![
            json!(0),
            json!(format!("deny \"proc:spawn:rm *\" (rules[1] of {pol})"))
        ]
    );
}

#[test]
fn approvals_and_ceilings_that_can_never_match_stop_the_run_saying_why() {
    let ws = workspace();
    for (flag, pattern, message) in [
        ("--approve", "net:private:*", "--approve \"net:private:*\": invalid pattern `net:private:*`: it can never grant anything: a wildcard never grants net:private: each private address is granted by a rule naming its origin exactly; write it out, e.g. `net:private:http://127.0.0.1:8080`\n"),
        ("--approve", "net:private:http://127.0.0.1:*", "--approve \"net:private:http://127.0.0.1:*\": invalid pattern `net:private:http://127.0.0.1:*`: it can never grant anything: a wildcard never grants net:private"),
        ("--approve", "net:private:127.0.0.1:8080", "--approve \"net:private:127.0.0.1:8080\": invalid pattern `net:private:127.0.0.1:8080`: it can never grant anything: `127.0.0.1:8080` is not an origin"),
        ("--approve", "net:get:https://api.example.com", "--approve \"net:get:https://api.example.com\": invalid pattern `net:get:https://api.example.com`: it can never grant anything: net:get names an https destination by its host alone; write `net:get:api.example.com`\n"),
        ("--approve", "proc:spawn:PAGER=cat", "--approve \"proc:spawn:PAGER=cat\": invalid pattern `proc:spawn:PAGER=cat`: it can never grant anything: `PAGER=cat` is only an assignment and names no program, so it grants no command; name the command after it, e.g. `proc:spawn:PAGER=cat git *`\n"),
        ("--approve", "model:call:local", "--approve \"model:call:local\": invalid pattern `model:call:local`: it can never grant anything: model:call names PROVIDER/MODEL"),
        ("--approve", "fs:exec:/x", "--approve \"fs:exec:/x\": invalid pattern `fs:exec:/x`: unknown action `fs:exec`"),
        ("--approve", "net:put:example.org", "--approve \"net:put:example.org\": invalid pattern `net:put:example.org`: unknown action `net:put`"),
        ("--approve", "fs:read:", "--approve \"fs:read:\": invalid pattern `fs:read:`: the resource after `fs:read:` is empty"),
        ("--approve", "fs:read:src/**", "--approve \"fs:read:src/**\": invalid pattern `fs:read:src/**`: the fs resource `src/**` is relative"),
        ("--approve", "proc:spawn:echo ${nosuch}", "--approve \"proc:spawn:echo ${nosuch}\": invalid pattern `proc:spawn:echo ${nosuch}`: unknown variable `${nosuch}`"),
        ("--ceiling", "net:get:https://example.org", "--ceiling \"net:get:https://example.org\": invalid pattern `net:get:https://example.org`: it can never admit anything: net:get names an https destination by its host alone; write `net:get:example.org`\n"),
        ("--ceiling", "proc:spawn:GIT_DIR=*", "--ceiling \"proc:spawn:GIT_DIR=*\": invalid pattern `proc:spawn:GIT_DIR=*`: it can never admit anything: `GIT_DIR=*` is only an assignment"),
    ] {
        let run = run_lua_with(ws.path(), "print('ran')", &[flag, pattern], &[]);
        assert_eq!(run.code, 2, "{pattern}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{pattern}");
        let expected = format!("sluice: {message}");
        if message.ends_with('\n') {
            assert_eq!(run.stderr, expected, "{pattern}");
        } else {
            assert!(run.stderr.starts_with(&expected), "{pattern}: {}", run.stderr);
        }
    }
    // What README shows still starts a run; so does a ceiling of
    // net:private:* (a bound admits by matching).
    for (flag, pattern) in [
        ("--approve", "net:post:api.example.com"),
        ("--approve", "model:call:local/**"),
        ("--approve", "net:private:http://127.0.0.1:8080"),
        ("--approve", "net:private:http://[::1]:8080"),
        ("--approve", "proc:spawn:git *"),
        ("--approve", "proc:spawn:PAGER=cat git *"),
        ("--ceiling", "net:private:*"),
    ] {
        let run = run_lua_with(ws.path(), "print('ran')", &[flag, pattern], &[]);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "ran\n"),
            "{pattern}: {}",
            run.stderr
        );
    }
}

#[test]
fn explain_rejects_what_is_not_a_capability() {
    let ws = workspace();
    let w = ws.path().display().to_string();
    let out = sluice(
        &["policy", "explain", "--workspace", &w, "disk:read:/x"],
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "sluice: \"disk:read:/x\" is not a capability; write action:resource with an action of fs:read, fs:write, net:get, net:post, net:private, proc:spawn, model:call, cred:use\n"
    );
    let out = sluice(
        &[
            "policy",
            "explain",
            "--workspace",
            &w,
            "--ceiling",
            "fs:exec",
            "fs:read:/x",
        ],
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .starts_with("sluice: invalid pattern `fs:exec`: unknown action `fs:exec`"),
        "{}",
        text(&out.stderr)
    );
}

/// How many `function test_` a test file defines.
fn tests_in(file: &Path) -> usize {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("function test_"))
        .count()
}

#[test]
fn policy_test_passes_the_shipped_policies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = sluice(&["policy", "test", "policies/"], root);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let mut files: Vec<_> = fs::read_dir(root.join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_test.lua"))
        .collect();
    files.sort();
    let n: usize = files.iter().map(|f| tests_in(f)).sum();
    assert!(n >= 11, "{n}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), n + 1, "{stdout}");
    assert!(
        lines[..n].iter().all(|l| l.starts_with("PASS policies/")),
        "{stdout}"
    );
    assert_eq!(lines[n], format!("{n} passed, 0 failed"));
    assert!(stdout.contains("PASS policies/default_test.lua test_env_files_are_denied_anywhere\n"));
    // The folder is the default.
    let default = sluice(&["policy", "test"], root);
    assert_eq!(text(&default.stdout), stdout);
}

#[test]
fn policy_test_reports_a_failing_test_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(
        d.join("mine.lua"),
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:read:${workspace}/**\", p.deny(\"fs:write\", \"no writes\") } }\n",
    )
    .unwrap();
    fs::write(
        d.join("mine_test.lua"),
        "function test_reads() policy.allows(\"fs:read:\" .. policy.workspace .. \"/a\") end\n\
         function test_writes() policy.allows(\"fs:write:\" .. policy.workspace .. \"/a\") end\n\
         function test_raises() error(\"custom failure\") end\n\
         function test_decide_table()\n\
           local d = policy.decide(\"fs:write:/workspace/a\", {flow = \"edit\"})\n\
           assert(d.decision == \"deny\" and d.reason == \"no writes\", d.reason)\n\
         end\n\
         function helper() error(\"not a test\") end\n",
    )
    .unwrap();
    let out = sluice(&["policy", "test", "."], d);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "PASS ./mine_test.lua test_decide_table\n\
         FAIL ./mine_test.lua test_raises\n     ./mine_test.lua:3: custom failure\n\
         PASS ./mine_test.lua test_reads\n\
         FAIL ./mine_test.lua test_writes\n     ./mine_test.lua:2: expected allow for fs:write:/workspace/a, got deny by deny \"fs:write\" (rules[2] of ./mine.lua): no writes\n\
         2 passed, 2 failed\n"
    );
}

#[test]
fn policy_test_reports_a_test_file_with_no_policy_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("orphan_test.lua"), "function test_x() end\n").unwrap();
    let out = sluice(&["policy", "test", "orphan_test.lua"], d);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "FAIL orphan_test.lua (did not load)\n     orphan_test.lua tests orphan.lua, which does not exist\n0 passed, 1 failed\n"
    );
    let empty = tempfile::tempdir().unwrap();
    let out = sluice(&["policy", "test", "."], empty.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("sluice: no *_test.lua files at .. {HOW_TO_TEST}\n")
    );
}

/// What `sluice policy test` says it looks for.
const HOW_TO_TEST: &str = "`sluice policy test` runs the test_* functions of *_test.lua files; x_test.lua tests the policy x.lua beside it. Give the folder or file that holds them (sluice policy test path/to/policies/), or make one: beside mine.lua, a mine_test.lua holding `function test_reads() policy.allows(\"fs:read:\" .. policy.workspace .. \"/src/a.rs\") end`";

#[test]
fn policy_test_without_its_folder_names_the_folder_and_what_it_expects() {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    let out = sluice(&["policy", "test"], &d);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        format!(
            "sluice: looked for *_test.lua files in policies ({}), but there is no such folder. {HOW_TO_TEST}\n",
            d.join("policies").display()
        )
    );
    let out = sluice(&["policy", "test", "nowhere/"], &d);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(&format!(
            "sluice: looked for *_test.lua files in nowhere/ ({}/nowhere/), but there is no such folder."
        , d.display())),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn policy_test_reports_a_policy_that_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("bad.lua"), "return { rulez = {} }\n").unwrap();
    fs::write(d.join("bad_test.lua"), "function test_x() end\n").unwrap();
    let out = sluice(&["policy", "test", "."], d);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "FAIL ./bad_test.lua (did not load)\n     policy ./bad.lua: unknown key rulez; a policy returns {rules = {...}, decide = fn?, route = fn?, containers = {NAME = {image = ...}}?, providers = {NAME = {api = ..., url = ...}}?, test = {command = ...}?, lsp = {NAME = {command = {...}, extensions = {...}}}?, explore = {provider = ..., model = ...}?, limits = {memoryMb = ..., pids = ..., cpuSeconds = ..., fileSizeMb = ...}?, askTimeoutMs = N?, otherwise = \"ask\"|\"deny\"}\n0 passed, 1 failed\n"
    );
}

#[test]
fn run_help_mentions_the_policy_flags() {
    let out = sluice(&["run", "--help"], Path::new("."));
    assert!(out.status.success());
    let help = text(&out.stdout);
    for flag in [
        "--policy <FILE>",
        "--ceiling <PATTERN>",
        "--approve <PATTERN>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(help.contains("a deny from any wins"), "{help}");
    assert!(
        help.contains("`default`, `readonly`, `ci` and `unconfined`"),
        "{help}"
    );
}

#[test]
fn the_built_in_readonly_policy_denies_a_write() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "a\n").unwrap();
    let run = run_lua_with(
        ws.path(),
        &format!(
            "{EMIT}emit(sluice.read{{path = \"a.txt\"}}.content)\nlocal r, e = sluice.write{{path = \"a.txt\", content = \"b\"}}\nemit(e)"
        ),
        &["--policy", "readonly"],
        &[],
    )
    .ok();
    let c = format!("fs:write:{}", ws.file("a.txt").display());
    let by = "deny \"fs:write\" (rules[1] of policies/readonly.lua (built in))";
    let reason = "this seat is read-only";
    assert_eq!(
        run.stdout,
        format!(
            "\"a\"\n{}\n",
            json!({
                "code": "permission_denied",
                "message": format!("{c} is denied by {by}: {reason}."),
                "capability": c,
                "by": by,
                "reason": reason,
            })
        )
    );
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "a\n");
}

#[test]
fn bad_ceiling_or_approve_patterns_stop_the_run_naming_the_flag() {
    let ws = workspace();
    for (flag, pattern, message) in [
        (
            "--ceiling",
            "fs:read:src/**",
            "--ceiling \"fs:read:src/**\": invalid pattern `fs:read:src/**`: the fs resource `src/**` is relative",
        ),
        (
            "--approve",
            "disk:*",
            "--approve \"disk:*\": invalid pattern `disk:*`: unknown action family `disk`",
        ),
    ] {
        let run = run_lua_with(ws.path(), "print('ran')", &[flag, pattern], &[]);
        assert_eq!(run.code, 2, "{flag}");
        assert_eq!(run.stdout, "", "{flag}");
        assert!(
            run.stderr.starts_with(&format!("sluice: {message}")),
            "{flag}: {}",
            run.stderr
        );
    }
}
