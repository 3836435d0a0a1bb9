//! One sandbox per run and profile (src/sandbox/shared/): the run's
//! confined commands under bubblewrap share one set of namespaces, started
//! by the sluice binary inside as a helper. Pinned here: commands of a run
//! share it (one PID and network namespace), a widened call gets its own;
//! a server one command starts is reachable from the next over loopback,
//! and the host's loopback is not; `fetch` reaches such a server (with the
//! origin's grant), yet never shadows a host service that is up and never
//! takes a credential there; every call still ends whole (nothing it
//! starts outlives it, not even through `setsid`); no command reads
//! another's environment or signals another or the helper (each is a
//! landlock domain of its own); a command handed a credential runs apart.

mod common;

use common::{need_bwrap, run_lua_with, survivors_with_arg, unique_sleep, workspace};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::time::Duration;

/// The namespaces a confined command is in, as `pid net` inode names.
const NAMESPACES: &str = "echo $(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/net)";

/// The line of `stdout` that starts with `tag`.
fn tagged(stdout: &str, tag: &str) -> String {
    let found = stdout.lines().find(|l| l.starts_with(tag));
    found
        .unwrap_or_else(|| panic!("no {tag:?} line: {stdout}"))
        .to_string()
}

#[test]
fn commands_of_a_run_share_one_sandbox_and_a_widened_call_gets_its_own() {
    need_bwrap();
    let ws = workspace();
    let script = format!(
        r#"
local function ns(input)
  local r, e = sluice.bash(input)
  assert(r, tostring(e and e.message))
  return r.stdout
end
print("a " .. ns{{command = "{NAMESPACES}"}})
print("b " .. ns{{command = "{NAMESPACES}"}})
print("w " .. ns{{command = "{NAMESPACES}", sandboxPermissions = "danger-full-access", justification = "the test"}})
print("c " .. ns{{command = "{NAMESPACES}"}})
"#
    );
    // A wider retry needs the exact command approved (no wildcard).
    let approve = format!("proc:spawn:{NAMESPACES}");
    let run = run_lua_with(
        ws.path(),
        &script,
        &["--sandbox", "bwrap", "--approve", &approve],
        &[],
    )
    .ok();
    let line = |tag: &str| tagged(&run.stdout, tag);
    let (a, b, w, c) = (line("a "), line("b "), line("w "), line("c "));
    assert!(a.contains("pid:[") && a.contains("net:["), "{a}");
    assert_eq!(a[2..], b[2..], "two commands of a run, two sandboxes");
    assert_eq!(
        a[2..],
        c[2..],
        "the call after a widened one left the run's sandbox"
    );
    assert_ne!(a[2..], w[2..], "a widened call ran in the run's sandbox");
}

#[test]
fn a_server_one_command_starts_is_reachable_from_the_next_over_loopback() {
    need_bwrap();
    let ws = workspace();
    let script = r#"
local server = [[
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"from the run's own server"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
socketserver.TCPServer(("127.0.0.1", 18931), H).serve_forever()
]]
local job = assert(sluice.bash{script = server, interpreter = "python3", background = true})
local client = [[
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:18931/", timeout=2).read().decode()); break
    except OSError as e:
        err = e; time.sleep(0.05)
else:
    print("unreachable:", err)
]]
local r = assert(sluice.bash{script = client, interpreter = "python3"})
print("got " .. r.stdout)
job:kill()
"#;
    let run = run_lua_with(ws.path(), script, &["--sandbox", "bwrap"], &[]).ok();
    assert!(
        run.stdout.contains("got from the run's own server"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_command_cannot_reach_a_server_on_the_hosts_loopback() {
    need_bwrap();
    let ws = workspace();
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    host.set_nonblocking(true).unwrap();
    // The control: the same program reaches a server of its own sandbox.
    let program = format!(
        r#"
import socket, threading
own = socket.socket(); own.bind(("127.0.0.1", 0)); own.listen(1)
threading.Thread(target=own.accept, daemon=True).start()
socket.create_connection(own.getsockname(), timeout=2).close()
print("own: reached")
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    print("host: reached")
except OSError as e:
    print("host: refused", type(e).__name__)
"#
    );
    let script = format!(
        "local r = assert(sluice.bash{{script = {}, interpreter = 'python3'}})\nprint(r.stdout .. r.stderr)",
        common::lua_str(&program)
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[]).ok();
    assert!(run.stdout.contains("own: reached"), "{}", run.stdout);
    assert!(run.stdout.contains("host: refused"), "{}", run.stdout);
    assert!(host.accept().is_err(), "the host's server was reached");
}

#[test]
fn nothing_a_command_starts_outlives_its_call_in_the_shared_sandbox() {
    need_bwrap();
    let ws = workspace();
    let (plain, escaped, nohup) = (unique_sleep(), unique_sleep(), unique_sleep());
    // The first call leaves three sleeps behind, one through `setsid`
    // (which the session filter refuses: it stays in the call's session)
    // and says whether a new session could be had at all; the run goes on
    // in a second call while the test looks for the leftovers.
    let script = format!(
        r#"
local r = assert(sluice.bash{{command = "sleep {plain} & setsid -f sleep {escaped} 2>/dev/null || sleep {escaped} & nohup sleep {nohup} >/dev/null 2>&1 & python3 -c 'import os\ntry:\n  os.setsid(); print(\"setsid: allowed\")\nexcept OSError as e: print(\"setsid:\", e.strerror)'"}})
print(r.stdout)
print("first call done")
io.stdout:flush()
sluice.bash{{command = "sleep 3"}}
"#
    );
    let mut child = common::spawn_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut said = String::new();
    while !said.contains("first call done") {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said.push_str(&line);
    }
    let left: Vec<i32> = [&plain, &escaped, &nohup]
        .iter()
        .flat_map(|arg| survivors_with_arg(arg, Duration::from_millis(500)))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    assert!(said.contains("first call done"), "{said}{rest}");
    assert!(said.contains("setsid: Operation not permitted"), "{said}");
    assert_eq!(
        left,
        Vec::<i32>::new(),
        "processes outlived their call: {said}"
    );
}

#[test]
fn a_command_cannot_signal_the_helper_or_another_command_of_the_run() {
    need_bwrap();
    let ws = workspace();
    // The helper is the sandbox's process named sluice-sandbox; the job's
    // `sleep` is another command's. Each command is a landlock domain of
    // its own with signals scoped to it: both kills are refused, and the
    // command's own child still takes one (the control).
    let script = format!(
        r#"
local a = assert(sluice.bash{{command = "{NAMESPACES}"}})
local job = assert(sluice.bash{{command = "sleep 30", background = true}})
local k = assert(sluice.bash{{command = "for p in /proc/[0-9]*; do grep -qx sluice-sandbox $p/comm 2>/dev/null && kill -9 ${{p#/proc/}}; done; pkill -STOP -x sleep; sleep 5 & kill -TERM $! && echo own child stopped; echo survived"}})
local b = assert(sluice.bash{{command = "{NAMESPACES}"}})
print("a " .. a.stdout)
print("k " .. k.stdout:gsub("\n", " ") .. "|" .. k.stderr:gsub("\n", " "))
print("j " .. job.status)
print("b " .. b.stdout)
job:kill()
"#
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[]).ok();
    let line = |tag: &str| tagged(&run.stdout, tag);
    let k = line("k ");
    assert!(k.contains("own child stopped survived"), "{k}");
    assert!(k.contains("kill: Operation not permitted"), "{k}");
    assert!(k.contains("pkill: killing pid"), "{k}");
    assert_eq!(line("j "), "j running", "{}", run.stdout);
    assert_eq!(line("a ")[2..], line("b ")[2..], "{}", run.stdout);
}

#[test]
fn a_command_handed_a_credential_runs_apart_from_the_runs_other_commands() {
    need_bwrap();
    let ws = workspace();
    let secret = "ghp_SharedSandboxSpy0123456789abcdef";
    // A background job of the run reads every process's environment it
    // can for 4 s, while a plain command and a credentialed one run.
    let spy = r#"
import glob, subprocess, time
own = subprocess.Popen(["sleep", "3"], env={"MARK": "own-child-marker"})
seen = set()
end = time.time() + 4
while time.time() < end:
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            for entry in open(path, "rb").read().split(b"\0"):
                if entry.startswith((b"MARK=", b"T=")):
                    seen.add(entry.decode(errors="replace"))
        except OSError:
            pass
    time.sleep(0.02)
open("spied.txt", "w").write("\n".join(sorted(seen)))
"#;
    let script = format!(
        r#"
local spy = assert(sluice.bash{{script = {}, interpreter = "python3", background = true}})
sluice.sleep(300)
assert(sluice.bash{{command = "sleep 1", env = {{MARK = "visible-marker"}}}})
assert(sluice.bash{{command = "sleep 1", env = {{T = sluice.credential("gh")}}}})
spy:wait(10000)
"#,
        common::lua_str(spy)
    );
    common::run_lua_env(
        ws.path(),
        &script,
        &["--sandbox", "bwrap", "--approve", "cred:use:gh@command"],
        &[],
        &[("SLUICE_CREDENTIAL_GH", secret)],
    )
    .ok();
    let spied = std::fs::read_to_string(ws.file("spied.txt")).unwrap();
    // The control: the spy reads its own child's environment.
    assert!(
        spied.contains("MARK=own-child-marker"),
        "the spy saw nothing: {spied:?}"
    );
    // Neither command's: each is a landlock domain of its own, and the
    // credentialed one runs in a sandbox of its own besides.
    assert!(!spied.contains("visible-marker"), "{spied:?}");
    assert!(
        !spied.contains(secret),
        "the credential was read: {spied:?}"
    );
}

#[test]
fn a_command_moves_and_links_files_between_folders() {
    need_bwrap();
    let ws = workspace();
    // Each command's landlock domain grants moving a file to another
    // folder everywhere: landlock refuses it (EXDEV) unless told, and
    // compilers write to a temporary folder and move the result.
    let program = "import os\nos.makedirs('a'); os.makedirs('b')\nopen('a/f', 'w').write('x')\nos.rename('a/f', 'b/f'); os.link('b/f', 'a/g')\nprint(sorted(os.listdir('a')), sorted(os.listdir('b')))\n";
    let script = format!(
        "local r, e = sluice.bash{{script = {}, interpreter = 'python3'}}\nprint(r and r.stdout or e.message)",
        common::lua_str(program)
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", "bwrap"], &[]).ok();
    assert_eq!(run.stdout, "['g'] ['f']\n\n", "{}", run.stderr);
}

/// A Python HTTP server on 127.0.0.1:`port` answering every GET with
/// `says`, and appending each request's `authorization` header (or `-`)
/// to `heard.txt` in its working folder.
fn server_saying(port: u16, says: &str) -> String {
    format!(
        r#"
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("heard.txt", "a") as f:
            f.write((self.headers.get("authorization") or "-") + "\n")
        body = b"{says}"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer(("127.0.0.1", {port}), H).serve_forever()
"#
    )
}

/// Lua that starts `server` as a background job and waits until a command
/// of the run reaches its port.
fn start_job(server: &str, port: u16) -> String {
    format!(
        r#"
local job = assert(sluice.bash{{script = {server}, interpreter = "python3", background = true}})
local up = assert(sluice.bash{{command = "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=1)' 2>/dev/null && exit 0; sleep 0.05; done; exit 1"}})
assert(up.exitCode == 0, "the job's server never came up")
"#,
        server = common::lua_str(server)
    )
}

/// What a run prints of a `fetch` of 127.0.0.1:`port` made after a job of
/// it started serving "from inside" there: `fetch ` and the Lua expression
/// `shown` of the page, or the error's code; with the origin's
/// `net:private` grant when `granted`.
fn fetch_beside_job(ws: &std::path::Path, port: u16, shown: &str, granted: bool) -> String {
    let origin = format!("http://127.0.0.1:{port}");
    let script = format!(
        r#"{start}
local page, err = sluice.fetch{{url = "{origin}/"}}
print("fetch " .. (page and ({shown}) or err.code))
job:kill()
"#,
        start = start_job(&server_saying(port, "from inside"), port)
    );
    let approve = format!("net:private:{origin}");
    let mut flags = vec!["--sandbox", "bwrap", "--no-audit"];
    if granted {
        flags.extend(["--approve", approve.as_str()]);
    }
    let run = run_lua_with(ws, &script, &flags, &[]).ok();
    tagged(&run.stdout, "fetch ")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn fetch_reaches_a_server_a_command_started_with_the_origins_grant_alone() {
    need_bwrap();
    let ws = workspace();
    let port = free_port();
    // The default policy closes the network: the server listens in the
    // run's namespace, not on the host's loopback, and fetch reaches it
    // there. The grant is still asked for: without it, nothing is sent.
    let shown = r#"page.status .. " " .. page.body"#;
    assert_eq!(
        fetch_beside_job(ws.path(), port, shown, true),
        "fetch 200 from inside"
    );
    assert_eq!(
        fetch_beside_job(ws.path(), port, shown, false),
        "fetch permission_required"
    );
    let heard = std::fs::read_to_string(ws.file("heard.txt")).unwrap();
    assert_eq!(heard, "-\n", "the refused fetch reached the server");
}

#[test]
fn a_command_cannot_shadow_a_host_service_that_is_up() {
    need_bwrap();
    let ws = workspace();
    // The host serves on a port; a job of the run serves on the same port
    // in the run's namespace. fetch goes to the host's service.
    let host_dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let host_py = host_dir.path().join("host.py");
    std::fs::write(&host_py, server_saying(port, "from the host")).unwrap();
    let mut host = std::process::Command::new("python3")
        .arg(&host_py)
        .current_dir(host_dir.path())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the host server never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let fetched = fetch_beside_job(ws.path(), port, "page.body", true);
    let _ = host.kill();
    let _ = host.wait();
    assert_eq!(fetched, "fetch from the host");
}

#[test]
fn a_fetch_carrying_a_credential_never_reaches_a_server_a_command_started() {
    need_bwrap();
    let ws = workspace();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    // A job listens in the run's namespace, nothing on the host: the
    // credential-bearing request is not sent there (the server would see
    // the secret), while the same request without it is (the control).
    let script = format!(
        r#"{start}
local plain = sluice.fetch{{url = "{origin}/"}}
print("plain " .. plain.body)
local page, err = sluice.fetch{{url = "{origin}/", headers = {{authorization = sluice.credential("tok")}}}}
print("secret " .. (page and page.body or err.code))
job:kill()
"#,
        start = start_job(&server_saying(port, "from inside"), port)
    );
    let (private, cred) = (
        format!("net:private:{origin}"),
        format!("cred:use:tok@{origin}"),
    );
    let run = common::run_lua_env(
        ws.path(),
        &script,
        &[
            "--sandbox",
            "bwrap",
            "--no-audit",
            "--approve",
            &private,
            "--approve",
            &cred,
        ],
        &[],
        &[("SLUICE_CREDENTIAL_TOK", "s3cret-value")],
    )
    .ok();
    assert_eq!(tagged(&run.stdout, "plain "), "plain from inside");
    assert_eq!(tagged(&run.stdout, "secret "), "secret request_failed");
    let heard = std::fs::read_to_string(ws.file("heard.txt")).unwrap();
    assert!(
        !heard.contains("s3cret"),
        "the secret reached the job: {heard}"
    );
    assert_eq!(heard, "-\n");
}
