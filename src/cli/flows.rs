//! `sluice flows`: print the manifest.

use crate::flows::{luadoc, reference, spec_json, Registry};
use clap::Args;
use std::process::ExitCode;

/// List the flows: name, tier, capabilities and what each does.
#[derive(Debug, Args)]
#[command(
    long_about = "List the flows a workflow can call, with each one's tier (sealed: changes nothing; \
compensable: changes files the run can restore; irreversible: cannot be taken back), the capabilities \
its calls need, and a one-line description. Name a flow to see its input and output schemas.",
    after_help = "Examples:\n  sluice flows\n  sluice flows --json\n  sluice flows edit\n  sluice flows --lua > lua/sluice.d.lua\n  sluice flows --markdown > docs/flows.md"
)]
pub struct FlowsArgs {
    /// Show one flow in full, with its input and output schemas.
    pub name: Option<String>,
    /// Print JSON (the whole manifest, with the readOnly set) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print LuaLS annotations of the sluice module, its flows' fields typed from their
    /// schemas (what lua/sluice.d.lua holds), for an editor's Lua language server.
    #[arg(long, conflicts_with_all = ["json", "name"])]
    pub lua: bool,
    /// Print the guide's flow reference (what docs/flows.md holds): each flow's tier,
    /// capabilities, input and output fields, as Markdown.
    #[arg(long, conflicts_with_all = ["json", "name", "lua"])]
    pub markdown: bool,
}

pub fn flows(args: FlowsArgs) -> ExitCode {
    let registry = Registry::standard();
    let text = if let Some(name) = &args.name {
        let Some(flow) = registry.get(name) else {
            let names: Vec<&str> = registry.specs().map(|s| s.name).collect();
            eprintln!(
                "sluice: no flow named {name:?}; the flows are: {}",
                names.join(", ")
            );
            return ExitCode::from(2);
        };
        pretty(&spec_json(flow))
    } else if args.lua {
        luadoc::render(&registry)
    } else if args.markdown {
        reference::render(&registry)
    } else if args.json {
        pretty(&registry.manifest())
    } else {
        table(&registry)
    };
    super::print(&text)
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

fn table(registry: &Registry) -> String {
    let rows: Vec<[String; 4]> = registry
        .specs()
        .map(|s| {
            let caps: Vec<&str> = s.actions.iter().map(|a| a.as_str()).collect();
            [
                s.name.to_string(),
                s.tier.as_str().to_string(),
                caps.join(","),
                s.description.to_string(),
            ]
        })
        .collect();
    let head = ["FLOW", "TIER", "CAPABILITIES", "DESCRIPTION"].map(String::from);
    let width = |i: usize| {
        rows.iter()
            .chain([&head])
            .map(|r| r[i].len())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    // The manifest's `readOnly` set is an embedder's (the flows a host may
    // hand an agent that only looks): `--json` has it; the table does not.
    let mut out = String::new();
    for r in [&head].into_iter().chain(&rows) {
        out += &format!("{:<w0$} {:<w1$} {:<w2$} {}\n", r[0], r[1], r[2], r[3]);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::flows::{conform, Registry};
    use crate::runtime::Runtime;
    use serde_json::{json, Value};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    /// A loopback HTTP server answering `requests` requests, each on its own
    /// connection: SearXNG's JSON under `/search`, a small page elsewhere.
    /// Its origin, `http://127.0.0.1:PORT`.
    fn serve(requests: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for mut conn in listener.incoming().take(requests).flatten() {
                let mut seen = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head, then as much body as it announces.
                while let Ok(n @ 1..) = conn.read(&mut chunk) {
                    seen.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if seen.len() >= end + 4 + length {
                        break;
                    }
                }
                let asked = String::from_utf8_lossy(&seen).to_string();
                let (kind, body) = if asked.contains(" /search?") {
                    let hit = json!({"title": "Lua", "url": "https://www.lua.org/", "content": "a language"});
                    ("application/json", json!({"results": [hit]}).to_string())
                } else if asked.contains(" /v1/chat/completions ") {
                    let call = json!({"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}});
                    let message =
                        json!({"role": "assistant", "content": "Reading.", "tool_calls": [call]});
                    let choice =
                        json!({"index": 0, "message": message, "finish_reason": "tool_calls"});
                    let usage = json!({"prompt_tokens": 20, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}});
                    (
                        "application/json",
                        json!({"model": "m", "choices": [choice], "usage": usage}).to_string(),
                    )
                } else {
                    ("text/html", "<h1>Hello</h1><p>page</p>".to_string())
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        origin
    }

    /// The output schemas `sluice flows` shows hold for what real calls of
    /// every flow return, through the whole pipeline.
    #[test]
    fn real_calls_return_what_the_output_schemas_say() {
        let ws = tempfile::tempdir().unwrap();
        // explore's sub-agent asks for a read on each of its 10 turns.
        let origin = serve(5 + 10);
        // The tests' well-behaved language server, for `lsp`.
        let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lsp");
        std::fs::write(ws.path().join("x.fake"), "one\n").unwrap();
        let policies = tempfile::tempdir().unwrap();
        let lsp_policy = policies.path().join("lsp.lua");
        std::fs::write(&lsp_policy, format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.allow(\"fs:read:{fake}/**\") }}, \
             lsp = {{ fake = {{ command = {{\"/usr/bin/python3\", \"{fake}/fake_server.py\", \"good\"}}, extensions = {{\".fake\"}} }} }} }}\n"
        )).unwrap();
        let searxng = crate::net::search::Searxng::new(origin.parse().unwrap()).unwrap();
        // The default policy, so that commands run confined and report it;
        // loopback is net:private, which only an exact grant opens, and a
        // POST asks.
        let rt = Runtime::builder()
            .workspace(ws.path())
            .search(Arc::new(searxng))
            .approve(format!("net:private:{origin}"))
            .approve(format!("net:post:{origin}"))
            .provider(format!("local=openai:{origin}/v1"))
            .approve("model:call:local/*")
            .explore_model("local/m")
            .test_runner(json!({"command": "printf 'ok 1 - a\\nnot ok 2 - b\\n1..2\\n'; false"}))
            .policy(crate::kernel::policy::shipped("default").unwrap())
            .policy(crate::kernel::policy::Source::File(lsp_policy))
            .build()
            .unwrap();
        let patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch";
        let calls = [
            (
                "write",
                json!({"path": "a.txt", "content": "one\ntwo\nthree\n"}),
            ),
            ("read", json!({"path": "a.txt", "limit": 1})),
            (
                "edit",
                json!({"path": "a.txt", "oldString": "two", "newString": "2"}),
            ),
            ("apply_patch", json!({"input": patch})),
            ("ls", json!({})),
            ("glob", json!({"pattern": "*.txt"})),
            ("grep", json!({"pattern": "one", "context": 1})),
            ("grep", json!({"pattern": "one", "filesWithMatches": true})),
            ("bash", json!({"command": "echo hi; exit 3"})),
            ("bash", json!({"command": "sluice-no-such-program-here"})),
            ("bash", json!({"command": "sleep 30", "background": true})),
            ("shell_command", json!({"command": "echo hi"})),
            ("fetch", json!({"url": format!("{origin}/")})),
            (
                "http-post",
                json!({"url": format!("{origin}/post"), "body": "x"}),
            ),
            ("webfetch", json!({"url": format!("{origin}/page")})),
            ("websearch", json!({"query": "lua"})),
            (
                "model",
                json!({"provider": "local", "model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            ("test", json!({"selection": ["a"]})),
            (
                "lsp",
                json!({"operation": "hover", "path": "x.fake", "line": 1, "character": 1}),
            ),
            (
                "update_plan",
                json!({"plan": [{"step": "look", "status": "in_progress"}]}),
            ),
            ("explore", json!({"prompt": "what is in a.txt?"})),
        ];
        let registry = Registry::standard();
        let called: std::collections::BTreeSet<&str> = calls.iter().map(|(f, _)| *f).collect();
        let every: std::collections::BTreeSet<&str> = registry.specs().map(|s| s.name).collect();
        assert_eq!(called, every, "a real call of every flow");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            for (flow, input) in calls {
                let out: Value = rt
                    .call(flow, input.clone())
                    .await
                    .unwrap_or_else(|e| panic!("{flow} {input}: {e}"));
                let schema = registry.get(flow).unwrap().output_schema();
                let mut seen = conform::Seen::default();
                conform::check(&schema, &out, "#", &mut seen)
                    .unwrap_or_else(|e| panic!("{flow} {input} returned {out}: {e}"));
                if let Some(id) = out["jobId"].as_u64() {
                    rt.job_kill(id).unwrap();
                }
            }
            rt.shutdown().await;
        });
    }
}
