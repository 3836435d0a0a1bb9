//! Shared helpers for the integration tests: a scratch workspace and a way to
//! run a Lua workflow through the real `sluice` binary.
#![allow(dead_code)]

pub mod flow_errors;
pub mod guide;
pub mod http;
pub mod mcp;
pub mod postgres;
pub mod rng;
pub mod stores;
pub mod temporal;
pub mod test_runs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The `sluice` binary cargo built for these tests.
pub fn sluice_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sluice"))
}

/// A scratch workspace: `<tmp>/ws`, with the test's scripts kept apart in
/// `<tmp>/scripts` so they are not workspace files. Both go when dropped.
pub struct Workspace {
    _root: tempfile::TempDir,
    ws: PathBuf,
}

impl Workspace {
    /// The workspace folder, canonical (no symlinks), as sluice shows it.
    pub fn path(&self) -> &Path {
        &self.ws
    }

    /// `rel` inside the workspace.
    pub fn file(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }
}

/// A fresh workspace folder, removed (with its scripts) when dropped.
pub fn workspace() -> Workspace {
    let root = tempfile::tempdir().expect("create a temp folder");
    let ws = std::fs::canonicalize(root.path()).unwrap().join("ws");
    std::fs::create_dir(&ws).expect("create the workspace");
    Workspace { _root: root, ws }
}

/// The result of one `sluice run`.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics with both streams unless the run exited 0.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "sluice run failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// `sluice ARGS --workspace WS` (a subcommand such as `audit verify`), with
/// standard input closed.
pub fn sluice_in(ws: &Path, args: &[&str]) -> Run {
    Command::new(sluice_bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .envs(stores::current_env())
        .stdin(Stdio::null())
        .output()
        .expect("spawn sluice")
        .into()
}

/// The call rows of the last run recorded in `ws`, as `sluice audit
/// export last` prints them.
pub fn exported_calls(ws: &Path) -> Vec<serde_json::Value> {
    let export = sluice_in(ws, &["audit", "export", "last"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    export
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "call")
        .collect()
}

/// Writes `script` into the scripts folder beside the workspace (so the
/// script itself is not a workspace file) and returns its path.
pub fn script_file(ws: &Path, script: &str) -> PathBuf {
    let dir = ws.parent().unwrap().join(format!(
        "{}-scripts",
        ws.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let n = std::fs::read_dir(&dir).unwrap().count();
    let path = dir.join(format!("script{n}.lua"));
    std::fs::write(&path, script).unwrap();
    path
}

/// Runs Lua source as a workflow in `ws`, with `args` as sluice.args.
pub fn run_lua(ws: &Path, script: &str, args: &[&str]) -> Run {
    run_lua_with(ws, script, &[], args)
}

/// Starts a workflow without waiting for it.
pub fn spawn_lua(ws: &Path, script: &str, args: &[&str]) -> Child {
    spawn_lua_with(ws, script, &[], args)
}

/// Lua prelude that prints a value as JSON on one line: `emit(v)`.
pub const EMIT: &str = "local function emit(v) print(sluice.json.encode(v)) end\n";

/// Runs `body` (with `emit` defined) and parses each stdout line as JSON.
pub fn lua_json(ws: &Path, body: &str) -> Vec<serde_json::Value> {
    let run = run_lua(ws, &format!("{EMIT}{body}"), &[]).ok();
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// `p` with every symlink resolved, as sluice shows paths it resolved.
pub fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

/// `s` as a Lua long-bracket string literal.
pub fn lua_str(s: &str) -> String {
    assert!(!s.contains("]==]"));
    format!("[==[{s}]==]")
}

/// The names in `dir`, sorted, without the audit store (`.sluice`), which
/// every recorded run leaves in its workspace (tests/audit.rs pins it).
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".sluice")
        .collect();
    names.sort();
    names
}

/// Permission bits of `p`, set-id bits included.
pub fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

/// This machine's host name, as a lock's owner file records it.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The rule of the built-in default policy that asks for files outside the
/// workspace, as a verdict's `by` names it.
pub const DEFAULT_OUTSIDE_RULE: &str =
    r#"ask "fs:*" (rules[60] of policies/default.lua (built in))"#;

/// The error an fs capability outside the workspace gets from the default
/// policy when nobody is at a terminal to approve it.
pub fn needs_approval(cap: &str) -> serde_json::Value {
    let reason = "it is outside the workspace, so a person decides";
    serde_json::json!({
        "code": "permission_required",
        "message": format!(
            "{cap} needs approval ({DEFAULT_OUTSIDE_RULE}: {reason}) and there is no terminal to ask. \
             Pre-approve it with --approve '{cap}', or change the policy."
        ),
        "capability": cap,
        "by": DEFAULT_OUTSIDE_RULE,
        "reason": reason,
        "approve": format!("--approve '{cap}'"),
    })
}

/// Runs the script at `path` in `ws` with extra `sluice run` flags (e.g.
/// `--policy FILE`, `--ceiling PATTERN`, `--approve PATTERN`) and `args` as
/// sluice.args. Standard input is closed, so nobody answers an ask.
pub fn run_script_with(ws: &Path, path: &Path, flags: &[&str], args: &[&str]) -> Run {
    sluice_run(ws, path, flags, args)
        .output()
        .expect("spawn sluice")
        .into()
}

/// `sluice run PATH --workspace WS FLAGS -- ARGS` with standard input closed,
/// so an ask is never put to the person running the tests.
pub fn sluice_run(ws: &Path, path: &Path, flags: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new(sluice_bin());
    cmd.arg("run")
        .arg(path)
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .arg("--")
        .args(args)
        .stdin(Stdio::null())
        // Commands' private caches go beside the workspace, with it.
        .env("SLUICE_CACHE_DIR", caches_of(ws))
        .envs(stores::current_env());
    cmd
}

/// Where the tests' runs keep commands' private caches: beside `ws`, so
/// they go with it.
pub fn caches_of(ws: &Path) -> PathBuf {
    ws.parent().unwrap().join("caches")
}

/// [`run_lua`] with extra `sluice run` flags before the script's arguments.
pub fn run_lua_with(ws: &Path, script: &str, flags: &[&str], args: &[&str]) -> Run {
    let path = script_file(ws, script);
    run_script_with(ws, &path, flags, args)
}

/// [`spawn_lua`] with extra `sluice run` flags; standard input is closed, so
/// an ask is never put to the person running the tests.
pub fn spawn_lua_with(ws: &Path, script: &str, flags: &[&str], args: &[&str]) -> Child {
    sluice_run(ws, &script_file(ws, script), flags, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice")
}

// Helpers for the policy tests.

/// Writes a policy file beside the workspace (not in it); returns its path.
pub fn policy(ws: &Workspace, name: &str, text: &str) -> String {
    let dir = ws.path().parent().unwrap().join("policies");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The 1-based line of `text` holding `needle`.
pub fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} is not in the policy"))
        + 1
}

/// Lua prelude: `emit(v)`, and `try(flow, input)` which emits `{ok = flow}`
/// or the error table.
pub const TRY: &str = r#"
local function try(name, input)
  local r, e = sluice.call(name, input)
  if r then emit({ok = name}) else emit(e) end
end
"#;

/// Runs `body` with `flags`; each stdout line parsed as JSON.
pub fn lua(ws: &Workspace, flags: &[&str], body: &str) -> Vec<serde_json::Value> {
    let run = run_lua_with(ws.path(), &format!("{EMIT}{TRY}{body}"), flags, &[]).ok();
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

pub fn denied(cap: &str, by: &str, reason: &str) -> serde_json::Value {
    serde_json::json!({
        "code": "permission_denied",
        "message": format!("{cap} is denied by {by}: {reason}."),
        "capability": cap,
        "by": by,
        "reason": reason,
    })
}

/// [`run_lua_with`] with extra environment variables set on the `sluice`
/// process itself (for the environment a command inherits, and `TMPDIR`).
pub fn run_lua_env(
    ws: &Path,
    script: &str,
    flags: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    sluice_run(ws, &script_file(ws, script), flags, args)
        .envs(env.iter().copied())
        .output()
        .expect("spawn sluice")
        .into()
}

// Helpers for the background-job tests.

/// Whether `pid` is a live process: present in /proc and not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            rest.split_whitespace().next() != Some("Z")
        }
        Err(_) => false,
    }
}

/// The first line a spawned run prints on stdout, without its newline.
/// Takes the child's stdout: print nothing after that line.
pub fn read_stdout_line(child: &mut Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim_end_matches('\n').to_string()
}

/// The child's exit, killing it and failing the test if it takes longer
/// than `limit`.
pub fn exit_within(child: &mut Child, limit: std::time::Duration) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("the run did not stop within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A workspace addressed by relative paths, for the file-flow tests: its
/// canonical root (what sluice shows in messages), file helpers, and a way
/// to call a flow with an input built as JSON in Rust.
pub struct Files {
    _dir: Workspace,
    pub root: PathBuf,
}

impl Files {
    pub fn new() -> Files {
        let dir = workspace();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        Files { _dir: dir, root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The absolute path sluice shows for `rel`.
    pub fn shown(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    /// Writes `bytes` at `rel`, creating its folders.
    pub fn put(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&p, bytes).unwrap();
        p
    }

    pub fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    /// Calls flow `flow` from Lua with `input` (decoded into a Lua table)
    /// and returns `(out, err)`, each `false` when absent.
    pub fn call(
        &self,
        flow: &str,
        input: serde_json::Value,
    ) -> (serde_json::Value, serde_json::Value) {
        let text = input.to_string();
        assert!(
            !text.contains("]=====]"),
            "input would end the Lua long string"
        );
        let out = lua_json(
            &self.root,
            &format!(
                "local input = sluice.json.decode([=====[{text}]=====])\n\
                 local out, err = sluice.call({flow:?}, input)\n\
                 emit({{out = out or false, err = err or false}})"
            ),
        );
        assert_eq!(out.len(), 1, "{out:?}");
        (out[0]["out"].clone(), out[0]["err"].clone())
    }
}

/// sluice's lock and staging names in `dir`, sorted.
pub fn sluice_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".sluice-"))
        .collect();
    names.sort();
    names
}

// Helpers for commands run unconfined, and for finding confined ones.

/// A policy granting every file and the network: under it `sluice.bash`
/// and `sluice.shell_command` run commands unconfined (their results carry
/// no `sandbox` field), for tests of the executor's own semantics that the
/// sandbox legitimately changes (host pids, a shared /tmp, the network).
/// Flags that run commands unconfined: the built-in policy granting
/// everything, and no audit record (which would be kept out of reach, so
/// confined). For tests of executor semantics that need host pids or the
/// host's /tmp.
pub const UNCONFINED: [&str; 3] = ["--policy", "unconfined", "--no-audit"];

/// A `sleep` duration of about 30 s that no other process on this machine
/// has in its arguments (the decimals hold this test process's pid, the
/// clock and a counter), so a test can find the processes of a confined
/// command, whose own pids are those of its PID namespace.
pub fn unique_sleep() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "30.{:06}{:03}{:03}",
        std::process::id() % 1_000_000,
        nanos % 1000,
        n % 1000
    )
}

/// Host pids of live (non-zombie) processes with `arg` as one of their
/// arguments (exactly, not inside a longer one).
pub fn pids_with_arg(arg: &str) -> Vec<i32> {
    let mut out = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes()) && pid_alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Waits up to `limit` until no live process has `arg` among its
/// arguments; the survivors, if any.
pub fn survivors_with_arg(arg: &str, limit: std::time::Duration) -> Vec<i32> {
    let start = std::time::Instant::now();
    loop {
        let left = pids_with_arg(arg);
        if left.is_empty() || start.elapsed() > limit {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

// Helpers for the confinement tests.

/// The runners the confinement tests run under, each in turn:
/// `SLUICE_TEST_RUNNERS=bwrap` (or `landlock`) narrows them.
pub fn runners() -> Vec<String> {
    std::env::var("SLUICE_TEST_RUNNERS")
        .unwrap_or_else(|_| "bwrap,landlock".into())
        .split(',')
        .map(String::from)
        .collect()
}

/// Fails, saying how to install it, when bubblewrap is missing: the tests
/// must not pass by skipping.
pub fn need_bwrap() {
    need_program("bwrap", "apt-get install bubblewrap");
}

/// Fails, saying how to install it, when `program` is not on PATH.
pub fn need_program(program: &str, install: &str) {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(program).is_file());
    assert!(
        found,
        "this test needs {program}: {install} (scripts/test installs it)"
    );
}

/// A Python program run by `bash` under `runner` (the kernel does not read
/// Python, so the sandbox alone stands between it and the files), with
/// extra `sluice run` flags and variables on sluice itself; its output or
/// error as JSON.
pub fn confined_python(
    ws: &Path,
    runner: &str,
    flags: &[&str],
    env: &[(&str, &str)],
    program: &str,
) -> serde_json::Value {
    need_bwrap();
    let script = format!(
        "local r, e = sluice.bash{{script = {}, interpreter = 'python3'}}\nprint(sluice.json.encode(r or e))",
        lua_str(program)
    );
    let mut all = vec!["--sandbox", runner];
    all.extend_from_slice(flags);
    let run = run_lua_env(ws, &script, &all, &[], env).ok();
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// A folder outside the workspace and outside /tmp (which confined commands
/// see as their own private tmpfs; the checkout itself may be under /tmp),
/// named after `ws` and `name`.
pub fn outside_tmp(ws: &Workspace, name: &str) -> PathBuf {
    let run = ws.path().parent().unwrap().file_name().unwrap();
    let dir = Path::new("/var/tmp/sluice-tests").join(run).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts that a helper command the test ran itself succeeded, showing
/// its stderr when it did not.
pub fn assert_ran(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The files of the workspace's audit store (the database, its WAL and
/// journal) whose bytes hold `secret` anywhere.
pub fn record_files_holding(ws: &Path, secret: &str) -> Vec<PathBuf> {
    let store = ws.join(".sluice");
    let files: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap_or_else(|e| panic!("{}: {e}", store.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.iter().any(|f| f.ends_with("audit.db")), "{files:?}");
    files
        .into_iter()
        .filter(|f| {
            let bytes = std::fs::read(f).unwrap();
            bytes.windows(secret.len()).any(|w| w == secret.as_bytes())
        })
        .collect()
}

/// A policy file (beside the workspace) whose rules let commands read each
/// folder of `reads` (the folder and what it holds), then `rules`, and
/// which declares the language servers `lsp` (a Lua table's body).
pub fn lsp_policy(ws: &Workspace, reads: &[String], rules: &[&str], lsp: &str) -> String {
    let rules: Vec<String> = reads
        .iter()
        .flat_map(|r| {
            [
                format!("p.allow(\"fs:read:{r}/**\")"),
                format!("p.allow(\"fs:read:{r}\")"),
            ]
        })
        .chain(rules.iter().map(|r| r.to_string()))
        .collect();
    policy(
        ws,
        "lsp.lua",
        &format!(
            "local p = require(\"sluice.policy\")\nreturn {{\n  rules = {{ {} }},\n  lsp = {{ {lsp} }},\n}}\n",
            rules.join(", ")
        ),
    )
}
