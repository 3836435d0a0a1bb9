//! `sluice audit serve`'s JSON, on both stores: the filters and the search
//! select exactly the calls they name (the search taking `%` and `_`
//! literally, in any case, in inputs, outputs and errors), pages are
//! exact, a call carries its diff and the policy line of its rule, a bad
//! filter is refused naming the field. The page itself is driven in a
//! browser by tests/viewer.rs.

mod common;

use common::{policy, run_lua_with, workspace, Workspace};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// A running `sluice audit serve`, killed when dropped.
struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(ws: &Workspace) -> Server {
    serve_with(ws, common::stores::current_env())
}

fn serve_with(ws: &Workspace, env: Vec<(&'static str, String)>) -> Server {
    let mut child = Command::new(common::sluice_bin())
        .args(["audit", "serve", "--http", "127.0.0.1:0", "--workspace"])
        .arg(ws.path())
        .envs(env)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice audit serve");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    Server { child, addr }
}

/// `GET path`: the status and the body.
fn get(s: &Server, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(&s.addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        s.addr
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}

fn json(s: &Server, path: &str) -> Value {
    let (status, body) = get(s, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The `n` of each call a calls answer holds.
fn ns(v: &Value) -> Vec<i64> {
    v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["n"].as_i64().unwrap())
        .collect()
}

const POLICY: &str = "local p = require(\"sluice.policy\")
return { rules = {
  p.programs,
  p.allow \"fs:*:${workspace}/**\",
  p.allow \"proc:spawn:printf *\",
  p.deny(\"proc:spawn:git push *\", \"no pushing\"),
}, otherwise = \"deny\" }
";

/// A run of 8 calls: writes, an edit, commands whose outputs hold the
/// search's needles, a denied push.
const SCRIPT: &str = "sluice.write{path = 'a.txt', content = 'one\\ntwo\\n'}
sluice.edit{path = 'a.txt', oldString = 'two', newString = 'TWO'}
sluice.bash{command = 'printf \"Needle in OUTPUT\"'}
sluice.bash{command = 'printf \"50%_off\"'}
sluice.bash{command = 'printf \"500 off\"'}
sluice.bash{command = 'git push origin main'}
sluice.write{path = 'b.txt', content = 'needle in an input'}
sluice.read{path = 'missing.txt'}
";

fn recorded() -> (Workspace, String) {
    let ws = workspace();
    let p = policy(&ws, "p.lua", POLICY);
    run_lua_with(ws.path(), SCRIPT, &["--policy", &p], &[]).ok();
    let list = common::sluice_in(ws.path(), &["audit", "list", "--json"]);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    let id = v["runs"][0]["id"].as_str().unwrap().to_string();
    (ws, id)
}

both_stores! {
    fn filters_search_and_pages_select_exactly_the_calls_they_name(store) {
        let (ws, id) = recorded();
        let s = serve(&ws);
        let runs = json(&s, "/api/runs");
        assert_eq!(runs["total"], 1);
        assert_eq!(runs["runs"][0]["id"], id.as_str());
        assert_eq!(runs["runs"][0]["calls"], 8);
        assert_eq!(runs["runs"][0]["denials"], 1);
        assert_eq!(runs["runs"][0]["worker"], common::hostname().as_str());
        let calls = |q: &str| json(&s, &format!("/api/runs/{id}/calls?{q}"));
        assert_eq!(ns(&calls("")), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ns(&calls("flow=write")), [1, 7]);
        assert_eq!(ns(&calls("tier=irreversible")), [3, 4, 5, 6]);
        assert_eq!(ns(&calls("decision=deny")), [6]);
        assert_eq!(ns(&calls("outcome=error")), [6, 8]);
        // Any case, in an output (3) and an input (7).
        assert_eq!(ns(&calls("q=NEEDLE")), [3, 7]);
        // `%` and `_` are themselves, not LIKE's wildcards: 500 off is not found.
        assert_eq!(ns(&calls("q=50%25_")), [4]);
        // In an error.
        assert_eq!(ns(&calls("q=no%20pushing")), [6]);
        let page = calls("offset=2&limit=3");
        assert_eq!((page["total"].as_i64(), ns(&page)), (Some(8), vec![3, 4, 5]));
        let both = calls("flow=bash&outcome=ok&limit=1&offset=1");
        assert_eq!((both["total"].as_i64(), ns(&both)), (Some(3), vec![4]));
        let (status, body) = get(&s, &format!("/api/runs/{id}/calls?tier=free"));
        assert_eq!(
            (status, body.as_str()),
            (400, "tier=\"free\" is not a filter value; tier takes sealed, compensable or irreversible")
        );
    }

    fn a_call_carries_its_diff_its_streams_and_the_line_of_the_rule_that_decided(store) {
        let (ws, id) = recorded();
        let s = serve(&ws);
        let edit = json(&s, &format!("/api/runs/{id}/calls/2"));
        assert_eq!(
            edit["diff"],
            serde_json::json!([{"file": "a.txt", "lines": [["del", "two"], ["add", "TWO"]]}])
        );
        let out = json(&s, &format!("/api/runs/{id}/calls/3"));
        assert_eq!(out["streams"]["stdout"], "Needle in OUTPUT");
        let denied = json(&s, &format!("/api/runs/{id}/calls/6"));
        let d = &denied["decisions"][0];
        assert_eq!(d["decision"], "deny");
        let file = ws.path().parent().unwrap().join("policies/p.lua");
        let by = format!("deny \"proc:spawn:git push *\" (rules[4] of {})", file.display());
        assert_eq!(d["by"], by.as_str());
        assert_eq!(d["source"], format!("{}:6", file.display()).as_str());
        assert_eq!(json(&s, &format!("/api/runs/{id}/verify"))["intact"], true);
        let state = json(&s, &format!("/api/runs/{id}/state"));
        assert_eq!(state, serde_json::json!({"status": "ok", "calls": 8}));
        let (status, body) = get(&s, "/api/runs/nosuch/calls/1");
        assert_eq!(status, 404);
        assert!(body.contains("`sluice audit list` shows the runs"), "{body}");
    }
}

/// Where each decision's `source` points: a rule's own line, a `decide`
/// hook's definition, and none for a rule `sluice.policy` made as it
/// loaded (`p.programs`), which no line of the policy wrote.
#[test]
fn a_decision_names_the_line_of_its_rule_or_hook_and_none_for_a_built_in_group() {
    let ws = workspace();
    let text = "local p = require(\"sluice.policy\")
return {
  rules = {
    p.programs,
    p.allow \"fs:*:${workspace}/**\",
  },
  decide = function(req)
    if req.capability:find(\"secret\", 1, true) then return \"deny\" end
  end,
  otherwise = \"deny\",
}
";
    let p = policy(&ws, "hooks.lua", text);
    let script = "sluice.write{path = 'a.txt', content = 'x'}\n\
                  sluice.write{path = 'secret.txt', content = 'x'}\n\
                  sluice.ls{path = '/usr'}\n";
    run_lua_with(ws.path(), script, &["--policy", &p], &[]).ok();
    let calls = common::exported_calls(ws.path());
    let source = |n: usize, cap: &str| {
        calls[n]["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["capability"].as_str().unwrap().starts_with(cap))
            .unwrap_or_else(|| panic!("no decision on {cap} in {}", calls[n]))["source"]
            .clone()
    };
    assert_eq!(source(0, "fs:write:"), Value::String(format!("{p}:5")));
    assert_eq!(source(1, "fs:write:"), Value::String(format!("{p}:7")));
    // /usr is one of the system trees p.programs lets flows read.
    assert_eq!(calls[2]["status"], "ok", "{}", calls[2]);
    assert_eq!(source(2, "fs:read:/usr"), Value::Null);
}

/// PostgreSQL restarted under a running viewer: the request on the broken
/// connection is answered 503 naming the store (never "no such run"), and
/// the next one reads through a fresh connection.
#[test]
fn a_restarted_postgresql_costs_at_most_one_answer_and_the_viewer_reads_on() {
    let mut pg = common::postgres::PgServer::start();
    let url = pg.fresh_database();
    let env = vec![
        ("SLUICE_AUDIT", url),
        ("SLUICE_CREDENTIAL_AUDIT", pg.password().to_string()),
    ];
    let ws = workspace();
    let script = common::script_file(ws.path(), "sluice.write{path = 'a.txt', content = 'x'}\n");
    let ran = Command::new(common::sluice_bin())
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .envs(env.clone())
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let s = serve_with(&ws, env);
    assert_eq!(json(&s, "/api/runs")["total"], 1);
    pg.restart();
    // The pooled connection died with the server.
    let (status, body) = get(&s, "/api/runs");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("reading the audit database"), "{body}");
    assert_eq!(json(&s, "/api/runs")["total"], 1);
}
