//! What a model call costs, side by side in one run against one loopback
//! server (keep-alive HTTP/1.1, a canned Chat Completions reply):
//!
//! - `model-200`: 200 non-streamed `sluice.model` calls from one script
//!   (the run recorded, as by default), against 200
//!   `client.chat.completions.create` calls of the official `openai` Python
//!   package (installed from PyPI into target/peers/python by
//!   scripts/bench). Each side times its own loop, after one warm-up call,
//!   so neither pays for its start. Target: sluice at most 1.0x. A line
//!   with `--no-audit` follows as information.
//! - `model-record-50`: the audit database of a 50-turn recorded
//!   conversation (each turn sends the whole conversation so far, as an
//!   agent loop does), against the total size of its distinct messages.
//!   Target: at most 2x.
//!
//! Not a criterion bench: each sample is a process and a few hundred
//! requests. BENCHMARKS.md has the figures.

mod support;

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 200;
const TURNS: usize = 50;
const SAMPLES: usize = 5;

fn main() {
    let wanted = support::wanted();
    let server = serve();
    if wanted("model-200") {
        model_calls(&server);
    }
    if wanted("model-record-50") {
        record_size(&server);
    }
}

/// The loopback server's base URL (`http://127.0.0.1:PORT/v1`).
struct Server {
    url: String,
    origin: String,
}

/// A keep-alive server answering every POST with one reply: text that
/// names how many messages the request held, so a conversation's turns
/// differ.
fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer_all(conn));
        }
    });
    Server {
        url: format!("{origin}/v1"),
        origin,
    }
}

fn answer_all(conn: TcpStream) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let Some(body) = support::next_request_body(&mut reader) else {
            return;
        };
        let turns = String::from_utf8_lossy(&body).matches("\"role\"").count();
        let reply = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "bench-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": format!("Noted; that makes {turns} messages so far, and the plan stands.")}}],
            "usage": {"prompt_tokens": 12 * turns, "completion_tokens": 12, "total_tokens": 12 * turns + 12},
        })
        .to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn model_calls(server: &Server) {
    let dir = tempfile::tempdir().unwrap();
    let lua = dir.path().join("calls.lua");
    std::fs::write(&lua, SLUICE_LOOP).unwrap();
    let py = dir.path().join("calls.py");
    std::fs::write(&py, PYTHON_LOOP).unwrap();
    let peers = python_peers();
    let (mut ours, mut quiet, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        let ws = tempfile::tempdir().unwrap();
        ours.push(seconds(&mut sluice(&lua, ws.path(), server, true)));
        let ws = tempfile::tempdir().unwrap();
        quiet.push(seconds(&mut sluice(&lua, ws.path(), server, false)));
        let mut c = Command::new("python3");
        c.arg(&py)
            .arg(&server.url)
            .arg(CALLS.to_string())
            .env("PYTHONPATH", &peers);
        theirs.push(seconds(&mut c));
    }
    let (a, q, b) = (median(&mut ours), median(&mut quiet), median(&mut theirs));
    let ratio = a.as_secs_f64() / b.as_secs_f64();
    println!(
        "model-200: sluice {:.1} ms ({:.2} ms/call), --no-audit {:.1} ms, openai (Python) {:.1} ms",
        ms(a),
        ms(a) / CALLS as f64,
        ms(q),
        ms(b)
    );
    println!(
        "ratio model-200 {ratio:.2}x openai-python (target <= 1.0x: {})",
        verdict(ratio <= 1.0)
    );
    println!(
        "info model-200 --no-audit {:.2}x openai-python",
        q.as_secs_f64() / b.as_secs_f64()
    );
}

fn record_size(server: &Server) {
    let (size, distinct) = recorded(server, 2048);
    let ratio = size as f64 / distinct as f64;
    println!(
        "model-record-50: audit database {size} bytes for {TURNS} turns of 2 KiB results, distinct messages {distinct} bytes"
    );
    println!(
        "ratio model-record-50 {ratio:.2}x distinct messages (target <= 2x: {})",
        verdict(ratio <= 2.0)
    );
    // Each call's row (its hashes, decisions, output) costs about 1.2 KiB
    // whatever its messages, and the file has pages of its own: the
    // smaller the messages, the more that shows.
    for bytes in [150, 8192] {
        let (size, distinct) = recorded(server, bytes);
        println!(
            "info model-record-50 with {bytes}-byte messages: {size} bytes, {:.2}x its distinct messages ({distinct} bytes)",
            size as f64 / distinct as f64
        );
    }
}

/// The database size and the distinct messages' size of a recorded
/// conversation whose every turn adds a message of `bytes` bytes.
fn recorded(server: &Server, bytes: usize) -> (u64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let lua = dir.path().join("talk.lua");
    std::fs::write(&lua, CONVERSATION).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = sluice(&lua, ws.path(), server, true);
    cmd.arg(bytes.to_string());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let distinct: usize = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("distinct "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the script prints the distinct messages' size");
    let db = ws.path().join(".sluice/audit.db");
    (
        file_size(&db) + file_size(&db.with_extension("db-wal")),
        distinct,
    )
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// The `sluice run` of `lua` against `server`.
fn sluice(lua: &Path, ws: &Path, server: &Server, audit: bool) -> Command {
    let mut c = Command::new(SLUICE);
    c.arg("run")
        .arg(lua)
        .arg("--workspace")
        .arg(ws)
        .arg("--provider")
        .arg(format!("bench=openai:{}", server.url))
        .args(["--approve", "model:call:bench/*"])
        .arg("--approve")
        .arg(format!("net:private:{}", server.origin));
    if !audit {
        c.arg("--no-audit");
    }
    c.arg("--").arg(CALLS.to_string());
    c
}

/// Runs `cmd`; the seconds its loop took, as the last line of its output.
fn seconds(cmd: &mut Command) -> Duration {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let secs: f64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{cmd:?} printed no time: {text}"));
    Duration::from_secs_f64(secs)
}

/// Where scripts/bench installed the `openai` package.
fn python_peers() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/python");
    assert!(
        dir.join("openai").is_dir(),
        "the openai Python package is missing: run scripts/bench (it installs it with \
         `python3 -m pip install --target target/peers/python openai`)"
    );
    dir
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

const SLUICE_LOOP: &str = r#"
local n = tonumber(sluice.args[1])
local input = {provider = "bench", model = "bench-model", messages = {{role = "user", content = "Say hi."}}}
assert(sluice.model(input))
local started = sluice.now()
for _ = 1, n do
  local out, err = sluice.model(input)
  assert(out and out.text ~= "", tostring(err))
end
print((sluice.now() - started) / 1000)
"#;

const PYTHON_LOOP: &str = r#"
import sys, time
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-bench", max_retries=0)
n = int(sys.argv[2])
messages = [{"role": "user", "content": "Say hi."}]
client.chat.completions.create(model="bench-model", messages=messages)
started = time.perf_counter()
for _ in range(n):
    out = client.chat.completions.create(model="bench-model", messages=messages)
    assert out.choices[0].message.content
print(time.perf_counter() - started)
"#;

/// A conversation of `TURNS` turns, each a model call with every message
/// so far, as an agent loop makes them: each turn adds a message of
/// `sluice.args[2]` bytes (what a tool returns: a page of a file, a test
/// run's output), then the model's reply. It prints the total size of the
/// distinct messages (their compact JSON), then a time for `seconds`.
const CONVERSATION: &str = r#"
local size = tonumber(sluice.args[2])
local messages, distinct = {}, 0
local function add(m)
  messages[#messages + 1] = m
  distinct = distinct + #sluice.json.encode(m)
end
local started = sluice.now()
for turn = 1, 50 do
  local lines = {}
  local n = 0
  while n < size do
    local line = ("%04d: local value_%d = compute(%d, %q) -- step %d of turn %d"):format(#lines + 1, n, n * turn, "item", #lines, turn)
    lines[#lines + 1] = line
    n = n + #line + 1
  end
  add({role = "user", content = table.concat(lines, "\n"):sub(1, size)})
  local out = assert(sluice.model{provider = "bench", model = "bench-model", messages = messages})
  add({role = "assistant", content = out.text})
end
print("distinct " .. distinct)
print((sluice.now() - started) / 1000)
"#;
