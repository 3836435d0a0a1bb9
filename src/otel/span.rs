//! A span as this module builds it before any encoding: the few fields of
//! OTLP's `Span` that a recorded run fills, and its ids, derived from the
//! run so that sending a run twice (live, then again with `sluice audit
//! export --otlp`) gives the receiver the same trace and spans, not copies.

use sha2::{Digest, Sha256};

/// One span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// `None` for the run's span, the trace's root.
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(&'static str, Value)>,
    pub status: Status,
}

#[cfg(test)]
impl Span {
    /// The value of attribute `key`, when the span has it.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// OTLP's `Span.SpanKind`, the two this module uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work inside sluice: the run, a task, a tool call.
    Internal = 1,
    /// A request to another service: a model call (the GenAI conventions
    /// make an inference span a client span).
    Client = 3,
}

/// An attribute's value: OTLP's `AnyValue`, the kinds used here.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    /// A list of strings (`gen_ai.response.finish_reasons`).
    Strs(Vec<String>),
}

#[cfg(test)]
impl Value {
    /// The text, for a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

/// OTLP's `Status`: unset for what went as it should, error with a
/// message otherwise (OTLP's OK is for a person overriding an error, which
/// an exporter never sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Unset,
    Error(String),
}

/// The trace of run `run`: the first 16 bytes of SHA-256 of its id.
pub fn trace_id(run: &str) -> [u8; 16] {
    let digest = Sha256::digest(run.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    nonzero(&mut id);
    id
}

/// The run's own span.
pub fn run_span_id(run: &str) -> [u8; 8] {
    span_id(&[run])
}

/// The span of task `task` of run `run`.
pub fn task_span_id(run: &str, task: &str) -> [u8; 8] {
    span_id(&[run, task])
}

/// The span of call (`task`, `seq`) of run `run`: the key the record
/// itself gives a call, which a resume keeps.
pub fn call_span_id(run: &str, task: &str, seq: i64) -> [u8; 8] {
    span_id(&[run, task, &seq.to_string()])
}

/// The first 8 bytes of SHA-256 of `parts` joined by line breaks (which
/// no run id or task id holds, so different parts never hash alike).
fn span_id(parts: &[&str]) -> [u8; 8] {
    let digest = Sha256::digest(parts.join("\n").as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    nonzero(&mut id);
    id
}

/// OTLP reads an id of all zero bytes as no id at all.
fn nonzero(id: &mut [u8]) {
    if id.iter().all(|b| *b == 0) {
        if let Some(last) = id.last_mut() {
            *last = 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sha256_of_the_run_and_the_calls_key_and_differ_by_each_part() {
        let run = "db9e1495-1a24cc37e1c";
        let full = crate::digest::sha256_hex(run.as_bytes());
        assert_eq!(crate::digest::hex(&trace_id(run)), full[..32]);
        let call = crate::digest::sha256_hex(format!("{run}\n0.1\n3").as_bytes());
        assert_eq!(crate::digest::hex(&call_span_id(run, "0.1", 3)), call[..16]);
        let ids = [
            run_span_id(run),
            task_span_id(run, "0"),
            task_span_id(run, "0.1"),
            call_span_id(run, "0", 1),
            call_span_id(run, "0", 2),
            call_span_id(run, "0.1", 1),
            call_span_id("other", "0", 1),
        ];
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        // The same key gives the same id: a run sent twice is one trace.
        assert_eq!(call_span_id(run, "0", 1), call_span_id(run, "0", 1));
    }
}
