//! How a path in a flow's input becomes the path that is checked and touched:
//! relative to the workspace, every symlink resolved (dangling ones too), and
//! refused when the resolved path leaves the workspace.

mod common;

use common::{lua_json, workspace};
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;

#[test]
fn a_path_under_a_file_is_not_a_directory() {
    let ws = workspace();
    fs::write(ws.path().join("f.txt"), "x").unwrap();
    let out = lua_json(
        ws.path(),
        r#"local _, r = sluice.read{path = "f.txt/b"}
        local _, w = sluice.write{path = "f.txt/b", content = "x"}
        emit({r.code, w.code})"#,
    );
    assert_eq!(out[0], json!(["not_a_directory", "not_a_directory"]));
    assert_eq!(fs::read_to_string(ws.path().join("f.txt")).unwrap(), "x");
}

#[test]
fn write_through_a_dangling_link_creates_its_target_and_keeps_the_link() {
    let ws = workspace();
    symlink("real/target.txt", ws.path().join("alias.txt")).unwrap();
    let out = lua_json(
        ws.path(),
        r#"emit(assert(sluice.write{path = "alias.txt", content = "via link"}))"#,
    );
    assert_eq!(out[0], json!({"bytesWritten": 8, "created": true}));
    assert_eq!(
        fs::read_to_string(ws.path().join("real/target.txt")).unwrap(),
        "via link"
    );
    assert!(fs::symlink_metadata(ws.path().join("alias.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_dangling_link_out_of_the_workspace_is_refused_before_anything_is_created() {
    let ws = workspace();
    let outside = workspace();
    let target = fs::canonicalize(outside.path())
        .unwrap()
        .join("new/escape.txt");
    symlink(&target, ws.path().join("escape.txt")).unwrap();
    let out = lua_json(
        ws.path(),
        r#"local _, err = sluice.write{path = "escape.txt", content = "x"}
        emit({err.code, err.capability})"#,
    );
    assert_eq!(
        out[0],
        json!([
            "permission_required",
            format!("fs:write:{}", target.display())
        ])
    );
    assert!(
        !target.parent().unwrap().exists(),
        "nothing created outside"
    );
}

#[test]
fn dot_dot_out_of_the_workspace_is_refused() {
    let ws = workspace();
    let inner = ws.path().join("inner");
    fs::create_dir(&inner).unwrap();
    let out = lua_json(
        &inner,
        r#"local _, err = sluice.ls{path = "../"}
        emit({err.code, err.capability})"#,
    );
    assert_eq!(
        out[0],
        json!([
            "permission_required",
            format!("fs:read:{}", fs::canonicalize(ws.path()).unwrap().display())
        ])
    );
}

#[test]
fn dot_dot_after_a_missing_part_still_resolves_the_links_that_follow() {
    let ws = workspace();
    let outside = workspace();
    fs::write(outside.file("secret.txt"), "SECRET").unwrap();
    fs::write(ws.file("f.txt"), "x").unwrap();
    symlink(outside.path(), ws.file("out")).unwrap();
    let out = lua_json(
        ws.path(),
        r#"local _, r = sluice.read{path = "nonexist/../out/secret.txt"}
        local _, w = sluice.write{path = "gone/../out/pwned.txt", content = "x"}
        local _, l = sluice.ls{path = "zz/../out"}
        local _, f = sluice.read{path = "f.txt/x/../../out/secret.txt"}
        emit({r.capability, w.capability, l.capability, f.capability})"#,
    );
    let o = outside.path().display();
    assert_eq!(
        out[0],
        json!([
            format!("fs:read:{o}/secret.txt"),
            format!("fs:write:{o}/pwned.txt"),
            format!("fs:read:{o}"),
            format!("fs:read:{o}/secret.txt"),
        ])
    );
    assert!(!outside.file("pwned.txt").exists());
}

#[test]
fn a_trailing_slash_names_a_folder() {
    let ws = workspace();
    fs::write(ws.file("a.txt"), "x\n").unwrap();
    let out = lua_json(
        ws.path(),
        r#"local _, r = sluice.read{path = "a.txt/"}
        local _, e = sluice.edit{path = "a.txt/", oldString = "x", newString = "y"}
        local _, w = sluice.write{path = "newdir/", content = "x"}
        local l = sluice.ls{path = "./"}
        emit({r.code, e.code, w.code, l.total})"#,
    );
    // ls counts a.txt and the run's audit store, .sluice.
    assert_eq!(
        out[0],
        json!(["not_a_directory", "not_a_directory", "command_failed", 2])
    );
    assert!(!ws.file("newdir").exists());
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "x\n");
}
