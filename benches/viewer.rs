//! What the run viewer (issue 40) costs a person looking at a large run,
//! measured in a real headless Chromium (tests/common/browser.rs) against
//! the release `sluice audit serve` and `sluice audit report`:
//!
//! - `viewer-ready-100k`: from the navigation's start to
//!   `document.body.dataset.ready == "1"` on the run page of a recorded
//!   100,000-call run, read in the page (a MutationObserver, installed
//!   before the page's own script runs, takes `performance.now()`, whose
//!   origin is the navigation's start). A fresh tab each turn. Target
//!   (issue): within 2 s.
//! - `viewer-scroll-100k`: one jump of the call list to its middle until
//!   rows from the middle are in the DOM, checked every animation frame.
//!   Target (ours): within 0.5 s, a page of calls fetched and drawn; the
//!   bench also fails when the page holds more than 1,000 rows (the list
//!   must be virtualized, not loaded whole).
//! - `viewer-report-10k`: the wall time of `sluice audit report RUN --html
//!   FILE` of a recorded 10,000-call run. Target (issue): under 1 s.
//!
//! The runs are recorded once, by the release binary: a Lua loop of
//! `sluice.read` of a small file, in a temp workspace. Each line printed
//! at the end is a ratio to its target (`ratio ... = Nx`, at most 1x
//! meets it). Not a criterion bench: each sample is a page load or a
//! process.

#[path = "../tests/common/browser.rs"]
mod browser;
mod support;
#[path = "../tests/common/viewer_server.rs"]
mod viewer_server;

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
/// Calls of the run whose page is measured, and of the run reported.
const BIG: usize = 100_000;
const SMALL: usize = 10_000;
const TURNS: usize = 5;
const READY_TARGET: Duration = Duration::from_secs(2);
const SCROLL_TARGET: Duration = Duration::from_millis(500);
const REPORT_TARGET: Duration = Duration::from_secs(1);

/// Sets `window.__readyAt` (ms since the navigation started) when the
/// page first says it is ready.
const READY_PROBE: &str = "new MutationObserver((_, seen) => {\
  if (document.body && document.body.dataset.ready === '1' && window.__readyAt === undefined) {\
    window.__readyAt = performance.now(); seen.disconnect(); } })\
  .observe(document, {attributes: true, subtree: true, attributeFilter: ['data-ready']});";

fn main() {
    let wanted = support::wanted();
    let dir = tempfile::tempdir().expect("a temp folder");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one small file\n").unwrap();
    let mut lines = Vec::new();
    if wanted("viewer-ready-100k") || wanted("viewer-scroll-100k") {
        let big = record(&ws, BIG);
        lines.extend(page_bench(&ws, &big));
    }
    if wanted("viewer-report-10k") {
        let small = record(&ws, SMALL);
        lines.push(report_bench(&ws, &small, dir.path()));
    }
    for line in lines {
        println!("{line}");
    }
}

/// Records a run of `calls` reads in `ws`; its id, checked to hold them all.
fn record(ws: &Path, calls: usize) -> String {
    let script = ws.parent().unwrap().join(format!("reads-{calls}.lua"));
    std::fs::write(
        &script,
        format!("for i = 1, {calls} do sluice.read{{path = 'a.txt'}} end\n"),
    )
    .unwrap();
    let out = Command::new(SLUICE)
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws)
        .output()
        .expect("spawn sluice run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = Command::new(SLUICE)
        .args(["audit", "list", "--json", "--workspace"])
        .arg(ws)
        .output()
        .expect("spawn sluice audit list");
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).expect("audit list --json");
    assert_eq!(v["runs"][0]["calls"], calls as u64, "{v}");
    v["runs"][0]["id"].as_str().unwrap().to_string()
}

/// The ready and scroll lines, from `TURNS` fresh tabs on run `run`.
fn page_bench(ws: &Path, run: &str) -> Vec<String> {
    let ws_arg = ws.display().to_string();
    let viewer = viewer_server::Viewer::start(
        Path::new(SLUICE),
        &["--workspace", &ws_arg, "--http", "127.0.0.1:0"],
        &[],
    );
    let browser = browser::Browser::start();
    let url = viewer.run_url(run);
    let (mut ready, mut scroll) = (Vec::new(), Vec::new());
    for _ in 0..TURNS {
        let (r, s) = one_turn(&browser, &url, run);
        ready.push(r);
        scroll.push(s);
    }
    let first = ready[0];
    let (r, s) = (median(&mut ready), median(&mut scroll));
    vec![
        format!(
            "ratio viewer-ready-100k = {:.2}x (target: ready within {READY_TARGET:?}): {} [median of {TURNS} fresh tabs: {}; the first {}]",
            r.as_secs_f64() / READY_TARGET.as_secs_f64(),
            verdict(r <= READY_TARGET),
            ms(r),
            ms(first)
        ),
        format!(
            "ratio viewer-scroll-100k = {:.2}x (target: the middle's rows within {SCROLL_TARGET:?}): {} [median of {TURNS}: {}]",
            s.as_secs_f64() / SCROLL_TARGET.as_secs_f64(),
            verdict(s <= SCROLL_TARGET),
            ms(s)
        ),
    ]
}

/// One fresh tab on `url`: the time to ready and to the middle's rows.
fn one_turn(browser: &browser::Browser, url: &str, run: &str) -> (Duration, Duration) {
    let page = browser.page();
    page.on_new_document(READY_PROBE).unwrap();
    page.goto(url).unwrap();
    page.wait_for("window.__readyAt !== undefined", Duration::from_secs(60))
        .unwrap();
    let ready = page.eval("window.__readyAt").unwrap().as_f64().unwrap();
    let total = page
        .eval("document.querySelector('#calls-total').textContent.replace(/\\D/g, '')")
        .unwrap();
    assert_eq!(total, BIG.to_string(), "#calls-total");
    let js = format!(
        "new Promise(done => {{ const list = document.querySelector('#calls'); const t0 = performance.now(); \
           list.scrollTop = (list.scrollHeight - list.clientHeight) / 2; \
           const check = () => {{ \
             const mid = [...list.querySelectorAll('.row')].some(r => Math.abs(r.dataset.n - {half}) < {near}); \
             if (mid) done(performance.now() - t0); \
             else if (performance.now() - t0 > 30000) done(-1); else requestAnimationFrame(check); }}; \
           requestAnimationFrame(check); }})",
        half = BIG / 2,
        near = BIG / 50
    );
    let scrolled = page.eval(&js).unwrap().as_f64().unwrap();
    assert!(scrolled >= 0.0, "the middle's rows never came");
    let rows = page.count("#calls .row").unwrap();
    assert!(
        rows <= 1000,
        "{rows} rows in the DOM: the list is not virtualized"
    );
    let pages = page
        .log()
        .requests
        .iter()
        .filter(|u| u.contains(&format!("/api/runs/{run}/calls?")))
        .count();
    assert!(
        pages <= 20,
        "{pages} requests of calls for one load and one scroll"
    );
    (
        Duration::from_secs_f64(ready / 1000.0),
        Duration::from_secs_f64(scrolled / 1000.0),
    )
}

/// The report line: `TURNS` reports of run `run`, each a fresh file.
fn report_bench(ws: &Path, run: &str, dir: &Path) -> String {
    let mut took = Vec::new();
    for turn in 0..TURNS {
        let file = dir.join(format!("report-{turn}.html"));
        let (t, _) = measure(
            Command::new(SLUICE)
                .args(["audit", "report", run, "--html"])
                .arg(&file)
                .arg("--workspace")
                .arg(ws)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        );
        let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(size > 0, "no report written at {}", file.display());
        took.push(t);
    }
    let t = median(&mut took);
    format!(
        "ratio viewer-report-10k = {:.2}x (target: under {REPORT_TARGET:?}): {} [median of {TURNS}: {}]",
        t.as_secs_f64() / REPORT_TARGET.as_secs_f64(),
        verdict(t < REPORT_TARGET),
        ms(t)
    )
}

/// `d` in whole milliseconds, e.g. `840 ms`.
fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
