//! `sluice.glob` and `sluice.grep` driven through the real binary: matching,
//! sorting, ignore files, hidden names, limits and notices, context lines,
//! CRLF and invalid UTF-8, binary files, and hostile trees (a symlink loop,
//! names with control characters or not UTF-8, an unreadable folder, a FIFO),
//! and paths the policy denies (`.env`), which are never returned.

mod common;

use common::{lua_str, Workspace};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Calls each `(flow, input)` in one run; `(out, err)` for each, JSON null
/// when absent.
fn calls_with(ws: &Path, flags: &[&str], list: &[(&str, &str)]) -> Vec<(Value, Value)> {
    let body: String = list
        .iter()
        .map(|(flow, input)| {
            format!(
                "do local out, err = sluice.{flow}({input}); emit({{out = out, err = err}}) end\n"
            )
        })
        .collect();
    let run = common::run_lua_with(ws, &format!("{}{body}", common::EMIT), flags, &[]).ok();
    run.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .map(|mut v| (v["out"].take(), v["err"].take()))
        .collect()
}

fn calls(ws: &Path, list: &[(&str, &str)]) -> Vec<(Value, Value)> {
    calls_with(ws, &[], list)
}

fn ok(ws: &Path, flow: &str, input: &str) -> Value {
    let (out, err) = calls(ws, &[(flow, input)]).remove(0);
    assert_eq!(err, Value::Null, "unexpected error from {flow}{input}");
    out
}

fn write(ws: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = ws.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn paths(out: &Value) -> Vec<&str> {
    out["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect()
}

/// `(file, line)` of each match.
fn where_(out: &Value) -> Vec<(String, u64)> {
    out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["file"].as_str().unwrap().to_string(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A glob answer with nothing skipped and nothing cut.
fn glob_out(paths: &[&str]) -> Value {
    json!({
        "paths": paths,
        "total": paths.len(),
        "truncated": false,
        "skippedDenied": 0,
        "skippedUnreadable": 0,
        "skippedNames": 0,
    })
}

// ---------------------------------------------------------------- glob

#[test]
fn glob_matches_paths_relative_to_root_and_sorts_them_bytewise() {
    let ws = common::workspace();
    let w = ws.path();
    for f in [
        "B.md",
        "a.txt",
        "a-c.txt",
        "a/b.txt",
        "é.txt",
        "src/x.rs",
        "src/y/z.rs",
        "lib.rs",
    ] {
        write(w, f, "x\n");
    }
    let results = calls(
        w,
        &[
            ("glob", r#"{pattern = "**/*"}"#),
            ("glob", r#"{pattern = "**/*.rs"}"#),
            ("glob", r#"{pattern = "*.rs"}"#),
            ("glob", r#"{pattern = "*.rs", root = "src"}"#),
            ("glob", r#"{pattern = "**/*.{md,txt}", root = "."}"#),
            ("glob", r#"{pattern = "src/*/z.rs"}"#),
        ],
    );
    let outs: Vec<Value> = results
        .into_iter()
        .map(|(out, err)| {
            assert_eq!(err, Value::Null);
            out
        })
        .collect();
    // `.` (0x2e) sorts before `/` (0x2f), upper case before lower case,
    // and `é` after ASCII: plain byte order, the same on every run.
    assert_eq!(
        outs[0],
        glob_out(&[
            "B.md",
            "a-c.txt",
            "a.txt",
            "a/b.txt",
            "lib.rs",
            "src/x.rs",
            "src/y/z.rs",
            "é.txt"
        ])
    );
    assert_eq!(outs[1], glob_out(&["lib.rs", "src/x.rs", "src/y/z.rs"]));
    // `*` stays in one folder: only the top of the root.
    assert_eq!(outs[2], glob_out(&["lib.rs"]));
    // Matched relative to root, shown relative to the workspace.
    assert_eq!(outs[3], glob_out(&["src/x.rs"]));
    assert_eq!(
        outs[4],
        glob_out(&["B.md", "a-c.txt", "a.txt", "a/b.txt", "é.txt"])
    );
    assert_eq!(outs[5], glob_out(&["src/y/z.rs"]));
}

#[test]
fn glob_with_no_match_says_how_to_match_at_any_depth() {
    let ws = common::workspace();
    write(ws.path(), "src/x.rs", "");
    let out = ok(ws.path(), "glob", r#"{pattern = "*.rs"}"#);
    assert_eq!(out["paths"], json!([]));
    assert_eq!(out["total"], 0);
    assert_eq!(
        out["notice"],
        "No path matched. `*.rs` matches only names directly in root; write `**/*.rs` to match at any depth."
    );
}

#[test]
fn glob_honors_gitignore_and_ignore_outside_a_git_repository_unless_no_ignore() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, ".gitignore", "target/\n*.log\n");
    write(w, ".ignore", "secret/\n");
    write(w, "a.rs", "");
    write(w, "debug.log", "");
    write(w, "target/out.rs", "");
    write(w, "secret/s.rs", "");
    write(w, "sub/.gitignore", "gen.rs\n");
    write(w, "sub/gen.rs", "");
    write(w, "sub/keep.rs", "");
    write(w, "sub/deep/gen.rs", "");
    let results = calls(
        w,
        &[
            ("glob", r#"{pattern = "**/*.{rs,log}"}"#),
            ("glob", r#"{pattern = "**/*.{rs,log}", noIgnore = true}"#),
            // The workspace's .gitignore still counts under a deeper root.
            ("glob", r#"{pattern = "**/*", root = "target"}"#),
            ("glob", r#"{pattern = "**/*", root = "sub"}"#),
        ],
    );
    assert_eq!(results[0].0, glob_out(&["a.rs", "sub/keep.rs"]));
    assert_eq!(
        results[1].0,
        glob_out(&[
            "a.rs",
            "debug.log",
            "secret/s.rs",
            "sub/deep/gen.rs",
            "sub/gen.rs",
            "sub/keep.rs",
            "target/out.rs"
        ])
    );
    // A root named explicitly is searched even if an outer file ignores it
    // by name, as `rg PATTERN target` does.
    assert_eq!(results[2].0, glob_out(&["target/out.rs"]));
    assert_eq!(results[3].0, glob_out(&["sub/keep.rs"]));

    // An outer ignore file applies to what is below a deeper root.
    write(w, ".gitignore", "*.gen\n");
    write(w, "lib/x.gen", "");
    write(w, "lib/x.rs", "");
    let out = ok(w, "glob", r#"{pattern = "**/*", root = "lib"}"#);
    assert_eq!(out, glob_out(&["lib/x.rs"]));
}

#[test]
fn glob_lists_hidden_names_only_with_hidden_and_never_dot_git() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, ".config/app.toml", "");
    write(w, ".profile", "");
    write(w, ".git/HEAD", "ref: x\n");
    write(w, "sub/.git", "gitdir: elsewhere\n");
    write(w, "a.txt", "");
    let results = calls(
        w,
        &[
            ("glob", r#"{pattern = "**/*"}"#),
            ("glob", r#"{pattern = "**/*", hidden = true}"#),
            (
                "glob",
                r#"{pattern = "**/*", hidden = true, noIgnore = true}"#,
            ),
        ],
    );
    assert_eq!(results[0].0, glob_out(&["a.txt"]));
    let all = glob_out(&[".config/app.toml", ".profile", "a.txt"]);
    assert_eq!(results[1].0, all);
    assert_eq!(results[2].0, all);
}

#[test]
fn glob_limit_caps_the_page_and_the_notice_says_how_to_narrow() {
    let ws = common::workspace();
    let w = ws.path();
    for i in 0..1200 {
        write(w, &format!("many/f{i:04}.txt"), "");
    }
    let results = calls(
        w,
        &[
            ("glob", r#"{pattern = "**/*.txt"}"#),
            ("glob", r#"{pattern = "**/*.txt", limit = 3}"#),
        ],
    );
    let full = &results[0].0;
    assert_eq!(full["paths"].as_array().unwrap().len(), 1000);
    assert_eq!(full["paths"][0], "many/f0000.txt");
    assert_eq!(full["paths"][999], "many/f0999.txt");
    assert_eq!(full["total"], 1200);
    assert_eq!(full["truncated"], true);
    assert_eq!(
        full["notice"],
        "Showing the first 1,000 of 1,200 matching paths (sorted). Narrow `pattern` (e.g. `src/**/*.rs`) or `root` to see the rest."
    );
    let three = &results[1].0;
    assert_eq!(
        paths(three),
        vec!["many/f0000.txt", "many/f0001.txt", "many/f0002.txt"]
    );
    assert_eq!(three["total"], 1200);
    assert_eq!(three["truncated"], true);
}

#[test]
fn glob_refuses_bad_input_naming_the_field() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "file.txt", "");
    let results = calls(
        w,
        &[
            ("glob", r#"{pattern = "**/*", limit = 1001}"#),
            ("glob", r#"{pattern = "**/*", limit = 0}"#),
            ("glob", r#"{pattern = ""}"#),
            ("glob", r#"{pattern = "/etc/*"}"#),
            ("glob", r#"{pattern = "a[b"}"#),
            ("glob", r#"{pattern = "*", root = "missing"}"#),
            ("glob", r#"{pattern = "*", root = "file.txt"}"#),
            ("glob", r#"{pattern = "*", recursive = true}"#),
        ],
    );
    let e: Vec<&Value> = results.iter().map(|(_, e)| e).collect();
    assert_eq!(
        (e[0]["code"].as_str(), e[0]["field"].as_str()),
        (Some("invalid_input"), Some("limit"))
    );
    assert_eq!(
        e[0]["message"],
        "`limit` is at most 1000; narrow `pattern` or `root` instead."
    );
    assert_eq!(e[1]["field"], "limit");
    assert_eq!(e[2]["field"], "pattern");
    assert_eq!(e[3]["field"], "pattern");
    assert!(
        e[3]["message"]
            .as_str()
            .unwrap()
            .contains("give the folder as `root`"),
        "{}",
        e[3]
    );
    assert_eq!(
        e[4],
        &json!({
            "code": "invalid_pattern",
            "message": "`pattern` is not a valid glob: unclosed character class; missing ']'",
            "pattern": "a[b",
        })
    );
    assert_eq!(e[5]["code"], "not_found");
    assert_eq!(e[6]["code"], "not_a_directory");
    assert_eq!(e[7]["field"], "recursive");
}

// ---------------------------------------------------------------- grep

#[test]
fn grep_returns_every_field_for_a_plain_search() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "src/b.rs", "fn beta() {}\nlet x = 1;\nfn b_test() {}\n");
    write(w, "src/a.rs", "// nothing here\nfn alpha_test() {}\n");
    write(w, "README.md", "no functions\n");
    let out = ok(w, "grep", r#"{pattern = "fn \\w+"}"#);
    assert_eq!(
        out,
        json!({
            "matches": [
                {"file": "src/a.rs", "line": 2, "text": "fn alpha_test() {}"},
                {"file": "src/b.rs", "line": 1, "text": "fn beta() {}"},
                {"file": "src/b.rs", "line": 3, "text": "fn b_test() {}"},
            ],
            "files": ["src/a.rs", "src/b.rs"],
            "totalMatches": 3,
            "totalFiles": 2,
            "filesSearched": 3,
            "skippedBinary": 0,
            "skippedDenied": 0,
            "skippedUnreadable": 0,
            "skippedNames": 0,
            "truncated": false,
        })
    );
    // Nothing found is an answer, not an error.
    let none = ok(w, "grep", r#"{pattern = "zebra"}"#);
    assert_eq!(none["matches"], json!([]));
    assert_eq!(none["files"], json!([]));
    assert_eq!(none["totalMatches"], 0);
    assert_eq!(none["filesSearched"], 3);
}

#[test]
fn grep_gives_each_match_its_own_context_lines() {
    let ws = common::workspace();
    let w = ws.path();
    write(
        w,
        "f.txt",
        "one\ntwo\nHIT three\nHIT four\nfive\nsix\nseven\nHIT eight\n",
    );
    let results = calls(
        w,
        &[
            ("grep", r#"{pattern = "HIT", context = 1}"#),
            ("grep", r#"{pattern = "HIT", beforeContext = 2}"#),
            (
                "grep",
                r#"{pattern = "HIT", context = 2, afterContext = 0}"#,
            ),
        ],
    );
    assert_eq!(
        results[0].0["matches"],
        json!([
            {"file": "f.txt", "line": 3, "text": "HIT three", "before": ["two"], "after": ["HIT four"]},
            {"file": "f.txt", "line": 4, "text": "HIT four", "before": ["HIT three"], "after": ["five"]},
            {"file": "f.txt", "line": 8, "text": "HIT eight", "before": ["seven"], "after": []},
        ])
    );
    // Only `before` when only before-context was asked for.
    assert_eq!(
        results[1].0["matches"],
        json!([
            {"file": "f.txt", "line": 3, "text": "HIT three", "before": ["one", "two"]},
            {"file": "f.txt", "line": 4, "text": "HIT four", "before": ["two", "HIT three"]},
            {"file": "f.txt", "line": 8, "text": "HIT eight", "before": ["six", "seven"]},
        ])
    );
    // A specific side overrides `context`.
    assert_eq!(
        results[2].0["matches"][0],
        json!({"file": "f.txt", "line": 3, "text": "HIT three", "before": ["one", "two"]})
    );
}

#[test]
fn grep_strips_crlf_and_anchors_dollar_before_it() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "dos.txt", "first\r\nend here\r\nlast line\r\n");
    let out = ok(w, "grep", r#"{pattern = "e$", context = 1}"#);
    assert_eq!(
        out["matches"],
        json!([
            {"file": "dos.txt", "line": 2, "text": "end here", "before": ["first"], "after": ["last line"]},
            {"file": "dos.txt", "line": 3, "text": "last line", "before": ["end here"], "after": []},
        ])
    );
}

#[test]
fn grep_decodes_invalid_utf8_lossily() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "latin1.txt", b"caf\xe9 au lait\nplain\n");
    let out = ok(w, "grep", r#"{pattern = "au lait"}"#);
    assert_eq!(
        out["matches"],
        json!([{"file": "latin1.txt", "line": 1, "text": "caf\u{fffd} au lait"}])
    );
}

#[test]
fn grep_skips_binary_files_whole_and_counts_them() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "blob.bin", b"needle first\n\x00\x01\x02 needle again\n");
    write(w, "text.txt", "a needle\n");
    let out = ok(w, "grep", r#"{pattern = "needle"}"#);
    assert_eq!(
        out["matches"],
        json!([{"file": "text.txt", "line": 1, "text": "a needle"}])
    );
    assert_eq!(out["files"], json!(["text.txt"]));
    assert_eq!(out["skippedBinary"], 1);
    assert_eq!(out["filesSearched"], 1);
    assert_eq!(
        out["notice"],
        "Skipped 1 binary file (a NUL byte in what was read)."
    );
}

#[test]
fn grep_invalid_regex_is_invalid_pattern_with_the_engine_message() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "a.txt", "x\n");
    let results = calls(
        w,
        &[
            ("grep", r#"{pattern = "fn ("}"#),
            ("grep", r#"{pattern = "a\nb"}"#),
            ("grep", r#"{pattern = "x", globs = {"a[b"}}"#),
            ("grep", r#"{pattern = "x", context = 101}"#),
            ("grep", r#"{pattern = "x", maxCount = 0}"#),
            ("grep", r#"{pattern = "x", limit = 0}"#),
            ("grep", r#"{pattern = "x", root = "nope"}"#),
        ],
    );
    let e: Vec<&Value> = results.iter().map(|(_, e)| e).collect();
    assert_eq!(e[0]["code"], "invalid_pattern");
    assert_eq!(e[0]["pattern"], "fn (");
    // The engine's message, pointing into the pattern as written.
    assert_eq!(
        e[0]["message"],
        "`pattern` is not a valid regular expression: regex parse error:\n    fn (\n       ^\nerror: unclosed group"
    );
    assert_eq!(e[1]["code"], "invalid_pattern");
    assert!(
        e[1]["message"]
            .as_str()
            .unwrap()
            .contains(r#"the literal "\n" is not allowed"#),
        "{}",
        e[1]
    );
    assert_eq!(e[2]["code"], "invalid_pattern");
    assert_eq!(e[2]["pattern"], "a[b");
    assert_eq!(e[3]["field"], "context");
    assert_eq!(e[4]["field"], "maxCount");
    assert_eq!(e[5]["field"], "limit");
    assert_eq!(e[6]["code"], "not_found");
}

#[test]
fn grep_case_options_and_fixed_strings() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "a.txt", "Needle\nneedle\nNEEDLE\na.b\naxb\n");
    let lines = |input: &str| -> Vec<u64> {
        where_(&ok(w, "grep", input))
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    };
    assert_eq!(lines(r#"{pattern = "needle"}"#), vec![2]);
    assert_eq!(
        lines(r#"{pattern = "needle", ignoreCase = true}"#),
        vec![1, 2, 3]
    );
    // Smart case: all lower case searches insensitively, any capital exactly.
    assert_eq!(
        lines(r#"{pattern = "needle", smartCase = true}"#),
        vec![1, 2, 3]
    );
    assert_eq!(lines(r#"{pattern = "Needle", smartCase = true}"#), vec![1]);
    assert_eq!(
        lines(r#"{pattern = "Needle", smartCase = true, ignoreCase = true}"#),
        vec![1, 2, 3]
    );
    assert_eq!(lines(r#"{pattern = "a.b"}"#), vec![4, 5]);
    assert_eq!(lines(r#"{pattern = "a.b", fixedStrings = true}"#), vec![4]);
    assert_eq!(
        lines(r#"{pattern = "(", fixedStrings = true}"#),
        Vec::<u64>::new()
    );
}

#[test]
fn grep_globs_select_paths_as_rg_g_does() {
    let ws = common::workspace();
    let w = ws.path();
    for f in ["a.rs", "src/b.rs", "src/c.md", "docs/d.md", "docs/e.txt"] {
        write(w, f, "hit\n");
    }
    let files = |input: &str| -> Vec<String> {
        ok(w, "grep", input)["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        files(r#"{pattern = "hit", globs = {"*.rs"}}"#),
        vec!["a.rs", "src/b.rs"]
    );
    assert_eq!(
        files(r#"{pattern = "hit", globs = {"!*.md"}}"#),
        vec!["a.rs", "docs/e.txt", "src/b.rs"]
    );
    assert_eq!(
        files(r#"{pattern = "hit", globs = {"docs/**", "!*.txt"}}"#),
        vec!["docs/d.md"]
    );
    assert_eq!(files(r#"{pattern = "hit", globs = {}}"#).len(), 5);
}

#[test]
fn grep_max_count_is_per_file_and_limit_is_overall_with_a_notice() {
    let ws = common::workspace();
    let w = ws.path();
    for f in ["c.txt", "a.txt", "b.txt"] {
        write(w, f, "hit 1\nhit 2\nmiss\nhit 3\nhit 4\nhit 5\n");
    }
    let results = calls(
        w,
        &[
            ("grep", r#"{pattern = "hit", maxCount = 2}"#),
            ("grep", r#"{pattern = "hit", limit = 4}"#),
            (
                "grep",
                r#"{pattern = "hit", maxCount = 1, afterContext = 1}"#,
            ),
        ],
    );
    let capped = &results[0].0;
    assert_eq!(
        where_(capped),
        vec![
            ("a.txt".into(), 1),
            ("a.txt".into(), 2),
            ("b.txt".into(), 1),
            ("b.txt".into(), 2),
            ("c.txt".into(), 1),
            ("c.txt".into(), 2),
        ]
    );
    assert_eq!(capped["totalMatches"], 6);
    assert_eq!(capped["truncated"], false);
    assert!(capped.get("notice").is_none(), "{capped}");

    let limited = &results[1].0;
    assert_eq!(
        where_(limited),
        vec![
            ("a.txt".into(), 1),
            ("a.txt".into(), 2),
            ("a.txt".into(), 4),
            ("a.txt".into(), 5),
        ]
    );
    assert_eq!(limited["files"], json!(["a.txt", "b.txt", "c.txt"]));
    assert_eq!(limited["totalMatches"], 15);
    assert_eq!(limited["totalFiles"], 3);
    assert_eq!(limited["truncated"], true);
    assert_eq!(
        limited["notice"],
        "Showing the first 4 of 15 matching lines (sorted by file, then line), from 3 files. \
         Narrow with `globs` (e.g. {\"*.rs\"}), a more specific `pattern` or a deeper `root`, or raise `limit`."
    );
    // Past maxCount, a matching line is context, not a match.
    assert_eq!(
        results[2].0["matches"][0],
        json!({"file": "a.txt", "line": 1, "text": "hit 1", "after": ["hit 2"]})
    );
    assert_eq!(results[2].0["totalMatches"], 3);
}

#[test]
fn grep_files_with_matches_returns_only_the_files() {
    let ws = common::workspace();
    let w = ws.path();
    for f in ["z.txt", "m/a.txt", "b.txt", "none.txt"] {
        write(
            w,
            f,
            if f == "none.txt" {
                "miss\n"
            } else {
                "hit\nhit\n"
            },
        );
    }
    let results = calls(
        w,
        &[
            ("grep", r#"{pattern = "hit", filesWithMatches = true}"#),
            (
                "grep",
                r#"{pattern = "hit", filesWithMatches = true, limit = 2}"#,
            ),
        ],
    );
    assert_eq!(
        results[0].0,
        json!({
            "files": ["b.txt", "m/a.txt", "z.txt"],
            "totalFiles": 3,
            "filesSearched": 4,
            "skippedBinary": 0,
            "skippedDenied": 0,
            "skippedUnreadable": 0,
            "skippedNames": 0,
            "truncated": false,
        })
    );
    let two = &results[1].0;
    assert_eq!(two["files"], json!(["b.txt", "m/a.txt"]));
    assert_eq!(two["totalFiles"], 3);
    assert_eq!(two["truncated"], true);
    assert_eq!(
        two["notice"],
        "Showing the first 2 of 3 files with a match (sorted). \
         Narrow with `globs` (e.g. {\"*.rs\"}), a more specific `pattern` or a deeper `root`, or raise `limit`."
    );
}

#[test]
fn grep_clips_long_lines_at_500_characters_and_says_so() {
    let ws = common::workspace();
    let w = ws.path();
    let long = format!("needle {}", "ä".repeat(700));
    write(w, "long.txt", format!("{long}\nshort needle\n"));
    let out = ok(w, "grep", r#"{pattern = "needle"}"#);
    let m = &out["matches"][0];
    assert_eq!(m["clipped"], true);
    let text = m["text"].as_str().unwrap();
    assert_eq!(text.chars().count(), 500);
    assert!(long.starts_with(text));
    assert!(out["matches"][1].get("clipped").is_none());
    assert_eq!(
        out["notice"],
        "1 matching line longer than 500 characters was clipped (`clipped = true`); read the file for the whole line."
    );
}

#[test]
fn grep_searches_in_parallel_but_answers_in_a_stable_order() {
    let ws = common::workspace();
    let w = ws.path();
    let mut expected = Vec::new();
    for d in 0..20 {
        for f in 0..15 {
            let rel = format!("d{d:02}/f{f:02}.txt");
            let mut text = String::new();
            for line in 1..=30 {
                if (line + d + f) % 7 == 0 {
                    text.push_str(&format!("needle {line}\n"));
                    expected.push((rel.clone(), line as u64));
                } else {
                    text.push_str("hay\n");
                }
            }
            write(w, &rel, text);
        }
    }
    expected.sort();
    let input = r#"{pattern = "needle", limit = 100000}"#;
    let results = calls(w, &[("grep", input), ("grep", input), ("grep", input)]);
    assert_eq!(where_(&results[0].0), expected);
    assert_eq!(results[0].0, results[1].0);
    assert_eq!(results[0].0, results[2].0);
    assert_eq!(results[0].0["filesSearched"], 300);
    // The default limit keeps the first 200 of that same order.
    let first = ok(w, "grep", r#"{pattern = "needle"}"#);
    assert_eq!(where_(&first), expected[..200].to_vec());
}

#[test]
fn grep_takes_one_file_as_root() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "src/one.rs", "a\nneedle\n");
    write(w, "src/two.rs", "needle\n");
    let out = ok(w, "grep", r#"{pattern = "needle", root = "src/one.rs"}"#);
    assert_eq!(
        out["matches"],
        json!([{"file": "src/one.rs", "line": 2, "text": "needle"}])
    );
    assert_eq!(out["filesSearched"], 1);
}

#[test]
fn grep_honors_ignore_files_and_hidden_like_glob() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, ".gitignore", "build/\n");
    write(w, "build/gen.txt", "needle\n");
    write(w, ".cache/c.txt", "needle\n");
    write(w, ".git/config", "needle\n");
    write(w, "src.txt", "needle\n");
    let files = |input: &str| ok(w, "grep", input)["files"].clone();
    assert_eq!(files(r#"{pattern = "needle"}"#), json!(["src.txt"]));
    assert_eq!(
        files(r#"{pattern = "needle", noIgnore = true}"#),
        json!(["build/gen.txt", "src.txt"])
    );
    assert_eq!(
        files(r#"{pattern = "needle", hidden = true, noIgnore = true}"#),
        json!([".cache/c.txt", "build/gen.txt", "src.txt"])
    );
}

#[test]
fn grep_and_glob_outside_the_workspace_need_fs_read_on_the_root() {
    let ws = common::workspace();
    let outside = tempfile::tempdir().unwrap();
    let root = common::canon(outside.path());
    fs::write(root.join("x.txt"), "needle\n").unwrap();
    let root_s = root.display().to_string();
    let results = calls(
        ws.path(),
        &[
            (
                "grep",
                &format!("{{pattern = \"needle\", root = {}}}", lua_str(&root_s)),
            ),
            (
                "glob",
                &format!("{{pattern = \"*\", root = {}}}", lua_str(&root_s)),
            ),
        ],
    );
    let cap = format!("fs:read:{root_s}");
    assert_eq!(results[0].1, common::needs_approval(&cap));
    assert_eq!(results[1].1, common::needs_approval(&cap));
    // Approved, the files inside (asks, not denials) are searched; paths
    // outside the workspace are absolute.
    let approved = calls_with(
        ws.path(),
        &["--approve", &cap],
        &[(
            "grep",
            &format!("{{pattern = \"needle\", root = {}}}", lua_str(&root_s)),
        )],
    );
    assert_eq!(
        approved[0].0["matches"],
        json!([{"file": format!("{root_s}/x.txt"), "line": 1, "text": "needle"}])
    );
}

// ------------------------------------------------------------- policy

/// A workspace holding secrets in `.env` files, some reached by a link.
fn tree_with_secrets() -> Workspace {
    let ws = common::workspace();
    let w = ws.path();
    write(w, ".env", "TOKEN=needle-secret\n");
    write(w, "app/.env", "TOKEN=needle-secret\n");
    write(w, "app/main.rs", "let needle = 1;\n");
    symlink(".env", w.join("app/env-link")).unwrap();
    ws
}

const SECRETS_CALLS: [(&str, &str); 3] = [
    ("glob", r#"{pattern = "**/*", hidden = true}"#),
    ("grep", r#"{pattern = "needle", hidden = true}"#),
    (
        "grep",
        r#"{pattern = "needle", hidden = true, noIgnore = true, filesWithMatches = true}"#,
    ),
];

fn assert_secrets_skipped(results: &[(Value, Value)]) {
    let glob = &results[0].0;
    assert_eq!(paths(glob), vec!["app/main.rs"], "{glob}");
    // `.env`, `app/.env`, and the link that resolves to `app/.env`.
    assert_eq!(glob["skippedDenied"], 3);
    assert_eq!(glob["total"], 1);
    assert_eq!(glob["notice"], "Skipped 3 paths the policy denies reading.");
    let grep = &results[1].0;
    assert_eq!(
        grep["matches"],
        json!([{"file": "app/main.rs", "line": 1, "text": "let needle = 1;"}])
    );
    assert_eq!(grep["files"], json!(["app/main.rs"]));
    // Links are never searched, so only the two files count as denied.
    assert_eq!(grep["skippedDenied"], 2);
    assert_eq!(grep["filesSearched"], 1);
    assert!(!grep.to_string().contains("secret"), "{grep}");
    assert_eq!(results[2].0["files"], json!(["app/main.rs"]));
}

#[test]
fn paths_a_policy_file_denies_are_skipped_never_returned() {
    let ws = tree_with_secrets();
    let pol = common::policy(
        &ws,
        "p.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.deny \"fs:read:**/.env\",\n  p.allow \"fs:read:${workspace}\",\n  p.allow \"fs:read:${workspace}/**\",\n} }\n",
    );
    let results = calls_with(ws.path(), &["--policy", &pol], &SECRETS_CALLS);
    assert_secrets_skipped(&results);
}

#[test]
fn the_default_policy_keeps_env_files_out_too() {
    let ws = tree_with_secrets();
    let results = calls(ws.path(), &SECRETS_CALLS);
    assert_secrets_skipped(&results);
}

#[test]
fn a_decide_hook_that_denies_skips_files_and_an_ask_does_not() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "keep.txt", "needle\n");
    write(w, "drop.txt", "needle\n");
    write(w, "asked.txt", "needle\n");
    let pol = common::policy(
        &ws,
        "p.lua",
        "local p = require(\"sluice.policy\")\nreturn {\n  rules = { p.allow \"fs:read:${workspace}\", p.allow \"fs:read:${workspace}/keep.txt\" },\n  decide = function(req)\n    if req.resource:match(\"drop%.txt$\") then return \"deny\" end\n  end,\n}\n",
    );
    let out = calls_with(
        w,
        &["--policy", &pol],
        &[("grep", r#"{pattern = "needle"}"#)],
    );
    // asked.txt matches no rule (an ask): the root was authorized, so it is
    // searched without prompting; drop.txt is denied by the hook.
    assert_eq!(out[0].1, Value::Null);
    assert_eq!(out[0].0["files"], json!(["asked.txt", "keep.txt"]));
    assert_eq!(out[0].0["skippedDenied"], 1);
}

// -------------------------------------------------------- hostile trees

/// A tree with a symlink loop, links out of the root, names holding
/// control characters or invalid UTF-8, and a FIFO.
fn hostile_tree() -> Workspace {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "ok.txt", "needle\n");
    symlink(".", w.join("loop")).unwrap();
    symlink("b", w.join("a")).unwrap();
    symlink("a", w.join("b")).unwrap();
    fs::create_dir(w.join("dir")).unwrap();
    symlink("..", w.join("dir/up")).unwrap();
    symlink("/etc/passwd", w.join("passwd-link")).unwrap();
    write(w, "new\nline.txt", "needle\n");
    write(w, "esc\x1b[31m.txt", "needle\n");
    let raw = w.join(OsStr::from_bytes(b"latin\xe9.txt"));
    fs::write(&raw, "needle\n").unwrap();
    let ctl_dir = w.join("tab\tdir");
    fs::create_dir(&ctl_dir).unwrap();
    fs::write(ctl_dir.join("inner.txt"), "needle\n").unwrap();
    nix::unistd::mkfifo(
        &w.join("pipe.txt"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    ws
}

#[test]
fn glob_and_grep_get_through_a_hostile_tree_without_hanging() {
    let ws = hostile_tree();
    let started = Instant::now();
    let results = calls(
        ws.path(),
        &[
            ("glob", r#"{pattern = "**/*"}"#),
            ("grep", r#"{pattern = "needle"}"#),
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let glob = &results[0].0;
    // Links are listed, never followed; the FIFO is listed, never opened.
    assert_eq!(
        paths(glob),
        vec![
            "a",
            "b",
            "dir/up",
            "loop",
            "ok.txt",
            "passwd-link",
            "pipe.txt"
        ]
    );
    // Two files and a folder with control characters, one not UTF-8.
    assert_eq!(glob["skippedNames"], 4);
    assert_eq!(
        glob["notice"],
        "Skipped 4 paths whose name is not UTF-8 or holds a control character (with anything below it); rename it to reach it."
    );
    let grep = &results[1].0;
    assert_eq!(
        grep["matches"],
        json!([{"file": "ok.txt", "line": 1, "text": "needle"}])
    );
    assert_eq!(grep["filesSearched"], 1);
    assert_eq!(grep["skippedNames"], 4);
    assert_eq!(grep["skippedUnreadable"], 0);
}

/// Runs Lua `body` (with `emit`) as `sluice run` without the capabilities
/// that let root read anything (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH),
/// dropped from the bounding set before exec, so a mode-000 folder is
/// unreadable to it as to anyone else. `None` when they cannot be dropped.
fn run_without_dac_override(ws: &Path, body: &str) -> Option<Vec<Value>> {
    use std::os::unix::process::CommandExt;
    let script = common::script_file(ws, &format!("{}{body}", common::EMIT));
    let mut cmd = Command::new(common::sluice_bin());
    cmd.arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws)
        .stdin(Stdio::null());
    // SAFETY: prctl is async-signal-safe and touches only this child.
    unsafe {
        cmd.pre_exec(|| {
            for cap in [1, 2] {
                if nix::libc::prctl(nix::libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let out = cmd.output().ok()?;
    let run = common::Run::from(out).ok();
    Some(
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

#[test]
fn an_unreadable_folder_is_skipped_and_named_not_fatal() {
    let ws = common::workspace();
    let w = ws.path();
    write(w, "open/ok.txt", "needle\n");
    write(w, "locked/inside.txt", "needle\n");
    write(w, "sealed.txt", "needle\n");
    fs::set_permissions(w.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(w.join("sealed.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    let body = "emit(sluice.glob{pattern = \"**/*\"})\nemit(sluice.grep{pattern = \"needle\"})\n";
    let is_root = nix::unistd::geteuid().is_root();
    let results = if is_root {
        run_without_dac_override(w, body)
    } else {
        Some(common::lua_json(w, body))
    };
    fs::set_permissions(w.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
    let results = results.expect(
        "running as root without CAP_SETPCAP, no folder can be made unreadable to the search: \
         run the tests as root with the default capabilities (as CI does), or as a normal user",
    );
    let glob = &results[0];
    // The folder cannot be listed; the file in plain sight is still named
    // (listing needs only its folder).
    assert_eq!(paths(glob), vec!["open/ok.txt", "sealed.txt"]);
    assert_eq!(glob["skippedUnreadable"], 1);
    assert_eq!(
        glob["notice"],
        "Skipped 1 path that could not be read (locked: Permission denied (os error 13))."
    );
    let grep = &results[1];
    assert_eq!(
        grep["matches"],
        json!([{"file": "open/ok.txt", "line": 1, "text": "needle"}])
    );
    assert_eq!(grep["skippedUnreadable"], 2);
    assert_eq!(
        grep["notice"],
        "Skipped 2 paths that could not be read (locked: Permission denied (os error 13); \
         sealed.txt: Permission denied (os error 13))."
    );
}

#[test]
fn a_folder_with_a_fifo_or_device_for_an_ignore_file_is_skipped_not_hung_on() {
    let ws = common::workspace();
    fs::create_dir_all(ws.file("trap")).unwrap();
    fs::create_dir_all(ws.file("zero")).unwrap();
    fs::write(ws.file("trap/a.txt"), "needle\n").unwrap();
    fs::write(ws.file("zero/b.txt"), "needle\n").unwrap();
    fs::write(ws.file("ok.txt"), "needle\n").unwrap();
    let fifo = ws.file("trap/.ignore");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", ws.file("zero/.gitignore")).unwrap();
    let started = std::time::Instant::now();
    let run = common::run_lua_with(
        ws.path(),
        "local g = assert(sluice.glob{pattern = '**/*.txt'})\n\
         local r = assert(sluice.grep{pattern = 'needle'})\n\
         print(table.concat(g.paths, ','), table.concat(r.files, ','), g.skippedUnreadable, r.skippedUnreadable)\n",
        &[],
        &[],
    )
    .ok();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(run.stdout, "ok.txt\tok.txt\t2\t2\n", "{}", run.stderr);
}

// Bad input: patterns that would take for ever to compile or match, and a
// deadline for every walk and search. Each run is bounded, so a hang fails
// the test instead of hanging the suite.

/// [`calls`], failing the test if the run takes longer than `limit`; also
/// how long it took.
fn calls_within(
    ws: &Path,
    list: &[(&str, &str)],
    limit: Duration,
) -> (Vec<(Value, Value)>, Duration) {
    let body: String = list
        .iter()
        .map(|(flow, input)| {
            format!(
                "do local out, err = sluice.{flow}({input}); emit({{out = out, err = err}}) end\n"
            )
        })
        .collect();
    let start = Instant::now();
    let mut child = common::spawn_lua_with(ws, &format!("{}{body}", common::EMIT), &[], &[]);
    let status = common::exit_within(&mut child, limit);
    let took = start.elapsed();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{status:?}: {stdout}");
    let out = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .map(|mut v| (v["out"].take(), v["err"].take()))
        .collect();
    (out, took)
}

/// 30 MB of `a` on one line, as the battery's pathological greps used.
fn thirty_mb_of_a(ws: &Path, rel: &str) {
    write(ws, rel, vec![b'a'; 30_000_000]);
}

#[test]
fn grep_refuses_a_pattern_over_16_kib_at_once_naming_the_limit() {
    let ws = common::workspace();
    thirty_mb_of_a(ws.path(), "big.txt");
    let long: String = (0..1_000_000u32)
        .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
        .collect();
    let at_limit = &long[..16 * 1024];
    let (out, took) = calls_within(
        ws.path(),
        &[
            ("grep", &format!("{{pattern = {}}}", lua_str(&long))),
            (
                "grep",
                &format!("{{pattern = {}, fixedStrings = true}}", lua_str(&long)),
            ),
            ("grep", &format!("{{pattern = {}}}", lua_str(at_limit))),
        ],
        Duration::from_secs(60),
    );
    let refused = json!({
        "code": "invalid_pattern",
        "field": "pattern",
        "limit": 16384,
        "message": "`pattern` is 1,000,000 bytes, over the limit of 16,384 bytes (16 KiB); search for a shorter, \
                    distinctive part of it and filter the matches, or split it across several calls.",
    });
    assert_eq!(out[0], (Value::Null, refused.clone()));
    assert_eq!(out[1], (Value::Null, refused));
    // At the limit, it runs: the 30 MB file has no such line.
    assert_eq!(out[2].1, Value::Null, "{:?}", out[2]);
    assert_eq!(out[2].0["totalMatches"], 0);
    assert_eq!(out[2].0["filesSearched"], 1);
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn grep_refuses_a_regex_that_compiles_past_10_mib_and_keeps_ordinary_counts() {
    let ws = common::workspace();
    thirty_mb_of_a(ws.path(), "big.txt");
    write(ws.path(), "words.txt", "word_one two\n");
    let (out, took) = calls_within(
        ws.path(),
        &[
            ("grep", "{pattern = 'a{1000}{1000}'}"),
            ("grep", "{pattern = '\\\\w{1000}'}"),
            ("grep", "{pattern = '\\\\w{8}', root = 'words.txt'}"),
            (
                "grep",
                "{pattern = '(?-u:\\\\w){1000}', root = 'words.txt'}",
            ),
        ],
        Duration::from_secs(60),
    );
    for (i, pattern) in [(0, "a{1000}{1000}"), (1, "\\w{1000}")] {
        let (o, e) = &out[i];
        assert_eq!(*o, Value::Null, "{pattern}");
        assert_eq!(e["code"], "invalid_pattern", "{pattern}: {e}");
        assert_eq!(e["pattern"], pattern);
        assert_eq!(e["limit"], 10 << 20);
        assert!(
            e["message"].as_str().unwrap().starts_with(
                "`pattern` compiles to a regex over the size limit of 10 MiB: counted repetitions multiply"
            ),
            "{e}"
        );
    }
    assert_eq!(where_(&out[2].0), vec![("words.txt".to_string(), 1)]);
    assert_eq!(out[3].0["totalMatches"], 0, "{:?}", out[3]);
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn grep_stops_at_timeout_ms_returning_what_it_found_so_far() {
    // 1,000 matching lines, then 30 MB on one line that this pattern takes
    // minutes to search.
    let ws = common::workspace();
    let mut text = b"needle\n".repeat(1000);
    text.extend(vec![b'a'; 30_000_000]);
    text.push(b'\n');
    write(ws.path(), "mixed.txt", &text);
    let start = Instant::now();
    let (out, took) = calls_within(
        ws.path(),
        &[("grep", "{pattern = 'needle|a{100}{100}', timeoutMs = 1500}")],
        Duration::from_secs(60),
    );
    let (o, e) = &out[0];
    assert_eq!(*o, Value::Null);
    assert_eq!(e["code"], "timeout", "{e}");
    assert_eq!(e["timeoutMs"], 1500);
    assert_eq!(
        e["message"],
        "grep stopped at its timeoutMs of 1500 ms, having searched 1 file so far; what it found so far is in this \
         error, in the fields a finished call returns. Narrow `root` or `globs`, or make the pattern simpler, or \
         raise timeoutMs (at most 600000)."
    );
    // The lines found before the long one, in the output's own fields.
    assert_eq!(e["totalMatches"], 1000);
    assert_eq!(e["totalFiles"], 1);
    assert_eq!(e["files"], json!(["mixed.txt"]));
    let matches = e["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 200);
    assert!(matches
        .iter()
        .enumerate()
        .all(|(i, m)| m["text"] == "needle" && m["line"] == i as u64 + 1));
    assert_eq!(e["truncated"], true);
    let since = start.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?} ({since:?})");
    // The same file, a pattern that is quick on it: all of it.
    let (out, _) = calls_within(
        ws.path(),
        &[("grep", "{pattern = 'needle'}")],
        Duration::from_secs(60),
    );
    assert_eq!(out[0].1, Value::Null);
    assert_eq!(out[0].0["totalMatches"], 1000);
}

#[test]
fn glob_stops_at_timeout_ms_returning_the_paths_found_so_far() {
    let ws = common::workspace();
    for d in 0..120 {
        let dir = ws.path().join(format!("d{d:03}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..250 {
            fs::write(dir.join(format!("f{f:03}.txt")), "x\n").unwrap();
        }
    }
    let (out, took) = calls_within(
        ws.path(),
        &[
            ("glob", "{pattern = '**/*.txt', timeoutMs = 20}"),
            ("glob", "{pattern = '**/*.txt', limit = 3}"),
        ],
        Duration::from_secs(60),
    );
    let (o, e) = &out[0];
    assert_eq!(*o, Value::Null);
    assert_eq!(e["code"], "timeout", "{e}");
    assert_eq!(e["timeoutMs"], 20);
    let total = e["total"].as_u64().unwrap();
    assert!(total < 30_000, "the walk was cut: {total}");
    let listed = paths(e);
    assert_eq!(listed.len() as u64, total.min(1000));
    assert!(listed.windows(2).all(|w| w[0] < w[1]), "sorted");
    assert!(
        listed.iter().all(|p| ws.path().join(p).is_file()),
        "{listed:?}"
    );
    assert!(e["message"]
        .as_str()
        .unwrap()
        .starts_with("glob stopped at its timeoutMs of 20 ms, having found "));
    // Without a deadline this short, the whole tree.
    assert_eq!(out[1].1, Value::Null);
    assert_eq!(out[1].0["total"], 30_000);
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn grep_and_glob_refuse_a_timeout_of_zero_or_over_ten_minutes() {
    let ws = common::workspace();
    let (out, _) = calls_within(
        ws.path(),
        &[
            ("grep", "{pattern = 'x', timeoutMs = 600001}"),
            ("glob", "{pattern = '*', timeoutMs = 0}"),
            ("glob", "{pattern = '*', timeoutMs = 600000}"),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(
        out[0].1,
        json!({"code": "invalid_input", "field": "timeoutMs",
               "message": "`timeoutMs` is at most 600000 (ten minutes), got 600001; narrow `root` or the pattern instead."})
    );
    assert_eq!(
        out[1].1,
        json!({"code": "invalid_input", "field": "timeoutMs",
               "message": "`timeoutMs` must be at least 1 (default 60000, a minute)."})
    );
    assert_eq!(out[2].1, Value::Null);
}

#[test]
fn grep_and_glob_show_their_deadline_in_the_flow_schema() {
    for flow in ["grep", "glob"] {
        let out = Command::new(common::sluice_bin())
            .args(["flows", flow])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("timeoutMs") && text.contains("default 60000, at most 600000"),
            "{flow}: {text}"
        );
    }
}
