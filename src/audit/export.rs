//! `sluice audit export`: a run's record as JSON lines or CSV, streamed.

use super::db::{self, Db};
use super::rows::{self, Output, StoredCall};
use super::show::{Call, Outcome, Run};
use serde::Serialize;

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A `{"type":"run"}` line, then a `{"type":"call"}` line per call.
    Jsonl,
    /// A header, then a row per call (RFC 4180).
    Csv,
}

/// Why an export stopped.
#[derive(Debug)]
pub enum ExportError {
    /// The database could not be read.
    Db(String),
    /// The output could not be written.
    Write(std::io::Error),
}

impl From<String> for ExportError {
    fn from(e: String) -> Self {
        ExportError::Db(e)
    }
}

impl From<std::io::Error> for ExportError {
    fn from(e: std::io::Error) -> Self {
        ExportError::Write(e)
    }
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Db(e) => f.write_str(e),
            ExportError::Write(e) => write!(f, "cannot write the export: {e}"),
        }
    }
}

/// Writes run `run_id` to `out` in `format`, streaming its calls.
pub fn export(
    store: &dyn Db,
    run_id: &str,
    format: Format,
    out: &mut dyn std::io::Write,
) -> Result<(), ExportError> {
    let run = rows::load_run(store, run_id)?;
    let live = run.running();
    let db = |e: db::Error| ExportError::Db(rows::db(e));
    match format {
        Format::Jsonl => {
            writeln!(out, "{}", tagged("run", &Run::of(&run)))?;
            rows::each_call(store, run_id, Output::Resolved, db, |c| {
                Ok(writeln!(out, "{}", tagged("call", &Call::of(&c, live)))?)
            })
        }
        Format::Csv => {
            out.write_all(csv_line(CSV_HEADER.iter().map(|h| Some(*h))).as_bytes())?;
            rows::each_call(store, run_id, Output::Resolved, db, |c| {
                Ok(out.write_all(csv_row(&c, live).as_bytes())?)
            })
        }
    }
}

/// `value`'s fields after a `"type"` field.
fn tagged(kind: &str, value: &impl Serialize) -> String {
    #[derive(Serialize)]
    struct Tagged<'a, T> {
        #[serde(rename = "type")]
        kind: &'a str,
        #[serde(flatten)]
        value: &'a T,
    }
    serde_json::to_string(&Tagged { kind, value }).unwrap_or_default()
}

// New columns go at the end, so a reader that picks columns by place
// still finds the old ones where they were.
const CSV_HEADER: [&str; 25] = [
    "run",
    "n",
    "task",
    "seq",
    "flow",
    "tier",
    "started_ms",
    "outcome",
    "status",
    "duration_us",
    "input",
    "capabilities",
    "decisions",
    "late_decisions",
    "route",
    "redacted",
    "replayed_from",
    "output",
    "error",
    "capped",
    "prev",
    "hash",
    "outcome_hash",
    "parts",
    "client",
];

/// A call as CSV: JSON columns as stored, so the hashes can be checked
/// from the export; the input whole, and `parts` as stored when the record
/// keeps its list field's items by content (the hash covers the input
/// without that field, and each item's key is the SHA-256 of its compact
/// JSON); `client` empty for the script's own calls.
fn csv_row(c: &StoredCall, live: bool) -> String {
    let (n, seq, started) = (c.n.to_string(), c.seq.to_string(), c.started_ms.to_string());
    let duration = c.duration_us.map(|d| d.to_string());
    let capped = if c.capped { "1" } else { "0" };
    let fields: [Option<&str>; 25] = [
        Some(&c.run),
        Some(&n),
        Some(&c.task),
        Some(&seq),
        Some(&c.flow),
        Some(&c.tier),
        Some(&started),
        Some(Outcome::of(c, live).as_str()),
        c.status.as_deref(),
        duration.as_deref(),
        Some(&c.input),
        Some(&c.capabilities),
        Some(&c.decisions),
        c.late_decisions.as_deref(),
        c.route.as_deref(),
        Some(&c.redacted),
        c.replayed_from.as_deref(),
        c.output.as_deref(),
        c.error.as_deref(),
        Some(capped),
        Some(&c.prev),
        Some(&c.hash),
        c.outcome_hash.as_deref(),
        c.parts.as_ref().map(|p| p.column.as_str()),
        c.client.as_deref(),
    ];
    csv_line(fields)
}

/// One CSV record ending in CRLF; an absent field is empty.
fn csv_line<'a>(fields: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let quoted: Vec<String> = fields
        .into_iter()
        .map(|f| csv_field(f.unwrap_or("")))
        .collect();
    quoted.join(",") + "\r\n"
}

/// RFC 4180: a field holding a comma, quote or line break is quoted, its
/// quotes doubled.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
