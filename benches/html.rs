//! What rendering a fetched page as Markdown costs, next to turndown, the
//! JavaScript converter htmd is modelled on, on node. Both sides convert the
//! same tree of real pages: every `.html` file of Debian's python3.11-doc
//! (/usr/share/doc/python3.11/html, about 530 Sphinx pages, 50 MB).
//!
//! - `html-markdown`: `sluice::internals::html::to_markdown` of every page (with
//!   the page's own file URL as base, as `webfetch` passes the response URL),
//!   against `node scripts/bench-turndown/convert.js`, turndown with
//!   `headingStyle: 'atx'` and `codeBlockStyle: 'fenced'`. Each side reads
//!   all files first and times only its conversion loop, on one thread. The
//!   sides take turns (turndown, sluice, turndown, ...), one pass over the
//!   whole tree each, so load on a shared machine hits both; the figures
//!   are the medians of `TURNS` turns. Target: turndown takes at least 10x
//!   as long.
//!
//! The bench runs `npm ci` in scripts/bench-turndown when its node_modules
//! is missing, and writes both renderings of one page to
//! target/html-bench/sample-{sluice,turndown}.md for comparison.
//!
//! Not a criterion bench: one sample is a pass over 50 MB, and the other
//! side is a node process.

mod support;

use sluice::internals::html::to_markdown;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{median, verdict};
use url::Url;

// The allocator the sluice binary uses (src/main.rs), so the bench measures
// what ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DOCS: &str = "/usr/share/doc/python3.11/html";
const SAMPLE: &str = "tutorial/controlflow.html";
const TURNS: usize = 3;
const TARGET: f64 = 10.0;

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            html_files(&path, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

/// Runs `cmd` in `dir`, saying so first; panics when it fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    println!(
        "html-markdown: running `{program} {}` in {}",
        args.join(" "),
        dir.display()
    );
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {program}: {e}; install node and npm (apt-get install nodejs npm)")
        });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\n{stdout}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn main() {
    // `cargo bench -- FILTER`: run only when the filter names this bench.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|f| "html-markdown".contains(f.as_str())) {
        return;
    }

    let docs = Path::new(DOCS);
    assert!(
        docs.join("index.html").is_file(),
        "{DOCS} is missing: this bench converts the Python 3.11 HTML docs; \
         install them with `apt-get install python3.11-doc`"
    );
    let mut paths = vec![];
    html_files(docs, &mut paths);
    // Bytewise path order, as convert.js sorts.
    paths.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });

    // Read everything first: only conversion is timed.
    let pages: Vec<(String, Url)> = paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).unwrap();
            let html = String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            (html, Url::from_file_path(p).unwrap())
        })
        .collect();
    let bytes: usize = pages.iter().map(|(html, _)| html.len()).sum();
    let mb = bytes as f64 / 1e6;

    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/html-bench");
    std::fs::create_dir_all(&samples).unwrap();
    let sample_path = docs.join(SAMPLE);
    let sample_html = std::fs::read_to_string(&sample_path).unwrap();
    let sample_base = Url::from_file_path(&sample_path).unwrap();
    let sample_md = to_markdown(&sample_html, Some(&sample_base));
    std::fs::write(samples.join("sample-sluice.md"), sample_md + "\n").unwrap();
    let sample_out = samples.join("sample-turndown.md");

    let node_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-turndown");
    if !node_dir.join("node_modules/turndown").is_dir() {
        let install = if node_dir.join("package-lock.json").is_file() {
            "ci"
        } else {
            "install"
        };
        run(&node_dir, "npm", &[install, "--no-audit", "--no-fund"]);
    }

    // Interleaved turns (turndown, sluice, turndown, ...), so load on the
    // machine hits both sides alike; one pass over the tree each.
    let (mut sluice_times, mut turndown_times) = (vec![], vec![]);
    for turn in 1..=TURNS {
        let mut args = vec!["convert.js", DOCS];
        if turn == 1 {
            args.extend(["--sample", SAMPLE, sample_out.to_str().unwrap()]);
        }
        let stdout = run(&node_dir, "node", &args);
        print!("{stdout}");
        let summary = stdout
            .lines()
            .find(|l| l.starts_with("turndown pages="))
            .expect("convert.js printed no summary line");
        let field = |name: &str| -> f64 {
            summary
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name}= in {summary:?}"))
        };
        assert_eq!(
            (field("pages") as usize, field("bytes") as usize),
            (pages.len(), bytes),
            "turndown saw other pages than sluice"
        );
        let turndown = Duration::from_secs_f64(field("ms") / 1e3);

        let started = Instant::now();
        let mut out_bytes = 0;
        for (html, base) in &pages {
            out_bytes += std::hint::black_box(to_markdown(html, Some(base))).len();
        }
        let sluice = started.elapsed();
        println!(
            "html-markdown: turn {turn}/{TURNS}: sluice {sluice:.2?} ({out_bytes} bytes of \
             Markdown), turndown {turndown:.2?}: {:.1}x",
            turndown.as_secs_f64() / sluice.as_secs_f64()
        );
        sluice_times.push(sluice);
        turndown_times.push(turndown);
    }
    let sluice = median(&mut sluice_times);
    let turndown = median(&mut turndown_times);

    let ratio = turndown.as_secs_f64() / sluice.as_secs_f64();
    println!(
        "html-markdown: {} pages, {bytes} bytes ({mb:.1} MB): sluice to_markdown {sluice:.2?} \
         ({:.1} MB/s) / turndown {turndown:.2?} ({:.1} MB/s)",
        pages.len(),
        mb / sluice.as_secs_f64(),
        mb / turndown.as_secs_f64()
    );
    println!(
        "html-markdown: samples of {SAMPLE} in {}/sample-{{sluice,turndown}}.md",
        samples.display()
    );
    println!();
    println!(
        "ratio html-markdown turndown/sluice = {ratio:.1}x (target >= {TARGET}x): {} \
         [medians of {TURNS} interleaved turns over {} pages, {bytes} bytes: turndown {turndown:.2?} / \
         sluice {sluice:.2?}]",
        verdict(ratio >= TARGET),
        pages.len()
    );
}
