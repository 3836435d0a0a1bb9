//! What the `sluice mcp` tests share: the Python drivers (the official MCP
//! client, from target/peers/mcp), a `sluice mcp --http` server, raw HTTP
//! requests to it, and the record a server left.

use super::{exit_within, sluice_bin, sluice_in};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[path = "../../benches/support/peers.rs"]
mod peers;

/// Where a driver's client finds the server.
pub enum Server<'a> {
    /// `sluice mcp --workspace WS EXTRA...`, spawned by the client.
    Stdio(&'a Path, &'a [&'a str]),
    /// A running `sluice mcp --http`.
    Http(&'a Http),
}

/// One scenario of the Python driver `tests/mcp/SCRIPT`, with `args`, as
/// the JSON it printed last; the driver's failure fails the test, and a
/// missing `mcp` package fails it saying how to install it.
pub fn driver(script: &str, scenario: &str, form: &str, server: Server, args: &[&str]) -> Value {
    if let Some(how) = peers::mcp_python_missing() {
        panic!("{how}");
    }
    let mut cmd = Command::new("python3");
    cmd.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/mcp")
            .join(script),
    )
    .env("PYTHONPATH", peers::mcp_python())
    // The driver hands SLUICE_* on to a server it starts: the test's store.
    .envs(super::stores::current_env())
    .stdin(Stdio::null())
    .args([scenario, "--form", form])
    .args(args);
    match server {
        Server::Stdio(ws, extra) => {
            cmd.arg("--stdio")
                .arg(sluice_bin())
                .arg("--workspace")
                .arg(ws);
            cmd.arg("--").args(extra);
        }
        Server::Http(h) => {
            cmd.args(["--url", &h.url]);
            if let Some(t) = &h.token {
                cmd.args(["--token", t]);
            }
        }
    }
    let out = cmd.output().expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} {scenario} --form {form} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}"))
}

/// A folder of Lua tools, apart from the workspace.
pub fn tools(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// The calls of the workspace's newest run, as `sluice audit show --json`
/// gives them.
pub fn recorded_calls(ws: &Path) -> Vec<Value> {
    let shown = sluice_in(ws, &["audit", "show", "last", "--json"]).ok();
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    v["calls"].as_array().cloned().unwrap_or_default()
}

/// A `sluice mcp --http` server, stopped (SIGTERM) when dropped.
pub struct Http {
    child: Child,
    pub url: String,
    /// The token clients send: the one given, or the one the server
    /// generated and said.
    pub token: Option<String>,
    /// The file a generated token is kept in.
    pub token_file: Option<std::path::PathBuf>,
    /// Whether raw requests carry the token without being told: for a
    /// server whose token the test did not choose.
    auto_auth: bool,
}

/// An `initialize` request, the first thing any 2025 client sends.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

impl Http {
    /// `sluice mcp --workspace WS --http 127.0.0.1:0 FLAGS`, its token in
    /// `SLUICE_MCP_TOKEN` (or, with none, the one it generates), once it
    /// says where it listens.
    pub fn start(ws: &Path, flags: &[&str], token: Option<&str>) -> Http {
        Http::start_env(ws, flags, token, &[])
    }

    /// [`Http::start`] with `env` set for the server.
    pub fn start_env(ws: &Path, flags: &[&str], token: Option<&str>, env: &[(&str, &str)]) -> Http {
        let mut cmd = Command::new(sluice_bin());
        cmd.envs(env.iter().copied());
        cmd.envs(super::stores::current_env());
        cmd.args(["mcp", "--workspace"])
            .arg(ws)
            .args(["--http", "127.0.0.1:0"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match token {
            Some(t) => cmd.env("SLUICE_MCP_TOKEN", t),
            None => cmd.env_remove("SLUICE_MCP_TOKEN"),
        };
        let mut child = cmd.spawn().expect("spawn sluice mcp --http");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("sluice mcp --http said: {line}"))
            .to_string();
        // Without a token given, the next line says the generated one.
        let (generated, token_file) = match token {
            Some(_) => (None, None),
            None => {
                let mut said = String::new();
                err.read_line(&mut said).unwrap();
                let words: Vec<&str> = said.split_whitespace().collect();
                let at = |w: &str| words.iter().position(|x| *x == w).map(|i| words[i + 1]);
                let token = at("token").unwrap_or_else(|| panic!("no token in: {said}"));
                let file = at("in").unwrap_or_else(|| panic!("no file in: {said}"));
                (
                    Some(token.to_string()),
                    Some(std::path::PathBuf::from(file)),
                )
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
        });
        Http {
            child,
            url,
            auto_auth: token.is_none(),
            token: token.map(str::to_string).or(generated),
            token_file,
        }
    }

    /// `HOST:PORT`.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    pub fn port(&self) -> String {
        self.addr().rsplit(':').next().unwrap().to_string()
    }

    /// `POST /mcp` of an `initialize`, with the right Host and `headers`:
    /// the status and the whole reply.
    pub fn post(&self, headers: &[(&str, &str)]) -> (u16, String) {
        self.raw("POST", "/mcp", &self.addr(), headers)
    }

    /// A raw request: `method` of `path`, naming `host` in its Host
    /// header, with `headers` and (for a POST) an `initialize` body.
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        host: &str,
        headers: &[(&str, &str)],
    ) -> (u16, String) {
        let body = if method == "POST" { INITIALIZE } else { "" };
        let mut stream = std::net::TcpStream::connect(self.addr()).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let (true, Some(t)) = (self.auto_auth, &self.token) {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
            // An SSE reply stays open: the first event is enough.
            if String::from_utf8_lossy(&reply).contains("\"result\"") {
                break;
            }
        }
        let text = String::from_utf8_lossy(&reply).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, text)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = exit_within(&mut self.child, Duration::from_secs(10));
    }
}
