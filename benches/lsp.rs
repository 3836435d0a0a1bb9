//! What sluice adds to a language server: the time from an `edit` to its
//! diagnostics, and a `definition`'s p50, each from Lua through the whole
//! door (the gate, the record in SQLite, the confined server), against a
//! bare LSP client (benches/lsp/bare_client.py: the same server, started
//! unconfined, sent the same change, waiting for the same diagnostics).
//!
//! Two servers: clangd, which publishes diagnostics with a version, and
//! typescript-language-server, which publishes them without one (sluice
//! then takes what it published first after the change, never a fixed
//! settle time). Targets: edit to diagnostics at most 1.1x the bare
//! client's plus 10 ms; definition p50 at most 1.2x plus 1 ms. Prints one
//! `ratio ...` line per target and server. Needs /usr/bin/clangd
//! (apt-get install clangd) and target/peers/lsp's typescript-language-
//! server (scripts/test installs both).

use serde_json::{json, Value};
use sluice::Runtime;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const ROUNDS: usize = 30;
const CLANGD: &str = "/usr/bin/clangd";

/// One server's fixture: a header the main file uses, the main file good
/// and with an error, and where its use of the header's function is.
struct Case {
    name: &'static str,
    language: &'static str,
    command: Vec<String>,
    extensions: &'static [&'static str],
    header: (&'static str, &'static str),
    main: &'static str,
    good: &'static str,
    bad: &'static str,
    /// The error's message contains this.
    expect: &'static str,
    /// The call's good and bad spellings, for `edit`.
    call: (&'static str, &'static str),
    /// The use of the header's function, 1-based (line, character).
    use_at: (u64, u64),
    /// Other files the server needs.
    extra: &'static [(&'static str, &'static str)],
}

fn clangd() -> Case {
    assert!(
        Path::new(CLANGD).exists(),
        "{CLANGD} is missing: apt-get install clangd"
    );
    Case {
        name: "clangd",
        language: "c",
        command: [CLANGD, "--background-index=false", "--log=error"]
            .map(String::from)
            .to_vec(),
        extensions: &[".c", ".h"],
        header: ("util.h", "int add(int a, int b);\n"),
        main: "main.c",
        good: "#include \"util.h\"\n\nint main(void) { return add(1, 2); }\n",
        bad: "#include \"util.h\"\n\nint main(void) { return add(1, 2, 3); }\n",
        expect: "Too many arguments",
        call: ("add(1, 2)", "add(1, 2, 3)"),
        use_at: (3, 25),
        extra: &[],
    }
}

fn typescript() -> Case {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/peers/lsp/node_modules/.bin/typescript-language-server");
    assert!(
        server.exists(),
        "{} is missing: npm install --prefix target/peers/lsp typescript-language-server@5.1.3 typescript@5.9.3",
        server.display()
    );
    Case {
        name: "typescript",
        language: "typescript",
        command: vec![server.display().to_string(), "--stdio".into()],
        extensions: &[".ts"],
        header: (
            "lib.ts",
            "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
        ),
        main: "main.ts",
        good: "import { add } from \"./lib\";\n\nexport const total: number = add(1, 2);\n",
        bad: "import { add } from \"./lib\";\n\nexport const total: number = add(1, \"2\");\n",
        expect: "Argument of type",
        call: ("add(1, 2)", "add(1, \"2\")"),
        use_at: (3, 30),
        extra: &[(
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}}\n",
        )],
    }
}

fn main() {
    for case in [clangd(), typescript()] {
        let (edit_sluice, def_sluice) = sluice_side(&case);
        let (edit_bare, def_bare) = bare_side(&case);
        let name = case.name;
        report(
            &format!("lsp-edit-diagnostics ({name})"),
            &edit_sluice,
            &edit_bare,
            1.1,
            10.0,
        );
        report(
            &format!("lsp-definition-p50 ({name})"),
            &def_sluice,
            &def_bare,
            1.2,
            1.0,
        );
    }
}

fn fixture(case: &Case) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(case.header.0), case.header.1).unwrap();
    std::fs::write(ws.join(case.main), case.good).unwrap();
    for (name, text) in case.extra {
        std::fs::write(ws.join(name), text).unwrap();
    }
    dir
}

/// Milliseconds of each edit to its diagnostics, and of each definition.
fn sluice_side(case: &Case) -> (Vec<f64>, Vec<f64>) {
    let dir = fixture(case);
    let ws = std::fs::canonicalize(dir.path().join("ws")).unwrap();
    let policy = dir.path().join("lsp.lua");
    let lua_list = |items: &[String]| {
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let command = lua_list(&case.command);
    let extensions = lua_list(
        &case
            .extensions
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
    );
    // The server's own files (node_modules) are readable to it.
    let reads = Path::new(&case.command[0])
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string();
    std::fs::write(
        &policy,
        format!("local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.allow(\"fs:read:{reads}/**\") }}, lsp = {{ s = {{ command = {{{command}}}, extensions = {{{extensions}}} }} }} }}\n"),
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
        .expect("a runtime with the server declared");
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
    let (_, first) = run(
        "lsp",
        json!({"operation": "diagnostics", "path": case.main}),
    );
    assert_eq!(first["result"], json!([]), "{first}");
    let mut edits = Vec::new();
    for i in 0..ROUNDS {
        let (from, to, status) = if i % 2 == 0 {
            (case.call.0, case.call.1, "errors")
        } else {
            (case.call.1, case.call.0, "clean")
        };
        let (ms, out) = run(
            "edit",
            json!({"path": case.main, "oldString": from, "newString": to}),
        );
        assert_eq!(out["diagnostics"]["status"], status, "{out}");
        edits.push(ms);
    }
    let mut defs = Vec::new();
    for _ in 0..ROUNDS {
        let (ms, out) = run(
            "lsp",
            json!({"operation": "definition", "path": case.main, "line": case.use_at.0, "character": case.use_at.1}),
        );
        let target = &out["result"][0];
        let uri = target.get("uri").or(target.get("targetUri"));
        assert!(uri.is_some(), "{out}");
        defs.push(ms);
    }
    executor.block_on(rt.shutdown());
    (edits, defs)
}

fn rt_value(input: &Value) -> String {
    input.to_string()
}

/// The bare client's milliseconds for the same edits and definitions.
fn bare_side(case: &Case) -> (Vec<f64>, Vec<f64>) {
    let dir = fixture(case);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/lsp/bare_client.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(dir.path().join("ws"))
        .arg(case.language)
        .args(&case.command)
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
    ask(json!({"op": "change", "path": case.main, "text": case.good, "expect": ""}));
    let mut edits = Vec::new();
    for i in 0..ROUNDS {
        let (text, expect) = if i % 2 == 0 {
            (case.bad, case.expect)
        } else {
            (case.good, "")
        };
        edits.push(
            ask(json!({"op": "change", "path": case.main, "text": text, "expect": expect}))["ms"]
                .as_f64()
                .unwrap(),
        );
    }
    let mut defs = Vec::new();
    for _ in 0..ROUNDS {
        let (line, character) = (case.use_at.0 - 1, case.use_at.1 - 1);
        let out = ask(
            json!({"op": "definition", "path": case.main, "line": line, "character": character}),
        );
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
