//! What `apply_patch` costs next to Codex's own: one patch of 2,000 update
//! chunks over a 50,000-line file, applied by Codex CLI 0.171.0's native
//! `apply_patch` (the binary `scripts/test` installs under `target/peers`,
//! or `$SLUICE_CODEX_APPLY_PATCH`, run through a link named `apply_patch`
//! with the patch on stdin) and by `sluice run` of a script calling
//! `sluice.apply_patch` with the same patch. Whole processes on both sides,
//! timed in interleaved turns, medians compared; both must leave the same
//! bytes. sluice's in-process time (a library `Runtime::call`) is printed
//! for information. Target: sluice no slower than Codex (at most 1x).
//!
//! Each chunk is `@@` (or `@@ fn ...` for every other one), three context
//! lines, one line replaced, three context lines: the exact pass finds every
//! chunk just past the one before. A second patch, for information, pads
//! every context line with two spaces: each chunk is then found by the
//! second pass (trailing whitespace ignored) after the exact pass scanned
//! the rest of the file, the quadratic case of Codex's seek, which sluice
//! follows pass for pass.
//!
//! Not a criterion bench: each sample is a whole process over a large file.

#[path = "support/peers.rs"]
mod peers;
mod support;

use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const LINES: usize = 50_000;
const CHUNKS: usize = 2_000;
/// The file is made of 5-line blocks: `fn`, two unique lines, `}`, blank.
const BLOCK: usize = 5;

fn codex_binary() -> PathBuf {
    if let Some(how) = peers::codex_missing() {
        panic!("{how}");
    }
    peers::codex_binary()
}

fn source() -> String {
    let mut s = String::with_capacity(LINES * 24);
    for b in 0..LINES / BLOCK {
        s += &format!("fn f{b}() {{\n    let x = {b};\n    work(x, \"{b}\");\n}}\n\n");
    }
    s
}

/// One chunk per `LINES / CHUNKS` lines, each replacing a `let` line;
/// `pad` ends every context line (a non-empty pad makes every chunk miss the
/// exact pass and land on the next, trailing-whitespace one).
fn patch(pad: &str) -> String {
    let mut p = String::from("*** Begin Patch\n*** Update File: big.rs\n");
    let stride = LINES / CHUNKS / BLOCK;
    for k in 0..CHUNKS {
        let b = k * stride + stride / 2;
        if k % 2 == 1 {
            p += &format!("@@ fn f{}() {{\n", b - 1);
        } else {
            p += "@@\n";
        }
        p += &format!(
            " }}{pad}\n {pad}\n fn f{b}() {{{pad}\n-    let x = {b};\n+    let x = {b} + 1;\n"
        );
        p += &format!("     work(x, \"{b}\");{pad}\n }}{pad}\n {pad}\n");
    }
    p += "*** End Patch\n";
    p
}

fn main() {
    // `cargo bench -- FILTER`: run only when the filter names this bench.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|f| "apply_patch".contains(f.as_str())) {
        return;
    }
    let codex = codex_binary();
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let (cx, ws, lib, bin) = (
        root.join("codex"),
        root.join("sluice"),
        root.join("lib"),
        root.join("bin"),
    );
    for d in [&cx, &ws, &lib, &bin] {
        fs::create_dir(d).unwrap();
    }
    let home = root.join("codex-home");
    fs::create_dir(&home).unwrap();
    let link = bin.join("apply_patch");
    std::os::unix::fs::symlink(fs::canonicalize(&codex).unwrap(), &link).unwrap();

    let original = source();
    assert_eq!(original.lines().count(), LINES);
    let env = Env {
        link,
        home,
        cx,
        ws,
        lib,
        root,
        original,
    };
    let exact = run(&env, "exact", &patch(""));
    let padded = run(&env, "trailing-ws", &patch("  "));
    println!();
    let ratio = exact.0.as_secs_f64() / exact.1.as_secs_f64();
    println!(
        "ratio apply_patch sluice/codex = {ratio:.2}x (target <= 1x): {} \
         [medians of {TURNS} interleaved turns, whole processes: {:.2?} / {:.2?}]",
        verdict(ratio <= 1.0),
        exact.0,
        exact.1
    );
    println!(
        "ratio apply_patch sluice-in-process/codex = {:.2}x (no target, information: the library call \
         alone, {:.2?})",
        exact.2.as_secs_f64() / exact.1.as_secs_f64(),
        exact.2
    );
    println!(
        "ratio apply_patch-trailing-ws sluice/codex = {:.2}x (no target, information: every chunk found \
         by the second pass, after the exact one scanned to the end of the file) [{:.2?} / {:.2?}; \
         in-process {:.2?}]",
        padded.0.as_secs_f64() / padded.1.as_secs_f64(),
        padded.0,
        padded.1,
        padded.2
    );
}

const TURNS: usize = 11;

struct Env {
    link: PathBuf,
    home: PathBuf,
    cx: PathBuf,
    ws: PathBuf,
    lib: PathBuf,
    root: PathBuf,
    original: String,
}

/// Medians of sluice run, codex apply_patch and sluice in-process on
/// `patch`, after checking all three leave the same bytes.
fn run(env: &Env, name: &str, patch: &str) -> (Duration, Duration, Duration) {
    let Env {
        link,
        home,
        cx,
        ws,
        lib,
        root,
        original,
    } = env;
    let patch_file = root.join(format!("{name}.patch"));
    fs::write(&patch_file, patch).unwrap();
    assert!(!patch.contains("]=]"));
    let script = root.join(format!("{name}.lua"));
    fs::write(
        &script,
        format!(
            "local out, err = sluice.apply_patch{{input = [=[\n{patch}]=]}}\n\
             assert(out, err and err.message)\n"
        ),
    )
    .unwrap();

    let reset = |dir: &Path| fs::write(dir.join("big.rs"), original).unwrap();
    let codex_cmd = || {
        let mut c = Command::new(link);
        c.current_dir(cx)
            .env("CODEX_HOME", home)
            .stdin(fs::File::open(&patch_file).unwrap())
            .stdout(Stdio::null());
        c
    };
    let sluice_cmd = || {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(&script)
            .arg("--workspace")
            .arg(ws)
            .stdout(Stdio::null());
        c
    };
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let in_process = || {
        reset(lib);
        // Unrecorded, as Codex's side is: the patch alone.
        let rt = sluice::Runtime::builder()
            .workspace(lib)
            .no_audit()
            .build()
            .unwrap();
        let started = Instant::now();
        let out = tokio.block_on(rt.call("apply_patch", json!({ "input": patch })));
        let t = started.elapsed();
        out.unwrap();
        t
    };

    // Warm both sides once, and check they agree.
    reset(cx);
    reset(ws);
    measure(&mut codex_cmd());
    measure(&mut sluice_cmd());
    in_process();
    let expected = fs::read(cx.join("big.rs")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&expected).matches(" + 1;").count(),
        CHUNKS,
        "Codex did not change every chunk"
    );
    assert!(
        fs::read(ws.join("big.rs")).unwrap() == expected,
        "sluice's file differs from Codex's"
    );
    assert!(fs::read(lib.join("big.rs")).unwrap() == expected);

    let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
    let (mut rss_a, mut rss_b) = (0, 0);
    for _ in 0..TURNS {
        reset(ws);
        let (t, kib) = measure(&mut sluice_cmd());
        a.push(t);
        rss_a = rss_a.max(kib);
        assert!(fs::read(ws.join("big.rs")).unwrap() == expected);
        reset(cx);
        let (t, kib) = measure(&mut codex_cmd());
        b.push(t);
        rss_b = rss_b.max(kib);
        assert!(fs::read(cx.join("big.rs")).unwrap() == expected);
        c.push(in_process());
    }
    let (ma, mb, mc) = (median(&mut a), median(&mut b), median(&mut c));
    println!(
        "apply_patch-{name}: {CHUNKS} chunks over {LINES} lines ({} KiB patch): sluice run {ma:.2?} / codex \
         apply_patch {mb:.2?}; sluice in-process call {mc:.2?}; peak RSS sluice {:.1} MiB / codex {:.1} MiB",
        patch.len() / 1024,
        rss_a as f64 / 1024.0,
        rss_b as f64 / 1024.0,
    );
    (ma, mb, mc)
}
