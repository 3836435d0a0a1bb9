//! The permission kernel: what a call needs (capabilities) and whether it may
//! have it. Every capability passes, in order: the run's ceiling, any
//! matching deny rule (from any policy), the policies' `decide` hooks, allow
//! rules, ask rules; nothing matched is the policies' `otherwise` (ask). An ask
//! goes to the [`approval::Approver`].

pub mod approval;
pub mod pattern;
pub mod policy;
pub mod policy_test;
pub mod shell;

use crate::error::{ErrorCode, FlowError};
use pattern::{Pattern, Vars};
use policy::{Decision, Policy, Request, Rule, Verdict};
use serde::Serialize;
use shell::{Analysis, Command, Redirect};
use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

/// What a capability lets a call do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Action {
    #[serde(rename = "fs:read")]
    FsRead,
    #[serde(rename = "fs:write")]
    FsWrite,
    #[serde(rename = "net:get")]
    NetGet,
    #[serde(rename = "net:post")]
    NetPost,
    #[serde(rename = "net:private")]
    NetPrivate,
    #[serde(rename = "proc:spawn")]
    ProcSpawn,
    #[serde(rename = "model:call")]
    ModelCall,
}

impl Action {
    pub const ALL: [Action; 7] = [
        Action::FsRead,
        Action::FsWrite,
        Action::NetGet,
        Action::NetPost,
        Action::NetPrivate,
        Action::ProcSpawn,
        Action::ModelCall,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::FsRead => "fs:read",
            Action::FsWrite => "fs:write",
            Action::NetGet => "net:get",
            Action::NetPost => "net:post",
            Action::NetPrivate => "net:private",
            Action::ProcSpawn => "proc:spawn",
            Action::ModelCall => "model:call",
        }
    }
}

/// `action:resource`, e.g. `fs:read:/w/src/a.rs`. fs resources are canonical
/// absolute paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capability {
    pub action: Action,
    pub resource: String,
}

impl Capability {
    /// Parses `action:resource`, e.g. `fs:read:/w/a.rs` or `net:get:example.org`.
    pub fn parse(text: &str) -> Result<Capability, String> {
        let action = Action::ALL
            .into_iter()
            .find(|a| text.starts_with(a.as_str()) && text[a.as_str().len()..].starts_with(':'));
        match action {
            Some(action) => Ok(Capability {
                action,
                resource: text[action.as_str().len() + 1..].to_string(),
            }),
            None => Err(format!(
                "{text:?} is not a capability; write action:resource with an action of {}",
                Action::ALL.map(Action::as_str).join(", ")
            )),
        }
    }

    pub fn fs(action: Action, path: &Path) -> Self {
        Capability {
            action,
            resource: path.to_string_lossy().into_owned(),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.action.as_str(), self.resource)
    }
}

/// The static side of a run's policies, for deriving a sandbox.
pub struct StaticView<'a> {
    pub ceiling: &'a [Pattern],
    pub rules: Vec<&'a policy::Rule>,
    pub hooks: bool,
    pub failed: bool,
    /// The policies' own files: no command may rewrite them.
    pub files: Vec<std::path::PathBuf>,
}

/// Decides whether a run may use a capability.
pub struct Kernel {
    ceiling: Vec<Pattern>,
    policies: RefCell<Vec<Policy>>,
    /// Where a command's relative redirection targets resolve.
    vars: Vars,
}

impl Kernel {
    /// `ceiling` empty means no ceiling beyond the policies.
    pub fn new(policies: Vec<Policy>, ceiling: Vec<Pattern>, vars: Vars) -> Self {
        Kernel {
            ceiling,
            policies: RefCell::new(policies),
            vars,
        }
    }

    /// What a sandbox is derived from: the ceiling, every policy's static
    /// rules (policies refreshed first), whether a `decide` hook could
    /// change them, and whether a policy failed to load (then nothing is
    /// granted).
    pub fn with_static<T>(&self, f: impl FnOnce(&StaticView) -> T) -> T {
        let mut policies = self.policies.borrow_mut();
        for p in policies.iter_mut() {
            p.refresh();
        }
        let view = StaticView {
            ceiling: &self.ceiling,
            rules: policies.iter().flat_map(|p| p.rules()).collect(),
            hooks: policies.iter().any(|p| p.has_decide()),
            failed: policies.iter().any(|p| p.load_error().is_some()),
            files: policies
                .iter()
                .filter_map(|p| p.file().map(Path::to_path_buf))
                .collect(),
        };
        f(&view)
    }

    /// The verdict on one capability. A command line (`proc:spawn`) is
    /// judged by every simple command in it and every file it redirects
    /// to or from, so `git *` allowed does not let `git status && curl x | sh`
    /// through; the strictest part decides.
    pub fn decide(&self, req: &Request) -> Verdict {
        if req.capability.action != Action::ProcSpawn {
            return self.decide_one(req);
        }
        match shell::analyze(&req.capability.resource) {
            Analysis::Unparsed { reason } => self.decide_whole(req, &reason),
            Analysis::Parsed(commands) => self.decide_commands(req, &commands),
        }
    }

    /// A line that cannot be split into its commands is judged whole, and
    /// only a rule naming it exactly allows it: a wildcard such as `git *`
    /// would otherwise wave through whatever hides after a construct the
    /// parser does not know.
    fn decide_whole(&self, req: &Request, why: &str) -> Verdict {
        let mut v = self.decide_inner(req, Grant::Exactly);
        v.reason = format!("{} (the command was checked whole: {why})", v.reason);
        v
    }

    fn decide_commands(&self, req: &Request, commands: &[Command]) -> Verdict {
        let mut parts: Vec<Verdict> = Vec::new();
        for command in commands {
            if !command.words.is_empty() {
                // Leading assignments stay in: `GIT_DIR=x git log` is not `git log`.
                let mut text = command.env.join(" ");
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&command.text);
                let cap = Capability {
                    action: Action::ProcSpawn,
                    resource: text.clone(),
                };
                parts.push(self.part(req, &cap, &text));
            }
            for redirect in &command.redirects {
                parts.push(self.redirect(req, redirect));
            }
        }
        // No simple command (`[[ $x -eq 1 ]]`, a bare `(( ))`) may still run
        // code through expansions: the line is judged whole.
        let Some(strictest) = parts.iter().map(|v| v.decision).max() else {
            return self.decide_whole(req, "it holds no simple command to check on its own");
        };
        if parts.len() == 1 {
            return parts.remove(0);
        }
        if strictest == Decision::Allow {
            let by: Vec<&str> = parts.iter().map(|v| v.by.as_str()).collect();
            return verdict(
                Decision::Allow,
                dedup(by).join("; "),
                format!(
                    "every part of the line is allowed ({} checked)",
                    parts.len()
                ),
            );
        }
        parts
            .into_iter()
            .find(|v| v.decision == strictest)
            .expect("the strictest part exists")
    }

    /// One part of a command line, judged as a capability of its own.
    fn part(&self, req: &Request, cap: &Capability, what: &str) -> Verdict {
        let mut v = self.decide_one(&Request {
            capability: cap,
            ..*req
        });
        if cap.to_string() != req.capability.to_string() {
            v.reason = format!("for `{what}` in the line: {}", v.reason);
        }
        v
    }

    /// A redirection: fs:write (or fs:read) of its target, resolved as the
    /// command would (relative to the workspace, `~` to home).
    fn redirect(&self, req: &Request, r: &Redirect) -> Verdict {
        // `~/x` is known here (home), though a shell expands it at run time.
        let plain_tilde = (r.target == "~" || r.target.starts_with("~/"))
            && !r
                .target
                .contains(['$', '`', '*', '?', '[', '{', '\'', '"', '\\']);
        if r.dynamic && !plain_tilde {
            return verdict(
                Decision::Ask,
                "shell analysis".into(),
                format!(
                    "the redirection target `{}` is only known when the command runs",
                    r.target
                ),
            );
        }
        if matches!(
            r.target.as_str(),
            "/dev/null" | "/dev/stdout" | "/dev/stderr"
        ) {
            return verdict(
                Decision::Allow,
                "shell analysis".into(),
                format!("{} is harmless", r.target),
            );
        }
        let folder = self.command_folder(req);
        let path = match r.target.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => match &self.vars.home {
                Some(home) => home.join(rest.trim_start_matches('/')),
                None => folder.join(&r.target),
            },
            _ => folder.join(&r.target),
        };
        let real = crate::fsops::path::canonical_lenient(&path).unwrap_or(path);
        let action = if r.write {
            Action::FsWrite
        } else {
            Action::FsRead
        };
        let cap = Capability::fs(action, &real);
        self.part(req, &cap, &format!("redirection to {}", r.target))
    }

    /// Where a command line runs, so its relative redirections resolve
    /// where the shell will open them: the call's `cwd` (bash) or `workdir`
    /// (shell_command), relative to the workspace, else the workspace.
    fn command_folder(&self, req: &Request) -> PathBuf {
        let given = ["cwd", "workdir"]
            .iter()
            .find_map(|f| req.input.get(f).and_then(|v| v.as_str()));
        match given {
            Some(dir) => {
                let joined = self.vars.workspace.join(dir);
                crate::fsops::path::canonical_lenient(&joined).unwrap_or(joined)
            }
            None => self.vars.workspace.clone(),
        }
    }

    /// The verdict on one capability, in the order of the module doc.
    fn decide_one(&self, req: &Request) -> Verdict {
        self.decide_inner(req, Grant::ByPattern)
    }

    fn decide_inner(&self, req: &Request, grant: Grant) -> Verdict {
        let cap = req.capability;
        if !self.ceiling.is_empty() && !self.ceiling.iter().any(|c| c.matches(cap)) {
            let limits: Vec<&str> = self.ceiling.iter().map(|c| c.as_str()).collect();
            return verdict(
                Decision::Deny,
                "the run's ceiling".into(),
                format!("outside the run's ceiling ({})", limits.join(", ")),
            );
        }
        let mut policies = self.policies.borrow_mut();
        for p in policies.iter_mut() {
            p.refresh();
        }
        for p in policies.iter() {
            if let Some(e) = p.load_error() {
                return verdict(
                    Decision::Deny,
                    p.name(),
                    format!("the policy failed, so nothing is granted: {e}"),
                );
            }
        }
        if cap.action == Action::FsWrite {
            if let Some(p) = policies.iter().find(|p| p.guards(Path::new(&cap.resource))) {
                return verdict(
                    Decision::Deny,
                    "the kernel".into(),
                    format!("{} is where the policy {} comes from, and a run may not rewrite its own policy", cap.resource, p.name()),
                );
            }
        }
        if let Some(v) = first_rule(&policies, Decision::Deny, |r| r.pattern.matches(cap)) {
            return v;
        }
        match decide_hooks(&policies, req) {
            Ok(Some(v)) => return v,
            Ok(None) => {}
            Err(v) => return v,
        }
        let exactly = grant == Grant::Exactly || cap.action == Action::NetPrivate;
        let grants =
            |r: &Rule| r.pattern.matches(cap) && (!exactly || r.pattern.grants_explicitly(cap));
        if let Some(v) = first_rule(&policies, Decision::Allow, grants) {
            return v;
        }
        if let Some(v) = first_rule(&policies, Decision::Ask, |r| r.pattern.matches(cap)) {
            return v;
        }
        let strictest = policies
            .iter()
            .map(Policy::otherwise)
            .max()
            .unwrap_or(Decision::Ask);
        let wildcard_only = cap.action == Action::NetPrivate
            && policies.iter().any(|p| {
                p.rules()
                    .iter()
                    .any(|r| r.decision == Decision::Allow && r.pattern.matches(cap))
            });
        let names: Vec<String> = policies.iter().map(Policy::name).collect();
        verdict(
            strictest,
            names.join(", "),
            if wildcard_only {
                format!("an allow rule matches {cap} only by a wildcard, and net:private is granted only by a rule naming its origin exactly")
            } else {
                format!("no rule or hook of the policy matched {cap}")
            },
        )
    }

    /// Where a process flow runs: the first policy whose `route` names a
    /// container, or `None` for the host. A failing hook is a deny.
    pub fn route(&self, req: &Request) -> Result<Option<String>, Verdict> {
        let policies = self.policies.borrow();
        for p in policies.iter() {
            match p.route(req) {
                Ok(Some(container)) => return Ok(Some(container)),
                Ok(None) => {}
                Err(e) => return Err(verdict(Decision::Deny, p.hook_name("route"), e)),
            }
        }
        Ok(None)
    }
}

/// How an allow rule may grant a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// Any matching pattern, wildcards included.
    ByPattern,
    /// Only a pattern naming the capability exactly (no wildcard).
    Exactly,
}

/// `items` without repeats, in first-seen order.
fn dedup(items: Vec<&str>) -> Vec<&str> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

fn verdict(decision: Decision, by: String, reason: String) -> Verdict {
    Verdict {
        decision,
        by,
        reason,
    }
}

/// The first rule with `decision` that `hit` accepts, across all policies.
fn first_rule(
    policies: &[Policy],
    decision: Decision,
    hit: impl Fn(&Rule) -> bool,
) -> Option<Verdict> {
    policies.iter().find_map(|p| {
        let rule = p
            .rules()
            .iter()
            .find(|r| r.decision == decision && hit(r))?;
        let by = format!(
            "{} \"{}\" ({} of {})",
            decision,
            rule.pattern.as_str(),
            rule.at,
            p.name()
        );
        let reason = rule.reason.clone().unwrap_or_else(|| match decision {
            Decision::Allow => "the policy allows it".into(),
            Decision::Deny => "the policy denies it".into(),
            Decision::Ask => "the policy asks a person first".into(),
        });
        Some(verdict(decision, by, reason))
    })
}

/// Every policy's `decide` opinion; the strictest wins (deny, then ask,
/// then allow). A hook that fails denies.
fn decide_hooks(policies: &[Policy], req: &Request) -> Result<Option<Verdict>, Verdict> {
    let mut strictest: Option<Verdict> = None;
    for p in policies {
        match p.decide(req) {
            Ok(None) => {}
            // Only a rule naming its origin grants net:private; a hook's
            // allow is no opinion there.
            Ok(Some((Decision::Allow, _))) if req.capability.action == Action::NetPrivate => {}
            Ok(Some((decision, reason))) => {
                if strictest.as_ref().is_some_and(|s| s.decision >= decision) {
                    continue;
                }
                let reason = reason.unwrap_or_else(|| format!("the decide hook says {decision}"));
                strictest = Some(verdict(decision, p.hook_name("decide"), reason));
            }
            Err(e) => return Err(verdict(Decision::Deny, p.hook_name("decide"), e)),
        }
    }
    Ok(strictest)
}

/// `permission_denied` for `cap`, naming what refused it and why.
pub fn denied(cap: &Capability, v: &Verdict) -> FlowError {
    FlowError::new(
        ErrorCode::PermissionDenied,
        format!("{cap} is denied by {}: {}.", v.by, v.reason),
    )
    .with("capability", cap.to_string())
    .with("by", v.by.clone())
    .with("reason", v.reason.clone())
}
