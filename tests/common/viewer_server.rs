//! A `sluice audit serve` of the test's own (or the bench's) on a loopback
//! port the system picks, stopped by its pid when dropped, and raw HTTP/1.1
//! requests to it with any `Host`, `Origin` or method, so the viewer's
//! checks can be attacked as a browser under a rebinding page would.
//!
//! Use it with `#[path = "common/viewer_server.rs"] mod viewer_server;`
//! (from a bench, `#[path = "../tests/common/viewer_server.rs"]`); it
//! needs nothing else of `tests/common`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The Content-Security-Policy every response carries (VIEWER.md).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long the server may take to say where it listens (a debug build on
/// a busy machine opening a PostgreSQL record).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `sluice audit serve`.
pub struct Viewer {
    child: Child,
    /// The URL it printed, e.g. `http://127.0.0.1:PORT/`.
    pub url: String,
    /// The lines it printed on stderr after the first, gathered as they come.
    rest: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Viewer {
    /// `BIN audit serve ARGS` with `env` set; once it printed its URL. Panics
    /// with what it printed when it exits or says nothing for a minute.
    pub fn start(bin: &Path, args: &[&str], env: &[(&str, String)]) -> Viewer {
        let mut cmd = Command::new(bin);
        cmd.args(["audit", "serve"])
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("SLUICE_VIEWER_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn sluice audit serve");
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let rest = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let gathered = std::sync::Arc::clone(&rest);
        // The first line goes to the channel; the rest is kept for
        // failures' messages, and the pipe never fills.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(err).lines();
            let first = lines.next().and_then(Result::ok);
            let _ = tx.send(first);
            for line in lines.map_while(Result::ok) {
                let mut all = gathered.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let first = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(line)) => line,
            Ok(None) => {
                let status = child.wait().unwrap();
                panic!("sluice audit serve exited ({status}) without a word");
            }
            Err(_) => {
                let _ = child.kill();
                panic!("sluice audit serve said nothing within {START_TIMEOUT:?}");
            }
        };
        let url = regex::Regex::new(r"https?://\S+")
            .unwrap()
            .find(&first)
            .unwrap_or_else(|| panic!("no URL in sluice audit serve's line: {first:?}"))
            .as_str()
            .to_string();
        Viewer { child, url, rest }
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `HOST:PORT` of the printed URL.
    pub fn addr(&self) -> String {
        let after = self.url.split("://").nth(1).unwrap();
        after.split('/').next().unwrap().to_string()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr().rsplit(':').next().unwrap().parse().unwrap()
    }

    /// `http://127.0.0.1:PORT`: the server's own origin on loopback.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// The run page of `run`.
    pub fn run_url(&self, run: &str) -> String {
        format!("{}/#/run/{run}", self.origin())
    }

    /// The call panel of call `n` of `run`.
    pub fn call_url(&self, run: &str, n: u64) -> String {
        format!("{}/#/run/{run}/call/{n}", self.origin())
    }

    /// `GET path` with the server's own Host and `headers`.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        request(
            &format!("127.0.0.1:{}", self.port()),
            "GET",
            path,
            &format!("127.0.0.1:{}", self.port()),
            headers,
        )
    }

    /// `GET path` as JSON; panics unless it is 200 and JSON.
    pub fn json(&self, path: &str) -> serde_json::Value {
        let r = self.get(path, &[]);
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", r.text()))
    }

    /// What it printed on stderr after its first line, so far.
    pub fn stderr(&self) -> String {
        self.rest.lock().unwrap().clone()
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Its status code.
    pub status: u16,
    /// Its headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// Its body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw HTTP/1.1 request to `addr`: `method path`, `Host: host`, then
/// `headers`, no body, the connection closed after.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if method != "GET" && method != "HEAD" {
        req.push_str("Content-Length: 0\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw).unwrap_or_else(|| {
        panic!(
            "{method} {path} (Host {host}): not an HTTP response: {:?}",
            String::from_utf8_lossy(&raw)
        )
    })
}

/// Status, headers and body of a whole response.
fn parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Some(Response {
        status,
        headers,
        body,
    })
}

/// A chunked body's bytes.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&rest[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}
