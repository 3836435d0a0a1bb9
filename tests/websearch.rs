//! `sluice.websearch` driven through the real binary against scripted
//! loopback HTTP servers standing in for Exa and SearXNG: the exact request
//! each provider receives, how results map, how provider failures map onto
//! the standard codes, where the key comes from, and that it never shows up
//! in an error.

mod common;

use common::http::{read_request, Req};
use common::{script_file, sluice_bin, workspace, Run, EMIT};
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// A key distinctive enough that any leak is found by a substring search.
const KEY: &str = "exa-KEY-d3adb33f-never-shown";

/// What the server answers, in order, one per connection.
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn reply(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.into(),
    }
}

/// A loopback HTTP/1.1 server answering each connection with the next
/// scripted reply, recording what it received.
struct Server {
    port: u16,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Server {
    fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        std::thread::spawn(move || {
            for r in replies {
                let Ok((mut conn, _)) = listener.accept() else {
                    return;
                };
                let Some(req) = read_request(&mut conn) else {
                    continue;
                };
                seen.lock().unwrap().push(req);
                let mut head = format!(
                    "HTTP/1.1 {} Scripted\r\ncontent-length: {}\r\nconnection: close\r\n",
                    r.status,
                    r.body.len()
                );
                for (k, v) in &r.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(r.body.as_bytes());
                let _ = conn.flush();
            }
        });
        Server { port, log }
    }

    fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Runs `body` (with `emit`) under `flags`, with `env` on the sluice process
/// and no ambient Exa key.
fn run(ws: &Path, body: &str, flags: &[String], env: &[(&str, &str)]) -> Run {
    let path = script_file(ws, &format!("{EMIT}{body}"));
    Command::new(sluice_bin())
        .arg("run")
        .arg(&path)
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .env_remove("SLUICE_CREDENTIAL_EXA")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("spawn sluice")
        .into()
}

/// Each stdout line of a run that must succeed, as JSON.
fn lines(run: Run) -> Vec<Value> {
    run.ok()
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Lua that calls websearch once per input and emits the result or error.
fn calls(inputs: &[&str]) -> String {
    inputs
        .iter()
        .map(|i| format!("do local r, e = sluice.websearch({i}); emit(r or e) end\n"))
        .collect()
}

/// The flags binding `provider=ORIGIN/path` with the grants a loopback
/// provider needs; the credentials file is one that does not exist unless
/// given.
fn flags(provider: &str, server: &Server, path: &str, credentials: &Path) -> Vec<String> {
    vec![
        "--search".into(),
        format!("{provider}={}{path}", server.origin()),
        "--approve".into(),
        format!("net:private:{}", server.origin()),
        "--approve".into(),
        "net:post:*".into(),
        "--credentials".into(),
        credentials.display().to_string(),
    ]
}

fn nowhere(ws: &Path) -> std::path::PathBuf {
    ws.parent().unwrap().join("no-credentials")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn exa_gets_the_documented_request_and_its_results_map() {
    let ws = workspace();
    let long = "é".repeat(2_500);
    let results = json!({"results": [
        {"title": "Text wins", "url": "https://a.example/1", "publishedDate": "2024-05-01T00:00:00.000Z",
         "text": "  the text  ", "highlights": ["a highlight"], "summary": "a summary"},
        {"title": "Highlight next", "url": "https://a.example/2", "publishedDate": null,
         "text": "", "highlights": ["", "first real highlight"], "summary": "a summary"},
        {"title": "Summary last", "url": "https://a.example/3", "summary": "only the summary"},
        {"title": null, "url": "https://a.example/4", "text": long},
        {"title": "No URL, dropped", "text": "x"}
    ]});
    let server = Server::start(vec![
        reply(200, results.to_string()),
        reply(200, json!({"results": []}).to_string()),
    ]);
    let before = now();
    let out = lines(run(
        ws.path(),
        &calls(&[
            r#"{query = "rust async traits"}"#,
            r#"{query = "lua coroutines", numResults = 3, freshness = "week"}"#,
        ]),
        &flags("exa", &server, "/search", &nowhere(ws.path())),
        &[("SLUICE_CREDENTIAL_EXA", KEY)],
    ));
    let after = now();

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let first = &reqs[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.target, "/search");
    assert_eq!(first.header("x-api-key"), Some(KEY));
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(
        first.json(),
        json!({"query": "rust async traits", "numResults": 8, "type": "auto",
               "contents": {"text": {"maxCharacters": 2000}}})
    );
    let second = reqs[1].json();
    assert_eq!(second["query"], "lua coroutines");
    assert_eq!(second["numResults"], 3);
    let start = second["startPublishedDate"].as_str().unwrap();
    let week = 7 * 86_400;
    let lo = sluice::internals::search::rfc3339(before - week);
    let hi = sluice::internals::search::rfc3339(after - week);
    assert!(
        lo.as_str() <= start && start <= hi.as_str(),
        "{start} not in {lo}..{hi}"
    );

    let hits = out[0]["results"].as_array().unwrap();
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert_eq!(
        hits[0],
        json!({"title": "Text wins", "url": "https://a.example/1", "snippet": "the text",
               "publishedAt": "2024-05-01T00:00:00.000Z"})
    );
    assert_eq!(
        hits[1],
        json!({"title": "Highlight next", "url": "https://a.example/2", "snippet": "first real highlight"})
    );
    assert_eq!(hits[2]["snippet"], "only the summary");
    assert_eq!(hits[3]["title"], "");
    let snippet = hits[3]["snippet"].as_str().unwrap();
    assert_eq!(snippet.chars().count(), 2_000);
    assert!(snippet.chars().all(|c| c == 'é'));
    assert!(hits[3].get("publishedAt").is_none());
}

#[test]
fn exa_failures_map_to_the_standard_codes_and_never_show_the_key() {
    let ws = workspace();
    let mut limited = reply(429, "{}");
    limited.headers.push(("retry-after", "42".into()));
    let mut unavailable_later = reply(503, "{}");
    unavailable_later.headers.push(("retry-after", "7".into()));
    let server = Server::start(vec![
        limited,
        reply(429, "slow down"),
        reply(401, format!("{{\"error\": \"bad key {KEY}\"}}")),
        reply(403, "{}"),
        reply(503, format!("down, your key was {KEY}")),
        unavailable_later,
        reply(418, format!("{{\"error\": \"teapot saw {KEY}\"}}")),
        reply(200, format!("not json {KEY}")),
        reply(200, json!({"results": KEY}).to_string()),
    ]);
    let run = run(
        ws.path(),
        &calls(&[r#"{query = "q"}"#; 9]),
        &flags("exa", &server, "/search", &nowhere(ws.path())),
        &[("SLUICE_CREDENTIAL_EXA", KEY)],
    );
    assert!(!run.stdout.contains(KEY), "{}", run.stdout);
    assert!(!run.stderr.contains(KEY), "{}", run.stderr);
    let out = lines(run);
    assert_eq!(server.requests().len(), 9);
    for r in server.requests() {
        assert_eq!(r.header("x-api-key"), Some(KEY));
    }
    let codes: Vec<&str> = out.iter().map(|e| e["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "rate_limited",
            "rate_limited",
            "provider_unavailable",
            "provider_unavailable",
            "provider_unavailable",
            "rate_limited",
            "request_failed",
            "request_failed",
            "request_failed"
        ]
    );
    assert_eq!(
        out[0],
        json!({"code": "rate_limited", "message": "exa is limiting requests (HTTP 429); retry after 42 seconds",
               "provider": "exa", "status": 429, "retryAfter": 42})
    );
    assert_eq!(
        out[1]["message"],
        "exa is limiting requests (HTTP 429); wait a while before retrying"
    );
    assert!(out[1].get("retryAfter").is_none());
    for (e, status) in [(&out[2], 401), (&out[3], 403)] {
        assert_eq!(
            e["message"],
            format!(
                "the provider refused the key in credential `exa` (HTTP {status}); check the key, \
                 then set it again with SLUICE_CREDENTIAL_EXA or in the credentials file"
            )
        );
        assert_eq!(e["status"], status);
    }
    assert_eq!(
        out[4]["message"],
        "exa is unavailable: it answered HTTP 503; try again later"
    );
    assert_eq!(out[4]["status"], 503);
    assert_eq!(
        out[5]["retryAfter"], 7,
        "Retry-After on a 5xx is a rate limit"
    );
    assert_eq!(
        out[6]["message"],
        "exa refused the search with HTTP 418: {\"error\": \"teapot saw [redacted]\"}"
    );
    assert_eq!(out[6]["status"], 418);
    for e in &out[7..] {
        let m = e["message"].as_str().unwrap();
        assert!(
            m.starts_with("exa answered HTTP 200 with a body that is not its search results JSON"),
            "{m}"
        );
    }
}

#[test]
fn an_answer_over_5_mib_is_response_too_large() {
    let ws = workspace();
    let server = Server::start(vec![reply(200, "x".repeat(5 * 1024 * 1024 + 1))]);
    let out = lines(run(
        ws.path(),
        &calls(&[r#"{query = "q"}"#]),
        &flags("exa", &server, "/search", &nowhere(ws.path())),
        &[("SLUICE_CREDENTIAL_EXA", KEY)],
    ));
    assert_eq!(out[0]["code"], "response_too_large");
    assert_eq!(out[0]["limit"], 5 * 1024 * 1024);
}

#[test]
fn the_key_can_come_from_a_0600_credentials_file() {
    let ws = workspace();
    let file = ws.path().parent().unwrap().join("credentials");
    std::fs::write(&file, format!("# search\nexa = {KEY}-from-file\n")).unwrap();
    set_mode(&file, 0o600);
    let server = Server::start(vec![reply(
        200,
        json!({"results": [{"title": "t", "url": "https://u.example/", "text": "s"}]}).to_string(),
    )]);
    let out = lines(run(
        ws.path(),
        &calls(&[r#"{query = "q", numResults = 1}"#]),
        &flags("exa", &server, "/search", &file),
        &[],
    ));
    assert_eq!(
        out[0],
        json!({"results": [{"title": "t", "url": "https://u.example/", "snippet": "s"}]})
    );
    let key = format!("{KEY}-from-file");
    assert_eq!(server.requests()[0].header("x-api-key"), Some(key.as_str()));
}

#[test]
fn a_credentials_file_others_can_read_is_refused_before_any_request() {
    let ws = workspace();
    let file = ws.path().parent().unwrap().join("credentials");
    std::fs::write(&file, format!("exa = {KEY}\n")).unwrap();
    set_mode(&file, 0o644);
    let server = Server::start(vec![reply(200, "{\"results\": []}")]);
    let run = run(
        ws.path(),
        &calls(&[r#"{query = "q"}"#]),
        &flags("exa", &server, "/search", &file),
        &[],
    );
    assert!(!run.stdout.contains(KEY) && !run.stderr.contains(KEY));
    let out = lines(run);
    let f = file.display();
    assert_eq!(
        out[0],
        json!({
            "code": "permission_denied",
            "message": format!("the credentials file {f} has mode 0644, so other users may read or change it; sluice did not read it. Run `chmod 600 {f}`."),
            "file": f.to_string(),
            "mode": "0644",
            "fix": format!("chmod 600 {f}"),
        })
    );
    assert!(server.requests().is_empty());
}

#[test]
fn a_missing_key_is_provider_unavailable_saying_how_to_set_it() {
    let ws = workspace();
    let server = Server::start(vec![reply(200, "{\"results\": []}")]);
    let creds = nowhere(ws.path());
    let out = lines(run(
        ws.path(),
        &calls(&[r#"{query = "q"}"#]),
        &flags("exa", &server, "/search", &creds),
        &[],
    ));
    assert_eq!(
        out[0],
        json!({
            "code": "provider_unavailable",
            "message": format!(
                "the exa search provider ({}/search) needs credential `exa`, which is not set; set SLUICE_CREDENTIAL_EXA \
                 in sluice's environment, or add the line `exa = YOUR_KEY` to {} (chmod 600)",
                server.origin(), creds.display()
            ),
            "credential": "exa",
            "env": "SLUICE_CREDENTIAL_EXA",
            "file": creds.display().to_string(),
        })
    );
    assert!(server.requests().is_empty());
}

#[test]
fn searxng_gets_its_json_api_request_and_its_results_map() {
    let ws = workspace();
    let results = json!({"query": "x", "results": [
        {"title": "One", "url": "https://s.example/1", "content": " first ", "publishedDate": "2024-03-04T00:00:00"},
        {"title": "Two", "url": "https://s.example/2", "content": "second", "publishedDate": null},
        {"title": "Three", "url": "https://s.example/3", "content": "é".repeat(2_001)}
    ]});
    let server = Server::start(vec![
        reply(200, results.to_string()),
        reply(200, results.to_string()),
        reply(403, "Forbidden"),
    ]);
    let out = lines(run(
        ws.path(),
        &calls(&[
            r#"{query = "rust & lua?"}"#,
            r#"{query = "news", numResults = 2, freshness = "day"}"#,
            r#"{query = "q"}"#,
        ]),
        &flags("searxng", &server, "/", &nowhere(ws.path())),
        &[],
    ));
    let reqs = server.requests();
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].target, "/search?q=rust+%26+lua%3F&format=json");
    assert_eq!(reqs[0].body, "");
    assert_eq!(reqs[1].target, "/search?q=news&format=json&time_range=day");
    assert!(reqs.iter().all(|r| r.header("x-api-key").is_none()));

    let hits = out[0]["results"].as_array().unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(
        hits[0],
        json!({"title": "One", "url": "https://s.example/1", "snippet": "first",
               "publishedAt": "2024-03-04T00:00:00"})
    );
    assert_eq!(
        hits[1],
        json!({"title": "Two", "url": "https://s.example/2", "snippet": "second"})
    );
    assert_eq!(hits[2]["snippet"].as_str().unwrap().chars().count(), 2_000);
    let two: Vec<&str> = out[1]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["title"].as_str().unwrap())
        .collect();
    assert_eq!(two, ["One", "Two"]);
    assert_eq!(out[2]["code"], "provider_unavailable");
    assert_eq!(
        out[2]["message"],
        format!(
            "the SearXNG instance at {} refused the request (HTTP 403); it answers JSON only when `json` \
             is in `search.formats` of its settings.yml",
            server.origin()
        )
    );
}

#[test]
fn websearch_asks_for_net_post_on_the_endpoint_before_sending() {
    let ws = workspace();
    let server = Server::start(vec![reply(200, "{\"results\": []}")]);
    let mut f = flags("exa", &server, "/search", &nowhere(ws.path()));
    f.truncate(4); // --search and the net:private grant, no net:post grant
    let out = lines(run(
        ws.path(),
        &calls(&[r#"{query = "q"}"#]),
        &f,
        &[("SLUICE_CREDENTIAL_EXA", KEY)],
    ));
    let cap = format!("net:post:{}", server.origin());
    assert_eq!(out[0]["code"], "permission_required");
    assert_eq!(out[0]["capability"], cap);
    assert!(server.requests().is_empty());
}

#[test]
fn no_provider_bound_is_provider_unavailable() {
    let ws = workspace();
    let out = lines(run(ws.path(), &calls(&[r#"{query = "q"}"#]), &[], &[]));
    assert_eq!(
        out[0],
        json!({"code": "provider_unavailable",
               "message": "no search provider is bound; run with --search exa or --search searxng=URL"})
    );
}

#[test]
fn bad_inputs_are_invalid_input_naming_the_field() {
    let ws = workspace();
    let out = lines(run(
        ws.path(),
        &calls(&[
            r#"{query = "q", numResults = 0}"#,
            r#"{query = "q", numResults = 21}"#,
            r#"{query = "  "}"#,
            r#"{query = "q", freshness = "hour"}"#,
            r#"{query = "q", limit = 3}"#,
        ]),
        &[],
        &[],
    ));
    let fields: Vec<(&str, &str)> = out
        .iter()
        .map(|e| (e["code"].as_str().unwrap(), e["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [
            ("invalid_input", "numResults"),
            ("invalid_input", "numResults"),
            ("invalid_input", "query"),
            ("invalid_input", "freshness"),
            ("invalid_input", "limit"),
        ]
    );
    assert_eq!(
        out[0]["message"],
        "numResults is 1 through 20 (default 8); got 0"
    );
    assert_eq!(
        out[1]["message"],
        "numResults is 1 through 20 (default 8); got 21"
    );
}

#[test]
fn a_bad_search_flag_stops_the_run_naming_the_flag() {
    let ws = workspace();
    let flags = ["--search".to_string(), "bing".to_string()];
    let run = run(ws.path(), "emit(1)\n", &flags, &[]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "sluice: --search \"bing\": \"bing\" is not a search provider; use exa, exa=URL or searxng=URL\n"
    );
}

#[test]
fn the_manifest_lists_websearch_outside_the_read_only_set() {
    let out = Command::new(sluice_bin())
        .args(["flows", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = m["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "websearch")
        .expect("websearch is in the manifest");
    assert_eq!(entry["tier"], "sealed");
    assert_eq!(entry["readOnly"], false);
    assert_eq!(entry["capabilities"], json!(["net:post", "net:private"]));
    assert_eq!(entry["inputSchema"]["required"], json!(["query"]));
    let read_only: Vec<&str> = m["readOnly"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!read_only.contains(&"websearch"), "{read_only:?}");
    assert!(read_only.contains(&"webfetch"), "{read_only:?}");
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}
