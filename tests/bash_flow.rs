//! `sluice.bash` driven through the real binary with real processes: the
//! command and script forms, stdin, the refused input combinations, the
//! 30,000-byte stream bound and the spill file, the scrubbed environment,
//! timeouts that leave nothing running, the invalid-probe flag, hermetic
//! mode and the policy gate.

mod common;

use common::{lua_str, mode_of, Run};

use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lua prelude: `emit(v)` and `b(input)`, which calls `sluice.bash` and
/// emits `{out = ..., err = ...}`.
const PRELUDE: &str = "local function emit(v) print(sluice.json.encode(v)) end\n\
     local function b(t) local r, e = sluice.bash(t) emit({out = r, err = e}) end\n";

/// Each stdout line of a run that exited 0, parsed as JSON, with the
/// resource limits taken out of a result's sandbox facts: what enforces
/// them depends on the machine, and tests/limits.rs pins them.
fn json_lines(run: Run) -> Vec<Value> {
    let run = run.ok();
    run.stdout
        .lines()
        .map(|l| {
            let mut v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}"));
            let facts = v.get_mut("out").and_then(|o| o.get_mut("sandbox"));
            if let Some(facts) = facts.and_then(Value::as_object_mut) {
                facts.remove("limits");
            }
            v
        })
        .collect()
}

/// Runs `body` after the prelude with `args` as sluice.args.
fn lua(ws: &Path, body: &str, args: &[&str]) -> Vec<Value> {
    json_lines(common::run_lua(ws, &format!("{PRELUDE}{body}"), args))
}

/// `b(<input>)` once: `(out, err)`, each JSON null when absent.
fn bash(ws: &Path, input: &str, args: &[&str]) -> (Value, Value) {
    bash_with(ws, &[], input, args)
}

/// [`bash`] with extra `sluice run` flags (e.g. `--policy FILE`).
fn bash_with(ws: &Path, flags: &[&str], input: &str, args: &[&str]) -> (Value, Value) {
    let run = common::run_lua_with(ws, &format!("{PRELUDE}b({input})\n"), flags, args);
    let mut lines = json_lines(run);
    assert_eq!(lines.len(), 1, "one emitted line: {lines:?}");
    let mut v = lines.remove(0);
    (v["out"].take(), v["err"].take())
}

fn bash_ok(ws: &Path, input: &str, args: &[&str]) -> Value {
    let (out, err) = bash(ws, input, args);
    assert_eq!(err, Value::Null, "unexpected error for {input}");
    out
}

fn bash_err(ws: &Path, input: &str, args: &[&str]) -> Value {
    let (out, err) = bash(ws, input, args);
    assert_eq!(out, Value::Null, "unexpected success for {input}");
    err
}

/// The output of a command that ran to its end with nothing truncated,
/// confined as the default policy confines it: [`DEFAULT_SANDBOX`].
fn finished(exit_code: i32, stdout: &str, stderr: &str) -> Value {
    finished_in(DEFAULT_SANDBOX, exit_code, stdout, stderr)
}

/// The sandbox facts of a command the default policy lets run: the
/// workspace is writable, and enforcement is full: the policy's `**/.env`
/// and `**/.git/**` denies are expanded in the workspace at spawn.
const DEFAULT_SANDBOX: (&str, &str) = ("workspace-write", "full");

/// The sandbox facts under a policy that grants no write to the workspace
/// folder itself (only `fs:write:${workspace}/**`, say): nothing writable,
/// and nothing the sandbox cannot express.
const READ_ONLY_SANDBOX: (&str, &str) = ("read-only", "full");

/// The output of a command that never started (a missing interpreter or
/// working folder): as [`finished`] says, but no sandbox facts, since no
/// command ran in the sandbox.
fn never_ran(exit_code: i32, stdout: &str, stderr: &str) -> Value {
    let mut out = finished(exit_code, stdout, stderr);
    out.as_object_mut().unwrap().remove("sandbox");
    out
}

/// [`finished`] for a command confined as `(mode, enforcement)` say, and
/// that the sandbox refused nothing.
fn finished_in(
    (mode, enforcement): (&str, &str),
    exit_code: i32,
    stdout: &str,
    stderr: &str,
) -> Value {
    json!({
        "exitCode": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "stdoutTruncated": false,
        "stderrTruncated": false,
        "stdoutDroppedBytes": 0,
        "stderrDroppedBytes": 0,
        "sandbox": {"mode": mode, "network": "closed", "denied": false, "enforcement": enforcement},
    })
}

/// Compares long texts without printing 30,000 bytes on a mismatch.
fn assert_text_eq(got: &str, want: &str) {
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let from = at.saturating_sub(40);
        panic!(
            "texts differ at byte {at} (got {} bytes, want {}):\n got: {:?}\nwant: {:?}\n got starts {:?}",
            got.len(),
            want.len(),
            &got[from..(at + 40).min(got.len())],
            &want[from..(at + 40).min(want.len())],
            &got[..60.min(got.len())],
        );
    }
}

/// A folder beside the workspace to serve as the sluice process's TMPDIR,
/// so its spill folder can be found.
fn tmpdir_beside(ws: &Path) -> PathBuf {
    let dir = ws.parent().unwrap().join("tmp");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `pid` is a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            rest.split_whitespace().next() != Some("Z")
        }
        Err(_) => false,
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = vec![];
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        if rest[0] != "Z" && rest[2] == pgid.to_string() {
            out.push(pid);
        }
    }
    out
}

/// Kills a process group when dropped (a daemon a test let escape).
struct KillGroup(i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

// ---- the command form ----

#[test]
fn bash_command_returns_exit_code_stdout_and_stderr_and_a_nonzero_exit_is_a_value() {
    let ws = common::workspace();
    let out = bash_ok(
        ws.path(),
        r#"{command = "echo hi; echo err >&2; exit 3"}"#,
        &[],
    );
    assert_eq!(out, finished(3, "hi\n", "err\n"));
}

#[test]
fn bash_command_runs_in_the_workspace_by_default_and_cwd_is_relative_to_it() {
    let ws = common::workspace();
    fs::create_dir_all(ws.file("sub/dir")).unwrap();
    let lines = lua(
        ws.path(),
        "b{command = \"pwd\"}\nb{command = \"pwd\", cwd = \"sub/dir\"}\n",
        &[],
    );
    let root = ws.path().display().to_string();
    assert_eq!(lines[0]["out"], finished(0, &format!("{root}\n"), ""));
    assert_eq!(
        lines[1]["out"],
        finished(0, &format!("{root}/sub/dir\n"), "")
    );
}

// ---- the script form ----

#[test]
fn bash_script_for_python3_receives_args_as_arguments() {
    let ws = common::workspace();
    let input = format!(
        "{{interpreter = \"python3\", script = {}, args = {{\"alpha\", \"beta\"}}}}",
        lua_str("import sys\nprint(sys.argv[1:])\n")
    );
    let out = bash_ok(ws.path(), &input, &[]);
    assert_eq!(out, finished(0, "['alpha', 'beta']\n", ""));
}

#[test]
fn bash_script_default_interpreter_gets_args_in_dollar_at_unchanged() {
    let ws = common::workspace();
    let args = ["-n", "a b", "it's \"quoted\"", "$HOME", "*", "", "--"];
    let input = format!(
        "{{script = {}, args = {{sluice.args[1], sluice.args[2], sluice.args[3], sluice.args[4], sluice.args[5], sluice.args[6], sluice.args[7]}}}}",
        lua_str(r#"printf '[%s]\n' "$@"; echo "n=$#""#)
    );
    let out = bash_ok(ws.path(), &input, &args);
    assert_eq!(
        out,
        finished(
            0,
            "[-n]\n[a b]\n[it's \"quoted\"]\n[$HOME]\n[*]\n[]\n[--]\nn=7\n",
            ""
        )
    );
}

#[test]
fn bash_script_for_sh_reads_the_program_with_dash_s_and_gets_args() {
    let ws = common::workspace();
    let input = format!(
        "{{interpreter = \"sh\", script = {}, args = {{\"-e\", \"x y\"}}}}",
        lua_str(r#"printf '%s|' "$@"; echo "$#""#)
    );
    let out = bash_ok(ws.path(), &input, &[]);
    assert_eq!(out, finished(0, "-e|x y|2\n", ""));
}

#[test]
fn bash_script_is_delivered_byte_for_byte() {
    let ws = common::workspace();
    let text = "#!/bin/sh\necho 'single' \"double\" `tick` $HOME \\ back\\\\slash\n\
                cat <<EOF\nheredoc $x\nEOF\n<<'END'\n\ttab and unicode ✓ é\nEND\r\nno final newline";
    // `cat` is given no file, so it prints the program it was fed.
    let out = bash_ok(
        ws.path(),
        "{interpreter = \"cat\", script = sluice.args[1]}",
        &[text],
    );
    assert_eq!(out, finished(0, text, ""));
    // bash reads a quoted heredoc from the script without any quoting layer.
    let script = "cat <<'EOF'\n'a' \"b\" $HOME `c` \\d\nEOF\n";
    let out = bash_ok(ws.path(), "{script = sluice.args[1]}", &[script]);
    assert_eq!(out, finished(0, "'a' \"b\" $HOME `c` \\d\n", ""));
}

// ---- stdin ----

#[test]
fn bash_stdin_text_reaches_the_command() {
    let ws = common::workspace();
    let text = "line 1\nit's \"two\" ✓\nno newline";
    let out = bash_ok(
        ws.path(),
        "{command = \"cat; echo; echo done\", stdin = sluice.args[1]}",
        &[text],
    );
    assert_eq!(out, finished(0, &format!("{text}\ndone\n"), ""));
}

#[test]
fn bash_without_stdin_a_reader_gets_end_of_file_at_once() {
    let ws = common::workspace();
    // sluice's own stdin is a pipe held open by this test, so a command that
    // inherited it would block; a short timeout turns that into an error.
    let script = common::script_file(
        ws.path(),
        &format!("{PRELUDE}b{{command = \"cat; echo \\\"eof:$?\\\"\", timeoutMs = 2000}}\n"),
    );
    let started = Instant::now();
    let mut child = std::process::Command::new(common::sluice_bin())
        .arg("run")
        .arg(&script)
        .arg("--workspace")
        .arg(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let held_open = child.stdin.take();
    let run: Run = child.wait_with_output().unwrap().into();
    drop(held_open);
    let mut v = json_lines(run).remove(0);
    assert_eq!(v["err"], Value::Null);
    assert_eq!(v["out"].take(), finished(0, "eof:0\n", ""));
    assert!(started.elapsed() < Duration::from_secs(2));
}

// ---- refused input ----

#[test]
fn bash_refuses_the_six_invalid_combinations_naming_the_field_and_the_fix() {
    let ws = common::workspace();
    let lines = lua(
        ws.path(),
        r#"
b{command = "true", script = "true"}
b{}
b{script = "cat", stdin = "x"}
b{command = "true", args = {"a"}}
b{command = "true", interpreter = "python3"}
b{command = "true", mode = "hermetic", reads = {}, writes = {}, container = "c"}
"#,
        &[],
    );
    let want = [
        ("script", "give `command` (a command line) or `script` (program text for `interpreter`), not both"),
        ("command", "give `command`, e.g. sluice.bash{command = \"ls -la\"}, or `script` with an `interpreter`"),
        ("stdin", "`script` is delivered on stdin, so `stdin` cannot be given with it; read data inside the script, or use `command` with `stdin`"),
        ("args", "`args` go to a `script`; with `command`, write the arguments in the command line"),
        ("interpreter", "`interpreter` runs a `script`; give the program text as `script`, or drop `interpreter` and write the interpreter in `command`"),
        ("container", "hermetic mode checks host paths before spawning and cannot vouch for a container; drop `container` or use mode = \"unhermetic\""),
    ];
    assert_eq!(lines.len(), want.len());
    for (line, (field, message)) in lines.iter().zip(want) {
        assert_eq!(line["out"], Value::Null);
        assert_eq!(
            line["err"],
            json!({"code": "invalid_input", "field": field, "message": message})
        );
    }
}

#[test]
fn bash_env_name_that_is_not_a_posix_name_is_invalid_input() {
    let ws = common::workspace();
    let err = bash_err(
        ws.path(),
        r#"{command = "true", env = {["A-B"] = "x"}}"#,
        &[],
    );
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "env.A-B",
            "message": "env name \"A-B\" is not a POSIX shell name ([A-Za-z_][A-Za-z0-9_]*)",
        })
    );
}

#[test]
fn bash_env_cannot_declare_a_sluice_name() {
    let ws = common::workspace();
    let err = bash_err(
        ws.path(),
        r#"{command = "true", env = {SLUICE_RUN_ID = "mine"}}"#,
        &[],
    );
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "env.SLUICE_RUN_ID",
            "message": "SLUICE_* names are set by sluice for each call (run id, call sequence, workspace) and cannot be given; choose another name",
        })
    );
}

#[test]
fn bash_container_without_a_route_is_provider_unavailable_and_nothing_runs() {
    let ws = common::workspace();
    let err = bash_err(
        ws.path(),
        r#"{command = "touch ran", container = "testbed"}"#,
        &[],
    );
    assert_eq!(
        err,
        json!({
            "code": "provider_unavailable",
            "field": "container",
            "container": "testbed",
            "message": "this run has no route into container \"testbed\": it is not declared in the policy's `containers`, and no engine was chosen (sluice run --container-engine podman|docker); the command did not run. Drop `container` to run on the host, or declare the container",
        })
    );
    assert!(!ws.file("ran").exists());
}

// ---- output bounds and spill ----

#[test]
fn bash_stdout_of_exactly_30000_bytes_is_not_truncated() {
    let ws = common::workspace();
    let out = bash_ok(
        ws.path(),
        r#"{command = "python3 -c \"import sys; sys.stdout.write('y' * 30000)\""}"#,
        &[],
    );
    assert_eq!(out, finished(0, &"y".repeat(30_000), ""));
}

#[test]
fn bash_stdout_of_30001_bytes_omits_exactly_the_one_middle_byte() {
    let ws = common::workspace();
    // One write of 15,000 `a`, `M`, 15,000 `b`.
    let out = bash_ok(
        ws.path(),
        r#"{command = "python3 -c \"import sys; sys.stdout.write('a' * 15000 + 'M' + 'b' * 15000)\""}"#,
        &[],
    );
    assert_eq!(out["exitCode"], 0);
    assert_eq!(out["stdoutTruncated"], true);
    assert_eq!(out["stdoutDroppedBytes"], 1);
    assert_text_eq(
        out["stdout"].as_str().unwrap(),
        &format!(
            "{}\n[1 bytes omitted]\n{}",
            "a".repeat(15_000),
            "b".repeat(15_000)
        ),
    );
    assert_eq!(out["stderrTruncated"], false);
    assert_eq!(out["stderr"], "");
}

#[test]
fn bash_200_mb_of_stdout_keeps_head_and_tail_and_spills_64_mib_removed_after_the_run() {
    let ws = common::workspace();
    let tmp = tmpdir_beside(ws.path());
    // The spill file is looked at from inside later commands, during the
    // run. A confined command sees a private /tmp (which holds the spill
    // folder), so these commands run unconfined, under a policy granting
    // every file and the network.
    let body = r#"
local r = sluice.bash{command = "printf HEAD; head -c 199999992 /dev/zero | tr '\\0' x; printf TAIL"}
local p = r.stdoutSpillPath
local f = sluice.bash{command = "stat -c '%s %a' " .. p}
local d = sluice.bash{command = "stat -c %a \"$(dirname " .. p .. ")\""}
emit({r = r, file = f.stdout, dir = d.stdout})
"#;
    let started = Instant::now();
    let run = common::run_lua_env(
        ws.path(),
        &format!("{PRELUDE}{body}"),
        &common::UNCONFINED,
        &[],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    let elapsed = started.elapsed();
    let v = json_lines(run).remove(0);
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let r = &v["r"];
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["stdoutTruncated"], true);
    assert_eq!(r["stdoutDroppedBytes"], 200_000_000u64 - 30_000);
    assert_text_eq(
        r["stdout"].as_str().unwrap(),
        &format!(
            "HEAD{}\n[199970000 bytes omitted]\n{}TAIL",
            "x".repeat(14_996),
            "x".repeat(14_996)
        ),
    );
    let spill = PathBuf::from(r["stdoutSpillPath"].as_str().expect("a spill path"));
    assert_eq!(spill.parent().unwrap().parent().unwrap(), tmp);
    // During the run: the file held the first 64 MiB (the cap), mode 0600,
    // in a 0700 folder.
    assert_eq!(v["file"], "67108864 600\n");
    assert_eq!(v["dir"], "700\n");
    // After the run: the file and its folder are gone.
    assert!(!spill.exists());
    assert!(!spill.parent().unwrap().exists());
    assert_eq!(common::names_in(&tmp), Vec::<String>::new());
}

#[test]
fn bash_keep_spill_leaves_the_complete_stream_in_a_private_file() {
    let ws = common::workspace();
    let tmp = tmpdir_beside(ws.path());
    let body =
        "emit(sluice.bash{command = \"printf HEAD; head -c 99992 /dev/zero | tr '\\\\0' x; printf TAIL\"})\n";
    let run = common::run_lua_env(
        ws.path(),
        &format!("{PRELUDE}{body}"),
        &["--keep-spill"],
        &[],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    let r = json_lines(run).remove(0);
    assert_eq!(r["stdoutTruncated"], true);
    assert_eq!(r["stdoutDroppedBytes"], 70_000);
    let spill = PathBuf::from(r["stdoutSpillPath"].as_str().expect("a spill path"));
    let whole = format!("HEAD{}TAIL", "x".repeat(99_992));
    let kept = fs::read_to_string(&spill).expect("the spill file is kept");
    assert_text_eq(&kept, &whole);
    assert_eq!(mode_of(&spill), 0o600);
    assert_eq!(mode_of(spill.parent().unwrap()), 0o700);
    assert_eq!(spill.parent().unwrap().parent().unwrap(), tmp);
}

#[test]
fn bash_interleaved_stdout_and_stderr_arrive_separated_and_in_order() {
    let ws = common::workspace();
    let out = bash_ok(
        ws.path(),
        r#"{command = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"}"#,
        &[],
    );
    assert_eq!(out, finished(0, "out1\nout2\nout3\n", "err1\nerr2\nerr3\n"));
}

// ---- environment ----

#[test]
fn bash_env_is_scrubbed_to_the_allowlist_plus_declared_names_and_managed_facts() {
    let ws = common::workspace();
    let home = ws.path().parent().unwrap().join("home");
    let home = home.to_str().unwrap();
    let body = r#"
local cmd = [[printf '%s\n' "S=${SECRET_TOKEN-unset}" "K=${AWS_SECRET_ACCESS_KEY-unset}" "O=${SLUICE_OTHER-unset}" "R=$SLUICE_RUN_ID" "W=$SLUICE_WORKSPACE" "Q=$SLUICE_CALL_SEQ" "P=$PATH" "H=$HOME" "L=$LANG" "A=$LC_ALL"]]
local a = sluice.bash{command = cmd}
local d = sluice.bash{command = cmd, env = {SECRET_TOKEN = "declared"}}
local c = sluice.bash{command = cmd}
local n = sluice.bash{command = "env"}
emit({run_id = sluice.run_id, workspace = sluice.workspace, a = a.stdout, d = d.stdout, c = c.stdout, names = n.stdout})
"#;
    let run = common::run_lua_env(
        ws.path(),
        &format!("{PRELUDE}{body}"),
        &[],
        &[],
        &[
            ("SECRET_TOKEN", "hunter2"),
            ("AWS_SECRET_ACCESS_KEY", "hunter3"),
            ("SLUICE_RUN_ID", "stale"),
            ("SLUICE_OTHER", "x"),
            ("HOME", home),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
        ],
    );
    let v = json_lines(run).remove(0);
    let run_id = v["run_id"].as_str().unwrap();
    assert_ne!(run_id, "stale");
    assert_eq!(v["workspace"], ws.path().display().to_string());
    let path = std::env::var("PATH").unwrap();
    let seq = |text: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with("Q=")).unwrap();
        line[2..].parse().unwrap()
    };
    let a = v["a"].as_str().unwrap();
    let q = seq(a);
    let expect = |secret: &str, q: u64| {
        format!(
            "S={secret}\nK=unset\nO=unset\nR={run_id}\nW={}\nQ={q}\nP={path}\nH={home}\nL=C.UTF-8\nA=C\n",
            ws.path().display()
        )
    };
    assert_eq!(a, expect("unset", q));
    assert_eq!(v["d"], expect("declared", q + 1));
    assert_eq!(v["c"], expect("unset", q + 2));
    // Nothing outside the allowlist, the managed facts and what the shell
    // itself sets reaches the command.
    let shell_own = ["PWD", "SHLVL", "_", "OLDPWD"];
    let allow = [
        "PATH",
        "HOME",
        "USER",
        "LANG",
        "TERM",
        "TMPDIR",
        "SHELL",
        "SLUICE_RUN_ID",
        "SLUICE_CALL_SEQ",
        "SLUICE_WORKSPACE",
        // The sandbox's private caches (src/sandbox/caches.rs).
        "XDG_CACHE_HOME",
        "PIP_CACHE_DIR",
        "npm_config_cache",
        "CARGO_HOME",
        "GOMODCACHE",
    ];
    for line in v["names"].as_str().unwrap().lines() {
        let name = line.split('=').next().unwrap();
        assert!(
            allow.contains(&name) || shell_own.contains(&name) || name.starts_with("LC_"),
            "{name} reached the command"
        );
    }
}

// ---- timeouts and leftovers ----

#[test]
fn bash_timeout_is_an_error_that_keeps_what_the_command_printed() {
    let ws = common::workspace();
    let err = bash_err(
        ws.path(),
        r#"{command = "echo before; sleep 5", timeoutMs = 300}"#,
        &[],
    );
    let elapsed = err["elapsedMs"].as_u64().unwrap();
    assert!((300..2000).contains(&elapsed), "elapsedMs {elapsed}");
    assert_eq!(
        err,
        json!({
            "code": "timeout",
            "message": "the command did not finish within 300 ms and was stopped (TERM, then KILL after the grace period); what it printed is in this error's stdout and stderr. Raise timeoutMs (cap 600000) or run it with background = true",
            "command": "echo before; sleep 5",
            "timeoutMs": 300,
            "elapsedMs": elapsed,
            "stdout": "before\n",
            "stderr": "",
            "stdoutTruncated": false,
            "stderrTruncated": false,
            "stdoutDroppedBytes": 0,
            "stderrDroppedBytes": 0,
        })
    );
}

#[test]
fn bash_timeout_stands_when_the_command_traps_term_and_exits_0() {
    let ws = common::workspace();
    let err = bash_err(
        ws.path(),
        r#"{command = "trap 'exit 0' TERM; echo x; sleep 5", timeoutMs = 300}"#,
        &[],
    );
    assert_eq!(err["code"], "timeout");
    assert_eq!(err["timeoutMs"], 300);
    assert_eq!(err["stdout"], "x\n");
    assert!(err["elapsedMs"].as_u64().unwrap() < 2000);
}

#[test]
fn bash_timeout_kills_a_grandchild_that_ignores_term() {
    let ws = common::workspace();
    // The pids the command prints are checked as host pids and process
    // groups, so it runs unconfined (a confined command prints the pids of
    // its own PID namespace), under a policy granting every file and the
    // network. The confined case is the next test.
    let (out, err) = bash_with(
        ws.path(),
        &common::UNCONFINED,
        r#"{command = "echo $$; (trap '' TERM; sleep 30) & echo $!; sleep 30", timeoutMs = 300}"#,
        &[],
    );
    assert_eq!(out, Value::Null, "unexpected success");
    assert_eq!(err["code"], "timeout");
    let pids: Vec<i32> = err["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let [group, grandchild] = pids[..] else {
        panic!("two pids: {pids:?}")
    };
    let _cleanup = KillGroup(group);
    assert!(
        !alive(grandchild),
        "the TERM-ignoring child {grandchild} survived"
    );
    assert_eq!(group_members(group), Vec::<i32>::new());
    // It took TERM, the grace period (3 s) and KILL; no longer.
    assert!(err["elapsedMs"].as_u64().unwrap() < 5000);
}

#[test]
fn bash_timeout_kills_a_confined_grandchild_that_ignores_term() {
    let ws = common::workspace();
    // Under the default policy the command runs in its own PID namespace,
    // so its processes are found on the host by a `sleep` argument no other
    // process has.
    let nap = common::unique_sleep();
    let mut child = common::spawn_lua_with(
        ws.path(),
        &format!(
            "{PRELUDE}b{{command = \"(trap '' TERM; sleep {nap}) & sleep {nap}\", timeoutMs = 3000}}\n"
        ),
        &[],
        &[],
    );
    // Both sleeps run (the TERM-ignoring one and the command's own) before
    // the timeout.
    let t0 = Instant::now();
    while common::pids_with_arg(&nap).len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_millis(2500),
            "the confined command's sleeps never ran: {:?}",
            common::pids_with_arg(&nap)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = common::exit_within(&mut child, Duration::from_secs(10));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "{status:?}: {stdout}");
    let v: Value = serde_json::from_str(stdout.trim_end()).unwrap();
    assert_eq!(v["out"], Value::Null, "{v}");
    assert_eq!(v["err"]["code"], "timeout", "{v}");
    // Nothing of the command is left once the call has its outcome.
    assert_eq!(
        common::pids_with_arg(&nap),
        Vec::<i32>::new(),
        "the confined command's sleeps survived the timeout"
    );
    // The timeout (3 s), the grace period (3 s) the TERM-ignoring child
    // gets before KILL, as every command does, and no longer.
    assert!(v["err"]["elapsedMs"].as_u64().unwrap() < 8000, "{v}");
}

#[test]
fn bash_a_daemon_holding_the_pipes_does_not_hang_the_call_past_the_grace_period() {
    let ws = common::workspace();
    // The daemon's pid is checked (and killed) as a host pid, and it must
    // outlive the command, which a confined command's PID namespace does
    // not allow: it runs unconfined, under a policy granting every file and
    // the network.
    let started = Instant::now();
    // The daemon leaves the group (setsid) before the command goes on, and
    // keeps the stdout and stderr pipes open for 30 s.
    let (out, err) = bash_with(
        ws.path(),
        &common::UNCONFINED,
        r#"{command = "setsid sh -c 'touch ready; exec sleep 30' & echo $!; while [ ! -e ready ]; do sleep 0.01; done; echo started"}"#,
        &[],
    );
    assert_eq!(err, Value::Null, "unexpected error");
    assert_eq!(out["sandbox"], Value::Null, "ran confined: {out}");
    let elapsed = started.elapsed();
    let stdout = out["stdout"].as_str().unwrap();
    let daemon: i32 = stdout.lines().next().unwrap().parse().unwrap();
    let _cleanup = KillGroup(daemon);
    assert_eq!(stdout, format!("{daemon}\nstarted\n"));
    assert_eq!(out["exitCode"], 0);
    assert!(alive(daemon), "the daemon should have escaped the group");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

// ---- invalidProbe ----

const NOT_A_VERDICT: &str = "The command never reached any code, so its exit code is not a verdict on the code it was meant to check. Fix the name and run it again before drawing a conclusion.";

#[test]
fn bash_unknown_program_is_exit_127_with_an_unknown_command_probe() {
    let ws = common::workspace();
    let out = bash_ok(ws.path(), r#"{command = "nonexistent-xyz --flag"}"#, &[]);
    let path = std::env::var("PATH").unwrap();
    // The line goes to the platform shell; its own complaint is the stderr.
    let sh = std::process::Command::new("/bin/sh")
        .args(["-c", "nonexistent-xyz --flag"])
        .output()
        .unwrap();
    assert_eq!(sh.status.code(), Some(127));
    let mut want = finished(127, "", &String::from_utf8(sh.stderr).unwrap());
    want["invalidProbe"] = json!({
        "reason": "unknown-command",
        "evidence": format!("`nonexistent-xyz` is not a shell builtin and no program of that name is on PATH ({path})"),
        "message": NOT_A_VERDICT,
    });
    assert_eq!(out, want);
}

#[test]
fn bash_script_with_a_missing_interpreter_has_an_unknown_command_probe() {
    let ws = common::workspace();
    let out = bash_ok(
        ws.path(),
        r#"{interpreter = "no-such-interpreter", script = "print(1)"}"#,
        &[],
    );
    // The words are bubblewrap's (`bwrap: execvp ...`, as sluice relays
    // them), the runner used where it works.
    let os = "cannot start no-such-interpreter: No such file or directory";
    let mut want = never_ran(127, "", &format!("sluice: {os}\n"));
    want["invalidProbe"] = json!({
        "reason": "unknown-command",
        "evidence": format!("no-such-interpreter could not be started: {os}"),
        "message": NOT_A_VERDICT,
    });
    assert_eq!(out, want);
}

#[test]
fn bash_missing_cwd_has_an_unknown_path_probe() {
    let ws = common::workspace();
    let out = bash_ok(
        ws.path(),
        r#"{command = "touch ran", cwd = "missing-dir"}"#,
        &[],
    );
    let dir = ws.file("missing-dir");
    let mut want = never_ran(
        1,
        "",
        &format!(
            "sluice: working directory {} does not exist\n",
            dir.display()
        ),
    );
    want["invalidProbe"] = json!({
        "reason": "unknown-path",
        "evidence": format!("the working folder {} does not exist", dir.display()),
        "message": "The command never started because its working folder does not exist, so there is no result to read. Fix `cwd` and run it again.",
    });
    assert_eq!(out, want);
    assert!(!dir.exists());
}

#[test]
fn bash_a_launched_runner_returning_127_or_failing_has_no_probe() {
    let ws = common::workspace();
    let lines = lua(
        ws.path(),
        "b{command = \"sh -c 'exit 127'\"}\nb{command = \"false\"}\n",
        &[],
    );
    assert_eq!(lines[0]["out"], finished(127, "", ""));
    assert_eq!(lines[1]["out"], finished(1, "", ""));
}

#[test]
fn bash_a_command_killed_by_a_signal_reports_128_plus_its_number_and_its_name() {
    let ws = common::workspace();
    let out = bash_ok(ws.path(), r#"{command = "kill -9 $$"}"#, &[]);
    let mut want = finished(137, "", "");
    want["signal"] = json!("SIGKILL");
    assert_eq!(out, want);
}

// ---- hermetic mode ----

fn hermetic_workspace() -> common::Workspace {
    let ws = common::workspace();
    fs::create_dir_all(ws.file("src")).unwrap();
    fs::create_dir_all(ws.file("build")).unwrap();
    fs::write(ws.file("src/a.txt"), "A\n").unwrap();
    ws
}

#[test]
fn bash_hermetic_command_inside_its_declaration_runs() {
    let ws = hermetic_workspace();
    let out = bash_ok(
        ws.path(),
        r#"{mode = "hermetic", command = "cp src/a.txt build/a.txt", reads = {"src/**"}, writes = {"build/**"}}"#,
        &[],
    );
    assert_eq!(out, finished(0, "", ""));
    assert_eq!(fs::read_to_string(ws.file("build/a.txt")).unwrap(), "A\n");
}

#[test]
fn bash_hermetic_write_outside_the_declaration_is_refused_before_anything_runs() {
    let ws = hermetic_workspace();
    let err = bash_err(
        ws.path(),
        r#"{mode = "hermetic", command = "touch build/ran; cp src/a.txt other.txt", reads = {"src/**"}, writes = {"build/**"}}"#,
        &[],
    );
    let other = ws.file("other.txt");
    assert_eq!(
        err,
        json!({
            "code": "outside_declared_writes",
            "message": format!("`cp` writes `other.txt`, which resolves to {}, outside the declared writes; add a glob that covers it to `writes`", other.display()),
            "path": other.display().to_string(),
            "token": "other.txt",
        })
    );
    assert!(!other.exists());
    assert!(!ws.file("build/ran").exists(), "part of the line ran");
}

#[test]
fn bash_hermetic_read_outside_the_declaration_is_refused() {
    let ws = hermetic_workspace();
    let err = bash_err(
        ws.path(),
        r#"{mode = "hermetic", command = "cat /etc/passwd", reads = {"src/**"}, writes = {"build/**"}}"#,
        &[],
    );
    assert_eq!(err["code"], "outside_declared_reads");
    assert_eq!(err["token"], "/etc/passwd");
    assert_eq!(err["path"], "/etc/passwd");
}

#[test]
fn bash_hermetic_without_reads_is_invalid_input() {
    let ws = hermetic_workspace();
    let err = bash_err(
        ws.path(),
        r#"{mode = "hermetic", command = "true", writes = {"build/**"}}"#,
        &[],
    );
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "reads",
            "message": "mode = \"hermetic\" needs both `reads` and `writes` (path globs; an empty list declares nothing)",
        })
    );
}

#[test]
fn bash_hermetic_dev_null_is_exempt() {
    let ws = hermetic_workspace();
    let out = bash_ok(
        ws.path(),
        r#"{mode = "hermetic", command = "cat src/a.txt > /dev/null; cp src/a.txt build/c.txt 2>/dev/null </dev/null", reads = {"src/**"}, writes = {"build/**"}}"#,
        &[],
    );
    assert_eq!(out, finished(0, "", ""));
    assert_eq!(fs::read_to_string(ws.file("build/c.txt")).unwrap(), "A\n");
}

// ---- the policy gate ----

#[test]
fn bash_command_denied_by_policy_is_permission_denied_and_does_not_run() {
    let ws = common::workspace();
    fs::write(ws.file("x"), "keep\n").unwrap();
    let policy = common::policy(
        &ws,
        "no-rm.lua",
        r#"local p = require("sluice.policy")
return {
  rules = {
    p.deny("proc:spawn:rm *", "no deleting"),
    p.programs,
    p.allow "fs:read:${workspace}",
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/**",
    p.allow "proc:spawn:*",
  },
}
"#,
    );
    let run = common::run_lua_with(
        ws.path(),
        &format!("{PRELUDE}b{{command = \"rm -f x\"}}\nb{{command = \"echo ok\"}}\n"),
        &["--policy", &policy],
        &[],
    );
    let lines = json_lines(run);
    let by = format!("deny \"proc:spawn:rm *\" (rules[1] of {policy})");
    assert_eq!(lines[0]["out"], Value::Null);
    assert_eq!(
        lines[0]["err"],
        common::denied("proc:spawn:rm -f x", &by, "no deleting")
    );
    assert_eq!(fs::read_to_string(ws.file("x")).unwrap(), "keep\n");
    // The same policy lets another command run, read-only: it grants no
    // write to the workspace folder itself.
    assert_eq!(
        lines[1]["out"],
        finished_in(READ_ONLY_SANDBOX, 0, "ok\n", "")
    );
}

#[test]
fn bash_routed_into_a_container_by_policy_is_refused_and_does_not_run() {
    let ws = common::workspace();
    let policy = common::policy(
        &ws,
        "route.lua",
        r#"local p = require("sluice.policy")
return {
  rules = { p.programs, p.allow "proc:spawn:*", p.allow "fs:*:${workspace}/**" },
  route = function(req)
    if req.resource:find("^touch") then return "testbed" end
  end,
}
"#,
    );
    let run = common::run_lua_with(
        ws.path(),
        &format!("{PRELUDE}b{{command = \"touch made\"}}\nb{{command = \"echo host\"}}\n"),
        &["--policy", &policy],
        &[],
    );
    let lines = json_lines(run);
    assert_eq!(lines[0]["out"], Value::Null);
    assert_eq!(lines[0]["err"]["code"], "provider_unavailable");
    assert_eq!(lines[0]["err"]["container"], "testbed");
    assert!(
        !ws.file("made").exists(),
        "the routed command ran on the host"
    );
    // A command the policy does not route runs on the host, confined
    // read-only: the policy grants no write to the workspace folder itself.
    assert_eq!(
        lines[1]["out"],
        finished_in(READ_ONLY_SANDBOX, 0, "host\n", "")
    );
}

#[test]
fn bash_env_that_steers_the_loader_or_the_shell_is_refused_naming_it() {
    let ws = common::workspace();
    for (env, field) in [
        ("{LD_PRELOAD = '/w/x.so'}", "env.LD_PRELOAD"),
        ("{BASH_ENV = '/w/x.sh'}", "env.BASH_ENV"),
        ("{['BASH_FUNC_ls%%'] = '() { id; }'}", "env.BASH_FUNC_ls%%"),
    ] {
        let run = common::run_lua_with(
            ws.path(),
            &format!(
                "local r, e = sluice.bash{{script = 'echo hi', env = {env}}}\nprint(e.code, e.field)\n"
            ),
            &[],
            &[],
        )
        .ok();
        assert_eq!(run.stdout, format!("invalid_input\t{field}\n"), "{env}");
    }
}

#[test]
fn bash_redirections_are_judged_where_the_command_runs() {
    let ws = common::workspace();
    fs::create_dir_all(ws.file(".git/hooks")).unwrap();
    // The default policy denies writes under .git/: a redirection written
    // relative to `cwd` lands there, so it is judged there.
    let run = common::run_lua_with(
        ws.path(),
        "local r, e = sluice.bash{command = 'echo x > pre-commit', cwd = '.git/hooks'}\nprint(e and e.code, e and e.capability)\n",
        &[],
        &[],
    )
    .ok();
    let hook = ws.file(".git/hooks/pre-commit");
    assert_eq!(
        run.stdout,
        format!("permission_denied\tproc:spawn:echo x > pre-commit\n"),
        "{}",
        run.stderr
    );
    assert!(!hook.exists());
}
