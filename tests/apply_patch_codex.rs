//! Differential test: generated files and generated patches applied by
//! sluice's `apply_patch` flow and by Codex's own `apply_patch` (the native
//! binary of Codex CLI 0.171.0 from npm, run through a link named
//! `apply_patch`), comparing success or failure, Codex's stdout with the
//! flow's `output`, the resulting trees byte for byte, and Codex's error text
//! with the flow's message.
//!
//! The generator covers adds (into new folders, over existing files and
//! folders), deletes, updates with several chunks, `@@` markers with and
//! without context, a first chunk without `@@`, `*** End of File` chunks,
//! moves (into new folders, over existing files), context lines with
//! trailing or surrounding whitespace or typographic variants (Unicode
//! dashes, curly quotes, NBSP, both ways), LF, CRLF, lone-CR and mixed files,
//! files without a final newline, invalid UTF-8, and failures: missing
//! context, missing files, directories, and broken grammar (a share of the
//! cases has lines of the patch inserted, altered or removed).
//!
//! Where sluice differs from Codex on purpose (src/flows/apply_patch/mod.rs):
//! - a failed patch: sluice must leave every file as it was; Codex keeps the
//!   sections before the failure, so trees are not compared then;
//! - a file named by two sections, a move onto itself: the generator does
//!   not produce them, but broken-grammar cases can; sluice's refusal is then
//!   counted apart, after checking the patch does name a path twice and that
//!   nothing changed;
//! - NUL bytes: never generated.
//!
//! Environment:
//! - `SLUICE_CODEX_APPLY_PATCH`: the codex binary; by default the one
//!   `scripts/test` installs under `target/peers`;
//! - `SLUICE_DIFF_CASES` (default 500), `SLUICE_DIFF_SEED` (default fixed),
//!   `SLUICE_DIFF_CASE` (run that one case only, to reproduce a mismatch),
//!   `SLUICE_DIFF_THREADS`.

#[path = "../benches/support/peers.rs"]
mod peers;
#[allow(dead_code)]
#[path = "common/rng.rs"]
mod rng;

use peers::CODEX_VERSION;
use rng::Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

const DEFAULT_SEED: u64 = 0x5EED_A991_1C0D_E000;
const DEFAULT_CASES: usize = 500;
/// Mismatches printed in full before the run stops.
const MAX_MISMATCHES: usize = 5;

// ---------------------------------------------------------------------------
// The reference binary
// ---------------------------------------------------------------------------

/// The codex binary: `$SLUICE_CODEX_APPLY_PATCH`, else the one npm put
/// under `target/peers`. Missing, the test fails saying how to install it.
fn codex_binary() -> PathBuf {
    let install = format!(
        "install it with scripts/test (which runs `npm install --prefix target/peers --no-audit --no-fund \
         @openai/codex@{CODEX_VERSION}`), run that npm command in {}, or point SLUICE_CODEX_APPLY_PATCH \
         at a codex {CODEX_VERSION} binary",
        env!("CARGO_MANIFEST_DIR")
    );
    let p = peers::codex_binary();
    let given = std::env::var_os("SLUICE_CODEX_APPLY_PATCH").is_some();
    assert!(
        p.is_file(),
        "{}: {} is not a file; {install}",
        if given {
            "SLUICE_CODEX_APPLY_PATCH"
        } else {
            "Codex's apply_patch, the reference of this test, is not installed"
        },
        p.display()
    );
    p
}

/// A folder holding a link named `apply_patch` to `codex` (how Codex runs
/// as its apply_patch) and an empty `CODEX_HOME`, after checking the version.
fn codex_setup(codex: &Path) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("codex-home");
    fs::create_dir(&home).unwrap();
    let out = Command::new(codex)
        .arg("--version")
        .env("CODEX_HOME", &home)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", codex.display()));
    let version = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        version.trim(),
        format!("codex-cli {CODEX_VERSION}"),
        "{} is not Codex CLI {CODEX_VERSION}, the version sluice's apply_patch follows",
        codex.display()
    );
    let link = dir.path().join("apply_patch");
    std::os::unix::fs::symlink(fs::canonicalize(codex).unwrap(), &link).unwrap();
    (dir, link, home)
}

const WORDS: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "return x;",
    "}",
    "{",
    "",
    "  indent",
    "\ttab",
    "end",
    "foo(bar)",
    "say \u{201C}hi\u{201D}",
    "a \u{2014} b",
    "it\u{2019}s",
    "x\u{00A0}y",
    "trail  ",
    "  both  ",
    "#",
    "fn main() {",
    "say \"hi\"",
    "x - y",
    "it's ok",
    "  a \u{2013} b\u{2009}c  ",
    "\u{2018}q\u{2019}",
];

const NAMES: &[&str] = &[
    "a.txt",
    "b.txt",
    "c.md",
    "sub/d.txt",
    "sub/deep/e.txt",
    "f.txt",
];

fn rand_line(r: &mut Rng) -> String {
    if r.chance(0.3) {
        return r.pick(WORDS).to_string();
    }
    let n = r.int(1, 10);
    let s: String = (0..n).map(|_| *r.pick(&b"abcdefgh "[..]) as char).collect();
    let s = s.trim();
    if s.is_empty() {
        "z".into()
    } else {
        s.into()
    }
}

fn rand_file(r: &mut Rng) -> String {
    let n = if r.chance(0.15) {
        r.int(13, 40)
    } else {
        r.int(0, 12)
    };
    let lines: Vec<String> = (0..n).map(|_| rand_line(r)).collect();
    const EOLS: [&str; 3] = ["\n", "\r\n", "\r"];
    let eol = r.weighted(&[70, 15, 5, 10]);
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let mut e = if eol == 3 { *r.pick(&EOLS) } else { EOLS[eol] };
        if i == n - 1 && r.chance(0.25) {
            e = "";
        }
        out += l;
        out += e;
    }
    out
}

/// The file's lines as a model sees them: split on `\r\n`, `\r` and `\n`.
fn split_lines(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                out.push(std::mem::take(&mut cur));
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
            }
            '\n' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `l` as a model might retype it: whitespace changed, typographic
/// punctuation typed in ASCII or the other way round, or (rarely) wrong.
fn fuzz_line(r: &mut Rng, l: &str) -> String {
    let k = r.f();
    if k < 0.2 {
        format!("{}   ", l.trim_end())
    } else if k < 0.35 {
        format!("  {}", l.trim())
    } else if k < 0.42 {
        format!("\t{}\t", l.trim())
    } else if k < 0.62 {
        l.replace(['\u{201C}', '\u{201D}'], "\"")
            .replace(['\u{2014}', '\u{2013}'], "-")
            .replace(['\u{2018}', '\u{2019}'], "'")
            .replace(['\u{00A0}', '\u{2009}'], " ")
    } else if k < 0.77 {
        l.replacen('-', "\u{2212}", 1)
            .replacen('\'', "\u{2019}", 1)
            .replacen('"', "\u{201C}", 1)
            .replacen(' ', "\u{00A0}", 1)
    } else if k < 0.80 {
        format!("{l}X")
    } else {
        l.to_string()
    }
}

/// The lines of an update section after its header: one to four chunks.
fn update_body(r: &mut Rng, lines: &[String]) -> Vec<String> {
    let mut body = vec![];
    let n = lines.len();
    let mut pos = 0;
    let chunks = r.int(1, 4);
    for c in 0..chunks {
        if pos > n {
            break;
        }
        let start = if n > 0 { r.int(pos, n) } else { 0 };
        let length = if n > start {
            r.int(0, 4.min(n - start))
        } else {
            0
        };
        let region = &lines[start..start + length];
        let marker = r.f();
        if c == 0 && marker < 0.2 {
            // The first chunk may go without `@@`.
        } else if marker < 0.5 || start == 0 || start <= pos {
            let pad = if r.chance(0.1) {
                " ".repeat(r.int(0, 2))
            } else {
                String::new()
            };
            body.push(format!("@@{pad}"));
        } else {
            let mut ctx = lines[start - 1].clone();
            if r.chance(0.1) {
                ctx = fuzz_line(r, &ctx);
            }
            if r.chance(0.03) {
                ctx = "missing context".into();
            }
            body.push(format!("@@ {ctx}"));
        }
        let mut chunk = vec![];
        for l in region {
            let k = r.f();
            let ll = if r.chance(0.15) {
                fuzz_line(r, l)
            } else {
                l.clone()
            };
            if k < 0.4 {
                // An empty context line may lose its space.
                chunk.push(if !ll.is_empty() || r.chance(0.5) {
                    format!(" {ll}")
                } else {
                    String::new()
                });
            } else if k < 0.7 {
                chunk.push(format!("-{ll}"));
                if r.chance(0.6) {
                    chunk.push(format!("+{}", rand_line(r)));
                }
            } else {
                chunk.push(format!("-{ll}"));
            }
        }
        if r.chance(0.5) || chunk.is_empty() {
            let at = r.int(0, chunk.len());
            chunk.insert(at, format!("+{}", rand_line(r)));
        }
        if r.chance(0.05) {
            chunk.push("-".into());
            chunk.push("+".into());
        }
        body.extend(chunk);
        if (start + length == n && r.chance(0.4)) || r.chance(0.05) {
            body.push("*** End of File".into());
        }
        if r.chance(0.05) {
            body.push(String::new());
        }
        pos = start + length;
    }
    body
}

type Files = BTreeMap<String, Vec<u8>>;

/// Strips every leading `./` (how the generator keys files).
fn key_of(path: &str) -> &str {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p
}

fn gen_case(r: &mut Rng) -> (Files, String) {
    let mut files = Files::new();
    let mut text = BTreeMap::new();
    for name in NAMES {
        if r.chance(0.6) {
            let t = rand_file(r);
            files.insert(name.to_string(), t.clone().into_bytes());
            text.insert(name.to_string(), t);
        }
    }
    if r.chance(0.04) {
        const BAD: [&[u8]; 3] = [b"\xff\xfe\n", b"caf\xe9\n", b"ok\n\xc3"];
        let bytes = *r.pick(&BAD);
        files.insert("g.bin".into(), bytes.to_vec());
    }
    let mut sections: Vec<String> = vec![];
    let mut used: Vec<String> = vec![];
    for _ in 0..r.int(1, 4) {
        let kind = r.weighted(&[20, 15, 50, 15]); // add, delete, update, move
        let mut extra = vec!["new1.txt", "n/new2.txt", "./a.txt"];
        if r.chance(0.03) {
            extra.push("sub"); // a folder, when sub/ exists
        }
        if r.chance(0.03) {
            extra.push("g.bin");
        }
        if kind == 0 && r.chance(0.03) {
            extra.push("a.txt/under.txt"); // a folder where a file may be
        }
        let all: Vec<&str> = NAMES.iter().copied().chain(extra).collect();
        let mut cand: Vec<&str> = all
            .into_iter()
            .filter(|n| !used.iter().any(|u| u == key_of(n)))
            .collect();
        if kind != 0 && r.chance(0.9) {
            let existing: Vec<&str> = cand
                .iter()
                .copied()
                .filter(|n| files.contains_key(key_of(n)))
                .collect();
            if !existing.is_empty() {
                cand = existing;
            }
        }
        if cand.is_empty() {
            break;
        }
        let path = r.pick(&cand).to_string();
        let key = key_of(&path).to_string();
        used.push(key.clone());
        let mut sec = match kind {
            0 => {
                let mut s = vec![format!("*** Add File: {path}")];
                for _ in 0..r.int(0, 4) {
                    s.push(format!("+{}", rand_line(r)));
                }
                s
            }
            1 => vec![format!("*** Delete File: {path}")],
            _ => {
                let lines = match text.get(&key) {
                    Some(t) => split_lines(t),
                    None => (0..3).map(|_| rand_line(r)).collect(),
                };
                let mut s = vec![format!("*** Update File: {path}")];
                if kind == 3 {
                    let dests: Vec<&str> = ["moved.txt", "sub/moved2.txt", "b.txt", "x/y/z.txt"]
                        .into_iter()
                        .filter(|d| !used.iter().any(|u| u == d) && *d != key)
                        .collect();
                    if !dests.is_empty() {
                        let d = r.pick(&dests).to_string();
                        let pad = if r.chance(0.1) { " " } else { "" };
                        s.push(format!("*** Move to: {d}{pad}"));
                        used.push(d);
                    }
                }
                s.extend(update_body(r, &lines));
                s
            }
        };
        if r.chance(0.1) {
            sec[0] = format!("  {} ", sec[0]);
        }
        sections.extend(sec);
    }
    let mut all = vec!["*** Begin Patch".to_string()];
    if r.chance(0.05) {
        all.push("*** Environment ID: local".into());
    }
    all.extend(sections);
    all.push("*** End Patch".into());
    let mut patch = all.join("\n");
    let k = r.f();
    if k < 0.05 {
        patch = format!("<<'EOF'\n{patch}\nEOF\n");
    } else if k < 0.1 {
        patch = patch.replace('\n', "\r\n");
    } else if k < 0.15 {
        patch = format!("\n  {patch}\n\n");
    }
    (files, patch)
}

const MUTATIONS: &[&str] = &[
    "",
    " ",
    "  ",
    "\t",
    "@@",
    "@@ ",
    "@@  x",
    "@@x",
    "*** End of File",
    " *** End of File",
    "*** End of File \t",
    "*** Move to: moved.txt",
    "*** Move to: ",
    "*** Environment ID: e",
    "*** Environment ID:",
    "*** Add File: extra.txt",
    "+added",
    "-removed",
    " ctx",
    "junk",
    "*** End Patch",
    "*** Begin Patch",
    "*** Delete File: gone.txt",
    "*** Update File: a.txt",
    "***",
    "*",
    "+",
    "-",
    "+\r",
    "--",
    "++x",
    "<<EOF",
    "EOF",
    "\u{00A0}*** End of File",
    "*** End of File\u{3000}",
    "@@\u{00A0}",
    "\u{3000}",
    "-a\rb",
    " x\r",
    "*** Update File: b.txt\u{00A0}",
    "*** Delete File: a.txt",
    "\t@@",
    "@@@",
    "@@ @@",
    "*** End of File\n*** End of File",
    "+\u{2028}",
];

/// A generated case with one to three lines of the patch inserted, altered
/// or removed: mostly grammar errors, some still valid.
fn gen_mutant(r: &mut Rng) -> (Files, String) {
    let (files, patch) = gen_case(r);
    let mut lines: Vec<String> = patch.split('\n').map(String::from).collect();
    for _ in 0..r.int(1, 3) {
        let k = r.f();
        let i = r.int(0, lines.len());
        if k < 0.5 {
            lines.insert(i, r.pick(MUTATIONS).to_string());
        } else if !lines.is_empty() {
            let j = i.min(lines.len() - 1);
            if k < 0.7 {
                lines[j] = if r.chance(0.5) {
                    format!("{}{}", r.pick(&[" ", "  ", "\t", ""]), lines[j])
                } else {
                    format!("{}{}", lines[j], r.pick(&[" ", "\t", "\r"]))
                };
            } else {
                lines.remove(j);
            }
        }
    }
    (files, lines.join("\n"))
}

/// Case `i` of the run with `seed`: its own generator, so any case can be
/// rerun alone.
fn case(seed: u64, i: usize) -> (bool, Files, String) {
    let mut r = Rng::new(seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    r.next();
    let mutant = r.chance(0.35);
    let (files, patch) = if mutant {
        gen_mutant(&mut r)
    } else {
        gen_case(&mut r)
    };
    (mutant, files, patch)
}

// ---------------------------------------------------------------------------
// Running both
// ---------------------------------------------------------------------------

type Tree = BTreeMap<String, Option<Vec<u8>>>;

/// Every file (with its bytes) and folder under `root`, except sluice's own
/// `.sluice` folder.
fn tree(root: &Path) -> Tree {
    fn walk(dir: &Path, root: &Path, out: &mut Tree) {
        for entry in fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == ".sluice" {
                continue;
            }
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                let to = fs::read_link(&p).unwrap();
                out.insert(format!("{rel} -> {}", to.display()), None);
            } else if meta.is_dir() {
                out.insert(format!("{rel}/"), None);
                walk(&p, root, out);
            } else {
                out.insert(rel, Some(fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

fn put(root: &Path, files: &Files) {
    fs::create_dir(root).unwrap();
    for (name, bytes) in files {
        let p = root.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }
}

#[derive(Debug)]
struct Outcome {
    ok: bool,
    /// Codex's stdout, or the flow's `output`.
    stdout: String,
    /// Codex's stderr without its final newline, or the flow's message;
    /// the case's folder shown as `<D>`.
    message: String,
    /// sluice's error code.
    code: String,
}

fn run_codex(link: &Path, home: &Path, dir: &Path, patch: &str) -> Outcome {
    let out = Command::new(link)
        .arg(patch)
        .current_dir(dir)
        .env("CODEX_HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", link.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.strip_suffix('\n').unwrap_or(&stderr);
    Outcome {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        message: stderr.replace(&dir.display().to_string(), "<D>"),
        code: String::new(),
    }
}

fn run_sluice(tokio: &tokio::runtime::Runtime, dir: &Path, patch: &str) -> Outcome {
    // Unrecorded: the folder's tree is compared with Codex's afterwards.
    let rt = sluice::Runtime::builder()
        .workspace(dir)
        .no_audit()
        .build()
        .unwrap();
    match tokio.block_on(rt.call("apply_patch", json!({ "input": patch }))) {
        Ok(v) => Outcome {
            ok: true,
            stdout: v["output"].as_str().unwrap_or_default().to_string(),
            message: String::new(),
            code: String::new(),
        },
        Err(e) => Outcome {
            ok: false,
            stdout: String::new(),
            message: e.message.replace(&dir.display().to_string(), "<D>"),
            code: e.code.to_string(),
        },
    }
}

/// Whether the patch's header lines name one path twice (after `./`): the
/// only way sluice's one-file-one-section refusal may fire.
fn names_a_path_twice(patch: &str) -> bool {
    let mut seen: Vec<String> = vec![];
    for line in patch.split('\n') {
        let line = line.trim();
        for head in [
            "*** Add File: ",
            "*** Delete File: ",
            "*** Update File: ",
            "*** Move to: ",
        ] {
            if let Some(p) = line.strip_prefix(head) {
                let p = key_of(p.trim()).to_string();
                if seen.contains(&p) {
                    return true;
                }
                seen.push(p);
            }
        }
    }
    false
}

/// Whether the patch's header lines name a path and a path inside it (after
/// `./`): the only way sluice's nested-paths refusal may fire.
fn names_nested_paths(patch: &str) -> bool {
    let mut seen: Vec<String> = vec![];
    for line in patch.split('\n') {
        let line = line.trim();
        for head in [
            "*** Add File: ",
            "*** Delete File: ",
            "*** Update File: ",
            "*** Move to: ",
        ] {
            if let Some(p) = line.strip_prefix(head) {
                let p = key_of(p.trim()).trim_end_matches('/').to_string();
                let inside = |a: &str, b: &str| a.starts_with(&format!("{b}/"));
                if seen.iter().any(|q| inside(&p, q) || inside(q, &p)) {
                    return true;
                }
                seen.push(p);
            }
        }
    }
    false
}

/// The class of a Codex failure, for the tallies and the error-code check.
fn failure_class(message: &str) -> &'static str {
    if message.starts_with("Invalid patch") {
        "grammar"
    } else if message == "No files were modified." {
        "empty"
    } else if message.starts_with("Failed to find") {
        "no match"
    } else if message.starts_with("Failed to read file to update") {
        "read"
    } else if message.starts_with("Failed to delete file") {
        "delete"
    } else if message.starts_with("Failed to write file")
        || message.starts_with("Failed to create parent directories")
    {
        "write"
    } else {
        "other"
    }
}

/// The error code sluice must give for a failure Codex describes thus.
fn expected_code(message: &str) -> Option<&'static str> {
    match failure_class(message) {
        "grammar" | "empty" => Some("invalid_input"),
        "no match" => Some("no_match"),
        _ if message.ends_with("No such file or directory (os error 2)") => Some("not_found"),
        _ => None,
    }
}

enum Verdict {
    /// The same outcome; its class: `success` or the kind of failure.
    Same(&'static str),
    /// sluice refused a patch naming a file twice, as designed.
    Documented,
    Mismatch(Vec<String>),
}

fn compare(
    link: &Path,
    home: &Path,
    tokio: &tokio::runtime::Runtime,
    files: &Files,
    patch: &str,
) -> (Verdict, Outcome, Outcome, String) {
    let root = tempfile::tempdir().unwrap();
    let root_path = fs::canonicalize(root.path()).unwrap();
    let (a, b) = (root_path.join("codex"), root_path.join("sluice"));
    put(&a, files);
    put(&b, files);
    let before = tree(&b);
    let codex = run_codex(link, home, &a, patch);
    let ours = run_sluice(tokio, &b, patch);
    let after = tree(&b);
    let mut problems = vec![];
    let mut trees = String::new();
    if !ours.ok
        && (ours
            .message
            .contains("is named by two sections of the patch")
            || ours.message.contains("onto itself")
            || ours.message.contains("which lies inside it"))
    {
        let nested = ours.message.contains("which lies inside it");
        if nested && !names_nested_paths(patch) {
            problems.push("sluice refused nested paths the patch does not name".to_string());
        }
        if !nested && !names_a_path_twice(patch) {
            problems.push("sluice refused two sections the patch does not have".to_string());
        }
        if after != before {
            problems.push("sluice changed files on a refused patch".to_string());
        }
        if ours.code != "invalid_input" {
            problems.push(format!("code {} for a refusal", ours.code));
        }
        let v = if problems.is_empty() {
            Verdict::Documented
        } else {
            Verdict::Mismatch(problems)
        };
        return (v, codex, ours, trees);
    }
    if codex.ok != ours.ok {
        problems.push(format!(
            "status: codex ok={} sluice ok={}",
            codex.ok, ours.ok
        ));
    }
    if codex.ok && ours.ok {
        if codex.stdout != ours.stdout {
            problems.push("stdout differs from output".to_string());
        }
        let ta = tree(&a);
        if ta != after {
            problems.push("trees differ".to_string());
            for k in ta.keys().chain(after.keys()) {
                if ta.get(k) != after.get(k) && !trees.contains(&format!("    {k}:")) {
                    let show = |v: Option<&Option<Vec<u8>>>| match v {
                        None => "absent".to_string(),
                        Some(None) => "folder".to_string(),
                        Some(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
                    };
                    let _ = writeln!(
                        trees,
                        "    {k}: codex {} / sluice {}",
                        show(ta.get(k)),
                        show(after.get(k))
                    );
                }
            }
        }
    }
    if !ours.ok && after != before {
        problems.push("sluice changed files on a failed patch".to_string());
    }
    if !codex.ok && !ours.ok {
        if codex.message != ours.message {
            problems.push("error messages differ".to_string());
        }
        if let Some(code) = expected_code(&codex.message) {
            if ours.code != code {
                problems.push(format!("code {} where {code} was expected", ours.code));
            }
        }
    }
    let v = if problems.is_empty() {
        Verdict::Same(if codex.ok {
            "success"
        } else {
            failure_class(&codex.message)
        })
    } else {
        Verdict::Mismatch(problems)
    };
    (v, codex, ours, trees)
}

fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok().map(|n| n.to_string()),
        None => Some(v.to_string()),
    };
    Some(
        parsed
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{name}={v} is not a number")),
    )
}

#[derive(Default)]
struct Tally {
    cases: usize,
    mutants: usize,
    documented: usize,
    mismatches: usize,
    by_class: BTreeMap<&'static str, usize>,
    reports: Vec<String>,
}

#[test]
fn generated_patches_apply_as_codex_applies_them() {
    let codex = codex_binary();
    let (_codex_dir, link, home) = codex_setup(&codex);
    let seed: u64 = env_num("SLUICE_DIFF_SEED").unwrap_or(DEFAULT_SEED);
    let cases: Vec<usize> = match env_num::<usize>("SLUICE_DIFF_CASE") {
        Some(one) => vec![one],
        None => (0..env_num("SLUICE_DIFF_CASES").unwrap_or(DEFAULT_CASES)).collect(),
    };
    let threads = env_num("SLUICE_DIFF_THREADS").unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8)
    });
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let Some(&i) = cases.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let (mutant, files, patch) = case(seed, i);
                    let (verdict, codex, ours, trees) =
                        compare(&link, &home, &tokio, &files, &patch);
                    let mut t = tally.lock().unwrap();
                    t.cases += 1;
                    t.mutants += mutant as usize;
                    match verdict {
                        Verdict::Same(class) => *t.by_class.entry(class).or_default() += 1,
                        Verdict::Documented => t.documented += 1,
                        Verdict::Mismatch(problems) => {
                            t.mismatches += 1;
                            if t.reports.len() < MAX_MISMATCHES {
                                let files: BTreeMap<&String, String> = files
                                    .iter()
                                    .map(|(k, v)| (k, String::from_utf8_lossy(v).into_owned()))
                                    .collect();
                                t.reports.push(format!(
                                    "MISMATCH seed {seed:#x} case {i}{}: {}\n  \
                                     rerun: SLUICE_DIFF_SEED={seed:#x} SLUICE_DIFF_CASE={i} cargo test --test apply_patch_codex -- --nocapture\n  \
                                     files: {files:#?}\n  patch: {patch:?}\n  \
                                     codex: ok={} stdout={:?} stderr={:?}\n  \
                                     sluice: ok={} output={:?} code={} message={:?}\n{trees}",
                                    if mutant { " (mutant)" } else { "" },
                                    problems.join("; "),
                                    codex.ok,
                                    codex.stdout,
                                    codex.message,
                                    ours.ok,
                                    ours.stdout,
                                    ours.code,
                                    ours.message,
                                ));
                            }
                            if t.mismatches >= MAX_MISMATCHES {
                                stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    let t = tally.into_inner().unwrap();
    for r in &t.reports {
        eprintln!("{r}");
    }
    let same: usize = t.by_class.values().sum();
    eprintln!(
        "apply_patch vs {} ({}): seed {seed:#x}, {} cases ({} with a mutated patch) on {threads} threads in {:.1?}: \
         {same} alike {:?}, {} documented differences (patches sluice refuses whole by design), {} mismatches",
        codex.display(),
        CODEX_VERSION,
        t.cases,
        t.mutants,
        started.elapsed(),
        t.by_class,
        t.documented,
        t.mismatches,
    );
    assert_eq!(
        t.mismatches, 0,
        "sluice's apply_patch differs from Codex's on {} case(s) (first ones above)",
        t.mismatches
    );
    assert_eq!(t.cases, cases.len());
    if cases.len() >= DEFAULT_CASES {
        // The generator must keep reaching both sides of every comparison.
        for class in ["success", "grammar", "no match", "read", "delete"] {
            assert!(
                t.by_class.get(class).copied().unwrap_or(0) > 0,
                "no case ended in {class}: {:?}",
                t.by_class
            );
        }
    }
}

/// Codex applies sections one by one, so a later section can build on a
/// folder or file an earlier one creates or removes (delete `a.txt`, then add
/// `a.txt/under.txt`). sluice derives every section before writing any, so it
/// refuses such a patch whole, naming both paths: a documented difference.
#[test]
fn sections_naming_a_path_and_a_path_inside_it_are_refused_whole() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let one =
        |name: &str, bytes: &str| Files::from([(name.to_string(), bytes.as_bytes().to_vec())]);
    let cases: Vec<(&str, Files, &str)> = vec![
        (
            // Codex deletes a.txt, then creates the folder a.txt.
            "delete a file, then add a file under its name",
            one("a.txt", "x\n"),
            "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: a.txt/under.txt\n+y\n*** End Patch",
        ),
        (
            "move a file away, then add a file under its name",
            one("a.txt", "x\n"),
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: moved.txt\n@@\n-x\n+z\n\
             *** Add File: a.txt/under.txt\n+y\n*** End Patch",
        ),
        (
            // One section: the destination lies inside the file moved.
            "update a missing file moved under its own name",
            Files::new(),
            "*** Begin Patch\n*** Update File: nope\n*** Move to: nope/m.txt\n@@\n+x\n*** End Patch",
        ),
        (
            // Codex writes the file sub2, then fails on sub2/x.txt.
            "add a file, then a file under its name",
            Files::new(),
            "*** Begin Patch\n*** Add File: sub2\n+a\n*** Add File: sub2/x.txt\n+x\n*** End Patch",
        ),
    ];
    for (what, files, patch) in &cases {
        let root = tempfile::tempdir().unwrap();
        let dir = fs::canonicalize(root.path()).unwrap().join("w");
        put(&dir, files);
        let before = tree(&dir);
        let ours = run_sluice(&tokio, &dir, patch);
        assert!(!ours.ok, "{what}: applied");
        assert_eq!(ours.code, "invalid_input", "{what}");
        assert!(
            ours.message.contains("which lies inside it"),
            "{what}: {}",
            ours.message
        );
        assert_eq!(tree(&dir), before, "{what}: files changed");
    }
}
