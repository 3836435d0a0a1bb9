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

/// Who answers an ask.
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

pub struct Approver {
    preapproved: Vec<Pattern>,
    prompt: Prompt,
    /// Capabilities the person approved for the rest of the run.
    remembered: RefCell<HashSet<String>>,
}

impl Approver {
    pub fn new(preapproved: Vec<Pattern>, prompt: Prompt) -> Approver {
        Approver {
            preapproved,
            prompt,
            remembered: RefCell::new(HashSet::new()),
        }
    }

    /// Grants `req`'s capability for this one use, whatever was approved
    /// before: only a pre-approval naming it exactly or the person at the
    /// terminal (whose "for the run" counts once). For asks that must never
    /// ride on an earlier yes, like running a command less confined.
    pub fn approve_once(&self, req: &Request, verdict: &Verdict) -> FlowResult<String> {
        let cap = req.capability;
        if let Some(p) = self.preapproved.iter().find(|p| p.grants_explicitly(cap)) {
            return Ok(format!("--approve '{}'", p.text()));
        }
        match self.prompt {
            Prompt::Unattended => Err(required(cap, verdict)),
            Prompt::Terminal => match ask_terminal(req, verdict) {
                Ok(Answer::Once | Answer::Always) => Ok("the person at the terminal, once".into()),
                Ok(Answer::No) => Err(FlowError::new(
                    ErrorCode::PermissionDenied,
                    format!("{cap} was refused at the terminal."),
                )
                .with("capability", cap.to_string())
                .with("by", "the person at the terminal")),
                Err(e) => Err(required(cap, verdict).with("terminal", e.to_string())),
            },
        }
    }

    /// Grants `req`'s capability, saying who granted it (for the audit
    /// record), or fails with why not. A pre-approval grants as an allow
    /// rule would (see [`super::Kernel::covers`]), here with programs
    /// resolved from the current folder by a kernel with no policy; a run
    /// uses [`Approver::approve_with`] and its own kernel.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn approve(&self, req: &Request, verdict: &Verdict) -> FlowResult<String> {
        let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let kernel = super::Kernel::new(Vec::new(), Vec::new(), super::pattern::Vars::new(here));
        self.approve_with(&kernel, req, verdict)
    }

    /// [`Approver::approve`], with pre-approvals judged by `kernel` (the
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
        // An answer for the rest of the run covers the same command with the
        // same environment.
        let key = remembered_key(req);
        if self.remembered.borrow().contains(&key) {
            return Ok("the person at the terminal, for the rest of the run".into());
        }
        match self.prompt {
            Prompt::Unattended => Err(required(cap, verdict)),
            Prompt::Terminal => match ask_terminal(req, verdict) {
                Ok(Answer::Once) => Ok("the person at the terminal, once".into()),
                Ok(Answer::Always) => {
                    self.remembered.borrow_mut().insert(key);
                    Ok("the person at the terminal, for the rest of the run".into())
                }
                Ok(Answer::No) => Err(FlowError::new(
                    ErrorCode::PermissionDenied,
                    format!("{cap} was refused at the terminal."),
                )
                .with("capability", cap.to_string())
                .with("by", "the person at the terminal")
                .with("reason", "the person at the terminal said no")),
                Err(e) => Err(required(cap, verdict).with("terminal", e.to_string())),
            },
        }
    }
}

/// What a "for the rest of the run" answer is remembered by: the
/// capability, and for a command the environment its call gives it.
fn remembered_key(req: &Request) -> String {
    match req
        .input
        .get("env")
        .filter(|_| req.capability.action == Action::ProcSpawn)
    {
        Some(env) => format!("{} with env {env}", req.capability),
        None => req.capability.to_string(),
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

enum Answer {
    Once,
    Always,
    No,
}

fn ask_terminal(req: &Request, v: &Verdict) -> std::io::Result<Answer> {
    let mut tty = OpenOptions::new().read(true).write(true).open("/dev/tty")?;
    let mut reader = BufReader::new(tty.try_clone()?);
    // Paths and inputs come from the workflow: escape control characters so
    // nothing it names can rewrite the prompt on the terminal.
    write!(
        tty,
        "\nsluice: {flow} asks for {cap}\n  input: {input}\n  why: {by}: {reason}\n",
        flow = printable(req.flow),
        cap = printable(&req.capability.to_string()),
        input = printable(&summary(req.input)),
        by = printable(&v.by),
        reason = printable(&v.reason)
    )?;
    loop {
        write!(
            tty,
            "Allow? [y] once, [a] for the rest of the run, [n] no: "
        )?;
        tty.flush()?;
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(Answer::No);
        }
        match line.trim() {
            "y" | "Y" | "yes" => return Ok(Answer::Once),
            "a" | "A" | "all" => return Ok(Answer::Always),
            "n" | "N" | "no" | "" => return Ok(Answer::No),
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
