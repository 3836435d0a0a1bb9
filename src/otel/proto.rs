//! OTLP's trace request in protobuf's binary form, written by hand: the
//! few messages a span of a recorded run needs (OTLP/HTTP receivers such
//! as Arize Phoenix take protobuf only, and a codec crate would be a large
//! dependency for seven messages).
//!
//! The grammar, from opentelemetry-proto (`collector/trace/v1`,
//! `trace/v1/trace.proto`, `common/v1`, `resource/v1`); fields this module
//! never sets are left out, which protobuf reads as their defaults:
//!
//! ```text
//! ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
//! ResourceSpans   { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
//! Resource        { repeated KeyValue attributes = 1; }
//! ScopeSpans      { InstrumentationScope scope = 1; repeated Span spans = 2; }
//! InstrumentationScope { string name = 1; string version = 2; }
//! Span            { bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4;
//!                   string name = 5; SpanKind kind = 6;
//!                   fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
//!                   repeated KeyValue attributes = 9; Status status = 15; }
//! Status          { string message = 2; StatusCode code = 3; }   // code: 0 unset, 2 error
//! KeyValue        { string key = 1; AnyValue value = 2; }
//! AnyValue        { oneof value { string string_value = 1; bool bool_value = 2;
//!                   int64 int_value = 3; double double_value = 4;
//!                   ArrayValue array_value = 5; } }
//! ArrayValue      { repeated AnyValue values = 1; }
//! ```
//!
//! Wire format: each field is a key, `(number << 3) | type`, as a varint,
//! then its value: type 0 a varint (ints, bools, enums; a negative int64
//! is its two's complement, ten bytes), type 1 eight bytes little-endian
//! (fixed64, double), type 2 a varint length and that many bytes (strings,
//! bytes, nested messages).

use super::span::{Span, Status, Value};

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

/// What every span of one request shares: the resource (the run) and the
/// instrumentation scope (sluice).
pub struct Resource<'a> {
    pub attributes: &'a [(&'static str, Value)],
    pub scope_name: &'a str,
    pub scope_version: &'a str,
}

/// An `ExportTraceServiceRequest` holding `spans`, all of `resource`.
pub fn request(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    let mut scope = Vec::new();
    string(&mut scope, 1, resource.scope_name);
    string(&mut scope, 2, resource.scope_version);
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for s in spans {
        message(&mut scope_spans, 2, &span(s));
    }
    let mut res = Vec::new();
    for kv in resource.attributes {
        message(&mut res, 1, &key_value(kv));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &res);
    message(&mut resource_spans, 2, &scope_spans);
    let mut out = Vec::new();
    message(&mut out, 1, &resource_spans);
    out
}

fn span(s: &Span) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &s.trace_id);
    bytes(&mut out, 2, &s.span_id);
    if let Some(parent) = &s.parent {
        bytes(&mut out, 4, parent);
    }
    string(&mut out, 5, &s.name);
    key(&mut out, 6, VARINT);
    varint(&mut out, s.kind as u64);
    key(&mut out, 7, FIXED64);
    out.extend_from_slice(&s.start_ns.to_le_bytes());
    key(&mut out, 8, FIXED64);
    out.extend_from_slice(&s.end_ns.to_le_bytes());
    for kv in &s.attributes {
        message(&mut out, 9, &key_value(kv));
    }
    if let Status::Error(text) = &s.status {
        let mut status = Vec::new();
        string(&mut status, 2, text);
        key(&mut status, 3, VARINT);
        varint(&mut status, 2);
        message(&mut out, 15, &status);
    }
    out
}

fn key_value((k, v): &(&'static str, Value)) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, k);
    message(&mut out, 2, &any_value(v));
    out
}

fn any_value(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Value::Str(s) => string(&mut out, 1, s),
        Value::Bool(b) => {
            key(&mut out, 2, VARINT);
            varint(&mut out, u64::from(*b));
        }
        Value::Int(n) => {
            key(&mut out, 3, VARINT);
            // Two's complement, as protobuf writes a negative int64.
            varint(&mut out, *n as u64);
        }
        Value::Double(d) => {
            key(&mut out, 4, FIXED64);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Value::Strs(items) => {
            let mut array = Vec::new();
            for s in items {
                message(&mut array, 1, &any_value(&Value::Str(s.clone())));
            }
            message(&mut out, 5, &array);
        }
    }
    out
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    key(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u64, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u64, body: &[u8]) {
    bytes(out, field, body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::span::Kind;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let enc = |n| {
            let mut out = Vec::new();
            varint(&mut out, n);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(1), [1]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(
            enc(u64::MAX),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }

    /// The bytes Python's `opentelemetry-proto` 1.45.2 (protobuf 7.36)
    /// writes for the same request (`SerializeToString`), taken once and
    /// pinned here: field order, the oneof, the array, the negative int,
    /// the double, the status.
    #[test]
    fn a_request_is_the_bytes_opentelemetry_proto_writes() {
        let resource_attrs = [("service.name", Value::from("sluice"))];
        let resource = Resource {
            attributes: &resource_attrs,
            scope_name: "sluice",
            scope_version: "0.1.0",
        };
        let span = Span {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: Some([3; 8]),
            name: "chat m1".to_string(),
            kind: Kind::Client,
            start_ns: 1_796_584_209_961_000_000,
            end_ns: 1_796_584_209_963_392_000,
            attributes: vec![
                ("gen_ai.usage.input_tokens", Value::Int(120)),
                ("neg", Value::Int(-2)),
                ("ok", Value::Bool(true)),
                ("t", Value::Double(0.5)),
                ("r", Value::Strs(vec!["stop".into(), "length".into()])),
            ],
            status: Status::Error("permission_denied".to_string()),
        };
        let got = crate::digest::hex(&request(&resource, &[span]));
        assert_eq!(
            got, EXPECTED,
            "decode it with opentelemetry-proto to see where it differs"
        );
    }

    /// See [`a_request_is_the_bytes_opentelemetry_proto_writes`].
    const EXPECTED: &str = "0af7010a1a0a180a0c736572766963652e6e616d6512080a06736c7569636512d8010a0f0a06736c756963651205302e312e3012c4010a100101010101010101010101010101010112080202020202020202220803030303030303032a0763686174206d31300339401ccdfbd1bfee1841009cf1fbd1bfee184a1f0a1967656e5f61692e75736167652e696e7075745f746f6b656e73120218784a120a036e6567120b18feffffffffffffffff014a080a026f6b120210014a0e0a0174120921000000000000e03f4a190a017212142a120a060a0473746f700a080a066c656e6774687a1512117065726d697373696f6e5f64656e6965641802";
}
