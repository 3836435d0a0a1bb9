//! Attacks on the run viewer (issue 40), each beside a control that must
//! still work:
//!
//! - a record holding hostile strings (`<script>`, `<img onerror>`,
//!   `<svg onload>`, `javascript:` URLs, ANSI and OSC 8 escapes) in a
//!   script's file name, file names, command arguments and output, an
//!   edit's new text, a policy's reason, an error, and two 10 MB values (a
//!   write's content, a model's reply) renders inert and bounded in the
//!   served viewer and in the one-file report, in a real headless Chromium
//!   (tests/common/browser.rs): nothing runs (`window.__pwned` stays
//!   unset, no script, handler, image or `javascript:` link comes from the
//!   record, no CSP violation), and the hostile text is still shown, as
//!   text;
//! - HTTP (raw requests, tests/common/viewer_server.rs): a rebound `Host`
//!   and a foreign `Origin` are 403, every method but GET is 405, every
//!   response carries the contract's CSP and headers; a non-loopback
//!   address needs a token, and then a request without it is 401.

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/model_server.rs"]
mod model_server;
#[path = "common/viewer_server.rs"]
mod viewer_server;

use browser::{Browser, Page};
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use viewer_server::{request, Viewer, CSP};

const READY: &str = "document.body.dataset.ready === '1'";
const WAIT: Duration = Duration::from_secs(20);

/// What would run if the viewer put record text into HTML: each sets
/// `window.__pwned`. With ANSI colour and an OSC 8 hyperlink to a
/// `javascript:` URL.
const HOSTILE: &str = "<script>window.__pwned=1</script> <img src=x onerror=\"window.__pwned=1\"> \
<svg onload=\"window.__pwned=1\"></svg> <a href=\"javascript:window.__pwned=1\">click</a> \
[md](javascript:window.__pwned=1) javascript:window.__pwned=1 \
\u{1b}[31mred\u{1b}[0m \u{1b}]8;;javascript:window.__pwned=1\u{1b}\\osc-link\u{1b}]8;;\u{1b}\\";

/// A file name that is markup (no `/`, so a real file can have it).
const HOSTILE_NAME: &str = "<img src=x onerror=window.__pwned=1>.txt";

/// Bytes of each of the two large values.
const BIG: usize = 10 * 1024 * 1024;

/// The calls of the hostile run, by n.
const N_EDIT: u64 = 2;
const N_PRINTF: u64 = 3;
const N_NAMED: u64 = 4;
const N_MISSING: u64 = 5;
const N_DENIED: u64 = 6;
const N_BIG_WRITE: u64 = 7;
const N_BIG_MODEL: u64 = 8;
const CALLS: u64 = 8;

/// A recorded run holding the hostile strings everywhere a record can,
/// its workspace kept alive with it.
struct Hostile {
    ws: Workspace,
    run: String,
    _model: model_server::ModelServer,
}

/// Records the hostile run: its script's own file name is markup, a policy
/// denies `git push` for a hostile reason, a model replies 10 MB.
fn hostile_run() -> Hostile {
    use model_server::*;
    let ws = workspace();
    // Streamed: a whole JSON reply over 5 MiB is refused, a stream may
    // carry 16 MiB (src/model/transport.rs).
    let mib = "R".repeat(1 << 20);
    let mut pieces = vec![HOSTILE];
    pieces.extend(std::iter::repeat_n(mib.as_str(), BIG >> 20));
    let model = ModelServer::start(vec![Answer::sse(openai_stream_text(&pieces))]);
    let pol = policy(
        &ws,
        "deny.lua",
        &format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.deny(\"proc:spawn:git push *\", {}) }} }}\n",
            lua_str(HOSTILE)
        ),
    );
    let h = lua_str(HOSTILE);
    let name = lua_str(HOSTILE_NAME);
    let script = format!(
        "local H = {h}\n\
         sluice.write{{path = 'notes.txt', content = 'plain\\n'}}\n\
         sluice.edit{{path = 'notes.txt', oldString = 'plain', newString = H}}\n\
         assert(sluice.bash{{script = 'printf \"%s\\\\n\" \"$1\"', args = {{H}}}})\n\
         sluice.write{{path = {name}, content = H}}\n\
         local _, e = sluice.read{{path = 'missing-' .. {name}}}\n\
         local _, d = sluice.bash{{command = 'git push origin main'}}\n\
         assert(d and d.code == 'permission_denied')\n\
         sluice.write{{path = 'big.txt', content = H .. string.rep('A', {BIG})}}\n\
         assert(sluice.model{{provider = 'local', model = 'm', stream = true, messages = {{{{role = 'user', content = H}}}}}})\n"
    );
    let dir = ws.path().parent().unwrap().join("scripts");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{HOSTILE_NAME}.lua"));
    std::fs::write(&path, script).unwrap();
    let mut flags = local_openai_flags(&model);
    let nowhere = ws.path().parent().unwrap().join("no-credentials");
    flags.extend(
        [
            "--credentials",
            &nowhere.display().to_string(),
            "--policy",
            "default",
            "--policy",
            &pol,
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    run_script_with(ws.path(), &path, &flags, &[]).ok();
    let list = sluice_in(ws.path(), &["audit", "list", "--json"]).ok();
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    let run = v["runs"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(v["runs"][0]["calls"], CALLS, "{v}");
    Hostile {
        ws,
        run,
        _model: model,
    }
}

/// `sluice audit serve --workspace WS` on a free loopback port.
fn serve(ws: &Path) -> Viewer {
    let ws = ws.display().to_string();
    Viewer::start(
        &sluice_bin(),
        &["--workspace", &ws, "--http", "127.0.0.1:0"],
        &[],
    )
}

/// What in the page came from record data as markup, or ran: the type of
/// `window.__pwned`, executable scripts naming it, elements with an inline
/// handler, dangerous elements or URL attributes naming it, `javascript:`
/// URLs, raw control characters in the text, and every script's source.
const INERT_REPORT: &str = r#"(() => {
  const all = [...document.querySelectorAll('*')];
  const exec = s => !s.type || /^(text|application)\/(java|ecma)script$|^module$/i.test(s.type);
  const urlAttrs = ['href', 'src', 'srcdoc', 'action', 'formaction', 'data', 'xlink:href', 'poster'];
  return {
    pwned: typeof window.__pwned,
    scripts: [...document.scripts].filter(s => exec(s) && (s.textContent + s.src).includes('pwned'))
      .map(s => s.outerHTML.slice(0, 200)),
    handlers: all.flatMap(e => [...e.attributes].filter(a => /^on/i.test(a.name))
      .map(a => e.tagName + ' ' + a.name + '=' + a.value)),
    markup: all.filter(e => /^(img|svg|iframe|object|embed|math|video|audio|base|form|frame)$/i.test(e.tagName)
      && e.outerHTML.includes('pwned')).map(e => e.outerHTML.slice(0, 200)),
    urls: all.flatMap(e => [...e.attributes]
      .filter(a => urlAttrs.includes(a.name.toLowerCase()) && (/^\s*javascript:/i.test(a.value) || a.value.includes('pwned')))
      .map(a => e.tagName + ' ' + a.name + '=' + a.value)),
    control: /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x9b]/.test(document.body.textContent),
    sources: [...document.scripts].map(s => s.src),
  };
})()"#;

/// Asserts nothing of the record ran or became markup in `page` (a view
/// named `view`), nor any CSP violation, exception or console error
/// happened; with `origin`, every script is the viewer's own `/app.js`.
fn assert_inert(page: &Page, view: &str, origin: Option<&str>) {
    let r = page.eval(INERT_REPORT).unwrap();
    assert_eq!(r["pwned"], "undefined", "{view}: {r}");
    for key in ["scripts", "handlers", "markup", "urls"] {
        assert_eq!(r[key], json!([]), "{view}: {key}: {r}");
    }
    assert_eq!(
        r["control"], false,
        "{view}: a raw control character in the text"
    );
    if let Some(origin) = origin {
        let own = format!("{origin}/app.js");
        for src in r["sources"].as_array().unwrap() {
            assert_eq!(
                src.as_str().unwrap(),
                own,
                "{view}: a script that is not the viewer's: {r}"
            );
        }
    }
    let x: Vec<String> = page
        .log()
        .requests
        .into_iter()
        .filter(|u| u.ends_with("/x") || u.contains("pwned"))
        .collect();
    assert!(x.is_empty(), "{view}: requests from record markup: {x:?}");
    page.assert_clean(view);
}

/// The text of the first element matching `selector`, or "".
fn text(page: &Page, selector: &str) -> String {
    let v = page
        .eval(&format!(
            "(document.querySelector({}) || {{}}).textContent || ''",
            json!(selector)
        ))
        .unwrap();
    v.as_str().unwrap().to_string()
}

/// A fresh tab on `url`, ready, and how long it took to get there.
fn open(browser: &Browser, url: &str) -> (Page, Duration) {
    let page = browser.page();
    let start = Instant::now();
    page.goto(url).unwrap();
    page.wait_for(READY, WAIT)
        .unwrap_or_else(|e| panic!("{url} never became ready: {e}"));
    (page, start.elapsed())
}

/// The controls: the hostile text is shown, as text, where it belongs.
fn assert_hostile_text_shown(page: &Page, n: u64, view: &str) {
    let (selector, needle) = match n {
        N_EDIT => ("#call-diff .add", "<script>window.__pwned=1</script>"),
        N_PRINTF => (
            "#call-streams .stdout",
            "<img src=x onerror=\"window.__pwned=1\">",
        ),
        N_NAMED => ("#call-input", HOSTILE_NAME),
        N_MISSING => ("#call-error", HOSTILE_NAME),
        // JSON shows a quote as \", so these needles hold none.
        N_DENIED => ("#call-decision", "<script>window.__pwned=1</script>"),
        N_BIG_WRITE => ("#call-input", "<script>window.__pwned=1</script>"),
        N_BIG_MODEL => (
            "#call-conversation .message[data-role=assistant]",
            "[md](javascript:window.__pwned=1)",
        ),
        _ => return,
    };
    let js = format!(
        "((document.querySelector({sel}) || {{}}).textContent || '').includes({needle})",
        sel = json!(selector),
        needle = json!(needle)
    );
    if page.wait_for(&js, WAIT).is_err() {
        let shown = text(page, selector);
        panic!(
            "{view}: {selector} does not show {needle:?} as text: {:?}",
            &shown[..shown.len().min(500)]
        );
    }
}

/// The ANSI colour and the OSC 8 link of call `N_PRINTF`'s output are
/// visible text: their printable parts there, the ESC itself not (the
/// inert check found no raw control character).
fn assert_ansi_visible(page: &Page, view: &str) {
    let out = text(page, "#call-streams .stdout");
    for part in [
        "[31mred",
        "[0m",
        "]8;;javascript:window.__pwned=1",
        "osc-link",
    ] {
        assert!(out.contains(part), "{view}: {part:?} is not shown: {out:?}");
    }
    assert!(!out.contains('\u{1b}'), "{view}: a raw ESC: {out:?}");
}

/// The call panel of a 10 MB value: the page's text is cut (well under
/// the value) with a note saying so.
fn assert_bounded(page: &Page, view: &str) {
    let len = page
        .eval("document.body.textContent.length")
        .unwrap()
        .as_u64()
        .unwrap();
    assert!(
        len < 1_000_000,
        "{view}: {len} characters of text in the page"
    );
    let panel = text(page, "#call");
    let note =
        regex::Regex::new(r"(?i)(\bcut\b|capped|truncated|omitted|elided|not shown)").unwrap();
    assert!(
        note.is_match(&panel),
        "{view}: no note that the value was cut"
    );
}

/// Every view of the hostile run in the served viewer and in its report.
#[test]
fn a_hostile_record_renders_inert_and_bounded_in_the_viewer() {
    let h = hostile_run();
    let viewer = serve(h.ws.path());
    let origin = viewer.origin();
    let browser = Browser::start();
    let (runs, _) = open(&browser, &format!("{origin}/#/"));
    page_wait(&runs, "document.querySelector('tr.run td.script')");
    assert!(
        text(&runs, "tr.run td.script").contains(HOSTILE_NAME),
        "the script's name is shown"
    );
    assert_inert(&runs, "the runs page", Some(&origin));
    let (run, _) = open(&browser, &viewer.run_url(&h.run));
    page_wait(
        &run,
        &format!("document.querySelectorAll('#calls .row').length === {CALLS}"),
    );
    let gists = run.texts("#calls .row .gist").unwrap();
    assert!(gists.iter().any(|g| g.contains(HOSTILE_NAME)), "{gists:?}");
    run.screenshot("attack-run").unwrap();
    assert_inert(&run, "the run page", Some(&origin));
    for n in 1..=CALLS {
        let view = format!("call #{n}");
        let start = Instant::now();
        let (page, _) = open(&browser, &viewer.call_url(&h.run, n));
        page_wait(&page, "document.querySelector('#call-input')");
        assert_hostile_text_shown(&page, n, &view);
        let took = start.elapsed();
        if n == N_PRINTF {
            assert_ansi_visible(&page, &view);
        }
        if n == N_BIG_WRITE || n == N_BIG_MODEL {
            // A debug server on shared cores: generous, yet far from what
            // sending and drawing 10 MB would take.
            assert!(
                took < Duration::from_secs(5),
                "{view} took {took:?} to show"
            );
            assert_bounded(&page, &view);
        }
        page.screenshot(&format!("attack-call-{n}")).unwrap();
        assert_inert(&page, &view, Some(&origin));
    }
}

#[test]
fn a_hostile_record_renders_inert_and_bounded_in_the_report() {
    let h = hostile_run();
    let file = h.ws.path().parent().unwrap().join("report.html");
    let arg = file.display().to_string();
    sluice_in(h.ws.path(), &["audit", "report", &h.run, "--html", &arg]).ok();
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(
        size < 4 << 20,
        "the report of two cut 10 MB values is {size} bytes"
    );
    let url = format!("file://{}", file.display());
    let browser = Browser::start();
    let page = browser.page();
    page.offline(true).unwrap();
    page.goto(&url).unwrap();
    page_wait(&page, READY);
    page_wait(
        &page,
        &format!("document.querySelectorAll('#calls .row').length === {CALLS}"),
    );
    assert_inert(&page, "the report", None);
    for n in 1..=CALLS {
        let view = format!("the report's call #{n}");
        page.goto("about:blank").unwrap();
        page.goto(&format!("{url}#/run/{}/call/{n}", h.run))
            .unwrap();
        page_wait(&page, READY);
        page_wait(&page, "document.querySelector('#call-input')");
        assert_hostile_text_shown(&page, n, &view);
        if n == N_PRINTF {
            assert_ansi_visible(&page, &view);
        }
        if n == N_BIG_WRITE || n == N_BIG_MODEL {
            assert_bounded(&page, &view);
        }
        assert_inert(&page, &view, None);
    }
    let off: Vec<String> = page
        .log()
        .requests
        .into_iter()
        .filter(|r| !r.starts_with(&url) && !r.starts_with("data:") && r != "about:blank")
        .collect();
    assert!(off.is_empty(), "the report made requests: {off:?}");
}

fn page_wait(page: &Page, js: &str) {
    page.wait_for(js, WAIT).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------
// HTTP.

/// A served record of one small run; the viewer and the run's id.
fn small_served() -> (Workspace, Viewer, String) {
    let ws = workspace();
    run_lua(
        ws.path(),
        "sluice.write{path = 'a.txt', content = 'a'}\n",
        &[],
    )
    .ok();
    let list = sluice_in(ws.path(), &["audit", "list", "--json"]).ok();
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    let run = v["runs"][0]["id"].as_str().unwrap().to_string();
    let viewer = serve(ws.path());
    (ws, viewer, run)
}

/// The paths of every kind of response: the page, its assets, each API
/// route, a missing run and a missing path.
fn every_path(run: &str) -> Vec<String> {
    let mut paths: Vec<String> = ["/", "/app.js", "/app.css", "/api/runs?offset=0&limit=10"]
        .map(String::from)
        .to_vec();
    for tail in [
        "",
        "/verify",
        "/calls?offset=0&limit=10",
        "/timeline",
        "/calls/1",
    ] {
        paths.push(format!("/api/runs/{run}{tail}"));
    }
    paths.push("/api/runs/ffffffff-0".into());
    paths.push("/no-such-page".into());
    paths
}

#[test]
fn a_rebound_host_is_refused_and_the_servers_own_names_are_served() {
    let (_ws, viewer, run) = small_served();
    let port = viewer.port();
    let addr = format!("127.0.0.1:{port}");
    for path in [
        "/".to_string(),
        "/api/runs".into(),
        format!("/api/runs/{run}"),
    ] {
        for host in [
            format!("evil.example:{port}"),
            format!("localhost.evil.example:{port}"),
            format!("127.0.0.1.nip.io:{port}"),
            "evil.example".to_string(),
        ] {
            let r = request(&addr, "GET", &path, &host, &[]);
            assert_eq!(r.status, 403, "GET {path} with Host {host}: {}", r.text());
        }
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
            let r = request(&addr, "GET", &path, &host, &[]);
            assert_eq!(r.status, 200, "GET {path} with Host {host}: {}", r.text());
        }
    }
}

#[test]
fn a_foreign_origin_is_refused_and_the_servers_own_is_served() {
    let (_ws, viewer, run) = small_served();
    let port = viewer.port();
    let own = viewer.origin();
    for path in ["/api/runs".to_string(), format!("/api/runs/{run}/calls/1")] {
        for origin in [
            "https://evil.example".to_string(),
            format!("http://evil.example:{port}"),
            format!("http://127.0.0.1.nip.io:{port}"),
            format!("http://127.0.0.1:{port}@evil.example"),
            "null".to_string(),
            "http://127.0.0.1:1".to_string(),
        ] {
            let r = viewer.get(&path, &[("Origin", &origin)]);
            assert_eq!(
                r.status,
                403,
                "GET {path} with Origin {origin}: {}",
                r.text()
            );
        }
        let r = viewer.get(&path, &[("Origin", &own)]);
        assert_eq!(
            r.status,
            200,
            "GET {path} with its own Origin: {}",
            r.text()
        );
        let r = viewer.get(&path, &[]);
        assert_eq!(r.status, 200, "GET {path} without an Origin: {}", r.text());
    }
}

#[test]
fn every_method_but_get_is_refused_and_nothing_changes() {
    let (ws, viewer, run) = small_served();
    let addr = format!("127.0.0.1:{}", viewer.port());
    let before = sluice_in(ws.path(), &["audit", "export", &run]).ok().stdout;
    for path in [
        "/".to_string(),
        "/api/runs".into(),
        format!("/api/runs/{run}"),
        format!("/api/runs/{run}/calls/1"),
    ] {
        for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            let r = request(&addr, method, &path, &addr, &[]);
            assert_eq!(r.status, 405, "{method} {path}: {}", r.text());
        }
        assert_eq!(viewer.get(&path, &[]).status, 200, "GET {path}");
    }
    let after = sluice_in(ws.path(), &["audit", "export", &run]).ok().stdout;
    assert_eq!(before, after);
    assert_eq!(sluice_in(ws.path(), &["audit", "verify"]).code, 0);
}

#[test]
fn every_response_carries_the_csp_and_the_safety_headers() {
    let (_ws, viewer, run) = small_served();
    let port = viewer.port();
    let addr = format!("127.0.0.1:{port}");
    let mut responses: Vec<(String, viewer_server::Response)> = every_path(&run)
        .into_iter()
        .map(|p| (format!("GET {p}"), viewer.get(&p, &[])))
        .collect();
    responses.push((
        "403".into(),
        request(&addr, "GET", "/", "evil.example", &[]),
    ));
    responses.push(("405".into(), request(&addr, "POST", "/", &addr, &[])));
    let statuses: Vec<u16> = responses.iter().map(|(_, r)| r.status).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 200, 200, 200, 200, 200, 404, 404, 403, 405],
        "{:?}",
        responses
            .iter()
            .map(|(w, r)| format!("{w}: {}", r.status))
            .collect::<Vec<_>>()
    );
    for (what, r) in &responses {
        assert_eq!(r.header("content-security-policy"), Some(CSP), "{what}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{what}"
        );
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
    }
    // nosniff makes the browser hold each to its type.
    let types: Vec<&str> = responses[..4]
        .iter()
        .map(|(_, r)| {
            r.header("content-type")
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap()
        })
        .collect();
    let js = if types[1] == "application/javascript" {
        "application/javascript"
    } else {
        "text/javascript"
    };
    assert_eq!(types, ["text/html", js, "text/css", "application/json"]);
}

/// `sluice audit serve --workspace WS --http 0.0.0.0:0 EXTRA`, which must
/// exit within 20 s: its exit code and stderr.
fn serve_exits(ws: &Path, extra: &[&str]) -> (i32, String) {
    let mut child = std::process::Command::new(sluice_bin())
        .args(["audit", "serve", "--workspace"])
        .arg(ws)
        .args(["--http", "0.0.0.0:0"])
        .args(extra)
        .env_remove("SLUICE_VIEWER_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = exit_within(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), err)
}

#[test]
fn another_address_needs_a_token_and_a_request_without_it_is_refused() {
    let (ws, _loopback, run) = small_served();
    let (code, err) = serve_exits(ws.path(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--token"),
        "the refusal says what to do: {err}"
    );
    let token = "viewer-token-5f2a9c";
    let wsp = ws.path().display().to_string();
    let viewer = Viewer::start(
        &sluice_bin(),
        &["--workspace", &wsp, "--http", "0.0.0.0:0", "--token", token],
        &[],
    );
    assert!(
        viewer.url.ends_with(&format!("/?token={token}")),
        "{}",
        viewer.url
    );
    let port = viewer.port();
    let addr = format!("127.0.0.1:{port}");
    for path in [
        "/".to_string(),
        "/api/runs".into(),
        format!("/api/runs/{run}/calls/1"),
        "/?token=wrong".into(),
    ] {
        let r = request(&addr, "GET", &path, &addr, &[]);
        assert_eq!(r.status, 401, "GET {path} without the token: {}", r.text());
    }
    // The printed URL signs in: a cookie, then the viewer.
    let r = request(&addr, "GET", &format!("/?token={token}"), &addr, &[]);
    let cookie = r
        .header("set-cookie")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(
        r.status == 200 || (r.status == 303 && cookie.contains(token)),
        "GET /?token=...: {} {:?}: {}",
        r.status,
        r.headers,
        r.text()
    );
    for path in [
        "/".to_string(),
        "/api/runs".into(),
        format!("/api/runs/{run}/calls/1"),
    ] {
        let bearer = format!("Bearer {token}");
        for (name, value) in [
            ("Authorization", bearer.as_str()),
            ("Cookie", cookie.as_str()),
        ] {
            if value.is_empty() {
                continue;
            }
            let r = request(&addr, "GET", &path, &addr, &[(name, value)]);
            assert_eq!(
                r.status,
                200,
                "GET {path} with {name} {value}: {}",
                r.text()
            );
        }
    }
    // The page the printed URL opens reaches the API with the token.
    let browser = Browser::start();
    let url = viewer.url.replacen("0.0.0.0", "127.0.0.1", 1);
    let page = browser.page();
    page.goto(&format!("{url}#/")).unwrap();
    page_wait(&page, READY);
    page_wait(
        &page,
        &format!("document.querySelector('tr.run[data-run=\"{run}\"]')"),
    );
    page.assert_clean("the runs page with a token");
}
