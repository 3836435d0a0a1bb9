//! OpenTelemetry export: a recorded run as one trace, sent over OTLP/HTTP
//! to a receiver people already use (Arize Phoenix, Jaeger, an
//! OpenTelemetry Collector, Langfuse...).
//!
//! Everything comes from the record, read through the audit's reader: the
//! run's span at the root, a span per task, a span per call (a model call
//! in the GenAI semantic conventions, every other call as a tool's), with
//! the decision, tier and outcome the record holds. Inputs, outputs and
//! errors travel only when asked (`content`), as the record holds them,
//! secrets already cut.
//!
//! - [`span`]: the span as built here, and the ids derived from the run;
//! - [`tree`]: which span each hangs under, the task spans and the run's;
//! - [`call`]: one call's span and its attributes; [`content`] what
//!   `--otlp-content` adds, bounded;
//! - [`proto`]: the protobuf bytes of a request; [`send`]: the POSTs;
//! - [`live`]: a run's spans sent while it runs, from a thread of its own.

pub mod call;
pub mod content;
pub mod live;
pub mod proto;
pub mod send;
pub mod span;
pub mod tree;

use crate::audit::db::Db;
use crate::audit::follow;
use crate::audit::show::Run;
use proto::Resource;
use send::Sender;
use span::{Span, Value};

/// The instrumentation scope every span is sent under.
const SCOPE: &str = "sluice";

/// What an export sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The trace's id, as hex: what a receiver's search takes.
    pub trace_id: String,
    /// Spans sent: the run's, one per task, one per call.
    pub spans: usize,
}

/// The resource every span of run `run` is sent with: the service and the
/// run.
pub fn resource(run: &Run) -> Vec<(&'static str, Value)> {
    vec![
        ("service.name", "sluice".into()),
        ("service.version", env!("CARGO_PKG_VERSION").into()),
        ("sluice.run.id", run.id.as_str().into()),
        ("sluice.script", run.script.as_str().into()),
    ]
}

/// The request's shared part for `attributes` (a [`resource`]).
pub fn scope<'a>(attributes: &'a [(&'static str, Value)]) -> Resource<'a> {
    Resource {
        attributes,
        scope_name: SCOPE,
        scope_version: env!("CARGO_PKG_VERSION"),
    }
}

/// Why an export stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// The record could not be read (no such run, a store that failed).
    Record(String),
    /// The receiver could not be reached or refused a request.
    Send(String),
}

/// Sends run `run_id` of `db` to `sender` as one trace: its calls a batch
/// at a time as they are read, then its tasks and the run. With `content`,
/// inputs, outputs and errors go too.
///
/// A run still being recorded is sent as far as it has gone: the calls
/// whose outcome is written, and the run's span up to the last of them.
pub fn export(db: &dyn Db, run_id: &str, sender: &Sender, content: bool) -> Result<Sent, Failed> {
    let run = follow::run(db, run_id).map_err(Failed::Record)?;
    let live = run.status == "running";
    let attributes = resource(&run);
    let resource = scope(&attributes);
    let mut tasks = tree::Tasks::default();
    let mut batch: Vec<Span> = Vec::new();
    let (mut calls, mut sent) = (0i64, 0usize);
    let mut refused = None;
    let read = follow::calls_from(db, run_id, 1, live, &mut |c| {
        let s = call::call_span(&run.id, &c, content, run.ended_ms);
        tasks.add(&c.task, s.start_ns, s.end_ns);
        batch.push(s);
        calls += 1;
        if batch.len() == send::BATCH {
            if let Err(e) = sender.send(&resource, &batch) {
                refused = Some(e);
                return Err("the receiver refused".to_string());
            }
            sent += batch.len();
            batch.clear();
        }
        Ok(())
    });
    if let Some(e) = refused {
        return Err(Failed::Send(e));
    }
    read.map_err(Failed::Record)?;
    batch.extend(tasks.spans(&run.id));
    batch.push(tree::run_span(&run, &tasks, calls, content));
    sender.send(&resource, &batch).map_err(Failed::Send)?;
    Ok(Sent {
        trace_id: crate::digest::hex(&span::trace_id(&run.id)),
        spans: sent + batch.len(),
    })
}
