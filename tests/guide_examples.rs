//! The guide's Lua examples, run from the pages as they stand (each block
//! found by its `file=NAME`, see tests/common/guide.rs), against real
//! servers where they need one: the models chapter against the scripted
//! loopback model (its port for the page's 8080), the policy chapters
//! through `sluice policy explain` and a run, the containers chapter in a
//! real podman container, getting started's look back at the record.
//! Each test asserts what the page says the example prints or does.

mod common;
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
    std::process::Command::new(common::sluice_bin())
        .current_dir(dir)
        .args(args)
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
        &["run", "ask.lua", "--policy", "models-policy.lua", "--workspace", ws_arg],
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
    write_blocks(dir.path(), "models.md", &["models-policy.lua"], &[(from, &to)]);
    std::fs::write(
        dir.path().join("other.lua"),
        "local out, err = sluice.model{provider = \"local\", model = \"llama-3\", messages = {{role = \"user\", content = \"hi\"}}}\nprint(out, err.code)\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let out = sluice_at(
        dir.path(),
        &["run", "other.lua", "--policy", "models-policy.lua", "--workspace", ws_arg],
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
    stdout(&sluice_at(dir.path(), &["run", "plan.lua", "--workspace", ws_arg]));
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
        0 => Answer::json(openai_tools(vec![("c1", "grep", json!({"pattern": "def delay"}))])),
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
