//! Attacks on the file flows' paths while the tree changes under them. A
//! confined background job swaps workspace folders with symbolic links
//! (`renameat2(RENAME_EXCHANGE)` in a loop): `d` with a link to a folder
//! outside the workspace, `g` with a link to the workspace's `.git/hooks`.
//! Meanwhile the script reads, writes, edits, patches, lists, globs and
//! greps through `d` and `g`, for a bounded time, under bubblewrap and under
//! landlock. Every call acts on the folder the policy checked or fails
//! `permission_denied` (the path changed) or `permission_required` (the
//! policy saw the link); none reads, lists, writes or patches where a link
//! leads. Before the file flows opened paths without following links, each
//! run of this lost the race many times over.
//!
//! The controls: the same flows through legitimate links inside the
//! workspace (a link to a folder, to a file) work as they always did.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

/// Swaps each pair of names given (relative to its folder) over and over,
/// and says `swapping` once it has begun.
const SWAPPER: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[1::2], sys.argv[2::2])]
n = 0
while True:
    for a, b in pairs:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
    n += 1
    if n == 100:
        print("swapping", flush=True)
"#;

/// For `SECONDS`, every flow through the swapped folders, each outcome
/// tallied by flow; the content read and the names listed kept when they
/// name the outside.
const ATTACK: &str = r##"
local swapper = assert(sluice.bash{background = true, interpreter = "python3",
  script = sluice.args[1], args = {"a/d", "a/ln", "a/g", "a/h"}})
local heard, errors = "", ""
for _ = 1, 500 do
  local got = swapper:read()
  heard, errors = heard .. (got.stdout or ""), errors .. (got.stderr or "")
  if heard:find("swapping") then break end
  sluice.sleep(10)
end
assert(heard:find("swapping"), "the swapper did not start: " .. errors)

local tally, leaks, patched, said = {}, {}, "v=0", {}
local function note(flow, out, err)
  local key = out and "ok" or err.code
  tally[flow] = tally[flow] or {}
  tally[flow][key] = (tally[flow][key] or 0) + 1
  if err and not said[flow .. key] then said[flow .. key] = err.message end
end
local function leak(flow, what)
  if what:find("OUTSIDE") or what:find("outside%-only") then
    leaks[#leaks + 1] = flow .. ": " .. what
  end
end

local stop = sluice.now() + tonumber(sluice.args[2])
local i = 0
while sluice.now() < stop do
  i = i + 1
  local r, e = sluice.read{path = "a/d/a.txt"}
  note("read", r, e)
  if r then leak("read", r.content) end
  local l, e = sluice.ls{path = "a/d"}
  note("ls", l, e)
  if l then for _, x in ipairs(l.entries) do leak("ls", x.name) end end
  local gl, e = sluice.glob{pattern = "**/*.txt"}
  note("glob", gl, e)
  if gl then for _, p in ipairs(gl.paths) do leak("glob", p) end end
  local gr, e = sluice.grep{pattern = "OUTSIDE"}
  note("grep", gr, e)
  if gr then for _, m in ipairs(gr.matches) do leak("grep", m.file .. ":" .. m.text) end end
  local w, e = sluice.write{path = "a/d/w.txt", content = "w" .. i}
  note("write", w, e)
  local hook, e = sluice.write{path = "a/g/pre-commit", content = "#!/bin/sh\ntouch /tmp/pwned\n"}
  note("write-hook", hook, e)
  local ed, e = sluice.edit{path = "a/d/e.txt", startLine = 1, endLine = 1, newString = "count=" .. i}
  note("edit", ed, e)
  local patch = "*** Begin Patch\n*** Update File: a/d/p.txt\n@@\n-" .. patched .. "\n+v=" .. i ..
    "\n*** Add File: a/d/n" .. i .. ".txt\n+new\n*** End Patch"
  local ap, e = sluice.apply_patch{input = patch}
  note("apply_patch", ap, e)
  if ap then patched = "v=" .. i end
end
swapper:kill()
print(sluice.json.encode{tally = tally, leaks = leaks, rounds = i, said = said})
"##;

/// A workspace to attack, and the folder outside it that `a/ln` leads to:
/// `a/d/` and the outside hold the same names (the outside's contents say
/// `OUTSIDE`, and it alone holds `outside-only.txt`); `a/g/` is a plain
/// folder and `a/h` a link to `.git/hooks`.
fn arena() -> (Workspace, tempfile::TempDir) {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let out = fs::canonicalize(outside.path()).unwrap();
    // In a folder of their own: landlock cannot let a command make or
    // rename entries in the workspace's top folder (README).
    fs::create_dir_all(ws.file("a/d")).unwrap();
    for (name, inside, there) in [
        ("a.txt", "inside\n", "OUTSIDE secret\n"),
        ("e.txt", "count=0\n", "count=0\n"),
        ("p.txt", "v=0\n", "v=0\n"),
    ] {
        fs::write(ws.file("a/d").join(name), inside).unwrap();
        fs::write(out.join(name), there).unwrap();
    }
    fs::write(out.join("outside-only.txt"), "OUTSIDE only\n").unwrap();
    symlink(&out, ws.file("a/ln")).unwrap();
    fs::create_dir_all(ws.file(".git/hooks")).unwrap();
    fs::create_dir(ws.file("a/g")).unwrap();
    symlink(ws.file(".git/hooks"), ws.file("a/h")).unwrap();
    (ws, outside)
}

/// Names and contents of the files of `dir`.
fn contents(dir: &Path) -> BTreeMap<String, String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let text = fs::read_to_string(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), text)
        })
        .collect()
}

fn attack(runner: &str) {
    let (ws, outside) = arena();
    let before = contents(outside.path());
    let run = run_lua_with(
        ws.path(),
        ATTACK,
        &["--sandbox", runner],
        &[SWAPPER, "4000"],
    );
    assert_eq!(run.code, 0, "{runner}: {}\n{}", run.stdout, run.stderr);
    let got: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let no_leaks = got["leaks"].as_object().is_some_and(|o| o.is_empty())
        || got["leaks"].as_array().is_some_and(|a| a.is_empty());
    assert!(no_leaks, "{runner}: {got}");
    assert_eq!(
        contents(outside.path()),
        before,
        "{runner}: a flow acted outside the workspace"
    );
    assert_eq!(
        fs::read_dir(ws.file(".git/hooks")).unwrap().count(),
        0,
        "{runner}: a flow wrote into .git/hooks"
    );
    // Each flow met the swapped path both ways: acted inside, and refused.
    for (flow, outcomes) in got["tally"].as_object().unwrap() {
        for code in outcomes.as_object().unwrap().keys() {
            assert!(
                ["ok", "permission_denied", "permission_required"].contains(&code.as_str()),
                "{runner}: {flow} failed otherwise: {outcomes}\n{}",
                got["said"]
            );
        }
        if flow != "write-hook" {
            assert!(
                outcomes["ok"].as_u64() > Some(0),
                "{runner}: {flow} never acted: {got}"
            );
        }
    }
    let refused = |flow: &str| {
        got["tally"][flow]["permission_denied"]
            .as_u64()
            .unwrap_or(0)
    };
    let total: u64 = ["read", "ls", "write", "edit", "apply_patch"]
        .iter()
        .map(|f| refused(f))
        .sum();
    assert!(
        total > 0,
        "{runner}: the race never changed a path under a call: {got}"
    );
    // What the calls that succeeded did is inside: the last write and edit.
    let d_is_dir = ws.file("a/d").symlink_metadata().unwrap().is_dir();
    let d = ws.file(if d_is_dir { "a/d" } else { "a/ln" });
    assert!(fs::read_to_string(d.join("w.txt"))
        .unwrap()
        .starts_with('w'));
}

#[test]
fn file_flows_never_act_through_a_folder_swapped_for_a_link_under_bwrap() {
    attack("bwrap");
}

#[test]
fn file_flows_never_act_through_a_folder_swapped_for_a_link_under_landlock() {
    attack("landlock");
}

/// The control: links inside the workspace lead where they lead, for every
/// file flow, as before.
#[test]
fn file_flows_still_follow_links_inside_the_workspace() {
    let ws = workspace();
    fs::create_dir(ws.file("real")).unwrap();
    fs::write(ws.file("real/a.txt"), "alpha\n").unwrap();
    symlink(ws.file("real"), ws.file("alias")).unwrap();
    symlink(ws.file("real/a.txt"), ws.file("a-link.txt")).unwrap();
    let script = r#"
      local r = assert(sluice.read{path = "alias/a.txt"})
      local r2 = assert(sluice.read{path = "a-link.txt"})
      assert(sluice.write{path = "alias/new.txt", content = "new\n"})
      assert(sluice.edit{path = "a-link.txt", oldString = "alpha", newString = "beta"})
      assert(sluice.apply_patch{input = "*** Begin Patch\n*** Update File: alias/new.txt\n@@\n-new\n+newer\n*** Add File: alias/added.txt\n+added\n*** End Patch"})
      local l = assert(sluice.ls{path = "alias"})
      local g = assert(sluice.glob{pattern = "**/*.txt"})
      local m = assert(sluice.grep{pattern = "beta|newer|added"})
      local names = {}
      for _, e in ipairs(l.entries) do names[#names + 1] = e.name end
      local found = {}
      for _, x in ipairs(m.matches) do found[#found + 1] = x.file end
      print(sluice.json.encode{read = r.content, read2 = r2.content, ls = names, glob = g.paths, grep = found})
    "#;
    let run = run_lua(ws.path(), script, &[]).ok();
    let got: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(got["read"], "alpha");
    assert_eq!(got["read2"], "alpha");
    assert_eq!(
        got["ls"],
        serde_json::json!(["a.txt", "added.txt", "new.txt"])
    );
    // A walk lists a link as a link and does not follow it.
    assert_eq!(
        got["glob"],
        serde_json::json!(["a-link.txt", "real/a.txt", "real/added.txt", "real/new.txt"])
    );
    assert_eq!(
        got["grep"],
        serde_json::json!(["real/a.txt", "real/added.txt", "real/new.txt"])
    );
    assert_eq!(fs::read_to_string(ws.file("real/a.txt")).unwrap(), "beta\n");
    assert_eq!(
        fs::read_to_string(ws.file("real/new.txt")).unwrap(),
        "newer\n"
    );
    assert!(ws.file("alias").symlink_metadata().unwrap().is_symlink());
}
