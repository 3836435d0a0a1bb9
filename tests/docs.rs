//! The documentation's examples, run: every file `docs/policies.md` shows is
//! a policy or its test, and `sluice policy test` must pass them all; the
//! guide's workflows run as its pages say; every `sluice ...` command the
//! README and the guide (`docs/*.md`) show parses; the flow reference is
//! what the binary makes; troubleshooting has an entry for every error
//! code; the book's summary lists every page; README stays a front page;
//! the binary runs the README's first command from outside the checkout.

mod common;
#[path = "common/containers.rs"]
mod containers;

use common::guide::{
    block_named, fenced_blocks, file_name, guide_page, guide_pages, named_block, run_shell_block,
    Block,
};
use common::{run_lua, sluice_bin, workspace};
use std::path::Path;
use std::process::{Command, Stdio};

const POLICIES_MD: &str = include_str!("../docs/policies.md");

/// README's most lines: a front page, the guide holds the rest.
const README_MOST_LINES: usize = 200;

#[test]
fn every_lua_block_of_the_policy_guide_is_a_file_the_test_runs() {
    let blocks = fenced_blocks(POLICIES_MD);
    let lua: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.info.starts_with("lua"))
        .collect();
    assert!(lua.len() >= 10, "found only {} Lua blocks", lua.len());
    for b in &lua {
        assert!(
            file_name(&b.info).is_some(),
            "a Lua block of docs/policies.md has no file=NAME, so no test runs it:\n{}",
            b.text
        );
    }
    let tests: Vec<&str> = lua
        .iter()
        .filter_map(|b| file_name(&b.info))
        .filter(|n| n.ends_with("_test.lua"))
        .collect();
    for t in &tests {
        let policy = t.replace("_test.lua", ".lua");
        assert!(
            lua.iter()
                .any(|b| file_name(&b.info) == Some(policy.as_str())),
            "{t} tests {policy}, which the page does not show"
        );
    }
}

#[test]
fn the_policy_guide_examples_pass_sluice_policy_test() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = 0;
    for b in fenced_blocks(POLICIES_MD) {
        let Some(name) = file_name(&b.info) else {
            continue;
        };
        if name.ends_with("_test.lua") {
            expected += b.text.matches("\nfunction test_").count()
                + usize::from(b.text.starts_with("function test_"));
        }
        std::fs::write(dir.path().join(name), &b.text).unwrap();
    }
    let out = Command::new(sluice_bin())
        .args(["policy", "test"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "docs/policies.md's examples fail:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("{expected} passed, 0 failed")),
        "expected {expected} tests to pass:\n{stdout}"
    );
}

/// The README's tour says the built-in modules are reached with `require`:
/// each one it names loads and has what it says.
#[test]
fn the_modules_the_readme_names_are_built_in() {
    let readme = guide_page("workflows.md");
    assert!(readme.contains(r#"require("sluice.retry").busy"#));
    let ws = workspace();
    let run = run_lua(
        ws.path(),
        r#"
        local retry = require("sluice.retry")
        local agent = require("sluice.agent")
        local policy = require("sluice.policy")
        print(type(retry.busy), type(agent.run), type(policy.allow))
        print(rawget(sluice, "retry"))
        "#,
        &[],
    )
    .ok();
    assert_eq!(run.stdout, "function\tfunction\tfunction\nnil\n");
}

/// `cargo install --path .` copies only the binary: it must run the README's
/// first command with nothing of the checkout beside it.
#[test]
fn the_binary_runs_the_example_from_outside_the_checkout() {
    let elsewhere = tempfile::tempdir().unwrap();
    let bin = elsewhere.path().join("sluice");
    std::fs::copy(sluice_bin(), &bin).unwrap();
    let script = elsewhere.path().join("hello.lua");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello.lua");
    std::fs::copy(example, &script).unwrap();
    let ws = workspace();
    let run = || {
        Command::new(&bin)
            .current_dir(elsewhere.path())
            .arg("run")
            .arg(&script)
            .arg("--workspace")
            .arg(ws.path())
            .stdin(Stdio::null())
            .output()
    };
    // Another test's child forked while the copy was open for writing holds
    // that descriptor until it execs: the binary is busy for that moment.
    let mut out = run();
    for _ in 0..100 {
        match &out {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                out = run();
            }
            _ => break,
        }
    }
    let out = out.unwrap();
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.file("notes/todo.md").is_file());
}

/// Each `sluice ...` command of the README's and the policy guide's shell
/// blocks, as a person would paste it: `LINE --help` must parse (every flag
/// and subcommand it names exists), so the pages cannot drift from the CLI.
#[test]
fn every_sluice_command_the_docs_show_parses() {
    let mut pages = vec![(
        "README.md".to_string(),
        include_str!("../README.md").to_string(),
    )];
    pages.extend(guide_pages());
    let bin_dir = sluice_bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut checked = 0;
    for (page, text) in &pages {
        // A block named `file=NAME` is run whole by a test; these are lines.
        let lines = |b: &&Block| b.info == "sh";
        for block in fenced_blocks(text).iter().filter(lines) {
            for line in commands_of(&block.text) {
                let Some(line) = sluice_command(&line) else {
                    continue;
                };
                let with_help = match line.find(" -- ") {
                    Some(at) => format!("{} --help{}", &line[..at], &line[at..]),
                    None => format!("{line} --help"),
                };
                let out = Command::new("sh")
                    .args(["-c", &with_help])
                    .env("PATH", &path)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{page} shows `{line}`, which sluice does not parse:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "checked only {checked} commands");
}

/// The `sluice ...` command of a shell line, after any `NAME=VALUE`
/// assignments before it (which set its environment; a VALUE may be a
/// `$(...)` with spaces).
fn sluice_command(line: &str) -> Option<&str> {
    let mut rest = line;
    loop {
        if rest.starts_with("sluice ") {
            return Some(rest);
        }
        let (name, value) = rest.split_once('=')?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            return None;
        }
        let end = match value.strip_prefix("$(") {
            Some(inner) => inner.find(')')? + 3,
            None => value.find(' ')?,
        };
        rest = value[end..].trim_start();
    }
}

/// A shell block's commands: continuation lines joined, comments dropped.
fn commands_of(block: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        let code = match line.find(" #") {
            Some(at) => &line[..at],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        let code = code.trim_end();
        if let Some(head) = code.strip_suffix('\\') {
            current.push_str(head.trim_start());
            current.push(' ');
            continue;
        }
        current.push_str(code.trim_start());
        if !current.trim().is_empty() {
            commands.push(current.trim().to_string());
        }
        current.clear();
    }
    commands
}

/// The README's background-server example, as it says: under the default
/// policy the command has no network (`sandbox.network = "closed"`), a
/// later command of the run reaches the server under bubblewrap (the run's
/// commands share one sandbox) and not under landlock (no sockets but Unix
/// ones); `fetch` with the origin's grant reaches it in the run's sandbox
/// (bubblewrap) and not where the job could not listen (landlock); with
/// the network open a later command and a `fetch` do. Under each runner.
#[test]
fn the_readme_background_server_is_reached_as_it_says() {
    let ws = workspace();
    let open = common::policy(
        &ws,
        "open.lua",
        r#"local p = require("sluice.policy")
return { rules = { p.programs, p.allow "fs:*:${workspace}", p.allow "fs:*:${workspace}/**",
  p.allow "proc:spawn:*", p.allow "net:get:*", p.allow "net:post:*", p.allow "net:private:*" } }"#,
    );
    for runner in ["bwrap", "landlock"] {
        for (policy, reached) in [("default", false), (open.as_str(), true)] {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let origin = format!("http://127.0.0.1:{port}");
            let script = format!(
                r#"
                local server = sluice.bash{{command = "exec python3 -m http.server {port} --bind 127.0.0.1", background = true}}
                local up = sluice.bash{{interpreter = "python3", script = [[
import socket, sys, time
for _ in range(30):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1)
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
]]}}
                local page, err = sluice.fetch{{url = "{origin}/"}}
                print(up.sandbox.network, up.exitCode, page and page.status or err.code)
                server:kill()
                "#
            );
            let approve = format!("net:private:{origin}");
            let run = common::run_lua_with(
                ws.path(),
                &script,
                &[
                    "--policy",
                    policy,
                    "--sandbox",
                    runner,
                    "--no-audit",
                    "--approve",
                    &approve,
                ],
                &[],
            )
            .ok();
            let want = match (reached, runner) {
                (true, _) => "open\t0\t200\n",
                (false, "bwrap") => "closed\t0\t200\n",
                (false, _) => "closed\t1\trequest_failed\n",
            };
            assert_eq!(run.stdout, want, "{runner} with {policy}: {}", run.stderr);
        }
    }
}

/// The guide's flow reference is what `sluice flows --markdown` makes of
/// the registry: a flow added or changed without its page fails here.
#[test]
fn the_flow_reference_is_what_the_binary_makes() {
    let out = Command::new(sluice_bin())
        .args(["flows", "--markdown"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let made = String::from_utf8(out.stdout).unwrap();
    assert!(
        made == guide_page("flows.md"),
        "docs/flows.md differs from what the binary makes; run `sluice flows --markdown > docs/flows.md`"
    );
}

/// Troubleshooting has an entry (a `## \`code\`` heading) for every error
/// code, in the order the flow reference lists them.
#[test]
fn troubleshooting_has_an_entry_for_every_error_code() {
    let reference = guide_page("flows.md");
    let codes_line = reference
        .lines()
        .find(|l| l.starts_with("The closed list every flow's `err.code` is one of:"))
        .expect("the reference lists the error codes");
    let codes: Vec<&str> = codes_line.split('`').skip(3).step_by(2).collect();
    assert_eq!(codes.len(), 23, "{codes:?}");
    let page = guide_page("troubleshooting.md");
    let entries: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("## `")?.strip_suffix('`'))
        .collect();
    assert_eq!(entries, codes);
}

/// The book's summary names every page of docs/ once, and every page it
/// names is there.
#[test]
fn the_summary_lists_every_page_of_the_guide() {
    let summary = guide_page("SUMMARY.md");
    let mut linked: Vec<String> = summary
        .split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .map(|s| format!("docs/{s}"))
        .collect();
    linked.sort();
    let mut pages: Vec<String> = guide_pages()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n != "docs/SUMMARY.md")
        .collect();
    pages.sort();
    assert_eq!(linked, pages);
}

#[test]
fn the_readme_is_a_front_page_that_links_into_the_guide() {
    let readme = include_str!("../README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MOST_LINES,
        "README.md has {lines} lines; it is a front page of at most {README_MOST_LINES}: move the rest into docs/"
    );
    for (name, _) in guide_pages()
        .iter()
        .filter(|(n, _)| n != "docs/SUMMARY.md" && n != "docs/introduction.md")
    {
        assert!(
            readme.contains(&format!("]({name}")),
            "README.md does not link {name}"
        );
    }
}

/// Getting started's first workflow and first policy, written from the
/// page's own blocks and run by the page's own commands: under the
/// built-in default, then under the policy, whose `explain` names the rule
/// for `wc` and the deny for `git push`; then the look back at the record
/// (its browser line stopped after 2 s, on a port of its own).
#[test]
fn getting_started_runs_as_the_page_says() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["first.lua", "mine.lua"] {
        let text = named_block("getting-started.md", name);
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let printed = "wrote 14 bytes\nhello, sluice\n14 hello.txt\n\n";
    let run = |name: &str, swaps: &[(&str, &str)]| {
        let out = run_shell_block(&named_block("getting-started.md", name), swaps, dir.path());
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name}: {stdout}{stderr}");
        (stdout, stderr)
    };
    assert_eq!(run("first-run.sh", &[]).0, printed);
    let (policy, _) = run("first-policy.sh", &[]);
    assert!(policy.starts_with(printed), "{policy}");
    assert!(
        policy.contains("by:         allow \"proc:spawn:wc *\" (rules[4] of mine.lua)"),
        "{policy}"
    );
    assert!(policy.contains("pushing is for people"), "{policy}");
    let serve = "{ timeout -s INT 2 sluice audit serve --http 127.0.0.1:0 || [ $? = 124 ]; }";
    let (back, said) = run("look-back.sh", &[("sluice audit serve", serve)]);
    assert!(back.starts_with(printed), "{back}");
    for shown in ["first.lua", "wc -c hello.txt", "verified intact"] {
        assert!(back.contains(shown), "no {shown:?} in:\n{back}");
    }
    assert_eq!(
        back.matches(printed).count(),
        2,
        "the replay prints again:\n{back}"
    );
    assert!(
        said.contains("sluice audit serve: http://127.0.0.1:"),
        "{said}"
    );
}

/// README's one short example, run under the built-in default policy in a
/// workspace with a TODO: it lists the TODO as it says.
#[test]
fn the_readme_example_runs_as_it_says() {
    let readme = include_str!("../README.md");
    let script = fenced_blocks(readme)
        .into_iter()
        .find(|b| file_name(&b.info) == Some("review.lua"))
        .expect("README shows review.lua")
        .text;
    let ws = workspace();
    std::fs::create_dir(ws.file("src")).unwrap();
    std::fs::write(ws.file("src/main.rs"), "fn main() {}\n// TODO: say hello\n").unwrap();
    let run = run_lua(ws.path(), &script, &[]).ok();
    assert!(
        run.stdout
            .starts_with("src/main.rs:2: // TODO: say hello\n"),
        "{}",
        run.stdout
    );
}

/// Writing workflows' tasks example, run from the page: its four hermetic
/// commands print in order and ran side by side (the record's overlaps
/// say so, whatever the machine's speed).
#[test]
fn the_tasks_example_runs_its_commands_side_by_side() {
    let page = guide_page("workflows.md");
    let script = fenced_blocks(&page)
        .into_iter()
        .find(|b| file_name(&b.info) == Some("tasks.lua"))
        .expect("workflows.md shows tasks.lua")
        .text;
    let ws = workspace();
    let run = common::run_lua_with(ws.path(), &script, &["--max-procs", "4"], &[]).ok();
    assert!(run.stdout.starts_with("1 2 3 4 \t"), "{}", run.stdout);
    let shown = Command::new(sluice_bin())
        .args(["audit", "show", "last", "--json", "--workspace"])
        .arg(ws.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let overlapped = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["flow"] == "bash" && !c["overlaps"].as_array().unwrap().is_empty())
        .count();
    assert_eq!(overlapped, 4, "{}", v["calls"]);
}

/// Containers' image without a registry, made as the page says (its
/// `offline-image.sh` run by bash in a scratch folder): both images start.
#[test]
fn the_offline_image_recipe_makes_images_that_start() {
    common::need_program("podman", "apt-get install podman runc busybox-static");
    let page = guide_page("containers.md");
    let script = fenced_blocks(&page)
        .into_iter()
        .find(|b| file_name(&b.info) == Some("offline-image.sh"))
        .expect("containers.md shows offline-image.sh")
        .text;
    let dir = tempfile::tempdir().unwrap();
    let conf = containers::conf();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("CONTAINERS_CONF", conf)
        .output()
        .unwrap();
    let made = Command::new("podman")
        .args(["run", "--rm", "localhost/box-import", "echo", "imported"])
        .env("CONTAINERS_CONF", conf)
        .output()
        .unwrap();
    for image in ["localhost/box-import", "localhost/box-build"] {
        let _ = Command::new("podman")
            .args(["rmi", "-f", image])
            .env("CONTAINERS_CONF", conf)
            .output();
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("built\n"));
    assert_eq!(String::from_utf8_lossy(&made.stdout), "imported\n");
}

const README: &str = include_str!("../README.md");

/// README's and getting started's first command, run as shown in the
/// checkout, with the binary `cargo test` built for `cargo run -q --` (a
/// `cargo run` inside the suite could rebuild the binary other tests run):
/// the example says what it did.
#[test]
fn the_first_command_runs_as_the_pages_show() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = sluice_bin().display().to_string();
    for (page, text) in [
        ("README.md", README.to_string()),
        ("getting-started.md", guide_page("getting-started.md")),
    ] {
        let block = block_named(&text, "first-command.sh").expect(page);
        let out = run_shell_block(&block, &[("cargo run -q --", &bin)], repo);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{page}: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in [
            "write: 56 bytes to notes/todo.md (created: true)\n",
            "bash: 3 items in the list (exit 0)\n",
        ] {
            assert!(said.contains(line), "{page}: no {line:?} in:\n{said}");
        }
    }
}

/// The test command the pages give is the one CI runs (`.ci/run`).
#[test]
fn the_test_command_is_what_ci_runs() {
    let ci =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    let last = ci.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    for text in [README.to_string(), guide_page("getting-started.md")] {
        let block = block_named(&text, "test-command.sh").expect("a test command");
        assert_eq!(block.trim(), last.trim());
    }
}

/// Blocks no test runs, each with why: what they show needs what a test
/// cannot have, and what stands in for it.
const NOT_RUN: &[(&str, &str, &str)] = &[
    ("getting-started.md", "cargo install --path .", "a release build of minutes; the_binary_runs_the_example_from_outside_the_checkout runs the binary it installs"),
    ("README.md", "cargo install --path .", "the same as getting started's"),
    ("viewer.md", "python3 -m venv ~/phoenix", "installs Phoenix from the registry; tests/otlp.rs starts the same Phoenix (scripts/test installs it) and sends runs both ways"),
    ("mcp.md", "// Cursor:", "Cursor is a desktop program this machine cannot run"),
    ("record.md", "export SLUICE_CREDENTIAL_AUDIT", "a PostgreSQL server with a certificate at db.internal; tests/audit_postgres.rs runs a real PostgreSQL with the same URL form and credential, and the sluice lines parse here"),
];

/// What a block's language makes it: one a test must run, or text.
fn is_code(info: &str) -> bool {
    !matches!(info.split_whitespace().next(), None | Some("text"))
}

/// Every code block of the guide and README runs in a test: a block named
/// `file=NAME` is read by a test that names it (`docs/policies.md`'s are
/// all run by one test), a shell block of `sluice ...` lines parses (see
/// every_sluice_command_the_docs_show_parses), and the rest are listed in
/// NOT_RUN with the reason.
#[test]
fn every_example_of_the_guide_runs_in_a_test() {
    let tests_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let tests: String = std::fs::read_dir(&tests_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut pages = vec![("README.md".to_string(), README.to_string())];
    pages.extend(
        guide_pages()
            .into_iter()
            .filter(|(n, _)| n != "docs/flows.md")
            .map(|(n, t)| (n.trim_start_matches("docs/").to_string(), t)),
    );
    let mut unrun = Vec::new();
    for (page, text) in &pages {
        for block in fenced_blocks(text).iter().filter(|b| is_code(&b.info)) {
            let covered = match file_name(&block.info) {
                Some(_) if page == "policies.md" => true,
                Some(name) => tests.contains(&format!("\"{name}\"")),
                None if block.info == "sh" => {
                    let commands = commands_of(&block.text);
                    !commands.is_empty() && commands.iter().all(|c| sluice_command(c).is_some())
                }
                None => false,
            } || NOT_RUN
                .iter()
                .any(|(p, first, _)| p == page && block.text.starts_with(first));
            if !covered {
                unrun.push(format!("{page}: ```{}\n{}", block.info, block.text));
            }
        }
    }
    assert!(
        unrun.is_empty(),
        "blocks no test runs (name each file=NAME and run it in a test, or list it in NOT_RUN with why):\n{}",
        unrun.join("\n")
    );
}

/// Each flow's declared error codes are made to happen by exactly one of
/// the two `flow_errors` test files: together they cover every flow.
#[test]
fn every_flow_has_its_error_scenarios_in_one_file() {
    use common::flow_errors::{FILE_FLOWS, WORLD_FLOWS};
    let out = Command::new(sluice_bin())
        .args(["flows", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut flows: Vec<String> = listed["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect();
    flows.sort();
    let mut covered: Vec<String> = FILE_FLOWS
        .iter()
        .chain(WORLD_FLOWS)
        .map(|f| f.to_string())
        .collect();
    covered.sort();
    assert_eq!(flows, covered);
}
