//! The run viewer (issue 40) in a real headless Chromium
//! (tests/common/browser.rs) against real records: every fixture is a run
//! the `sluice` binary recorded (a SQLite file, or a PostgreSQL database the
//! test's own server holds), served by `sluice audit serve` on a free
//! loopback port (tests/common/viewer_server.rs) or written by `sluice
//! audit report --html`. The DOM is read as VIEWER.md names it; each page
//! must also end with no console error, uncaught exception or CSP
//! violation. Screenshots go to target/viewer-screenshots/.

#[path = "common/browser.rs"]
mod browser;
mod common;
#[path = "common/model_server.rs"]
mod model_server;
#[path = "common/viewer_server.rs"]
mod viewer_server;

use browser::{group_members, Browser, Page};
use common::stores::Kind;
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use viewer_server::Viewer;

/// The page's own signal that the route's first content is drawn.
const READY: &str = "document.body.dataset.ready === '1'";

/// How long a page may take to be ready or to change: a debug server on
/// two shared cores.
const WAIT: Duration = Duration::from_secs(20);

/// The newest run of `ws`'s record (the thread's store).
fn last_run(ws: &Path) -> String {
    let list = sluice_in(ws, &["audit", "list", "--json"]).ok();
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    v["runs"][0]["id"].as_str().unwrap().to_string()
}

/// Records `script` in `ws` with `flags` (it must succeed); its run id.
fn record(ws: &Path, script: &str, flags: &[&str]) -> String {
    run_lua_with(ws, script, flags, &[]).ok();
    last_run(ws)
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

/// A new tab showing `url` once the page says it is ready.
fn open(browser: &Browser, url: &str) -> Page {
    let page = browser.page();
    page.goto(url).unwrap();
    page.wait_for(READY, WAIT)
        .unwrap_or_else(|e| panic!("{url} never became ready: {e}"));
    page
}

/// Opens `url` and waits until `js` holds, saying `what` it waited for.
fn open_until(browser: &Browser, url: &str, js: &str, what: &str) -> Page {
    let page = open(browser, url);
    until(&page, js, what);
    page
}

/// Waits until `js` is truthy on `page`, failing the test with `what`.
fn until(page: &Page, js: &str, what: &str) {
    page.wait_for(js, WAIT)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// `js` evaluated on `page`, which must not throw.
fn eval(page: &Page, js: &str) -> Value {
    page.eval(js).unwrap()
}

/// `#calls-total`'s text.
fn calls_total(page: &Page) -> String {
    eval(
        page,
        "document.querySelector('#calls-total').textContent.trim()",
    )
    .as_str()
    .unwrap()
    .to_string()
}

/// The `data-n` of every `.row` in the DOM, as numbers, ascending.
fn row_ns(page: &Page) -> Vec<u64> {
    let v = eval(
        page,
        "[...document.querySelectorAll('#calls .row')].map(r => Number(r.dataset.n))",
    );
    let mut ns: Vec<u64> = serde_json::from_value(v).unwrap();
    ns.sort_unstable();
    ns
}

/// Waits until `#calls-total` says `total` and the rows are exactly `ns`.
fn until_rows(page: &Page, total: usize, ns: &[u64], what: &str) {
    let want = serde_json::to_string(ns).unwrap();
    let js = format!(
        "document.querySelector('#calls-total').textContent.trim() === '{total}' && \
         JSON.stringify([...document.querySelectorAll('#calls .row')].map(r => Number(r.dataset.n)).sort((a, b) => a - b)) === '{want}'"
    );
    if let Err(e) = page.wait_for(&js, WAIT) {
        panic!(
            "{what}: wanted {total} calls, rows {ns:?}; the page shows {:?}, rows {:?}\n{e}",
            calls_total(page),
            row_ns(page)
        );
    }
}

// ---------------------------------------------------------------------------
// The harness itself: what the other tests assert did not happen is seen
// when it does.

/// A static page in `dir` (`a.html` and its `a.js`) that breaks its own
/// CSP, logs a console error, throws uncaught and has a field, a select
/// and a scrolling list; its `file://` URL.
fn misbehaving_page(dir: &Path) -> String {
    std::fs::write(
        dir.join("a.html"),
        "<!doctype html><html><head>\
         <meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'self'\">\
         <script>window.inline = 1</script><script src=\"a.js\"></script></head>\
         <body><input id=\"q\"><select id=\"s\"><option value=\"a\">a</option><option value=\"b\">b</option></select>\
         <div id=\"list\" style=\"height:300px;overflow:auto\"><div style=\"height:100000px\"></div></div></body></html>",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.js"),
        "console.error('boom-console');\n\
         setTimeout(() => { throw new Error('boom-uncaught'); }, 0);\n\
         window.typed = []; window.changed = [];\n\
         document.addEventListener('DOMContentLoaded', () => {\n\
           document.getElementById('q').addEventListener('input', e => window.typed.push(e.target.value));\n\
           document.getElementById('s').addEventListener('change', e => window.changed.push(e.target.value));\n\
           document.body.dataset.ready = '1';\n\
         });\n",
    )
    .unwrap();
    format!("file://{}/a.html", dir.display())
}

#[test]
fn harness_sees_csp_violations_exceptions_console_errors_and_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let url = misbehaving_page(dir.path());
    let browser = Browser::start();
    let page = open(&browser, &url);
    // The uncaught exception comes a turn after the page is ready.
    assert!(common::postgres::wait_until(WAIT, || !page
        .log()
        .exceptions
        .is_empty()));
    let log = page.log();
    assert_eq!(eval(&page, "window.inline === undefined"), json!(true));
    assert_eq!(
        log.requests,
        vec![url.clone(), url.replace("a.html", "a.js")]
    );
    assert_eq!(log.console_errors, vec!["boom-console".to_string()]);
    assert_eq!(
        log.exceptions,
        vec!["Uncaught Error: boom-uncaught".to_string()]
    );
    assert_eq!(log.csp_violations.len(), 1, "{log:?}");
    assert!(
        log.csp_violations[0].contains("script-src 'self'"),
        "{log:?}"
    );
    // Input as a person gives it.
    page.type_text("#q", "hello").unwrap();
    assert_eq!(eval(&page, "window.typed"), json!(["hello"]));
    page.select("#s", "b").unwrap();
    assert_eq!(eval(&page, "window.changed"), json!(["b"]));
    assert!(page.select("#s", "zz").is_err());
    assert_eq!(
        page.scroll("#list", 1_000_000.0).unwrap(),
        100_000.0 - 300.0
    );
    let err = page.eval("(() => { throw new Error('thrown here') })()");
    assert!(err.unwrap_err().contains("Error: thrown here"));
    // Offline, a request fails, and is still logged.
    page.offline(true).unwrap();
    let fetched = eval(
        &page,
        "fetch('http://127.0.0.1:9/x').then(() => 'ok', e => String(e))",
    );
    assert_eq!(fetched, json!("TypeError: Failed to fetch"));
    assert_eq!(page.log().requests.last().unwrap(), "http://127.0.0.1:9/x");
    let shot = page.screenshot("harness").unwrap();
    assert!(std::fs::read(shot)
        .unwrap()
        .starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn harness_kills_chromium_whole_when_dropped() {
    let browser = Browser::start();
    let page = browser.page();
    page.goto("about:blank").unwrap();
    let group = browser.pid() as i32;
    let before = group_members(group);
    assert!(
        before.len() > 1,
        "Chromium runs as several processes: {before:?}"
    );
    drop(browser);
    let left = group_members(group);
    assert!(
        left.is_empty(),
        "processes of Chromium's group left: {left:?}"
    );
}

// ---------------------------------------------------------------------------
// The runs page, on both stores.

/// What the runs page shows of run `id`: script, status, calls, verified
/// text and state.
fn run_row(page: &Page, id: &str) -> Value {
    let sel = json!(format!("tr.run[data-run=\"{id}\"]"));
    eval(
        page,
        &format!(
            "(() => {{ const r = document.querySelector({sel}); if (!r) return null; \
             const t = c => r.querySelector('td.' + c).textContent.trim(); \
             return {{script: t('script'), status: t('status'), calls: t('calls'), \
                     verified: t('verified'), state: r.querySelector('td.verified').dataset.state}}; }})()"
        ),
    )
}

both_stores! {
    fn runs_page_lists_each_run_with_its_status_calls_and_verified(store) {
        let ws = workspace();
        let ok = record(
            ws.path(),
            "sluice.write{path = 'a.txt', content = 'a'}\nsluice.read{path = 'a.txt'}\nsluice.ls{path = '.'}\n",
            &[],
        );
        let failed = run_lua(ws.path(), "sluice.ls{path = '.'}\nerror('boom')\n", &[]);
        assert_eq!(failed.code, 1, "{}", failed.stderr);
        let failed = last_run(ws.path());
        let audit = store.arg(ws.path());
        let viewer = Viewer::start(
            &sluice_bin(),
            &["--audit", &audit, "--http", "127.0.0.1:0"],
            &store.env(),
        );
        let browser = Browser::start();
        let page = open_until(&browser, &format!("{}/#/", viewer.origin()), "document.querySelectorAll('tr.run td.verified[data-state=intact]').length === 2", "both runs verified");
        assert_eq!(page.count("table#runs tr.run").unwrap(), 2);
        let kind = if store.kind == Kind::Sqlite { "sqlite" } else { "postgres" };
        for (id, status, calls) in [(&ok, "ok", "3"), (&failed, "failed", "1")] {
            let row = run_row(&page, id);
            assert_eq!(row["status"], status, "{kind} run {id}: {row}");
            assert_eq!(row["calls"], calls, "{kind} run {id}: {row}");
            assert_eq!(row["verified"], "verified", "{kind} run {id}: {row}");
            assert_eq!(row["state"], "intact", "{kind} run {id}: {row}");
            assert!(row["script"].as_str().unwrap().contains("script"), "{row}");
        }
        page.screenshot(&format!("runs-page-{kind}")).unwrap();
        page.assert_clean("the runs page");
    }
}

// ---------------------------------------------------------------------------
// A run: its timeline, a decision, a diff, a conversation, its integrity.

#[test]
fn concurrent_calls_show_as_overlapping_bars_in_their_own_lanes() {
    let ws = workspace();
    // Hermetic commands declaring no paths run side by side (README: Tasks).
    let run = record(
        ws.path(),
        "sluice.map({1, 2, 3}, function() return sluice.bash{command = 'sleep 0.5', \
         mode = 'hermetic', reads = {}, writes = {}} end)\n",
        &["--max-procs", "4"],
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.run_url(&run),
        "document.querySelectorAll('#timeline .lane .bar').length === 3",
        "three bars",
    );
    let lanes = eval(
        &page,
        "[...document.querySelectorAll('#timeline .lane')].map(l => ({task: l.dataset.task, \
           bars: [...l.querySelectorAll('.bar')].map(b => { const r = b.getBoundingClientRect(); \
             return {n: Number(b.dataset.n), left: r.left, right: r.right}; })}))",
    );
    let mut tasks: Vec<&str> = lanes
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["task"].as_str().unwrap())
        .collect();
    tasks.sort_unstable();
    assert_eq!(tasks, ["0.1", "0.2", "0.3"], "{lanes}");
    let bars: Vec<&Value> = lanes
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let bars = l["bars"].as_array().unwrap();
            assert_eq!(bars.len(), 1, "one call a task: {lanes}");
            &bars[0]
        })
        .collect();
    let f = |v: &Value| v.as_f64().unwrap();
    for b in &bars {
        assert!(f(&b["right"]) > f(&b["left"]), "a bar of no width: {lanes}");
    }
    let latest_start = bars.iter().map(|b| f(&b["left"])).fold(f64::MIN, f64::max);
    let earliest_end = bars.iter().map(|b| f(&b["right"])).fold(f64::MAX, f64::min);
    assert!(
        latest_start < earliest_end,
        "the three bars do not all overlap: {lanes}"
    );
    page.screenshot("timeline-concurrent").unwrap();
    page.assert_clean("the run page");
}

/// A policy denying `git push`, beside the default; its text and path.
fn deny_push_policy(ws: &Workspace) -> (String, String) {
    let text = "local p = require(\"sluice.policy\")\n\
                return {\n  rules = {\n    p.allow(\"fs:read:/nowhere/**\"),\n    \
                p.deny(\"proc:spawn:git push *\", \"no pushing\"),\n  },\n}\n";
    (text.to_string(), policy(ws, "deny-push.lua", text))
}

/// The text of `.rule`, `.source` and the whole `.decision` of the call
/// panel's decision whose rule names `needle`.
fn decision_naming(page: &Page, needle: &str) -> Value {
    eval(
        page,
        &format!(
            "(() => {{ const d = [...document.querySelectorAll('#call-decision .decision')] \
               .find(d => (d.querySelector('.rule') || {{}}).textContent.includes({n})); \
             if (!d) return null; const s = d.querySelector('.source'); \
             return {{rule: d.querySelector('.rule').textContent.trim(), \
                     source: s ? s.textContent.trim() : null, text: d.textContent}}; }})()",
            n = json!(needle)
        ),
    )
}

#[test]
fn a_denied_call_shows_its_rule_and_the_policy_file_and_line() {
    let ws = workspace();
    let (text, pol) = deny_push_policy(&ws);
    let run = record(
        ws.path(),
        "sluice.write{path = 'a.txt', content = 'a'}\n\
         local r, e = sluice.bash{command = 'git push origin main'}\n\
         assert(e and e.code == 'permission_denied')\n",
        &["--policy", "default", "--policy", &pol],
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.call_url(&run, 2),
        "document.querySelector('#call-decision .decision .rule')",
        "the decision",
    );
    let d = decision_naming(&page, "git push");
    assert!(
        !d.is_null(),
        "no decision names the rule: {}",
        eval(
            &page,
            "document.querySelector('#call-decision').textContent"
        )
    );
    assert!(
        d["rule"]
            .as_str()
            .unwrap()
            .contains("deny \"proc:spawn:git push *\""),
        "{d}"
    );
    assert!(d["text"].as_str().unwrap().contains("no pushing"), "{d}");
    let line = line_of(&text, "git push");
    let name = Path::new(&pol).file_name().unwrap().to_str().unwrap();
    let source = d["source"].as_str().unwrap_or("(no .source)");
    assert!(
        source == format!("{pol}:{line}") || source == format!("{name}:{line}"),
        "the rule's source is {source:?}, not {pol}:{line}"
    );
    page.screenshot("call-denied").unwrap();
    page.assert_clean("the call panel");
}

/// A diff line's text without its marker (`+`, `-` or a space).
fn unmarked(line: &str) -> String {
    let line = line.trim_end_matches('\n');
    match line.chars().next() {
        Some('+' | '-' | ' ') => line[1..].to_string(),
        _ => line.to_string(),
    }
}

#[test]
fn an_edit_shows_its_diff() {
    let ws = workspace();
    let run = record(
        ws.path(),
        "sluice.write{path = 'a.txt', content = 'alpha\\nbeta\\ngamma\\n'}\n\
         sluice.edit{path = 'a.txt', oldString = 'alpha\\nbeta\\ngamma', newString = 'alpha\\nBETA\\ngamma'}\n",
        &[],
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.call_url(&run, 2),
        "document.querySelector('#call-diff .add')",
        "the diff",
    );
    let lines = |sel: &str| -> Vec<String> {
        page.texts(&format!("#call-diff {sel}"))
            .unwrap()
            .iter()
            .map(|l| unmarked(l))
            .collect()
    };
    assert_eq!(lines(".del"), ["beta"]);
    assert_eq!(lines(".add"), ["BETA"]);
    assert_eq!(lines(".ctx"), ["alpha", "gamma"]);
    page.screenshot("call-edit-diff").unwrap();
    page.assert_clean("the call panel");
}

#[test]
fn a_model_call_shows_its_conversation_and_tokens() {
    use model_server::*;
    let ws = workspace();
    let server = ModelServer::start(vec![Answer::json(openai_text("Hello from the model."))]);
    let mut flags = local_openai_flags(&server);
    let nowhere = ws.path().parent().unwrap().join("no-credentials");
    flags.extend(["--credentials".into(), nowhere.display().to_string()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let run = record(
        ws.path(),
        "local r = assert(sluice.model{provider = 'local', model = 'm-1', \
         messages = {{role = 'user', content = 'Say hello to the viewer.'}}})\n",
        &flags,
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.call_url(&run, 1),
        "document.querySelectorAll('#call-conversation .message').length >= 2",
        "the conversation",
    );
    let messages = eval(
        &page,
        "[...document.querySelectorAll('#call-conversation .message')].map(m => [m.dataset.role, m.textContent])",
    );
    let messages: Vec<(String, String)> = serde_json::from_value(messages).unwrap();
    let roles: Vec<&str> = messages.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"], "{messages:?}");
    assert!(
        messages[0].1.contains("Say hello to the viewer."),
        "{messages:?}"
    );
    assert!(
        messages[1].1.contains("Hello from the model."),
        "{messages:?}"
    );
    let tokens = eval(&page, "document.querySelector('#call-tokens').textContent");
    let numbers: Vec<u64> = regex::Regex::new(r"\d[\d,]*")
        .unwrap()
        .find_iter(tokens.as_str().unwrap())
        .map(|m| m.as_str().replace(',', "").parse().unwrap())
        .collect();
    for n in [INPUT_TOKENS, OUTPUT_TOKENS] {
        assert!(numbers.contains(&n), "{n} is not in #call-tokens: {tokens}");
    }
    page.screenshot("call-model-conversation").unwrap();
    page.assert_clean("the call panel");
}

/// Replaces `from` by `to` in call `n`'s stored output, in the SQLite file
/// as any SQLite client would.
fn tamper_output(ws: &Path, run: &str, n: u64, from: &str, to: &str) {
    let db = rusqlite::Connection::open(ws.join(".sluice/audit.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE calls SET output = replace(output, ?3, ?4) WHERE run = ?1 AND n = ?2 AND instr(output, ?3) > 0",
            rusqlite::params![run, n, from, to],
        )
        .unwrap();
    assert_eq!(changed, 1, "call #{n}'s output holds no {from:?}");
}

#[test]
fn a_tampered_row_shows_the_break_at_that_call() {
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "hello\n").unwrap();
    let run = record(
        ws.path(),
        "sluice.write{path = 'b.txt', content = 'b'}\nsluice.read{path = 'a.txt'}\nsluice.ls{path = '.'}\n",
        &[],
    );
    tamper_output(ws.path(), &run, 2, "hello", "HELLO");
    let verify = sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(
        verify.code, 1,
        "the edit must break the chain: {}",
        verify.stdout
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.run_url(&run),
        "document.querySelector('#integrity[data-state=broken]')",
        "the break",
    );
    assert_eq!(
        eval(
            &page,
            "document.querySelector('#integrity').dataset.brokenAt"
        ),
        json!("2")
    );
    until(
        &page,
        "document.querySelector('#calls .row.broken')",
        "the broken row",
    );
    let broken = eval(
        &page,
        "[...document.querySelectorAll('#calls .row.broken')].map(r => r.dataset.n)",
    );
    assert_eq!(broken, json!(["2"]));
    assert_eq!(row_ns(&page), [1, 2, 3]);
    page.screenshot("run-tampered").unwrap();
    page.assert_clean("the run page");
    let runs = open_until(
        &browser,
        &format!("{}/#/", viewer.origin()),
        "document.querySelector('td.verified[data-state=broken]')",
        "the runs page's verdict",
    );
    let row = run_row(&runs, &run);
    assert_eq!(row["verified"], "broken at #2", "{row}");
    runs.assert_clean("the runs page");
}

#[test]
fn a_run_in_progress_gains_rows_without_a_reload() {
    let ws = workspace();
    // Each turn: a call, then a command that waits for the test's marker.
    let script = "for i = 1, 3 do\n\
                    sluice.write{path = 'tick' .. i, content = tostring(i)}\n\
                    sluice.bash{command = 'until [ -e go' .. i .. ' ]; do sleep 0.05; done'}\n\
                  end\n";
    let mut child = spawn_lua(ws.path(), script, &[]);
    let ready = common::postgres::wait_until(Duration::from_secs(30), || {
        let r = sluice_in(ws.path(), &["audit", "list", "--json"]);
        let v: Value = serde_json::from_str(&r.stdout).unwrap_or_default();
        v["runs"][0]["calls"].as_u64() >= Some(2)
    });
    assert!(ready, "the run never recorded its first two calls");
    let run = last_run(ws.path());
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.run_url(&run),
        "document.querySelector('#calls .row[data-n=\"1\"]')",
        "the first row",
    );
    assert_eq!(page.count("#calls .row[data-n=\"3\"]").unwrap(), 0);
    eval(&page, "window.__sameDocument = 'yes'");
    for i in 1..=2u64 {
        std::fs::write(ws.file(&format!("go{i}")), "").unwrap();
        let n = 2 * i + 1;
        until(
            &page,
            &format!("document.querySelector('#calls .row[data-n=\"{n}\"]')"),
            &format!("row #{n} after marker {i}"),
        );
        assert_eq!(
            eval(&page, "window.__sameDocument"),
            json!("yes"),
            "the page reloaded"
        );
    }
    std::fs::write(ws.file("go3"), "").unwrap();
    let status = exit_within(&mut child, Duration::from_secs(30));
    assert!(status.success());
    until_rows(&page, 6, &[1, 2, 3, 4, 5, 6], "the whole run");
    until(
        &page,
        "document.querySelector('#run-header .status').textContent.trim() === 'ok'",
        "the finished run's status",
    );
    assert_eq!(
        eval(&page, "window.__sameDocument"),
        json!("yes"),
        "the page reloaded"
    );
    page.screenshot("run-live").unwrap();
    page.assert_clean("the live run page");
}

/// Calls of every kind the filters tell apart (the comments give each n).
const MIXED: &str = "sluice.write{path = 'a.txt', content = 'alpha'}\n\
    sluice.write{path = 'n.txt', content = 'a haystack of straw'}\n\
    sluice.read{path = 'a.txt'}\n\
    sluice.read{path = 'n.txt'}\n\
    local _, e = sluice.read{path = 'missing.txt'}\n\
    sluice.ls{path = '.'}\n\
    local _, d = sluice.bash{command = 'git push origin main'}\n";

#[test]
fn filters_and_search_narrow_the_calls_shown() {
    let ws = workspace();
    let (_, pol) = deny_push_policy(&ws);
    let run = record(ws.path(), MIXED, &["--policy", "default", "--policy", &pol]);
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open(&browser, &viewer.run_url(&run));
    until_rows(&page, 7, &[1, 2, 3, 4, 5, 6, 7], "no filter");
    // Each filter alone, on a fresh page.
    let cases: [(&str, &str, &[u64]); 7] = [
        ("#f-flow", "read", &[3, 4, 5]),
        ("#f-flow", "write", &[1, 2]),
        ("#f-tier", "irreversible", &[7]),
        ("#f-decision", "deny", &[7]),
        ("#f-decision", "allow", &[1, 2, 3, 4, 5, 6]),
        ("#f-outcome", "error", &[5, 7]),
        ("#f-outcome", "ok", &[1, 2, 3, 4, 6]),
    ];
    for (select, value, ns) in cases {
        let page = open(&browser, &viewer.run_url(&run));
        page.select(select, value).unwrap();
        until_rows(&page, ns.len(), ns, &format!("{select} = {value}"));
        page.assert_clean(&format!("{select} = {value}"));
    }
    // Two at once.
    page.select("#f-flow", "read").unwrap();
    page.select("#f-outcome", "error").unwrap();
    until_rows(&page, 1, &[5], "read and error");
    // Search looks in inputs (call 2's content) and outputs (call 4's).
    let page = open(&browser, &viewer.run_url(&run));
    page.type_text("#f-search", "haystack").unwrap();
    until_rows(&page, 2, &[2, 4], "search haystack");
    page.screenshot("run-search").unwrap();
    page.assert_clean("the run page");
}

#[test]
fn the_list_of_5000_calls_keeps_few_rows_in_the_dom_and_scrolls_to_the_last() {
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "a\n").unwrap();
    let run = record(
        ws.path(),
        "for i = 1, 5000 do sluice.read{path = 'a.txt'} end\n",
        &[],
    );
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let page = open_until(
        &browser,
        &viewer.run_url(&run),
        "document.querySelector('#calls .row[data-n=\"1\"]')",
        "the first row",
    );
    assert_eq!(calls_total(&page), "5000");
    let rows = page.count("#calls .row").unwrap();
    assert!(
        rows > 0 && rows <= 200,
        "{rows} rows in the DOM for 5000 calls"
    );
    page.scroll("#calls", 10_000_000.0).unwrap();
    until(
        &page,
        "document.querySelector('#calls .row[data-n=\"5000\"]')",
        "the last row",
    );
    let rows = page.count("#calls .row").unwrap();
    assert!(rows <= 200, "{rows} rows in the DOM after scrolling");
    assert_eq!(page.count("#calls .row[data-n=\"1\"]").unwrap(), 0);
    page.screenshot("run-5000-end").unwrap();
    page.assert_clean("the run page");
}

// ---------------------------------------------------------------------------
// The one-file report.

#[test]
fn the_html_report_opens_offline_from_a_file_and_shows_the_same_run() {
    let ws = workspace();
    let (_, pol) = deny_push_policy(&ws);
    let run = record(ws.path(), MIXED, &["--policy", "default", "--policy", &pol]);
    let file = ws.path().parent().unwrap().join("report.html");
    let file_arg = file.display().to_string();
    sluice_in(ws.path(), &["audit", "report", &run, "--html", &file_arg]).ok();
    // The served viewer, for comparison.
    let viewer = serve(ws.path());
    let browser = Browser::start();
    let served = open_until(
        &browser,
        &viewer.call_url(&run, 7),
        "document.querySelector('#call-decision .rule')",
        "the served decision",
    );
    let served_rule = decision_naming(&served, "git push");
    // The report, with the network off.
    let page = browser.page();
    page.offline(true).unwrap();
    let url = format!("file://{}", file.display());
    page.goto(&url).unwrap();
    until(&page, READY, "the report");
    until_rows(&page, 7, &[1, 2, 3, 4, 5, 6, 7], "the report's calls");
    page.screenshot("report-run").unwrap();
    page.goto("about:blank").unwrap();
    page.goto(&format!("{url}#/run/{run}/call/7")).unwrap();
    until(&page, READY, "the report's call panel");
    until(
        &page,
        "document.querySelector('#call-decision .rule')",
        "the report's decision",
    );
    assert_eq!(decision_naming(&page, "git push"), served_rule);
    page.screenshot("report-call-denied").unwrap();
    let foreign: Vec<String> = page
        .log()
        .requests
        .into_iter()
        .filter(|r| !r.starts_with(&url) && !r.starts_with("data:") && r != "about:blank")
        .collect();
    assert!(foreign.is_empty(), "the report made requests: {foreign:?}");
    page.assert_clean("the report");
}
