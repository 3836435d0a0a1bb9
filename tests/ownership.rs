//! Replacing a file keeps its owner, group and set-id bits: the staged copy is
//! chowned before it is chmodded (chown clears set-id bits), then renamed.
//! Changing a file's owner needs root; these tests say so rather than skip.

mod common;

use common::{lua_json, workspace};
use std::fs;
use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};

/// The uid/gid of `nobody` on Debian.
const NOBODY: u32 = 65534;

fn require_root() {
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "this test changes a file's owner and needs root: run scripts/test as root (CI does)"
    );
}

#[test]
fn edit_keeps_owner_group_and_setuid_bits() {
    require_root();
    let ws = workspace();
    let f = ws.path().join("tool.sh");
    fs::write(&f, "echo old\n").unwrap();
    chown(&f, Some(NOBODY), Some(NOBODY)).unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4755)).unwrap();
    let out = lua_json(
        ws.path(),
        r#"local out, err = sluice.edit{path = "tool.sh", oldString = "old", newString = "new"}
        emit({ok = out ~= nil, err = err and tostring(err)})"#,
    );
    assert_eq!(out[0]["ok"], true, "{}", out[0]);
    let meta = fs::metadata(&f).unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "echo new\n");
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
    assert_eq!(meta.mode() & 0o7777, 0o4755);
}

#[test]
fn write_keeps_owner_and_group_of_an_existing_file() {
    require_root();
    let ws = workspace();
    let f = ws.path().join("data.txt");
    fs::write(&f, "old").unwrap();
    chown(&f, Some(NOBODY), Some(NOBODY)).unwrap();
    lua_json(
        ws.path(),
        r#"emit(assert(sluice.write{path = "data.txt", content = "new"}))"#,
    );
    let meta = fs::metadata(&f).unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "new");
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
}
