//! The shape of a run's trace: the run's span at the root, a span per task
//! under the task that started it (`0`, then `0.1`, `0.1.2`...), each call
//! under its task, and a call a flow made through the door while it ran
//! (task `TASK.cSEQ`) under the call (`TASK`, `SEQ`) that made it.
//!
//! Every parent is found from the task's name alone, so a call's span can
//! be sent the moment its outcome is written, before its task's or the
//! run's span exist: the ids are derived, not looked up.

use super::call::ms_to_ns;
use super::span::{run_span_id, task_span_id, trace_id, Kind, Span, Status, Value};
use crate::audit::show::Run;
use std::collections::BTreeMap;

/// For an inner task `TASK.cSEQ`: (`TASK`, `SEQ`), the call that made it.
fn maker(task: &str) -> Option<(&str, i64)> {
    let (outer, last) = task.rsplit_once('.')?;
    let seq = last.strip_prefix('c')?.parse().ok()?;
    Some((outer, seq))
}

/// The span a call of task `task` hangs under: its task's, or for an inner
/// task, the span of the call that made it.
pub fn call_parent(run: &str, task: &str) -> [u8; 8] {
    match maker(task) {
        Some((outer, seq)) => super::span::call_span_id(run, outer, seq),
        None => task_span_id(run, task),
    }
}

/// The span task `task` hangs under: the run's for the main chunk's (`0`),
/// else the span its parent task's calls hang under.
pub fn task_parent(run: &str, task: &str) -> [u8; 8] {
    match task.rsplit_once('.') {
        None => run_span_id(run),
        Some((outer, _)) => call_parent(run, outer),
    }
}

/// When each task ran, gathered from its calls and its descendants' (a
/// task that made no call of its own but started tasks that did spans
/// theirs), for the task spans sent at the end.
#[derive(Debug, Default)]
pub struct Tasks {
    /// Task -> (first start, last end, calls of its own), in nanoseconds.
    seen: BTreeMap<String, (u64, u64, i64)>,
    /// The last end of any call.
    last_end: u64,
}

impl Tasks {
    /// Counts a call of task `task` that ran from `start_ns` to `end_ns`.
    pub fn add(&mut self, task: &str, start_ns: u64, end_ns: u64) {
        self.last_end = self.last_end.max(end_ns);
        let mut own = true;
        let mut task = task;
        loop {
            if maker(task).is_none() {
                let entry = self
                    .seen
                    .entry(task.to_string())
                    .or_insert((start_ns, end_ns, 0));
                entry.0 = entry.0.min(start_ns);
                entry.1 = entry.1.max(end_ns);
                entry.2 += i64::from(own);
            }
            own = false;
            match task.rsplit_once('.') {
                Some((outer, _)) => task = outer,
                None => break,
            }
        }
    }

    /// The end of the last call counted (0 for none).
    pub fn last_end(&self) -> u64 {
        self.last_end
    }

    /// A span per task counted.
    pub fn spans(&self, run: &str) -> Vec<Span> {
        self.seen
            .iter()
            .map(|(task, &(start_ns, end_ns, calls))| Span {
                trace_id: trace_id(run),
                span_id: task_span_id(run, task),
                parent: Some(task_parent(run, task)),
                name: format!("task {task}"),
                kind: Kind::Internal,
                start_ns,
                end_ns,
                attributes: vec![
                    ("sluice.task", task.as_str().into()),
                    ("sluice.task.calls", calls.into()),
                ],
                status: Status::Unset,
            })
            .collect()
    }
}

/// The run's span, the trace's root: `run SCRIPT` (the script's file
/// name), from the run's start to its end (or, for a run that never
/// recorded its end, its last call's), an error when it failed or was
/// interrupted (with `content`, the recorded error is the message).
pub fn run_span(run: &Run, tasks: &Tasks, calls: i64, content: bool) -> Span {
    let start_ns = ms_to_ns(run.started_ms);
    let end_ns = run
        .ended_ms
        .map_or(tasks.last_end(), ms_to_ns)
        .max(start_ns);
    let mut attributes: Vec<(&'static str, Value)> = vec![
        ("sluice.run.id", run.id.as_str().into()),
        ("sluice.script", run.script.as_str().into()),
        ("sluice.run.status", run.status.as_str().into()),
        ("sluice.run.calls", calls.into()),
    ];
    if let Some(from) = &run.resumed_from {
        attributes.push(("sluice.run.resumed_from", from.as_str().into()));
    }
    let status = match run.status.as_str() {
        "failed" | "interrupted" => Status::Error(match (&run.error, content) {
            (Some(e), true) => super::content::cut(e, super::content::LIMIT),
            _ => format!("the run {}", run.status),
        }),
        _ => Status::Unset,
    };
    Span {
        trace_id: trace_id(&run.id),
        span_id: run_span_id(&run.id),
        parent: None,
        name: format!("run {}", script_name(&run.script)),
        kind: Kind::Internal,
        start_ns,
        end_ns,
        attributes,
        status,
    }
}

/// The file name of the script's path (a fleet's run records the name it
/// was submitted under, which is one already).
fn script_name(script: &str) -> &str {
    script
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(script)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::span::call_span_id;

    #[test]
    fn parents_follow_the_task_names_and_an_inner_call_hangs_under_its_maker() {
        let r = "r1";
        assert_eq!(task_parent(r, "0"), run_span_id(r));
        assert_eq!(task_parent(r, "0.1"), task_span_id(r, "0"));
        assert_eq!(task_parent(r, "0.1.2"), task_span_id(r, "0.1"));
        assert_eq!(call_parent(r, "0.1"), task_span_id(r, "0.1"));
        assert_eq!(call_parent(r, "0.1.c3"), call_span_id(r, "0.1", 3));
        // An inner call's own inner call: under the inner call that made it.
        assert_eq!(call_parent(r, "0.c2.c1"), call_span_id(r, "0.c2", 1));
        assert_eq!(script_name("/w/agent.lua"), "agent.lua");
        assert_eq!(script_name("fix.lua"), "fix.lua");
    }

    #[test]
    fn a_task_spans_its_calls_and_its_descendants_and_counts_its_own() {
        let mut tasks = Tasks::default();
        tasks.add("0.1.2", 50, 80);
        tasks.add("0.1.c3", 20, 30);
        tasks.add("0", 10, 15);
        let spans = tasks.spans("r1");
        let got: Vec<(&str, u64, u64, &Value, [u8; 8])> = spans
            .iter()
            .map(|s| {
                let calls = &s.attributes[1].1;
                (
                    s.name.as_str(),
                    s.start_ns,
                    s.end_ns,
                    calls,
                    s.parent.unwrap(),
                )
            })
            .collect();
        // 0.1 made no call of its own: it spans its child's and its inner
        // call's; an inner task has no span of its own.
        assert_eq!(
            got,
            [
                ("task 0", 10, 80, &Value::Int(1), run_span_id("r1")),
                ("task 0.1", 20, 80, &Value::Int(0), task_span_id("r1", "0")),
                (
                    "task 0.1.2",
                    50,
                    80,
                    &Value::Int(1),
                    task_span_id("r1", "0.1")
                ),
            ]
        );
        assert_eq!(tasks.last_end(), 80);
    }

    #[test]
    fn the_run_span_is_an_error_when_the_run_failed_with_its_message_only_as_content() {
        let mut run = fake_run();
        run.status = "failed".into();
        run.error = Some("script.lua:3: boom".into());
        run.ended_ms = None;
        let mut tasks = Tasks::default();
        tasks.add("0", 2_000_000_000, 3_000_000_000);
        let s = run_span(&run, &tasks, 1, false);
        assert_eq!(s.name, "run agent.lua");
        assert_eq!(s.parent, None);
        assert_eq!((s.start_ns, s.end_ns), (1_000_000_000, 3_000_000_000));
        assert_eq!(s.status, Status::Error("the run failed".into()));
        let s = run_span(&run, &tasks, 1, true);
        assert_eq!(s.status, Status::Error("script.lua:3: boom".into()));
        run.status = "ok".into();
        assert_eq!(run_span(&run, &tasks, 1, true).status, Status::Unset);
    }

    fn fake_run() -> Run {
        Run {
            id: "r1".into(),
            script: "/w/agent.lua".into(),
            script_sha256: None,
            policies: serde_json::json!([]),
            args: serde_json::json!([]),
            workspace: "/w".into(),
            status: "ok".into(),
            error: None,
            started_ms: 1_000,
            ended_ms: Some(4_000),
            duration_ms: Some(3_000),
            version: "0.1.0".into(),
            random_seed: 0,
            resumed_from: None,
            pid: 1,
            pid_start: 1,
            head: String::new(),
            seal: None,
            n: Some(1),
            prior: None,
            prior_rows: None,
        }
    }
}
