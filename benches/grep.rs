//! What searching a large real tree through `sluice.grep` costs, next to
//! ripgrep (`rg`, the Debian package `ripgrep`) doing the same search alone.
//! Whole processes on both sides, timed in interleaved turns, medians
//! compared, as benches/exec.rs does. BENCHMARKS.md has the figures.
//!
//! The tree is the crate sources cargo unpacked under
//! `~/.cargo/registry/src` (at least 100 MB after a build; the bench says
//! how much). Each search runs as one `sluice run` of a script calling
//! `sluice.grep{...}` with a limit above the number of matches, so every
//! matching line is decoded, returned and turned into Lua tables, against
//! `rg` printing every matching line into a pipe the bench reads (into a
//! pipe, because `rg` writing to /dev/null stops at the first match).
//!
//! Equivalent settings: `hidden = true, noIgnore = true` against `rg --hidden
//! --no-ignore` (every file, no ignore file: what is searched does not
//! depend on which ignore files the crates ship); `rg -n` because grep
//! always numbers lines; `rg --crlf` because grep's `$` always matches
//! before `\r\n`; `fixedStrings` against `rg -F`. Both skip binary files
//! (a NUL byte) whole and follow no symlink, and the tree holds no `.git`,
//! which grep always skips. The bench checks that both sides report the
//! same number of matching lines before timing them.
//!
//! Searches: `unsafe impl` (a literal) and `fn\s+\w+_test` (a regex), each
//! with a target of 1.25x `rg`'s time; `ratio grep sluice/rg` is the worse
//! of the two. A third, `assert_eq!`, has tens of thousands of matching
//! lines, so returning them (each a JSON value, then a Lua table) weighs
//! about as much as finding them: information, no target.
//!
//! The script is approved read access to the tree with `--approve`, so every
//! file is also checked through the kernel (the built-in default policy)
//! before it is opened, as in real use.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const MIN_BYTES: u64 = 100 * 1000 * 1000;
const TURNS: usize = 11;
const TARGET: f64 = 1.25;

struct Search {
    name: &'static str,
    pattern: &'static str,
    fixed: bool,
    /// Whether the 1.25x target applies.
    target: bool,
}

const SEARCHES: [Search; 3] = [
    Search {
        name: "literal",
        pattern: "unsafe impl",
        fixed: true,
        target: true,
    },
    Search {
        name: "regex",
        pattern: r"fn\s+\w+_test",
        fixed: false,
        target: true,
    },
    Search {
        name: "many",
        pattern: "assert_eq!",
        fixed: true,
        target: false,
    },
];

/// Runs `cmd` to the end with stdout piped into this process; the time and
/// what it printed.
fn measure(cmd: &mut Command) -> (Duration, String) {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .expect("read stdout");
    let status = child.wait().expect("wait");
    let elapsed = started.elapsed();
    assert!(status.success(), "{cmd:?} failed: {status}");
    (elapsed, out)
}

/// Bytes and regular files under `dir`, links not followed.
fn size_of(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                bytes += e.metadata().map_or(0, |m| m.len());
                files += 1;
            }
        }
    }
    (bytes, files)
}

fn registry_src() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let src = cargo_home.join("registry/src");
    std::fs::canonicalize(&src).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the grep bench searches cargo's unpacked crates; `cargo fetch` in this repository fills it",
            src.display()
        )
    })
}

fn rg_available() -> bool {
    Command::new("rg")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn main() {
    // `cargo bench -- FILTER`: run only when the filter names this bench.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|f| "grep-tree".contains(f.as_str())) {
        return;
    }
    assert!(
        rg_available(),
        "rg is not installed: `apt-get install -y ripgrep` (the Debian package ripgrep)"
    );
    let root = registry_src();
    let (bytes, files) = size_of(&root);
    println!(
        "grep-tree: {} holds {:.1} MB in {files} files",
        root.display(),
        bytes as f64 / 1e6
    );
    assert!(
        bytes >= MIN_BYTES,
        "{} holds {bytes} bytes, under the 100 MB this bench needs; build the project first",
        root.display()
    );

    let ws_dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws_dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("grep.lua");
    std::fs::write(
        &script,
        "local pattern, root, fixed = sluice.args[1], sluice.args[2], sluice.args[3] == 'fixed'\n\
         local r, err = sluice.grep{pattern = pattern, root = root, fixedStrings = fixed,\n\
           hidden = true, noIgnore = true, limit = 100000000}\n\
         assert(r, tostring(err))\n\
         assert(#r.matches == r.totalMatches, 'some matches were not returned')\n\
         assert(r.skippedDenied == 0 and r.skippedUnreadable == 0, r.notice)\n\
         print(#r.matches, r.filesSearched, r.skippedBinary)\n",
    )
    .unwrap();
    let approve = format!("fs:read:{}", root.display());
    let sluice = |s: &Search| {
        let mut c = Command::new(SLUICE);
        c.arg("run")
            .arg(&script)
            .arg("--workspace")
            .arg(&ws)
            .arg("--approve")
            .arg(&approve)
            .arg("--")
            .arg(s.pattern)
            .arg(&root)
            .arg(if s.fixed { "fixed" } else { "regex" })
            .stdin(Stdio::null());
        c
    };
    let rg = |s: &Search| {
        let mut c = Command::new("rg");
        c.args(["-n", "--no-heading", "--hidden", "--no-ignore", "--crlf"]);
        if s.fixed {
            c.arg("-F");
        }
        c.arg("--").arg(s.pattern).arg(&root).stdin(Stdio::null());
        c
    };

    let mut lines = Vec::new();
    let mut worst = 0f64;
    for s in &SEARCHES {
        // Warm both sides (page cache, binary loading) and check they agree.
        let (_, out) = measure(&mut sluice(s));
        let mut fields = out.split_whitespace().map(|f| f.parse::<u64>().unwrap());
        let (found, searched, binary) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        let (_, out) = measure(&mut rg(s));
        let rg_found = out.lines().count() as u64;
        assert_eq!(
            found, rg_found,
            "{}: sluice.grep found {found} matching lines, rg {rg_found}",
            s.name
        );
        let (mut a, mut b) = (vec![], vec![]);
        for _ in 0..TURNS {
            a.push(measure(&mut sluice(s)).0);
            b.push(measure(&mut rg(s)).0);
        }
        let (ma, mb) = (median(&mut a), median(&mut b));
        let ratio = ma.as_secs_f64() / mb.as_secs_f64();
        println!(
            "grep-tree {}: `{}` {found} matching lines in {searched} text files ({binary} binary skipped): \
             sluice.grep {ma:.2?} / rg {mb:.2?}",
            s.name, s.pattern
        );
        let judged = if s.target {
            worst = worst.max(ratio);
            format!("(target <= {TARGET}x): {}", verdict(ratio <= TARGET))
        } else {
            "(no target, information: returning every line costs as much as finding it)".to_string()
        };
        lines.push(format!(
            "ratio grep-{} sluice/rg = {ratio:.2}x {judged} \
             [medians of {TURNS} interleaved turns: {ma:.2?} / {mb:.2?}; `{}`, {found} lines, {:.0} MB]",
            s.name,
            s.pattern,
            bytes as f64 / 1e6
        ));
    }
    println!();
    for l in lines {
        println!("{l}");
    }
    println!(
        "ratio grep sluice/rg = {worst:.2}x (target <= {TARGET}x): {} [the worse of literal and regex]",
        verdict(worst <= TARGET)
    );
}
