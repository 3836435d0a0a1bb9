//! Answering an ask: a pre-approval (`--approve PATTERN`), an earlier "yes
//! for the rest of the run", or the person at the terminal. With nobody to
//! ask, the call fails `permission_required`, naming the capability and the
//! flag that would grant it.

use super::pattern::Pattern;
use super::policy::{Request, Verdict};
use super::{Action, Capability};
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
    /// The task whose call asks (`0`, `0.2`): a run serving several
    /// callers (`sluice mcp`) puts the ask to the caller that started it.
    pub task: String,
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
    /// How long the ask may wait for its answer (the policies'
    /// `askTimeoutMs`): an approver that puts it to someone away from the
    /// run answers [`Answer::Unanswered`] after that.
    pub wait: std::time::Duration,
}

/// How long an ask waits when no policy sets `askTimeoutMs`: one hour.
pub const DEFAULT_ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

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
/// web page, an MCP client) given to `RuntimeBuilder::approver`. It may
/// block until someone answers: an ask a call makes before it runs is
/// answered on tokio's blocking pool while the run's other tasks go on, one
/// ask at a time (an ask made while a call runs, a redirect's host, waits on
/// the run's thread). `Send + Sync` so one approver can serve many runs and
/// threads.
pub trait Approver: Send + Sync {
    /// Answers one ask.
    fn ask(&self, ask: &Ask) -> Answer;

    /// Who answers, as the record and errors name them (`the person at the
    /// terminal`).
    fn who(&self) -> String {
        "the embedding program's approver".into()
    }

    /// Whether its asks wait for each other, one shown at a time (one
    /// person at one terminal). An approver that puts each ask to the
    /// person behind the caller that made it (`sluice mcp`'s clients) says
    /// no, so one client's unanswered question does not hold another's.
    fn one_at_a_time(&self) -> bool {
        true
    }

    /// Puts `ask` without waiting for its answer, which the returned
    /// future brings: for an approver whose person answers through another
    /// channel (an MCP client), so that no thread waits while they decide.
    /// `None` (the default): [`Approver::ask`] is called on tokio's blocking
    /// pool instead. Used only by an approver that is not
    /// [`Approver::one_at_a_time`].
    fn put(&self, ask: &Ask) -> Option<Later> {
        let _ = ask;
        None
    }

    /// Whose "yes for the rest of the run" answers an ask of `task` shares
    /// ([`Shared::Run`], the default: every ask of the run).
    fn shares(&self, task: &str) -> Shared {
        let _ = task;
        Shared::Run
    }
}

/// An answer [`Approver::put`] will bring.
pub type Later = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>>;

/// Whose "yes for the rest of the run" an ask shares ([`Approver::shares`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Shared {
    /// Every ask of the run: one person answers them all.
    Run,
    /// The asks of one caller alone (an MCP client's session, by an id
    /// nobody else is given): another caller's yes covers none of them.
    Caller(String),
    /// None: the answer counts once, as for [`Ask::once_only`] (a caller
    /// whose later requests cannot be told from another's).
    Nobody,
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
    approver: Option<Arc<dyn Approver>>,
    /// The one prompt and the answers for the run, shared with the threads
    /// that ask.
    turns: Arc<Turns>,
    /// How long an ask may wait ([`Ask::wait`]).
    wait: std::time::Duration,
}

/// What every ask of a run shares, on whichever thread it is asked.
#[derive(Default)]
struct Turns {
    /// Held while the approver is asked, so asks are shown one at a time.
    /// Only the asking thread holds it, and it needs nothing from the run's
    /// thread to let go, so the run's thread may block on it.
    prompt: Mutex<()>,
    /// What "for the rest of the run" answers are remembered by
    /// ([`remembered_key`]).
    remembered: Mutex<HashSet<String>>,
}

impl Turns {
    fn remembers(&self, key: &str) -> bool {
        lock(&self.remembered).contains(key)
    }
}

/// `mutex`'s guard, also after a panicking approver poisoned it: the set
/// and the turn it guards stay whole whatever an approver does.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An ask nothing answered yet: what the approver is shown, and what a "for
/// the run" answer to it is remembered by (`None`: [`Ask::once_only`]).
/// Plain data and `Arc`s, so it can be asked on another thread.
struct Pending {
    approver: Arc<dyn Approver>,
    turns: Arc<Turns>,
    ask: Ask,
    key: Option<String>,
    /// The `--approve` flag a refusal suggests: one that grants the call.
    flag: String,
}

/// How a pending ask was settled once it had the prompt.
enum Reply {
    /// An answer for the run given while it waited covers it: not shown.
    Remembered,
    /// The approver's answer.
    Answered(Answer),
}

impl Pending {
    /// Waits for the prompt, then asks, unless an answer for the run given
    /// meanwhile covers it. A "for the run" answer is remembered before the
    /// prompt is let go, so the next waiting ask sees it. Blocks.
    fn answer(&self) -> Reply {
        let _turn = self
            .approver
            .one_at_a_time()
            .then(|| lock(&self.turns.prompt));
        if let Some(key) = &self.key {
            if self.turns.remembers(key) {
                return Reply::Remembered;
            }
        }
        let answer = self.approver.ask(&self.ask);
        self.remember(&answer);
        Reply::Answered(answer)
    }

    /// Remembers a "for the run" answer, for the next ask that shares it.
    fn remember(&self, answer: &Answer) {
        if let (Answer::ForRun, Some(key)) = (answer, &self.key) {
            lock(&self.turns.remembered).insert(key.clone());
        }
    }

    /// [`Pending::answer`] on tokio's blocking pool, so the run's other
    /// tasks go on while the approver takes its time; on the caller's
    /// thread outside a runtime. An approver that puts its asks
    /// ([`Approver::put`]) is awaited instead, holding no thread. An
    /// approver's panic reaches the caller, as it would on the caller's
    /// thread.
    async fn answer_aside(self) -> Reply {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.answer();
        }
        if !self.approver.one_at_a_time() {
            if self.key.as_ref().is_some_and(|k| self.turns.remembers(k)) {
                return Reply::Remembered;
            }
            if let Some(later) = self.approver.put(&self.ask) {
                let answer = later.await;
                self.remember(&answer);
                return Reply::Answered(answer);
            }
        }
        match tokio::task::spawn_blocking(move || self.answer()).await {
            Ok(reply) => reply,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime shut down before the ask started: nobody was asked.
            Err(e) => Reply::Answered(Answer::Unanswered(format!(
                "the run ended before the ask was shown ({e})"
            ))),
        }
    }

    /// Who answers and whether the answer counts once, for
    /// [`concluded`] once the ask itself has moved to another thread.
    fn answerer(&self) -> Answerer {
        Answerer {
            approver: self.approver.clone(),
            once_only: self.key.is_none(),
            flag: self.flag.clone(),
        }
    }
}

/// Who answered a pending ask, and whether the answer counts once.
struct Answerer {
    approver: Arc<dyn Approver>,
    once_only: bool,
    flag: String,
}

/// How one use of a capability is approved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// As the rest of the run: an earlier "for the run" covers it, and a
    /// new one is remembered.
    Run,
    /// This once alone ([`Ask::once_only`]).
    Once,
}

impl Approvals {
    /// Pre-approvals answered by one of the built-in approvers.
    pub fn new(preapproved: Vec<Pattern>, prompt: Prompt) -> Approvals {
        let approver = match prompt {
            Prompt::Terminal => Some(Arc::new(Terminal) as Arc<dyn Approver>),
            Prompt::Unattended => None,
        };
        Approvals::with(preapproved, approver)
    }

    /// Pre-approvals answered by `approver` (`None`: nobody).
    pub fn with(preapproved: Vec<Pattern>, approver: Option<Arc<dyn Approver>>) -> Approvals {
        Approvals {
            preapproved,
            approver,
            turns: Arc::default(),
            wait: DEFAULT_ASK_TIMEOUT,
        }
    }

    /// Asks wait at most `wait` for their answers (the policies'
    /// `askTimeoutMs`).
    pub fn waiting(mut self, wait: std::time::Duration) -> Approvals {
        self.wait = wait;
        self
    }

    /// Grants `req`'s capability for this one use, whatever was approved
    /// before: only a pre-approval naming it exactly or the approver (whose
    /// "for the run" counts once). For asks that must never ride on an
    /// earlier yes, like running a command less confined. Blocks the
    /// caller's thread while it waits for the prompt and the answer.
    ///
    /// The approver is asked as at step 4 (put, or on tokio's blocking
    /// pool) while the call's task waits: the run's other tasks (a served
    /// run's other requests) go on meanwhile.
    pub async fn approve_once(&self, req: &Request<'_>, verdict: &Verdict) -> FlowResult<String> {
        if let Some(p) = self
            .preapproved
            .iter()
            .find(|p| p.grants_explicitly(req.capability))
        {
            return Ok(format!("--approve '{}'", p.text()));
        }
        // Only a pre-approval naming the capability exactly grants it once.
        let flag = approve_flag(req.capability);
        match self.pending(req, verdict, Use::Once, flag)? {
            Ok(granted) => Ok(granted),
            Err(pending) => {
                let answerer = pending.answerer();
                let reply = pending.answer_aside().await;
                concluded(req.capability, verdict, answerer, reply)
            }
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
    /// run's, so a program is resolved as its policies allow). Blocks the
    /// caller's thread while it waits for the prompt and the answer: for an
    /// ask made while a call runs, through the sync `Authority`.
    pub fn approve_with(
        &self,
        kernel: &super::Kernel,
        req: &Request,
        verdict: &Verdict,
    ) -> FlowResult<String> {
        match self.settled(kernel, req, verdict)? {
            Ok(granted) => Ok(granted),
            Err(pending) => concluded(
                req.capability,
                verdict,
                pending.answerer(),
                pending.answer(),
            ),
        }
    }

    /// [`Approvals::approve_with`] for a call about to run: what the
    /// pre-approvals and the answers for the run settle is settled here, on
    /// the caller's thread, and the approver is asked on tokio's blocking
    /// pool while the caller's task waits, so the run's other tasks go on.
    pub async fn approve_aside(
        &self,
        kernel: &super::Kernel,
        req: &Request<'_>,
        verdict: &Verdict,
    ) -> FlowResult<String> {
        match self.settled(kernel, req, verdict)? {
            Ok(granted) => Ok(granted),
            Err(pending) => {
                let answerer = pending.answerer();
                let reply = pending.answer_aside().await;
                concluded(req.capability, verdict, answerer, reply)
            }
        }
    }

    /// A pre-approval (judged by `kernel`) or an answer for the run that
    /// grants `req`, else the ask to put; `permission_required` with nobody
    /// to ask.
    fn settled(
        &self,
        kernel: &super::Kernel,
        req: &Request,
        verdict: &Verdict,
    ) -> FlowResult<Result<String, Pending>> {
        if let Some(used) = kernel.covering(&self.preapproved, req) {
            let flags: Vec<String> = used
                .iter()
                .map(|p| format!("--approve '{}'", p.text()))
                .collect();
            return Ok(Ok(flags.join(", ")));
        }
        self.pending(req, verdict, Use::Run, kernel.approve_flag(req))
    }

    /// The ask to put for `req`, unless an answer for the run already
    /// grants it (never a [`Use::Once`]); `permission_required` with nobody
    /// to ask.
    fn pending(
        &self,
        req: &Request,
        verdict: &Verdict,
        how: Use,
        flag: String,
    ) -> FlowResult<Result<String, Pending>> {
        let Some(approver) = &self.approver else {
            return Err(required(req.capability, verdict, &flag));
        };
        // An answer for the rest of the run covers the same command with the
        // same environment, asked by whoever shares the answers.
        let shared = match how {
            Use::Once => Shared::Nobody,
            Use::Run => approver.shares(req.task),
        };
        let key = match &shared {
            Shared::Run => Some(remembered_key(req)),
            Shared::Caller(who) => Some(format!("{who}\n{}", remembered_key(req))),
            Shared::Nobody => None,
        };
        if key.as_deref().is_some_and(|k| self.turns.remembers(k)) {
            return Ok(Ok(for_the_run(approver.as_ref())));
        }
        Ok(Err(Pending {
            approver: approver.clone(),
            turns: self.turns.clone(),
            ask: shown(req, verdict, key.is_none(), self.wait),
            key,
            flag,
        }))
    }
}

fn for_the_run(approver: &dyn Approver) -> String {
    format!("{}, for the rest of the run", approver.who())
}

/// What the reply to an ask grants, as the record names who granted it, or
/// the error the call fails with.
fn concluded(
    cap: &Capability,
    verdict: &Verdict,
    answerer: Answerer,
    reply: Reply,
) -> FlowResult<String> {
    let Answerer {
        approver,
        once_only,
        flag,
    } = answerer;
    let who = approver.who();
    match reply {
        Reply::Remembered => Ok(for_the_run(approver.as_ref())),
        Reply::Answered(Answer::ForRun) if !once_only => Ok(for_the_run(approver.as_ref())),
        Reply::Answered(Answer::Once | Answer::ForRun) => Ok(format!("{who}, once")),
        Reply::Answered(Answer::No(reason)) => Err(refused(cap, &who, reason, !once_only)),
        Reply::Answered(Answer::Unanswered(why)) => Err(unanswered(cap, verdict, &who, why, &flag)),
    }
}

/// The ask an approver is shown for `req`.
fn shown(req: &Request, verdict: &Verdict, once_only: bool, wait: std::time::Duration) -> Ask {
    Ask {
        capability: req.capability.to_string(),
        flow: req.flow.to_string(),
        task: req.task.to_string(),
        by: verdict.by.clone(),
        reason: verdict.reason.clone(),
        input: summary(req.input),
        justification: req
            .input
            .get("justification")
            .and_then(|j| j.as_str())
            .map(str::to_string),
        once_only,
        wait,
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
fn unanswered(
    cap: &Capability,
    verdict: &Verdict,
    who: &str,
    why: String,
    flag: &str,
) -> FlowError {
    let e = required(cap, verdict, flag);
    if who == TERMINAL {
        return e.with("terminal", why);
    }
    FlowError {
        message: format!(
            "{cap} needs approval ({}: {}) and {who} could not be asked: {why}. \
             Pre-approve it with {flag}, or change the policy.",
            verdict.by, verdict.reason
        ),
        ..e
    }
    .with("approver", why)
}

/// What a "for the rest of the run" answer is remembered by: the
/// capability; for a command, the environment its call gives it and the
/// folder it runs in (`rm -r build` in one folder is no yes for it in
/// another); for a
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
    if cap.action != Action::ProcSpawn {
        return cap.to_string();
    }
    let mut key = cap.to_string();
    if let Some(cwd) = req.cwd {
        key.push_str(&format!(" in {}", cwd.display()));
    }
    if let Some(env) = req.input.get("env") {
        key.push_str(&format!(" with env {env}"));
    }
    key
}

fn required(cap: &Capability, v: &Verdict, flag: &str) -> FlowError {
    let flag = flag.to_string();
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
pub fn approve_flag(cap: &Capability) -> String {
    flag_of(&literal_pattern(cap))
}

/// The pattern that names `cap` alone.
pub fn literal_pattern(cap: &Capability) -> String {
    format!("{}:{}", cap.action.as_str(), literal(&cap.resource))
}

/// `--approve 'PATTERN'`, single-quoted as a shell takes it.
pub fn flag_of(pattern: &str) -> String {
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

/// `text` with control and invisible (format) characters shown as escapes
/// (`\n`, `\u{1b}`, `\u{202e}`), as a person is shown a call: no call can
/// rewrite the question it is asked about, by moving the cursor, hiding
/// text, reordering it or adding lines.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || crate::fsops::text::invisible(c) {
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

    mod turns {
        //! The one prompt: asks wait their turn, on the blocking pool or on
        //! the run's thread, and one that waited re-checks the answers for
        //! the run before it is shown.

        use super::super::*;
        use crate::call::{Capability, Tier};
        use crate::kernel::pattern::Vars;
        use crate::kernel::policy::Decision;
        use crate::kernel::Kernel;
        use std::rc::Rc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::mpsc;
        use std::time::Duration;
        use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

        /// Shows each ask's capability to the test as it comes in, then
        /// waits for the test's answer (at most 5 s); counts the asks it
        /// holds at once.
        struct Gated {
            shown: UnboundedSender<String>,
            answers: Mutex<mpsc::Receiver<Answer>>,
            inside: AtomicUsize,
            most: AtomicUsize,
        }

        impl Approver for Gated {
            fn ask(&self, ask: &Ask) -> Answer {
                let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                self.shown.send(ask.capability.clone()).unwrap();
                // Bounded, so a test that fails lets its runtime end.
                let answer = self
                    .answers
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(5));
                self.inside.fetch_sub(1, Ordering::SeqCst);
                answer.unwrap_or_else(|_| Answer::Unanswered("the test never answered".into()))
            }
        }

        struct Fixture {
            approvals: Rc<Approvals>,
            kernel: Rc<Kernel>,
            gated: Arc<Gated>,
            shown: UnboundedReceiver<String>,
            answer: mpsc::Sender<Answer>,
        }

        fn fixture() -> Fixture {
            let (shown_tx, shown) = unbounded_channel();
            let (answer, answers) = mpsc::channel();
            let gated = Arc::new(Gated {
                shown: shown_tx,
                answers: Mutex::new(answers),
                inside: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
            });
            let approver = gated.clone() as Arc<dyn Approver>;
            Fixture {
                approvals: Rc::new(Approvals::with(Vec::new(), Some(approver))),
                kernel: Rc::new(Kernel::new(Vec::new(), Vec::new(), Vars::new("/w".into()))),
                gated,
                shown,
                answer,
            }
        }

        fn write(path: &str) -> Capability {
            Capability {
                action: Action::FsWrite,
                resource: path.into(),
            }
        }

        fn asked() -> Verdict {
            Verdict {
                decision: Decision::Ask,
                by: "rules[1]".into(),
                reason: "the test asks".into(),
                source: None,
            }
        }

        fn request<'a>(cap: &'a Capability, input: &'a serde_json::Value) -> Request<'a> {
            Request {
                capability: cap,
                flow: "write",
                tier: Tier::Compensable,
                input,
                run_id: "run",
                task: "0",
                script: "test.lua",
                cwd: None,
            }
        }

        /// `cap` approved as a call about to run approves it.
        async fn aside(f: (Rc<Approvals>, Rc<Kernel>), cap: Capability) -> FlowResult<String> {
            let input = serde_json::json!({});
            f.0.approve_aside(&f.1, &request(&cap, &input), &asked())
                .await
        }

        fn shared(f: &Fixture) -> (Rc<Approvals>, Rc<Kernel>) {
            (f.approvals.clone(), f.kernel.clone())
        }

        /// Runs `body` on a one-thread runtime, as a run does.
        fn on_the_run_s_thread<F: std::future::Future>(body: F) -> F::Output {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            tokio::task::LocalSet::new().block_on(&rt, body)
        }

        const THEIRS: &str = "the embedding program's approver";

        #[test]
        fn asks_are_shown_one_at_a_time_and_one_for_the_run_answers_the_identical_ask_that_waited()
        {
            let mut f = fixture();
            let (a, b, c) = (write("/w/a"), write("/w/a"), write("/w/c"));
            on_the_run_s_thread(async {
                let tasks = [a, b, c].map(|cap| tokio::task::spawn_local(aside(shared(&f), cap)));
                let mut shown = Vec::new();
                while shown.len() < 2 {
                    let cap = f.shown.recv().await.unwrap();
                    // While it is unanswered, no other ask is shown.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    assert!(
                        f.shown.try_recv().is_err(),
                        "a second ask was shown beside {cap}"
                    );
                    let answer = if cap == "fs:write:/w/a" {
                        Answer::ForRun
                    } else {
                        Answer::Once
                    };
                    f.answer.send(answer).unwrap();
                    shown.push(cap);
                }
                let mut granted = Vec::new();
                for t in tasks {
                    granted.push(t.await.unwrap().unwrap());
                }
                shown.sort();
                assert_eq!(shown, ["fs:write:/w/a", "fs:write:/w/c"]);
                assert_eq!(
                    granted,
                    [
                        format!("{THEIRS}, for the rest of the run"),
                        format!("{THEIRS}, for the rest of the run"),
                        format!("{THEIRS}, once"),
                    ]
                );
            });
            assert!(
                f.shown.try_recv().is_err(),
                "the identical ask was shown again"
            );
            assert_eq!(f.gated.most.load(Ordering::SeqCst), 1);
        }

        #[test]
        fn an_ask_on_the_run_s_thread_waits_for_the_turn_held_aside_and_rides_on_its_answer() {
            let mut f = fixture();
            on_the_run_s_thread(async {
                let first = tokio::task::spawn_local(aside(shared(&f), write("/w/a")));
                assert_eq!(f.shown.recv().await.unwrap(), "fs:write:/w/a");
                let answer = f.answer.clone();
                let person = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(150));
                    answer.send(Answer::ForRun).unwrap();
                });
                // Blocks the run's thread (a redirect's ask mid-execute) until
                // the blocking pool's ask is answered: nothing there needs
                // this thread.
                let cap = write("/w/a");
                let input = serde_json::json!({});
                let req = request(&cap, &input);
                let got = f.approvals.approve_with(&f.kernel, &req, &asked());
                assert_eq!(got.unwrap(), format!("{THEIRS}, for the rest of the run"));
                person.join().unwrap();
                assert_eq!(
                    first.await.unwrap().unwrap(),
                    format!("{THEIRS}, for the rest of the run")
                );
            });
            assert!(f.shown.try_recv().is_err(), "the waiting ask was shown");
        }

        #[test]
        fn a_once_only_ask_that_waited_for_an_answer_for_the_run_is_still_shown() {
            let mut f = fixture();
            on_the_run_s_thread(async {
                let first = tokio::task::spawn_local(aside(shared(&f), write("/w/a")));
                assert_eq!(f.shown.recv().await.unwrap(), "fs:write:/w/a");
                let answer = f.answer.clone();
                let person = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(150));
                    answer.send(Answer::ForRun).unwrap();
                    answer.send(Answer::ForRun).unwrap();
                });
                let cap = write("/w/a");
                let input = serde_json::json!({});
                let req = request(&cap, &input);
                let got = f.approvals.approve_once(&req, &asked()).await;
                // Its "for the run" counted once.
                assert_eq!(got.unwrap(), format!("{THEIRS}, once"));
                person.join().unwrap();
                first.await.unwrap().unwrap();
            });
            assert_eq!(f.shown.try_recv().unwrap(), "fs:write:/w/a", "asked again");
            assert!(f.shown.try_recv().is_err());
        }

        /// Puts each ask (never blocking), keeping the answer's sender
        /// for the test; shares answers for the run by task: tasks `0.1*`
        /// are one caller, the others another.
        struct Putting {
            put: std::sync::Mutex<Vec<(String, tokio::sync::oneshot::Sender<Answer>)>>,
        }

        impl Approver for Putting {
            fn ask(&self, _: &Ask) -> Answer {
                panic!("a putting approver is never asked on a thread");
            }
            fn one_at_a_time(&self) -> bool {
                false
            }
            fn put(&self, ask: &Ask) -> Option<Later> {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.put.lock().unwrap().push((ask.task.clone(), tx));
                Some(Box::pin(
                    async move { rx.await.unwrap_or(Answer::No(None)) },
                ))
            }
            fn shares(&self, task: &str) -> Shared {
                Shared::Caller(if task.starts_with("0.1") { "a" } else { "b" }.into())
            }
        }

        /// `cap` approved for `task`, as a call about to run approves it.
        async fn put_aside(
            f: (Rc<Approvals>, Rc<Kernel>),
            task: &'static str,
        ) -> FlowResult<String> {
            let cap = write("/w/a");
            let input = serde_json::json!({});
            let req = Request {
                task,
                ..request(&cap, &input)
            };
            f.0.approve_aside(&f.1, &req, &asked()).await
        }

        #[test]
        fn a_put_ask_holds_no_thread_and_a_yes_for_the_run_covers_its_caller_alone() {
            let putting = Arc::new(Putting {
                put: std::sync::Mutex::new(Vec::new()),
            });
            let approvals = Rc::new(Approvals::with(Vec::new(), Some(putting.clone())));
            let kernel = Rc::new(Kernel::new(Vec::new(), Vec::new(), Vars::new("/w".into())));
            let f = || (approvals.clone(), kernel.clone());
            // One blocking thread, held all along: an ask waiting on one would
            // never be answered.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .max_blocking_threads(1)
                .build()
                .unwrap();
            let _busy = rt.spawn_blocking(|| std::thread::sleep(Duration::from_secs(3)));
            tokio::task::LocalSet::new().block_on(&rt, async {
                let open: Vec<_> = (0..4)
                    .map(|_| tokio::task::spawn_local(put_aside(f(), "0.1")))
                    .collect();
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert_eq!(
                    putting.put.lock().unwrap().len(),
                    4,
                    "every ask is open at once"
                );
                let (_, tx) = putting.put.lock().unwrap().remove(0);
                tx.send(Answer::ForRun).unwrap();
                let first = open.into_iter().next().unwrap();
                assert_eq!(
                    first.await.unwrap().unwrap(),
                    format!("{THEIRS}, for the rest of the run")
                );
                // The same caller's identical ask rides on its yes; another
                // caller's is put again.
                let again = put_aside(f(), "0.1.3").await.unwrap();
                assert_eq!(again, format!("{THEIRS}, for the rest of the run"));
                let theirs = tokio::task::spawn_local(put_aside(f(), "0.2"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                let (task, tx) = putting.put.lock().unwrap().pop().unwrap();
                assert_eq!(task, "0.2", "the other caller is asked again");
                tx.send(Answer::No(None)).unwrap();
                assert!(theirs.await.unwrap().is_err());
            });
        }

        #[test]
        fn with_nobody_to_ask_an_ask_is_permission_required_at_once() {
            let approvals = Approvals::with(Vec::new(), None);
            let kernel = Kernel::new(Vec::new(), Vec::new(), Vars::new("/w".into()));
            let e = on_the_run_s_thread(async {
                let cap = write("/w/a");
                let input = serde_json::json!({});
                approvals
                    .approve_aside(&kernel, &request(&cap, &input), &asked())
                    .await
                    .unwrap_err()
            });
            assert_eq!(e.code, ErrorCode::PermissionRequired);
            assert_eq!(e.details["approve"], "--approve 'fs:write:/w/a'");
        }
    }
}
