//! Issue 41: docs/mcp.md's configurations for Claude Code, Codex and
//! opencode, applied exactly as the page shows them (its `file=` blocks,
//! read at run time) to the real clients, in a HOME and a project of their
//! own, with the debug `sluice` on PATH; then each client's own command
//! says whether it reached sluice. Over HTTP, a wrong token in the variable
//! the page names must make the client report a refusal, so a connection is
//! known to carry the page's token. Over stdio, the workspace's record must
//! hold the sessions the client started. The clients need no model
//! credentials for any of this.

mod common;
// common::mcp loads it too, privately: Codex's path and install advice are
// wanted here as well.
#[allow(clippy::duplicate_mod)]
#[path = "../benches/support/peers.rs"]
mod peers;

use common::guide::named_block;
use common::mcp::Http;
use common::{sluice_bin, workspace, Workspace};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The versions `scripts/test` installs into target/peers/mcp-clients.
const CLAUDE_CODE_VERSION: &str = "2.1.332";
const OPENCODE_VERSION: &str = "1.18.33";

/// The address the page's HTTP blocks name; the tests put their server's in.
const PAGE_URL: &str = "http://127.0.0.1:8765/mcp";
/// The workspace the page's Codex and opencode blocks name.
const PAGE_WS: &str = "/path/to/app";
const TOKEN: &str = "4f1c0d5e9a7b3c2d8e6f0a1b2c3d4e5f";

/// The tools `sluice mcp` serves under the default policy, sorted.
const TOOLS: [&str; 18] = [
    "apply_patch",
    "bash",
    "edit",
    "fetch",
    "glob",
    "grep",
    "http-post",
    "job_kill",
    "job_read",
    "job_wait",
    "ls",
    "model",
    "read",
    "shell_command",
    "update_plan",
    "webfetch",
    "websearch",
    "write",
];

/// An npm-installed client under target/peers/mcp-clients, failing the
/// test with the command that installs it when it is missing or another
/// version.
fn npm_client(bin: &str, package: &str, version: &str, says: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/peers/mcp-clients/node_modules/.bin")
        .join(bin);
    let how = format!(
        "run scripts/test, or: npm install --prefix target/peers/mcp-clients --no-audit --no-fund \
         --save-exact {package}@{version}"
    );
    assert!(
        path.exists(),
        "{package} is not installed ({} is missing): {how}",
        path.display()
    );
    let out = Command::new(&path).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        says,
        "{package}: {how}"
    );
    path
}

fn claude() -> PathBuf {
    npm_client(
        "claude",
        "@anthropic-ai/claude-code",
        CLAUDE_CODE_VERSION,
        &format!("{CLAUDE_CODE_VERSION} (Claude Code)"),
    )
}

fn opencode() -> PathBuf {
    npm_client(
        "opencode",
        "opencode-ai",
        OPENCODE_VERSION,
        OPENCODE_VERSION,
    )
}

fn codex() -> PathBuf {
    if let Some(how) = peers::codex_missing() {
        panic!("{how}");
    }
    peers::codex_binary()
}

/// A client's world: an empty HOME, a project folder (the current folder
/// the client runs in) and a bin folder whose `sluice` is the debug build.
struct Scene {
    _root: tempfile::TempDir,
    home: PathBuf,
    proj: PathBuf,
    bin: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let (home, proj, bin) = (base.join("home"), base.join("proj"), base.join("bin"));
        for dir in [&home, &proj, &bin] {
            std::fs::create_dir(dir).unwrap();
        }
        std::os::unix::fs::symlink(sluice_bin(), bin.join("sluice")).unwrap();
        Scene {
            _root: root,
            home,
            proj,
            bin,
        }
    }

    /// `program ARGS` in the project, with only this scene's HOME and PATH
    /// (the client's folder after sluice's), and `token` (when given) in
    /// SLUICE_MCP_TOKEN: nothing of the machine's own configuration.
    fn command(&self, program: &Path, args: &[&str], token: Option<&str>) -> Command {
        let client_dir = program.parent().unwrap();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.proj)
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:{}:/usr/bin:/bin",
                    self.bin.display(),
                    client_dir.display()
                ),
            )
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("NO_COLOR", "1")
            // The clients' reports home and update checks: nothing to reach here.
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .stdin(Stdio::null());
        if let Some(t) = token {
            cmd.env("SLUICE_MCP_TOKEN", t);
        }
        cmd
    }

    /// The page's shell block run by bash in the project, as a person
    /// pastes it; its standard output.
    fn sh(&self, client: &Path, block: &str) -> String {
        let bash = Path::new("/bin/bash");
        let mut cmd = self.command(bash, &["-euc", block], None);
        let path = format!(
            "{}:{}:/usr/bin:/bin",
            self.bin.display(),
            client.parent().unwrap().display()
        );
        run(cmd.env("PATH", path), &format!("the block {block:?}"))
    }

    /// The sluice runs recorded in `ws`, newest first, once each has ended.
    fn recorded_runs(&self, ws: &Path) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(sluice_bin())
                .args(["audit", "list", "--json", "--workspace"])
                .arg(ws)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
            let runs = listed["runs"].as_array().unwrap().clone();
            if runs.iter().all(|r| r["status"] != "running") || Instant::now() > deadline {
                return runs;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Asserts the record of `self.proj` holds `n` ended `sluice mcp` runs
    /// of this workspace: the sessions the client started over stdio.
    fn assert_sessions(&self, n: usize) {
        let runs = self.recorded_runs(&self.proj);
        let seen: Vec<(&Value, &Value)> =
            runs.iter().map(|r| (&r["script"], &r["status"])).collect();
        assert_eq!(
            seen,
            vec![(&json!("sluice mcp"), &json!("ok")); n],
            "{runs:#?}"
        );
        let out = Command::new(sluice_bin())
            .args(["audit", "show", "last", "--json", "--workspace"])
            .arg(&self.proj)
            .output()
            .unwrap();
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            shown["run"]["workspace"],
            json!(self.proj.to_str().unwrap())
        );
    }
}

/// Runs `cmd` to its end (failing the test past 120 s, or on a non-zero
/// exit): its standard output.
fn run(cmd: &mut Command, what: &str) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let status = wait_within(&mut child, Duration::from_secs(120), what);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "{what} failed ({status})\nstdout:\n{out}\nstderr:\n{err}"
    );
    out
}

fn drain(stream: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.unwrap().read_to_string(&mut text);
        text
    })
}

/// The child's exit; past `limit` it is killed (by its pid) and the test
/// fails.
fn wait_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The page's block `name` with `from` (which it must show) put as `to`.
fn page_block(name: &str, from: &str, to: &str) -> String {
    let block = named_block("mcp.md", name);
    assert!(
        block.contains(from),
        "docs/mcp.md's {name} no longer shows {from}:\n{block}"
    );
    block.replace(from, to)
}

/// A server for the HTTP forms, with the test's token, on a free port.
fn http_server(ws: &Workspace) -> Http {
    Http::start(ws.path(), &[], Some(TOKEN))
}

/// Text without the terminal's colour codes (opencode colours even when
/// told not to).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------- Claude Code

/// `claude mcp add sluice -- sluice mcp --workspace "$PWD"`, pasted in the
/// project, is a local server that `claude mcp list` and `get` start and
/// find connected (each health check is a `sluice mcp` session of the
/// project, recorded there).
#[test]
fn claude_code_runs_the_pages_stdio_command_and_connects() {
    let claude = claude();
    let s = Scene::new();
    let proj = s.proj.display().to_string();
    let added = s.sh(&claude, &named_block("mcp.md", "claude-code.sh"));
    assert_eq!(
        added,
        format!(
            "Added stdio MCP server sluice with command: sluice mcp --workspace {proj} to local config\n\
             File modified: {}/.claude.json [project: {proj}]\n",
            s.home.display()
        )
    );
    let listed = run(
        &mut s.command(&claude, &["mcp", "list"], None),
        "claude mcp list",
    );
    assert_eq!(
        listed,
        format!(
            "Checking MCP server health…\n\nsluice: sluice mcp --workspace {proj} - ✔ Connected\n"
        )
    );
    let got = run(
        &mut s.command(&claude, &["mcp", "get", "sluice"], None),
        "claude mcp get",
    );
    assert_eq!(
        got,
        format!(
            "sluice:\n  Scope: Local config (private to you in this project)\n  Status: ✔ Connected\n  \
             Type: stdio\n  Command: sluice\n  Args: mcp --workspace {proj}\n  Environment:\n\n\
             To remove this server, run: claude mcp remove sluice -s local\n"
        )
    );
    s.assert_sessions(2);
}

/// The page's HTTP command (single-quoted `${SLUICE_MCP_TOKEN}`) keeps the
/// variable, which Claude Code puts in at each connection: with the
/// server's token in it the server is connected, with another it is
/// refused with the server's 401.
#[test]
fn claude_code_runs_the_pages_http_command_and_sends_the_token_from_the_variable() {
    let claude = claude();
    let ws = workspace();
    let server = http_server(&ws);
    let s = Scene::new();
    s.sh(
        &claude,
        &page_block("claude-code-http.sh", PAGE_URL, &server.url),
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(s.home.join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        config["projects"][s.proj.to_str().unwrap()]["mcpServers"]["sluice"],
        json!({"type": "http", "url": server.url,
               "headers": {"Authorization": "Bearer ${SLUICE_MCP_TOKEN}"}})
    );
    let list = |token| {
        run(
            &mut s.command(&claude, &["mcp", "list"], Some(token)),
            "claude mcp list",
        )
    };
    assert_eq!(
        list(TOKEN),
        format!(
            "Checking MCP server health…\n\nsluice: {} (HTTP) - ✔ Connected\n",
            server.url
        )
    );
    assert_eq!(
        list("not-the-token"),
        format!(
            "Checking MCP server health…\n\nsluice: {} (HTTP) - ✘ Failed to connect — Server rejected the \
             configured Authorization header (HTTP 401). Check that the token is valid for this MCP endpoint \
             — OAuth fallback is disabled when headers.Authorization is set. Error detail: this sluice mcp \
             server needs `Authorization: Bearer TOKEN`: the --token (or SLUICE_MCP_TOKEN) it was started \
             with, or the one it generated, shown on its standard error and kept in the file it named there\n",
            server.url
        )
    );
}

// ---------------------------------------------------------------------- Codex

/// `codex app-server`, the client of Codex's own IDE front ends, in the
/// scene: asked for its MCP servers' status (`mcpServerStatus/list`), it
/// connects to each and lists its tools (`codex mcp list` only shows the
/// configuration).
struct CodexAppServer {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    err: std::thread::JoinHandle<String>,
}

impl CodexAppServer {
    fn start(s: &Scene, token: Option<&str>) -> CodexAppServer {
        let mut child = s
            .command(&codex(), &["app-server"], token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut app = CodexAppServer {
            err: drain(child.stderr.take()),
            stdin: child.stdin.take().unwrap(),
            lines: BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
        };
        app.send(json!({"id": 1, "method": "initialize",
                        "params": {"clientInfo": {"name": "sluice-test", "title": null, "version": "0"},
                                   "capabilities": null}}));
        app.reply(1);
        app.send(json!({"method": "initialized"}));
        app
    }

    fn send(&mut self, msg: Value) {
        writeln!(self.stdin, "{msg}").unwrap();
    }

    /// The reply to request `id`, past the notifications before it.
    fn reply(&mut self, id: u64) -> Value {
        loop {
            let line = self
                .lines
                .next()
                .expect("codex app-server ended without replying")
                .unwrap();
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    }

    /// The one configured server's status, connected and listed now.
    fn status(&mut self, id: u64) -> Value {
        self.send(json!({"id": id, "method": "mcpServerStatus/list",
                         "params": {"detail": "toolsAndAuthOnly"}}));
        let status = self.reply(id);
        let data = status["result"]["data"].as_array().cloned();
        let data = data.unwrap_or_else(|| panic!("codex app-server: {status}"));
        assert_eq!(data.len(), 1, "{data:#?}");
        data[0].clone()
    }

    /// Ends it as its front ends do, closing its input.
    fn stop(mut self) {
        drop(self.stdin);
        let status = wait_within(&mut self.child, Duration::from_secs(30), "codex app-server");
        let err = self.err.join().unwrap();
        assert!(status.success(), "codex app-server: {status}\n{err}");
    }
}

/// The sorted names of the tools an `mcpServerStatus` entry lists.
fn tool_names(status: &Value) -> Vec<String> {
    let mut names: Vec<String> = status["tools"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

/// Writes the page's Codex block to ~/.codex/config.toml and checks that
/// `codex mcp get sluice --json` read it as `transport`.
fn codex_config(s: &Scene, block: &str, transport: Value) {
    std::fs::create_dir(s.home.join(".codex")).unwrap();
    std::fs::write(s.home.join(".codex/config.toml"), block).unwrap();
    let got = run(
        &mut s.command(&codex(), &["mcp", "get", "sluice", "--json"], None),
        "codex mcp get",
    );
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["transport"], transport);
    assert_eq!(got["enabled"], json!(true));
}

/// The page's config.toml block, in ~/.codex: Codex starts `sluice mcp`
/// on the project, is served (`serverInfo` sluice) and lists every tool;
/// the session is recorded in the project.
#[test]
fn codex_reads_the_pages_config_toml_starts_sluice_and_lists_its_tools() {
    let s = Scene::new();
    let proj = s.proj.to_str().unwrap();
    let block = page_block("codex.toml", PAGE_WS, proj);
    codex_config(
        &s,
        &block,
        json!({"type": "stdio", "command": "sluice", "args": ["mcp", "--workspace", proj],
               "env": null, "env_vars": [], "cwd": null}),
    );
    let mut app = CodexAppServer::start(&s, None);
    let status = app.status(2);
    assert_eq!(status["name"], json!("sluice"));
    assert_eq!(status["serverInfo"]["name"], json!("sluice"));
    assert_eq!(status["toolsError"], Value::Null);
    assert_eq!(status["authStatus"], json!("unsupported"));
    assert_eq!(tool_names(&status), TOOLS);
    // Codex ends the session it listed with (closing sluice's input) while
    // it runs on; on its own exit it kills the servers it still has.
    s.assert_sessions(1);
    app.stop();
}

/// The page's HTTP block: Codex sends the token from the variable it
/// names, and lists every tool; with another token in it the server's
/// refusal is Codex's tools error and no tool is listed.
#[test]
fn codex_reads_the_pages_http_block_and_sends_the_token_from_the_variable() {
    let ws = workspace();
    let server = http_server(&ws);
    let s = Scene::new();
    codex_config(
        &s,
        &page_block("codex-http.toml", PAGE_URL, &server.url),
        json!({"type": "streamable_http", "url": server.url,
               "bearer_token_env_var": "SLUICE_MCP_TOKEN", "http_headers": null,
               "env_http_headers": null, "http_headers_helper": null}),
    );
    let mut app = CodexAppServer::start(&s, Some(TOKEN));
    let status = app.status(2);
    assert_eq!(status["serverInfo"]["name"], json!("sluice"));
    assert_eq!(status["toolsError"], Value::Null);
    assert_eq!(status["authStatus"], json!("bearerToken"));
    assert_eq!(tool_names(&status), TOOLS);
    app.stop();
    let mut app = CodexAppServer::start(&s, Some("not-the-token"));
    let refused = app.status(2);
    app.stop();
    let error = refused["toolsError"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("MCP startup failed: handshaking with MCP server failed")
            && error.contains("Auth required, when send initialize request"),
        "{refused:#}"
    );
    assert_eq!(tool_names(&refused), Vec::<String>::new());
}

// ------------------------------------------------------------------- opencode

/// `opencode mcp list` in the project, without its colours.
fn opencode_list(s: &Scene, token: Option<&str>) -> String {
    plain(&run(
        &mut s.command(&opencode(), &["mcp", "list"], token),
        "opencode mcp list",
    ))
}

/// What `opencode mcp list` says of one server.
fn opencode_listed(mark: &str, state: &str, what: &str) -> String {
    format!("┌  MCP Servers\n│\n●  {mark} sluice {state}\n│      {what}\n│\n└  1 server(s)\n\n")
}

/// The page's opencode.json, in the project: opencode starts `sluice mcp`
/// on the project and finds it connected; the session is recorded there.
#[test]
fn opencode_reads_the_pages_opencode_json_and_connects() {
    let s = Scene::new();
    let proj = s.proj.to_str().unwrap();
    let block = page_block("opencode.json", PAGE_WS, proj);
    std::fs::write(s.proj.join("opencode.json"), block).unwrap();
    assert_eq!(
        opencode_list(&s, None),
        opencode_listed("✓", "connected", &format!("sluice mcp --workspace {proj}"))
    );
    s.assert_sessions(1);
}

/// The page's remote form: opencode puts the variable's token in the
/// header; with another token it says the server needs authentication.
#[test]
fn opencode_reads_the_pages_remote_form_and_sends_the_token_from_the_variable() {
    let ws = workspace();
    let server = http_server(&ws);
    let s = Scene::new();
    let block = page_block("opencode-http.json", PAGE_URL, &server.url);
    std::fs::write(s.proj.join("opencode.json"), block).unwrap();
    assert_eq!(
        opencode_list(&s, Some(TOKEN)),
        opencode_listed("✓", "connected", &server.url)
    );
    assert_eq!(
        opencode_list(&s, Some("not-the-token")),
        opencode_listed("⚠", "needs authentication", &server.url)
    );
}
