//! The file flows of a host sealed to a container act on the path the
//! policy checked, even while a command inside the container swaps the
//! tree under them: a routed background job flips `/srv/d` between its
//! real folder and a symlink to `/secret` (which the policy denies), in a
//! loop, while the script reads, writes, edits, patches, lists, globs and
//! greps under `/srv/d`. No call may return, list or change anything of
//! `/secret`; a call that meets the swap fails (`permission_denied`, or
//! `not_found` in the moment `/srv/d` is away), never acts there. Beside
//! them, the control: the same flows through legitimate symlinks inside
//! the container still work.

mod common;
#[path = "common/containers.rs"]
mod containers;

use common::Workspace;
use containers::Container;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// How long each attack runs, in milliseconds of the script's clock. The
/// unfixed code (a resolve in one exec, the act in another) lost each of
/// these within the first few calls.
const ATTACK_MS: u64 = 12_000;

/// Lua prelude: `emit(v)`, and `c(flow, input)`, which emits `{flow, out,
/// err, why, after}` with the error's code and message, `after` true once
/// the swap has stopped.
const PRELUDE: &str = r#"local function emit(v) print(sluice.json.encode(v)) end
local after = false
local function c(name, t)
  local r, e = sluice.call(name, t)
  emit({flow = name, out = r, err = e and e.code, why = e and e.message, after = after})
  return r, e
end
"#;

/// Puts `/srv/d` back as its folder once the swap is stopped, wherever it
/// stopped, with the texts the edits and patches anchor on.
const HEAL: &str = "if [ -L /srv/d ]; then mv -T /srv/d /srv/evil; fi; \
    if [ -d /srv/d.held ]; then [ -d /srv/d ] && mv -T /srv/d /srv/made.last; mv -T /srv/d.held /srv/d; fi; \
    [ -d /srv/d ] && [ ! -L /srv/d ] && cp /orig/e.txt /orig/p.txt /srv/d/";

/// The swap, run inside the container: `/srv/d` is its real folder, then
/// (renamed away) a symlink to `/secret`, each for 20 ms, forever. A
/// folder a flow made at `/srv/d` in the instant it was away is put aside,
/// so the loop goes on. One `s` per cycle on stdout.
const SWAP: &str = r#"ln -s /secret /srv/evil
while :; do
  if mv -T /srv/d /srv/d.held 2>/dev/null; then mv -T /srv/evil /srv/d || mv -T /srv/d.held /srv/d; fi
  usleep 20000
  if [ -L /srv/d ]; then mv -T /srv/d /srv/evil && mv -T /srv/d.held /srv/d; fi
  if [ -d /srv/d.held ] && [ ! -L /srv/d ]; then mv -T /srv/d /srv/made.$RANDOM 2>/dev/null; mv -T /srv/d.held /srv/d; fi
  [ -L /srv/evil ] || ln -s /secret /srv/evil
  printf s
  usleep 20000
done"#;

/// A workspace, and a container whose `/srv/d` and `/secret` hold files of
/// the same names.
struct Sealed {
    ws: Workspace,
    c: Container,
}

impl Sealed {
    fn new() -> Sealed {
        let s = Sealed {
            ws: common::workspace(),
            c: Container::start(),
        };
        for (rel, text) in [
            ("srv/d/a.txt", "harmless\n"),
            ("srv/d/e.txt", "edit me\n"),
            ("srv/d/p.txt", "patch me\n"),
            ("orig/e.txt", "edit me\n"),
            ("orig/p.txt", "patch me\n"),
            ("srv/d/sub/x.txt", "harmless\n"),
            ("secret/a.txt", "TOPSECRET\n"),
            ("secret/e.txt", "edit me\n"),
            ("secret/p.txt", "patch me\n"),
            ("secret/sub/only-secret.txt", "TOPSECRET\n"),
        ] {
            s.put(rel, text);
        }
        s
    }

    /// Writes `text` to `/REL` in the container (through its root folder).
    fn put(&self, rel: &str, text: &str) {
        let path = self.c.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Every entry under `/secret`, with a file's bytes: what no call may
    /// change.
    fn secret(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        snapshot(&self.c.root.join("secret"), "", &mut out);
        out
    }

    /// A policy granting the container's /srv and denying /secret, with
    /// every command allowed (the swap runs as a routed job).
    fn policy(&self) -> String {
        let n = &self.c.name;
        let text = format!(
            r#"local p = require("sluice.policy")
return {{ rules = {{
  p.deny("fs:*:{n}:/secret/**", "the container's secrets"),
  p.deny("fs:*:{n}:/secret", "the container's secrets"),
  p.allow "fs:*:{n}:/srv/**", p.allow "fs:*:{n}:/srv",
  p.programs, p.allow "proc:spawn:*",
}} }}
"#
        );
        common::policy(&self.ws, "box.lua", &text)
    }

    /// Runs `body` sealed to the container while the swap runs, for
    /// [`ATTACK_MS`], then once more after it stopped and the tree is put
    /// back (the control: every call of that round must succeed); the
    /// lines emitted during the attack, and the swap's cycles.
    fn attack(&self, body: &str) -> (Vec<Value>, usize) {
        let script = format!(
            r#"{PRELUDE}
local job = sluice.bash{{command = {swap}, container = "{name}", background = true}}
local seen = ""
for _ = 1, 200 do
  seen = seen .. job:read().stdout
  if seen:find("s") then break end
  sluice.sleep(50)
end
local stop = sluice.now() + {ms}
local n = 0
while sluice.now() < stop do
  n = n + 1
{body}
end
seen = seen .. job:read().stdout
job:kill()
job:wait(10000)
local healed, e = sluice.bash{{command = {heal}, container = "{name}"}}
assert(healed and healed.exitCode == 0, "the tree was not put back: " .. sluice.json.encode(healed or e))
after = true
{body}
emit({{cycles = #seen, rounds = n}})
"#,
            heal = common::lua_str(HEAL),
            swap = common::lua_str(SWAP),
            name = self.c.name,
            ms = ATTACK_MS,
        );
        let lines = self.run(&script);
        let last = lines.last().expect("the script ran to its end");
        let cycles = last["cycles"].as_u64().unwrap() as usize;
        assert!(
            cycles >= 10,
            "the swap ran only {cycles} cycles: the attack never happened"
        );
        let (during, after): (Vec<Value>, Vec<Value>) = lines[..lines.len() - 1]
            .iter()
            .cloned()
            .partition(|l| l["after"] == false);
        assert!(!after.is_empty());
        for l in &after {
            assert!(l["err"].is_null(), "once the swap stopped: {l}");
        }
        (during, cycles)
    }

    /// Runs `script` sealed to the container; each stdout line as JSON.
    fn run(&self, script: &str) -> Vec<Value> {
        let policy = self.policy();
        let mut env: Vec<(&str, String)> = containers::env();
        env.push(("SLUICE_BASH_CONTAINER", self.c.name.clone()));
        env.push(("SLUICE_TEST_CWD", "/srv".into()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let run = common::run_lua_env(self.ws.path(), script, &["--policy", &policy], &[], &env);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
            .collect()
    }
}

fn snapshot(dir: &Path, rel: &str, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{rel}/{}", e.file_name().to_string_lossy());
        let path = e.path();
        if path.is_dir() {
            out.insert(name.clone(), "<dir>".into());
            snapshot(&path, &name, out);
        } else {
            out.insert(name, std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
}

/// The calls of `flow` among `lines`.
fn of<'a>(lines: &'a [Value], flow: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["flow"] == flow).collect()
}

/// Every call of `flow` either succeeded or failed with one of `codes`.
/// How many of each.
fn tally(lines: &[Value], flow: &str, codes: &[&str]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for l in of(lines, flow) {
        let code = l["err"].as_str().unwrap_or("ok").to_string();
        assert!(
            code == "ok" || codes.contains(&code.as_str()),
            "{flow} failed with an unexpected code: {l}"
        );
        *seen.entry(code).or_insert(0) += 1;
    }
    assert!(!seen.is_empty(), "no {flow} call was made");
    seen
}

/// What a call that meets the swap may fail with: the checked path no
/// longer leads where it did (`permission_denied`), `/srv/d` was away for
/// the instant (`not_found`).
const MET_THE_SWAP: [&str; 2] = ["permission_denied", "not_found"];

#[test]
fn reads_and_greps_never_return_what_a_swapped_symlink_leads_to() {
    let s = Sealed::new();
    let (lines, _) = s.attack(
        r#"  c("read", {path = "/srv/d/a.txt"})
  c("grep", {pattern = "TOPSECRET|harmless", root = "/srv/d"})
  c("grep", {pattern = "TOPSECRET|harmless", root = "/srv/d/sub"})"#,
    );
    for l in &lines {
        assert!(
            !l["out"].to_string().contains("TOPSECRET"),
            "a call returned /secret's bytes: {l}"
        );
    }
    let reads = tally(&lines, "read", &MET_THE_SWAP);
    for l in of(&lines, "read") {
        if l["err"].is_null() {
            assert_eq!(l["out"]["content"], "harmless");
        }
    }
    let greps = tally(&lines, "grep", &MET_THE_SWAP);
    eprintln!("reads {reads:?}, greps {greps:?}");
}

#[test]
fn writes_edits_and_patches_never_land_where_a_swapped_symlink_leads() {
    let s = Sealed::new();
    let before = s.secret();
    let patch = |from: &str, to: &str| {
        common::lua_str(&format!(
            "*** Begin Patch\n*** Update File: /srv/d/p.txt\n@@\n-{from}\n+{to}\n*** Add File: /srv/d/added.txt\n+added\n*** End Patch"
        ))
    };
    let body = format!(
        r#"  c("write", {{path = "/srv/d/w.txt", content = "w" .. n}})
  c("edit", {{path = "/srv/d/e.txt", oldString = "edit me", newString = "edited"}})
  c("edit", {{path = "/srv/d/e.txt", oldString = "edited", newString = "edit me"}})
  c("apply_patch", {{input = {}}})
  c("apply_patch", {{input = {}}})"#,
        patch("patch me", "patched"),
        patch("patched", "patch me"),
    );
    let (lines, _) = s.attack(&body);
    assert_eq!(s.secret(), before, "a call changed /secret");
    let writes = tally(&lines, "write", &MET_THE_SWAP);
    let edits = tally(&lines, "edit", &[&MET_THE_SWAP[..], &["no_match"]].concat());
    // A patch takes ten steps in the container, each checking its folder
    // again, so under a swap every 20 ms it rarely finishes during it.
    let patches = tally(
        &lines,
        "apply_patch",
        &[&MET_THE_SWAP[..], &["no_match"]].concat(),
    );
    eprintln!("writes {writes:?}, edits {edits:?}, patches {patches:?}");
}

#[test]
fn listings_never_show_what_a_swapped_symlink_leads_to() {
    let s = Sealed::new();
    let (lines, _) = s.attack(
        r#"  c("ls", {path = "/srv/d/sub"})
  c("glob", {pattern = "**", root = "/srv/d/sub"})
  c("glob", {pattern = "**/*.txt", root = "/srv"})"#,
    );
    for l in &lines {
        assert!(
            !l["out"].to_string().contains("only-secret"),
            "a listing showed /secret's names: {l}"
        );
    }
    let ls = tally(&lines, "ls", &MET_THE_SWAP);
    let globs = tally(&lines, "glob", &MET_THE_SWAP);
    eprintln!("ls {ls:?}, globs {globs:?}");
}

/// A patch through the links of [`the_flows_follow_legitimate_symlinks_inside_the_container`]:
/// an update and an add through `link`, a new folder under it, a move
/// across both links, and a delete of a link (the link goes, its file
/// stays).
const THROUGH_LINKS: &str = "*** Begin Patch\n*** Update File: link/f.txt\n@@\n-f\n+F\n\
    *** Add File: link/deeper/n.txt\n+n\n*** Update File: link/m.txt\n*** Move to: abs/moved.txt\n@@\n-m\n+M\n\
    *** Delete File: keeplink\n*** End Patch";

#[test]
fn the_flows_follow_legitimate_symlinks_inside_the_container() {
    let s = Sealed::new();
    for (rel, text) in [
        ("srv/real/f.txt", "f\n"),
        ("srv/real/g.txt", "g\n"),
        ("srv/real/m.txt", "m\n"),
        ("srv/real/keep.txt", "keep\n"),
        ("srv/real/sub/h.txt", "needle\n"),
    ] {
        s.put(rel, text);
    }
    s.c.sh("cd /srv && ln -s real link && ln -s /srv/real abs && ln -s real/g.txt glink && ln -s real/keep.txt keeplink");
    let body = format!(
        r#"c("read", {{path = "link/f.txt"}})
c("read", {{path = "glink"}})
c("write", {{path = "link/new/w.txt", content = "w\n"}})
c("write", {{path = "glink", content = "G\n"}})
c("edit", {{path = "abs/sub/h.txt", oldString = "needle", newString = "pin"}})
c("apply_patch", {{input = {}}})
c("ls", {{path = "link"}})
c("glob", {{pattern = "**/*.txt", root = "abs"}})
c("grep", {{pattern = "pin", root = "link"}})"#,
        common::lua_str(THROUGH_LINKS)
    );
    let lines = s.run(&format!("{PRELUDE}{body}"));
    for l in &lines {
        assert!(l["err"].is_null(), "{l}");
    }
    assert_eq!(lines[0]["out"]["content"], "f");
    assert_eq!(lines[1]["out"]["content"], "g");
    assert_eq!(
        lines[5]["out"]["output"],
        "Success. Updated the following files:\nA link/deeper/n.txt\nM link/f.txt\nM abs/moved.txt\nD keeplink\n"
    );
    let names: Vec<&str> = lines[6]["out"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "deeper",
            "f.txt",
            "g.txt",
            "keep.txt",
            "moved.txt",
            "new",
            "sub"
        ]
    );
    assert_eq!(
        lines[7]["out"]["paths"],
        serde_json::json!([
            "real/deeper/n.txt",
            "real/f.txt",
            "real/g.txt",
            "real/keep.txt",
            "real/moved.txt",
            "real/new/w.txt",
            "real/sub/h.txt"
        ])
    );
    assert_eq!(
        lines[8]["out"]["files"],
        serde_json::json!(["real/sub/h.txt"])
    );
    // Every change landed in the real folder; the links are still links,
    // but the one the patch deleted.
    assert_eq!(
        s.c.sh("cd /srv/real && cat f.txt g.txt new/w.txt sub/h.txt deeper/n.txt moved.txt keep.txt; ls /srv/real"),
        "F\nG\nw\npin\nn\nM\nkeep\ndeeper\nf.txt\ng.txt\nkeep.txt\nmoved.txt\nnew\nsub\n"
    );
    assert_eq!(
        s.c.sh("cd /srv && for l in link abs glink keeplink; do [ -L $l ] && echo $l; done"),
        "link\nabs\nglink\n"
    );
}
