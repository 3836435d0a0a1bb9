//! The guide's Lua examples, run from the pages as they stand (each block
//! found by its `file=NAME`, see tests/common/guide.rs), against real
//! servers where they need one: the models chapter against the scripted
//! loopback model (its port for the page's 8080), the policy chapters
//! through `sluice policy explain` and a run, the containers chapter in a
//! real podman container, getting started's look back at the record.
//! Each test asserts what the page says the example prints or does.

mod common;
#[path = "common/containers.rs"]
mod containers;
#[path = "common/model_server.rs"]
mod model_server;

use common::guide::{named_block, run_shell_block};
use common::{workspace, Workspace};
use model_server::{
    openai_stream_text, openai_text, openai_tools, tool_results, Answer, ModelServer, Request,
    INPUT_TOKENS, OUTPUT_TOKENS,
};
use serde_json::json;
use std::path::Path;
use std::process::Output;

/// The page's `127.0.0.1:8080`, swapped for the scripted model's address.
fn port_swap(server: &ModelServer) -> (&'static str, String) {
    ("127.0.0.1:8080", format!("127.0.0.1:{}", server.port()))
}

/// Writes the named blocks of `page` into `dir`, each under its name,
/// with `swaps` applied.
fn write_blocks(dir: &Path, page: &str, names: &[&str], swaps: &[(&str, &str)]) {
    for name in names {
        let mut text = named_block(page, name);
        for (from, to) in swaps {
            text = text.replace(from, to);
        }
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", said(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `sluice ARGS` in `dir`, no terminal.
fn sluice_at(dir: &Path, args: &[&str]) -> Output {
    sluice_env(dir, args, &[])
}

/// `sluice ARGS` in `dir` with `env` added, no terminal.
fn sluice_env(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    std::process::Command::new(common::sluice_bin())
        .current_dir(dir)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The models chapter's policy and its first call, run as its comment
/// says (`sluice run ask.lua --policy models-policy.lua`): the streamed
/// pieces make the text, the tokens are the server's, and the second
/// call's tool call is printed with its input.
#[test]
fn the_models_chapter_asks_a_model_streamed_then_with_tools_as_the_page_says() {
    let server = ModelServer::respond(|req: &Request| match req.body["tools"].is_array() {
        false => Answer::sse(openai_stream_text(&["Rewrites ", "commits."])),
        true => Answer::json(openai_tools(vec![(
            "call_1",
            "grep",
            json!({"pattern": "retry"}),
        )])),
    });
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let (from, to) = port_swap(&server);
    write_blocks(
        dir.path(),
        "models.md",
        &["models-policy.lua", "ask.lua"],
        &[(from, &to)],
    );
    let ws_arg = ws.path().to_str().unwrap();
    let out = sluice_at(
        dir.path(),
        &[
            "run",
            "ask.lua",
            "--policy",
            "models-policy.lua",
            "--workspace",
            ws_arg,
        ],
    );
    assert_eq!(
        stdout(&out),
        format!(
            "Rewrites commits.\tend_turn\t{INPUT_TOKENS}\t{OUTPUT_TOKENS}\ncall_1\tgrep\tretry\n"
        )
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].streams(), "onText streams the first call");
    let tools: Vec<&str> = requests[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "grep", "edit", "bash", "today"]);
    assert_eq!(requests[1].body["model"], "qwen3-coder");
}

/// The policy grants `local/qwen3-*` only: a call to another model of the
/// same provider is not granted (an ask, which a run with no terminal
/// refuses) and never reaches the server.
#[test]
fn the_models_chapters_policy_refuses_a_model_it_does_not_name() {
    let server = ModelServer::start(vec![]);
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let (from, to) = port_swap(&server);
    write_blocks(
        dir.path(),
        "models.md",
        &["models-policy.lua"],
        &[(from, &to)],
    );
    std::fs::write(
        dir.path().join("other.lua"),
        "local out, err = sluice.model{provider = \"local\", model = \"llama-3\", messages = {{role = \"user\", content = \"hi\"}}}\nprint(out, err.code)\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let out = sluice_at(
        dir.path(),
        &[
            "run",
            "other.lua",
            "--policy",
            "models-policy.lua",
            "--workspace",
            ws_arg,
        ],
    );
    assert_eq!(stdout(&out), "nil\tpermission_required\n");
    assert_eq!(server.count(), 0);
}

/// The plan example runs under the default policy and `audit show` prints
/// it under the timeline as the page says: `[x]`, `[>]`, `[ ]`.
#[test]
fn the_plan_example_is_shown_under_the_timeline() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    write_blocks(dir.path(), "models.md", &["plan.lua"], &[]);
    let ws_arg = ws.path().to_str().unwrap();
    stdout(&sluice_at(
        dir.path(),
        &["run", "plan.lua", "--workspace", ws_arg],
    ));
    let shown = stdout(&sluice_at(
        dir.path(),
        &["audit", "show", "last", "--workspace", ws_arg],
    ));
    for line in [
        "[x] Read the failing test",
        "[>] Fix mean()",
        "[ ] Run the tests",
    ] {
        assert!(shown.contains(line), "no {line:?} in:\n{shown}");
    }
}

/// A workspace where the retry delay is computed in one place.
fn retry_project() -> Workspace {
    let ws = workspace();
    std::fs::create_dir(ws.file("net")).unwrap();
    std::fs::write(
        ws.file("net/retry.py"),
        "import random\n\ndef delay(attempt):\n    return min(8.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.0)\n",
    )
    .unwrap();
    ws
}

/// The explorer: grep for the delay, read the file grep named, answer
/// citing the line it was shown; anything else is said in the answer.
fn explorer(req: &Request) -> Answer {
    let results = tool_results(req);
    let last = results.last().map(|(_, c)| c.clone()).unwrap_or_default();
    match results.len() {
        0 => Answer::json(openai_tools(vec![(
            "c1",
            "grep",
            json!({"pattern": "def delay"}),
        )])),
        1 if last.contains("net/retry.py:3: def delay(attempt):") => Answer::json(openai_tools(
            vec![("c2", "read", json!({"path": "net/retry.py"}))],
        )),
        2 if last.contains("4\t    return min(8.0") => {
            let findings = json!({"findings": [{"claim": "delay() doubles from 0.5 s up to 8 s, with jitter",
                                                "evidence": [{"path": "net/retry.py", "line": 4}]}]});
            Answer::json(openai_text(&format!("Found it.\n{findings}")))
        }
        _ => Answer::json(openai_text(&format!("UNEXPECTED: {last:?}"))),
    }
}

/// The explore example, run by the page's own command: the finding and
/// the line it cites, as the page's loop prints them.
#[test]
fn the_explore_example_prints_its_finding_and_the_line_it_rests_on() {
    let server = ModelServer::respond(explorer);
    let ws = retry_project();
    let dir = tempfile::tempdir().unwrap();
    write_blocks(dir.path(), "models.md", &["explore.lua"], &[]);
    let (from, to) = port_swap(&server);
    let command = format!(
        "{} --workspace {}",
        named_block("models.md", "explore.sh").trim_end(),
        ws.path().display()
    );
    let out = run_shell_block(&command, &[(from, &to)], dir.path());
    assert_eq!(
        stdout(&out),
        "delay() doubles from 0.5 s up to 8 s, with jitter\n  net/retry.py:4      return min(8.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.0)\n"
    );
    assert_eq!(server.count(), 3);
}

/// The policy rules chapter's two policies, with the tests shown beside
/// them, pass `sluice policy test` as the page says they do: every test.
#[test]
fn the_policy_rules_chapters_policies_pass_their_tests() {
    let dir = tempfile::tempdir().unwrap();
    write_blocks(
        dir.path(),
        "policy-rules.md",
        &[
            "shape.lua",
            "shape_test.lua",
            "reviewed.lua",
            "reviewed_test.lua",
        ],
        &[],
    );
    let out = sluice_at(dir.path(), &["policy", "test", "."]);
    let text = stdout(&out);
    assert!(text.contains("4 passed, 0 failed"), "{text}");
}

/// Confinement's `danger-full-access` example: with no terminal it is
/// `permission_required` naming the flag; followed, that flag runs the
/// command outside the sandbox (its write lands outside the workspace),
/// and the same command without the ask stays confined.
#[test]
fn the_full_access_example_asks_and_its_flag_runs_it_unconfined() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("installed.txt");
    std::fs::write(
        ws.file("Makefile"),
        format!("install:\n\techo installed > {}\n", target.display()),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_blocks(dir.path(), "confinement.md", &["install.lua"], &[]);
    let ws_arg = ws.path().to_str().unwrap();
    let refused = stdout(&sluice_at(
        dir.path(),
        &["run", "install.lua", "--workspace", ws_arg],
    ));
    assert!(
        refused.starts_with("permission_required\t")
            && refused.contains("installs into /usr/local")
            && refused.contains("--approve 'proc:spawn:make install'"),
        "{refused}"
    );
    assert!(!target.exists());
    let approved = stdout(&sluice_at(
        dir.path(),
        &[
            "run",
            "install.lua",
            "--workspace",
            ws_arg,
            "--approve",
            "proc:spawn:make install",
        ],
    ));
    assert_eq!(approved, "0\n");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "installed\n");
    std::fs::remove_file(&target).unwrap();
    std::fs::write(
        dir.path().join("confined.lua"),
        "local r = assert(sluice.bash{command = \"make install\"})\nprint(r.exitCode)\n",
    )
    .unwrap();
    let confined = stdout(&sluice_at(
        dir.path(),
        &[
            "run",
            "confined.lua",
            "--workspace",
            ws_arg,
            "--approve",
            "proc:spawn:make install",
        ],
    ));
    assert_ne!(confined, "0\n");
    assert!(!target.exists());
}

/// The page's `localhost/app`: the test's busybox image with a `pytest`
/// that prints a pytest summary, built once (offline, by `podman build`).
fn app_image() -> &'static str {
    const APP: &str = "localhost/sluice-guide-app";
    static MADE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let base = containers::image();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Containerfile"),
            format!("FROM {base}\nRUN printf '#!/bin/sh\\necho \"1 passed in 0.01s\"\\n' > /bin/pytest && chmod 755 /bin/pytest\n"),
        )
        .unwrap();
        let dir_arg = dir.path().to_str().unwrap();
        let out = containers::podman(&["build", "-q", "-t", APP, dir_arg]);
        assert!(out.status.success(), "podman build: {}", said(&out));
    });
    APP
}

/// The containers chapter's policy: `pytest` goes to the declared `box`
/// (the run starts it, and removes it at the end), the rest stays on the
/// host, and `audit show` names the route.
#[test]
fn the_containers_policy_routes_pytest_into_its_box_and_the_rest_to_the_host() {
    common::need_program("podman", "apt-get install -y podman runc busybox-static");
    let image = app_image();
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    write_blocks(
        dir.path(),
        "containers.md",
        &["box.lua"],
        &[("localhost/app", image)],
    );
    std::fs::write(
        dir.path().join("routes.lua"),
        "local t = assert(sluice.bash{command = \"pytest -q\"})\nprint(t.stdout)\nlocal h = assert(sluice.bash{command = \"echo on the host\"})\nprint(h.stdout)\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let env = containers::env();
    let run = [
        "run",
        "routes.lua",
        "--policy",
        "box.lua",
        "--workspace",
        ws_arg,
    ];
    assert_eq!(
        stdout(&sluice_env(dir.path(), &run, &env)),
        "1 passed in 0.01s\n\non the host\n\n"
    );
    let shown = stdout(&sluice_env(
        dir.path(),
        &["audit", "show", "last", "--workspace", ws_arg],
        &env,
    ));
    let routed: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("container:box"))
        .collect();
    assert_eq!(routed.len(), 1, "{shown}");
    assert!(routed[0].contains("pytest -q"), "{shown}");
    let runs = stdout(&sluice_env(
        dir.path(),
        &["audit", "list", "--json", "--workspace", ws_arg],
        &env,
    ));
    let run_id = serde_json::from_str::<serde_json::Value>(&runs).unwrap()["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        containers::of_run(&run_id).is_empty(),
        "the box outlived its run"
    );
}

/// A `src/main.rs` of 60 lines, line 41 `    let x = 1;`, with a test
/// function for the tour's grep.
fn tour_project() -> Workspace {
    let ws = workspace();
    std::fs::create_dir(ws.file("src")).unwrap();
    let mut lines: Vec<String> = (1..=60).map(|n| format!("// line {n}")).collect();
    lines[38] = "fn parse_test() {".into();
    lines[40] = "    let x = 1;".into();
    lines[41] = "}".into();
    std::fs::write(ws.file("src/main.rs"), lines.join("\n") + "\n").unwrap();
    ws
}

/// Runs the tour's `name` from `dir` in `ws` under the default policy,
/// with `flags`; its standard output.
fn tour(dir: &Path, ws: &Workspace, name: &str, flags: &[&str]) -> String {
    write_blocks(dir, "workflows.md", &[name], &[]);
    let mut args = vec!["run", name, "--workspace", ws.path().to_str().unwrap()];
    args.extend(flags);
    stdout(&sluice_env(
        dir,
        &args,
        &[("SLUICE_CREDENTIAL_GITHUB", "not-a-token".into())],
    ))
}

/// The Lua tour of writing workflows, its four scripts run in order in
/// one workspace as the page says, each printing what its comments say.
#[test]
fn the_workflow_tour_runs_as_the_page_says() {
    let ws = tour_project();
    let dir = tempfile::tempdir().unwrap();
    let files = tour(dir.path(), &ws, "tour-files.lua", &[]);
    let main = std::fs::read_to_string(ws.file("src/main.rs")).unwrap();
    assert_eq!(main.lines().nth(40), Some("    let x = 3;"));
    assert!(
        files.ends_with(
            "// line 59\n40\t59\t60\ttrue\tShowing lines 40-59 of 60. Continue with offset = 60.\n# Notes (draft)\n"
        ),
        "{files}"
    );
    assert!(
        files.starts_with("// line 40\n    let x = 1;\n}\n"),
        "{files}"
    );

    let flag = ["--approve", "net:private:http://127.0.0.1:8000"];
    let commands = tour(dir.path(), &ws, "tour-commands.lua", &flag);
    assert_eq!(commands, "3\t1\n\tfalse\nrunning\n200\n\n200\n");

    let network = tour(dir.path(), &ws, "tour-network.lua", &[]);
    assert_eq!(
        network,
        "permission_required\nprovider_unavailable\ncredential(github)\n"
    );

    std::fs::write(dir.path().join("helpers.lua"), "return {}\n").unwrap();
    let runtime = tour(dir.path(), &ws, "tour-runtime.lua", &[]);
    let lines: Vec<&str> = runtime.lines().collect();
    assert_eq!(lines[0], "0");
    assert_eq!(lines[1], common::canon(ws.path()).display().to_string());
    assert_eq!(lines[3], "true");
    assert_eq!(lines.last(), Some(&"1"));
    let notes = std::fs::read_to_string(ws.file("notes.md")).unwrap();
    assert_eq!(notes, "# Notes (drbft)\n");
}

/// The tasks chapter's API example: a task awaited, two tasks' first
/// results in order, one task per item of a map, as its last line prints.
#[test]
fn the_tasks_api_example_prints_each_tasks_result_in_order() {
    let ws = tour_project();
    let dir = tempfile::tempdir().unwrap();
    let out = tour(dir.path(), &ws, "tasks-api.lua", &[]);
    assert_eq!(out, "60\t10\t20\ta1\nb2\nc3\n\n");
}

/// The record chapter's tour, run by bash in a workspace holding one run
/// (a write and a command): listed, shown, exported, verified, anchored
/// and the anchor proven, then replayed without touching the workspace.
#[test]
fn the_record_tour_runs_as_the_page_shows() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fix.lua"),
        "assert(sluice.write{path = \"notes.md\", content = \"fixed\\n\"})\nprint(assert(sluice.bash{command = \"cat notes.md\"}).stdout)\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    stdout(&sluice_at(
        dir.path(),
        &["run", "fix.lua", "--workspace", ws_arg],
    ));
    std::fs::remove_file(ws.file("notes.md")).unwrap();
    let out = run_shell_block(&named_block("record.md", "record-tour.sh"), &[], ws.path());
    let said = stdout(&out);
    let run_id = said
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    for shown in [
        "chain        sealed, verified intact",
        "run,n,task,seq,flow,tier,",
        &format!("{run_id}  intact (2 calls, sealed)"),
        ": held: run #1 (",
        "fixed\n",
    ] {
        assert!(said.contains(shown), "no {shown:?} in:\n{said}");
    }
    assert!(!ws.file("notes.md").exists(), "the replay wrote the file");
}
