//! A real OpenTelemetry receiver for the tests: Arize Phoenix (PyPI
//! `arize-phoenix`, in the venv `scripts/test` makes at
//! `target/peers/phoenix`), started on 127.0.0.1 at free ports with a temp
//! working folder, queried through its REST API for the spans that
//! arrived, and stopped by its pid.
//!
//! One server serves every test of a process ([`Phoenix::shared`]); each
//! test sends to a project of its own (Phoenix files spans under the
//! `x-project-name` header's project), so what one test finds is only
//! what it sent. A guardian process stops the server and removes its
//! folder when the test process ends, however it ends.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The version `scripts/test` installs.
pub const VERSION: &str = "20.26.1";

/// How long Phoenix may take to start (it migrates its database first).
const START_LIMIT: Duration = Duration::from_secs(180);

/// A running Phoenix.
pub struct Phoenix {
    /// Its HTTP port on 127.0.0.1 (UI, REST API and OTLP/HTTP).
    pub port: u16,
    _child: Child,
    _guardian: Child,
}

/// Where `scripts/test` installs Phoenix.
fn binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/phoenix/bin/phoenix")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Phoenix {
    /// The process's one server, started on first use.
    pub fn shared() -> &'static Phoenix {
        static SHARED: OnceLock<Phoenix> = OnceLock::new();
        SHARED.get_or_init(Phoenix::start)
    }

    fn start() -> Phoenix {
        let bin = binary();
        assert!(
            bin.is_file(),
            "Arize Phoenix is not installed at {}: scripts/test installs it (python3 -m venv \
             target/peers/phoenix && target/peers/phoenix/bin/pip install arize-phoenix=={VERSION})",
            bin.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("sluice-phoenix-")
            .tempdir()
            .unwrap()
            .keep();
        let (port, grpc) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("phoenix.log")).unwrap();
        use std::os::unix::process::CommandExt;
        let child = Command::new(&bin)
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_WORKING_DIR", &dir)
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start Phoenix");
        let pid = child.id();
        let guardian = guard(pid, &dir);
        let mut phoenix = Phoenix {
            port,
            _child: child,
            _guardian: guardian,
        };
        phoenix.wait_up(&dir);
        phoenix
    }

    /// Waits for `/healthz`; a server that exits or never answers fails
    /// the test with its log's end.
    fn wait_up(&mut self, dir: &Path) {
        let started = Instant::now();
        while started.elapsed() < START_LIMIT {
            if matches!(self.get("/healthz"), Ok((200, _))) {
                return;
            }
            if let Ok(Some(status)) = self._child.try_wait() {
                panic!(
                    "Phoenix exited ({status}) before it answered:\n{}",
                    tail(dir)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "Phoenix did not answer on port {} within {START_LIMIT:?}:\n{}",
            self.port,
            tail(dir)
        );
    }

    /// Its OTLP/HTTP base URL (sluice adds `/v1/traces`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET path`: the status and the body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Ok((
            status,
            if chunked {
                dechunk(body)
            } else {
                body.to_string()
            },
        ))
    }

    /// `GET path` as JSON, which must answer 200.
    pub fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).expect("reach Phoenix");
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// Every span of project `project`, as Phoenix's OTLP JSON gives them.
    pub fn spans(&self, project: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = self.json(&format!(
                "/v1/projects/{project}/spans/otlpv1?limit=1000{cursor}"
            ));
            if let Some(spans) = page["data"].as_array() {
                all.extend(spans.iter().cloned());
            }
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => return all,
            }
        }
    }

    /// The spans of project `project` once there are `n` of them (Phoenix
    /// stores what it receives a moment later), waiting up to `limit`; fewer
    /// then fails naming how many came.
    pub fn wait_for(&self, project: &str, n: usize, limit: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let (status, _) = self.get(&format!("/v1/projects/{project}")).unwrap();
            let spans = if status == 200 {
                self.spans(project)
            } else {
                Vec::new()
            };
            if spans.len() >= n || started.elapsed() > limit {
                assert_eq!(spans.len(), n, "spans of project {project} after {limit:?}");
                return spans;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The trace ids of project `project`.
    pub fn traces(&self, project: &str) -> Vec<String> {
        let page = self.json(&format!("/v1/projects/{project}/traces?limit=100"));
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["trace_id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// A chunked body's content.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// The end of the server's log.
fn tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("phoenix.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// A process that, once the test process is gone, stops Phoenix by its
/// pid (TERM, then KILL) and removes its folder.
fn guard(pid: u32, dir: &Path) -> Child {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done
kill -TERM "$2" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$2" 2>/dev/null || break; sleep 0.5; done
kill -KILL "$2" 2>/dev/null
rm -rf "$3""#;
    use std::os::unix::process::CommandExt;
    Command::new("bash")
        .args(["-c", script, "phoenix-guardian"])
        .arg(std::process::id().to_string())
        .arg(pid.to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start Phoenix's guardian")
}
