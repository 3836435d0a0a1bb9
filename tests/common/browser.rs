//! A real headless Chromium (Debian's `chromium`) for the viewer's tests and
//! bench, driven through the DevTools protocol over
//! `--remote-debugging-pipe`: Chromium reads NUL-terminated JSON commands on
//! its fd 3 and writes NUL-terminated JSON replies and events on its fd 4,
//! so no websocket and no port are needed.
//!
//! [`Browser::start`] launches it (its own process group, a temp profile, a
//! fixed window), [`Browser::page`] opens a tab attached as a flattened
//! session, and a [`Page`] navigates ([`Page::goto`]), evaluates script
//! ([`Page::eval`], [`Page::wait_for`]), acts as a user does
//! ([`Page::click`], [`Page::type_text`], [`Page::select`],
//! [`Page::scroll`]), takes screenshots ([`Page::screenshot`], kept under
//! `target/viewer-screenshots/`) and goes offline ([`Page::offline`]).
//! Every page keeps a log of what happened in it: each request it made,
//! console errors, uncaught exceptions and Content-Security-Policy
//! violations ([`Page::log`], [`Page::assert_clean`]).
//!
//! Dropping the [`Browser`] kills Chromium's whole process group.
//!
//! Use it with `#[path = "common/browser.rs"] mod browser;` (from a bench,
//! `#[path = "../tests/common/browser.rs"]`).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where Debian installs Chromium's launcher.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The window (and every page's viewport), in CSS pixels.
pub const WIDTH: u32 = 1280;
/// See [`WIDTH`].
pub const HEIGHT: u32 = 900;

/// How long one DevTools command may take before it is an error: long,
/// since two cores are shared by builds and other tests.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How often [`Page::wait_for`] checks its condition.
const POLL: Duration = Duration::from_millis(25);

/// What happened in one page that a test may assert did not.
#[derive(Debug, Clone, Default)]
pub struct PageLog {
    /// The URL of every request the page made (`Network.requestWillBeSent`),
    /// in order: its document, scripts, styles, fetches, images.
    pub requests: Vec<String>,
    /// `console.error` calls and error-level browser messages (a failed
    /// load, a refused request), each as its text.
    pub console_errors: Vec<String>,
    /// Uncaught exceptions and unhandled rejections
    /// (`Runtime.exceptionThrown`).
    pub exceptions: Vec<String>,
    /// Messages saying the Content Security Policy refused something.
    pub csp_violations: Vec<String>,
    /// How many `load` events the page's main frame has fired.
    loads: u64,
}

impl PageLog {
    /// Every console error, exception and CSP violation, one string each.
    pub fn problems(&self) -> Vec<String> {
        let tagged = |tag: &str, v: &[String]| -> Vec<String> {
            v.iter().map(|m| format!("{tag}: {m}")).collect()
        };
        let mut all = tagged("console error", &self.console_errors);
        all.extend(tagged("exception", &self.exceptions));
        all.extend(tagged("CSP violation", &self.csp_violations));
        all
    }
}

/// What the reader thread shares with the callers.
#[derive(Default)]
struct State {
    /// Replies not yet taken, by command id.
    replies: HashMap<u64, Value>,
    /// Each attached session's log.
    logs: HashMap<String, PageLog>,
    /// Set once Chromium's end of the pipe closed: no reply will come.
    closed: bool,
}

/// The pipe to Chromium and what came back on it.
struct Conn {
    commands: Mutex<File>,
    next_id: AtomicU64,
    state: Mutex<State>,
    arrived: Condvar,
}

impl Conn {
    /// Sends `method` with `params` (to `session`, or to the browser) and
    /// waits for its reply: the `result`, or an error with the message.
    fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands
            .lock()
            .unwrap()
            .write_all(&bytes)
            .map_err(|e| format!("{method}: writing to Chromium's pipe: {e}"))?;
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let mut state = self.state.lock().unwrap();
        loop {
            if let Some(reply) = state.replies.remove(&id) {
                return match reply.get("error") {
                    Some(e) => Err(format!("{method}: {}", e["message"])),
                    None => Ok(reply["result"].clone()),
                };
            }
            if state.closed {
                return Err(format!("{method}: Chromium closed its pipe (it exited)"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("{method}: no reply within {COMMAND_TIMEOUT:?}"));
            }
            state = self.arrived.wait_timeout(state, left).unwrap().0;
        }
    }

    /// A copy of `session`'s log.
    fn log(&self, session: &str) -> PageLog {
        let state = self.state.lock().unwrap();
        state.logs.get(session).cloned().unwrap_or_default()
    }
}

/// Reads NUL-terminated messages from Chromium until its end closes.
fn read_messages(conn: Arc<Conn>, mut replies: File) {
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match replies.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|&b| b == 0) {
            let msg: Vec<u8> = pending.drain(..=end).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) {
                dispatch(&conn, v);
            }
        }
    }
    conn.state.lock().unwrap().closed = true;
    conn.arrived.notify_all();
}

/// Files one message: a reply by its id, an event in its session's log.
fn dispatch(conn: &Conn, msg: Value) {
    let mut state = conn.state.lock().unwrap();
    if let Some(id) = msg.get("id").and_then(Value::as_u64) {
        state.replies.insert(id, msg);
        drop(state);
        conn.arrived.notify_all();
        return;
    }
    let Some(session) = msg.get("sessionId").and_then(Value::as_str) else {
        return;
    };
    let log = state.logs.entry(session.to_string()).or_default();
    note_event(log, msg["method"].as_str().unwrap_or(""), &msg["params"]);
    drop(state);
    conn.arrived.notify_all();
}

/// Records what event `method` says in `log`, if it is one a test asks about.
fn note_event(log: &mut PageLog, method: &str, params: &Value) {
    match method {
        "Network.requestWillBeSent" => {
            log.requests
                .push(params["request"]["url"].as_str().unwrap_or("").to_string());
        }
        "Runtime.exceptionThrown" => {
            let d = &params["exceptionDetails"];
            let text = d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("an exception");
            log.exceptions.push(text.to_string());
        }
        "Runtime.consoleAPICalled"
            if matches!(params["type"].as_str(), Some("error" | "assert")) =>
        {
            let text: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| match &a["value"] {
                    Value::String(s) => s.clone(),
                    Value::Null => a["description"].as_str().unwrap_or("").to_string(),
                    v => v.to_string(),
                })
                .collect();
            file_message(log, text.join(" "));
        }
        "Log.entryAdded" => {
            let entry = &params["entry"];
            let text = entry["text"].as_str().unwrap_or("").to_string();
            if text.contains("Content Security Policy") || entry["level"] == "error" {
                let url = entry["url"].as_str().unwrap_or("");
                file_message(log, format!("{text} ({url})"));
            }
        }
        "Page.loadEventFired" => log.loads += 1,
        _ => {}
    }
}

/// An error-level message: a CSP violation when it says so, else a console
/// error.
fn file_message(log: &mut PageLog, text: String) {
    if text.contains("Content Security Policy") {
        log.csp_violations.push(text);
    } else {
        log.console_errors.push(text);
    }
}

/// A headless Chromium of the test's own, killed (its whole process group)
/// when dropped.
pub struct Browser {
    child: Child,
    conn: Arc<Conn>,
    /// Its profile (`--user-data-dir`), removed after it is killed.
    profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium; panics saying how to install it when it is missing.
    pub fn start() -> Browser {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: install it with: apt-get install chromium (scripts/test installs it)"
        );
        let profile = tempfile::Builder::new()
            .prefix("sluice-chromium-")
            .tempdir()
            .expect("a temp folder for Chromium's profile");
        let (cmd_read, cmd_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (reply_read, reply_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut cmd = Command::new(CHROMIUM);
        cmd.args(flags(profile.path()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(profile.path().join("stderr.log")).unwrap());
        let (r, w) = (cmd_read.as_raw_fd(), reply_write.as_raw_fd());
        // SAFETY: only async-signal-safe calls (fcntl, dup2, setpgid) run
        // between fork and exec.
        unsafe { cmd.pre_exec(move || pipe_fds_and_group(r, w)) };
        let child = cmd.spawn().expect("spawn chromium");
        drop((cmd_read, reply_write));
        let conn = Arc::new(Conn {
            commands: Mutex::new(File::from(cmd_write)),
            next_id: AtomicU64::new(1),
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
        });
        let reader = Arc::clone(&conn);
        let replies = File::from(reply_read);
        std::thread::spawn(move || read_messages(reader, replies));
        let browser = Browser {
            child,
            conn,
            profile,
        };
        if let Err(e) = browser.conn.call(None, "Browser.getVersion", json!({})) {
            panic!("Chromium did not answer: {e}\n{}", browser.stderr());
        }
        browser
    }

    /// Chromium's process id (the leader of its process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What Chromium wrote on its stderr so far, for a failure's message.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.profile.path().join("stderr.log")).unwrap_or_default()
    }

    /// A new tab on `about:blank`, attached as a flattened session, with
    /// its page, script, network and log events on and the fixed viewport.
    pub fn page(&self) -> Page {
        let target = self
            .conn
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .expect("open a tab");
        let target = target["targetId"].as_str().unwrap().to_string();
        let attached = self
            .conn
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .expect("attach to the tab");
        let page = Page {
            conn: Arc::clone(&self.conn),
            session: attached["sessionId"].as_str().unwrap().to_string(),
        };
        for domain in ["Page", "Runtime", "Network", "Log"] {
            page.cdp(&format!("{domain}.enable"), json!({})).unwrap();
        }
        page.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": false}),
        )
        .unwrap();
        page
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The group holds the browser, its zygotes, renderers and
        // utilities: none may outlive the test.
        let pgid = self.child.id() as i32;
        let group = nix::unistd::Pid::from_raw(-pgid);
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        // A kill lands when each process next runs: on a loaded machine a
        // renderer can outlive the wait above for a moment.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !group_members(pgid).is_empty() && std::time::Instant::now() < until {
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The live (not zombie) processes of process group `group`.
pub fn group_members(group: i32) -> Vec<i32> {
    let alive = |pid: i32| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next()
                != Some("Z")
        }
        Err(_) => false,
    };
    let group = nix::unistd::Pid::from_raw(group);
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*pid))).ok() == Some(group)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Chromium's command line, the profile in `profile`.
fn flags(profile: &Path) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--headless=new",
        "--remote-debugging-pipe",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        // The tests reach no host but the viewer: none of Chromium's own
        // traffic (updates, safe browsing, sync, metrics, translation).
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-breakpad",
        "--no-pings",
        "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
        // A scroll lands at once, so a test reads the position it asked for.
        "--disable-smooth-scrolling",
        "--hide-scrollbars",
        "--mute-audio",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.push(format!("--window-size={WIDTH},{HEIGHT}"));
    flags.push(format!("--user-data-dir={}", profile.display()));
    // Chromium's sandbox refuses to start as root (its setuid and
    // namespace sandboxes need an unprivileged user to drop to): only then
    // it runs without; as any other user the renderers stay sandboxed.
    if nix::unistd::geteuid().is_root() {
        flags.push("--no-sandbox".into());
    }
    flags
}

/// In the child before exec: the command pipe's read end as fd 3, the
/// reply pipe's write end as fd 4, and a process group of its own.
fn pipe_fds_and_group(read: i32, write: i32) -> std::io::Result<()> {
    use nix::libc;
    // SAFETY: plain fd and process calls on fds this child owns.
    unsafe {
        // First above 10, so moving one to 3 or 4 cannot close the other.
        let r = libc::fcntl(read, libc::F_DUPFD_CLOEXEC, 10);
        let w = libc::fcntl(write, libc::F_DUPFD_CLOEXEC, 10);
        if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpgid(0, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One tab of a [`Browser`], attached as a session of its own.
pub struct Page {
    conn: Arc<Conn>,
    session: String,
}

impl Page {
    /// Sends DevTools command `method` to this page: its result.
    pub fn cdp(&self, method: &str, params: Value) -> Result<Value, String> {
        self.conn.call(Some(&self.session), method, params)
    }

    /// Runs `js` in every document this page loads from now on, before the
    /// document's own scripts (and outside its Content Security Policy):
    /// for a probe such as a timer a bench reads later.
    pub fn on_new_document(&self, js: &str) -> Result<(), String> {
        self.cdp(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": js}),
        )
        .map(|_| ())
    }

    /// Navigates to `url` and, for a new document, waits for its `load`
    /// event (a change of the fragment alone loads nothing, so it returns
    /// at once).
    pub fn goto(&self, url: &str) -> Result<(), String> {
        let loads = self.log().loads;
        let nav = self.cdp("Page.navigate", json!({"url": url}))?;
        if let Some(e) = nav["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(format!("navigating to {url}: {e}"));
        }
        if nav.get("loaderId").is_none() {
            return Ok(());
        }
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while self.log().loads == loads {
            if Instant::now() > deadline {
                return Err(format!("{url} did not load within {COMMAND_TIMEOUT:?}"));
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    /// The value of `js` (an expression; a promise is awaited), as JSON:
    /// `null` for `undefined`. A thrown exception is an error holding its
    /// text.
    pub fn eval(&self, js: &str) -> Result<Value, String> {
        let r = self.cdp(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(d) = r.get("exceptionDetails") {
            let text = d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("an exception");
            return Err(format!("{js}: {text}"));
        }
        Ok(r["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// Waits until `condition` (a JS expression) is truthy; how long that
    /// took. Past `timeout`, an error naming the condition, the last error
    /// evaluating it (a page still loading) and the start of the page's
    /// text.
    pub fn wait_for(&self, condition: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last_error = String::new();
        loop {
            match self.eval(&format!("Boolean({condition})")) {
                Ok(Value::Bool(true)) => return Ok(start.elapsed()),
                Ok(_) => {}
                Err(e) => last_error = e,
            }
            if start.elapsed() > timeout {
                let text = self
                    .eval("document.body ? document.body.innerText.slice(0, 2000) : ''")
                    .unwrap_or_default();
                return Err(format!(
                    "not true within {timeout:?}: {condition}\nlast error: {last_error}\npage text: {text}\nlog: {:?}",
                    self.log().problems()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The viewport centre of the first element matching `selector`, after
    /// scrolling it into view.
    fn centre(&self, selector: &str) -> Result<(f64, f64), String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; \
             e.scrollIntoView({{block: 'center', inline: 'center'}}); \
             const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2, r.width * r.height]; }})()",
            sel = json!(selector)
        );
        let v = self.eval(&js)?;
        let at = v
            .as_array()
            .ok_or_else(|| format!("no element matches {selector}"))?;
        if at[2].as_f64() == Some(0.0) {
            return Err(format!("{selector} has no size: it cannot be clicked"));
        }
        Ok((at[0].as_f64().unwrap(), at[1].as_f64().unwrap()))
    }

    /// Clicks the first element matching `selector` with the mouse, at its
    /// centre, as a person does (so what covers it gets the click).
    pub fn click(&self, selector: &str) -> Result<(), String> {
        let (x, y) = self.centre(selector)?;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.cdp(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )?;
        }
        Ok(())
    }

    /// Focuses the element matching `selector` and types `text` into it
    /// (as an input method commits text: `input` events fire).
    pub fn type_text(&self, selector: &str, text: &str) -> Result<(), String> {
        let focused = self.eval(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); \
             return document.activeElement === e; }})()",
            json!(selector)
        ))?;
        if focused != Value::Bool(true) {
            return Err(format!("{selector} is missing or cannot take the focus"));
        }
        self.cdp("Input.insertText", json!({"text": text}))?;
        Ok(())
    }

    /// Picks the option of value `value` in the `<select>` matching
    /// `selector` and fires `input` and `change`, as choosing it does; an
    /// error when there is no such option.
    pub fn select(&self, selector: &str, value: &str) -> Result<(), String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return 'missing'; \
             if (![...e.options].some(o => o.value === {val})) \
               return 'options: ' + [...e.options].map(o => o.value).join(', '); \
             e.value = {val}; \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); \
             e.dispatchEvent(new Event('change', {{bubbles: true}})); return 'ok'; }})()",
            sel = json!(selector),
            val = json!(value)
        );
        match self.eval(&js)? {
            Value::String(s) if s == "ok" => Ok(()),
            other => Err(format!("{selector} has no option {value:?}: {other}")),
        }
    }

    /// Turns the mouse wheel by `px` pixels (down when positive) over the
    /// element matching `selector`; once the scroll has landed and two
    /// frames have drawn, the element's `scrollTop`.
    pub fn scroll(&self, selector: &str, px: f64) -> Result<f64, String> {
        let top = format!("document.querySelector({}).scrollTop", json!(selector));
        let before = self.eval(&top)?.as_f64().unwrap_or(0.0);
        let rect = self.eval(&format!(
            "(() => {{ const r = document.querySelector({}).getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            json!(selector)
        ))?;
        let (x, y) = (rect[0].as_f64().unwrap(), rect[1].as_f64().unwrap());
        self.cdp(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": px}),
        )?;
        // The wheel is handled off the main thread: wait for it to land
        // (or 2 s, when the element was already at that end).
        let _ = self.wait_for(&format!("{top} !== {before}"), Duration::from_secs(2));
        self.frames(2)?;
        Ok(self.eval(&top)?.as_f64().unwrap_or(0.0))
    }

    /// Waits for `n` animation frames, so what a handler changed is drawn.
    pub fn frames(&self, n: u32) -> Result<(), String> {
        let js = format!(
            "new Promise(done => {{ let left = {n}; const tick = () => \
             (--left <= 0 ? done(true) : requestAnimationFrame(tick)); requestAnimationFrame(tick); }})"
        );
        self.eval(&js).map(|_| ())
    }

    /// A PNG of the viewport saved as `target/viewer-screenshots/NAME.png`
    /// for people to look at; its path.
    pub fn screenshot(&self, name: &str) -> Result<PathBuf, String> {
        let shot = self.cdp("Page.captureScreenshot", json!({"format": "png"}))?;
        let png = base64_decode(shot["data"].as_str().unwrap_or(""))?;
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// Cuts the page off the network (or puts it back): every request it
    /// makes then fails, and is still logged.
    pub fn offline(&self, offline: bool) -> Result<(), String> {
        self.cdp(
            "Network.emulateNetworkConditions",
            json!({"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}),
        )
        .map(|_| ())
    }

    /// What happened in this page so far.
    pub fn log(&self) -> PageLog {
        self.conn.log(&self.session)
    }

    /// Panics, listing them, if the page had a console error, an uncaught
    /// exception or a CSP violation.
    pub fn assert_clean(&self, context: &str) {
        let problems = self.log().problems();
        assert!(problems.is_empty(), "{context}: {problems:#?}");
    }

    /// The text of every element matching `selector`, in document order.
    pub fn texts(&self, selector: &str) -> Result<Vec<String>, String> {
        let v = self.eval(&format!(
            "[...document.querySelectorAll({})].map(e => e.textContent)",
            json!(selector)
        ))?;
        serde_json::from_value(v).map_err(|e| format!("{selector}: {e}"))
    }

    /// How many elements match `selector`.
    pub fn count(&self, selector: &str) -> Result<u64, String> {
        let v = self.eval(&format!(
            "document.querySelectorAll({}).length",
            json!(selector)
        ))?;
        Ok(v.as_u64().unwrap_or(0))
    }
}

/// Where [`Page::screenshot`] keeps its PNGs: `target/viewer-screenshots`.
pub fn screenshots_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/viewer-screenshots")
}

/// Standard base64 (with padding, as DevTools sends a screenshot) decoded.
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("not base64: byte {c}")),
        } as u32)
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let take = chunk.len().saturating_sub(1);
        out.extend_from_slice(&n.to_be_bytes()[1..1 + take]);
    }
    Ok(out)
}
