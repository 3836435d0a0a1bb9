//! End to end: `examples/agent.lua` (on `sluice.agent`) against a scripted
//! loopback model that makes real tool calls on a copy of `examples/calc`:
//! it reads the failing test, greps for the function, runs the tests, edits
//! the code, runs them again, and answers. Each request must carry the
//! previous tool results; the fixture's tests really pass at the end; the
//! run replays with the model server stopped; and a policy that denies
//! `bash` shows the refusal reaching the model as a tool result.

mod common;
#[path = "common/model_server.rs"]
mod model_server;

use common::{need_program, workspace, Workspace};
use model_server::{openai_text, openai_tools, tool_results, Answer, ModelServer, Request};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/agent.lua");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/calc");

/// The workspace: a copy of the fixture.
fn project() -> Workspace {
    let ws = workspace();
    for name in ["calc.py", "test_calc.py"] {
        std::fs::copy(Path::new(FIXTURE).join(name), ws.file(name)).unwrap();
    }
    ws
}

/// One tool call, as the model's reply makes it.
fn call(id: &str, name: &str, input: Value) -> Answer {
    Answer::json(openai_tools(vec![(id, name, input)]))
}

/// The scripted model: the turn it is on is how many tool results the
/// request carries. Before each turn it checks that the last result is the
/// one the previous call produced, and says so in the reply when not.
fn coder(req: &Request) -> Answer {
    let results = tool_results(req);
    let last = results.last().map(|(_, c)| c.as_str()).unwrap_or_default();
    let expect = |id: &str, needle: &str, next: Answer| -> Answer {
        match results.last() {
            Some((got, content)) if got == id && content.contains(needle) => next,
            _ => Answer::json(openai_text(&format!(
                "UNEXPECTED: after {id} wanted {needle:?}, got {last:?}"
            ))),
        }
    };
    match results.len() {
        0 => call("c1", "read", json!({"path": "test_calc.py"})),
        1 => expect(
            "c1",
            "def test_mean",
            call("c2", "grep", json!({"pattern": "def mean"})),
        ),
        2 => expect(
            "c2",
            "calc.py",
            call("c3", "bash", json!({"command": "python3 -m unittest -q"})),
        ),
        3 => expect(
            "c3",
            "FAILED",
            call(
                "c4",
                "edit",
                json!({"path": "calc.py", "oldString": "(len(values) + 1)", "newString": "len(values)"}),
            ),
        ),
        4 => expect(
            "c4",
            "\"replacements\":1",
            call("c5", "bash", json!({"command": "python3 -m unittest -q"})),
        ),
        _ => expect(
            "c5",
            "\"exitCode\":0",
            Answer::json(openai_text(
                "mean divided by one too many; it divides by len(values) now.",
            )),
        ),
    }
}

fn flags(server: &ModelServer) -> Vec<String> {
    model_server::local_openai_flags(server)
}

fn agent(ws: &Workspace, flags: &[String]) -> Output {
    Command::new(common::sluice_bin())
        .arg("run")
        .arg(EXAMPLE)
        .arg("--workspace")
        .arg(ws.path())
        .args(flags)
        .args(["--", "coder-1"])
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_example_agent_makes_the_failing_test_pass_and_its_run_replays_without_the_model() {
    need_program("python3", "apt-get install -y python3");
    let ws = project();
    let mut server = ModelServer::respond(coder);
    let out = agent(&ws, &flags(&server));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("UNEXPECTED"), "{said}");
    assert!(said.contains("the tests pass"), "{said}");
    assert!(said.contains("final after 6 turns"), "{said}");

    // Six turns, each carrying every earlier tool result, the tools and
    // the system prompt; the model name as given.
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    for (i, req) in requests.iter().enumerate() {
        assert_eq!(tool_results(req).len(), i, "request {}", i + 1);
        assert_eq!(req.body["model"], "coder-1");
        assert_eq!(req.body["messages"][0]["role"], "system");
        let tools: Vec<&str> = req.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["read", "ls", "grep", "edit", "apply_patch", "bash"]);
    }

    // The fixture's tests really pass now, run outside sluice.
    let fixed = std::fs::read_to_string(ws.file("calc.py")).unwrap();
    assert!(
        fixed.contains("return sum(values) / len(values)\n"),
        "{fixed}"
    );
    let tests = Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(tests.status.success(), "{}", text(&tests));

    // Replayed with the model gone: every turn and tool call answered
    // from the record, the script's output the same.
    server.stop();
    std::fs::copy(Path::new(FIXTURE).join("calc.py"), ws.file("calc.py")).unwrap();
    let replay = common::sluice_in(ws.path(), &["replay", "last"]);
    let again = format!("{}{}", replay.stdout, replay.stderr);
    assert_eq!(replay.code, 0, "{again}");
    assert!(again.contains("final after 6 turns"), "{again}");
    assert!(again.contains("the tests pass"), "{again}");
    // Nothing was touched: the file is the fixture's again.
    let untouched = std::fs::read_to_string(ws.file("calc.py")).unwrap();
    assert!(untouched.contains("(len(values) + 1)"), "{untouched}");
}

/// The model's bash call is refused by the policy; the refusal goes back
/// to the model as an error tool result, and the loop goes on.
#[test]
fn a_refused_tool_call_reaches_the_model_as_an_error_result() {
    let ws = project();
    let policy = common::policy(
        &ws,
        "nobash.lua",
        r#"local p = require("sluice.policy")
return { rules = {
  p.allow "fs:read:${workspace}/**", p.allow "fs:read:${workspace}",
  p.allow "fs:write:${workspace}/**",
  p.deny("proc:spawn:*", "no commands in this seat"),
} }"#,
    );
    let server = ModelServer::respond(|req: &Request| match tool_results(req).len() {
        0 => call("c1", "bash", json!({"command": "python3 -m unittest -q"})),
        _ => Answer::json(openai_text("I could not run the tests.")),
    });
    let mut all = flags(&server);
    all.extend(["--policy".to_string(), policy]);
    let out = agent(&ws, &all);
    let said = text(&out);
    // The example's own last check runs bash too, and is refused: it says so.
    assert!(said.contains("the tests still fail"), "{said}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{said}");
    let second = &requests[1].body["messages"];
    let result = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the second request carries the tool result");
    assert_eq!(result["tool_call_id"], "c1");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.starts_with("Error: error permission_denied: ")
            && content.contains("no commands in this seat"),
        "{content}"
    );
    assert!(said.contains("bash"), "{said}");
}

/// The (start, end) stamps, in ns, a stamped command printed.
fn stamps(content: &str) -> (u128, u128) {
    let out: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
    let text = out["stdout"].as_str().unwrap();
    let mut lines = text.lines().map(|l| l.parse::<u128>().unwrap());
    (lines.next().unwrap(), lines.next().unwrap())
}

/// A turn with two tool calls runs them at once (they write different
/// files), and their results go back in the order the model gave them;
/// the run replays, each task's calls answered from the record.
#[test]
fn one_turns_tool_calls_run_at_once_and_their_results_go_back_in_order() {
    let ws = workspace();
    let stamped = |file: &str| {
        json!({"command": format!("date +%s%N; sleep 0.5; echo x > {file}; date +%s%N"),
               "mode": "hermetic", "reads": [], "writes": [file]})
    };
    let (one, two) = (stamped("one.txt"), stamped("two.txt"));
    let server = ModelServer::respond(move |req: &Request| match tool_results(req).len() {
        0 => Answer::json(openai_tools(vec![
            ("c1", "bash", one.clone()),
            ("c2", "bash", two.clone()),
        ])),
        _ => Answer::json(openai_text("both ran")),
    });
    let script = common::script_file(
        ws.path(),
        r#"local result = assert(require("sluice.agent").run{
  provider = "local", model = "m", task = "run both",
  tools = sluice.tools{"bash"},
})
print(result.text, result.turns)"#,
    );
    let mut all = flags(&server);
    all.extend(["--max-procs".into(), "4".into()]);
    let out = Command::new(common::sluice_bin())
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .args(&all)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "both ran\t2\n");
    let requests = server.requests();
    let results = tool_results(&requests[1]);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    let (a, b) = (stamps(&results[0].1), stamps(&results[1].1));
    assert!(
        b.0 < a.1 && a.0 < b.1,
        "the two tool calls of one turn did not run at once: {a:?} {b:?}"
    );
    let replay = common::sluice_in(ws.path(), &["replay", "last"]);
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("both ran\t2"), "{}", replay.stdout);
}

/// With a runner declared, the example gives the model the `test` tool: a
/// selection naming a test that does not exist comes back with an
/// `invalidProbe` (the model is told its name was wrong, not the code),
/// the real failure comes back named, the fix makes the suite pass, and
/// the example's own last check runs `sluice.test`.
#[test]
fn with_a_declared_runner_the_example_agent_tests_through_the_test_flow() {
    need_program("python3", "apt-get install -y python3");
    let ws = project();
    let runner = common::policy(
        &ws,
        "runner.lua",
        "return { test = { command = \"python3 -m unittest\" } }",
    );
    let server = ModelServer::respond(|req: &Request| {
        let results = tool_results(req);
        let last = results.last().map(|(_, c)| c.clone()).unwrap_or_default();
        match results.len() {
            0 => call(
                "t1",
                "test",
                json!({"selection": ["test_calc.CalcTest.test_nope"]}),
            ),
            1 if last.contains("\"reason\":\"unknown-test\"") => call("t2", "test", json!({})),
            2 if last.contains("test_calc.CalcTest.test_mean") => call(
                "t3",
                "edit",
                json!({"path": "calc.py", "oldString": "(len(values) + 1)", "newString": "len(values)"}),
            ),
            3 => call("t4", "test", json!({})),
            4 if last.contains("\"exitCode\":0") => Answer::json(openai_text("fixed the mean")),
            _ => Answer::json(openai_text(&format!("UNEXPECTED: {last}"))),
        }
    });
    let mut all = flags(&server);
    all.extend([
        "--policy".into(),
        "default".into(),
        "--policy".into(),
        runner,
    ]);
    let out = agent(&ws, &all);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("UNEXPECTED"), "{said}");
    assert!(said.contains("the tests pass"), "{said}");
    let tools: Vec<String> = server.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        tools,
        ["read", "ls", "grep", "edit", "apply_patch", "bash", "test"]
    );
}

/// The agent commands of getting started and of the models chapter, run
/// as the pages show them (the scripted model's port for the page's 8080, a
/// scratch folder for `/tmp/calc`): the agent makes the tests pass, and the
/// models chapter's replay answers every turn from the record.
#[test]
fn the_guides_agent_commands_run_as_the_pages_show() {
    need_program("python3", "apt-get install -y python3");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (page, name) in [
        ("getting-started.md", "first-agent.sh"),
        ("models.md", "agent.sh"),
    ] {
        let mut server = ModelServer::respond(coder);
        let scratch = tempfile::tempdir().unwrap();
        let calc = scratch.path().join("calc");
        let port = format!("127.0.0.1:{}", server.port());
        let block = common::guide::named_block(page, name);
        let out = common::guide::run_shell_block(
            &block,
            &[
                ("127.0.0.1:8080", &port),
                ("/tmp/calc", calc.to_str().unwrap()),
            ],
            repo,
        );
        server.stop();
        let said = text(&out);
        assert!(out.status.success(), "{name}: {said}");
        assert!(!said.contains("UNEXPECTED"), "{name}: {said}");
        assert!(said.contains("the tests pass"), "{name}: {said}");
        let fixed = std::fs::read_to_string(calc.join("calc.py")).unwrap();
        assert!(
            fixed.contains("return sum(values) / len(values)\n"),
            "{name}: {fixed}"
        );
        if name == "agent.sh" {
            assert_eq!(said.matches("final after 6 turns").count(), 2, "{said}");
        }
    }
}
