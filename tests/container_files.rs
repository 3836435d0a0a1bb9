//! The file flows of a host sealed to a container (`SLUICE_BASH_CONTAINER`,
//! `SLUICE_TEST_CWD`) act on the container's files, through the real
//! `sluice` binary and real podman containers: read, write, edit,
//! apply_patch, ls, glob and grep, and the policy naming container paths
//! as `NAME:/path`.

mod common;
// The helper's `image()` (unused here) leaves its `tar` to the pipe.
#[path = "common/containers.rs"]
mod containers;

use common::Workspace;
use containers::Container;
use serde_json::{json, Value};

/// Lua prelude: `emit(v)`, and `c(flow, input)`, which emits `{out = ...}`
/// or `{err = ...}`.
const PRELUDE: &str = "local function emit(v) print(sluice.json.encode(v)) end\n\
     local function c(name, t) local r, e = sluice.call(name, t) emit({out = r, err = e}) end\n";

/// A workspace and a fresh container whose /srv the tests fill.
struct Sealed {
    ws: Workspace,
    c: Container,
}

impl Sealed {
    fn new() -> Sealed {
        Sealed {
            ws: common::workspace(),
            c: Container::start(),
        }
    }

    /// Writes `bytes` to `/srv/REL` inside the container (through its root
    /// folder on the host).
    fn put(&self, rel: &str, bytes: &[u8]) {
        let path = self.c.root.join("srv").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// The bytes of `/srv/REL` in the container, `None` when it is absent.
    fn get(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.c.root.join("srv").join(rel)).ok()
    }

    /// A policy granting the container's /srv, then `extra` rules.
    fn policy(&self, extra: &str) -> String {
        let text = format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ {extra} p.allow \"fs:*:{}:/srv/**\", p.allow \"fs:*:{}:/srv\" }} }}\n",
            self.c.name, self.c.name
        );
        common::policy(&self.ws, "box.lua", &text)
    }

    /// Runs `body` sealed to the container with `policy` (a file) and
    /// returns each emitted line.
    fn run_with(&self, policy: Option<&str>, body: &str) -> Vec<Value> {
        let mut env: Vec<(&str, String)> = containers::env();
        env.push(("SLUICE_BASH_CONTAINER", self.c.name.clone()));
        env.push(("SLUICE_TEST_CWD", "/srv".into()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let flags: Vec<&str> = match policy {
            Some(p) => vec!["--policy", p],
            None => vec![],
        };
        let run = common::run_lua_env(
            self.ws.path(),
            &format!("{PRELUDE}{body}"),
            &flags,
            &[],
            &env,
        )
        .ok();
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
            .collect()
    }

    fn run(&self, body: &str) -> Vec<Value> {
        let policy = self.policy("");
        self.run_with(Some(&policy), body)
    }
}

#[test]
fn read_pages_the_containers_file_and_a_missing_one_is_not_found() {
    let s = Sealed::new();
    s.put("a.txt", b"one\ntwo\nthree\n");
    // The host workspace has a file of the same name, which must not be read.
    std::fs::write(s.ws.file("a.txt"), "host\n").unwrap();
    let lines = s.run(
        r#"c("read", {path = "a.txt", offset = 2, limit = 1})
           c("read", {path = "/srv/./x/../a.txt"})
           c("read", {path = "gone/b.txt"})
           c("read", {path = "/srv"})"#,
    );
    assert_eq!(
        lines[0]["out"],
        json!({"content": "two", "startLine": 2, "endLine": 2, "totalLines": 3, "truncated": true,
               "notice": "Showing lines 2-2 of 3. Continue with offset = 3."})
    );
    assert_eq!(lines[1]["out"]["content"], "one\ntwo\nthree");
    assert_eq!(
        lines[2]["err"],
        json!({"code": "not_found",
               "message": "/srv/gone/b.txt does not exist. The nearest existing folder is /srv; list it with ls to see what it holds.",
               "path": "/srv/gone/b.txt", "nearest": "/srv"})
    );
    assert_eq!(lines[3]["err"]["code"], "is_directory");
}

#[test]
fn write_replaces_atomically_in_the_container_not_the_workspace() {
    let s = Sealed::new();
    s.put("keep.sh", b"old\n");
    s.c.sh("chmod 751 /srv/keep.sh");
    let lines = s.run(
        r#"c("write", {path = "new/dir/n.txt", content = "hello\n"})
           c("write", {path = "keep.sh", content = "new\n"})
           c("write", {path = "new", content = "x"})"#,
    );
    assert_eq!(lines[0]["out"], json!({"bytesWritten": 6, "created": true}));
    assert_eq!(
        lines[1]["out"],
        json!({"bytesWritten": 4, "created": false})
    );
    assert_eq!(lines[2]["err"]["code"], "command_failed");
    assert_eq!(
        lines[2]["err"]["message"],
        "/srv/new is a directory; write replaces files only. Name a file inside it."
    );
    assert_eq!(s.get("new/dir/n.txt").as_deref(), Some(&b"hello\n"[..]));
    assert_eq!(s.get("keep.sh").as_deref(), Some(&b"new\n"[..]));
    assert_eq!(
        s.c.sh("stat -c %a /srv/keep.sh /srv/new/dir/n.txt"),
        "751\n644\n"
    );
    // Nothing staged is left behind, and the host workspace is untouched.
    assert_eq!(
        s.c.sh("ls -A /srv /srv/new/dir"),
        "/srv:\nkeep.sh\nnew\n\n/srv/new/dir:\nn.txt\n"
    );
    assert_eq!(common::names_in(s.ws.path()), Vec::<String>::new());
}

#[test]
fn edit_anchors_exactly_and_a_miss_shows_the_real_bytes() {
    let s = Sealed::new();
    s.put(
        "m.rs",
        b"fn main() {\n    let a = 1;\n}\nlet b = 2;\nlet b = 2;\n",
    );
    let lines = s.run(
        r#"c("edit", {path = "m.rs", oldString = "\tlet a = 1;", newString = "x"})
           c("edit", {path = "m.rs", oldString = "let b = 2;", newString = "x"})
           c("edit", {path = "m.rs", oldString = "    let a = 1;", newString = "    let a = 3;"})
           c("edit", {path = "nope.rs", oldString = "a", newString = "b"})"#,
    );
    assert_eq!(
        lines[0]["err"],
        json!({
            "code": "no_match",
            "message": "oldString does not occur in /srv/m.rs. Lines 2-2 actually hold this, raw:\n    let a = 1;\n\n\
                        Copy the lines you meant from that text, or anchor by startLine/endLine instead.",
            "path": "/srv/m.rs",
            "nearest": {"startLine": 2, "endLine": 2, "content": "    let a = 1;"},
        })
    );
    assert_eq!(lines[1]["err"]["code"], "invalid_input");
    assert_eq!(lines[1]["err"]["lines"], json!([4, 5]));
    assert_eq!(
        lines[1]["err"]["message"],
        "oldString occurs 2 times in /srv/m.rs, starting on lines 4, 5. Widen it with neighbouring lines until it occurs once, \
         or pass replaceAll = true to change every occurrence."
    );
    assert_eq!(lines[2]["out"]["replacements"], 1);
    assert_eq!(lines[2]["out"]["startLine"], 1);
    assert_eq!(lines[3]["err"]["code"], "not_found");
    assert_eq!(
        s.get("m.rs").unwrap(),
        b"fn main() {\n    let a = 3;\n}\nlet b = 2;\nlet b = 2;\n"
    );
}

#[test]
fn the_policy_names_container_paths_and_host_grants_do_not_reach_them() {
    let s = Sealed::new();
    s.put("secret/k", b"k\n");
    let name = &s.c.name;
    let deny = format!("p.deny(\"fs:write:{name}:/srv/secret/**\", \"keys stay put\"),");
    let policy = s.policy(&deny);
    let lines = s.run_with(
        Some(&policy),
        r#"c("write", {path = "secret/k", content = "x"})
           c("write", {path = "open.txt", content = "y"})"#,
    );
    let cap = format!("fs:write:{name}:/srv/secret/k");
    assert_eq!(lines[0]["err"]["code"], "permission_denied");
    assert_eq!(lines[0]["err"]["capability"], cap);
    assert_eq!(lines[1]["out"], json!({"bytesWritten": 1, "created": true}));
    assert_eq!(s.get("secret/k").as_deref(), Some(&b"k\n"[..]));
    assert_eq!(s.get("open.txt").as_deref(), Some(&b"y"[..]));
    // A grant of the host's /srv (and the workspace) grants nothing inside.
    let host = common::policy(
        &s.ws,
        "host.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"fs:*:/srv/**\", p.allow \"fs:*:${workspace}/**\" } }\n",
    );
    let lines = s.run_with(Some(&host), r#"c("read", {path = "secret/k"})"#);
    assert_eq!(
        lines[0]["err"]["code"], "permission_required",
        "{}",
        lines[0]
    );
    assert_eq!(
        lines[0]["err"]["capability"],
        format!("fs:read:{name}:/srv/secret/k")
    );
}

#[test]
fn ls_and_glob_list_the_containers_tree() {
    let s = Sealed::new();
    s.put("src/a.rs", b"a\n");
    s.put("src/deep/b.rs", b"b\n");
    s.put("src/.hidden.rs", b"h\n");
    s.put("notes.txt", b"n\n");
    s.c.sh("ln -s notes.txt /srv/link");
    std::fs::write(s.ws.file("host.rs"), "host\n").unwrap();
    let lines = s.run(
        r#"c("ls", {})
           c("glob", {pattern = "**/*.rs"})
           c("glob", {pattern = "*.rs", root = "src"})
           c("ls", {path = "notes.txt"})"#,
    );
    assert_eq!(
        lines[0]["out"],
        json!({"entries": [
            {"name": "link", "kind": "symlink"},
            {"name": "notes.txt", "kind": "file"},
            {"name": "src", "kind": "directory"},
        ], "total": 3, "truncated": false})
    );
    assert_eq!(
        lines[1]["out"]["paths"],
        json!(["src/a.rs", "src/deep/b.rs"])
    );
    assert_eq!(lines[1]["out"]["total"], 2);
    assert_eq!(lines[2]["out"]["paths"], json!(["src/a.rs"]));
    assert_eq!(lines[3]["err"]["code"], "not_a_directory");
    assert_eq!(
        lines[3]["err"]["message"],
        "/srv/notes.txt is not a folder; read it with read."
    );
}

/// The files both grep tests search: text, a binary file with a match
/// before its NUL, and a file under a hidden folder.
const TREE: [(&str, &[u8]); 4] = [
    (
        "src/a.rs",
        b"fn alpha() {}\nlet beta = 1;\n// alpha again\n",
    ),
    ("src/b.txt", b"alpha here\r\n"),
    ("bin.dat", b"alpha\0binary\n"),
    (".hid/h.rs", b"alpha\n"),
];

/// The searches of [`grep_searches_the_containers_files_as_the_host_would`].
const SEARCHES: &str = r#"c("grep", {pattern = "alpha"})
   c("grep", {pattern = "alpha", globs = {"*.rs"}, context = 1})
   c("grep", {pattern = "hostonly"})
   c("grep", {pattern = "ALPHA", ignoreCase = true, filesWithMatches = true, root = "src"})"#;

#[test]
fn grep_searches_the_containers_files_as_the_host_would() {
    let s = Sealed::new();
    for (rel, bytes) in TREE {
        s.put(rel, bytes);
    }
    // Only on the host: never searched when sealed.
    std::fs::write(s.ws.file("host.rs"), "hostonly alpha\n").unwrap();
    let lines = s.run(SEARCHES);
    assert_eq!(
        lines[0]["out"],
        json!({
            "matches": [
                {"file": "src/a.rs", "line": 1, "text": "fn alpha() {}"},
                {"file": "src/a.rs", "line": 3, "text": "// alpha again"},
                {"file": "src/b.txt", "line": 1, "text": "alpha here"},
            ],
            "files": ["src/a.rs", "src/b.txt"],
            "totalMatches": 3, "totalFiles": 2, "filesSearched": 2,
            "skippedBinary": 1, "skippedDenied": 0, "skippedUnreadable": 0, "skippedNames": 0,
            "truncated": false,
            "notice": "Skipped 1 binary file (a NUL byte in what was read).",
        })
    );
    assert_eq!(
        lines[1]["out"]["matches"],
        json!([
            {"file": "src/a.rs", "line": 1, "text": "fn alpha() {}", "before": [], "after": ["let beta = 1;"]},
            {"file": "src/a.rs", "line": 3, "text": "// alpha again", "before": ["let beta = 1;"], "after": []},
        ])
    );
    assert_eq!(lines[1]["out"]["skippedBinary"], 0);
    assert_eq!(lines[2]["out"]["totalMatches"], 0);
    assert_eq!(lines[2]["out"]["matches"], json!([]));
    assert_eq!(lines[3]["out"]["files"], json!(["src/a.rs", "src/b.txt"]));
    // The same tree in a host workspace gives the same answers.
    let host = common::workspace();
    for (rel, bytes) in TREE {
        let path = host.file(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let run = common::run_lua_env(host.path(), &format!("{PRELUDE}{SEARCHES}"), &[], &[], &[]).ok();
    let on_host: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(on_host, lines);
}

#[test]
fn grep_leaves_out_what_the_policy_denies_in_the_container() {
    let s = Sealed::new();
    s.put("secret/k.txt", b"token=1\n");
    s.put("open.txt", b"token=2\n");
    let deny = format!(
        "p.deny(\"fs:read:{}:/srv/secret/**\", \"keys stay hidden\"),",
        s.c.name
    );
    let policy = s.policy(&deny);
    let lines = s.run_with(Some(&policy), r#"c("grep", {pattern = "token"})"#);
    assert_eq!(
        lines[0]["out"],
        json!({
            "matches": [{"file": "open.txt", "line": 1, "text": "token=2"}],
            "files": ["open.txt"],
            "totalMatches": 1, "totalFiles": 1, "filesSearched": 1,
            "skippedBinary": 0, "skippedDenied": 1, "skippedUnreadable": 0, "skippedNames": 0,
            "truncated": false,
            "notice": "Skipped 1 path the policy denies reading.",
        })
    );
}

/// A patch of every kind: an add (in a new folder), an update, a move and a
/// delete.
const PATCH: &str = "*** Begin Patch\n*** Add File: new/n.txt\n+hello\n*** Update File: u.txt\n@@\n a\n-b\n+B\n\
                     *** Update File: m.txt\n*** Move to: moved/m2.txt\n@@\n-m\n+M\n*** Delete File: d.txt\n*** End Patch";

#[test]
fn apply_patch_changes_the_containers_files_all_at_once() {
    let s = Sealed::new();
    s.put("u.txt", b"a\nb\n");
    s.put("m.txt", b"m\n");
    s.put("d.txt", b"x\n");
    let body = format!("c(\"apply_patch\", {{input = {}}})", common::lua_str(PATCH));
    let lines = s.run(&body);
    assert_eq!(
        lines[0]["out"],
        json!({
            "added": ["new/n.txt"], "modified": ["u.txt", "moved/m2.txt"], "deleted": ["d.txt"],
            "output": "Success. Updated the following files:\nA new/n.txt\nM u.txt\nM moved/m2.txt\nD d.txt\n",
        })
    );
    assert_eq!(
        s.c.sh("cat /srv/new/n.txt /srv/u.txt /srv/moved/m2.txt; ls -A /srv /srv/new /srv/moved"),
        "hello\na\nB\nM\n/srv:\nmoved\nnew\nu.txt\n\n/srv/moved:\nm2.txt\n\n/srv/new:\nn.txt\n"
    );
    assert_eq!(common::names_in(s.ws.path()), Vec::<String>::new());
}

/// A patch whose second update misses, after an add in a new folder and
/// an update that would apply.
const MISSING: &str = "*** Begin Patch\n*** Add File: fresh/z.txt\n+z\n*** Update File: u.txt\n@@\n-a\n+A\n\
                       *** Update File: v.txt\n@@\n-nope\n+x\n*** Delete File: d.txt\n*** End Patch";

#[test]
fn a_failing_hunk_leaves_the_container_as_it_was_and_fails_as_on_the_host() {
    let s = Sealed::new();
    s.put("u.txt", b"a\n");
    s.put("v.txt", b"v\n");
    s.put("d.txt", b"d\n");
    let body = format!(
        "c(\"apply_patch\", {{input = {}}})",
        common::lua_str(MISSING)
    );
    let lines = s.run(&body);
    assert_eq!(
        lines[0]["err"],
        json!({"code": "no_match", "message": "Failed to find expected lines in /srv/v.txt:\nnope",
               "path": "/srv/v.txt", "expected": "nope"})
    );
    assert_eq!(
        s.c.sh("ls -A /srv; cat /srv/u.txt /srv/v.txt /srv/d.txt"),
        "d.txt\nu.txt\nv.txt\na\nv\nd\n"
    );
    // On the host, the same patch fails with the same code and words.
    let host = common::workspace();
    for (rel, text) in [("u.txt", "a\n"), ("v.txt", "v\n"), ("d.txt", "d\n")] {
        std::fs::write(host.file(rel), text).unwrap();
    }
    let on_host = common::lua(&host, &[], &format!("{PRELUDE}{body}"));
    let v = host.file("v.txt").display().to_string();
    assert_eq!(
        on_host[0]["err"],
        json!({"code": "no_match", "message": format!("Failed to find expected lines in {v}:\nnope"),
               "path": v, "expected": "nope"})
    );
}

#[test]
fn the_audit_routes_a_sealed_read_to_the_container() {
    let s = Sealed::new();
    s.put("a.txt", b"a\n");
    let lines = s.run(r#"c("read", {path = "a.txt"})"#);
    assert_eq!(lines[0]["out"]["content"], "a");
    let call = common::exported_calls(s.ws.path()).remove(0);
    assert_eq!(call["flow"], "read");
    assert_eq!(call["route"], json!({"container": s.c.name}));
}
