//! `sluice.ls` driven through the real binary: sorted entries with their
//! kinds, paging by 1,000, and the errors a caller acts on.

mod common;

use common::{canon, lua_str};

use serde_json::{json, Value};
use std::fs;
use std::path::Path;

/// Calls `sluice.ls(<input>)` once per input, in one run, and returns
/// `(out, err)` for each, JSON null when absent.
fn ls_many(ws: &Path, inputs: &[&str]) -> Vec<(Value, Value)> {
    let body: String = inputs
        .iter()
        .map(|i| {
            format!("do local out, err = sluice.ls({i}); emit({{out = out, err = err}}) end\n")
        })
        .collect();
    common::lua_json(ws, &body)
        .into_iter()
        .map(|mut v| (v["out"].take(), v["err"].take()))
        .collect()
}

fn ls(ws: &Path, input: &str) -> (Value, Value) {
    ls_many(ws, &[input]).remove(0)
}

fn ls_ok(ws: &Path, input: &str) -> Value {
    let (out, err) = ls(ws, input);
    assert_eq!(err, Value::Null, "unexpected error");
    out
}

fn ls_err(ws: &Path, input: &str) -> Value {
    let (out, err) = ls(ws, input);
    assert_eq!(out, Value::Null, "unexpected success");
    err
}

fn file_entries(range: std::ops::RangeInclusive<usize>) -> Vec<Value> {
    range
        .map(|i| json!({"name": format!("f{i:04}.txt"), "kind": "file"}))
        .collect()
}

/// A folder of `ws` holding f0001.txt .. f2500.txt.
fn folder_of_2500(ws: &Path) {
    let dir = ws.join("many");
    fs::create_dir(&dir).unwrap();
    for i in 1..=2500 {
        fs::write(dir.join(format!("f{i:04}.txt")), "").unwrap();
    }
}

#[test]
fn ls_lists_entries_sorted_by_name_with_their_kind() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let dir = root.join("src");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("b.txt"), "b").unwrap();
    fs::write(dir.join("B.md"), "B").unwrap();
    fs::write(dir.join(".hidden"), "h").unwrap();
    fs::create_dir(dir.join("a_dir")).unwrap();
    std::os::unix::fs::symlink("b.txt", dir.join("c_link")).unwrap();
    std::os::unix::fs::symlink("a_dir", dir.join("d_dirlink")).unwrap();
    std::os::unix::fs::symlink("missing", dir.join("e_dangling")).unwrap();
    nix::unistd::mkfifo(
        &dir.join("f_fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let out = ls_ok(ws.path(), r#"{path = "src"}"#);
    assert_eq!(
        out,
        json!({
            "entries": [
                {"name": ".hidden", "kind": "file"},
                {"name": "B.md", "kind": "file"},
                {"name": "a_dir", "kind": "directory"},
                {"name": "b.txt", "kind": "file"},
                {"name": "c_link", "kind": "symlink"},
                {"name": "d_dirlink", "kind": "symlink"},
                {"name": "e_dangling", "kind": "symlink"},
                {"name": "f_fifo", "kind": "other"},
            ],
            "total": 8,
            "truncated": false,
        })
    );
}

#[test]
fn ls_defaults_to_the_workspace() {
    let ws = common::workspace();
    fs::write(ws.path().join("z.txt"), "").unwrap();
    fs::create_dir(ws.path().join("lib")).unwrap();
    // The run's own audit store is there too: ls shows what the folder holds.
    let expected = json!({
        "entries": [
            {"name": ".sluice", "kind": "directory"},
            {"name": "lib", "kind": "directory"},
            {"name": "z.txt", "kind": "file"},
        ],
        "total": 3,
        "truncated": false,
    });
    let results = ls_many(ws.path(), &["{}", r#"{path = "."}"#]);
    assert_eq!(
        results,
        vec![(expected.clone(), Value::Null), (expected, Value::Null)]
    );
}

#[test]
fn ls_of_an_empty_folder_is_an_empty_page() {
    let ws = common::workspace();
    fs::create_dir(ws.path().join("empty")).unwrap();
    let out = ls_ok(ws.path(), r#"{path = "empty"}"#);
    assert_eq!(out, json!({"entries": [], "total": 0, "truncated": false}));
}

#[test]
fn ls_pages_1000_entries_at_a_time() {
    let ws = common::workspace();
    folder_of_2500(ws.path());
    let results = ls_many(
        ws.path(),
        &[
            r#"{path = "many"}"#,
            r#"{path = "many", offset = 1001}"#,
            r#"{path = "many", offset = 2001}"#,
        ],
    );
    assert_eq!(
        results[0],
        (
            json!({
                "entries": file_entries(1..=1000),
                "total": 2500,
                "truncated": true,
                "notice": "Showing entries 1-1000 of 2500. Continue with offset = 1001.",
            }),
            Value::Null
        )
    );
    assert_eq!(
        results[1],
        (
            json!({
                "entries": file_entries(1001..=2000),
                "total": 2500,
                "truncated": true,
                "notice": "Showing entries 1001-2000 of 2500. Continue with offset = 2001.",
            }),
            Value::Null
        )
    );
    assert_eq!(
        results[2],
        (
            json!({
                "entries": file_entries(2001..=2500),
                "total": 2500,
                "truncated": false,
            }),
            Value::Null
        )
    );
}

#[test]
fn ls_offset_and_limit_select_a_smaller_page() {
    let ws = common::workspace();
    let dir = ws.path().join("d");
    fs::create_dir(&dir).unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        fs::write(dir.join(name), "").unwrap();
    }
    let out = ls_ok(ws.path(), r#"{path = "d", offset = 2, limit = 2}"#);
    assert_eq!(
        out,
        json!({
            "entries": [{"name": "b", "kind": "file"}, {"name": "c", "kind": "file"}],
            "total": 5,
            "truncated": true,
            "notice": "Showing entries 2-3 of 5. Continue with offset = 4.",
        })
    );
    let last = ls_ok(ws.path(), r#"{path = "d", offset = 5, limit = 1000}"#);
    assert_eq!(
        last,
        json!({"entries": [{"name": "e", "kind": "file"}], "total": 5, "truncated": false})
    );
}

#[test]
fn ls_limit_over_1000_is_invalid_input() {
    let ws = common::workspace();
    folder_of_2500(ws.path());
    let results = ls_many(
        ws.path(),
        &[
            r#"{path = "many", limit = 1001}"#,
            r#"{path = "many", limit = 1000}"#,
        ],
    );
    assert_eq!(
        results[0],
        (
            Value::Null,
            json!({
                "code": "invalid_input",
                "field": "limit",
                "message": "`limit` is at most 1000; page on with `offset` instead.",
            })
        )
    );
    assert_eq!(results[1].1, Value::Null);
    assert_eq!(results[1].0["entries"].as_array().unwrap().len(), 1000);
}

#[test]
fn ls_offset_0_and_limit_0_are_invalid_input() {
    let ws = common::workspace();
    let results = ls_many(ws.path(), &["{offset = 0}", "{limit = 0}"]);
    assert_eq!(
        results,
        vec![
            (
                Value::Null,
                json!({"code": "invalid_input", "field": "offset", "message": "`offset` is 1-based: give 1 or more."})
            ),
            (
                Value::Null,
                json!({"code": "invalid_input", "field": "limit", "message": "`limit` is 1-based: give 1 or more."})
            ),
        ]
    );
}

#[test]
fn ls_offset_past_the_end_is_offset_out_of_range() {
    let ws = common::workspace();
    let root = canon(ws.path());
    let dir = root.join("d");
    fs::create_dir(&dir).unwrap();
    for name in ["a", "b", "c"] {
        fs::write(dir.join(name), "").unwrap();
    }
    let results = ls_many(
        ws.path(),
        &[r#"{path = "d", offset = 3}"#, r#"{path = "d", offset = 4}"#],
    );
    assert_eq!(
        results[0],
        (
            json!({"entries": [{"name": "c", "kind": "file"}], "total": 3, "truncated": false}),
            Value::Null
        )
    );
    assert_eq!(
        results[1],
        (
            Value::Null,
            json!({
                "code": "offset_out_of_range",
                "message": format!("offset 4 is past the end of {}, which holds 3 entries.", dir.display()),
                "offset": 4,
                "total": 3,
            })
        )
    );
}

#[test]
fn ls_of_a_file_is_not_a_directory() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::write(root.join("f.txt"), "x\n").unwrap();
    let err = ls_err(ws.path(), r#"{path = "f.txt"}"#);
    let p = root.join("f.txt");
    assert_eq!(
        err,
        json!({
            "code": "not_a_directory",
            "message": format!("{} is not a folder; read it with read.", p.display()),
            "path": p.display().to_string(),
        })
    );
}

#[test]
fn ls_of_a_missing_folder_is_not_found_naming_the_nearest_existing_folder() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(root.join("a")).unwrap();
    let err = ls_err(ws.path(), r#"{path = "a/b/c"}"#);
    let p = root.join("a/b/c");
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
fn ls_through_a_symlinked_folder_lists_its_target() {
    let ws = common::workspace();
    let root = canon(ws.path());
    fs::create_dir(root.join("real")).unwrap();
    fs::write(root.join("real/one.txt"), "").unwrap();
    std::os::unix::fs::symlink("real", root.join("alias")).unwrap();
    let out = ls_ok(ws.path(), r#"{path = "alias"}"#);
    assert_eq!(
        out,
        json!({"entries": [{"name": "one.txt", "kind": "file"}], "total": 1, "truncated": false})
    );
}

#[test]
fn ls_outside_the_workspace_needs_approval() {
    let ws = common::workspace();
    let outside = common::workspace();
    let other = canon(outside.path());
    std::os::unix::fs::symlink(&other, ws.path().join("escape")).unwrap();
    let results = ls_many(
        ws.path(),
        &[
            &format!("{{path = {}}}", lua_str(&other.display().to_string())),
            r#"{path = "escape"}"#,
        ],
    );
    let cap = format!("fs:read:{}", other.display());
    for (out, err) in results {
        assert_eq!(out, Value::Null);
        assert_eq!(err["code"], "permission_required");
        assert_eq!(err["capability"], cap);
    }
}

#[test]
fn ls_unknown_field_is_invalid_input_naming_it() {
    let ws = common::workspace();
    let err = ls_err(ws.path(), r#"{pth = "."}"#);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "pth",
            "message": "ls: `pth`: unknown field `pth`, expected one of `path`, `offset`, `limit`. \
                        `sluice flows ls` shows every field.",
        })
    );
}
