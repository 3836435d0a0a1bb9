//! Attacks on two pattern changes: a resource ending in ` *` also matches
//! the bare command, and `--approve`/`--ceiling` patterns that can never
//! match are refused at start.
//!
//! - `sh *`, `bash *`, `python3 *` must not grant an interpreter fed its
//!   program on standard input, bare or through `/dev/stdin`; `env *` and
//!   `xargs *` bare run nothing the rule did not grant;
//! - a deny of `rm *` catches `rm` in every spelling; `\*` stays literal;
//!   `git status *` is not `git statusx`;
//! - patterns no request can match are refused, and no pattern README and
//!   docs/policies.md write is.

mod common;

use common::*;
use serde_json::Value;
use std::fs;
use std::process::Command;

/// Allows interpreters and wrappers by a trailing star, denies `rm` and
/// `touch`, opens the workspace's files.
const STARS: &str = r#"local p = require("sluice.policy")
return {
  rules = {
    p.programs,
    p.allow "proc:spawn:sh *", p.allow "proc:spawn:bash *", p.allow "proc:spawn:python3 *",
    p.allow "proc:spawn:env *", p.allow "proc:spawn:xargs *", p.allow "proc:spawn:echo *",
    p.deny("proc:spawn:rm *", "nothing is removed"), p.deny("proc:spawn:touch *", "no touching"),
    p.allow "fs:read:${workspace}", p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}", p.allow "fs:write:${workspace}/**",
  },
  otherwise = "deny",
}
"#;

/// Runs each `(command, stdin)` through `sluice.bash` under `pol`: the
/// exit code, or the error's code.
fn outcomes(ws: &Workspace, pol: &str, calls: &[(&str, Option<&str>)]) -> Vec<String> {
    let list: Vec<String> = calls
        .iter()
        .map(|(c, stdin)| match stdin {
            Some(s) => format!("{{command = {}, stdin = {}}}", lua_str(c), lua_str(s)),
            None => format!("{{command = {}}}", lua_str(c)),
        })
        .collect();
    let script = format!(
        "for _, input in ipairs({{{}}}) do\n  local r, e = sluice.bash(input)\n  print(r and ('exit ' .. r.exitCode) or e.code)\nend\n",
        list.join(",\n")
    );
    let run = run_lua_with(ws.path(), &script, &["--policy", pol], &[]).ok();
    run.stdout.lines().map(String::from).collect()
}

#[test]
fn a_star_rule_does_not_grant_an_interpreter_fed_its_program_on_standard_input() {
    let ws = workspace();
    let pol = policy(&ws, "stars.lua", STARS);
    fs::write(ws.file("f.sh"), "touch pwned-file\n").unwrap();
    let fed: Vec<(&str, Option<&str>)> = vec![
        ("sh", Some("touch pwned1")),
        ("bash", Some("touch pwned2")),
        ("python3", Some("open('pwned3', 'w')")),
        ("sh < f.sh", None),
        ("echo 'touch pwned4' | sh", None),
        ("env sh", Some("touch pwned5")),
        ("sh -s", Some("touch pwned6")),
        ("sh -", Some("touch pwned7")),
        ("cat f.sh | bash -s", None),
        ("python3 -", Some("open('pwned8', 'w')")),
        // Standard input named as the program's file.
        ("sh /dev/stdin", Some("touch pwned9")),
        ("bash /proc/self/fd/0", Some("touch pwned10")),
        ("python3 /dev/stdin", Some("open('pwned11', 'w')")),
        ("echo 'touch pwned12' | sh /dev/fd/0", None),
        ("sh /dev/stdin < f.sh", None),
    ];
    let out = outcomes(&ws, &pol, &fed);
    assert_eq!(out, vec!["permission_denied"; fed.len()], "{fed:?}");
    let made: Vec<String> = names_in(ws.path())
        .into_iter()
        .filter(|n| n.starts_with("pwned"))
        .collect();
    assert_eq!(made, Vec::<String>::new());
    // The controls: the bare commands with nothing to read, a `-c` the
    // shell analysis reads, a script file (its own file: README says the
    // program's files are the sandbox's to confine), bare `env` and
    // `xargs` (which runs echo).
    let controls = [
        ("sh", None),
        ("sh -c 'echo ok'", None),
        ("env", None),
        ("echo hi | xargs", None),
        ("sh /dev/null", None),
        ("python3 /dev/null", None),
    ];
    assert_eq!(
        outcomes(&ws, &pol, &controls),
        vec!["exit 0"; controls.len()]
    );
}

/// `sluice policy explain proc:spawn:LINE` under `pol`: decision and by.
fn explained(ws: &Workspace, pol: &str, line: &str) -> (String, String) {
    let out = Command::new(sluice_bin())
        .args(["policy", "explain", "--workspace"])
        .arg(ws.path())
        .args(["--policy", pol, &format!("proc:spawn:{line}")])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{line}: {text}{}", String::from_utf8_lossy(&out.stderr)))
            .trim()
            .to_string()
    };
    (field("decision:"), field("by:"))
}

#[test]
fn a_star_deny_catches_the_bare_command_in_every_spelling() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "rm.lua",
        r#"local p = require("sluice.policy")
return { rules = { p.deny("proc:spawn:rm *", "nothing is removed"), p.allow "proc:spawn:*" } }
"#,
    );
    let rule = format!("deny \"proc:spawn:rm *\" (rules[1] of {pol})");
    for line in [
        "rm",
        "/bin/rm",
        "/usr/bin/rm x",
        "\\rm",
        "\"rm\"",
        "'rm' -rf x",
        "r''m x",
        "command rm",
        "command -p rm x",
        "command -- rm x",
        "builtin rm",
        "exec rm",
        "exec -a x rm y",
        "env rm",
        "env -i rm",
        "env -u X rm x",
        "timeout 5 rm",
        "nohup rm x",
        "sh -c rm",
        "eval rm x",
        "xargs rm",
        "find . -exec rm {} ;",
        "{ rm x; }",
        "(rm)",
    ] {
        assert_eq!(
            explained(&ws, &pol, line),
            ("deny".into(), rule.clone()),
            "{line}"
        );
    }
    // The control: another program, and rm's name inside another's arguments.
    for line in ["rmdir x", "echo rm", "git rm x"] {
        assert_eq!(explained(&ws, &pol, line).0, "allow", "{line}");
    }
}

#[test]
fn an_escaped_star_stays_literal_and_a_star_matches_only_after_its_space() {
    let ws = workspace();
    let pol = policy(
        &ws,
        "lit.lua",
        r#"local p = require("sluice.policy")
return { rules = { p.allow "proc:spawn:echo \\*", p.allow "proc:spawn:git status *" }, otherwise = "deny" }
"#,
    );
    assert_eq!(explained(&ws, &pol, "echo '*'").0, "allow");
    for line in [
        "echo",
        "echo x",
        "echo '*' x",
        "git statusx",
        "git status-x",
        "gitstatus",
    ] {
        assert_eq!(explained(&ws, &pol, line).0, "deny", "{line}");
    }
    for line in ["git status", "git status --short"] {
        assert_eq!(explained(&ws, &pol, line).0, "allow", "{line}");
    }
}

/// `sluice run` of a script printing `ran`, with `flag PATTERN` for each
/// pattern: exit code and stderr.
fn start_with(flag: &str, patterns: &[&str]) -> Run {
    let ws = workspace();
    let mut flags = vec!["--no-audit"];
    for p in patterns {
        flags.push(flag);
        flags.push(p);
    }
    run_lua_with(ws.path(), "print('ran')", &flags, &[])
}

#[test]
fn network_and_model_globs_no_request_can_match_are_refused_at_start() {
    for (pattern, why) in [
        ("net:get:*.Example.com", "names hosts in lowercase"),
        ("net:post:*.EXAMPLE.com", "names hosts in lowercase"),
        ("net:get:*@example.com", "without user information"),
        ("net:get:*.example.com/", "never a path"),
        ("net:get:*.example.com/*", "never a path"),
        ("net:get:http://*/api", "never a path"),
        ("net:get:http://*.example.com:80", "default port (:80)"),
        ("model:call:*/", "PROVIDER/MODEL"),
        ("model:call:/*", "PROVIDER/MODEL"),
    ] {
        for flag in ["--approve", "--ceiling"] {
            let run = start_with(flag, &[pattern]);
            assert_eq!(run.code, 2, "{flag} {pattern}: {}", run.stderr);
            assert_eq!(run.stdout, "", "{flag} {pattern}");
            let head =
                format!("sluice: {flag} \"{pattern}\": invalid pattern `{pattern}`: it can never");
            assert!(
                run.stderr.starts_with(&head),
                "{flag} {pattern}: {}",
                run.stderr
            );
            assert!(run.stderr.contains(why), "{flag} {pattern}: {}", run.stderr);
        }
    }
}

/// The capability patterns README.md and the guide's pages (docs/*.md)
/// spell in code: `fs:...`, `net:...`, `proc:...`, `model:...` between
/// backticks or quotes.
fn documented_patterns() -> Vec<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut docs = vec![format!("{root}/README.md")];
    let mut pages: Vec<String> = fs::read_dir(format!("{root}/docs"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    let mut out: Vec<String> = Vec::new();
    for doc in docs {
        let text = fs::read_to_string(&doc).unwrap();
        for quote in ['`', '\'', '"'] {
            for piece in text.split(quote).skip(1).step_by(2) {
                let family = piece.split(':').next().unwrap_or("");
                if ["fs", "net", "proc", "model"].contains(&family)
                    && piece.contains(':')
                    && !piece.contains('\n')
                    && !out.iter().any(|p| p == piece)
                {
                    out.push(piece.to_string());
                }
            }
        }
    }
    out
}

/// Documented patterns that are not meant to load: a placeholder, an
/// example of a mistake.
const NOT_PATTERNS: [&str; 5] = [
    "fs:",
    "fs:exec",
    "fs:write:X/**",
    "net:private:ORIGIN",
    "fs:read:src/**",
];

#[test]
fn every_pattern_the_docs_write_is_accepted_by_approve_and_ceiling() {
    let mut patterns = documented_patterns();
    assert!(patterns.len() > 60, "{patterns:?}");
    patterns.retain(|p| !NOT_PATTERNS.contains(&p.as_str()));
    // And the ones users write that the docs do not spell.
    for extra in [
        "net:private:http://[::1]:8080",
        "net:get:[::1]:8443",
        "net:get:*.example.com",
        "proc:spawn:*",
        "fs:read:~/x/**",
        "net:get:*.example.com:*",
        "net:post:http://127.0.0.1:8080",
    ] {
        patterns.push(extra.to_string());
    }
    let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
    let run = start_with("--ceiling", &refs);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "ran\n"),
        "{}",
        run.stderr
    );
    // A wildcard grants no net:private (README says so): those alone are
    // refused as grants, and the rest pass.
    let grants: Vec<&str> = refs
        .iter()
        .copied()
        .filter(|p| !["net:private", "net:private:*"].contains(p))
        .collect();
    let run = start_with("--approve", &grants);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "ran\n"),
        "{}",
        run.stderr
    );
    for dead in ["net:private", "net:private:*"] {
        let run = start_with("--approve", &[dead]);
        assert_eq!(run.code, 2, "{dead}: {}", run.stderr);
    }
    // The control: the placeholders are refused, so the check is live.
    for bad in NOT_PATTERNS {
        let run = start_with("--ceiling", &[bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        let parsed: Result<Value, _> = serde_json::from_str(&run.stdout);
        assert!(parsed.is_err());
    }
}
