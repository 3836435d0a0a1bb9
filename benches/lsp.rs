//! What sluice adds to a language server: the time from an `edit` to its
//! diagnostics, and a `definition`'s p50, each from Lua through the whole
//! door (the gate, the record in SQLite, the confined server), against a
//! bare LSP client (benches/lsp/bare_client.py: the same server, started
//! unconfined, sent the same change, waiting for the same diagnostics).
//!
//! The server is clangd (it publishes with a version, so neither side
//! waits for a settle time). Targets: edit to diagnostics at most 1.1x the
//! bare client's plus 10 ms; definition p50 at most 1.2x plus 1 ms. Prints
//! one `ratio ...` line per target. Needs /usr/bin/clangd (apt-get install
//! clangd; scripts/test installs it).

use serde_json::{json, Value};
use sluice::Runtime;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const ROUNDS: usize = 30;
const HEADER: &str = "int add(int a, int b);\n";
const GOOD: &str = "#include \"util.h\"\n\nint main(void) { return add(1, 2); }\n";
const BAD: &str = "#include \"util.h\"\n\nint main(void) { return add(1, 2, 3); }\n";
const CLANGD: &str = "/usr/bin/clangd";

fn main() {
    assert!(
        Path::new(CLANGD).exists(),
        "{CLANGD} is missing: apt-get install clangd"
    );
    let (edit_sluice, def_sluice) = sluice_side();
    let (edit_bare, def_bare) = bare_side();
    report("lsp-edit-diagnostics", &edit_sluice, &edit_bare, 1.1, 10.0);
    report("lsp-definition-p50", &def_sluice, &def_bare, 1.2, 1.0);
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("util.h"), HEADER).unwrap();
    std::fs::write(ws.join("main.c"), GOOD).unwrap();
    dir
}

/// Milliseconds of each edit to its diagnostics, and of each definition.
fn sluice_side() -> (Vec<f64>, Vec<f64>) {
    let dir = fixture();
    let ws = std::fs::canonicalize(dir.path().join("ws")).unwrap();
    let policy = dir.path().join("lsp.lua");
    std::fs::write(
        &policy,
        format!("return {{ lsp = {{ c = {{ command = {{\"{CLANGD}\", \"--background-index=false\", \"--log=error\"}}, extensions = {{\".c\", \".h\"}} }} }} }}\n"),
    )
    .unwrap();
    let rt = Runtime::builder()
        .workspace(&ws)
        .audit(dir.path().join("audit.db"))
        .policy(sluice::policy::Source::Embedded {
            name: "policies/default.lua",
            text: include_str!("../policies/default.lua"),
        })
        .policy(sluice::policy::Source::File(policy))
        .build()
        .expect("a runtime with clangd declared");
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call = rt
        .function("return function(flow, input) local r, e = sluice.call(flow, sluice.json.decode(input)) if not r then error(sluice.json.encode(e)) end return sluice.json.encode(r) end")
        .unwrap();
    let run = |flow: &str, input: Value| -> (f64, Value) {
        let start = Instant::now();
        let out: String = executor
            .block_on(call.call_async((flow.to_string(), rt_value(&input))))
            .unwrap_or_else(|e| panic!("{flow}: {e}"));
        (
            start.elapsed().as_secs_f64() * 1000.0,
            serde_json::from_str(&out).unwrap(),
        )
    };
    // The first diagnostics start the server and build the file.
    let (_, first) = run("lsp", json!({"operation": "diagnostics", "path": "main.c"}));
    assert_eq!(first["result"], json!([]), "{first}");
    let mut edits = Vec::new();
    for i in 0..ROUNDS {
        let (from, to, status) = if i % 2 == 0 {
            ("add(1, 2)", "add(1, 2, 3)", "errors")
        } else {
            ("add(1, 2, 3)", "add(1, 2)", "clean")
        };
        let (ms, out) = run(
            "edit",
            json!({"path": "main.c", "oldString": from, "newString": to}),
        );
        assert_eq!(out["diagnostics"]["status"], status, "{out}");
        edits.push(ms);
    }
    let mut defs = Vec::new();
    for _ in 0..ROUNDS {
        let (ms, out) = run(
            "lsp",
            json!({"operation": "definition", "path": "main.c", "line": 3, "character": 25}),
        );
        assert_eq!(out["result"][0]["uri"], "util.h", "{out}");
        defs.push(ms);
    }
    executor.block_on(rt.shutdown());
    (edits, defs)
}

fn rt_value(input: &Value) -> String {
    input.to_string()
}

/// The bare client's milliseconds for the same edits and definitions.
fn bare_side() -> (Vec<f64>, Vec<f64>) {
    let dir = fixture();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/lsp/bare_client.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(dir.path().join("ws"))
        .args(["c", CLANGD, "--background-index=false", "--log=error"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs the bare client");
    let mut to = child.stdin.take().unwrap();
    let mut from = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |cmd: Value| -> Value {
        writeln!(to, "{cmd}").unwrap();
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    ask(json!({"op": "change", "path": "main.c", "text": GOOD, "expect": ""}));
    let mut edits = Vec::new();
    for i in 0..ROUNDS {
        let (text, expect) = if i % 2 == 0 {
            (BAD, "Too many arguments")
        } else {
            (GOOD, "")
        };
        edits.push(
            ask(json!({"op": "change", "path": "main.c", "text": text, "expect": expect}))["ms"]
                .as_f64()
                .unwrap(),
        );
    }
    let mut defs = Vec::new();
    for _ in 0..ROUNDS {
        let out = ask(json!({"op": "definition", "path": "main.c", "line": 2, "character": 24}));
        defs.push(out["ms"].as_f64().unwrap());
    }
    drop(to);
    let _ = child.kill();
    let _ = child.wait();
    (edits, defs)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn report(name: &str, sluice: &[f64], bare: &[f64], factor: f64, plus_ms: f64) {
    let (s, b) = (median(sluice), median(bare));
    let met = s <= b * factor + plus_ms;
    println!(
        "ratio {name}: sluice {s:.2} ms, bare client {b:.2} ms, {:.2}x (target {factor}x + {plus_ms} ms: {})",
        s / b,
        if met { "met" } else { "missed" }
    );
}
