//! The permission kernel: what a call needs (capabilities) and whether it may
//! have it. Every capability passes, in order: the run's ceiling, any
//! matching deny rule (from any policy), the policies' `decide` hooks, allow
//! rules, ask rules; nothing matched is the policies' `otherwise` (ask). An ask
//! goes to the [`approval::Approver`].
//!
//! A command line (`proc:spawn`) is taken apart by [`shell`] and each simple
//! command in it is judged as a capability of its own:
//! - with the call's `env` as its first leading assignments ([`CallInput`]);
//! - by every spelling of its program ([`Kernel::spellings`]): deny rules
//!   see them all, allow and ask rules those that surely name the same file;
//! - a program known only at run time matches every deny rule on commands
//!   and no allow rule;
//! - an allow rule (and the ceiling, and a pre-approval) grants it only if
//!   it also names the forms of [`programs`] the command holds.
//!
//! Writing a repository control file ([`control`]) is granted only by an
//! allow rule naming it. Writing a file a policy loaded (its own, a
//! module's: `policy_files`) is never granted.

pub mod approval;
pub mod control;
pub mod gate;
pub mod pattern;
pub mod policy;
mod policy_files;
pub mod programs;
pub mod shell;

pub use crate::call::{Action, Capability};
use crate::error::{ErrorCode, FlowError};
use pattern::{Pattern, Vars};
use policy::{Decision, Placement, Policy, Request, Rule, Verdict};
use shell::{Analysis, Command, Redirect};
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// A policy's named declarations (`containers`, `providers`), as written.
pub type Declarations = std::collections::BTreeMap<String, serde_json::Value>;

/// The static side of a run's policies, for deriving a sandbox.
pub struct StaticView<'a> {
    pub ceiling: &'a [Pattern],
    pub rules: Vec<&'a policy::Rule>,
    pub hooks: bool,
    pub failed: bool,
    /// The files the policies loaded (their own and their modules'): no
    /// command may rewrite them.
    pub files: Vec<std::path::PathBuf>,
    /// The policies' loads ([`policy::Policy::generation`]): a view with
    /// the same ones, under the same kernel, says the same.
    pub generations: Vec<u64>,
    /// Each policy's `limits` that sets any, with the policy's name.
    pub limits: Vec<(String, crate::exec::resources::ResourceLimits)>,
}

/// Why `policies` under `ceiling` grant nothing, if they do not: a policy
/// that failed to load, or one that loaded a file through a symlink a
/// command could replace ([`policy_files::exposed`]). A run does not start then, nor does
/// `sluice policy explain`; a policy that comes to it when it is loaded
/// again (edited during a run) denies every call.
pub fn refusal(policies: &[Policy], ceiling: &[Pattern]) -> Option<String> {
    broken(policies, ceiling).map(|(_, e)| e)
}

/// [`refusal`], with the policy to blame.
fn broken(policies: &[Policy], ceiling: &[Pattern]) -> Option<(String, String)> {
    if let Some(p) = policies.iter().find(|p| p.load_error().is_some()) {
        return Some((p.name(), p.load_error().unwrap_or_default().to_string()));
    }
    policy_files::exposed(policies, ceiling)
}

/// Decides whether a run may use a capability.
pub struct Kernel {
    ceiling: Vec<Pattern>,
    policies: RefCell<Vec<Policy>>,
    /// Where a command's relative redirection targets resolve.
    vars: Vars,
    /// Files and folders of sluice's own that no flow reads or writes,
    /// whatever the policies say (the MCP server's token).
    withheld: Vec<std::path::PathBuf>,
}

impl Kernel {
    /// `ceiling` empty means no ceiling beyond the policies.
    pub fn new(policies: Vec<Policy>, ceiling: Vec<Pattern>, vars: Vars) -> Self {
        Kernel {
            ceiling,
            policies: RefCell::new(policies),
            vars,
            withheld: Vec::new(),
        }
    }

    /// The kernel, refusing every `fs:*` capability on `paths` (and what
    /// is under them), before the ceiling and the policies are asked.
    pub fn withholding(mut self, paths: Vec<std::path::PathBuf>) -> Self {
        self.withheld = paths;
        self
    }

    /// The withheld path `cap` touches, if it touches one.
    fn withheld_by(&self, cap: &Capability) -> Option<&std::path::PathBuf> {
        if !matches!(cap.action, Action::FsRead | Action::FsWrite) {
            return None;
        }
        let path = Path::new(&cap.resource);
        self.withheld.iter().find(|w| path.starts_with(w))
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
            failed: self.broken(&policies).is_some(),
            files: policies
                .iter()
                .flat_map(|p| p.files().map(Path::to_path_buf))
                .collect(),
            generations: policies.iter().map(|p| p.generation()).collect(),
            limits: policies
                .iter()
                .filter(|p| !p.limits().is_empty())
                .map(|p| (p.name(), p.limits()))
                .collect(),
        };
        f(&view)
    }

    /// Whether no capability of `action` can ever be granted: a policy
    /// failed to load, the ceiling selects none of it, or a deny without
    /// exceptions selects all of it. What a hook or an ask might say does
    /// not matter then, since a deny wins. A served tool list leaves out
    /// the flows such an action would refuse every call of.
    pub fn denies_every(&self, action: Action) -> bool {
        self.with_static(|v| {
            v.failed
                || (!v.ceiling.is_empty() && !v.ceiling.iter().any(|p| p.selects(action)))
                || v.rules.iter().any(|r| {
                    r.decision == policy::Decision::Deny
                        && r.except.is_empty()
                        && r.pattern.any_resource(action)
                })
        })
    }

    /// The policy that makes the run's policies grant nothing, and why
    /// ([`refusal`]).
    fn broken(&self, policies: &[Policy]) -> Option<(String, String)> {
        broken(policies, &self.ceiling)
    }

    /// The verdict on one capability. A command line (`proc:spawn`) is
    /// judged by every simple command in it and every file it redirects
    /// to or from, so `git *` allowed does not let `git status && curl x | sh`
    /// through; the strictest part decides. Each command is judged with
    /// the call's `env` (see [`CallInput`]) as leading assignments, by its
    /// program's name and by the file that name resolves to (see
    /// [`Kernel::spellings`]), and the forms of [`programs`] in it must be
    /// named by the rule that grants it.
    pub fn decide(&self, req: &Request) -> Verdict {
        if req.capability.action != Action::ProcSpawn {
            return self.decide_one(req);
        }
        let call = CallInput::of(req);
        match shell::analyze(&req.capability.resource) {
            Analysis::Unparsed { reason } => self.decide_whole(req, &call, &reason),
            Analysis::Parsed(commands) => self.decide_commands(req, &call, &commands),
        }
    }

    /// A line that cannot be split into its commands is judged whole, and
    /// only a rule naming it exactly allows it: a wildcard such as `git *`
    /// would otherwise wave through whatever hides after a construct the
    /// parser does not know.
    fn decide_whole(&self, req: &Request, call: &CallInput, why: &str) -> Verdict {
        let text = with_env(&call.env, &req.capability.resource);
        let cap = Capability {
            action: Action::ProcSpawn,
            resource: text,
        };
        let judged = Judged {
            exactly: true,
            ..Judged::plain(&cap)
        };
        let mut v = self.decide_inner(
            &Request {
                capability: &cap,
                ..*req
            },
            &judged,
        );
        v.reason = format!("{} (the command was checked whole: {why})", v.reason);
        v
    }

    fn decide_commands(&self, req: &Request, call: &CallInput, commands: &[Command]) -> Verdict {
        let mut parts: Vec<Verdict> = Vec::new();
        // The parts an allow rule must name, spelled as they are judged.
        let mut ungranted: Vec<String> = Vec::new();
        for command in commands {
            if !command.words.is_empty() {
                let v = self.command(req, call, command);
                let text = self.part_of(req, call, command).cap.resource;
                if v.decision != Decision::Allow
                    && !v.by.starts_with("deny ")
                    && !ungranted.contains(&text)
                {
                    ungranted.push(text);
                }
                parts.push(v);
            }
            for redirect in &command.redirects {
                parts.push(self.redirect(req, redirect));
            }
        }
        // No simple command (`[[ $x -eq 1 ]]`, a bare `(( ))`) may still run
        // code through expansions: the line is judged whole.
        let Some(strictest) = parts.iter().map(|v| v.decision).max() else {
            return self.decide_whole(req, call, "it holds no simple command to check on its own");
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
        let mut chosen = parts
            .into_iter()
            .find(|v| v.decision == strictest)
            .expect("the strictest part exists");
        if ungranted.len() > 1 {
            // One part's rule alone would lead to the next part's refusal.
            let rules: Vec<String> = ungranted
                .iter()
                .map(|t| format!("p.allow \"proc:spawn:{}\"", pattern::escaped(t)))
                .collect();
            chosen.reason = format!(
                "{}; the line has {} parts no rule grants, and these rules grant them all: {}",
                chosen.reason,
                ungranted.len(),
                rules.join(", ")
            );
        }
        chosen
    }

    /// One simple command of a line, judged as a capability of its own:
    /// its assignments (the call's `env` first) and words, by every
    /// spelling of its program, with the forms it holds.
    fn command(&self, req: &Request, call: &CallInput, command: &Command) -> Verdict {
        let part = self.part_of(req, call, command);
        let mut v = self.decide_inner(
            &Request {
                capability: &part.cap,
                ..*req
            },
            &part.judged(),
        );
        if part.cap.to_string() != req.capability.to_string() {
            v.reason = format!("for `{}` in the line: {}", part.cap.resource, v.reason);
        }
        v
    }

    /// What a simple command is judged as (see [`Part`]).
    fn part_of(&self, req: &Request, call: &CallInput, command: &Command) -> Part {
        let mut env = call.env.clone();
        env.extend(command.env.iter().cloned());
        let text = with_env(&env, &command.text);
        let cap = Capability {
            action: Action::ProcSpawn,
            resource: text,
        };
        let fed = call.fed || command.fed;
        if command.program_dynamic {
            let forms = programs::forms("", &[], &env, fed, programs::Side::Command);
            return Part {
                cap,
                trusted: Vec::new(),
                other: Vec::new(),
                forms,
                dynamic: true,
                program: command.words[0].clone(),
            };
        }
        let spelled = self.spellings(req, &command.words, &env);
        let (program, args) = command.words.split_first().expect("a command has words");
        let mut forms = programs::forms(program, args, &env, fed, programs::Side::Command);
        for name in &spelled.names {
            for form in programs::forms(name, args, &[], fed, programs::Side::Command) {
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
        }
        let as_cap = |text: &String| Capability {
            action: Action::ProcSpawn,
            resource: text.clone(),
        };
        Part {
            cap,
            trusted: spelled.trusted.iter().map(as_cap).collect(),
            other: spelled.other.iter().map(as_cap).collect(),
            forms,
            dynamic: false,
            program: program.clone(),
        }
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
        let mut v = self.decide_one(&Request {
            capability: &cap,
            ..*req
        });
        v.reason = format!(
            "for `redirection to {}` in the line: {}",
            r.target, v.reason
        );
        v
    }

    /// Where a command line runs, so its relative redirections resolve
    /// where the shell will open them: the folder the call's flow planned
    /// it in (the request's `cwd`, from the envelope), else the workspace.
    /// The flow resolved it, so the kernel knows no flow's field names.
    fn command_folder(&self, req: &Request) -> PathBuf {
        req.cwd
            .map_or_else(|| self.vars.workspace.clone(), Path::to_path_buf)
    }

    /// Other spellings of a command's program, so that a rule naming it one
    /// way also applies when it is written another: `/usr/bin/touch x` is
    /// also `touch x` and `touch x` is also `/usr/bin/touch x` when the
    /// command's PATH finds it there (and the file a symlink names, as
    /// `/usr/bin/vim.basic`). A deny rule applies to every spelling. An allow
    /// or ask rule applies to a spelling only when it surely names the same
    /// file: found through a PATH (the command's, else sluice's own) none of
    /// whose folders up to the file's could be written by a command (a
    /// relative entry such as `.`, a temporary folder, or one the policies
    /// let commands write), and not through a PATH the command sets itself.
    fn spellings(&self, req: &Request, words: &[String], env: &[String]) -> Spellings {
        let mut out = Spellings::default();
        let Some((name, args)) = words.split_first() else {
            return out;
        };
        let text = |program: &str| {
            let mut w = vec![program.to_string()];
            w.extend(args.iter().cloned());
            with_env(env, &w.join(" "))
        };
        let folder = self.command_folder(req);
        let own_path = env
            .iter()
            .rev()
            .find_map(|a| a.strip_prefix("PATH="))
            .map(|p| p.trim_matches(['\'', '"']).to_string());
        let set_path = own_path.is_some();
        let path_var = own_path
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        let add = |spelling: String, trusted: bool, out: &mut Spellings| {
            if spelling == text(name) || out.trusted.contains(&spelling) {
                return;
            }
            if trusted {
                out.other.retain(|s| *s != spelling);
                out.trusted.push(spelling);
            } else if !out.other.contains(&spelling) {
                out.other.push(spelling);
            }
        };
        let mut names: Vec<String> = Vec::new();
        if name.contains('/') {
            let path = folder.join(name);
            let real = std::fs::canonicalize(&path).ok();
            let base = name.rsplit('/').next().unwrap_or(name);
            if !base.is_empty() {
                let by_name = self.resolve(base, &path_var, &folder);
                let same = by_name
                    .as_ref()
                    .is_some_and(|r| r.trusted && real.as_ref() == Some(&r.real));
                add(text(base), same && !set_path, &mut out);
            }
            if let Some(real) = &real {
                let steady = !self.writable(path.parent().unwrap_or(&path))
                    && !self.writable(real.parent().unwrap_or(real));
                add(text(&real.to_string_lossy()), steady, &mut out);
                names.push(file_name(real));
            }
        } else if let Some(found) = self.resolve(name, &path_var, &folder) {
            let trusted = found.trusted && !set_path;
            add(text(&found.path.to_string_lossy()), trusted, &mut out);
            add(text(&found.real.to_string_lossy()), trusted, &mut out);
            names.push(file_name(&found.real));
        }
        let written = file_name(Path::new(name));
        names.retain(|n| *n != written);
        names.dedup();
        out.names = names;
        out
    }

    /// The first executable file named `name` in the folders of `path_var`
    /// (relative ones against `folder`), and whether that finding can be
    /// trusted (see [`Kernel::spellings`]).
    fn resolve(&self, name: &str, path_var: &str, folder: &Path) -> Option<Resolved> {
        use std::os::unix::fs::PermissionsExt;
        let mut trusted = true;
        for entry in path_var.split(':') {
            let dir = if entry.is_empty() || !entry.starts_with('/') {
                trusted = false;
                folder.join(entry)
            } else {
                PathBuf::from(entry)
            };
            trusted &= !self.writable(&dir);
            let candidate = dir.join(name);
            let Ok(meta) = std::fs::metadata(&candidate) else {
                continue;
            };
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                let real = std::fs::canonicalize(&candidate).unwrap_or_else(|_| candidate.clone());
                trusted &= real.parent().is_none_or(|p| p == dir || !self.writable(p));
                return Some(Resolved {
                    path: candidate,
                    real,
                    trusted,
                });
            }
        }
        None
    }

    /// Whether a command could write in `dir`: a temporary folder, or one
    /// an allow rule of the policies lets it write into.
    fn writable(&self, dir: &Path) -> bool {
        let temp = [
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        if temp.iter().any(|t| dir.starts_with(t)) {
            return true;
        }
        let probe = Capability::fs(Action::FsWrite, &dir.join(".sluice-path-probe"));
        let policies = self.policies.borrow();
        policies.iter().any(|p| {
            p.rules()
                .iter()
                .any(|r| r.decision == Decision::Allow && r.pattern.matches(&probe))
        })
    }

    /// The verdict on one capability, in the order of the module doc.
    fn decide_one(&self, req: &Request) -> Verdict {
        self.decide_inner(req, &Judged::plain(req.capability))
    }

    fn decide_inner(&self, req: &Request, judged: &Judged) -> Verdict {
        let cap = req.capability;
        if let Some(w) = self.withheld_by(cap) {
            return verdict(
                Decision::Deny,
                "sluice".into(),
                format!(
                    "{} holds a secret of sluice's own, which no flow reads or writes whatever the policies say",
                    w.display()
                ),
            );
        }
        let control = match cap.action {
            Action::FsWrite => control::control_part(Path::new(&cap.resource)),
            _ => None,
        };
        // The ceiling bounds a run: a pattern of it admits a command only
        // with the forms it names, unless it admits every command line.
        let admits = |p: &Pattern| {
            let any = p.any_resource(Action::ProcSpawn);
            judged.spelled_as(Spelled::Surely).any(|c| p.matches(c))
                && (any || (!judged.dynamic && judged.unnamed_by(&[p]).is_none()))
        };
        if !self.ceiling.is_empty() && !self.ceiling.iter().any(admits) {
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
        if let Some((by, e)) = self.broken(&policies) {
            return verdict(
                Decision::Deny,
                by,
                format!("the policy failed, so nothing is granted: {e}"),
            );
        }
        if cap.action == Action::FsWrite {
            let path = Path::new(&cap.resource);
            if let Some((p, what)) = policies.iter().find_map(|p| p.guards(path).map(|w| (p, w))) {
                return verdict(
                    Decision::Deny,
                    "the kernel".into(),
                    format!(
                        "{} is {what} of the policy {}, and a run may not rewrite its own policy",
                        cap.resource,
                        p.name()
                    ),
                );
            }
        }
        // A program known only at run time could be any program: every
        // deny rule on commands applies to it.
        // A spelling a deny's `except` names is taken out of that deny
        // alone; the other spellings, and the other denies, still apply.
        let denies = |r: &Rule| {
            judged
                .spelled_as(Spelled::Any)
                .any(|c| r.pattern.matches(c) && !r.excepts(c))
                || (judged.dynamic && r.pattern.selects(Action::ProcSpawn))
        };
        if let Some(mut v) = first_rule(&policies, Decision::Deny, denies) {
            if judged.dynamic {
                v.reason = format!(
                    "{} (the program `{}` is only known when the command runs, so every deny rule on commands applies to it)",
                    v.reason, judged.program
                );
            }
            return v;
        }
        let mut v = self.after_denies(req, judged, &policies, control);
        if let Some(note) = excepted(&policies, judged) {
            v.reason = format!("{} ({note})", v.reason);
        }
        v
    }

    /// The rest of the order once no deny applies: `decide` hooks, allow
    /// rules (with the forms and control files they must name), ask rules,
    /// `otherwise`.
    fn after_denies(
        &self,
        req: &Request,
        judged: &Judged,
        policies: &[Policy],
        control: Option<String>,
    ) -> Verdict {
        let cap = req.capability;
        match decide_hooks(policies, req) {
            Ok(Some(v)) => return v,
            Ok(None) => {}
            Err(v) => return v,
        }
        let exactly = judged.exactly || cap.action == Action::NetPrivate;
        let matches = |r: &Rule| {
            judged
                .spelled_as(Spelled::Surely)
                .any(|c| r.pattern.matches(c) && (!exactly || r.pattern.grants_explicitly(c)))
        };
        // The allow rules that match. One that names everything the command
        // holds grants it; so do several together when each of its forms is
        // named by one of them (`proc:spawn:*` for a program's forms, and
        // `proc:spawn:PYTHONPATH=* *` for the variable).
        let matching: Vec<(&Policy, &Rule)> = policies
            .iter()
            .flat_map(|p| p.rules().iter().map(move |r| (p, r)))
            .filter(|(_, r)| r.decision == Decision::Allow && matches(r))
            .collect();
        // Why the matching rules did not grant it, for the reason.
        let mut withheld: Option<String> = None;
        if let Some((_, first)) = matching.first() {
            let rule = first.pattern.as_str();
            let patterns: Vec<&Pattern> = matching.iter().map(|(_, r)| &r.pattern).collect();
            let names_control = |p: &Pattern| match &control {
                Some(part) => p.grants_explicitly(cap) || control::names(p.as_str(), part),
                None => true,
            };
            withheld = if judged.dynamic {
                Some(format!(
                    "the program `{}` is only known when the command runs, so no allow rule grants it (the allow rule \"{rule}\" matches it only as text); name the program in the line",
                    judged.program
                ))
            } else if let Some(form) = judged.unnamed_by(&patterns) {
                Some(unnamed_reason(cap, form, rule))
            } else if !patterns.iter().any(|p| names_control(p)) {
                control.as_ref().map(|part| control_reason(cap, part, rule))
            } else {
                None
            };
            if withheld.is_none() {
                // Report the first rule that grants it alone, else them all.
                let alone = matching.iter().find(|(_, r)| {
                    judged.unnamed_by(&[&r.pattern]).is_none() && names_control(&r.pattern)
                });
                return match alone {
                    Some((p, r)) => rule_verdict(p, r),
                    None => {
                        let by: Vec<String> = matching
                            .iter()
                            .map(|(p, r)| rule_verdict(p, r).by)
                            .collect();
                        verdict(
                            Decision::Allow,
                            by.join("; "),
                            "the policy allows it: each form the command holds is named by one of these rules".into(),
                        )
                    }
                };
            }
        }
        let asks = |r: &Rule| {
            judged
                .spelled_as(Spelled::Surely)
                .any(|c| r.pattern.matches(c))
        };
        if let Some(mut v) = first_rule(policies, Decision::Ask, asks) {
            if let Some(why) = withheld {
                v.reason = format!("{why}; {}", v.reason);
            }
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
            } else if let Some(why) = withheld {
                why
            } else {
                format!("no rule or hook of the policy matched {cap}")
            },
        )
    }

    /// Whether `pattern` grants `req` as an allow rule would (its forms
    /// named, its control files named, its program known): for a
    /// pre-approval (`--approve PATTERN`), which covers a command line only
    /// if it covers every command in it.
    pub fn covers(&self, pattern: &Pattern, req: &Request) -> bool {
        let cap = req.capability;
        if !pattern.matches(cap) && cap.action != Action::ProcSpawn {
            return false;
        }
        match cap.action {
            Action::NetPrivate => pattern.grants_explicitly(cap),
            Action::FsWrite => match control::control_part(Path::new(&cap.resource)) {
                Some(part) => {
                    pattern.grants_explicitly(cap) || control::names(pattern.as_str(), &part)
                }
                None => true,
            },
            Action::ProcSpawn => {
                let call = CallInput::of(req);
                match shell::analyze(&cap.resource) {
                    Analysis::Parsed(commands)
                        if !commands.is_empty()
                            && commands.iter().all(|c| c.redirects.is_empty()) =>
                    {
                        commands
                            .iter()
                            .filter(|c| !c.words.is_empty())
                            .all(|c| self.part_covered(req, &call, c, pattern))
                    }
                    _ => {
                        let whole = Capability {
                            action: Action::ProcSpawn,
                            resource: with_env(&call.env, &cap.resource),
                        };
                        pattern.grants_explicitly(&whole)
                    }
                }
            }
            _ => true,
        }
    }

    /// Whether pre-approving `pattern` grants part `c` of `req`'s command
    /// line: it matches a spelling that surely names the part's program,
    /// and spells every form the part holds that no wildcard grants.
    fn part_covered(
        &self,
        req: &Request,
        call: &CallInput,
        c: &Command,
        pattern: &Pattern,
    ) -> bool {
        let part = self.part_of(req, call, c);
        let judged = part.judged();
        !judged.dynamic
            && judged
                .spelled_as(Spelled::Surely)
                .any(|c| pattern.matches(c))
            && judged.unnamed_by(&[pattern]).is_none()
    }

    /// The pre-approvals of `patterns` that together grant `req`, or
    /// `None`: one that [`Kernel::covers`] it, else, for a command line of
    /// several parts, one for each part (a part of `PATH=/x a; PATH=/x b`
    /// is granted by a pattern that spells its own assignment, so a line
    /// of two such parts needs one for each).
    pub fn covering<'p>(&self, patterns: &'p [Pattern], req: &Request) -> Option<Vec<&'p Pattern>> {
        if let Some(p) = patterns.iter().find(|p| self.covers(p, req)) {
            return Some(vec![p]);
        }
        let commands = self.plain_parts(req)?;
        let call = CallInput::of(req);
        let mut used: Vec<&Pattern> = Vec::new();
        for c in commands.iter().filter(|c| !c.words.is_empty()) {
            let p = patterns
                .iter()
                .find(|p| self.part_covered(req, &call, c, p))?;
            if !used.iter().any(|u| std::ptr::eq(*u, p)) {
                used.push(p);
            }
        }
        Some(used)
    }

    /// A command line's simple commands, when it parses into some and none
    /// redirects (a redirect's target is judged as a write of its own).
    fn plain_parts(&self, req: &Request) -> Option<Vec<Command>> {
        if req.capability.action != Action::ProcSpawn {
            return None;
        }
        match shell::analyze(&req.capability.resource) {
            Analysis::Parsed(commands)
                if !commands.is_empty() && commands.iter().all(|c| c.redirects.is_empty()) =>
            {
                Some(commands)
            }
            _ => None,
        }
    }

    /// The `--approve` flags a refusal of `req` suggests: ones that
    /// [`Kernel::covering`] says grant it, and nothing wider. The
    /// capability spelled exactly, when that grants it; for a command line
    /// of several parts (each judged on its own, with the call's `env` and
    /// its own assignments), one flag for each part, spelled as it is
    /// judged.
    pub fn approve_flag(&self, req: &Request) -> String {
        let literal = approval::literal_pattern(req.capability);
        let Some(commands) = self.plain_parts(req) else {
            return approval::flag_of(&literal);
        };
        if self.grants(std::slice::from_ref(&literal), req) {
            return approval::flag_of(&literal);
        }
        let call = CallInput::of(req);
        let mut parts: Vec<String> = Vec::new();
        for c in commands.iter().filter(|c| !c.words.is_empty()) {
            let text = format!(
                "proc:spawn:{}",
                pattern::escaped(&self.part_of(req, &call, c).cap.resource)
            );
            if !parts.contains(&text) {
                parts.push(text);
            }
        }
        if self.grants(&parts, req) {
            let flags: Vec<String> = parts.iter().map(|p| approval::flag_of(p)).collect();
            return flags.join(" ");
        }
        approval::flag_of(&literal)
    }

    /// Whether pre-approving every one of `patterns` grants `req`.
    fn grants(&self, patterns: &[String], req: &Request) -> bool {
        let parsed: Result<Vec<Pattern>, _> = patterns
            .iter()
            .map(|p| Pattern::parse(p, &self.vars))
            .collect();
        parsed.is_ok_and(|ps| self.covering(&ps, req).is_some())
    }

    /// Where a process flow runs: the first policy whose `route` has an
    /// opinion ([`Placement`]), or `None` when none has. A failing hook is a
    /// deny.
    pub fn route(&self, req: &Request) -> Result<Option<Placement>, Verdict> {
        let policies = self.policies.borrow();
        for p in policies.iter() {
            match p.route(req) {
                Ok(Some(placement)) => return Ok(Some(placement)),
                Ok(None) => {}
                Err(e) => return Err(verdict(Decision::Deny, p.hook_name("route"), e)),
            }
        }
        Ok(None)
    }

    /// Every policy's `containers` declarations, by policy name, in load
    /// order.
    pub fn containers(&self) -> Vec<(String, Declarations)> {
        self.declared(Policy::containers)
    }

    /// How long an ask may wait for its answer: the shortest
    /// `askTimeoutMs` of the policies, else [`approval::DEFAULT_ASK_TIMEOUT`].
    pub fn ask_timeout(&self) -> std::time::Duration {
        self.policies
            .borrow()
            .iter()
            .filter_map(|p| p.ask_timeout())
            .min()
            .unwrap_or(approval::DEFAULT_ASK_TIMEOUT)
    }

    /// Every policy's `providers` declarations, by policy name, in load
    /// order.
    pub fn providers(&self) -> Vec<(String, Declarations)> {
        self.declared(Policy::providers)
    }

    /// Every policy's `lsp` declarations (language servers), by policy
    /// name, in load order.
    pub fn lsp(&self) -> Vec<(String, Declarations)> {
        self.declared(Policy::lsp)
    }

    /// The test flow's runner, as the one policy that declares `test`
    /// wrote it, with that policy's name; two policies declaring one is an
    /// error (which runner a run uses must not depend on load order).
    pub fn test_runner(&self) -> Result<Option<(String, serde_json::Value)>, String> {
        let mut found: Option<(String, serde_json::Value)> = None;
        for p in self.policies.borrow().iter() {
            let Some(test) = p.test_runner() else {
                continue;
            };
            if let Some((first, _)) = &found {
                return Err(format!("policy {} declares `test`, and so does policy {first}; declare the test runner in one policy", p.name()));
            }
            found = Some((p.name(), test));
        }
        Ok(found)
    }

    /// The explore flow's model, as the one policy that declares `explore`
    /// wrote it, with that policy's name; two policies declaring one is an
    /// error (which model reads the workspace must not depend on load
    /// order).
    pub fn explore(&self) -> Result<Option<(String, serde_json::Value)>, String> {
        let mut found: Option<(String, serde_json::Value)> = None;
        for p in self.policies.borrow().iter() {
            let Some(table) = p.explore() else { continue };
            if let Some((first, _)) = &found {
                return Err(format!("policy {} declares `explore`, and so does policy {first}; declare explore's model in one policy", p.name()));
            }
            found = Some((p.name(), table));
        }
        Ok(found)
    }

    /// Asks the `test.judge` function of policy `policy` about `run`
    /// (see [`Policy::judge`]).
    pub fn judge(
        &self,
        policy: &str,
        run: &serde_json::Value,
    ) -> Result<Option<serde_json::Value>, String> {
        let policies = self.policies.borrow();
        match policies.iter().find(|p| p.name() == policy) {
            Some(p) => p.judge(run),
            None => Err(format!(
                "policy {policy}, whose judge this is, is no longer loaded"
            )),
        }
    }

    fn declared(&self, of: fn(&Policy) -> Declarations) -> Vec<(String, Declarations)> {
        self.policies
            .borrow()
            .iter()
            .map(|p| (p.name(), of(p)))
            .filter(|(_, d)| !d.is_empty())
            .collect()
    }
}

/// What a call's input says about the commands it runs: its `env`, as
/// leading assignments (`NAME=value`, sorted by name; the value of a
/// credential-shaped name that is not in [`programs::VARS`] shown as
/// `[redacted]`), and whether it gives them data on standard input
/// (`stdin`, or a `script` fed to its interpreter).
#[derive(Debug, Clone, Default)]
pub struct CallInput {
    env: Vec<String>,
    fed: bool,
}

impl CallInput {
    fn of(req: &Request) -> CallInput {
        let mut entries: Vec<(&String, &str)> = req
            .input
            .get("env")
            .and_then(|e| e.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k, v.as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        let env = entries
            .into_iter()
            .map(|(name, value)| {
                // A table variable's value is what the policy judges
                // (GIT_CONFIG_KEY_0 looks like a credential, and is not).
                if crate::audit::redact::credential_name(name) && programs::var_of(name).is_none() {
                    format!("{name}={}", crate::audit::redact::MARK)
                } else {
                    format!("{name}={}", shell::quote(value))
                }
            })
            .collect();
        // A `script` is standard input to its interpreter, and to what it
        // starts; a shell's script is also checked as a line of its own,
        // so the line that starts that shell is not fed unknown input.
        let text = |field: &str| req.input.get(field).and_then(|v| v.as_str());
        let interpreter = text("interpreter").unwrap_or("bash");
        let shell = matches!(
            interpreter.rsplit('/').next().unwrap_or(interpreter),
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash"
        );
        let script = text("script");
        let fed = text("stdin").is_some()
            || script.is_some_and(|s| !shell || s == req.capability.resource);
        CallInput { env, fed }
    }
}

/// One simple command as the kernel judges it.
struct Part {
    /// Its assignments (the call's `env` first) and words, as text.
    cap: Capability,
    /// The same command with its program spelled another way that surely
    /// names the same file (see [`Kernel::spellings`]).
    trusted: Vec<Capability>,
    /// Other spellings, which deny rules see too.
    other: Vec<Capability>,
    /// The forms of [`programs`] it holds.
    forms: Vec<programs::Form>,
    /// Its program is only known at run time.
    dynamic: bool,
    /// Its program as written.
    program: String,
}

impl Part {
    fn judged(&self) -> Judged<'_> {
        Judged {
            cap: &self.cap,
            trusted: &self.trusted,
            other: &self.other,
            forms: &self.forms,
            dynamic: self.dynamic,
            exactly: false,
            program: &self.program,
        }
    }
}

/// What [`Kernel::decide_inner`] needs beyond the capability itself.
struct Judged<'a> {
    cap: &'a Capability,
    trusted: &'a [Capability],
    other: &'a [Capability],
    forms: &'a [programs::Form],
    dynamic: bool,
    /// Only a rule naming the capability exactly grants it.
    exactly: bool,
    program: &'a str,
}

impl<'a> Judged<'a> {
    fn plain(cap: &'a Capability) -> Judged<'a> {
        Judged {
            cap,
            trusted: &[],
            other: &[],
            forms: &[],
            dynamic: false,
            exactly: false,
            program: "",
        }
    }

    /// The spellings a rule is matched against: for a deny rule
    /// (`Spelled::Any`), all of them; otherwise the one written and those
    /// that surely name the same program.
    fn spelled_as(&self, which: Spelled) -> impl Iterator<Item = &Capability> {
        let other: &[Capability] = match which {
            Spelled::Any => self.other,
            Spelled::Surely => &[],
        };
        std::iter::once(self.cap)
            .chain(self.trusted.iter())
            .chain(other.iter())
    }

    /// The first form none of `patterns` names, if any (see
    /// [`programs::Form`]): a pattern naming the command exactly names them
    /// all; one granting every command line names every program form but
    /// no variable.
    fn unnamed_by(&self, patterns: &[&Pattern]) -> Option<&'a programs::Form> {
        let exact = |p: &&Pattern| {
            self.spelled_as(Spelled::Surely)
                .any(|c| p.grants_explicitly(c))
        };
        if self.forms.is_empty() || patterns.iter().any(exact) {
            return None;
        }
        let any = patterns.iter().any(|p| p.any_resource(Action::ProcSpawn));
        let spelled: Vec<programs::Form> = patterns
            .iter()
            .filter(|p| !p.any_resource(Action::ProcSpawn))
            .filter_map(|p| p.resource().and_then(programs::rule_forms))
            .flatten()
            .collect();
        self.forms.iter().find(|f| {
            if any && !f.variable {
                return false;
            }
            f.implied
                || !spelled
                    .iter()
                    .any(|g| g.key == f.key && programs::value_matches(&g.value, &f.value))
        })
    }
}

/// Which spellings of a command a rule is matched against.
#[derive(Clone, Copy)]
enum Spelled {
    /// Every one: deny rules.
    Any,
    /// The one written and those that surely name the same file.
    Surely,
}

/// Other spellings of a command (see [`Kernel::spellings`]).
#[derive(Debug, Default)]
struct Spellings {
    trusted: Vec<String>,
    other: Vec<String>,
    /// The file names its program resolves to, when they differ from the
    /// one written (`vim.basic` for `vi`): their forms count too.
    names: Vec<String>,
}

/// A program found through PATH.
struct Resolved {
    path: PathBuf,
    /// With symlinks resolved.
    real: PathBuf,
    trusted: bool,
}

/// `text` after the assignments `env`.
fn with_env(env: &[String], text: &str) -> String {
    if env.is_empty() {
        return text.to_string();
    }
    format!("{} {text}", env.join(" "))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Why an allow rule does not grant a command holding `form`.
fn unnamed_reason(cap: &Capability, form: &programs::Form, rule: &str) -> String {
    let exact = format!("p.allow \"proc:spawn:{}\"", pattern::escaped(&cap.resource));
    if form.variable {
        format!(
            "`{}` sets {}, which no wildcard grants ({}); the allow rule \"{rule}\" does not spell it. Grant it with a rule that spells the assignment, e.g. {exact}",
            cap.resource,
            form.key.trim_end_matches('='),
            form.why
        )
    } else if form.implied {
        format!(
            "`{}`: {}; only a rule naming the command exactly grants that, not the allow rule \"{rule}\": {exact}",
            cap.resource, form.why
        )
    } else {
        format!(
            "`{}` uses `{}`: {}; the allow rule \"{rule}\" does not name that form. Grant it with a rule that spells it, e.g. {exact}",
            cap.resource, form.key, form.why
        )
    }
}

/// Why an allow rule does not grant writing a repository control file.
fn control_reason(cap: &Capability, part: &str, rule: &str) -> String {
    format!(
        "{} is a repository control file ({part}): git runs code, or reads another configuration, from it in later commands, so only a rule naming it grants it, not the allow rule \"{rule}\". Grant it with p.allow \"fs:write:{}\", or a rule spelling `{part}` (such as `…/{part}/**`)",
        cap.resource,
        pattern::escaped(&cap.resource)
    )
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
        source: None,
    }
}

/// The first rule with `decision` that `hit` accepts, across all policies.
fn first_rule(
    policies: &[Policy],
    decision: Decision,
    mut hit: impl FnMut(&Rule) -> bool,
) -> Option<Verdict> {
    policies.iter().find_map(|p| {
        let rule = p
            .rules()
            .iter()
            .find(|r| r.decision == decision && hit(r))?;
        Some(rule_verdict(p, rule))
    })
}

/// Which deny an `except` took the capability out of, for the reason:
/// the first deny that matches a spelling of it only where its `except`
/// names that spelling.
fn excepted(policies: &[Policy], judged: &Judged) -> Option<String> {
    policies.iter().find_map(|p| {
        p.rules().iter().find_map(|r| {
            // Most denies have no except: no second match for them on
            // every capability they do not deny.
            if r.decision != Decision::Deny || r.except.is_empty() {
                return None;
            }
            let spelling = judged
                .spelled_as(Spelled::Any)
                .find(|c| r.pattern.matches(c) && r.excepts(c))?;
            let by = r.except.iter().find(|e| e.matches(spelling))?;
            Some(format!(
                "the deny \"{}\" ({} of {}) does not apply: its except \"{}\" names it",
                r.pattern.as_str(),
                r.at,
                p.name(),
                by.as_str()
            ))
        })
    })
}

/// The verdict `rule` of `policy` gives, naming it.
fn rule_verdict(policy: &Policy, rule: &Rule) -> Verdict {
    let decision = rule.decision;
    let by = format!(
        "{} \"{}\" ({} of {})",
        decision,
        rule.pattern.as_str(),
        rule.at,
        policy.name()
    );
    let reason = rule.reason.clone().unwrap_or_else(|| match decision {
        Decision::Allow => "the policy allows it".into(),
        Decision::Deny => "the policy denies it".into(),
        Decision::Ask => "the policy asks a person first".into(),
    });
    Verdict {
        source: rule.source.clone(),
        ..verdict(decision, by, reason)
    }
}

/// The verdict policy `p`'s `decide` hook gives, naming it and where it is
/// defined.
fn hook_verdict(p: &Policy, decision: Decision, reason: String) -> Verdict {
    Verdict {
        source: p.hook_source("decide"),
        ..verdict(decision, p.hook_name("decide"), reason)
    }
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
                strictest = Some(hook_verdict(p, decision, reason));
            }
            Err(e) => return Err(hook_verdict(p, Decision::Deny, e)),
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

#[cfg(test)]
mod tests {
    use super::pattern::{Pattern, Vars};
    use super::policy::{shipped, Policy};
    use super::{Action, Kernel};

    fn kernel(policy: &str, ceiling: &[&str]) -> Kernel {
        let vars = Vars::new("/w".into());
        let policies = vec![Policy::load(shipped(policy).unwrap(), vars.clone())];
        let ceiling = ceiling
            .iter()
            .map(|c| Pattern::parse(c, &vars).unwrap())
            .collect();
        Kernel::new(policies, ceiling, vars)
    }

    #[test]
    fn an_action_is_denied_every_time_only_by_a_whole_deny_a_ceiling_or_a_broken_policy() {
        let readonly = kernel("readonly", &[]);
        for a in [
            Action::FsWrite,
            Action::ProcSpawn,
            Action::NetGet,
            Action::NetPost,
            Action::ModelCall,
        ] {
            assert!(readonly.denies_every(a), "{a:?}");
        }
        assert!(!readonly.denies_every(Action::FsRead));
        let default = kernel("default", &[]);
        assert!(
            Action::ALL.iter().all(|&a| !default.denies_every(a)),
            "the default asks, never denies an action whole"
        );
        let ceiling = kernel("default", &["fs:read:/w/**"]);
        assert!(!ceiling.denies_every(Action::FsRead));
        assert!(ceiling.denies_every(Action::FsWrite) && ceiling.denies_every(Action::ProcSpawn));
    }
}
