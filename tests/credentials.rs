//! Named credentials in scripts (`sluice.credential`), driven through the
//! real `sluice` binary: an opaque value in Lua, a reference in the input
//! the policy and the record see, `cred:use:NAME@command` decided by the
//! policy, the secret in a command's environment only, and every copy of it
//! cut from what comes back; credential-shaped run arguments stored
//! redacted, and a replay that needs them given again. The network side
//! (headers, origins, redirects) is in `net_flows.rs`.

mod common;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The secret `SLUICE_CREDENTIAL_GH` holds in these tests.
const SECRET: &str = "ghp_sEcReT0123456789abcdefghijKLMN";

/// Runs `body` (with `emit`) with the credential set and `flags`.
fn run(ws: &Path, flags: &[&str], body: &str) -> common::Run {
    common::run_lua_env(
        ws,
        &format!("{}{body}", common::EMIT),
        flags,
        &[],
        &[("SLUICE_CREDENTIAL_GH", SECRET)],
    )
}

fn lines(run: &common::Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

const GRANT: [&str; 2] = ["--approve", "cred:use:gh@command"];

#[test]
fn a_command_gets_its_credential_and_nothing_it_prints_or_writes_carries_it_back() {
    let ws = common::workspace();
    let body = r#"
local r, e = sluice.bash{command = "printf 'token=%s\n' \"$TOKEN\"; printf %s \"$TOKEN\" | wc -c; printf %s \"$TOKEN\" > out.txt; env | grep '^TOKEN='",
                         env = {TOKEN = sluice.credential("gh")}}
emit(r or e)
emit(sluice.read{path = "out.txt"} or "no file")
local t, te = sluice.bash{command = "printf %s \"$TOKEN\"; sleep 5", timeoutMs = 300, env = {TOKEN = sluice.credential("gh")}}
emit(te)
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    let got = lines(&out);
    assert_eq!(got[0]["exitCode"], 0, "{}", got[0]);
    // The command had the real secret (its length), the script sees it cut.
    assert_eq!(
        got[0]["stdout"],
        format!("token=[redacted]\n{}\nTOKEN=[redacted]\n", SECRET.len())
    );
    assert_eq!(
        std::fs::read_to_string(ws.file("out.txt")).unwrap(),
        SECRET,
        "the command wrote the real secret"
    );
    // A file holding it is read back cut, and so is a timeout's output.
    assert_eq!(got[1]["content"], "[redacted]");
    assert_eq!(got[2]["code"], "timeout");
    assert_eq!(got[2]["stdout"], "[redacted]");
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    assert_eq!(
        common::record_files_holding(ws.path(), SECRET),
        Vec::<PathBuf>::new()
    );
    // The record keeps the reference where it can show it.
    let calls = common::exported_calls(ws.path());
    assert_eq!(calls[0]["flow"], "bash");
    let caps = calls[0]["capabilities"].to_string();
    assert!(caps.contains("cred:use:gh@command"), "{caps}");
}

#[test]
fn a_credential_for_a_command_needs_cred_use_which_the_default_policy_asks_for() {
    let ws = common::workspace();
    let body = r#"
local r, e = sluice.bash{command = "touch ran", env = {TOKEN = sluice.credential("gh")}}
emit(e)
"#;
    let got = lines(&run(ws.path(), &[], body).ok());
    assert_eq!(got[0]["code"], "permission_required", "{}", got[0]);
    assert_eq!(got[0]["capability"], "cred:use:gh@command");
    assert_eq!(got[0]["approve"], "--approve 'cred:use:gh@command'");
    assert!(!ws.file("ran").exists(), "the command did not run");
    // A policy that denies it by name wins over the pre-approval.
    let pol = ws.path().parent().unwrap().join("nocred.lua");
    std::fs::write(
        &pol,
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.programs, p.allow \"proc:spawn:*\", \
         p.allow \"fs:write:${workspace}/**\", p.deny(\"cred:use:gh@*\", \"gh stays home\") } }\n",
    )
    .unwrap();
    let mut flags = vec!["--policy", pol.to_str().unwrap()];
    flags.extend(GRANT);
    let got = lines(&run(ws.path(), &flags, body).ok());
    assert_eq!(got[0]["code"], "permission_denied", "{}", got[0]);
    assert_eq!(got[0]["reason"], "gh stays home");
    assert!(!ws.file("ran").exists());
}

#[test]
fn a_credential_cannot_steer_a_program_nor_go_to_a_background_job() {
    let ws = common::workspace();
    let body = r#"
local cred = sluice.credential("gh")
local _, e1 = sluice.bash{command = "git log", env = {PAGER = cred}}
local _, e2 = sluice.bash{command = "sleep 1", background = true, env = {TOKEN = cred}}
local _, e3 = sluice.bash{command = "true", env = {TOKEN = {credential = "gh", extra = 1}}}
emit({e1.code, e1.field, e2.code, e2.field, e3.code, e3.field})
"#;
    let got = lines(&run(ws.path(), &GRANT, body).ok());
    assert_eq!(
        got[0],
        json!([
            "invalid_input",
            "env.PAGER",
            "invalid_input",
            "env.TOKEN",
            "invalid_input",
            "env.TOKEN"
        ])
    );
}

#[test]
fn a_credential_is_opaque_to_the_script() {
    let ws = common::workspace();
    let body = r#"
local cred = sluice.credential("gh", {prefix = "Bearer "})
local function fails(f) local ok, e = pcall(f); return (not ok) and tostring(e) or "no error" end
emit({
  shown = tostring(cred),
  kind = type(cred),
  concat = fails(function() return "Bearer " .. cred end),
  json = fails(function() return sluice.json.encode({headers = {authorization = cred}}) end),
  field = fails(function() return cred.secret end),
  name = fails(function() return sluice.credential("a b") end),
  option = fails(function() return sluice.credential("gh", {prefx = "x"}) end),
})
"#;
    let got = lines(&run(ws.path(), &[], body).ok());
    let v = &got[0];
    assert_eq!(v["shown"], "credential(gh)");
    assert_eq!(v["kind"], "userdata");
    let concat = v["concat"].as_str().unwrap();
    assert!(
        concat.contains("a credential cannot be joined to text"),
        "{concat}"
    );
    assert!(
        concat.contains("sluice.credential(NAME, {prefix = \"Bearer \"})"),
        "{concat}"
    );
    let json = v["json"].as_str().unwrap();
    assert!(
        json.contains("`headers.authorization` is credential(gh), which cannot be encoded"),
        "{json}"
    );
    assert!(v["field"]
        .as_str()
        .unwrap()
        .contains("credential(gh) has no fields"));
    assert!(v["name"]
        .as_str()
        .unwrap()
        .contains("is not a credential name"));
    assert!(v["option"]
        .as_str()
        .unwrap()
        .contains("unknown option `prefx`"));
    assert!(!format!("{got:?}").contains(SECRET));
}

#[test]
fn credential_shaped_arguments_are_stored_redacted_and_a_replay_needs_them_again() {
    let ws = common::workspace();
    let script = common::script_file(
        ws.path(),
        "for i, a in ipairs(sluice.args) do sluice.write{path = 'arg' .. i, content = a} end\n",
    );
    let args = [
        "plain",
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
        "--token=hunter2hunter2",
        SECRET,
    ];
    let out: common::Run = common::sluice_run(ws.path(), &script, &[], &args)
        .env("SLUICE_CREDENTIAL_GH", SECRET)
        .output()
        .unwrap()
        .into();
    let out = out.ok();
    // The script saw them as given.
    for (i, a) in args.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(ws.file(&format!("arg{}", i + 1))).unwrap(),
            *a
        );
    }
    // The record did not keep them, and says what each was.
    for secret in [
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
        "hunter2hunter2",
        SECRET,
    ] {
        assert_eq!(
            common::record_files_holding(ws.path(), secret),
            Vec::<PathBuf>::new(),
            "{secret}"
        );
    }
    let shown = common::sluice_in(ws.path(), &["audit", "show", "last", "--json"]);
    let run: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        run["run"]["args"],
        json!([
            "plain",
            "[redacted: a GitHub token (ghp_...)]",
            "--token=[redacted]",
            "[redacted: a named credential]"
        ]),
        "{}",
        out.stderr
    );
    // A replay cannot give the script what the record lacks: it asks.
    let replay = common::sluice_in(ws.path(), &["replay", "last"]);
    assert_ne!(replay.code, 0);
    assert!(
        replay.stderr.contains("argument 2, 3, 4") && replay.stderr.contains("-- ARG..."),
        "{}",
        replay.stderr
    );
    // Given again, it reproduces the run.
    let mut with = vec!["replay", "last", "--workspace"];
    let ws_text = ws.path().display().to_string();
    with.push(&ws_text);
    with.push("--");
    with.extend(args);
    let replay: common::Run = std::process::Command::new(common::sluice_bin())
        .args(&with)
        .output()
        .unwrap()
        .into();
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    assert!(replay.stderr.contains("reproduced"), "{}", replay.stderr);
    // A wrong plain argument is refused, naming it.
    let mut wrong = with.clone();
    let at = wrong.len() - 4;
    wrong[at] = "other";
    let replay: common::Run = std::process::Command::new(common::sluice_bin())
        .args(&wrong)
        .output()
        .unwrap()
        .into();
    assert_ne!(replay.code, 0);
    assert!(
        replay.stderr.contains("argument 1 differs"),
        "{}",
        replay.stderr
    );
}

#[test]
fn a_run_that_sent_a_credential_replays_without_it() {
    let ws = common::workspace();
    let body = r#"
local r = sluice.bash{command = "printf %s \"$TOKEN$GH\" | wc -c",
                      env = {TOKEN = sluice.credential("gh"), GH = sluice.credential("gh", {prefix = "x"})}}
emit(r.stdout)
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    assert_eq!(lines(&out)[0], json!(format!("{}\n", 2 * SECRET.len() + 1)));
    // The record keeps the reference (GH) or the mark (TOKEN), never the
    // secret, so a replay needs no credential: none is set here.
    let calls = common::exported_calls(ws.path());
    assert_eq!(
        calls[0]["input"]["env"]["GH"],
        json!({"credential": "gh", "prefix": "x"})
    );
    assert_eq!(calls[0]["input"]["env"]["TOKEN"], "[redacted]");
    let replay = common::sluice_in(ws.path(), &["replay", "last"]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    assert!(replay.stderr.contains("reproduced"), "{}", replay.stderr);
    assert!(!replay.stdout.contains(SECRET));
}
