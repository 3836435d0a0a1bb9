//! Asks answered by the person at the terminal. `sluice run` is started on a
//! pseudo-terminal that is its controlling terminal, so the prompt goes to
//! `/dev/tty` as it would for a person: it shows the flow, the capability,
//! the input and why it asks, then takes `y` (once), `a` (for the rest of the
//! run), `n` (no); anything else asks again.

mod common;

use common::*;
use nix::libc;
use nix::pty::openpty;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PROMPT: &str = "Allow? [y] once, [a] for the rest of the run, [n] no: ";
const LIMIT: Duration = Duration::from_secs(15);

/// A `sluice run` on a pseudo-terminal.
struct Tty {
    child: Option<Child>,
    master: File,
    rx: mpsc::Receiver<Vec<u8>>,
    /// Everything the terminal showed, carriage returns dropped.
    shown: String,
    /// How much of `shown` the test has consumed.
    pos: usize,
}

impl Tty {
    fn start(ws: &Path, script: &str, flags: &[&str]) -> Tty {
        let pty = openpty(None, None).expect("open a pseudo-terminal");
        let path = script_file(ws, script);
        let child = {
            let mut cmd = Command::new(sluice_bin());
            cmd.arg("run")
                .arg(&path)
                .arg("--workspace")
                .arg(ws)
                .args(flags)
                .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
                .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
                .stderr(Stdio::from(pty.slave.try_clone().unwrap()));
            // A new session whose controlling terminal is the pty, so the
            // child's /dev/tty is it.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd.spawn().expect("spawn sluice on the pty")
            // `cmd` and its copies of the slave close here, so the master
            // reads end once the child is gone.
        };
        drop(pty.slave);
        let master = File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Tty {
            child: Some(child),
            master,
            rx,
            shown: String::new(),
            pos: 0,
        }
    }

    /// Takes in what the terminal shows until `until` returns true or the
    /// limit passes; false when the output ended or the limit passed.
    fn pump(&mut self, until: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + LIMIT;
        while !until(&self.shown[self.pos..]) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self
                    .shown
                    .push_str(&String::from_utf8_lossy(&bytes).replace('\r', "")),
                Err(_) => return false,
            }
        }
        true
    }

    /// Waits for `needle`; returns what was shown up to and including it.
    fn expect(&mut self, needle: &str) -> String {
        if !self.pump(|s| s.contains(needle)) {
            panic!(
                "the terminal never showed {needle:?}; it showed:\n{}",
                &self.shown[self.pos..]
            );
        }
        let at = self.shown[self.pos..].find(needle).unwrap() + self.pos + needle.len();
        let got = self.shown[self.pos..at].to_string();
        self.pos = at;
        got
    }

    /// Types `line` and Enter.
    fn answer(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        self.master.flush().unwrap();
        // The terminal echoes what was typed.
        self.expect(&format!("{line}\n"));
    }

    /// Waits for the run to end; returns its status and what it showed
    /// after the last `expect`.
    fn finish(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the run did not end; it showed:\n{}", self.shown);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Whatever is still in flight, until the master reports the end.
        self.pump(|_| false);
        let rest = self.shown[self.pos..].to_string();
        (status, rest)
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Writes a policy that allows reads in the workspace and asks for writes.
fn asking_policy(ws: &Workspace) -> String {
    let path = ws.path().parent().unwrap().join("asks.lua");
    fs::write(
        &path,
        "local p = require(\"sluice.policy\")\nreturn { rules = {\n  p.allow \"fs:read:${workspace}/**\",\n  p.ask \"fs:write:${workspace}/**\",\n} }\n",
    )
    .unwrap();
    path.display().to_string()
}

/// What the terminal shows for an ask of the policy above.
fn ask_text(pol: &str, flow: &str, cap: &str, input: &str) -> String {
    format!(
        "\nsluice: {flow} asks for {cap}\n  input: {input}\n  why: ask \"fs:write:${{workspace}}/**\" (rules[2] of {pol}): the policy asks a person first\n{PROMPT}"
    )
}

const WRITES: &str = r#"
local function show(label, r, e)
  if r then print(label .. " ok") else print(label .. " " .. e.code .. " by " .. e.by) end
end
show("FIRST", sluice.write{path = "a.txt", content = "one\n"})
show("SECOND", sluice.write{path = "a.txt", content = "two\n"})
"#;

#[test]
fn y_allows_once_and_the_next_identical_call_asks_again() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let mut tty = Tty::start(ws.path(), WRITES, &["--policy", &pol]);
    let cap = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        tty.expect(PROMPT),
        ask_text(&pol, "write", &cap, r#"{"content":"one\n","path":"a.txt"}"#)
    );
    tty.answer("y");
    assert_eq!(tty.expect("FIRST ok\n"), "FIRST ok\n");
    assert_eq!(
        tty.expect(PROMPT),
        ask_text(&pol, "write", &cap, r#"{"content":"two\n","path":"a.txt"}"#)
    );
    tty.answer("n");
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(
        rest,
        "SECOND permission_denied by the person at the terminal\n"
    );
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "one\n");
}

#[test]
fn a_allows_the_same_capability_for_the_rest_of_the_run() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let script = format!(
        "{WRITES}show(\"THIRD\", sluice.edit{{path = \"a.txt\", oldString = \"two\", newString = \"three\"}})\nshow(\"OTHER\", sluice.write{{path = \"b.txt\", content = \"b\"}})\n"
    );
    let mut tty = Tty::start(ws.path(), &script, &["--policy", &pol]);
    let a = format!("fs:write:{}", ws.file("a.txt").display());
    let b = format!("fs:write:{}", ws.file("b.txt").display());
    assert_eq!(
        tty.expect(PROMPT),
        ask_text(&pol, "write", &a, r#"{"content":"one\n","path":"a.txt"}"#)
    );
    tty.answer("a");
    // No prompt for the same capability again, from write or edit.
    assert_eq!(tty.expect("THIRD ok\n"), "FIRST ok\nSECOND ok\nTHIRD ok\n");
    // Another file is another capability: it asks.
    assert_eq!(
        tty.expect(PROMPT),
        ask_text(&pol, "write", &b, r#"{"content":"b","path":"b.txt"}"#)
    );
    tty.answer("n");
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(
        rest,
        "OTHER permission_denied by the person at the terminal\n"
    );
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "three\n");
    assert!(!ws.file("b.txt").exists());
}

#[test]
fn n_or_a_bare_enter_is_permission_denied_by_the_person_at_the_terminal() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let script = r#"
for i, name in ipairs{"a.txt", "b.txt"} do
  local r, e = sluice.write{path = name, content = "x"}
  print(("%d %s|%s|%s|%s"):format(i, e.code, e.by, e.capability, e.message))
end
"#;
    let mut tty = Tty::start(ws.path(), script, &["--policy", &pol]);
    tty.expect(PROMPT);
    tty.answer("n");
    let a = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        tty.expect("terminal.\n"),
        format!(
            "1 permission_denied|the person at the terminal|{a}|{a} was refused at the terminal.\n"
        )
    );
    tty.expect(PROMPT);
    tty.answer("");
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    let b = format!("fs:write:{}", ws.file("b.txt").display());
    assert_eq!(
        rest,
        format!(
            "2 permission_denied|the person at the terminal|{b}|{b} was refused at the terminal.\n"
        )
    );
    assert!(!ws.file("a.txt").exists() && !ws.file("b.txt").exists());
}

#[test]
fn a_garbage_answer_asks_again() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let mut tty = Tty::start(
        ws.path(),
        r#"local r, e = sluice.write{path = "a.txt", content = "x"} print(r and "WROTE" or e.code)"#,
        &["--policy", &pol],
    );
    tty.expect(PROMPT);
    tty.answer("maybe");
    assert_eq!(tty.expect(PROMPT), format!("Answer y, a or n.\n{PROMPT}"));
    tty.answer("sure");
    assert_eq!(tty.expect(PROMPT), format!("Answer y, a or n.\n{PROMPT}"));
    tty.answer("y");
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(rest, "WROTE\n");
    assert_eq!(fs::read_to_string(ws.file("a.txt")).unwrap(), "x");
}

#[test]
fn a_pre_approved_ask_does_not_prompt_on_a_terminal() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let tty = Tty::start(
        ws.path(),
        r#"local r, e = sluice.write{path = "a.txt", content = "x"} print(r and "WROTE" or e.code)"#,
        &["--policy", &pol, "--approve", "fs:write:${workspace}/*.txt"],
    );
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(rest, "WROTE\n");
}

#[test]
fn the_prompt_cuts_a_long_input() {
    let ws = workspace();
    let pol = asking_policy(&ws);
    let content = "z".repeat(1000);
    let mut tty = Tty::start(
        ws.path(),
        &format!(
            r#"local r, e = sluice.write{{path = "a.txt", content = {}}} print(r and "WROTE" or e.code)"#,
            lua_str(&content)
        ),
        &["--policy", &pol],
    );
    let full = format!(r#"{{"content":"{content}","path":"a.txt"}}"#);
    let cut: String = full.chars().take(300).collect();
    let cap = format!("fs:write:{}", ws.file("a.txt").display());
    assert_eq!(
        tty.expect(PROMPT),
        ask_text(
            &pol,
            "write",
            &cap,
            &format!("{cut}… ({} bytes in all)", full.len())
        )
    );
    tty.answer("n");
    let (status, rest) = tty.finish();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(rest, "permission_denied\n");
}
