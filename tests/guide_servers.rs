//! The guide's examples that need a real server behind them, run as the
//! pages show them: docs/lsp.md's tour with basedpyright, docs/tests.md's
//! runner policy and calls with pytest in a git repository, and
//! docs/mcp.md's Lua tool served by `sluice mcp` to the official MCP
//! client. Each test reads its blocks from the page at run time, writes
//! them into a fixture project and asserts what the page's comments say.
//!
//! `scripts/test` installs what these need: basedpyright into
//! target/peers/basedpyright and the `mcp` package into target/peers/mcp
//! (PyPI), and Debian's python3-pytest (the `python3 -m pytest` and
//! `pytest` the pages' runner and tool call).

mod common;

use common::guide::named_block;
use common::mcp::{self, tools, Server};
use common::test_runs::{git, need_file, peers, put};
use common::*;
use serde_json::{json, Value};

/// The project docs/lsp.md's tour runs in: `app/main.py` uses, on its line
/// 12 at character 9, the `greet` that `lib/util.py` defines on its line 3.
const UTIL_PY: &str = "\"\"\"Small helpers of the app.\"\"\"\n\ndef greet(name: str) -> str:\n    return \"hi \" + name\n\n\ndef parse_name(args: list[str]) -> str:\n    return args[0] if args else \"world\"\n";
const MAIN_PY: &str = "\"\"\"Greets the person the command line names.\"\"\"\n\nimport sys\n\nfrom lib.util import greet, parse_name\n\n\ndef main(args: list[str]) -> None:\n    print(greet(parse_name(args)))\n\n\nhello = greet(\"bob\")\n\nif __name__ == \"__main__\":\n    main(sys.argv[1:])\n";

/// A folder, beside the workspace, holding `basedpyright-langserver` as an
/// installed console script (it finds the package where `scripts/test`
/// put it), and a policy letting commands read it and the package: this
/// machine's stand-in for a server on PATH in a tree `p.programs` opens.
/// The folder to put first on PATH, and the policy's path.
fn installed_basedpyright(ws: &Workspace) -> (String, String) {
    let pkg = peers().join("basedpyright");
    let script = pkg.join("bin/basedpyright-langserver");
    need_file(
        &script,
        "python3 -m pip install --target target/peers/basedpyright basedpyright==1.40.2",
    );
    let shebang = std::fs::read_to_string(&script).unwrap();
    let shebang = shebang.lines().next().unwrap();
    let bin = ws.path().parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let launcher = bin.join("basedpyright-langserver");
    std::fs::write(
        &launcher,
        format!(
            "{shebang}\nimport sys\nsys.path.insert(0, {:?})\nfrom basedpyright.langserver import main\nsys.exit(main())\n",
            pkg.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &launcher,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let interpreter = std::fs::canonicalize(shebang.trim_start_matches("#!")).unwrap();
    let prefix = interpreter.parent().unwrap().parent().unwrap();
    let reads: Vec<String> = [bin.as_path(), pkg.as_path(), prefix]
        .iter()
        .flat_map(|d| {
            let d = d.display();
            [
                format!("p.allow \"fs:read:{d}\""),
                format!("p.allow \"fs:read:{d}/**\""),
            ]
        })
        .collect();
    let pol = policy(
        ws,
        "machine.lua",
        &format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ {} }} }}\n",
            reads.join(", ")
        ),
    );
    (bin.display().to_string(), pol)
}

#[test]
fn the_lsp_tour_finds_the_definition_and_diagnoses_the_edit_as_the_page_says() {
    let ws = workspace();
    put(&ws, "lib/util.py", UTIL_PY);
    put(&ws, "app/main.py", MAIN_PY);
    let (bin, machine) = installed_basedpyright(&ws);
    let servers = policy(
        &ws,
        "python-lsp.lua",
        &named_block("lsp.md", "python-lsp.lua"),
    );
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap());
    let run = run_lua_env(
        ws.path(),
        &named_block("lsp.md", "lsp-tour.lua"),
        &["--policy", &servers, "--policy", &machine],
        &[],
        &[("PATH", &path)],
    )
    .ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "lib/util.py\t3",
            "python",
            "parse_name\tlib/util.py",
            "errors"
        ],
        "{}",
        run.stdout
    );
    let error = lines[4..].join("\n");
    assert!(
        error.starts_with(
            "app/main.py\t12\t15\tArgument of type \"Literal[3]\" cannot be assigned to parameter \"name\""
        ),
        "{}",
        run.stdout
    );
    assert!(
        error.ends_with("\tbasedpyright\treportArgumentType"),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(ws.file("app/main.py")).unwrap(),
        MAIN_PY.replace("greet(\"bob\")", "greet(3)")
    );
}

/// docs/tests.md's project: `py/src/auth.py`'s `login`, which
/// `py/tests/test_api.py` tests (`test_login` asserts on its line 5).
const AUTH_PY: &str = "\"\"\"Who may log in.\"\"\"\n\nUSERS = {\"ada\": \"s3cret\"}\n\n\ndef login(user: str, password: str) -> bool:\n    return USERS.get(user) == password\n";
const TEST_API_PY: &str = "from auth import login\n\n\ndef test_login():\n    assert login(\"ada\", \"s3cret\")\n\n\ndef test_wrong_password():\n    assert not login(\"ada\", \"guess\")\n";

/// PATH with the system's Python first: `python3 -m pytest`, as the page's
/// runner says it, finds Debian's python3-pytest there.
fn path_to_system_pytest() -> String {
    let has = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has,
        "this test needs pytest for /usr/bin/python3: apt-get install python3-pytest (scripts/test installs it)"
    );
    format!("/usr/bin:{}", std::env::var("PATH").unwrap())
}

/// A git repository on `main` holding docs/tests.md's project, committed,
/// with `auth` (the workspace's `py/src/auth.py`) changed since.
fn repository_with_a_change(ws: &Workspace, auth: &str) {
    put(ws, "py/src/auth.py", AUTH_PY);
    put(ws, "py/tests/test_api.py", TEST_API_PY);
    git(ws.path(), &["init", "-q", "-b", "main"]);
    git(ws.path(), &["add", "."]);
    git(ws.path(), &["commit", "-q", "-m", "login"]);
    put(ws, "py/src/auth.py", auth);
}

/// docs/tests.md's workflow under the default policy and the page's
/// runner policy: what it printed.
fn run_test_calls(ws: &Workspace) -> Run {
    let runner = policy(
        ws,
        "test-runner.lua",
        &named_block("tests.md", "test-runner.lua"),
    );
    run_lua_env(
        ws.path(),
        &named_block("tests.md", "test-calls.lua"),
        &["--policy", "default", "--policy", &runner],
        &[],
        &[("PATH", &path_to_system_pytest())],
    )
    .ok()
}

#[test]
fn the_test_pages_runner_names_the_failure_and_the_base_comparison_says_it_is_introduced() {
    let ws = workspace();
    // The bug: the arguments swapped.
    repository_with_a_change(
        &ws,
        &AUTH_PY.replace("USERS.get(user) == password", "USERS.get(password) == user"),
    );
    let run = run_test_calls(&ws);
    assert_eq!(
        run.stdout,
        "1\t0\t1\t0\ttrue\tpytest\n\
         tests/test_api.py::test_login\ttests/test_api.py\t5\tAssertionError: assert False\n\
         2\t1\n\
         introduced\ttests/test_api.py::test_login\n",
        "{}",
        run.stderr
    );
}

#[test]
fn the_test_pages_judge_says_a_refused_database_is_the_environments_fault() {
    let ws = workspace();
    // A stand-in for a database that is not running.
    repository_with_a_change(
        &ws,
        "def login(user: str, password: str) -> bool:\n    raise ConnectionRefusedError(\"[Errno 111] the user database at 127.0.0.1:5432 refused\")\n",
    );
    let run = run_test_calls(&ws);
    assert_eq!(
        run.stdout,
        "1\t0\t1\t0\ttrue\tpytest\n\
         tests/test_api.py::test_login\tsrc/auth.py\t2\tConnectionRefusedError: [Errno 111] the user database at 127.0.0.1:5432 refused\n\
         unknown-environment\tConnectionRefusedError\tthe test database is not running: start it, then run the tests again\n\
         2\t0\n",
        "{}",
        run.stderr
    );
}

/// A suite of one passing and one failing test, for docs/mcp.md's tool.
const TEST_SESSION_PY: &str = "def greeting(name):\n    return \"hi \" + name\n\n\ndef test_login():\n    assert greeting(\"ada\") == \"hello ada\"\n\n\ndef test_logout():\n    assert greeting(\"ada\").startswith(\"hi\")\n";

/// docs/mcp.md's `run_tests` tool, served by `sluice mcp --tools` from a
/// folder of its own, called by the official client with `filter`: the
/// result's structured content.
fn call_run_tests(ws: &Workspace, filter: &str) -> Value {
    let dir = tools(&[("run_tests.lua", &named_block("mcp.md", "run_tests.lua"))]);
    let extra = ["--tools", dir.path().to_str().unwrap()];
    let spec = json!({"tool": "run_tests", "input": {"filter": filter}}).to_string();
    let seen = mcp::driver(
        "drive.py",
        "call",
        "2026",
        Server::Stdio(ws.path(), &extra),
        &["--arg", &spec],
    );
    let result = &seen["results"][0];
    assert_eq!(result["isError"], false, "{seen}");
    result["structured"].clone()
}

/// The summary line that ends `tail` (its last line, as the page shows
/// it), without its time.
fn summary(tail: &Value) -> String {
    let tail = tail.as_str().unwrap();
    let last = tail
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("{tail:?}"));
    let last = last.lines().last().unwrap();
    let (counts, time) = last
        .rsplit_once(" in ")
        .unwrap_or_else(|| panic!("{tail:?}"));
    assert!(time.ends_with('s'), "{tail:?}");
    counts.to_string()
}

#[test]
fn the_mcp_pages_run_tests_tool_says_whether_the_filtered_tests_passed_with_pytests_summary() {
    need_program("pytest", "apt-get install python3-pytest");
    let ws = workspace();
    put(&ws, "tests/test_session.py", TEST_SESSION_PY);
    let failing = call_run_tests(&ws, "login");
    assert_eq!(failing["passed"], false, "{failing}");
    assert_eq!(
        summary(&failing["tail"]),
        "1 failed, 1 deselected",
        "{failing}"
    );
    assert!(
        failing["tail"]
            .as_str()
            .unwrap()
            .contains("FAILED tests/test_session.py::test_login"),
        "{failing}"
    );
    let passing = call_run_tests(&ws, "logout");
    assert_eq!(passing["passed"], true, "{passing}");
    assert_eq!(
        summary(&passing["tail"]),
        "1 passed, 1 deselected",
        "{passing}"
    );
}
