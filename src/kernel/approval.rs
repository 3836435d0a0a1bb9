//! Answering an ask: a pre-approval (`--approve PATTERN`), an earlier "yes
//! for the rest of the run", or the person at the terminal. With nobody to
//! ask, the call fails `permission_required`, naming the capability and the
//! flag that would grant it.

use super::pattern::Pattern;
use super::policy::{Request, Verdict};
use super::{Action, Capability};
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};

/// Characters of the input shown in a prompt.
const SUMMARY_CHARS: usize = 300;

/// Who answers an ask, of the approvers sluice has built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    /// The person at the controlling terminal (`/dev/tty`).
    Terminal,
    /// Nobody: every ask that is not pre-approved is `permission_required`.
    Unattended,
}

impl Prompt {
    /// A terminal when standard input is one, else unattended.
    pub fn detect() -> Prompt {
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Prompt::Terminal
        } else {
            Prompt::Unattended
        }
    }
}

/// What an approver is shown: what a person at the terminal would see.
/// Values a call carries in `headers` and `env` are hidden from
/// [`Ask::input`], as they are from the terminal's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ask {
    /// The capability asked for, e.g. `net:post:api.example.org`.
    pub capability: String,
    /// The flow whose call asks (`bash`, `http-post`, an embedder's own).
    pub flow: String,
    /// The rule or hook that asked (`default.lua: rules[52]`,
    /// `sandboxPermissions`).
    pub by: String,
    /// Why it asked, in its words.
    pub reason: String,
    /// The call's input on one line, at most 300 characters.
    pub input: String,
    /// The call's `justification`, when it gave one (bash's
    /// `sandboxPermissions`).
    pub justification: Option<String>,
    /// Whether the answer counts for this one use only: an ask that must
    /// never ride on an earlier "for the run" (running a command less
    /// confined). [`Answer::ForRun`] to it counts once, and is not
    /// remembered.
    pub once_only: bool,
}

/// An approver's answer to an [`Ask`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Yes, this once.
    Once,
    /// Yes, and to the same ask for the rest of the run (sluice remembers
    /// it, not the approver; an ask that is [`Ask::once_only`] is granted
    /// once).
    ForRun,
    /// No, with the reason to give the script, if any: the call fails
    /// `permission_denied`.
    No(Option<String>),
    /// Nobody could answer (no terminal, a client that cannot ask), and
    /// why: the call fails `permission_required`, naming the `--approve`
    /// flag that would grant it.
    Unanswered(String),
}

/// Answers the asks of a run: the person at the terminal
/// ([`Prompt::Terminal`]), or an embedding program's own way (a chat, a
/// web page, an MCP client) given to `RuntimeBuilder::approver`. Called on
/// the run's thread while the call waits, so it may block until someone
/// answers; `Send + Sync` so one approver can serve many runs and threads.
pub trait Approver: Send + Sync {
    /// Answers one ask.
    fn ask(&self, ask: &Ask) -> Answer;

    /// Who answers, as the record and errors name them (`the person at the
    /// terminal`).
    fn who(&self) -> String {
        "the embedding program's approver".into()
    }
}

/// The person at the controlling terminal, asked on `/dev/tty`.
struct Terminal;

impl Approver for Terminal {
    fn ask(&self, ask: &Ask) -> Answer {
        match ask_terminal(ask) {
            Ok(answer) => answer,
            Err(e) => Answer::Unanswered(e.to_string()),
        }
    }

    fn who(&self) -> String {
        TERMINAL.into()
    }
}

const TERMINAL: &str = "the person at the terminal";

/// Who answers a run's asks, and what they already answered: the
/// pre-approvals (`--approve PATTERN`), the "for the rest of the run"
/// answers, and the approver asked for the rest.
pub struct Approvals {
    preapproved: Vec<Pattern>,
    /// `None`: nobody (unattended).
    approver: Option<std::sync::Arc<dyn Approver>>,
    /// Capabilities approved for the rest of the run.
    remembered: RefCell<HashSet<String>>,
}

impl Approvals {
    /// Pre-approvals answered by one of the built-in approvers.
    pub fn new(preapproved: Vec<Pattern>, prompt: Prompt) -> Approvals {
        let approver = match prompt {
            Prompt::Terminal => Some(std::sync::Arc::new(Terminal) as std::sync::Arc<dyn Approver>),
            Prompt::Unattended => None,
        };
        Approvals::with(preapproved, approver)
    }

    /// Pre-approvals answered by `approver` (`None`: nobody).
    pub fn with(
        preapproved: Vec<Pattern>,
        approver: Option<std::sync::Arc<dyn Approver>>,
    ) -> Approvals {
        Approvals {
            preapproved,
            approver,
            remembered: RefCell::new(HashSet::new()),
        }
    }

    /// Grants `req`'s capability for this one use, whatever was approved
    /// before: only a pre-approval naming it exactly or the approver (whose
    /// "for the run" counts once). For asks that must never ride on an
    /// earlier yes, like running a command less confined.
    pub fn approve_once(&self, req: &Request, verdict: &Verdict) -> FlowResult<String> {
        let cap = req.capability;
        if let Some(p) = self.preapproved.iter().find(|p| p.grants_explicitly(cap)) {
            return Ok(format!("--approve '{}'", p.text()));
        }
        let Some(approver) = &self.approver else {
            return Err(required(cap, verdict));
        };
        let who = approver.who();
        match approver.ask(&shown(req, verdict, true)) {
            Answer::Once | Answer::ForRun => Ok(format!("{who}, once")),
            Answer::No(reason) => Err(refused(cap, &who, reason, false)),
            Answer::Unanswered(why) => Err(unanswered(cap, verdict, &who, why)),
        }
    }

    /// Grants `req`'s capability, saying who granted it (for the audit
    /// record), or fails with why not. A pre-approval grants as an allow
    /// rule would (see [`super::Kernel::covers`]), here with programs
    /// resolved from the current folder by a kernel with no policy; a run
    /// uses [`Approvals::approve_with`] and its own kernel.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn approve(&self, req: &Request, verdict: &Verdict) -> FlowResult<String> {
        let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let kernel = super::Kernel::new(Vec::new(), Vec::new(), super::pattern::Vars::new(here));
        self.approve_with(&kernel, req, verdict)
    }

    /// [`Approvals::approve`], with pre-approvals judged by `kernel` (the
    /// run's, so a program is resolved as its policies allow).
    pub fn approve_with(
        &self,
        kernel: &super::Kernel,
        req: &Request,
        verdict: &Verdict,
    ) -> FlowResult<String> {
        let cap = req.capability;
        if let Some(p) = self.preapproved.iter().find(|p| kernel.covers(p, req)) {
            return Ok(format!("--approve '{}'", p.text()));
        }
        let Some(approver) = &self.approver else {
            return Err(required(cap, verdict));
        };
        let who = approver.who();
        // An answer for the rest of the run covers the same command with the
        // same environment.
        let key = remembered_key(req);
        if self.remembered.borrow().contains(&key) {
            return Ok(format!("{who}, for the rest of the run"));
        }
        match approver.ask(&shown(req, verdict, false)) {
            Answer::Once => Ok(format!("{who}, once")),
            Answer::ForRun => {
                self.remembered.borrow_mut().insert(key);
                Ok(format!("{who}, for the rest of the run"))
            }
            Answer::No(reason) => Err(refused(cap, &who, reason, true)),
            Answer::Unanswered(why) => Err(unanswered(cap, verdict, &who, why)),
        }
    }
}

/// The ask an approver is shown for `req`.
fn shown(req: &Request, verdict: &Verdict, once_only: bool) -> Ask {
    Ask {
        capability: req.capability.to_string(),
        flow: req.flow.to_string(),
        by: verdict.by.clone(),
        reason: verdict.reason.clone(),
        input: summary(req.input),
        justification: req
            .input
            .get("justification")
            .and_then(|j| j.as_str())
            .map(str::to_string),
        once_only,
    }
}

/// `permission_denied`: `who` said no. The terminal's wording is the one
/// scripts and tests have always seen; `reason` is the approver's when it
/// gave one.
fn refused(cap: &Capability, who: &str, reason: Option<String>, say_why: bool) -> FlowError {
    let message = match (who, &reason) {
        (TERMINAL, _) => format!("{cap} was refused at the terminal."),
        (_, Some(why)) => format!("{cap} was refused by {who}: {why}"),
        (_, None) => format!("{cap} was refused by {who}."),
    };
    let e = FlowError::new(ErrorCode::PermissionDenied, message)
        .with("capability", cap.to_string())
        .with("by", who);
    match reason {
        Some(why) => e.with("reason", why),
        None if say_why => e.with("reason", format!("{who} said no")),
        None => e,
    }
}

/// `permission_required`: the approver could not answer.
fn unanswered(cap: &Capability, verdict: &Verdict, who: &str, why: String) -> FlowError {
    let e = required(cap, verdict);
    if who == TERMINAL {
        e.with("terminal", why)
    } else {
        e.with("approver", why)
    }
}

/// What a "for the rest of the run" answer is remembered by: the
/// capability; for a command, the environment its call gives it; for a
/// credential handed to a command (`cred:use:NAME@command`), that command,
/// since the capability names no destination and a yes for `gh api user`
/// is no yes for whatever line comes next.
fn remembered_key(req: &Request) -> String {
    let cap = req.capability;
    if cap.action == Action::CredUse && cap.resource.ends_with("@command") {
        let line: serde_json::Map<String, serde_json::Value> =
            ["command", "script", "interpreter", "args"]
                .into_iter()
                .filter_map(|f| Some((f.to_string(), req.input.get(f)?.clone())))
                .collect();
        return format!("{cap} for {}", serde_json::Value::Object(line));
    }
    match req
        .input
        .get("env")
        .filter(|_| cap.action == Action::ProcSpawn)
    {
        Some(env) => format!("{cap} with env {env}"),
        None => cap.to_string(),
    }
}

fn required(cap: &Capability, v: &Verdict) -> FlowError {
    let flag = approve_flag(cap);
    FlowError::new(
        ErrorCode::PermissionRequired,
        format!(
            "{cap} needs approval ({}: {}) and there is no terminal to ask. \
             Pre-approve it with {flag}, or change the policy.",
            v.by, v.reason
        ),
    )
    .with("capability", cap.to_string())
    .with("by", v.by.clone())
    .with("reason", v.reason.clone())
    .with("approve", flag)
}

/// The `--approve` flag that grants `cap` and nothing wider, as a shell
/// takes it: the resource's glob characters escaped (a resource a script
/// chose may hold `*`), and single-quoted (it may hold `'`).
fn approve_flag(cap: &Capability) -> String {
    let pattern = format!("{}:{}", cap.action.as_str(), literal(&cap.resource));
    format!("--approve '{}'", pattern.replace('\'', r"'\''"))
}

/// `resource` as a pattern that matches it alone. A `[...]` holding a `:`
/// is literal text to a pattern already (an IPv6 origin), so it stays as
/// written; every other glob character is escaped.
fn literal(resource: &str) -> String {
    let mut out = String::with_capacity(resource.len());
    let mut rest = resource;
    while let Some(at) = rest.find('[') {
        out.push_str(&super::pattern::escaped(&rest[..at]));
        let group = rest[at..].find(']').map(|end| &rest[at..=at + end]);
        match group.filter(|g| g.contains(':')) {
            Some(g) => {
                out.push_str(g);
                rest = &rest[at + g.len()..];
            }
            None => {
                out.push_str("\\[");
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(&super::pattern::escaped(rest));
    out
}

fn ask_terminal(ask: &Ask) -> std::io::Result<Answer> {
    let mut tty = OpenOptions::new().read(true).write(true).open("/dev/tty")?;
    let mut reader = BufReader::new(tty.try_clone()?);
    // Paths and inputs come from the workflow: escape control characters so
    // nothing it names can rewrite the prompt on the terminal.
    write!(
        tty,
        "\nsluice: {flow} asks for {cap}\n  input: {input}\n  why: {by}: {reason}\n",
        flow = printable(&ask.flow),
        cap = printable(&ask.capability),
        input = printable(&ask.input),
        by = printable(&ask.by),
        reason = printable(&ask.reason)
    )?;
    loop {
        write!(
            tty,
            "Allow? [y] once, [a] for the rest of the run, [n] no: "
        )?;
        tty.flush()?;
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(Answer::No(None));
        }
        match line.trim() {
            "y" | "Y" | "yes" => return Ok(Answer::Once),
            "a" | "A" | "all" => return Ok(Answer::ForRun),
            "n" | "N" | "no" | "" => return Ok(Answer::No(None)),
            _ => writeln!(tty, "Answer y, a or n.")?,
        }
    }
}

/// `text` with control characters shown as escapes (`\u{1b}`).
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The input on one line, long strings cut.
fn summary(input: &serde_json::Value) -> String {
    let text = redacted(input).to_string();
    if text.chars().count() <= SUMMARY_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SUMMARY_CHARS).collect();
    format!("{cut}… ({} bytes in all)", text.len())
}

/// The input with the values of its `headers` and `env` entries hidden:
/// they are where credentials travel, and a prompt is read over shoulders.
fn redacted(input: &serde_json::Value) -> serde_json::Value {
    let mut v = input.clone();
    for field in ["headers", "env"] {
        if let Some(map) = v.get_mut(field).and_then(|m| m.as_object_mut()) {
            for value in map.values_mut() {
                *value = serde_json::Value::String("[hidden]".into());
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_escapes_glob_characters_but_keeps_an_ipv6_origin_as_written() {
        assert_eq!(literal("http://[::1]:8080"), "http://[::1]:8080");
        assert_eq!(literal("/w/[ab]*.{c}"), r"/w/\[ab\]\*.\{c\}");
        assert_eq!(literal("local/x["), r"local/x\[");
    }

    #[test]
    fn prompts_hide_header_and_env_values() {
        let input = serde_json::json!({
            "url": "https://api.example.org/",
            "headers": {"authorization": "Bearer s3cret"},
            "env": {"TOKEN": "t0k"}
        });
        let shown = summary(&input);
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0k"),
            "{shown}"
        );
        assert!(shown.contains("\"authorization\":\"[hidden]\""), "{shown}");
        assert!(shown.contains("https://api.example.org/"), "{shown}");
    }
}
