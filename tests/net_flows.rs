//! The network flows (`fetch`, `http-post`, `webfetch`) driven through the
//! real `sluice` binary against real loopback HTTP servers: destination
//! checks before DNS and transport, every private range and numeric host
//! form, `localhost` names, pinned connections (`--resolve`), redirects
//! followed and re-checked by sluice, credentials dropped across origins,
//! the 5 MiB body limit, the one deadline, the 60,000-byte clip, URL and
//! header validation, and webfetch's content types.

mod common;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

// ---- a small scripted HTTP/1.1 server ----

/// One request as the server received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// Names lower-cased, in arrival order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    /// The one value of header `name`, or `None`.
    fn header(&self, name: &str) -> Option<&str> {
        let all: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(all.len() <= 1, "{name} sent {} times: {all:?}", all.len());
        all.first().copied()
    }
}

/// How a reply's body goes out.
#[derive(Debug, Clone)]
enum Body {
    /// Whole, with a content-length (the reply's, when it sets one).
    Fixed(Vec<u8>),
    /// `transfer-encoding: chunked`, in chunks of the given size.
    Chunked(Vec<u8>, usize),
    /// Chunked, one KiB every 50 ms, never ending.
    Forever,
    /// The head (with the reply's content-length, if any), then nothing.
    Stall,
}

#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    /// Waited before the head is sent.
    delay: Duration,
    /// A content-length to announce instead of the body's real length.
    content_length: Option<u64>,
}

impl Reply {
    fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: vec![],
            body: Body::Fixed(vec![]),
            delay: Duration::ZERO,
            content_length: None,
        }
    }

    /// `status` with a body of content type `ct`.
    fn text(status: u16, ct: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::new(status)
            .header("content-type", ct)
            .body(Body::Fixed(body.into()))
    }

    fn redirect(status: u16, location: &str) -> Reply {
        Reply::text(status, "text/plain", format!("moved to {location}"))
            .header("location", location)
    }

    fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn body(mut self, body: Body) -> Reply {
        self.body = body;
        self
    }

    fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }

    fn content_length(mut self, n: u64) -> Reply {
        self.content_length = Some(n);
        self
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A server on one loopback address, answering every request from its
/// handler and recording each connection and request.
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
}

/// How long a stalled reply holds its connection open: longer than any test.
const STALL: Duration = Duration::from_secs(10);

impl Server {
    /// A server on `ip`, port chosen by the system.
    fn start(ip: &str, handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind((ip, 0)).expect("bind a loopback port");
        Server::serve(listener, Arc::new(handler))
    }

    /// A server on `ip` and exactly `port`, if that port is free there.
    fn start_at(ip: &str, port: u16, handler: Handler) -> Option<Server> {
        let listener = TcpListener::bind((ip, port)).ok()?;
        Some(Server::serve(listener, handler))
    }

    fn serve(listener: TcpListener, handler: Handler) -> Server {
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (s, c) = (seen.clone(), connections.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let (s, h) = (s.clone(), handler.clone());
                thread::spawn(move || {
                    let _ = connection(stream, &s, &h);
                });
            }
        });
        Server {
            addr,
            seen,
            connections,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://IP:PORT`, the origin a `net:private` grant names.
    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn paths(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.path).collect()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Serves requests on one connection until it closes.
fn connection(
    stream: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    handler: &Handler,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end_matches(['\r', '\n']);
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let req = Seen {
            method,
            path,
            headers,
            body,
        };
        seen.lock().unwrap().push(req.clone());
        let reply = handler(&req);
        respond(&mut out, &reply)?;
        if !matches!(reply.body, Body::Fixed(_) | Body::Chunked(..)) {
            return Ok(());
        }
    }
}

fn respond(out: &mut TcpStream, r: &Reply) -> std::io::Result<()> {
    thread::sleep(r.delay);
    let mut head = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match &r.body {
        Body::Fixed(b) => {
            let len = r.content_length.unwrap_or(b.len() as u64);
            head.push_str(&format!("content-length: {len}\r\n\r\n"));
            out.write_all(head.as_bytes())?;
            out.write_all(b)?;
        }
        Body::Chunked(b, size) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            out.write_all(head.as_bytes())?;
            for c in b.chunks(*size) {
                out.write_all(format!("{:x}\r\n", c.len()).as_bytes())?;
                out.write_all(c)?;
                out.write_all(b"\r\n")?;
            }
            out.write_all(b"0\r\n\r\n")?;
        }
        Body::Forever => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            out.write_all(head.as_bytes())?;
            let start = Instant::now();
            while start.elapsed() < STALL {
                out.write_all(b"400\r\n")?;
                out.write_all(&[b'x'; 1024])?;
                out.write_all(b"\r\n")?;
                out.flush()?;
                thread::sleep(Duration::from_millis(50));
            }
        }
        Body::Stall => {
            if let Some(n) = r.content_length {
                head.push_str(&format!("content-length: {n}\r\n"));
            }
            head.push_str("\r\n");
            out.write_all(head.as_bytes())?;
            out.flush()?;
            thread::sleep(STALL);
        }
    }
    out.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    }
}

/// A server on 127.0.0.1 answering 200 `text/plain` "hello from PATH".
fn hello() -> Server {
    Server::start("127.0.0.1", |r| {
        Reply::text(200, "text/plain", format!("hello from {}", r.path))
    })
}

// ---- driving sluice ----

/// Lua prelude: `emit(v)`, and `call(name, input)`, which emits
/// `{ok = output}` or `{err = error}`.
const PRELUDE: &str = r#"local function emit(v) print(sluice.json.encode(v)) end
local function call(name, input)
  local r, e = sluice.call(name, input)
  if r ~= nil then emit({ok = r}) else emit({err = e}) end
end
"#;

/// Runs `body` after the prelude with `flags`; each stdout line as JSON.
fn run(ws: &Path, flags: &[&str], body: &str) -> Vec<Value> {
    let run = common::run_lua_with(ws, &format!("{PRELUDE}{body}"), flags, &[]).ok();
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// One call of flow `name` with Lua table `input`: `Ok(output)` or
/// `Err(error)`.
fn call(ws: &Path, flags: &[&str], name: &str, input: &str) -> Result<Value, Value> {
    let mut lines = run(
        ws,
        flags,
        &format!("call({}, {input})\n", common::lua_str(name)),
    );
    assert_eq!(lines.len(), 1, "one emitted line: {lines:?}");
    outcome(lines.remove(0))
}

fn outcome(mut line: Value) -> Result<Value, Value> {
    if line.get("ok").is_some() {
        Ok(line["ok"].take())
    } else {
        Err(line["err"].take())
    }
}

fn ok(r: Result<Value, Value>) -> Value {
    r.unwrap_or_else(|e| panic!("expected a value, got the error {e}"))
}

fn err(r: Result<Value, Value>) -> Value {
    match r {
        Ok(v) => panic!("expected an error, got the value {v}"),
        Err(e) => e,
    }
}

/// `{url = "<url>"}` plus extra Lua fields.
fn input(url: &str, extra: &str) -> String {
    format!("{{url = {}{extra}}}", common::lua_str(url))
}

fn fetch(ws: &Path, flags: &[&str], url: &str, extra: &str) -> Result<Value, Value> {
    call(ws, flags, "fetch", &input(url, extra))
}

/// `--approve 'net:private:ORIGIN'` as an owned pair.
fn grant(origin: &str) -> [String; 2] {
    ["--approve".into(), format!("net:private:{origin}")]
}

fn flags(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The error the default policy gives a private destination, with nobody at
/// a terminal: no rule matches `net:private`, so it asks.
fn private_required(origin: &str) -> Value {
    let cap = format!("net:private:{origin}");
    let by = "policies/default.lua (built in)";
    let reason = format!("no rule or hook of the policy matched {cap}");
    json!({
        "code": "permission_required",
        "message": format!(
            "{cap} needs approval ({by}: {reason}) and there is no terminal to ask. \
             Pre-approve it with --approve '{cap}', or change the policy."
        ),
        "capability": cap,
        "by": by,
        "reason": reason,
        "approve": format!("--approve '{cap}'"),
    })
}

/// A fetch that got past every permission check: a value (something
/// answered) or a transport error, never a refusal.
fn assert_not_refused(what: &str, r: &Result<Value, Value>) {
    if let Err(e) = r {
        let code = e["code"].as_str().unwrap_or("");
        assert!(
            code == "request_failed" || code == "timeout",
            "{what}: expected no refusal (a value, request_failed or timeout), got {e}"
        );
    }
}

/// Runs several sluice processes at once: each `(flags, body)` pair after
/// the prelude; returns each run's JSON lines in order.
fn run_many(ws: &Path, jobs: Vec<(Vec<String>, String)>) -> Vec<Vec<Value>> {
    let children: Vec<_> = jobs
        .iter()
        .map(|(f, body)| common::spawn_lua_with(ws, &format!("{PRELUDE}{body}"), &flags(f), &[]))
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "sluice run failed\nstdout:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
                .collect()
        })
        .collect()
}

/// Writes a policy file with `rules` (Lua expressions) and `otherwise`.
fn policy(ws: &common::Workspace, rules: &[String], otherwise: &str) -> String {
    let text = format!(
        "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{\n{}  }},\n  otherwise = \"{otherwise}\",\n}}\n",
        rules.iter().map(|r| format!("    {r},\n")).collect::<String>()
    );
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    common::policy(ws, &format!("p{n}.lua"), &text)
}

fn allow(pattern: &str) -> String {
    format!("p.allow {}", common::lua_str(pattern))
}

const MIB5: usize = 5 * 1024 * 1024;

// ---- fetch: values ----

#[test]
fn fetch_returns_status_and_body_sends_headers_and_an_error_status_is_a_value() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |r| match r.path.as_str() {
        "/boom" => Reply::text(500, "text/plain", "boom"),
        _ => Reply::text(200, "text/plain; charset=utf-8", "héllo"),
    });
    let g = grant(&srv.origin());
    let f = flags(&g);
    let out = ok(fetch(
        ws.path(),
        &f,
        &srv.url("/a?b=1"),
        ", headers = {['x-test'] = 'yes'}",
    ));
    assert_eq!(
        out,
        json!({"status": 200, "body": "héllo", "truncated": false})
    );
    let boom = ok(fetch(ws.path(), &f, &srv.url("/boom"), ""));
    assert_eq!(
        boom,
        json!({"status": 500, "body": "boom", "truncated": false})
    );
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("GET", "/a?b=1")
    );
    assert_eq!(reqs[0].header("x-test"), Some("yes"));
    assert_eq!(reqs[0].header("host"), Some(srv.addr.to_string().as_str()));
    assert!(reqs[0].body.is_empty());
    assert_eq!(reqs[1].header("x-test"), None);
}

#[test]
fn fetch_decodes_the_body_by_the_charset_its_content_type_names() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |_| {
        Reply::text(200, "text/plain; charset=iso-8859-1", b"caf\xe9".to_vec())
    });
    let out = ok(fetch(
        ws.path(),
        &flags(&grant(&srv.origin())),
        &srv.url("/"),
        "",
    ));
    assert_eq!(out["body"], "café");
}

// ---- input validation ----

#[test]
fn urls_with_user_info_other_schemes_or_no_scheme_are_invalid_input_naming_url() {
    let ws = common::workspace();
    let srv = hello();
    let host = srv.addr.to_string();
    let bad = [
        format!("http://user:pw@{host}/"),
        format!("http://user@{host}/"),
        format!("https://user:pw@{host}/"),
        format!("ftp://{host}/"),
        "file:///etc/passwd".to_string(),
        format!("{host}/page"),
        "/relative".to_string(),
    ];
    let g = grant(&srv.origin());
    let mut body = String::new();
    for url in &bad {
        for flow in ["fetch", "webfetch", "http-post"] {
            body.push_str(&format!("call('{flow}', {})\n", input(url, "")));
        }
    }
    let mut approve = g.to_vec();
    approve.extend(["--approve".into(), format!("net:post:http://{host}")]);
    let lines = run(ws.path(), &flags(&approve), &body);
    assert_eq!(lines.len(), bad.len() * 3);
    for (i, line) in lines.into_iter().enumerate() {
        let e = err(outcome(line));
        let url = &bad[i / 3];
        assert_eq!(e["code"], "invalid_input", "{url}: {e}");
        assert_eq!(e["field"], "url", "{url}: {e}");
    }
    // Refused at planning: nothing reached the server.
    assert_eq!(srv.connections(), 0);
    // The message for user information says where credentials go instead.
    let e = err(fetch(ws.path(), &[], &bad[0], ""));
    assert_eq!(
        e["message"],
        "the URL carries user information (user:password@); send credentials in a header instead"
    );
}

#[test]
fn timeouts_must_be_positive_seconds_and_large_ones_are_capped_not_refused() {
    let ws = common::workspace();
    let srv = hello();
    let g = grant(&srv.origin());
    let f = flags(&g);
    for t in ["0", "-1"] {
        let e = err(fetch(
            ws.path(),
            &f,
            &srv.url("/"),
            &format!(", timeout = {t}"),
        ));
        assert_eq!(e["code"], "invalid_input", "timeout {t}");
        assert_eq!(e["field"], "timeout", "timeout {t}");
        assert_eq!(
            e["message"],
            "timeout is in seconds and must be above 0 (default 30, at most 120)"
        );
    }
    assert_eq!(srv.connections(), 0);
    let out = ok(fetch(ws.path(), &f, &srv.url("/big"), ", timeout = 500"));
    assert_eq!(out["status"], 200);
    let out = ok(fetch(ws.path(), &f, &srv.url("/frac"), ", timeout = 0.5"));
    assert_eq!(out["body"], "hello from /frac");
}

#[test]
fn reserved_and_malformed_headers_are_invalid_input_naming_the_header() {
    let ws = common::workspace();
    let srv = hello();
    let g = grant(&srv.origin());
    let cases = [
        ("{host = 'evil.example'}", "headers.host"),
        ("{['Content-Length'] = '5'}", "headers.Content-Length"),
        (
            "{['transfer-encoding'] = 'chunked'}",
            "headers.transfer-encoding",
        ),
        ("{connection = 'close'}", "headers.connection"),
        ("{['bad name'] = 'x'}", "headers.bad name"),
        ("{['x-a'] = 'one\\r\\nx-injected: two'}", "headers.x-a"),
    ];
    for (headers, field) in cases {
        let e = err(fetch(
            ws.path(),
            &flags(&g),
            &srv.url("/"),
            &format!(", headers = {headers}"),
        ));
        assert_eq!(
            (e["code"].as_str(), e["field"].as_str()),
            (Some("invalid_input"), Some(field)),
            "{e}"
        );
    }
    assert_eq!(srv.connections(), 0);
}

// ---- private destinations ----

#[test]
fn loopback_needs_an_exact_net_private_grant_and_is_not_contacted_without_it() {
    let ws = common::workspace();
    let srv = hello();
    let origin = srv.origin();
    // The default policy allows net:get:* but nothing grants net:private.
    let e = err(fetch(ws.path(), &[], &srv.url("/"), ""));
    assert_eq!(e, private_required(&origin));
    let e = err(call(ws.path(), &[], "webfetch", &input(&srv.url("/"), "")));
    assert_eq!(e, private_required(&origin), "webfetch");
    // An approval that could never grant a private address stops the run
    // at start, before anything is contacted.
    let port = srv.port();
    for never in [
        "net:private:*".to_string(),
        "net:private:http://127.0.0.1:*".to_string(),
        format!("net:private:127.0.0.1:{port}"),
    ] {
        let script = format!(
            "{PRELUDE}fetch{{url = {}}}\n",
            common::lua_str(&srv.url("/"))
        );
        let run = common::run_lua_with(ws.path(), &script, &["--approve", &never], &[]);
        assert_eq!(run.code, 2, "--approve {never}: {}", run.stderr);
        assert!(
            run.stderr.contains("it can never grant anything"),
            "--approve {never}: {}",
            run.stderr
        );
    }
    // Wildcards that approve other things, and other origins, grant nothing here.
    for wrong in [
        "net:*".to_string(),
        "*".to_string(),
        format!("net:private:http://127.0.0.1:{}", port.wrapping_add(1)),
        format!("net:private:https://127.0.0.1:{port}"),
    ] {
        let e = err(fetch(ws.path(), &["--approve", &wrong], &srv.url("/"), ""));
        assert_eq!(e["code"], "permission_required", "--approve {wrong}: {e}");
        assert_eq!(e["capability"], format!("net:private:{origin}"), "{wrong}");
    }
    // A policy rule matching only by wildcard says so.
    let pol = policy(&ws, &[allow("net:get:*"), allow("net:private:*")], "ask");
    let e = err(fetch(ws.path(), &["--policy", &pol], &srv.url("/"), ""));
    assert_eq!(e["code"], "permission_required");
    assert_eq!(
        e["reason"],
        format!("an allow rule matches net:private:{origin} only by a wildcard, and net:private is granted only by a rule naming its origin exactly")
    );
    assert_eq!(
        srv.connections(),
        0,
        "a refused destination is never contacted"
    );
    // The exact origin, by --approve or by a policy rule, grants it.
    let out = ok(fetch(
        ws.path(),
        &flags(&grant(&origin)),
        &srv.url("/x"),
        "",
    ));
    assert_eq!(out["body"], "hello from /x");
    let pol = policy(
        &ws,
        &[allow("net:get:*"), allow(&format!("net:private:{origin}"))],
        "deny",
    );
    let out = ok(fetch(ws.path(), &["--policy", &pol], &srv.url("/y"), ""));
    assert_eq!(out["body"], "hello from /y");
    assert_eq!(srv.paths(), ["/x", "/y"]);
}

/// (address, its host as a URL spells it) for one address in every private
/// range, IPv4 and IPv6.
const PRIVATE_LITERALS: &[(&str, &str)] = &[
    ("0.0.0.0", "0.0.0.0"),
    ("0.1.2.3", "0.1.2.3"),
    ("10.0.0.1", "10.0.0.1"),
    ("10.255.255.255", "10.255.255.255"),
    ("127.0.0.2", "127.0.0.2"),
    ("127.255.255.254", "127.255.255.254"),
    ("169.254.169.254", "169.254.169.254"),
    ("172.16.0.1", "172.16.0.1"),
    ("172.31.255.255", "172.31.255.255"),
    ("192.168.1.1", "192.168.1.1"),
    ("192.0.0.8", "192.0.0.8"),
    ("100.64.0.1", "100.64.0.1"),
    ("100.127.255.255", "100.127.255.255"),
    ("198.18.0.1", "198.18.0.1"),
    ("198.19.255.255", "198.19.255.255"),
    ("224.0.0.1", "224.0.0.1"),
    ("239.255.255.250", "239.255.255.250"),
    ("240.0.0.1", "240.0.0.1"),
    ("255.255.255.255", "255.255.255.255"),
    ("::1", "[::1]"),
    ("::", "[::]"),
    ("fe80::1", "[fe80::1]"),
    ("febf::1", "[febf::1]"),
    ("fc00::1", "[fc00::1]"),
    ("fd12:3456::1", "[fd12:3456::1]"),
    ("ff02::1", "[ff02::1]"),
    ("::127.0.0.1", "[::7f00:1]"),
];

/// Addresses only a DNS answer gives here (IPv6 forms of private IPv4).
const PRIVATE_EMBEDDED: &[&str] = &[
    "::ffff:127.0.0.1",
    "::ffff:10.1.2.3",
    "::ffff:169.254.169.254",
    "::10.0.0.1",
    "64:ff9b::a9fe:a9fe",
];

/// Public addresses beside the private ranges' edges.
/// (The documentation ranges are private: tests/ssrf.rs.)
const PUBLIC: &[&str] = &[
    "172.15.255.255",
    "172.32.0.1",
    "100.63.255.255",
    "100.128.0.1",
    "198.17.255.255",
    "198.20.0.1",
    "192.0.1.1",
    "223.255.255.255",
];

#[test]
fn every_private_literal_address_is_refused_without_the_grant_before_any_connection() {
    let ws = common::workspace();
    let port = 9; // discard: nothing is contacted anyway
    let mut body = String::new();
    for (_, host) in PRIVATE_LITERALS {
        body.push_str(&format!(
            "call('fetch', {})\n",
            input(&format!("http://{host}:{port}/"), ", timeout = 1")
        ));
    }
    let lines = run(ws.path(), &[], &body);
    assert_eq!(lines.len(), PRIVATE_LITERALS.len());
    for ((addr, host), line) in PRIVATE_LITERALS.iter().zip(lines) {
        let e = err(outcome(line));
        assert_eq!(
            e,
            private_required(&format!("http://{host}:{port}")),
            "{addr}"
        );
    }
}

#[test]
fn every_private_dns_answer_is_refused_without_the_grant_naming_the_name_origin() {
    let ws = common::workspace();
    let port = 9;
    let addrs: Vec<&str> = PRIVATE_LITERALS
        .iter()
        .map(|(a, _)| *a)
        .chain(PRIVATE_EMBEDDED.iter().copied())
        .collect();
    let mut fl = Vec::new();
    let mut body = String::new();
    for (i, a) in addrs.iter().enumerate() {
        fl.push("--resolve".to_string());
        fl.push(format!("n{i}.test={a}"));
        body.push_str(&format!(
            "call('fetch', {})\n",
            input(&format!("http://n{i}.test:{port}/"), ", timeout = 1")
        ));
    }
    let lines = run(ws.path(), &flags(&fl), &body);
    assert_eq!(lines.len(), addrs.len());
    for (i, (a, line)) in addrs.iter().zip(lines).enumerate() {
        let e = err(outcome(line));
        assert_eq!(
            e,
            private_required(&format!("http://n{i}.test:{port}")),
            "{a}"
        );
    }
}

#[test]
fn every_private_destination_is_allowed_with_its_exact_grant() {
    let ws = common::workspace();
    let port = 9;
    let mut jobs = Vec::new();
    let mut what = Vec::new();
    for (a, host) in PRIVATE_LITERALS {
        let origin = format!("http://{host}:{port}");
        let url = format!("{origin}/");
        jobs.push((
            grant(&origin).to_vec(),
            format!("call('fetch', {})\n", input(&url, ", timeout = 0.5")),
        ));
        what.push(format!("literal {a}"));
    }
    let embedded = PRIVATE_LITERALS
        .iter()
        .map(|(a, _)| *a)
        .chain(PRIVATE_EMBEDDED.iter().copied());
    for (i, a) in embedded.enumerate() {
        let origin = format!("http://g{i}.test:{port}");
        let mut f = grant(&origin).to_vec();
        f.extend(["--resolve".into(), format!("g{i}.test={a}")]);
        jobs.push((
            f,
            format!(
                "call('fetch', {})\n",
                input(&format!("{origin}/"), ", timeout = 0.5")
            ),
        ));
        what.push(format!("name resolving to {a}"));
    }
    let results = run_many(ws.path(), jobs);
    for (w, mut lines) in what.iter().zip(results) {
        assert_eq!(lines.len(), 1);
        assert_not_refused(w, &outcome(lines.remove(0)));
    }
}

#[test]
fn public_answers_need_no_private_grant() {
    let ws = common::workspace();
    let port = 9;
    let jobs = PUBLIC
        .iter()
        .enumerate()
        .map(|(i, a)| {
            (
                vec!["--resolve".to_string(), format!("pub{i}.test={a}")],
                format!(
                    "call('fetch', {})\n",
                    input(&format!("http://pub{i}.test:{port}/"), ", timeout = 0.5")
                ),
            )
        })
        .collect();
    for (a, mut lines) in PUBLIC.iter().zip(run_many(ws.path(), jobs)) {
        assert_not_refused(&format!("public {a}"), &outcome(lines.remove(0)));
    }
}

#[test]
fn loopback_served_on_other_127_addresses_is_reached_only_with_its_grant() {
    let ws = common::workspace();
    let srv = Server::start("127.255.255.254", |r| {
        Reply::text(200, "text/plain", format!("far end {}", r.path))
    });
    let e = err(fetch(ws.path(), &[], &srv.url("/"), ""));
    assert_eq!(e, private_required(&srv.origin()));
    assert_eq!(srv.connections(), 0);
    let out = ok(fetch(
        ws.path(),
        &flags(&grant(&srv.origin())),
        &srv.url("/z"),
        "",
    ));
    assert_eq!(out["body"], "far end /z");
}

#[test]
fn numeric_host_forms_are_judged_by_the_address_they_mean() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    let forms = [
        format!("http://2130706433:{port}/decimal"),
        format!("http://0x7f.1:{port}/hex"),
        format!("http://127.1:{port}/short"),
        format!("http://0177.0.0.1:{port}/octal"),
        format!("http://0x7F000001:{port}/hexall"),
        format!("http://127.0.0.1.:{port}/dot"),
    ];
    let body: String = forms
        .iter()
        .map(|u| format!("call('fetch', {})\n", input(u, "")))
        .collect();
    let origin = format!("http://127.0.0.1:{port}");
    for (u, line) in forms.iter().zip(run(ws.path(), &[], &body)) {
        assert_eq!(err(outcome(line)), private_required(&origin), "{u}");
    }
    assert_eq!(srv.connections(), 0);
    // The one grant for 127.0.0.1 covers them all: they are that address.
    let lines = run(ws.path(), &flags(&grant(&origin)), &body);
    for (u, line) in forms.iter().zip(lines) {
        let out = ok(outcome(line));
        assert_eq!(out["status"], 200, "{u}");
    }
    let reqs = srv.requests();
    assert_eq!(
        reqs.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/decimal", "/hex", "/short", "/octal", "/hexall", "/dot"]
    );
    for r in &reqs {
        assert_eq!(
            r.header("host"),
            Some(format!("127.0.0.1:{port}").as_str()),
            "{}",
            r.path
        );
    }
}

#[test]
fn ipv4_mapped_loopback_literal_is_refused_without_the_grant() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    for host in [
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:127.0.0.1]",
    ] {
        let e = err(fetch(ws.path(), &[], &format!("http://{host}:{port}/"), ""));
        assert_eq!(e["code"], "permission_required", "{host}: {e}");
        let cap = e["capability"].as_str().unwrap();
        assert!(
            cap.starts_with("net:private:http://[") && cap.ends_with(&format!("]:{port}")),
            "{host}: {cap}"
        );
    }
    assert_eq!(srv.connections(), 0);
}

/// The origin of `http://[::ffff:127.0.0.1]:P` is the URL's own
/// serialization, `http://[::ffff:7f00:1]:P` (as the unit test in
/// src/net/destination.rs expects), so the grant a person writes from the
/// URL sluice shows is the one that matches.
#[test]
fn ipv4_mapped_literal_origin_is_spelled_as_the_url_serializes_it() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    let url = format!("http://[::ffff:127.0.0.1]:{port}/mapped");
    let origin = format!("http://[::ffff:7f00:1]:{port}");
    let e = err(fetch(ws.path(), &[], &url, ""));
    assert_eq!(e, private_required(&origin));
    let out = ok(fetch(ws.path(), &flags(&grant(&origin)), &url, ""));
    assert_eq!(out["body"], "hello from /mapped");
}

#[test]
fn localhost_names_are_private_before_dns_whatever_dns_says() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    // app.localhost "resolves" to a public address: it is still this machine.
    let resolve = [
        "--resolve",
        "app.localhost=100.128.0.1",
        "--resolve",
        "localhost=100.128.0.1",
    ];
    for host in ["localhost", "LOCALHOST", "app.localhost", "a.b.localhost"] {
        let e = err(fetch(
            ws.path(),
            &resolve,
            &format!("http://{host}:{port}/"),
            "",
        ));
        let lower = host.to_ascii_lowercase();
        assert_eq!(
            e,
            private_required(&format!("http://{lower}:{port}")),
            "{host}"
        );
    }
    assert_eq!(srv.connections(), 0);
    let origin = format!("http://app.localhost:{port}");
    let mut f: Vec<String> = resolve.iter().map(|s| s.to_string()).collect();
    f.extend(grant(&origin));
    let out = ok(fetch(
        ws.path(),
        &flags(&f),
        &format!("{origin}/here"),
        ", timeout = 2",
    ));
    assert_eq!(out["body"], "hello from /here");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].header("host"),
        Some(format!("app.localhost:{port}").as_str())
    );
}

#[test]
fn a_mix_of_public_and_private_answers_needs_the_grant() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    let origin = format!("http://mix.test:{port}");
    for answers in [
        "100.128.0.1,127.0.0.1",
        "127.0.0.1,100.128.0.1",
        "2606:4700::1111,::ffff:127.0.0.1",
    ] {
        let e = err(fetch(
            ws.path(),
            &["--resolve", &format!("mix.test={answers}")],
            &format!("{origin}/"),
            "",
        ));
        assert_eq!(e, private_required(&origin), "{answers}");
    }
    assert_eq!(srv.connections(), 0);
    let mut f = vec![
        "--resolve".to_string(),
        "mix.test=127.0.0.1,100.128.0.1".into(),
    ];
    f.extend(grant(&origin));
    let out = ok(fetch(
        ws.path(),
        &flags(&f),
        &format!("{origin}/m"),
        ", timeout = 2",
    ));
    assert_eq!(out["body"], "hello from /m");
}

#[test]
fn a_failed_dns_lookup_is_request_failed_naming_the_host() {
    let ws = common::workspace();
    let e = err(fetch(
        ws.path(),
        &[],
        "http://no-such-host.invalid:9/",
        ", timeout = 2",
    ));
    assert_eq!(e["code"], "request_failed", "{e}");
    assert_eq!(e["host"], "no-such-host.invalid");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot resolve no-such-host.invalid: "),
        "{e}"
    );
}

// ---- pinning ----

/// Servers on 127.0.0.1 and 127.0.0.2 on one port (retrying for a port free
/// on both), each answering with its own name.
fn twin_servers() -> (Server, Server) {
    for _ in 0..50 {
        let a = Server::start("127.0.0.1", |_| Reply::text(200, "text/plain", "one"));
        let handler: Handler = Arc::new(|_: &Seen| Reply::text(200, "text/plain", "two"));
        if let Some(b) = Server::start_at("127.0.0.2", a.port(), handler) {
            return (a, b);
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

#[test]
fn the_connection_goes_only_to_the_checked_address_with_the_name_as_host() {
    let ws = common::workspace();
    let (one, two) = twin_servers();
    let port = one.port();
    let origin = format!("http://pin.test:{port}");
    let mut f = vec!["--resolve".to_string(), "pin.test=127.0.0.2".into()];
    f.extend(grant(&origin));
    let out = ok(fetch(
        ws.path(),
        &flags(&f),
        &format!("{origin}/p"),
        ", timeout = 2",
    ));
    assert_eq!(out["body"], "two");
    assert_eq!(one.connections(), 0, "127.0.0.1 must not be contacted");
    let reqs = two.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/p");
    assert_eq!(
        reqs[0].header("host"),
        Some(format!("pin.test:{port}").as_str())
    );
    // And the other way round: the map, not chance, picks the address.
    let mut f = vec!["--resolve".to_string(), "pin.test=127.0.0.1".into()];
    f.extend(grant(&origin));
    let out = ok(fetch(
        ws.path(),
        &flags(&f),
        &format!("{origin}/q"),
        ", timeout = 2",
    ));
    assert_eq!(out["body"], "one");
    assert_eq!(one.paths(), ["/q"]);
    assert_eq!(two.paths(), ["/p"]);
    assert_eq!(
        one.requests()[0].header("host"),
        Some(format!("pin.test:{port}").as_str())
    );
}

#[test]
fn a_grant_for_the_address_does_not_cover_a_name_that_resolves_to_it() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    let mut f = vec!["--resolve".to_string(), "name.test=127.0.0.1".into()];
    f.extend(grant(&srv.origin()));
    let e = err(fetch(
        ws.path(),
        &flags(&f),
        &format!("http://name.test:{port}/"),
        "",
    ));
    assert_eq!(e, private_required(&format!("http://name.test:{port}")));
    assert_eq!(srv.connections(), 0);
}

// ---- the resource names the scheme ----

#[test]
fn a_grant_for_https_does_not_cover_cleartext_http() {
    let ws = common::workspace();
    let srv = hello();
    let port = srv.port();
    let origin = srv.origin();
    let https_only = policy(
        &ws,
        &[
            allow(&format!("net:get:127.0.0.1:{port}")),
            allow(&format!("net:private:{origin}")),
        ],
        "deny",
    );
    let e = err(fetch(
        ws.path(),
        &["--policy", &https_only],
        &srv.url("/"),
        "",
    ));
    assert_eq!(e["code"], "permission_denied", "{e}");
    assert_eq!(e["capability"], format!("net:get:http://127.0.0.1:{port}"));
    assert_eq!(
        e["reason"],
        format!("no rule or hook of the policy matched net:get:http://127.0.0.1:{port}")
    );
    assert_eq!(srv.connections(), 0);
    // The http grant covers http and not https.
    let http_only = policy(
        &ws,
        &[
            allow(&format!("net:get:http://127.0.0.1:{port}")),
            allow(&format!("net:private:{origin}")),
        ],
        "deny",
    );
    let out = ok(fetch(
        ws.path(),
        &["--policy", &http_only],
        &srv.url("/h"),
        "",
    ));
    assert_eq!(out["body"], "hello from /h");
    let e = err(fetch(
        ws.path(),
        &["--policy", &http_only],
        &format!("https://127.0.0.1:{port}/"),
        "",
    ));
    assert_eq!(e["code"], "permission_denied");
    assert_eq!(e["capability"], format!("net:get:127.0.0.1:{port}"));
    assert_eq!(srv.paths(), ["/h"]);
}

// ---- redirects ----

#[test]
fn a_redirect_to_an_ungranted_private_origin_is_refused_before_any_connection_to_it() {
    let ws = common::workspace();
    let target = Server::start("127.0.0.2", |_| Reply::text(200, "text/plain", "secret"));
    let to = target.url("/meta");
    let first = Server::start("127.0.0.1", move |_| Reply::redirect(302, &to));
    let g = grant(&first.origin());
    for flow in ["fetch", "webfetch"] {
        let e = err(call(
            ws.path(),
            &flags(&g),
            flow,
            &input(&first.url("/go"), ""),
        ));
        assert_eq!(e, private_required(&target.origin()), "{flow}");
    }
    assert_eq!(first.paths(), ["/go", "/go"]);
    assert_eq!(
        target.connections(),
        0,
        "the private target saw a connection"
    );
    // Granted too, the hop is followed.
    let mut f = g.to_vec();
    f.extend(grant(&target.origin()));
    let out = ok(fetch(ws.path(), &flags(&f), &first.url("/go"), ""));
    assert_eq!(
        out,
        json!({"status": 200, "body": "secret", "truncated": false})
    );
    assert_eq!(target.paths(), ["/meta"]);
}

#[test]
fn each_redirect_hop_is_authorized_for_net_get_before_dns_and_before_the_private_check() {
    let ws = common::workspace();
    let target = Server::start("127.0.0.2", |_| Reply::text(200, "text/plain", "there"));
    let to = target.url("/t");
    let tport = target.port();
    let first = Server::start("127.0.0.1", move |r| match r.path.as_str() {
        "/nodns" => Reply::redirect(302, &format!("http://no-such-host.invalid:{tport}/")),
        _ => Reply::redirect(301, &to),
    });
    let get_first = allow(&format!("net:get:{}", first.origin()));
    let private_first = allow(&format!("net:private:{}", first.origin()));
    let get_target = allow(&format!("net:get:{}", target.origin()));
    let private_target = allow(&format!("net:private:{}", target.origin()));
    let refused = |rules: &[String], path: &str| -> Value {
        let pol = policy(&ws, rules, "deny");
        err(fetch(ws.path(), &["--policy", &pol], &first.url(path), ""))
    };
    // Neither granted: net:get comes first.
    let e = refused(&[get_first.clone(), private_first.clone()], "/");
    assert_eq!(e["code"], "permission_denied");
    assert_eq!(e["capability"], format!("net:get:{}", target.origin()));
    // net:private granted but not net:get: still net:get.
    let e = refused(
        &[
            get_first.clone(),
            private_first.clone(),
            private_target.clone(),
        ],
        "/",
    );
    assert_eq!(e["capability"], format!("net:get:{}", target.origin()));
    // net:get granted, net:private not.
    let e = refused(
        &[get_first.clone(), private_first.clone(), get_target.clone()],
        "/",
    );
    assert_eq!(e["code"], "permission_denied");
    assert_eq!(e["capability"], format!("net:private:{}", target.origin()));
    assert_eq!(target.connections(), 0);
    // A hop to a name that does not resolve is refused by policy, not by DNS.
    let e = refused(&[get_first.clone(), private_first.clone()], "/nodns");
    assert_eq!(e["code"], "permission_denied", "{e}");
    assert_eq!(
        e["capability"],
        format!("net:get:http://no-such-host.invalid:{tport}")
    );
    // Everything granted: followed.
    let pol = policy(
        &ws,
        &[get_first, private_first, get_target, private_target],
        "deny",
    );
    let out = ok(fetch(ws.path(), &["--policy", &pol], &first.url("/"), ""));
    assert_eq!(out["body"], "there");
    assert_eq!(target.paths(), ["/t"]);
}

#[test]
fn redirects_to_other_schemes_or_with_user_info_are_request_failed() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |r| match r.path.as_str() {
        "/ftp" => Reply::redirect(302, "ftp://127.0.0.1/file"),
        "/userinfo" => Reply::redirect(302, "http://user:pw@127.0.0.1/"),
        _ => Reply::text(200, "text/plain", "no"),
    });
    let g = grant(&srv.origin());
    for path in ["/ftp", "/userinfo"] {
        let e = err(fetch(ws.path(), &flags(&g), &srv.url(path), ""));
        assert_eq!(e["code"], "request_failed", "{path}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!(
                "{} redirected somewhere sluice does not go: ",
                srv.url(path)
            )),
            "{msg}"
        );
    }
    assert_eq!(srv.paths(), ["/ftp", "/userinfo"]);
}

#[test]
fn credentials_are_kept_on_same_origin_redirects_and_only_plain_headers_cross_origins() {
    let ws = common::workspace();
    let other = Server::start("127.0.0.2", |_| Reply::text(200, "text/plain", "other"));
    let to_other = other.url("/landing");
    let first = Server::start("127.0.0.1", move |r| match r.path.as_str() {
        "/start" => Reply::redirect(302, "/same"),
        "/same" => Reply::redirect(307, &to_other),
        _ => Reply::text(200, "text/plain", "end"),
    });
    let mut f = grant(&first.origin()).to_vec();
    f.extend(grant(&other.origin()));
    let headers = ", headers = {authorization = 'Bearer s3cret', cookie = 'sid=1', \
                   ['x-trace'] = 't1', ['x-api-key'] = 'k1', accept = 'text/plain'}";
    for flow in ["fetch", "webfetch"] {
        let r = call(
            ws.path(),
            &flags(&f),
            flow,
            &input(&first.url("/start"), headers),
        );
        let out = ok(r);
        assert_eq!(out["status"], 200, "{flow}");
    }
    let firsts = first.requests();
    assert_eq!(
        firsts.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/start", "/same", "/start", "/same"]
    );
    for r in &firsts {
        assert_eq!(
            r.header("authorization"),
            Some("Bearer s3cret"),
            "{}",
            r.path
        );
        assert_eq!(r.header("cookie"), Some("sid=1"), "{}", r.path);
        assert_eq!(r.header("x-trace"), Some("t1"));
        assert_eq!(r.header("x-api-key"), Some("k1"));
    }
    let others = other.requests();
    assert_eq!(others.len(), 2);
    for r in &others {
        assert_eq!(r.header("authorization"), None);
        assert_eq!(r.header("cookie"), None);
        // Only plain headers follow a chain that left its origin: any
        // other may be a key or token, whatever its name.
        assert_eq!(r.header("x-trace"), None);
        assert_eq!(r.header("x-api-key"), None);
        assert_eq!(
            r.header("accept"),
            Some("text/plain"),
            "plain headers still go"
        );
        assert_eq!(r.header("host"), Some(other.addr.to_string().as_str()));
    }
}

#[test]
fn another_port_on_the_same_host_is_another_origin_for_credentials() {
    let ws = common::workspace();
    let other = hello();
    let to_other = other.url("/p2");
    let first = Server::start("127.0.0.1", move |_| Reply::redirect(302, &to_other));
    let mut f = grant(&first.origin()).to_vec();
    f.extend(grant(&other.origin()));
    ok(fetch(
        ws.path(),
        &flags(&f),
        &first.url("/"),
        ", headers = {Authorization = 'Basic eDp5', Cookie = 'a=b'}",
    ));
    assert_eq!(
        first.requests()[0].header("authorization"),
        Some("Basic eDp5")
    );
    let r = &other.requests()[0];
    assert_eq!(
        (r.header("authorization"), r.header("cookie")),
        (None, None)
    );
}

/// Module doc of src/net/client.rs: "once a hop leaves the first origin,
/// `authorization` and `cookie` headers are no longer sent" — a chain that
/// comes back to the first origin must not get them back.
#[test]
fn credentials_stay_dropped_after_a_redirect_chain_returns_to_the_first_origin() {
    let ws = common::workspace();
    let first_url = Arc::new(Mutex::new(String::new()));
    let back = first_url.clone();
    let other = Server::start("127.0.0.2", move |_| {
        Reply::redirect(302, &back.lock().unwrap())
    });
    let to_other = other.url("/bounce");
    let first = Server::start("127.0.0.1", move |r| match r.path.as_str() {
        "/start" => Reply::redirect(302, &to_other),
        _ => Reply::text(200, "text/plain", "home"),
    });
    *first_url.lock().unwrap() = first.url("/home");
    let mut f = grant(&first.origin()).to_vec();
    f.extend(grant(&other.origin()));
    let out = ok(fetch(
        ws.path(),
        &flags(&f),
        &first.url("/start"),
        ", headers = {authorization = 'Bearer s3cret', cookie = 'sid=1'}",
    ));
    assert_eq!(out["body"], "home");
    let reqs = first.requests();
    assert_eq!(
        reqs.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/start", "/home"]
    );
    assert_eq!(other.requests()[0].header("authorization"), None);
    assert_eq!(
        (reqs[1].header("authorization"), reqs[1].header("cookie")),
        (None, None),
        "credentials came back after the chain left the first origin"
    );
}

#[test]
fn fetch_and_webfetch_follow_up_to_ten_redirects_and_report_the_final_url() {
    let ws = common::workspace();
    // /r/N redirects to /r/N-1; /r/0 answers.
    let srv = Server::start("127.0.0.1", |r| {
        let n: u32 = r.path.trim_start_matches("/r/").parse().unwrap_or(0);
        if n == 0 {
            Reply::text(200, "text/plain", "arrived")
        } else {
            let status = [301, 302, 303, 307, 308][n as usize % 5];
            Reply::redirect(status, &format!("/r/{}", n - 1))
        }
    });
    let g = grant(&srv.origin());
    let out = ok(call(
        ws.path(),
        &flags(&g),
        "webfetch",
        &input(&srv.url("/r/10"), ""),
    ));
    assert_eq!(
        out,
        json!({"url": srv.url("/r/0"), "status": 200, "contentType": "text/plain", "content": "arrived", "truncated": false})
    );
    assert_eq!(srv.requests().len(), 11);
    let out = ok(fetch(ws.path(), &flags(&g), &srv.url("/r/10"), ""));
    assert_eq!(out["body"], "arrived");
    assert_eq!(srv.requests().len(), 22);
    for flow in ["webfetch", "fetch"] {
        let e = err(call(
            ws.path(),
            &flags(&g),
            flow,
            &input(&srv.url("/r/11"), ""),
        ));
        assert_eq!(e["code"], "request_failed", "{flow}: {e}");
        assert_eq!(
            e["message"],
            format!(
                "stopped after 10 redirects (the last one from {} to /r/0)",
                srv.url("/r/1")
            ),
            "{flow}"
        );
    }
    // Eleven responses each time, /r/0 never asked for.
    assert_eq!(srv.requests().len(), 44);
    assert_eq!(srv.paths().iter().filter(|p| *p == "/r/0").count(), 2);
}

// ---- http-post ----

fn post_flags(srv: &Server) -> Vec<String> {
    let mut f = grant(&srv.origin()).to_vec();
    f.extend(["--approve".into(), format!("net:post:{}", srv.origin())]);
    f
}

#[test]
fn http_post_sends_the_body_verbatim_with_application_json_by_default() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |r| {
        Reply::text(
            201,
            "application/json",
            format!("got {} bytes", r.body.len()),
        )
    });
    let f = post_flags(&srv);
    let body = "{\"b\": 2,   \"a\": [1, 2.50, \"ü\"]}\n  ";
    let out = ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(
            &srv.url("/api?x=1"),
            &format!(", body = {}", common::lua_str(body)),
        ),
    ));
    assert_eq!(
        out,
        json!({"status": 201, "body": format!("got {} bytes", body.len()), "truncated": false})
    );
    let r = &srv.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/api?x=1"));
    assert_eq!(r.body, body.as_bytes());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    // contentType, or a content-type header, replaces the default.
    ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(
            &srv.url("/form"),
            ", body = 'a=1&b=2', contentType = 'application/x-www-form-urlencoded'",
        ),
    ));
    ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(
            &srv.url("/h"),
            ", body = 'plain', headers = {['Content-Type'] = 'text/plain'}",
        ),
    ));
    ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(&srv.url("/empty"), ""),
    ));
    let reqs = srv.requests();
    assert_eq!(
        reqs[1].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(reqs[1].body, b"a=1&b=2");
    assert_eq!(reqs[2].header("content-type"), Some("text/plain"));
    assert_eq!(reqs[2].body, b"plain");
    assert_eq!(reqs[3].header("content-type"), Some("application/json"));
    assert_eq!(reqs[3].body, b"");
    // Both at once is refused.
    let e = err(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(
            &srv.url("/both"),
            ", contentType = 'text/plain', headers = {['content-type'] = 'text/html'}",
        ),
    ));
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid_input"), Some("contentType"))
    );
    assert_eq!(srv.requests().len(), 4);
}

#[test]
fn http_post_needs_net_post_which_the_default_policy_asks_for() {
    let ws = common::workspace();
    let srv = hello();
    let g = grant(&srv.origin());
    let e = err(call(
        ws.path(),
        &flags(&g),
        "http-post",
        &input(&srv.url("/"), ", body = '{}'"),
    ));
    let cap = format!("net:post:{}", srv.origin());
    assert_eq!(e["code"], "permission_required");
    assert_eq!(e["capability"], cap);
    assert_eq!(
        e["by"],
        "ask \"net:post:*\" (rules[59] of policies/default.lua (built in))"
    );
    assert_eq!(e["approve"], format!("--approve '{cap}'"));
    assert_eq!(srv.connections(), 0);
}

#[test]
fn http_post_does_not_follow_redirects() {
    let ws = common::workspace();
    let target = Server::start("127.0.0.2", |_| Reply::text(200, "text/plain", "target"));
    let to = target.url("/t");
    let srv = Server::start("127.0.0.1", move |r| match r.path.as_str() {
        "/307" => Reply::redirect(307, &to),
        _ => Reply::redirect(302, &to),
    });
    let mut f = post_flags(&srv);
    f.extend(post_flags(&target));
    let out = ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(&srv.url("/302"), ", body = 'once'"),
    ));
    assert_eq!(
        out,
        json!({"status": 302, "body": format!("moved to {}", target.url("/t")), "truncated": false})
    );
    let out = ok(call(
        ws.path(),
        &flags(&f),
        "http-post",
        &input(&srv.url("/307"), ", body = 'once'"),
    ));
    assert_eq!(out["status"], 307);
    assert_eq!(srv.paths(), ["/302", "/307"]);
    assert_eq!(
        target.connections(),
        0,
        "the redirect target must see nothing"
    );
}

// ---- size and time limits ----

#[test]
fn a_content_length_over_5_mib_is_refused_before_the_body_is_read() {
    let ws = common::workspace();
    // The head announces 5 MiB + 1 and then nothing comes: reading would
    // wait for the timeout.
    let srv = Server::start("127.0.0.1", |_| {
        Reply::text(200, "text/plain", "")
            .content_length(MIB5 as u64 + 1)
            .body(Body::Stall)
    });
    let g = grant(&srv.origin());
    let mut f = g.to_vec();
    f.extend(["--approve".into(), format!("net:post:{}", srv.origin())]);
    for flow in ["fetch", "webfetch", "http-post"] {
        let url = srv.url(&format!("/{flow}"));
        let start = Instant::now();
        let e = err(call(
            ws.path(),
            &flags(&f),
            flow,
            &input(&url, ", timeout = 2"),
        ));
        assert!(
            start.elapsed() < Duration::from_millis(1800),
            "{flow} waited {:?}",
            start.elapsed()
        );
        assert_eq!(
            e,
            json!({
                "code": "response_too_large",
                "message": format!("the response from {url} is {} bytes (content-length), over the 5 MiB limit", MIB5 + 1),
                "limit": MIB5,
            }),
            "{flow}"
        );
    }
}

#[test]
fn a_chunked_body_over_5_mib_is_refused_while_reading_and_5_mib_exactly_passes() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |r| {
        let n = match r.path.as_str() {
            "/over" => MIB5 + 1,
            _ => MIB5,
        };
        let body = Body::Chunked(vec![b'a'; n], 64 * 1024);
        let reply = Reply::text(200, "text/plain", "").body(body);
        if r.path == "/fixed" {
            Reply::text(200, "text/plain", vec![b'a'; MIB5])
        } else {
            reply
        }
    });
    let g = grant(&srv.origin());
    let url = srv.url("/over");
    let e = err(fetch(ws.path(), &flags(&g), &url, ", timeout = 5"));
    assert_eq!(
        e,
        json!({
            "code": "response_too_large",
            "message": format!("the response from {url} is more than 5 MiB, over the 5 MiB limit"),
            "limit": MIB5,
        })
    );
    for path in ["/exact", "/fixed"] {
        let out = ok(fetch(
            ws.path(),
            &flags(&g),
            &srv.url(path),
            ", timeout = 5",
        ));
        assert_eq!(out["status"], 200, "{path}");
        assert_eq!(out["truncated"], true, "{path}");
        assert_eq!(out["body"].as_str().unwrap().len(), 60_000, "{path}");
        assert_eq!(
            out["notice"],
            format!("kept the first 60000 of {MIB5} bytes; the rest was cut"),
            "{path}"
        );
    }
}

#[test]
fn a_server_that_never_answers_is_a_timeout_within_the_given_seconds() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |_| {
        Reply::text(200, "text/plain", "late").delay(STALL)
    });
    let g = grant(&srv.origin());
    let start = Instant::now();
    let e = err(fetch(ws.path(), &flags(&g), &srv.url("/"), ", timeout = 1"));
    let took = start.elapsed();
    assert_eq!(e["code"], "timeout", "{e}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
        "took {took:?}"
    );
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn a_body_that_never_ends_is_a_timeout_within_the_given_seconds() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |_| {
        Reply::text(200, "text/plain", "").body(Body::Forever)
    });
    let g = grant(&srv.origin());
    for flow in ["fetch", "webfetch"] {
        let start = Instant::now();
        let e = err(call(
            ws.path(),
            &flags(&g),
            flow,
            &input(&srv.url("/"), ", timeout = 1"),
        ));
        let took = start.elapsed();
        assert_eq!(e["code"], "timeout", "{flow}: {e}");
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
            "{flow} took {took:?}"
        );
    }
}

#[test]
fn one_deadline_bounds_every_hop_together() {
    let ws = common::workspace();
    // Each hop alone is well within the timeout; together they are not.
    let srv = Server::start("127.0.0.1", |r| match r.path.as_str() {
        "/a" => Reply::redirect(302, "/b").delay(Duration::from_millis(400)),
        _ => Reply::text(200, "text/plain", "b").delay(Duration::from_millis(400)),
    });
    let g = grant(&srv.origin());
    let start = Instant::now();
    let e = err(fetch(
        ws.path(),
        &flags(&g),
        &srv.url("/a"),
        ", timeout = 0.6",
    ));
    assert_eq!(e["code"], "timeout", "{e}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_millis(2000),
        "took {took:?}"
    );
    assert_eq!(srv.paths(), ["/a", "/b"]);
    let out = ok(fetch(
        ws.path(),
        &flags(&g),
        &srv.url("/a"),
        ", timeout = 2",
    ));
    assert_eq!(out["body"], "b");
}

#[test]
fn returned_text_keeps_its_first_60000_bytes_with_a_notice_of_kept_and_total() {
    let ws = common::workspace();
    let srv = Server::start("127.0.0.1", |r| {
        let body = match r.path.as_str() {
            "/exact" => "x".repeat(60_000),
            "/over" => format!("{}{}", "x".repeat(60_000), "y".repeat(10_000)),
            // A two-byte character across the limit is not split.
            _ => format!("{}é{}", "x".repeat(59_999), "y".repeat(10)),
        };
        Reply::text(200, "text/plain; charset=utf-8", body)
    });
    let g = grant(&srv.origin());
    let f = flags(&g);
    let exact = ok(fetch(ws.path(), &f, &srv.url("/exact"), ""));
    assert_eq!(
        exact,
        json!({"status": 200, "body": "x".repeat(60_000), "truncated": false})
    );
    let over = ok(fetch(ws.path(), &f, &srv.url("/over"), ""));
    assert_eq!(
        over,
        json!({"status": 200, "body": "x".repeat(60_000), "truncated": true,
               "notice": "kept the first 60000 of 70000 bytes; the rest was cut"})
    );
    let split = ok(fetch(ws.path(), &f, &srv.url("/split"), ""));
    assert_eq!(split["body"], "x".repeat(59_999));
    assert_eq!(
        split["notice"],
        "kept the first 59999 of 60011 bytes; the rest was cut"
    );
    let web = ok(call(
        ws.path(),
        &f,
        "webfetch",
        &input(&srv.url("/over"), ""),
    ));
    assert_eq!(web["content"], "x".repeat(60_000));
    assert_eq!(web["truncated"], true);
    assert_eq!(
        web["notice"],
        "kept the first 60000 of 70000 bytes; the rest was cut"
    );
    let pf = post_flags(&srv);
    let post = ok(call(
        ws.path(),
        &flags(&pf),
        "http-post",
        &input(&srv.url("/over"), ""),
    ));
    assert_eq!(
        post["notice"],
        "kept the first 60000 of 70000 bytes; the rest was cut"
    );
}

// ---- webfetch content types ----

const PAGE: &str = "<!doctype html><html><head><title>T</title></head><body><h1>Title</h1><p>Some <b>bold</b> text and <a href=\"/next\">a link</a>.</p></body></html>";

fn typed_server() -> Server {
    Server::start("127.0.0.1", |r| match r.path.as_str() {
        "/plain" => Reply::text(
            200,
            "text/plain; charset=utf-8",
            "<h1>not html</h1> *as is*",
        ),
        "/json" => Reply::text(200, "application/json", "{\"a\": 1}"),
        "/problem" => Reply::text(404, "application/problem+json", "{\"title\": \"nope\"}"),
        "/xml" => Reply::text(200, "application/atom+xml", "<feed/>"),
        "/png" => Reply::text(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0".to_vec()),
        "/octet" => Reply::text(200, "application/octet-stream", "abc"),
        "/untyped-text" => Reply::new(200).body(Body::Fixed(b"just text".to_vec())),
        "/untyped-binary" => Reply::new(200).body(Body::Fixed(b"\0\x01\x02".to_vec())),
        "/html" => Reply::text(200, "text/html; charset=utf-8", PAGE),
        "/moved" => Reply::redirect(301, "/docs/page"),
        "/docs/page" => Reply::text(200, "text/html", "<p><a href=\"next\">relative</a></p>"),
        _ => Reply::text(404, "text/plain", "none"),
    })
}

#[test]
fn webfetch_passes_text_json_and_xml_through_and_refuses_binaries() {
    let ws = common::workspace();
    let srv = typed_server();
    let g = grant(&srv.origin());
    let f = flags(&g);
    let web =
        |path: &str, extra: &str| call(ws.path(), &f, "webfetch", &input(&srv.url(path), extra));
    let expect = |path: &str, status: u16, ct: &str, content: &str| json!({"url": srv.url(path), "status": status, "contentType": ct, "content": content, "truncated": false});
    assert_eq!(
        ok(web("/plain", "")),
        expect("/plain", 200, "text/plain", "<h1>not html</h1> *as is*")
    );
    assert_eq!(
        ok(web("/json", "")),
        expect("/json", 200, "application/json", "{\"a\": 1}")
    );
    assert_eq!(
        ok(web("/problem", "")),
        expect(
            "/problem",
            404,
            "application/problem+json",
            "{\"title\": \"nope\"}"
        )
    );
    assert_eq!(
        ok(web("/xml", "")),
        expect("/xml", 200, "application/atom+xml", "<feed/>")
    );
    assert_eq!(
        ok(web("/untyped-text", "")),
        expect("/untyped-text", 200, "text/plain", "just text")
    );
    for (path, ct, shown) in [
        ("/png", "image/png", "image/png"),
        (
            "/octet",
            "application/octet-stream",
            "application/octet-stream",
        ),
        ("/untyped-binary", "", "no content type and binary bytes"),
    ] {
        let e = err(web(path, ""));
        assert_eq!(
            e,
            json!({
                "code": "unsupported_content_type",
                "message": format!("{} answered with {shown}; webfetch renders text (text/*, JSON, XML), not binaries", srv.url(path)),
                "contentType": ct,
            }),
            "{path}"
        );
    }
    // Text that is not HTML is not converted, whatever the format.
    for format in ["markdown", "text", "html"] {
        let out = ok(web("/plain", &format!(", format = '{format}'")));
        assert_eq!(out["content"], "<h1>not html</h1> *as is*", "{format}");
    }
    // format = html returns the page as it came; the default Accept goes out.
    let out = ok(web("/html", ", format = 'html'"));
    assert_eq!(out, expect("/html", 200, "text/html", PAGE));
    let r = srv
        .requests()
        .into_iter()
        .find(|r| r.path == "/html")
        .unwrap();
    assert_eq!(
        r.header("accept"),
        Some("text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5")
    );
    let e = err(web("/html", ", format = 'pdf'"));
    assert_eq!(e["code"], "invalid_input", "{e}");
}

/// HTML is converted when the response is HTML. Fails while
/// src/net/html.rs is the stub that returns the HTML unchanged.
#[test]
fn webfetch_renders_html_as_markdown_and_as_text() {
    let ws = common::workspace();
    let srv = typed_server();
    let g = grant(&srv.origin());
    let f = flags(&g);
    let md = ok(call(
        ws.path(),
        &f,
        "webfetch",
        &input(&srv.url("/html"), ""),
    ));
    let md = md["content"].as_str().unwrap();
    assert_ne!(md, PAGE, "markdown is the raw HTML");
    assert!(
        !md.contains("<p>") && md.contains("# Title") && md.contains("**bold**"),
        "{md}"
    );
    assert!(
        md.contains(&format!("[a link]({})", srv.url("/next"))),
        "{md}"
    );
    let text = ok(call(
        ws.path(),
        &f,
        "webfetch",
        &input(&srv.url("/html"), ", format = 'text'"),
    ));
    let text = text["content"].as_str().unwrap();
    assert_ne!(text, PAGE, "text is the raw HTML");
    assert!(
        !text.contains('<') && text.contains("Some bold text"),
        "{text}"
    );
    // Links resolve against the final URL, after redirects.
    let out = ok(call(
        ws.path(),
        &f,
        "webfetch",
        &input(&srv.url("/moved"), ""),
    ));
    assert_eq!(out["url"], srv.url("/docs/page"));
    let md = out["content"].as_str().unwrap();
    assert!(
        md.contains(&format!("[relative]({})", srv.url("/docs/next"))),
        "{md}"
    );
}

// ---- this machine's own addresses (issue 13, item 5) ----

/// The machine's own addresses that are neither loopback nor link-local
/// (a URL cannot name a link-local address's interface), read at test time
/// from its interfaces; fails when there is none, as the tests below then
/// prove nothing.
fn own_addresses() -> Vec<IpAddr> {
    let mut found: Vec<IpAddr> = nix::ifaddrs::getifaddrs()
        .expect("getifaddrs")
        .filter_map(|i| i.address)
        .filter_map(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(v4), _) => Some(IpAddr::V4(v4.ip())),
            (_, Some(v6)) => Some(IpAddr::V6(v6.ip())),
            _ => None,
        })
        .filter(|a| match a {
            IpAddr::V4(v4) => !v4.is_loopback(),
            IpAddr::V6(v6) => !v6.is_loopback() && (v6.segments()[0] & 0xffc0) != 0xfe80,
        })
        .collect();
    found.sort();
    found.dedup();
    assert!(
        found.iter().any(IpAddr::is_ipv4),
        "this machine has no non-loopback IPv4 address ({found:?}): the tests of its own \
         interface addresses cannot run here; give it one (ip addr add ADDR dev IFACE)"
    );
    found
}

/// The origin sluice names for `url`: its host as the URL serializes it.
fn origin_of(url: &str) -> String {
    let u = url::Url::parse(url).unwrap();
    format!("http://{}:{}", u.host_str().unwrap(), u.port().unwrap())
}

/// Every spelling of IPv4 address `a` that URL parsers accept as a host, and
/// the IPv6 forms that carry it, each as `(url, the origin sluice names)`.
fn v4_forms(a: Ipv4Addr, port: u16) -> Vec<(String, String)> {
    let [o1, o2, o3, o4] = a.octets();
    let n = u32::from(a);
    let hosts = [
        a.to_string(),
        n.to_string(),
        format!("0{o1:o}.0{o2:o}.0{o3:o}.0{o4:o}"),
        format!("0x{o1:x}.0x{o2:x}.0x{o3:x}.0x{o4:x}"),
        format!("0x{n:x}"),
        format!("{o1}.{o2}.{}", n & 0xffff),
        format!("{o1}.{}", n & 0xff_ffff),
        format!("{a}."),
        format!("[::ffff:{a}]"),
        format!("[::{a}]"),
        format!("[::ffff:0:{a}]"),
        format!("[64:ff9b::{a}]"),
        format!("[2002:{:x}:{:x}::1]", n >> 16, n & 0xffff),
    ];
    hosts
        .iter()
        .map(|h| {
            let url = format!("http://{h}:{port}/form");
            let origin = origin_of(&url);
            (url, origin)
        })
        .collect()
}

/// The IPv6 addresses a DNS answer (or `--resolve`) may give for IPv4
/// address `a`: mapped, compatible, SIIT, NAT64 and 6to4.
fn v6_carriers(a: Ipv4Addr) -> Vec<String> {
    let n = u32::from(a);
    vec![
        a.to_string(),
        format!("::ffff:{a}"),
        format!("::{a}"),
        format!("::ffff:0:{a}"),
        format!("64:ff9b::{a}"),
        format!("2002:{:x}:{:x}::1", n >> 16, n & 0xffff),
    ]
}

/// A server on `ip` answering "own PATH".
fn own_server(ip: IpAddr) -> Server {
    Server::start(&ip.to_string(), |r| {
        Reply::text(200, "text/plain", format!("own {}", r.path))
    })
}

/// A loopback server redirecting `/r/N` to the Nth of `targets`.
fn redirector(targets: Vec<String>) -> Server {
    Server::start("127.0.0.1", move |r| {
        let i: usize = r
            .path
            .trim_start_matches("/r/")
            .parse()
            .unwrap_or(usize::MAX);
        match targets.get(i) {
            Some(t) => Reply::redirect(302, t),
            None => Reply::text(404, "text/plain", "no such redirect"),
        }
    })
}

/// Each line of one run of fetches, as a refusal that must be exactly
/// [`private_required`] for the origin paired with it.
fn assert_each_refused(lines: Vec<Value>, expected: &[(String, String)]) {
    assert_eq!(lines.len(), expected.len(), "{lines:?}");
    for (line, (what, origin)) in lines.into_iter().zip(expected) {
        assert_eq!(err(outcome(line)), private_required(origin), "{what}");
    }
}

fn fetches(urls: impl IntoIterator<Item = String>) -> String {
    urls.into_iter()
        .map(|u| format!("call('fetch', {})\n", input(&u, ", timeout = 5")))
        .collect()
}

#[test]
fn the_machine_s_own_ipv4_address_is_refused_in_every_form_directly_by_name_and_by_redirect() {
    let ws = common::workspace();
    let IpAddr::V4(a) = *own_addresses().iter().find(|a| a.is_ipv4()).unwrap() else {
        unreachable!()
    };
    let own = own_server(IpAddr::V4(a));
    let port = own.port();
    let forms = v4_forms(a, port);
    // Directly, in every spelling.
    let lines = run(ws.path(), &[], &fetches(forms.iter().map(|f| f.0.clone())));
    assert_each_refused(lines, &forms);
    // Through a name pinned to the address or an IPv6 form carrying it.
    let carriers = v6_carriers(a);
    let mut fl = Vec::new();
    let mut named = Vec::new();
    for (i, c) in carriers.iter().enumerate() {
        fl.extend(["--resolve".to_string(), format!("own{i}.test={c}")]);
        named.push((c.clone(), format!("http://own{i}.test:{port}")));
    }
    let urls = named.iter().map(|(_, o)| format!("{o}/named"));
    assert_each_refused(run(ws.path(), &flags(&fl), &fetches(urls)), &named);
    // Through a redirect from an origin the run may reach.
    let hop = redirector(forms.iter().map(|f| f.0.clone()).collect());
    let urls = (0..forms.len()).map(|i| hop.url(&format!("/r/{i}")));
    let lines = run(ws.path(), &flags(&grant(&hop.origin())), &fetches(urls));
    assert_each_refused(lines, &forms);
    assert_eq!(hop.requests().len(), forms.len());
    assert_eq!(own.connections(), 0, "a refused destination was contacted");

    // Controls: the exact grant reaches it, directly, as a mapped IPv6
    // literal (its own origin), by name and by redirect.
    let origin = format!("http://{a}:{port}");
    let mapped = format!("http://[::ffff:{a}]:{port}/mapped");
    let mut g = grant(&origin).to_vec();
    g.extend(grant(&origin_of(&mapped)));
    g.extend(grant(&hop.origin()));
    g.extend(grant(&format!("http://own0.test:{port}")));
    g.extend(["--resolve".into(), format!("own0.test={a}")]);
    let body = fetches([
        format!("{origin}/direct"),
        format!("http://{}:{port}/decimal", u32::from(a)),
        mapped,
        format!("http://own0.test:{port}/named"),
        hop.url("/r/0"),
    ]);
    let bodies: Vec<Value> = run(ws.path(), &flags(&g), &body)
        .into_iter()
        .map(|l| ok(outcome(l))["body"].clone())
        .collect();
    assert_eq!(
        bodies,
        [
            "own /direct",
            "own /decimal",
            "own /mapped",
            "own /named",
            "own /form"
        ]
    );
}

#[test]
fn the_machine_s_own_ipv6_addresses_are_refused_directly_by_name_and_by_redirect() {
    let ws = common::workspace();
    let v6: Vec<IpAddr> = own_addresses()
        .into_iter()
        .filter(IpAddr::is_ipv6)
        .collect();
    for a in v6 {
        let own = own_server(a);
        let origin = own.origin();
        let url = own.url("/v6");
        let hop = redirector(vec![url.clone()]);
        let resolve = ["--resolve".to_string(), format!("six.test={a}")];
        let named = format!("http://six.test:{}", own.port());
        let lines = run(
            ws.path(),
            &flags(&resolve),
            &fetches([url.clone(), format!("{named}/")]),
        );
        assert_each_refused(
            lines,
            &[(url.clone(), origin.clone()), (a.to_string(), named)],
        );
        let lines = run(
            ws.path(),
            &flags(&grant(&hop.origin())),
            &fetches([hop.url("/r/0")]),
        );
        assert_each_refused(lines, &[(url.clone(), origin.clone())]);
        assert_eq!(own.connections(), 0, "{a} was contacted");
        let out = ok(fetch(ws.path(), &flags(&grant(&origin)), &url, ""));
        assert_eq!(out["body"], "own /v6", "{a}");
    }
}

#[test]
fn documentation_ranges_and_the_6to4_relay_are_refused_as_literals_and_as_dns_answers() {
    let ws = common::workspace();
    let port = 9; // nothing is contacted
    let addrs = [
        "192.0.2.1",
        "198.51.100.7",
        "203.0.113.255",
        "192.88.99.1",
        "2001:db8::1",
        "3fff::1",
        "::ffff:203.0.113.7",
    ];
    let literal: Vec<(String, String)> = addrs
        .iter()
        .map(|a| {
            let host = if a.contains(':') {
                format!("[{a}]")
            } else {
                a.to_string()
            };
            let url = format!("http://{host}:{port}/");
            (url.clone(), origin_of(&url))
        })
        .collect();
    let lines = run(
        ws.path(),
        &[],
        &fetches(literal.iter().map(|l| l.0.clone())),
    );
    assert_each_refused(lines, &literal);
    let mut fl = Vec::new();
    let mut named = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        fl.extend(["--resolve".to_string(), format!("doc{i}.test={a}")]);
        named.push((a.to_string(), format!("http://doc{i}.test:{port}")));
    }
    let urls = named.iter().map(|(_, o)| format!("{o}/"));
    assert_each_refused(run(ws.path(), &flags(&fl), &fetches(urls)), &named);
}

/// Runs `f` on a thread of its own in a new network namespace holding only
/// loopback (up): processes it starts and sockets it opens live there, so
/// the test may give "this machine" any address without touching the real
/// network. Needs CAP_SYS_ADMIN (root, as the tests run in CI).
fn in_own_network<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    thread::spawn(move || {
        // A namespace is per thread: this one alone moves.
        let rc = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWNET) };
        assert_eq!(
            rc,
            0,
            "cannot make a network namespace ({}): run the tests as root",
            std::io::Error::last_os_error()
        );
        ip(&["link", "set", "lo", "up"]);
        f()
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// `ip ARGS` (Debian package iproute2), which must succeed.
fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (install iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A public address (in no private or documentation range) that becomes
/// this machine's own during the test, in a network namespace of its own.
const PUBLIC_OWN_V4: &str = "100.128.0.1";
const PUBLIC_OWN_V6: &str = "2606:4700::7";

#[test]
fn a_public_address_added_to_an_interface_during_a_run_needs_the_grant_from_its_next_request() {
    in_own_network(|| {
        let ws = common::workspace();
        // Before the address is the machine's, it is public: the request
        // is made (and finds no route); after, it is refused.
        let script = format!(
            r#"{PRELUDE}
call('fetch', {{url = 'http://{PUBLIC_OWN_V4}:9/', timeout = 5}})
assert(sluice.write{{path = 'asked', content = ''}})
while #sluice.glob{{pattern = 'ports'}}.paths == 0 do sluice.sleep(20) end
local p4, p6 = assert(sluice.read{{path = 'ports'}}).content:match('(%d+) (%d+)')
for _, u in ipairs{{'http://{PUBLIC_OWN_V4}:' .. p4 .. '/', 'http://1686110209:' .. p4 .. '/',
                    'http://[::ffff:{PUBLIC_OWN_V4}]:' .. p4 .. '/', 'http://pub.test:' .. p4 .. '/',
                    'http://[{PUBLIC_OWN_V6}]:' .. p6 .. '/'}} do
  call('fetch', {{url = u, timeout = 5}})
end
"#
        );
        let resolve = ["--resolve", "pub.test=100.128.0.1"];
        let child = common::spawn_lua_with(ws.path(), &script, &resolve, &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ws.file("asked").exists() {
            assert!(
                Instant::now() < deadline,
                "the run never made its first request"
            );
            thread::sleep(Duration::from_millis(20));
        }
        ip(&["addr", "add", &format!("{PUBLIC_OWN_V4}/32"), "dev", "lo"]);
        // No duplicate detection: the address is usable at once.
        ip(&[
            "-6",
            "addr",
            "add",
            &format!("{PUBLIC_OWN_V6}/128"),
            "dev",
            "lo",
            "nodad",
        ]);
        let v4 = own_server(PUBLIC_OWN_V4.parse().unwrap());
        let v6 = own_server(PUBLIC_OWN_V6.parse().unwrap());
        std::fs::write(ws.file("ports"), format!("{} {}", v4.port(), v6.port())).unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let before = err(outcome(lines.remove(0)));
        assert_eq!(before["code"], "request_failed", "public then: {before}");
        let (p4, p6) = (v4.port(), v6.port());
        let expected = [
            (
                "literal".to_string(),
                format!("http://{PUBLIC_OWN_V4}:{p4}"),
            ),
            (
                "decimal".to_string(),
                format!("http://{PUBLIC_OWN_V4}:{p4}"),
            ),
            ("mapped".to_string(), format!("http://[::ffff:6480:1]:{p4}")),
            ("named".to_string(), format!("http://pub.test:{p4}")),
            ("v6".to_string(), format!("http://[{PUBLIC_OWN_V6}]:{p6}")),
        ];
        assert_each_refused(lines, &expected);
        assert_eq!((v4.connections(), v6.connections()), (0, 0));
        // Controls: each exact grant reaches the server.
        let mut g = Vec::new();
        for (_, origin) in &expected {
            g.extend(grant(origin));
        }
        g.extend(resolve.iter().map(|s| s.to_string()));
        let urls = expected.iter().map(|(_, o)| format!("{o}/granted"));
        let bodies: Vec<Value> = run(ws.path(), &flags(&g), &fetches(urls))
            .into_iter()
            .map(|l| ok(outcome(l))["body"].clone())
            .collect();
        assert_eq!(bodies, vec![json!("own /granted"); 5]);
    });
}

// ---- flow names: `http-post` and `http_post` ----

/// A caller may name the flow as scripts spell it (`http_post`) or as the
/// record does (`http-post`); both reach it, and the record and the
/// policy's `req.flow` see the one canonical name.
#[test]
fn http_post_is_reached_by_either_spelling_and_policies_see_the_canonical_name() {
    let ws = common::workspace();
    let srv = hello();
    let pol = common::policy(
        &ws,
        "flow-name.lua",
        r#"local p = require("sluice.policy")
return {
  rules = {},
  decide = function(req)
    if req.action == "net:post" then return {decision = "allow", reason = "req.flow is " .. req.flow} end
  end,
}
"#,
    );
    let mut f = grant(&srv.origin()).to_vec();
    f.extend(["--policy".into(), pol]);
    let body = format!(
        "call('http_post', {})\ncall('http-post', {})\n",
        input(&srv.url("/under"), ", body = 'a'"),
        input(&srv.url("/dash"), ", body = 'b'")
    );
    let lines = run(ws.path(), &flags(&f), &body);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in lines {
        assert_eq!(ok(outcome(line))["status"], 200);
    }
    assert_eq!(srv.paths(), ["/under", "/dash"]);
    let calls = common::exported_calls(ws.path());
    assert_eq!(calls.len(), 2, "{calls:?}");
    for call in &calls {
        assert_eq!(call["flow"], "http-post", "{call}");
        let decisions = call["decisions"].to_string();
        assert!(decisions.contains("req.flow is http-post"), "{decisions}");
    }
}

#[test]
fn an_unknown_flow_name_lists_the_real_names_and_sluice_flows_takes_either_spelling() {
    let ws = common::workspace();
    let e = err(call(
        ws.path(),
        &[],
        "http_pots",
        "{url = 'https://example.org/'}",
    ));
    assert_eq!(e["code"], "invalid_input");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("there is no flow named \"http_pots\"; the flows are: read, write,"),
        "{message}"
    );
    assert!(message.contains(", http-post,"), "{message}");
    for name in ["http_post", "http-post"] {
        let out = std::process::Command::new(common::sluice_bin())
            .args(["flows", name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(shown["name"], "http-post");
        assert_eq!(shown["inputSchema"]["required"], json!(["url"]));
    }
    // The control: a name that is neither spelling is still unknown.
    let out = std::process::Command::new(common::sluice_bin())
        .args(["flows", "http post"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the flows are: read,"), "{said}");
}

// ---- named credentials in headers: sluice.credential(NAME) ----

/// A GitHub-shaped secret, as `SLUICE_CREDENTIAL_GH` holds it.
const GH_SECRET: &str = "ghp_0123456789abcdefghijKLMNOPqrst";

/// A server that answers every request with its headers, one
/// `name: value` a line: a server echoing what it was sent.
fn echo() -> Server {
    Server::start("127.0.0.1", |r| {
        let lines: String = r
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect();
        Reply::text(200, "text/plain", lines.clone()).header("x-echo", &lines.replace('\n', " "))
    })
}

/// [`run`] with `SLUICE_CREDENTIAL_GH` set in sluice's environment; also
/// the whole stdout.
fn run_gh(ws: &Path, flags: &[&str], body: &str) -> (Vec<Value>, String) {
    let run = common::run_lua_env(
        ws,
        &format!("{PRELUDE}{body}"),
        flags,
        &[],
        &[("SLUICE_CREDENTIAL_GH", GH_SECRET)],
    )
    .ok();
    let lines = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    (lines, run.stdout)
}

#[test]
fn a_credential_reaches_its_granted_origin_in_its_header_and_nothing_else_sees_it() {
    let ws = common::workspace();
    let srv = echo();
    let other = echo();
    let pol = common::policy(
        &ws,
        "cred.lua",
        &format!(
            r#"local p = require("sluice.policy")
return {{
  rules = {{ p.allow "net:get:*", p.allow "net:private:{origin}", p.allow "net:private:{other}" }},
  decide = function(req)
    if req.action ~= "cred:use" then return nil end
    local h = req.input.headers
    if req.resource == "gh@{origin}" then
      return {{decision = "allow", reason = "saw " .. h.authorization.credential .. "/" .. h.authorization.prefix .. "/" .. h["x-gh"].credential}}
    end
    return {{decision = "deny", reason = "gh goes to {origin} only"}}
  end,
  otherwise = "deny",
}}
"#,
            origin = srv.origin(),
            other = other.origin()
        ),
    );
    let f = vec!["--policy".to_string(), pol];
    let body = format!(
        r#"local bearer = sluice.credential("gh", {{prefix = "Bearer "}})
call("fetch", {{url = {one}, headers = {{authorization = bearer, ["x-gh"] = sluice.credential("gh")}}}})
call("fetch", {{url = {two}, headers = {{authorization = bearer}}}})
emit({{shown = tostring(bearer)}})
"#,
        one = common::lua_str(&srv.url("/one")),
        two = common::lua_str(&other.url("/two")),
    );
    let (lines, stdout) = run_gh(ws.path(), &flags(&f), &body);
    assert_eq!(lines.len(), 3, "{lines:?}");
    // The server got the secret, in the headers it was given for...
    let seen = &srv.requests()[0];
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Bearer {GH_SECRET}").as_str())
    );
    assert_eq!(seen.header("x-gh"), Some(GH_SECRET));
    // ...and echoed it back, which the script sees cut.
    let out = ok(outcome(lines[0].clone()));
    let echoed = out["body"].as_str().unwrap();
    assert!(
        echoed.contains("authorization: Bearer [redacted]\n"),
        "{echoed}"
    );
    assert!(echoed.contains("x-gh: [redacted]\n"), "{echoed}");
    // The other host, which the policy lets the script GET, never got it:
    // no connection was made.
    let e = err(outcome(lines[1].clone()));
    assert_eq!(e["code"], "permission_denied", "{e}");
    assert_eq!(e["capability"], format!("cred:use:gh@{}", other.origin()));
    assert_eq!(other.connections(), 0);
    assert_eq!(lines[2], json!({"shown": "credential(gh)"}));
    assert!(!stdout.contains(GH_SECRET), "{stdout}");
    // The policy saw the reference, never the secret; so does the record.
    let calls = common::exported_calls(ws.path());
    let text = serde_json::to_string(&calls).unwrap();
    assert!(!text.contains(GH_SECRET), "{text}");
    assert!(text.contains("saw gh/Bearer /gh"), "{text}");
    assert_eq!(
        calls[0]["input"]["headers"]["x-gh"],
        json!({"credential": "gh"}),
        "{}",
        calls[0]
    );
    assert_eq!(
        common::record_files_holding(ws.path(), GH_SECRET),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn a_credential_header_stays_behind_when_a_redirect_leaves_its_origin() {
    let ws = common::workspace();
    let other = echo();
    let to_other = other.url("/landed");
    let first = Server::start("127.0.0.1", move |r| match r.path.as_str() {
        "/start" => Reply::redirect(302, "/same"),
        _ => Reply::redirect(307, &to_other),
    });
    let mut f = grant(&first.origin()).to_vec();
    f.extend(grant(&other.origin()));
    f.extend([
        "--approve".into(),
        format!("cred:use:gh@{}", first.origin()),
    ]);
    let body = format!(
        r#"call("fetch", {{url = {start}, headers = {{authorization = sluice.credential("gh", {{prefix = "token "}}), ["x-gh"] = sluice.credential("gh")}}}})
call("fetch", {{url = {start}, headers = {{accept = sluice.credential("gh")}}}})
"#,
        start = common::lua_str(&first.url("/start")),
    );
    let (lines, _) = run_gh(ws.path(), &flags(&f), &body);
    let out = ok(outcome(lines[0].clone()));
    assert_eq!(out["status"], 200);
    let firsts = first.requests();
    assert_eq!(firsts.len(), 2, "the first origin, twice");
    for r in &firsts {
        assert_eq!(
            r.header("authorization"),
            Some(format!("token {GH_SECRET}").as_str())
        );
        assert_eq!(r.header("x-gh"), Some(GH_SECRET));
    }
    let landed = other.requests();
    assert_eq!(landed.len(), 1);
    assert_eq!(landed[0].header("authorization"), None);
    assert_eq!(landed[0].header("x-gh"), None);
    // A header that follows every hop may not carry one at all.
    let e = err(outcome(lines[1].clone()));
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid_input"), Some("headers.accept"))
    );
    assert_eq!(
        first.requests().len(),
        2,
        "nothing sent for the refused call"
    );
}

#[test]
fn the_default_policy_asks_for_a_credential_and_a_missing_one_says_how_to_set_it() {
    let ws = common::workspace();
    let srv = echo();
    let g = grant(&srv.origin());
    let body = format!(
        "call('http_post', {{url = {u}, body = '{{}}', headers = {{authorization = sluice.credential('gh')}}}})\n",
        u = common::lua_str(&srv.url("/hook"))
    );
    // With net:post approved, the credential still asks.
    let mut f = g.to_vec();
    f.extend(["--approve".into(), format!("net:post:{}", srv.origin())]);
    let (lines, _) = run_gh(ws.path(), &flags(&f), &body);
    let e = err(outcome(lines[0].clone()));
    let cap = format!("cred:use:gh@{}", srv.origin());
    assert_eq!(e["code"], "permission_required", "{e}");
    assert_eq!(e["capability"], cap);
    assert_eq!(e["approve"], format!("--approve '{cap}'"));
    assert_eq!(srv.connections(), 0);
    // Granted, it is sent.
    f.extend(["--approve".into(), cap.clone()]);
    let (lines, _) = run_gh(ws.path(), &flags(&f), &body);
    assert_eq!(ok(outcome(lines[0].clone()))["status"], 200);
    assert_eq!(srv.requests()[0].header("authorization"), Some(GH_SECRET));
    // A credential nobody set: provider_unavailable naming both ways to
    // set it, and nothing is sent.
    let missing = body.replace("credential('gh')", "credential('nope')");
    let f2: Vec<String> = f
        .iter()
        .map(|a| a.replace("cred:use:gh@", "cred:use:nope@"))
        .collect();
    let (lines, _) = run_gh(ws.path(), &flags(&f2), &missing);
    let e = err(outcome(lines[0].clone()));
    assert_eq!(e["code"], "provider_unavailable", "{e}");
    assert_eq!(e["credential"], "nope");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("`headers.authorization` needs credential `nope`, which is not set; set SLUICE_CREDENTIAL_NOPE in sluice's environment, or add the line `nope = YOUR_KEY` to "),
        "{message}"
    );
    assert_eq!(srv.requests().len(), 1);
}
