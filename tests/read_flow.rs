//! `sluice.read` driven through the real binary: paging, raw content, line
//! endings, the error codes a caller acts on, and the workspace boundary.

mod common;

use common::{canon, lua_str};

use serde_json::{json, Value};
use std::fs;
use std::path::Path;

/// Calls `sluice.read(<input>)` and returns `(out, err)`, each JSON null
/// when absent.
fn read(ws: &Path, input: &str) -> (Value, Value) {
    let body = format!("local out, err = sluice.read({input})\nemit({{out = out, err = err}})\n");
    let mut lines = common::lua_json(ws, &body);
    assert_eq!(lines.len(), 1, "one emitted line: {lines:?}");
    let mut v = lines.remove(0);
    (v["out"].take(), v["err"].take())
}

/// The page of a read that must succeed.
fn read_ok(ws: &Path, input: &str) -> Value {
    let (out, err) = read(ws, input);
    assert_eq!(err, Value::Null, "unexpected error");
    out
}

/// The error of a read that must fail.
fn read_err(ws: &Path, input: &str) -> Value {
    let (out, err) = read(ws, input);
    assert_eq!(out, Value::Null, "unexpected success");
    err
}

fn numbered(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("line {i}")).collect()
}

#[test]
fn read_default_page_is_the_first_2000_lines_of_a_3000_line_file() {
    let ws = common::workspace();
    let lines = numbered(3000);
    fs::write(ws.path().join("big.txt"), lines.join("\n") + "\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "big.txt"}"#);
    assert_eq!(
        out,
        json!({
            "content": lines[..2000].join("\n"),
            "startLine": 1,
            "endLine": 2000,
            "totalLines": 3000,
            "truncated": true,
            "notice": "Showing lines 1-2000 of 3000. Continue with offset = 2001.",
        })
    );
}

#[test]
fn read_continues_from_the_offset_the_notice_names() {
    let ws = common::workspace();
    let lines = numbered(3000);
    fs::write(ws.path().join("big.txt"), lines.join("\n") + "\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "big.txt", offset = 2001}"#);
    assert_eq!(
        out,
        json!({
            "content": lines[2000..].join("\n"),
            "startLine": 2001,
            "endLine": 3000,
            "totalLines": 3000,
            "truncated": false,
        })
    );
}

#[test]
fn read_offset_and_limit_are_1_based_lines() {
    let ws = common::workspace();
    let lines = numbered(10);
    fs::write(ws.path().join("f.txt"), lines.join("\n") + "\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "f.txt", offset = 3, limit = 4}"#);
    assert_eq!(
        out,
        json!({
            "content": "line 3\nline 4\nline 5\nline 6",
            "startLine": 3,
            "endLine": 6,
            "totalLines": 10,
            "truncated": true,
            "notice": "Showing lines 3-6 of 10. Continue with offset = 7.",
        })
    );
    let first = read_ok(ws.path(), r#"{path = "f.txt", offset = 1, limit = 1}"#);
    assert_eq!(first["content"], "line 1");
    assert_eq!(
        (first["startLine"].as_u64(), first["endLine"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn read_limit_past_the_end_stops_at_the_last_line_untruncated() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), numbered(10).join("\n") + "\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "f.txt", offset = 9, limit = 50}"#);
    assert_eq!(
        out,
        json!({
            "content": "line 9\nline 10",
            "startLine": 9,
            "endLine": 10,
            "totalLines": 10,
            "truncated": false,
        })
    );
}

#[test]
fn read_content_is_raw_without_a_line_number_gutter() {
    let ws = common::workspace();
    let text = "fn main() {\n\tlet x = 1;\n    println!(\"{x}\");\n}\n";
    fs::write(ws.path().join("main.rs"), text).unwrap();
    let out = read_ok(ws.path(), r#"{path = "main.rs"}"#);
    assert_eq!(
        out,
        json!({
            "content": "fn main() {\n\tlet x = 1;\n    println!(\"{x}\");\n}",
            "startLine": 1,
            "endLine": 4,
            "totalLines": 4,
            "truncated": false,
        })
    );
}

#[test]
fn read_crlf_file_keeps_every_cr_and_drops_only_the_final_newline() {
    let ws = common::workspace();
    fs::write(ws.path().join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "crlf.txt"}"#);
    assert_eq!(
        out,
        json!({
            "content": "one\r\ntwo\r",
            "startLine": 1,
            "endLine": 2,
            "totalLines": 2,
            "truncated": false,
        })
    );
}

#[test]
fn read_file_without_a_final_newline_counts_its_last_line() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "alpha\nbeta").unwrap();
    let out = read_ok(ws.path(), r#"{path = "f.txt"}"#);
    assert_eq!(
        out,
        json!({
            "content": "alpha\nbeta",
            "startLine": 1,
            "endLine": 2,
            "totalLines": 2,
            "truncated": false,
        })
    );
    let last = read_ok(ws.path(), r#"{path = "f.txt", offset = 2}"#);
    assert_eq!(last["content"], "beta");
    assert_eq!(last["totalLines"], 2);
}

#[test]
fn read_file_holding_one_newline_is_one_empty_line() {
    let ws = common::workspace();
    fs::write(ws.path().join("nl.txt"), "\n").unwrap();
    let out = read_ok(ws.path(), r#"{path = "nl.txt"}"#);
    assert_eq!(
        out,
        json!({"content": "", "startLine": 1, "endLine": 1, "totalLines": 1, "truncated": false})
    );
}

#[test]
fn read_empty_file_is_an_empty_page_ending_at_line_0() {
    let ws = common::workspace();
    fs::write(ws.path().join("empty.txt"), "").unwrap();
    let out = read_ok(ws.path(), r#"{path = "empty.txt"}"#);
    assert_eq!(
        out,
        json!({"content": "", "startLine": 1, "endLine": 0, "totalLines": 0, "truncated": false})
    );
}

#[test]
fn read_offset_past_the_end_is_offset_out_of_range() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(ws.path().join("f.txt"), "a\nb\nc\n").unwrap();
    // offset = totalLines works ...
    let out = read_ok(ws.path(), r#"{path = "f.txt", offset = 3}"#);
    assert_eq!(
        out,
        json!({"content": "c", "startLine": 3, "endLine": 3, "totalLines": 3, "truncated": false})
    );
    // ... and offset = totalLines + 1 does not.
    let err = read_err(ws.path(), r#"{path = "f.txt", offset = 4}"#);
    let shown = root.join("f.txt");
    assert_eq!(
        err,
        json!({
            "code": "offset_out_of_range",
            "message": format!(
                "offset 4 is past the end of {}, which has 3 lines. Give an offset from 1 to 3.",
                shown.display()
            ),
            "offset": 4,
            "totalLines": 3,
        })
    );
}

#[test]
fn read_empty_file_at_offset_2_is_offset_out_of_range() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(ws.path().join("empty.txt"), "").unwrap();
    let err = read_err(ws.path(), r#"{path = "empty.txt", offset = 2}"#);
    assert_eq!(
        err,
        json!({
            "code": "offset_out_of_range",
            "message": format!(
                "offset 2 is past the end of {}, which has 0 lines. Give an offset from 1 to 1.",
                root.join("empty.txt").display()
            ),
            "offset": 2,
            "totalLines": 0,
        })
    );
}

#[test]
fn read_directory_is_is_directory() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(ws.path().join("src")).unwrap();
    let err = read_err(ws.path(), r#"{path = "src"}"#);
    let p = root.join("src");
    assert_eq!(
        err,
        json!({
            "code": "is_directory",
            "message": format!("{} is a directory; list it with ls, or name a file inside it.", p.display()),
            "path": p.display().to_string(),
        })
    );
}

#[test]
fn read_file_with_a_nul_byte_is_binary_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(ws.path().join("nul.bin"), b"ab\0cd\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "nul.bin"}"#);
    let p = root.join("nul.bin");
    assert_eq!(
        err,
        json!({
            "code": "binary_file",
            "message": format!(
                "{} holds a NUL byte at byte 2: it is a binary file, and text flows only handle UTF-8 text.",
                p.display()
            ),
            "path": p.display().to_string(),
            "offset": 2,
        })
    );
}

#[test]
fn read_file_with_invalid_utf8_is_binary_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(ws.path().join("latin1.txt"), b"caf\xe9 ok\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "latin1.txt"}"#);
    let p = root.join("latin1.txt");
    assert_eq!(
        err,
        json!({
            "code": "binary_file",
            "message": format!(
                "{} holds invalid UTF-8 at byte 3: it is a binary file, and text flows only handle UTF-8 text.",
                p.display()
            ),
            "path": p.display().to_string(),
            "offset": 3,
        })
    );
}

#[test]
fn read_fifo_is_not_a_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("pipe");
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let err = read_err(ws.path(), r#"{path = "pipe"}"#);
    assert_eq!(
        err,
        json!({
            "code": "not_a_file",
            "message": format!(
                "{} is not a regular file (a device, socket or pipe); file flows only handle regular files.",
                p.display()
            ),
            "path": p.display().to_string(),
        })
    );
}

/// A Unix socket cannot be opened at all; it is `not_a_file`, as a pipe
/// is (and as `write` says of it), not the system's "no such device".
#[test]
fn read_socket_is_not_a_file() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&p).unwrap();
    let err = read_err(ws.path(), r#"{path = "sock"}"#);
    assert_eq!(err["code"], "not_a_file", "{err}");
    assert_eq!(
        err["message"],
        format!(
            "{} is not a regular file (a device, socket or pipe); file flows only handle regular files.",
            p.display()
        )
    );
}

#[test]
fn read_missing_file_is_not_found_naming_the_nearest_existing_folder() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(ws.path().join("a")).unwrap();
    let err = read_err(ws.path(), r#"{path = "a/b/c.txt"}"#);
    let p = root.join("a/b/c.txt");
    let nearest = root.join("a");
    assert_eq!(
        err,
        json!({
            "code": "not_found",
            "message": format!(
                "{} does not exist. The nearest existing folder is {}; list it with ls to see what it holds.",
                p.display(),
                nearest.display()
            ),
            "path": p.display().to_string(),
            "nearest": nearest.display().to_string(),
        })
    );
}

#[test]
fn read_missing_file_names_the_nearest_folder_in_canonical_form_through_dotdot() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(ws.path().join("a")).unwrap();
    let err = read_err(ws.path(), r#"{path = "a/../a/b/c.txt"}"#);
    assert_eq!(err["code"], "not_found");
    assert_eq!(err["nearest"], root.join("a").display().to_string());
}

#[test]
fn read_below_a_file_is_not_a_directory() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt/inner.txt"}"#);
    let p = root.join("f.txt/inner.txt");
    assert_eq!(
        err,
        json!({
            "code": "not_a_directory",
            "message": format!("{}: a part of this path is a file, not a folder.", p.display()),
            "path": p.display().to_string(),
        })
    );
}

#[test]
fn read_line_of_5000_characters_is_clipped_to_2000_and_named_in_the_notice() {
    let ws = common::workspace();
    let long = "x".repeat(5000);
    fs::write(ws.path().join("long.txt"), format!("short\n{long}\nend\n")).unwrap();
    let out = read_ok(ws.path(), r#"{path = "long.txt"}"#);
    assert_eq!(
        out,
        json!({
            "content": format!("short\n{}\nend", "x".repeat(2000)),
            "startLine": 1,
            "endLine": 3,
            "totalLines": 3,
            "truncated": true,
            "notice": "Line 2 is longer than 2000 characters and clipped to their first 2000; \
                       a clipped line cannot be an edit anchor, so anchor it by startLine/endLine.",
        })
    );
}

#[test]
fn read_clips_long_lines_by_characters_not_bytes() {
    let ws = common::workspace();
    // 2,000 two-byte characters fit; 5,000 are clipped to 2,000 characters.
    let fits = "é".repeat(2000);
    let long = "é".repeat(5000);
    fs::write(ws.path().join("utf8.txt"), format!("{fits}\n{long}\n")).unwrap();
    let out = read_ok(ws.path(), r#"{path = "utf8.txt"}"#);
    let content = out["content"].as_str().unwrap();
    let lines: Vec<&str> = content.split('\n').collect();
    assert_eq!(lines, vec![fits.as_str(), fits.as_str()]);
    assert_eq!(lines[1].chars().count(), 2000);
    assert_eq!(
        out["notice"],
        "Line 2 is longer than 2000 characters and clipped to their first 2000; \
         a clipped line cannot be an edit anchor, so anchor it by startLine/endLine."
    );
    assert_eq!(out["truncated"], true);
}

#[test]
fn read_page_cut_by_the_50_kib_byte_budget_ends_on_a_whole_line() {
    const PAGE_BYTES: usize = 50 * 1024;
    let ws = common::workspace();
    // Lines of varied length with multibyte characters, 300 of them (far
    // over 50 KiB, far under 2,000 lines).
    let lines: Vec<String> = (1..=300)
        .map(|i| format!("{i}:{}", "é-abcdefg".repeat((i * 7) % 60 + 1)))
        .collect();
    fs::write(ws.path().join("wide.txt"), lines.join("\n") + "\n").unwrap();
    // The longest prefix of whole lines whose joined bytes fit the budget.
    let mut used = lines[0].len();
    let mut n = 1;
    while n < lines.len() && used + 1 + lines[n].len() <= PAGE_BYTES {
        used += 1 + lines[n].len();
        n += 1;
    }
    assert!(n < 300, "the fixture must overflow the budget");
    let out = read_ok(ws.path(), r#"{path = "wide.txt"}"#);
    assert_eq!(
        out,
        json!({
            "content": lines[..n].join("\n"),
            "startLine": 1,
            "endLine": n,
            "totalLines": 300,
            "truncated": true,
            "notice": format!(
                "Showing lines 1-{n} of 300 (the page stopped at its 51200-byte budget, on a whole line). \
                 Continue with offset = {}.",
                n + 1
            ),
        })
    );
    // Every line of the page is a whole source line.
    let content = out["content"].as_str().unwrap();
    assert!(content.len() <= PAGE_BYTES);
    for (i, line) in content.split('\n').enumerate() {
        assert_eq!(line, lines[i], "line {} of the page", i + 1);
    }
    // The next page starts on the first line left out.
    let next = read_ok(
        ws.path(),
        &format!(r#"{{path = "wide.txt", offset = {}, limit = 1}}"#, n + 1),
    );
    assert_eq!(next["content"], lines[n].as_str());
}

#[test]
fn read_file_over_64_mib_is_response_too_large() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let p = root.join("huge.log");
    let f = fs::File::create(&p).unwrap();
    f.set_len(64 * 1024 * 1024 + 1).unwrap();
    drop(f);
    let err = read_err(ws.path(), r#"{path = "huge.log"}"#);
    assert_eq!(
        err,
        json!({
            "code": "response_too_large",
            "message": format!(
                "{} is 67108865 bytes, over the 67108864 byte limit for text files; use grep to find the lines you need.",
                p.display()
            ),
            "path": p.display().to_string(),
            "bytes": 67108865u64,
            "limit": 67108864u64,
        })
    );
}

#[test]
fn read_through_a_symlink_inside_the_workspace_reads_its_target() {
    let ws = common::workspace();
    fs::create_dir(ws.path().join("docs")).unwrap();
    fs::write(ws.path().join("docs/real.md"), "# Title\nbody\n").unwrap();
    std::os::unix::fs::symlink("docs/real.md", ws.path().join("alias.md")).unwrap();
    std::os::unix::fs::symlink("docs", ws.path().join("d")).unwrap();
    let expected = json!({
        "content": "# Title\nbody",
        "startLine": 1,
        "endLine": 2,
        "totalLines": 2,
        "truncated": false,
    });
    assert_eq!(read_ok(ws.path(), r#"{path = "alias.md"}"#), expected);
    assert_eq!(read_ok(ws.path(), r#"{path = "d/real.md"}"#), expected);
}

#[test]
fn read_through_a_symlink_pointing_outside_the_workspace_needs_approval() {
    let ws = common::workspace();
    let outside = common::workspace();
    let secret = canon(outside.path()).join("secret.txt");
    fs::write(&secret, "top secret\n").unwrap();
    std::os::unix::fs::symlink(&secret, ws.path().join("innocent.txt")).unwrap();
    let err = read_err(ws.path(), r#"{path = "innocent.txt"}"#);
    let cap = format!("fs:read:{}", secret.display());
    assert_eq!(err, common::needs_approval(&cap));
}

#[test]
fn read_absolute_path_outside_the_workspace_needs_approval() {
    let ws = common::workspace();
    let outside = common::workspace();
    let secret = canon(outside.path()).join("secret.txt");
    fs::write(&secret, "top secret\n").unwrap();
    let err = read_err(
        ws.path(),
        &format!("{{path = {}}}", lua_str(&secret.display().to_string())),
    );
    assert_eq!(err["code"], "permission_required");
    assert_eq!(err["capability"], format!("fs:read:{}", secret.display()));
}

#[test]
fn read_dotdot_out_of_the_workspace_needs_approval() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let sibling = root.parent().unwrap().join(format!(
        "{}-sibling.txt",
        root.file_name().unwrap().to_string_lossy()
    ));
    fs::write(&sibling, "outside\n").unwrap();
    let rel = format!("../{}", sibling.file_name().unwrap().to_string_lossy());
    let err = read_err(ws.path(), &format!("{{path = {}}}", lua_str(&rel)));
    fs::remove_file(&sibling).unwrap();
    assert_eq!(err["code"], "permission_required");
    assert_eq!(err["capability"], format!("fs:read:{}", sibling.display()));
}

#[test]
fn read_absolute_path_inside_the_workspace_works() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(root.join("f.txt"), "abs\n").unwrap();
    let out = read_ok(
        ws.path(),
        &format!(
            "{{path = {}}}",
            lua_str(&root.join("f.txt").display().to_string())
        ),
    );
    assert_eq!(out["content"], "abs");
}

#[test]
fn read_unknown_field_is_invalid_input_naming_it() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt", offest = 3}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "offest",
            "message": "read: `offest`: unknown field `offest`, expected one of `path`, `offset`, `limit`. \
                        `sluice flows read` shows every field.",
        })
    );
}

#[test]
fn read_offset_of_the_wrong_type_is_invalid_input_naming_offset() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt", offset = "3"}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "offset",
            "message": "read: `offset`: invalid type: string \"3\", expected u64. `sluice flows read` shows every field.",
        })
    );
}

#[test]
fn read_negative_offset_is_invalid_input_naming_offset() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt", offset = -1}"#);
    assert_eq!(err["code"], "invalid_input");
    assert_eq!(err["field"], "offset");
}

#[test]
fn read_offset_0_is_invalid_input() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt", offset = 0}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "offset",
            "message": "`offset` is 1-based: give 1 or more.",
        })
    );
}

#[test]
fn read_limit_0_is_invalid_input() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "x\n").unwrap();
    let err = read_err(ws.path(), r#"{path = "f.txt", limit = 0}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "limit",
            "message": "`limit` is 1-based: give 1 or more.",
        })
    );
}

#[test]
fn read_without_path_is_invalid_input_naming_path() {
    let ws = common::workspace();
    let err = read_err(ws.path(), "{}");
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "path",
            "message": "read: `path`: missing field `path`. `sluice flows read` shows every field.",
        })
    );
}

#[test]
fn read_empty_path_is_invalid_input_naming_path() {
    let ws = common::workspace();
    let err = read_err(ws.path(), r#"{path = ""}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "path",
            "message": "`path` is empty: give a path relative to the workspace or an absolute one.",
        })
    );
}

#[test]
fn read_of_a_non_table_raises_a_lua_error() {
    let ws = common::workspace();
    let out = common::lua_json(
        ws.path(),
        r#"local ok, e = pcall(sluice.read, "x")
emit({ok = ok, first = tostring(e):match("^[^\n]*")})
local ok2, e2 = pcall(sluice.read)
emit({ok = ok2, first = tostring(e2):match("^[^\n]*")})
"#,
    );
    assert_eq!(
        out,
        vec![
            json!({
                "ok": false,
                "first": "sluice.read: expected a table of named fields, got string; \
                          call it as sluice.read{path = \"...\"}",
            }),
            json!({
                "ok": false,
                "first": "sluice.read: expected a table of named fields, got nil; \
                          call it as sluice.read{path = \"...\"}",
            }),
        ]
    );
}

#[test]
fn read_of_a_non_table_without_pcall_fails_the_run_with_exit_1() {
    let ws = common::workspace();
    let run = common::run_lua(
        ws.path(),
        "sluice.read(\"x\")\nprint(\"not reached\")\n",
        &[],
    );
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    let first = run.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("sluice: ") && first.ends_with(".lua:1: sluice.read: expected a table of named fields, got string; call it as sluice.read{path = \"...\"}"),
        "the error names the script's line: {first}"
    );
}

#[test]
fn read_error_tostring_is_code_colon_message() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let out = common::lua_json(
        ws.path(),
        r#"local out, err = sluice.read{path = "missing.txt"}
emit({out = out, s = tostring(err), code = err.code, message = err.message})
"#,
    );
    let message = format!(
        "{} does not exist. The nearest existing folder is {}; list it with ls to see what it holds.",
        root.join("missing.txt").display(),
        root.display()
    );
    assert_eq!(
        out,
        vec![json!({
            "s": format!("not_found: {message}"),
            "code": "not_found",
            "message": message,
        })]
    );
}

#[test]
fn read_through_sluice_call_matches_sluice_read() {
    let ws = common::workspace();
    fs::write(ws.path().join("f.txt"), "a\nb\n").unwrap();
    let out = common::lua_json(
        ws.path(),
        r#"emit(sluice.call("read", {path = "f.txt"}))
emit(sluice.read{path = "f.txt"})
"#,
    );
    let page = json!({"content": "a\nb", "startLine": 1, "endLine": 2, "totalLines": 2, "truncated": false});
    assert_eq!(out, vec![page.clone(), page]);
}
