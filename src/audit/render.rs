//! Text for a terminal: the tables and pages of `sluice audit
//! list|show|verify`. Recorded text is shown, never obeyed (see
//! [`visible`]), and tables are clipped to fit [`WIDTH`].

use super::list::Listing;
use super::show::{Call, Calls, Integrity, ModelTotals, ModelUse, Outcome, Run};
#[cfg(test)]
use super::show::{HeldCalls, RunView};
use super::verify::Verdict;
use super::FlowFacts;
use crate::calendar;
use serde_json::Value;
use std::fmt::Write as _;

/// Tables are laid out to fit a terminal this wide.
pub const WIDTH: usize = 100;

/// The `sluice audit list` table, clipped to fit the terminal.
pub fn render_list(listing: &Listing) -> String {
    if listing.runs.is_empty() {
        return "no runs recorded yet: `sluice run` records each run here\n".to_string();
    }
    let mut table = Table::new(&[
        "ID",
        "SCRIPT",
        "STATUS",
        "CALLS",
        "IRREV",
        "DENIED",
        "TOOK",
        "STARTED (UTC)",
    ]);
    for run in &listing.runs {
        table.row(vec![
            run.id.clone(),
            run.script.clone(),
            run.status.clone(),
            run.calls.to_string(),
            run.irreversible.to_string(),
            run.denials.to_string(),
            run_took(&run.status, run.duration_ms),
            utc(run.started_ms),
        ]);
    }
    let mut out = table.render(1, Clip::Left, &[3, 4, 5]);
    for run in listing.runs.iter().filter(|r| r.unknown_outcomes > 0) {
        let _ = writeln!(
            out,
            "run {}: {} with OUTCOME UNKNOWN (the process died mid-call); `sluice audit show {}` names it",
            visible(&run.id),
            plural(run.unknown_outcomes, "call", "calls"),
            visible(&run.id),
        );
    }
    if listing.total > listing.runs.len() as i64 {
        let _ = writeln!(
            out,
            "({} of {} runs shown; --limit 0 shows all)",
            listing.runs.len(),
            listing.total
        );
    }
    out
}

fn run_took(status: &str, duration_ms: Option<i64>) -> String {
    match duration_ms {
        Some(ms) => took_us(ms.saturating_mul(1000)),
        None if status == "running" => "running".to_string(),
        None => "—".to_string(),
    }
}

/// The header and the timeline of `sluice audit show`, of a view held
/// whole.
#[cfg(test)]
pub fn render_show(view: &RunView, facts: &dyn FlowFacts) -> String {
    let mut out = Vec::new();
    // Writing to memory fails only on a bad call source, and a held one
    // has none.
    let _ = write_show(
        &view.run,
        &view.integrity,
        &HeldCalls(&view.calls),
        facts,
        &mut out,
    );
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes the header and the timeline of `sluice audit show` to `out`,
/// reading `calls` a few times over and holding one call at a time (and
/// what the header counts): a run of any length. The header's chain line
/// says what `integrity` (`verify`'s verdict) says, and the call where the
/// record breaks is marked.
pub fn write_show(
    run: &Run,
    integrity: &Integrity,
    calls: &dyn Calls,
    facts: &dyn FlowFacts,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let mut summary = Summary::default();
    let mut plan = None;
    calls.each(&mut |c| {
        summary.add(&c);
        if c.outcome == Outcome::Ok {
            if let Some(p) = facts.plan(&c.flow, &c.input) {
                plan = Some(plan_section(c.n, p));
            }
        }
        Ok(())
    })?;
    let mut text = render_header(run, integrity, &summary);
    text.push('\n');
    if summary.count == 0 {
        text.push_str("no flow calls recorded\n");
        text.push_str(&broken_note(run, integrity));
        return put(out, &text);
    }
    put(out, &text)?;
    let broken = integrity.problem.as_ref().and_then(|p| p.n);
    write_timeline(run, calls, (&summary, broken), facts, out)?;
    if let Some(plan) = plan {
        put(out, &plan)?;
    }
    put(out, &broken_note(run, integrity))?;
    put(out, &footer(run, &summary))
}

/// Under the timeline, where the record breaks: the marked call and what
/// does not match there (or the run's own fields, seal or link).
fn broken_note(run: &Run, integrity: &Integrity) -> String {
    let Some(p) = &integrity.problem else {
        return String::new();
    };
    let at = match p.n {
        Some(n) => format!("at call #{n} ({BROKEN_MARK} above)"),
        None => "in the run's own record".to_string(),
    };
    let note = format!(
        "CHAIN BROKEN {at}: {}. The record was changed after it was written: what it shows \
from there on is not what was recorded (`sluice audit verify {}`).",
        p.message, run.id
    );
    format!("\n{}", wrapped(&visible(&note)))
}

/// `text` as lines of at most [`WIDTH`] characters, broken at spaces (a
/// word longer than a line keeps a line of its own).
fn wrapped(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The timeline's mark on the call where the record breaks.
const BROKEN_MARK: &str = "✗";

/// The run's latest plan, set by call `#n`: its explanation, then each
/// step with its status (`[x]` completed, `[>]` in progress, `[ ]`
/// pending).
fn plan_section(n: i64, plan: &Value) -> String {
    let mut out = format!("\nPLAN (latest, set by call #{n})");
    if let Some(why) = plan["explanation"].as_str().filter(|w| !w.is_empty()) {
        let _ = write!(out, ": {}", one_line(why));
    }
    out.push('\n');
    let none = Vec::new();
    for step in plan["plan"].as_array().unwrap_or(&none) {
        let status = step["status"].as_str().unwrap_or_default();
        let mark = match status {
            "completed" => "[x]",
            "in_progress" => "[>]",
            _ => "[ ]",
        };
        let text = one_line(step["step"].as_str().unwrap_or_default());
        let _ = writeln!(out, "  {mark} {text} ({status})");
    }
    out.push('\n');
    out
}

fn put(out: &mut dyn std::io::Write, text: &str) -> Result<(), String> {
    out.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the view: {e}"))
}

/// What the notes under the timeline explain, when the run needs them.
fn footer(run: &Run, summary: &Summary) -> String {
    let mut out = String::new();
    if summary.shown.overlapped {
        out.push_str(
            "\nOVERLAPS: the calls that were running while this one ran (tasks run concurrently), from each \
call's recorded start and duration; an overlap shorter than the millisecond the start is kept to may not show.\n",
        );
    }
    if summary.unknown > 0 {
        out.push_str(
            "\nOUTCOME UNKNOWN: the call's intent was recorded and synced before it ran, then the \
process died before its outcome was written; it may or may not have taken effect.\n",
        );
    }
    if summary.stopped {
        out.push_str(
            "\nSTOPPED: the run was asked to stop (Ctrl-C, SIGTERM) while the call ran; sluice stopped it (a \
command is killed at once) and recorded what it had done so far (`--call N` shows its output).\n",
        );
    }
    let _ = writeln!(
        out,
        "`sluice audit show {} --call N` shows call #N whole.",
        visible(&run.id)
    );
    out
}

/// What the header and the timeline's layout need of all of a run's calls,
/// counted one call at a time.
#[derive(Default)]
struct Summary {
    count: i64,
    irreversible: i64,
    denied: i64,
    unknown: i64,
    capped: i64,
    stopped: bool,
    models: ModelTotals,
    shown: Optional,
    first_task: Option<String>,
    resumed: Resumed,
}

/// What a resume's `resumed` line says: the calls replayed, the first that
/// ran live, and where each task went live when they did so apart.
#[derive(Default)]
struct Resumed {
    replayed: i64,
    first_live: Option<i64>,
    /// A replayed call came after the first live one.
    interleaved: bool,
    /// Each task's first live call, in order.
    firsts: Vec<(String, i64)>,
}

impl Summary {
    fn add(&mut self, c: &Call) {
        self.count += 1;
        self.irreversible += i64::from(c.tier == "irreversible");
        self.denied += i64::from(c.denied());
        self.unknown += i64::from(c.outcome == Outcome::Unknown);
        self.capped += i64::from(c.capped);
        self.stopped |= c.stopped_by().is_some();
        self.models.add(c);
        let first = self.first_task.get_or_insert_with(|| c.task.clone());
        self.shown.tasks |= c.task != *first;
        self.shown.clients |= c.client.is_some();
        self.shown.routed |= c.route.as_ref().is_some_and(|r| !r.is_null());
        self.shown.overlapped |= !c.overlaps.is_empty();
        let r = &mut self.resumed;
        if c.replayed_from.is_some() {
            r.replayed += 1;
            r.interleaved |= r.first_live.is_some_and(|n| c.n > n);
        } else {
            r.first_live.get_or_insert(c.n);
            if !r.firsts.iter().any(|(t, _)| *t == c.task) {
                r.firsts.push((c.task.clone(), c.n));
            }
        }
    }
}

fn render_header(run: &Run, integrity: &Integrity, summary: &Summary) -> String {
    let mut h = Lines::default();
    h.field("run", &run.id);
    let sha = run.script_sha256.as_deref().map_or("none".into(), short);
    h.field("script", &format!("{} (sha256 {sha})", run.script));
    h.field("policies", &policies_line(&run.policies));
    h.field("args", &compact(&run.args));
    h.field("workspace", &run.workspace);
    h.field("status", &status_line(run));
    h.field("started", &started_line(run));
    h.field("version", &run.version);
    if let Some(from) = &run.resumed_from {
        h.field("resumed", &resumed_line(from, &summary.resumed));
    }
    h.field("chain", &chain_line(run, integrity));
    h.field("calls", &counts_line(summary));
    let models = &summary.models;
    if models.calls + models.replayed > 0 {
        h.field("models", &models_line(models));
    }
    h.0
}

/// `from run R (2 calls replayed from it, live from #3)`: what a resume
/// answered from the run it resumed, and its first call that ran live
/// (after which every call did), in this run's numbering. Tasks go live
/// each on its own, so where another task's calls were still replayed
/// after that one, each task's first live call is named.
fn resumed_line(from: &str, r: &Resumed) -> String {
    let what = plural(r.replayed, "call", "calls");
    let Some(first) = r.first_live else {
        return format!("from run {from} ({what} replayed from it, none live)");
    };
    if !r.interleaved {
        return format!("from run {from} ({what} replayed from it, live from #{first})");
    }
    let named: Vec<String> = r
        .firsts
        .iter()
        .take(TASKS_NAMED)
        .map(|(task, n)| format!("task {task} at #{n}"))
        .collect();
    let more = match r.firsts.len().saturating_sub(TASKS_NAMED) {
        0 => String::new(),
        k => format!(" and {} more", plural(k as i64, "task", "tasks")),
    };
    format!(
        "from run {from} ({what} replayed from it; each task went live on its own: {}{more})",
        named.join(", ")
    )
}

/// How many tasks the `resumed` line names before it only counts the rest.
const TASKS_NAMED: usize = 4;

/// `3 calls, 3600 in / 255 out tokens (2400 cached), 6.3s`: what the run's
/// model calls spent, and how many a resume copied without running them.
fn models_line(m: &ModelTotals) -> String {
    let mut line = format!(
        "{}, {}, {}",
        plural(m.calls as i64, "call", "calls"),
        tokens(m.input_tokens, m.output_tokens, m.cached_tokens, " tokens"),
        took_us((m.latency_ms as i64).saturating_mul(1000))
    );
    if m.replayed > 0 {
        // Copied from the run it resumed: they spent nothing this time.
        let _ = write!(line, "; {} more replayed, not counted", m.replayed);
    }
    line
}

/// `1200 in / 85 out` (then `unit`), with `(40 cached)` when any input
/// was cached.
fn tokens(input: u64, output: u64, cached: u64, unit: &str) -> String {
    let mut t = format!("{input} in / {output} out{unit}");
    if cached > 0 {
        let _ = write!(t, " ({cached} cached)");
    }
    t
}

/// `claude-sonnet-4, 1200 in / 85 out (40 cached), 2.1s`: a model call's
/// model, tokens and latency.
pub fn model_summary(u: &ModelUse) -> String {
    format!(
        "{}, {}, {}",
        u.model,
        tokens(u.input_tokens, u.output_tokens, u.cached_tokens, ""),
        took_us((u.latency_ms as i64).saturating_mul(1000))
    )
}

fn policies_line(policies: &Value) -> String {
    let Some(list) = policies.as_array() else {
        return compact(policies);
    };
    if list.is_empty() {
        return "none".to_string();
    }
    let named = list.iter().map(|p| {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("?");
        match p.get("sha256").and_then(Value::as_str) {
            Some(sha) => format!("{name} (sha256 {})", short(sha)),
            None => name.to_string(),
        }
    });
    named.collect::<Vec<_>>().join(", ")
}

fn status_line(run: &Run) -> String {
    match &run.error {
        Some(e) => format!("{}: {}", run.status, error_text(e)),
        None => run.status.clone(),
    }
}

/// A run's error is a message, or a flow error's JSON.
fn error_text(e: &str) -> String {
    match serde_json::from_str::<Value>(e) {
        Ok(v @ Value::Object(_)) => flow_error_text(&v),
        _ => e.to_string(),
    }
}

/// `code: message` of a flow error.
fn flow_error_text(e: &Value) -> String {
    let code = e.get("code").and_then(Value::as_str).unwrap_or("error");
    match e.get("message").and_then(Value::as_str) {
        Some(message) => format!("{code}: {message}"),
        None => code.to_string(),
    }
}

fn started_line(run: &Run) -> String {
    let start = utc(run.started_ms);
    match (run.ended_ms, run.status.as_str()) {
        (Some(end), _) => format!(
            "{start}, ended {}, took {}",
            utc(end),
            run_took("", Some(end - run.started_ms))
        ),
        (None, "running") => format!("{start}, still running"),
        (None, _) => format!("{start}, no end recorded"),
    }
}

/// What `verify` says of the run's chain: "sealed" only of a run found
/// intact; a broken one says where and what.
fn chain_line(run: &Run, integrity: &Integrity) -> String {
    if let Some(p) = &integrity.problem {
        let at = match (p.n, &p.task, p.seq, &p.flow) {
            (Some(n), Some(task), Some(seq), Some(flow)) => {
                format!(" at call #{n} (task {task}, seq {seq}, {flow})")
            }
            _ => String::new(),
        };
        // What kind of mismatch (`content edited`), within the line; the
        // note under the timeline says the rest.
        let kind = p.message.split(": ").next().unwrap_or_default();
        let line = format!("BROKEN{at}: {kind} (see CHAIN BROKEN below)");
        return clip_to(&line, WIDTH - 13, Clip::Right);
    }
    match (&run.seal, run.status.as_str()) {
        (Some(_), _) => "sealed, verified intact".to_string(),
        (None, "running") => "not sealed yet (running), intact so far".to_string(),
        (None, "interrupted") => {
            "not sealed (the process was killed before it could seal); its rows verify".to_string()
        }
        // `verify` finds an ended run without a seal broken: not reached.
        (None, _) => "NOT SEALED".to_string(),
    }
}

fn counts_line(s: &Summary) -> String {
    let mut parts = vec![format!("{} irreversible", s.irreversible)];
    parts.push(format!("{} denied", s.denied));
    if s.unknown > 0 {
        parts.push(format!("{} OUTCOME UNKNOWN", s.unknown));
    }
    if s.capped > 0 {
        parts.push(format!("{} with output capped", s.capped));
    }
    format!("{} ({})", s.count, parts.join(", "))
}

/// The timeline's columns beyond those every run has: each is shown only
/// when it says something for this run, so a run of one task whose calls
/// ran one at a time keeps the plain table.
#[derive(Default)]
struct Optional {
    /// More than one task made calls: which one made each.
    tasks: bool,
    /// Some call came from outside the script (an MCP client): whose.
    clients: bool,
    /// Some call ran a process: where.
    routed: bool,
    /// Some calls ran at the same time: which with which.
    overlapped: bool,
}

/// One timeline column: its header, whether it is right-aligned, its cell.
struct Column<'a> {
    header: &'static str,
    right: bool,
    cell: Box<dyn Fn(&Call) -> String + 'a>,
}

/// The timeline's columns this run shows.
fn columns<'a>(
    run: &'a Run,
    shown: &Optional,
    broken: Option<i64>,
    facts: &'a dyn FlowFacts,
) -> Vec<Column<'a>> {
    // (header, shown, right-aligned, cell)
    type Cell<'a> = Box<dyn Fn(&Call) -> String + 'a>;
    let all: Vec<(&'static str, bool, bool, Cell)> = vec![
        (
            "#",
            true,
            false,
            Box::new(move |c| match broken {
                Some(n) if n == c.n => format!("#{} {BROKEN_MARK}", c.n),
                _ => format!("#{}", c.n),
            }),
        ),
        ("TASK", shown.tasks, false, Box::new(|c| c.task.clone())),
        // A name and version fit; `--call N` has a longer one whole.
        (
            "CLIENT",
            shown.clients,
            false,
            Box::new(|c| clip_to(c.client.as_deref().unwrap_or("—"), 24, Clip::Right)),
        ),
        (
            "AT",
            true,
            true,
            Box::new(move |c| {
                format!(
                    "+{}",
                    took_us((c.started_ms - run.started_ms).saturating_mul(1000))
                )
            }),
        ),
        ("FLOW", true, false, Box::new(|c| c.flow.clone())),
        ("TIER", true, false, Box::new(|c| c.tier.clone())),
        // A rule may be named by a long path: `--call N` has it whole.
        (
            "DECISION",
            true,
            false,
            Box::new(|c| clip_to(&decision_summary(c), 30, Clip::Right)),
        ),
        (
            "ROUTE",
            shown.routed,
            false,
            Box::new(|c| clip_to(&route_summary(c.route.as_ref()), 24, Clip::Right)),
        ),
        ("OUTCOME", true, false, Box::new(outcome_summary)),
        (
            "TOOK",
            true,
            true,
            Box::new(|c| c.duration_us.map_or("—".into(), took_us)),
        ),
        (
            "OVERLAPS",
            shown.overlapped,
            false,
            Box::new(|c| overlaps_cell(&c.overlaps)),
        ),
        (
            "INPUT",
            true,
            false,
            Box::new(move |c| input_cell(c, facts)),
        ),
    ];
    all.into_iter()
        .filter(|col| col.1)
        .map(|(header, _, right, cell)| Column {
            header,
            right,
            cell,
        })
        .collect()
}

/// The timeline, one call at a time: a pass for the columns' widths, then
/// one writing each row; call #`broken` marked where the record breaks.
fn write_timeline(
    run: &Run,
    calls: &dyn Calls,
    (summary, broken): (&Summary, Option<i64>),
    facts: &dyn FlowFacts,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let columns = columns(run, &summary.shown, broken, facts);
    let header: Vec<String> = columns.iter().map(|c| c.header.to_string()).collect();
    let cells =
        |c: &Call| -> Vec<String> { columns.iter().map(|col| one_line(&(col.cell)(c))).collect() };
    let mut widths = Widths::of(&header);
    calls.each(&mut |c| {
        widths.fit(&cells(&c));
        Ok(())
    })?;
    let layout = widths.layout(columns.len() - 1, Clip::Right, &right_of(&columns));
    put(out, &layout.line(&header))?;
    calls.each(&mut |c| put(out, &layout.line(&cells(&c))))
}

fn right_of(columns: &[Column]) -> Vec<usize> {
    (0..columns.len()).filter(|&i| columns[i].right).collect()
}

/// How many calls an OVERLAPS cell names before it only counts the rest
/// (`--call N` names them all).
const OVERLAPS_NAMED: usize = 3;

/// `#3, #5`, `#2, #3, #4 +5 more`, or `—` for a call that ran alone.
fn overlaps_cell(overlaps: &[i64]) -> String {
    if overlaps.is_empty() {
        return "—".to_string();
    }
    let mut cell = numbered(&overlaps[..overlaps.len().min(OVERLAPS_NAMED)]);
    if overlaps.len() > OVERLAPS_NAMED {
        let _ = write!(cell, " +{} more", overlaps.len() - OVERLAPS_NAMED);
    }
    cell
}

/// `#3, #5`.
fn numbered(ns: &[i64]) -> String {
    let list: Vec<String> = ns.iter().map(|n| format!("#{n}")).collect();
    list.join(", ")
}

/// One word or three for a call's decisions, those made before it ran and
/// while it ran: the most telling one wins (a deny, then an ask, then allow).
pub fn decision_summary(c: &Call) -> String {
    let list: Vec<&Value> = items(Some(&c.decisions))
        .iter()
        .chain(items(c.late_decisions.as_ref()))
        .collect();
    let field = |d: &Value, k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
    let kind = |k: &str| {
        list.iter()
            .find(|d| field(d, "decision").as_deref() == Some(k))
    };
    if let Some(d) = kind("deny") {
        return format!("deny by {}", field(d, "by").unwrap_or_else(|| "?".into()));
    }
    if let Some(d) = kind("ask") {
        return match field(d, "approvedBy") {
            Some(who) => format!("ask→approved by {who}"),
            None => "ask→not approved".to_string(),
        };
    }
    if kind("allow").is_some() {
        return "allow".to_string();
    }
    "—".to_string()
}

/// `host:unconfined`, `container:name` (`container:box (asked other)` when
/// the policy rewrote the caller's); `—` for a call that runs no process.
pub fn route_summary(route: Option<&Value>) -> String {
    match route {
        None | Some(Value::Null) => "—".to_string(),
        Some(Value::Object(m)) if m.contains_key("container") => {
            let name = m["container"].as_str().unwrap_or("?");
            match m.get("requested").and_then(Value::as_str) {
                Some(asked) if asked != name => format!("container:{name} (asked {asked})"),
                _ => format!("container:{name}"),
            }
        }
        Some(Value::Object(m)) if m.len() == 1 => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}:{}",
                    v.as_str().map_or_else(|| compact(v), str::to_string)
                )
            })
            .collect(),
        Some(other) => compact(other),
    }
}

/// `ok`, the error code, or `OUTCOME UNKNOWN`, with what is notable about
/// the row (capped output, copied by resume).
pub fn outcome_summary(c: &Call) -> String {
    let mut s = match c.outcome {
        Outcome::Ok => "ok".to_string(),
        Outcome::Error => match c.stopped_by() {
            Some(sig) => format!("STOPPED by {sig}"),
            None => c.error_code().unwrap_or("error").to_string(),
        },
        Outcome::Unknown => "OUTCOME UNKNOWN".to_string(),
        Outcome::Pending => "in progress".to_string(),
    };
    if c.capped {
        s.push_str(", capped");
    }
    if c.replayed_from.is_some() {
        s.push_str(", replayed");
    }
    s
}

/// A timeline row's last cell: the input's gist, after a model call's
/// model, tokens and latency (what a reader of an agent run looks for).
fn input_cell(c: &Call, facts: &dyn FlowFacts) -> String {
    let gist = input_summary(&c.flow, &c.input, facts);
    match c.model_use() {
        Some(u) => format!("{}: {gist}", one_line(&model_summary(&u))),
        None => gist,
    }
}

/// The gist of an input, as its flow words it; an input no flow
/// describes (a job operation's, an unknown flow's) is its JSON.
pub fn input_summary(flow: &str, input: &Value, facts: &dyn FlowFacts) -> String {
    one_line(&facts.summary(flow, input).unwrap_or_else(|| compact(input)))
}

/// One call whole: `sluice audit show RUN --call N`.
pub fn render_call(run: &Run, c: &Call) -> String {
    let mut h = Lines::default();
    h.field(
        "call",
        &format!(
            "#{} of run {} (task {}, seq {})",
            c.n, run.id, c.task, c.seq
        ),
    );
    if let Some(client) = &c.client {
        h.field("client", client);
    }
    h.field("flow", &c.flow);
    h.field("tier", &c.tier);
    let offset = took_us((c.started_ms - run.started_ms).saturating_mul(1000));
    h.field(
        "started",
        &format!(
            "{}.{:03} UTC (+{offset} into the run)",
            utc(c.started_ms),
            c.started_ms.rem_euclid(1000)
        ),
    );
    h.field("took", &c.duration_us.map_or("—".into(), took_us));
    if !c.overlaps.is_empty() {
        h.field(
            "overlaps",
            &format!("{} (running while it ran)", numbered(&c.overlaps)),
        );
    }
    h.field("outcome", &outcome_line(c));
    if let Some(u) = c.model_use() {
        h.field("model", &model_summary(&u));
    }
    h.field("route", &route_summary(c.route.as_ref()));
    if let Some(from) = &c.replayed_from {
        h.field(
            "replayed",
            &format!("copied from run {from} by `sluice resume`; it did not run again"),
        );
    }
    let mut out = h.0;
    out.push_str(&list_section("capabilities", &c.capabilities));
    out.push_str(&decisions_section("decisions", &c.decisions));
    if let Some(late) = c
        .late_decisions
        .as_ref()
        .filter(|l| l.as_array().is_none_or(|a| !a.is_empty()))
    {
        out.push_str(&decisions_section("decisions while it ran", late));
    }
    out.push_str(&list_section("redacted", &c.redacted));
    out.push_str(&json_section("input", Some(&c.input)));
    out.push_str(&json_section("output", c.output.as_ref()));
    if c.capped {
        out.push_str(&capped_notice(c.output.as_ref()));
    }
    out.push_str(&json_section("error", c.error.as_ref()));
    let mut t = Lines::default();
    t.field("hash", &c.hash);
    t.field("prev", &c.prev);
    t.field("outcome hash", c.outcome_hash.as_deref().unwrap_or("—"));
    if let Some(parts) = &c.parts {
        t.field("kept apart", &parts_line(parts));
    }
    out.push('\n');
    out.push_str(&t.0);
    out
}

/// `messages: 12 items kept once each by content; the input above is whole`.
fn parts_line(parts: &Value) -> String {
    match parts.as_object().and_then(|m| m.iter().next()) {
        Some((field, keys)) => format!(
            "{field}: {} kept once each by content; the input above is whole",
            plural(items(Some(keys)).len() as i64, "item", "items")
        ),
        None => compact(parts),
    }
}

fn outcome_line(c: &Call) -> String {
    match c.outcome {
        Outcome::Ok => "ok".to_string(),
        Outcome::Error => {
            let text = c.error.as_ref().map_or("error".into(), flow_error_text);
            match c.stopped_by() {
                Some(sig) => format!("STOPPED by {sig}, what it did so far recorded: {text}"),
                None => text,
            }
        }
        Outcome::Unknown => {
            "OUTCOME UNKNOWN: the intent was recorded and synced, then the process \
died before the outcome was written; the call may or may not have taken effect"
                .to_string()
        }
        Outcome::Pending => "in progress (the run is still live)".to_string(),
    }
}

fn list_section(title: &str, items: &Value) -> String {
    let mut out = format!("\n{title}\n");
    match items.as_array() {
        Some(list) if list.is_empty() => out.push_str("  none\n"),
        Some(list) => {
            for item in list {
                let text = item.as_str().map_or_else(|| compact(item), str::to_string);
                let _ = writeln!(out, "  {}", visible(&text));
            }
        }
        None => {
            let _ = writeln!(out, "  {}", visible(&compact(items)));
        }
    }
    out
}

fn decisions_section(title: &str, decisions: &Value) -> String {
    let Some(list) = decisions.as_array() else {
        return list_section(title, decisions);
    };
    let mut out = format!("\n{title}\n");
    if list.is_empty() {
        out.push_str("  none (the call stopped before authorization, or needed no capability)\n");
    }
    for d in list {
        let f = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("?");
        let mut line = format!("  {}  {} by {}", f("capability"), f("decision"), f("by"));
        if let Some(at) = d.get("source").and_then(Value::as_str) {
            let _ = write!(line, " at {at}");
        }
        if let Some(who) = d.get("approvedBy").and_then(Value::as_str) {
            let _ = write!(line, ", approved by {who}");
        }
        if let Some(reason) = d
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            let _ = write!(line, ": {reason}");
        }
        out.push_str(&visible(&line));
        out.push('\n');
    }
    out
}

fn json_section(title: &str, value: Option<&Value>) -> String {
    let Some(v) = value else {
        return String::new();
    };
    let pretty = serde_json::to_string_pretty(v).unwrap_or_else(|_| compact(v));
    let body: String = pretty
        .lines()
        .map(|l| format!("  {}\n", visible(l)))
        .collect();
    format!("\n{title}\n{body}")
}

fn capped_notice(output: Option<&Value>) -> String {
    let bytes = output.and_then(|o| o.get("bytes")).and_then(Value::as_u64);
    let sha = output.and_then(|o| o.get("sha256")).and_then(Value::as_str);
    format!(
        "  OUTPUT CAPPED: the output was {} bytes, over the 1 MiB cap; the record keeps its SHA-256 ({}), head and tail only\n",
        bytes.map_or("?".into(), |b| b.to_string()),
        sha.unwrap_or("?"),
    )
}

/// One line per run, and a total when there are several.
pub fn render_verify(verdicts: &[Verdict]) -> String {
    if verdicts.is_empty() {
        return "no runs recorded yet: nothing to verify\n".to_string();
    }
    let width = verdicts
        .iter()
        .map(|v| v.run.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for v in verdicts {
        let _ = writeln!(out, "{:<width$}  {}", visible(&v.run), verdict_text(v));
    }
    if verdicts.len() > 1 {
        let broken = verdicts.iter().filter(|v| !v.intact).count();
        let _ = writeln!(
            out,
            "{} checked: {} intact, {broken} not",
            plural(verdicts.len() as i64, "run", "runs"),
            verdicts.len() - broken
        );
    }
    out
}

/// What a check of runs recorded before runs were chained to each other
/// cannot show; `None` when every run checked is chained.
pub fn unchained_note(verdicts: &[Verdict], unchained: i64) -> Option<String> {
    verdicts.iter().any(|v| !v.chained).then(|| {
        let runs = if unchained == 1 {
            "run #1 was".to_string()
        } else {
            format!("runs #1–#{unchained} were")
        };
        format!(
            "note: {runs} recorded before runs were chained to each other (schema 1): each is checked \
on its own, and a whole run deleted or reordered among them would not show\n"
        )
    })
}

fn verdict_text(v: &Verdict) -> String {
    let calls = plural(v.calls as i64, "call", "calls");
    match (&v.problem, &v.warning) {
        (Some(p), _) => {
            let at = match (p.n, &p.task, p.seq, &p.flow) {
                (Some(n), Some(task), Some(seq), Some(flow)) => {
                    format!(" at #{n} (task {task}, seq {seq}, {flow})")
                }
                _ => String::new(),
            };
            visible(&format!("NOT INTACT{at}: {}", p.message))
        }
        (None, Some(w)) => format!("intact ({calls}), but {w}"),
        (None, None) if v.sealed => format!("intact ({calls}, sealed)"),
        (None, None) => format!("intact so far ({calls}; running, not sealed yet)"),
    }
}

/// `2026-11-30 17:03:12`: UTC, from milliseconds since the epoch.
pub fn utc(ms: i64) -> String {
    calendar::date_time(ms.div_euclid(1000), ' ')
}

/// A duration in the coarsest unit that still says something: `850µs`,
/// `12ms`, `4.2s`, `3m07s`, `2h05m`.
pub fn took_us(us: i64) -> String {
    let us = us.max(0);
    match us {
        0..=999 => format!("{us}µs"),
        1_000..=999_999 => format!("{}ms", us / 1000),
        1_000_000..=59_999_999 => format!("{:.1}s", us as f64 / 1e6),
        60_000_000..=3_599_999_999 => {
            let s = us / 1_000_000;
            format!("{}m{:02}s", s / 60, s % 60)
        }
        _ => {
            let m = us / 60_000_000;
            format!("{}h{:02}m", m / 60, m % 60)
        }
    }
}

/// `1 call`, `2 calls`: `n` and the word for that many.
pub fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The first 12 hex digits of a digest: enough to tell files apart by eye.
fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// The elements of a JSON list; none for anything else.
fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Recorded text is shown, never obeyed: control characters (a terminal
/// escape in a file name or an output) are printed as escapes.
pub fn visible(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Text for a table cell: one line, line breaks shown as `↵`.
fn one_line(s: &str) -> String {
    let flat: String = s
        .trim()
        .chars()
        .map(|c| match c {
            '\n' => '↵',
            '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    visible(&flat)
}

/// `key      value` lines, values kept to one visible line.
#[derive(Default)]
struct Lines(String);

impl Lines {
    fn field(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.0, "{key:<12} {}", one_line(value));
    }
}

/// Which end of an over-long cell gives way: a path keeps its end (the
/// file name), an input summary its start.
#[derive(Clone, Copy)]
enum Clip {
    Left,
    Right,
}

/// A text table whose one flexible column shrinks so lines fit `WIDTH`.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| one_line(c)).collect());
    }

    /// Renders with column `flex` clipped to what the others leave of
    /// `WIDTH` (at least 20), and the `right` columns right-aligned.
    fn render(&self, flex: usize, clip: Clip, right: &[usize]) -> String {
        let mut widths = Widths::of(&self.rows[0]);
        self.rows[1..].iter().for_each(|r| widths.fit(r));
        let layout = widths.layout(flex, clip, right);
        self.rows.iter().map(|r| layout.line(r)).collect()
    }
}

/// The widest cell of each column so far.
struct Widths(Vec<usize>);

impl Widths {
    fn of(header: &[String]) -> Widths {
        let mut w = Widths(vec![0; header.len()]);
        w.fit(header);
        w
    }

    fn fit(&mut self, row: &[String]) {
        for (w, cell) in self.0.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }

    /// The layout with column `flex` clipped to what the others leave of
    /// `WIDTH` (at least 20), and the `right` columns right-aligned.
    fn layout(mut self, flex: usize, clip: Clip, right: &[usize]) -> Layout {
        let others: usize = self
            .0
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != flex)
            .map(|(_, w)| w + 2)
            .sum();
        self.0[flex] = self.0[flex].min(WIDTH.saturating_sub(others).max(20));
        Layout {
            widths: self.0,
            flex,
            clip,
            right: right.to_vec(),
        }
    }
}

/// How a table's rows are laid out.
struct Layout {
    widths: Vec<usize>,
    flex: usize,
    clip: Clip,
    right: Vec<usize>,
}

impl Layout {
    /// One row (cells already on one line), ended by a line break.
    fn line(&self, row: &[String]) -> String {
        let cells = row
            .iter()
            .zip(&self.widths)
            .enumerate()
            .map(|(i, (cell, &w))| {
                let cell = if i == self.flex {
                    clip_to(cell, w, self.clip)
                } else {
                    cell.clone()
                };
                if self.right.contains(&i) {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            });
        let mut line = cells.collect::<Vec<_>>().join("  ").trim_end().to_string();
        line.push('\n');
        line
    }
}

/// `s` cut to `width` characters, `…` marking the cut.
fn clip_to(s: &str, width: usize, clip: Clip) -> String {
    let len = s.chars().count();
    if len <= width {
        return s.to_string();
    }
    let keep = width.saturating_sub(1);
    match clip {
        Clip::Left => format!("…{}", s.chars().skip(len - keep).collect::<String>()),
        Clip::Right => format!("{}…", s.chars().take(keep).collect::<String>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_renders_calendar_dates() {
        assert_eq!(utc(1_796_058_192_000), "2026-11-30 17:03:12");
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_709_251_199_000), "2024-02-29 23:59:59");
        assert_eq!(utc(-1_000), "1969-12-31 23:59:59");
    }

    #[test]
    fn durations_use_a_readable_unit() {
        assert_eq!(took_us(850), "850µs");
        assert_eq!(took_us(12_345), "12ms");
        assert_eq!(took_us(4_200_000), "4.2s");
        assert_eq!(took_us(187_000_000), "3m07s");
        assert_eq!(took_us(7_500_000_000), "2h05m");
    }
}
