//! Every error code a flow on files declares (`sluice flows FLOW --json`'s
//! `errors`, the reference's `errors` line), made to happen through the
//! real `sluice` binary: one scenario per (flow, code), each a short real
//! setup and one call, asserting the code and a distinctive part of the
//! message. The last test checks the scenarios make exactly the declared
//! codes, no more and no fewer.
//!
//! Codes left out on purpose:
//!
//! - `outside_container`: the pipeline returns it only for a call that
//!   runs a command on a host sealed to a container, placed elsewhere. A
//!   flow on files runs no command: on a sealed host it is routed to the
//!   sealed container's files whatever it asks, so it is never outside.
//! - `timeout` of a cancelled task (the script ended, or the caller gave
//!   up, while the call waited or ran) and `unsupported` of a replayed
//!   output over the audit cap: the pipeline and the replay return those
//!   for any flow, like `replay_diverged`; only glob's and grep's own
//!   `timeoutMs` makes `timeout` theirs.

mod common;

use common::flow_errors::{assert_scenarios_match, FILE_FLOWS};
use serde_json::Value;
use std::path::Path;

/// Where a scenario's call runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On the host, in the workspace [`files`] fills, under the default
    /// policy.
    Host,
    /// On a host sealed to a container (`SLUICE_BASH_CONTAINER`) that it
    /// cannot reach: no container engine on sluice's PATH.
    Sealed,
}

/// One (flow, code) pair made to happen.
struct Scenario {
    flow: &'static str,
    code: &'static str,
    place: Place,
    /// The call's input, a Lua table.
    input: &'static str,
    /// A part of the error's message only this failure has.
    says: &'static str,
}

const fn host(
    flow: &'static str,
    code: &'static str,
    input: &'static str,
    says: &'static str,
) -> Scenario {
    Scenario {
        flow,
        code,
        place: Place::Host,
        input,
        says,
    }
}

const fn sealed(flow: &'static str, input: &'static str) -> Scenario {
    Scenario {
        flow,
        code: "provider_unavailable",
        place: Place::Sealed,
        input,
        says: "no container engine is installed (neither podman nor docker is on sluice's PATH)",
    }
}

/// A patch updating `two.txt`'s `one` to `1`, for the scenarios where the
/// patch itself is not at fault.
const PATCH: &str = "*** Begin Patch\\n*** Update File: two.txt\\n@@\\n-one\\n+1\\n*** End Patch";

/// The scenarios; the files they name are [`files`]'. One line each, the
/// table read down a flow's codes.
#[rustfmt::skip]
const SCENARIOS: &[Scenario] = &[
    // read
    host("read", "not_found", r#"{path = "gone/a.txt"}"#, "gone/a.txt does not exist. The nearest existing folder is"),
    host("read", "not_a_file", r#"{path = "fifo"}"#, "fifo is not a regular file (a device, socket or pipe)"),
    host("read", "not_a_directory", r#"{path = "two.txt/"}"#, "two.txt/ ends in a slash, so it names a folder, but it is a file"),
    host("read", "is_directory", r#"{path = "sub"}"#, "sub is a directory; list it with ls"),
    host("read", "binary_file", r#"{path = "bin.txt"}"#, "bin.txt holds a NUL byte at byte 1"),
    host("read", "offset_out_of_range", r#"{path = "two.txt", offset = 5}"#, "which has 2 lines. Give an offset from 1 to 2."),
    host("read", "command_failed", r#"{path = "loop"}"#, "/loop: too many levels of symbolic links"),
    host("read", "response_too_large", r#"{path = "big.txt"}"#, "big.txt is 67108865 bytes, over the 67108864 byte limit"),
    sealed("read", r#"{path = "a.txt"}"#),
    // write
    host("write", "not_a_file", r#"{path = "fifo", content = "x"}"#, "fifo is not a regular file"),
    host("write", "not_a_directory", r#"{path = "two.txt/x", content = "x"}"#, "two.txt/x: a part of this path is a file, not a folder"),
    host("write", "no_match", r#"{path = "busy.txt", content = "x"}"#, "busy.txt is busy: another writer holds the lock"),
    host("write", "command_failed", r#"{path = "sub", content = "x"}"#, "sub is a directory; write replaces files only"),
    sealed("write", r#"{path = "a.txt", content = "x"}"#),
    // edit
    host("edit", "not_found", r#"{path = "gone.txt", oldString = "one", newString = "1"}"#, "gone.txt does not exist"),
    host("edit", "not_a_file", r#"{path = "fifo", oldString = "one", newString = "1"}"#, "fifo is not a regular file"),
    host("edit", "not_a_directory", r#"{path = "two.txt/", oldString = "one", newString = "1"}"#, "two.txt/ ends in a slash, so it names a folder"),
    host("edit", "is_directory", r#"{path = "sub", oldString = "one", newString = "1"}"#, "sub is a directory"),
    host("edit", "binary_file", r#"{path = "bin.txt", oldString = "a", newString = "b"}"#, "bin.txt holds a NUL byte at byte 1"),
    host("edit", "offset_out_of_range", r#"{path = "two.txt", startLine = 3, endLine = 4, newString = "x"}"#, "lines 3-4 run past the end of"),
    host("edit", "no_match", r#"{path = "two.txt", oldString = "three", newString = "3"}"#, "oldString does not occur in"),
    host("edit", "command_failed", r#"{path = "loop", oldString = "one", newString = "1"}"#, "/loop: too many levels of symbolic links"),
    host("edit", "response_too_large", r#"{path = "big.txt", oldString = "one", newString = "1"}"#, "big.txt is 67108865 bytes"),
    sealed("edit", r#"{path = "a.txt", oldString = "one", newString = "1"}"#),
    // apply_patch
    host("apply_patch", "not_found", r#"{input = "*** Begin Patch\n*** Update File: gone.txt\n@@\n-one\n+1\n*** End Patch"}"#, "gone.txt: No such file or directory"),
    host("apply_patch", "not_a_file", r#"{input = "*** Begin Patch\n*** Update File: fifo\n@@\n-one\n+1\n*** End Patch"}"#, "fifo is not a regular file"),
    host("apply_patch", "not_a_directory", r#"{input = PATCH, cwd = "two.txt"}"#, "two.txt is a file; give the folder the patch's paths are relative to"),
    host("apply_patch", "is_directory", r#"{input = "*** Begin Patch\n*** Delete File: sub\n*** End Patch"}"#, "Failed to delete file"),
    host("apply_patch", "binary_file", r#"{input = "*** Begin Patch\n*** Update File: bin.txt\n@@\n-a\n+b\n*** End Patch"}"#, "it holds a NUL byte at byte 1, so it is a binary file"),
    host("apply_patch", "no_match", r#"{input = "*** Begin Patch\n*** Update File: two.txt\n@@\n-nope\n+1\n*** End Patch"}"#, "Failed to find expected lines in"),
    host("apply_patch", "command_failed", r#"{input = "*** Begin Patch\n*** Update File: loop\n@@\n-one\n+1\n*** End Patch"}"#, "/loop: too many levels of symbolic links"),
    host("apply_patch", "response_too_large", r#"{input = "*** Begin Patch\n*** Update File: big.txt\n@@\n-one\n+1\n*** End Patch"}"#, "big.txt is 67108865 bytes"),
    sealed("apply_patch", r#"{input = PATCH}"#),
    // ls
    host("ls", "not_found", r#"{path = "gone"}"#, "gone does not exist"),
    host("ls", "not_a_directory", r#"{path = "two.txt"}"#, "two.txt is not a folder; read it with read."),
    host("ls", "offset_out_of_range", r#"{path = "sub", offset = 5}"#, "which holds 1 entries."),
    host("ls", "command_failed", r#"{path = "loop"}"#, "/loop: too many levels of symbolic links"),
    sealed("ls", "{}"),
    // glob
    host("glob", "not_found", r#"{pattern = "*", root = "gone"}"#, "gone does not exist"),
    host("glob", "not_a_directory", r#"{pattern = "*", root = "two.txt"}"#, "two.txt is not a folder; glob searches under a folder"),
    host("glob", "invalid_pattern", r#"{pattern = "a["}"#, "`pattern` is not a valid glob"),
    host("glob", "command_failed", r#"{pattern = "*", root = "loop"}"#, "/loop: too many levels of symbolic links"),
    host("glob", "timeout", r#"{pattern = "**/*.txt", root = "tree", timeoutMs = 1}"#, "glob stopped at its timeoutMs of 1 ms"),
    sealed("glob", r#"{pattern = "*"}"#),
    // grep
    host("grep", "not_found", r#"{pattern = "x", root = "gone"}"#, "gone does not exist"),
    host("grep", "not_a_directory", r#"{pattern = "x", root = "two.txt/x"}"#, "two.txt/x: a part of this path is a file, not a folder"),
    host("grep", "invalid_pattern", r#"{pattern = "("}"#, "`pattern` is not a valid regular expression"),
    host("grep", "command_failed", r#"{pattern = "x", root = "loop"}"#, "/loop: too many levels of symbolic links"),
    host("grep", "timeout", r#"{pattern = "x", root = "tree", timeoutMs = 1}"#, "grep stopped at its timeoutMs of 1 ms"),
    sealed("grep", r#"{pattern = "x"}"#),
    // update_plan: only the codes any call may return.
];

/// Fills `ws` with what the host scenarios name: a two-line text file, a
/// file holding a NUL byte, a sparse file one byte over the 64 MiB limit,
/// a FIFO, a link to itself, a folder of one file, a file whose lock
/// another writer holds, and a tree of 4,000 files no walk or search
/// crosses within a millisecond.
fn files(ws: &Path) {
    std::fs::write(ws.join("two.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.join("bin.txt"), b"a\0b\n").unwrap();
    let big = std::fs::File::create(ws.join("big.txt")).unwrap();
    big.set_len((64 << 20) + 1).unwrap();
    nix::unistd::mkfifo(&ws.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/x.txt"), "x\n").unwrap();
    std::fs::write(ws.join("busy.txt"), "busy\n").unwrap();
    std::fs::create_dir(ws.join(".sluice-busy.txt.lock")).unwrap();
    for d in 0..40 {
        let dir = ws.join(format!("tree/d{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), "x\n").unwrap();
        }
    }
}

/// One Lua script calling every scenario of `place`, each emitting its
/// error's code and message (null when the call succeeded).
fn script(place: Place) -> String {
    let mut body = format!(
        "{}local PATCH = \"{PATCH}\"\n\
         local function try(flow, input)\n\
           local _, e = sluice.call(flow, input)\n\
           emit({{code = e and e.code, message = e and e.message}})\n\
         end\n",
        common::EMIT
    );
    for s in SCENARIOS.iter().filter(|s| s.place == place) {
        body.push_str(&format!("try({:?}, {})\n", s.flow, s.input));
    }
    body
}

/// Asserts each scenario of `place` got its code and message, from the
/// lines the script printed.
fn assert_made(place: Place, stdout: &str) {
    let got: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    let wanted: Vec<&Scenario> = SCENARIOS.iter().filter(|s| s.place == place).collect();
    assert_eq!(got.len(), wanted.len(), "{stdout}");
    for (s, e) in wanted.iter().zip(&got) {
        let what = format!("{} {}: {e}", s.flow, s.input);
        assert_eq!(e["code"], s.code, "{what}");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(s.says),
            "{what}\nwanted a message with {:?}",
            s.says
        );
    }
}

#[test]
fn each_file_flow_returns_each_code_it_declares_on_the_host() {
    let ws = common::workspace();
    files(ws.path());
    let run = common::run_lua(ws.path(), &script(Place::Host), &[]).ok();
    assert_made(Place::Host, &run.stdout);
    // Every call failed: nothing was changed, no lock was left behind.
    assert_eq!(std::fs::read(ws.file("two.txt")).unwrap(), b"one\ntwo\n");
    let locks: Vec<String> = common::names_in(ws.path())
        .into_iter()
        .filter(|n| n.ends_with(".lock"))
        .collect();
    assert_eq!(locks, [".sluice-busy.txt.lock"]);
}

#[test]
fn on_a_host_sealed_to_a_container_it_cannot_reach_the_file_flows_are_provider_unavailable() {
    let ws = common::workspace();
    let policy = common::policy(
        &ws,
        "box.lua",
        "local p = require(\"sluice.policy\")\n\
         return { rules = { p.allow \"fs:*:box:/srv/**\", p.allow \"fs:*:box:/srv\" } }\n",
    );
    // No engine on sluice's PATH: the sealed container cannot be reached.
    let empty = ws.path().parent().unwrap().join("no-engines");
    std::fs::create_dir(&empty).unwrap();
    let env = [
        ("SLUICE_BASH_CONTAINER", "box"),
        ("SLUICE_TEST_CWD", "/srv"),
        ("PATH", empty.to_str().unwrap()),
    ];
    let run = common::run_lua_env(
        ws.path(),
        &script(Place::Sealed),
        &["--policy", &policy],
        &[],
        &env,
    )
    .ok();
    assert_made(Place::Sealed, &run.stdout);
}

#[test]
fn the_file_flows_declare_exactly_the_codes_their_scenarios_make() {
    let pairs: Vec<(&str, &str)> = SCENARIOS.iter().map(|s| (s.flow, s.code)).collect();
    assert_scenarios_match(FILE_FLOWS, &pairs);
}
