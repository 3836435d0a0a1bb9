//! How a command's captured output is shaped for its reader.
//!
//! The executor hands a flow one [`Captured`] per stream: the stream's first
//! bytes and its last bytes, with the byte and line counts of the whole. This
//! module turns that into the text a caller (a script, or a model) reads, in
//! two shapes:
//!
//! - [`bounded`]: `bash`'s per-stream shape. A stream longer than
//!   [`STREAM_BUDGET`](crate::exec::STREAM_BUDGET) shows its first 15,000 and its last 15,000 bytes with one
//!   `[N bytes omitted]` line where the middle was.
//! - [`codex_output`]: `shell_command`'s shape, byte-compatible with the Codex
//!   CLI's rendering of a command's aggregated output (exit code, wall time,
//!   optional line count, and the output cut in the middle to a token budget).
//!
//! Both keep the head *and* the tail rather than the head alone because the
//! two ends carry the meaning: the start says what ran (a search prints its
//! matches first, a build its first error), the end says how it ended (a test
//! runner prints its verdict last). The middle is the part a reader can
//! afford to lose, and that is also what the collector already drops, so
//! neither shape ever needs the whole stream in memory.
//!
//! ## Invalid UTF-8
//!
//! Output is bytes; readers get text. When the whole stream is in memory
//! (nothing dropped) it is decoded with [`String::from_utf8_lossy`] and shaped
//! exactly. When the middle was dropped, the byte positions of the cuts and
//! the counts (`[N bytes omitted]`, Codex's removed tokens) are computed on
//! the *raw* bytes, and only the kept pieces are decoded lossily. For valid
//! UTF-8 that is identical to shaping the decoded whole stream; for invalid
//! UTF-8 it differs from "decode the whole stream, then cut" only in that an
//! invalid byte counts as one byte rather than as the three bytes of the
//! U+FFFD that replaces it, which the shaper cannot know without the middle.

use super::{choice, closed, field, list, nested};
use crate::exec::Captured;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;

/// Bytes of one `bash` stream shown in full; a longer stream shows its first
/// and last half of this. Exactly this many bytes is not truncated.
#[cfg(test)]
pub const STREAM_LIMIT: usize = 30_000;

/// Codex's budget for a command's output, in approximate tokens.
pub const CODEX_TOKEN_BUDGET: usize = 10_000;

/// The exit code `shell_command` reports for a command that timed out.
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// Codex's estimate: one token per four bytes, rounded up.
const BYTES_PER_TOKEN: usize = 4;

/// The collector budget [`codex_output`] needs to be exact: the token budget
/// in bytes (40,000), so the head and the tail are each half of it.
pub const CODEX_CAPTURE_BUDGET: usize = CODEX_TOKEN_BUDGET * BYTES_PER_TOKEN;

/// One `bash` stream as the caller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    /// The stream, or its start and end around an `[N bytes omitted]` line.
    pub text: String,
    /// Whether `text` is a fragment (bytes were dropped from the middle).
    pub truncated: bool,
    /// Bytes of the stream not shown in `text` (0 unless truncated).
    pub dropped_bytes: u64,
}

/// Shapes a stream captured with budget
/// [`STREAM_BUDGET`](crate::exec::STREAM_BUDGET).
///
/// Nothing dropped: the stream, decoded lossily. Dropped: the head with an
/// incomplete UTF-8 character at its end removed, then the marker on a line of
/// its own, then the tail without the continuation bytes of a character that
/// began in the dropped middle; bytes trimmed that way count as omitted, so
/// `dropped_bytes` is every byte not shown.
///
/// `cut_short` (reading stopped before the stream ended) does not by itself
/// mean bytes are missing from the middle, so it does not make the stream
/// `truncated`; [`Captured::cut_short`] reports it.
pub fn bounded(c: &Captured) -> Bounded {
    if c.dropped_bytes == 0 {
        return Bounded {
            text: String::from_utf8_lossy(&c.head).into_owned(),
            truncated: false,
            dropped_bytes: 0,
        };
    }
    let head = &c.head[..complete_prefix_len(&c.head)];
    let tail = &c.tail[continuation_prefix_len(&c.tail)..];
    let trimmed = (c.head.len() - head.len()) + (c.tail.len() - tail.len());
    let dropped = c.dropped_bytes + trimmed as u64;
    let mut text = String::with_capacity(head.len() + tail.len() + 32);
    text.push_str(&String::from_utf8_lossy(head));
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let _ = writeln!(text, "[{dropped} bytes omitted]");
    text.push_str(&String::from_utf8_lossy(tail));
    Bounded {
        text,
        truncated: true,
        dropped_bytes: dropped,
    }
}

/// Codex's truncation of a whole string (for tests and small inputs): at most
/// `max_tokens * 4` bytes of `text`, its start and its end, around a
/// `…N tokens truncated…` marker, never splitting a character.
pub fn truncate_middle_tokens(text: &str, max_tokens: usize) -> String {
    if text.is_empty() {
        return String::new();
    }
    let max_bytes = max_tokens.saturating_mul(BYTES_PER_TOKEN);
    if max_tokens > 0 && text.len() <= max_bytes {
        return text.to_owned();
    }
    if max_bytes == 0 {
        return token_marker(approx_tokens(text.len() as u64));
    }
    let left_budget = max_bytes / 2;
    let right_budget = max_bytes - left_budget;
    let prefix_end = floor_char_boundary(text, left_budget);
    let suffix_start =
        ceil_char_boundary(text, text.len().saturating_sub(right_budget)).max(prefix_end);
    let removed = approx_tokens((text.len() - max_bytes) as u64);
    let mut out = String::with_capacity(prefix_end + (text.len() - suffix_start) + 32);
    out.push_str(&text[..prefix_end]);
    out.push_str(&token_marker(removed));
    out.push_str(&text[suffix_start..]);
    out
}

/// Codex's rendering from a captured aggregated stream (stdout and stderr
/// interleaved, captured with budget [`CODEX_CAPTURE_BUDGET`]) without
/// holding the whole stream.
///
/// A timeout puts `command timed out after {ms} milliseconds` on a line before
/// the output, as part of the content Codex truncates and counts. The caller
/// passes [`TIMEOUT_EXIT_CODE`] as `exit_code` for a timed-out command.
///
/// With a capture budget of at least 40,000 bytes the result equals Codex's
/// on the whole (lossily decoded) stream for valid UTF-8, and for any bytes
/// when nothing was dropped; see the module doc for invalid UTF-8.
pub fn codex_output(exit_code: i32, wall: Duration, timed_out: bool, c: &Captured) -> String {
    let lead = if timed_out {
        format!(
            "command timed out after {} milliseconds\n",
            wall.as_millis()
        )
    } else {
        String::new()
    };
    let (total_lines, formatted) = if c.dropped_bytes == 0 {
        let content = lead + &String::from_utf8_lossy(&c.head);
        let lines = content.lines().count() as u64;
        (lines, truncate_middle_tokens(&content, CODEX_TOKEN_BUDGET))
    } else {
        // The lead ends in a newline, so it adds exactly one line.
        let lines = c.lines + u64::from(timed_out);
        (lines, truncate_captured(lead.as_bytes(), c))
    };
    let seconds = (wall.as_secs_f32() * 10.0).round() / 10.0;
    let mut sections = vec![
        format!("Exit code: {exit_code}"),
        format!("Wall time: {seconds:.1} seconds"),
    ];
    if total_lines != formatted.lines().count() as u64 {
        sections.push(format!("Total output lines: {total_lines}"));
    }
    sections.push("Output:".to_string());
    sections.push(formatted);
    sections.join("\n")
}

/// [`truncate_middle_tokens`] with [`CODEX_TOKEN_BUDGET`] applied to
/// `lead` + the captured stream, whose middle was dropped. Content bytes
/// `[0, left_budget)` lie in `lead + head` and `[len - right_budget, len)` in
/// the tail whenever the capture budget was at least 40,000 bytes.
fn truncate_captured(lead: &[u8], c: &Captured) -> String {
    let max_bytes = CODEX_CAPTURE_BUDGET;
    let left_budget = max_bytes / 2;
    let right_budget = max_bytes - left_budget;
    let len = lead.len() as u64 + c.total_bytes;

    let mut first = Vec::with_capacity(left_budget.min(lead.len() + c.head.len()));
    first.extend_from_slice(&lead[..left_budget.min(lead.len())]);
    let room = left_budget - first.len();
    first.extend_from_slice(&c.head[..room.min(c.head.len())]);
    let prefix = &first[..complete_prefix_len(&first)];

    let last = &c.tail[c.tail.len().saturating_sub(right_budget)..];
    let suffix = &last[continuation_prefix_len(last)..];

    let removed = approx_tokens(len.saturating_sub(max_bytes as u64));
    let mut out = String::from_utf8_lossy(prefix).into_owned();
    out.push_str(&token_marker(removed));
    out.push_str(&String::from_utf8_lossy(suffix));
    out
}

fn token_marker(tokens: u64) -> String {
    format!("\u{2026}{tokens} tokens truncated\u{2026}")
}

/// Codex's token estimate for a byte count: four bytes a token, rounded up.
fn approx_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN as u64)
}

fn floor_char_boundary(text: &str, target: usize) -> usize {
    let mut boundary = target.min(text.len());
    while !text.is_char_boundary(boundary) {
        boundary -= 1;
    }
    boundary
}

fn ceil_char_boundary(text: &str, target: usize) -> usize {
    let mut boundary = target.min(text.len());
    while !text.is_char_boundary(boundary) {
        boundary += 1;
    }
    boundary
}

/// Output as it arrives, decoded a piece at a time: a character split
/// between two pieces is held back until its end arrives, so it is not
/// shown as two replacement characters; invalid bytes decode lossily.
#[derive(Default)]
pub struct TextPieces {
    held: Vec<u8>,
}

impl TextPieces {
    /// The text of `bytes` after what was held, but for an unfinished
    /// character at its end.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.held.extend_from_slice(bytes);
        let end = complete_prefix_len(&self.held);
        let text = String::from_utf8_lossy(&self.held[..end]).into_owned();
        self.held.drain(..end);
        text
    }
}

fn is_continuation(b: u8) -> bool {
    (0x80..=0xBF).contains(&b)
}

/// The length of `bytes` without an incomplete UTF-8 sequence at its end
/// (a lead byte missing some of its continuation bytes: at most 3 bytes are
/// cut). Anything else, invalid bytes included, is left for lossy decoding.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    let floor = bytes.len().saturating_sub(3);
    for i in (floor..bytes.len()).rev() {
        if is_continuation(bytes[i]) {
            continue;
        }
        return match std::str::from_utf8(&bytes[i..]) {
            Err(e) if e.error_len().is_none() => i,
            _ => bytes.len(),
        };
    }
    bytes.len()
}

/// How many bytes at the start of `bytes` are continuation bytes of a
/// character that began before it (at most 3).
fn continuation_prefix_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|&&b| is_continuation(b))
        .count()
}

/// The schema of a confined command's `sandbox` facts
/// ([`crate::sandbox::Facts`]), in `bash` and `shell_command` outputs.
/// The `sandbox` facts of a command's result; `routable` for a flow whose
/// commands a route can send into a container.
pub(crate) fn sandbox_schema(routable: bool) -> Value {
    let mut modes = vec!["read-only", "workspace-write", "danger-full-access"];
    let mut optional = vec![
        ("reverted", list(json!({"type": "string"}), "Repositories and git control files the command made, removed when it ended.")),
        ("partial", list(json!({"type": "string"}), "What the sandbox could not express, when enforcement is partial.")),
        ("runnerFailed", field("boolean", "Present (true) when the runner broke before the command ran (background jobs only; in the foreground that is a provider_unavailable error).")),
        ("limits", limits_schema()),
    ];
    let network = ("network", choice(&["open", "closed"], "Whether the command could open network sockets (closed: a connection fails; it opens only with net:get:*, net:post:* and net:private:* allowed). Absent in mode container, where the container decides."));
    let mut always = vec![];
    if routable {
        optional.push(network);
    } else {
        always.push(network);
    }
    if routable {
        modes.push("container");
        optional.push((
            "container",
            field(
                "string",
                "The container the command ran in (mode container).",
            ),
        ));
        optional.push((
            "engine",
            choice(
                &["podman", "docker"],
                "The engine that reached it (mode container).",
            ),
        ));
        optional.push((
            "protected",
            field(
                "boolean",
                "Mode container: whether the run started the container, with repositories read-only and the audit store and what the policy hides masked over its mounts (false: a container it only reached, which has none of these).",
            ),
        ));
        optional.push((
            "readOnly",
            list(
                json!({"type": "string"}),
                "Mode container: the container's paths its mounts keep read-only (repositories, the policies' files).",
            ),
        ));
        optional.push((
            "hidden",
            list(
                json!({"type": "string"}),
                "Mode container: the container's paths masked (the audit store, what the policy hides from commands).",
            ),
        ));
    }
    let mut required = vec![
        ("mode", choice(&modes, "What the command could change; container: it ran in a container, which its mounts bound.")),
        ("denied", field("boolean", "Whether the sandbox refused it a file operation (a nonzero exit, the runner's words on stderr).")),
        ("enforcement", choice(&["full", "partial"], "partial: the runner could not express part of the policy (a deny by wildcard, a decide hook), or the command ran in a container.")),
    ];
    required.extend(always);
    let facts = closed(&required, &optional);
    let title = if routable {
        "PlaceFacts"
    } else {
        "SandboxFacts"
    };
    nested(
        title,
        "How the command was confined, or the container it ran in; absent when the policy confines nothing.",
        facts,
    )
}

/// A result's `limits` (see `exec::resources::Report`).
fn limits_schema() -> Value {
    use crate::exec::resources::Kind;
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    let mechanisms = ["cgroup-v2", "cgroup-v1", "rlimit", "none"];
    let by: Vec<(&str, Value)> = names
        .iter()
        .map(|n| (*n, choice(&mechanisms, "What enforced this limit: a cgroup (v2, v1), a per-process rlimit, or nothing.")))
        .collect();
    let mut optional: Vec<(&str, Value)> = Kind::ALL
        .iter()
        .map(|k| (k.name(), field("integer", k.unit())))
        .collect();
    optional.push((
        "partial",
        list(
            json!({"type": "string"}),
            "What a mechanism could not express of its limit.",
        ),
    ));
    optional.push(("hit", list(
        nested("LimitHit", "A limit the command hit.", closed(&[
            ("limit", choice(&names, "Which limit.")),
            ("how", field("string", "What happened, and what says so (a cgroup's count, a signal, the system's words).")),
        ], &[])),
        "The limits the command hit: it was stopped or refused by them, not crashed.",
    )));
    optional.push((
        "notice",
        field(
            "string",
            "Which limit the command hit and where to raise it; present when it hit one.",
        ),
    ));
    let required = [(
        "enforcement",
        nested(
            "LimitsEnforcement",
            "What enforced each limit set.",
            closed(&[], &by),
        ),
    )];
    nested(
        "Limits",
        "The policies' resource limits for the command (the strictest value of each), how each was enforced, and what it hit; absent when no policy sets limits.",
        closed(&required, &optional),
    )
}

/// Where a command ran: confined on the host, or in a container (`bash`
/// and `shell_command` follow the policy's route there).
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Place {
    /// Confined on the host: what the sandbox enforced.
    Host(crate::sandbox::Facts),
    /// In a container: which, through which engine, and what it protected.
    Container(crate::container::Facts),
}

/// A container's facts for the schema tests, every field set.
#[cfg(test)]
pub(crate) fn container_sample() -> crate::container::Facts {
    crate::container::Facts {
        mode: "container",
        container: "box".into(),
        engine: "podman".into(),
        denied: false,
        enforcement: "partial",
        partial: vec!["the command ran in container box".into()],
        protected: true,
        read_only: vec!["/srv/.git".into()],
        hidden: vec!["/srv/.sluice".into()],
        reverted: vec!["/w/sub/.git".into()],
    }
}

/// Sandbox facts for the schema tests: every field, or the fewest.
#[cfg(test)]
pub(crate) fn sandbox_sample(full: bool) -> crate::sandbox::Facts {
    use crate::sandbox::{Enforcement, Facts, Mode};
    Facts {
        mode: Mode::WorkspaceWrite,
        network: crate::sandbox::Network::of(full),
        denied: full,
        enforcement: if full {
            Enforcement::Partial
        } else {
            Enforcement::Full
        },
        reverted: if full {
            vec![std::path::PathBuf::from("/w/.git/hooks/x")]
        } else {
            vec![]
        },
        partial: if full {
            vec!["a decide hook".into()]
        } else {
            vec![]
        },
        limits: full.then(|| crate::exec::resources::Report::sample(true)),
        runner_failed: full,
    }
}

/// The fewest sandbox facts with the fewest `limits`, for the schema
/// tests: every field of `limits` but `enforcement` is optional.
#[cfg(test)]
pub(crate) fn sandbox_sample_limited() -> crate::sandbox::Facts {
    crate::sandbox::Facts {
        limits: Some(crate::exec::resources::Report::sample(false)),
        ..sandbox_sample(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::output::Collector;

    /// Captures `data` the way the executor does: a collector with `budget`,
    /// fed in chunks of `chunk` bytes (which split characters at will).
    fn capture(data: &[u8], budget: usize, chunk: usize) -> Captured {
        let mut col = Collector::new("stdout", budget, None, 0).counting_lines();
        for piece in data.chunks(chunk.max(1)) {
            col.push(piece);
        }
        col.finish()
    }

    fn stream(data: &[u8]) -> Captured {
        capture(data, STREAM_LIMIT, 4096)
    }

    // ---- bounded ----

    #[test]
    fn bounded_exactly_at_the_limit_is_not_truncated() {
        let data = "y".repeat(STREAM_LIMIT);
        let b = bounded(&stream(data.as_bytes()));
        assert_eq!(
            b,
            Bounded {
                text: data,
                truncated: false,
                dropped_bytes: 0
            }
        );
    }

    #[test]
    fn bounded_one_over_the_limit_omits_one_byte() {
        let data = format!("{}M{}", "a".repeat(15_000), "b".repeat(15_000));
        assert_eq!(data.len(), 30_001);
        let b = bounded(&stream(data.as_bytes()));
        let want = format!(
            "{}\n[1 bytes omitted]\n{}",
            "a".repeat(15_000),
            "b".repeat(15_000)
        );
        assert_eq!(b.text, want);
        assert_eq!(b.text.len(), 30_000 + "\n[1 bytes omitted]\n".len());
        assert!(b.truncated);
        assert_eq!(b.dropped_bytes, 1);
    }

    #[test]
    fn bounded_matches_the_spec_example() {
        let filler = "x".repeat(40_025 - 2 * "MARKER-HEAD\n".len());
        let data = format!("MARKER-HEAD\n{filler}\nMARKER-TAIL");
        assert_eq!(data.len(), 40_025);
        let b = bounded(&stream(data.as_bytes()));
        let side = "x".repeat(15_000 - "MARKER-HEAD\n".len());
        assert_eq!(
            b.text,
            format!("MARKER-HEAD\n{side}\n[10025 bytes omitted]\n{side}\nMARKER-TAIL")
        );
        assert!(b.truncated);
        assert_eq!(b.dropped_bytes, 10_025);
    }

    #[test]
    fn bounded_trims_characters_split_by_the_cuts_and_counts_them() {
        // "é" (2 bytes) straddles the head cut at 15,000; "€" (3 bytes)
        // starts one byte before the tail, so the tail opens with its last
        // two bytes.
        let dropped_middle = 100;
        let total = STREAM_LIMIT + dropped_middle;
        let tail_start = total - 15_000;
        let mut data = "a".repeat(14_999) + "é";
        data.push_str(&"m".repeat(tail_start - 1 - data.len()));
        data.push('€');
        data.push_str(&"z".repeat(total - data.len()));
        assert_eq!(data.len(), total);
        let c = stream(data.as_bytes());
        assert_eq!(c.head.len(), 15_000);
        assert_eq!(c.tail.len(), 15_000);
        assert_eq!(c.dropped_bytes, dropped_middle as u64);
        let b = bounded(&c);
        let tail = "z".repeat(15_000 - 2);
        assert_eq!(
            b.text,
            format!("{}\n[103 bytes omitted]\n{tail}", "a".repeat(14_999))
        );
        assert_eq!(b.dropped_bytes, dropped_middle as u64 + 1 + 2);
        assert!(!b.text.contains('\u{FFFD}'));
    }

    #[test]
    fn bounded_trims_an_incomplete_four_byte_character() {
        // The head ends with the first three bytes of "😀".
        let mut data = "a".repeat(14_997) + "😀";
        data.push_str(&"b".repeat(STREAM_LIMIT + 10 - data.len()));
        let b = bounded(&stream(data.as_bytes()));
        assert_eq!(b.dropped_bytes, 10 + 3);
        assert!(b
            .text
            .starts_with(&format!("{}\n[13 bytes omitted]\n", "a".repeat(14_997))));
    }

    #[test]
    fn bounded_marker_stays_on_its_own_line_after_a_newline() {
        let data = format!("{}\n{}", "a".repeat(14_999), "b".repeat(15_500));
        let b = bounded(&stream(data.as_bytes()));
        assert_eq!(
            b.text,
            format!(
                "{}\n[500 bytes omitted]\n{}",
                "a".repeat(14_999),
                "b".repeat(15_000)
            )
        );
        assert_eq!(b.dropped_bytes, 500);
    }

    #[test]
    fn bounded_cut_short_alone_is_not_truncated() {
        let mut col = Collector::new("stdout", STREAM_LIMIT, None, 0);
        col.push(b"partial\n");
        col.mark_cut_short();
        let b = bounded(&col.finish());
        assert_eq!(b.text, "partial\n");
        assert!(!b.truncated);
        assert_eq!(b.dropped_bytes, 0);
    }

    #[test]
    fn bounded_decodes_invalid_bytes_lossily() {
        let b = bounded(&stream(b"ok \xff\xfe\n"));
        assert_eq!(b.text, "ok \u{FFFD}\u{FFFD}\n");
        assert!(!b.truncated);
    }

    // ---- Codex truncation (ported from Codex's own tests) ----

    #[test]
    fn truncate_middle_tokens_keeps_whole_characters() {
        let s = "😀😀😀😀😀😀😀😀😀😀\nsecond line with text\n";
        assert_eq!(
            truncate_middle_tokens(s, 8),
            "😀😀😀😀…8 tokens truncated… line with text\n"
        );
    }

    #[test]
    fn truncate_middle_tokens_with_zero_budget_is_only_the_marker() {
        assert_eq!(truncate_middle_tokens("abcdef", 0), "…2 tokens truncated…");
        assert_eq!(truncate_middle_tokens("", 0), "");
    }

    #[test]
    fn truncate_middle_tokens_leaves_short_text_alone() {
        assert_eq!(truncate_middle_tokens("short output", 100), "short output");
    }

    // ---- Codex rendering ----

    /// Codex's `truncate_middle_with_token_budget`, ported independently of
    /// the code under test.
    fn codex_truncate(text: &str, max_tokens: usize) -> String {
        if text.is_empty() {
            return String::new();
        }
        let max_bytes = max_tokens * 4;
        if max_tokens > 0 && text.len() <= max_bytes {
            return text.to_owned();
        }
        if max_bytes == 0 {
            return format!("…{} tokens truncated…", text.len().div_ceil(4));
        }
        let left_budget = max_bytes / 2;
        let right_budget = max_bytes - left_budget;
        let mut prefix_end = left_budget.min(text.len());
        while !text.is_char_boundary(prefix_end) {
            prefix_end -= 1;
        }
        let mut suffix_start = text.len().saturating_sub(right_budget);
        while !text.is_char_boundary(suffix_start) {
            suffix_start += 1;
        }
        let suffix_start = suffix_start.max(prefix_end);
        let removed = (text.len() - max_bytes).div_ceil(4);
        format!(
            "{}…{removed} tokens truncated…{}",
            &text[..prefix_end],
            &text[suffix_start..]
        )
    }

    /// Codex's `format_exec_output_for_model` on the whole output, with the
    /// wall time printed to one decimal.
    fn codex_reference(exit_code: i32, wall: Duration, timed_out: bool, output: &str) -> String {
        let duration_seconds = ((wall.as_secs_f32()) * 10.0).round() / 10.0;
        let content = if timed_out {
            format!(
                "command timed out after {} milliseconds\n{}",
                wall.as_millis(),
                output
            )
        } else {
            output.to_string()
        };
        let total_lines = content.lines().count();
        let formatted = codex_truncate(&content, 10_000);
        let mut sections = Vec::new();
        sections.push(format!("Exit code: {exit_code}"));
        sections.push(format!("Wall time: {duration_seconds:.1} seconds"));
        if total_lines != formatted.lines().count() {
            sections.push(format!("Total output lines: {total_lines}"));
        }
        sections.push("Output:".to_string());
        sections.push(formatted);
        sections.join("\n")
    }

    /// About `n` bytes (at most `n`, never fewer than `n - 3`) of text built
    /// from `alphabet`, cut at a character boundary.
    fn text_of(alphabet: &str, n: usize) -> String {
        let mut s = String::with_capacity(n + 4);
        for ch in alphabet.chars().cycle() {
            if s.len() + ch.len_utf8() > n {
                break;
            }
            s.push(ch);
        }
        s
    }

    #[test]
    fn codex_output_equals_codex_on_the_whole_stream() {
        let alphabets = [
            "abcdefghijklmnopqrstuvwxyz0123456789 ",
            "the quick brown fox jumps\nover the lazy dog\n",
            "aé€😀bßγ中文🦀",
            "héllo wörld €5\n😀 line\r\nend ✓\n",
        ];
        let mut lengths: Vec<usize> = (0..=45_000).step_by(997).collect();
        lengths.extend([1, 2, 3, 19_999, 20_000, 20_001, 39_999, 40_000, 40_001]);
        // Where the timeout line pushes the content across the budget.
        let lead_len = "command timed out after 10000 milliseconds\n".len();
        lengths.extend([
            40_000 - lead_len - 1,
            40_000 - lead_len,
            40_000 - lead_len + 1,
        ]);
        let mut checked = 0;
        for alphabet in alphabets {
            for &n in &lengths {
                let output = text_of(alphabet, n);
                for timed_out in [false, true] {
                    let (exit, wall) = if timed_out {
                        (TIMEOUT_EXIT_CODE, Duration::from_millis(10_000))
                    } else {
                        (n as i32 % 3, Duration::from_millis(n as u64 % 7_919))
                    };
                    for chunk in [4096, 997] {
                        let c = capture(output.as_bytes(), CODEX_CAPTURE_BUDGET, chunk);
                        assert_eq!(c.lines, output.lines().count() as u64);
                        let got = codex_output(exit, wall, timed_out, &c);
                        let want = codex_reference(exit, wall, timed_out, &output);
                        assert!(
                            got == want,
                            "n={n} alphabet={alphabet:?} timed_out={timed_out} chunk={chunk}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 400);
    }

    #[test]
    fn codex_output_small_results() {
        let c = capture(b"hi\n", CODEX_CAPTURE_BUDGET, 4096);
        assert_eq!(
            codex_output(0, Duration::from_millis(120), false, &c),
            "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nhi\n"
        );
        let empty = Captured::default();
        assert_eq!(
            codex_output(0, Duration::ZERO, false, &empty),
            "Exit code: 0\nWall time: 0.0 seconds\nOutput:\n"
        );
        let c = capture(b"partial", CODEX_CAPTURE_BUDGET, 4096);
        assert_eq!(
            codex_output(TIMEOUT_EXIT_CODE, Duration::from_millis(10_049), true, &c),
            "Exit code: 124\nWall time: 10.0 seconds\nOutput:\n\
             command timed out after 10049 milliseconds\npartial"
        );
    }

    #[test]
    fn codex_output_reports_total_lines_when_truncated() {
        let output = "line\n".repeat(20_000);
        let c = capture(output.as_bytes(), CODEX_CAPTURE_BUDGET, 4096);
        let got = codex_output(1, Duration::from_millis(2_345), false, &c);
        let head = "line\n".repeat(4_000);
        assert_eq!(
            got,
            format!(
                "Exit code: 1\nWall time: 2.3 seconds\nTotal output lines: 20000\nOutput:\n\
                 {head}…15000 tokens truncated…{head}"
            )
        );
    }

    #[test]
    fn codex_output_invalid_utf8_in_memory_is_exact() {
        // Nothing dropped: decoded whole, then shaped exactly as Codex does.
        let mut data = vec![b'a'; 39_990];
        data.extend_from_slice(b"\xff\xff\xff\xff\xff\n");
        let c = capture(&data, CODEX_CAPTURE_BUDGET, 4096);
        assert_eq!(c.dropped_bytes, 0);
        let whole = String::from_utf8_lossy(&data);
        assert!(whole.len() > 40_000);
        assert_eq!(
            codex_output(0, Duration::from_secs(1), false, &c),
            codex_reference(0, Duration::from_secs(1), false, &whole)
        );
    }

    #[test]
    fn codex_output_invalid_utf8_dropped_counts_raw_bytes() {
        // Dropped: cuts and the removed count are on raw bytes; the kept
        // pieces decode lossily.
        let mut data = b"\xffhead".to_vec();
        data.extend(std::iter::repeat_n(b'x', 50_000));
        data.extend_from_slice(b"tail\xfe");
        let c = capture(&data, CODEX_CAPTURE_BUDGET, 4096);
        assert!(c.dropped_bytes > 0);
        let got = codex_output(0, Duration::from_secs(1), false, &c);
        let removed = (data.len() - 40_000).div_ceil(4);
        let want_formatted = format!(
            "{}…{removed} tokens truncated…{}",
            String::from_utf8_lossy(&data[..20_000]),
            String::from_utf8_lossy(&data[data.len() - 20_000..])
        );
        assert_eq!(
            got,
            format!("Exit code: 0\nWall time: 1.0 seconds\nOutput:\n{want_formatted}")
        );
        assert!(got.contains("\u{FFFD}head") && got.ends_with("tail\u{FFFD}"));
    }

    #[test]
    fn utf8_trimming_helpers() {
        assert_eq!(complete_prefix_len(b"abc"), 3);
        assert_eq!(complete_prefix_len("aé".as_bytes()), 3);
        assert_eq!(complete_prefix_len(&"aé".as_bytes()[..2]), 1);
        assert_eq!(complete_prefix_len(&"a😀".as_bytes()[..4]), 1);
        assert_eq!(complete_prefix_len("a😀".as_bytes()), 5);
        // Invalid, not incomplete: left for lossy decoding.
        assert_eq!(complete_prefix_len(b"a\xff"), 2);
        assert_eq!(complete_prefix_len(b"a\x80\x80\x80\x80"), 5);
        assert_eq!(continuation_prefix_len(&"😀b".as_bytes()[1..]), 3);
        assert_eq!(continuation_prefix_len(b"\x80\x80\x80\x80\x80"), 3);
        assert_eq!(continuation_prefix_len(b"ab"), 0);
    }

    #[test]
    fn text_pieces_hold_a_character_split_between_pieces_until_it_ends() {
        let mut t = TextPieces::default();
        let e = "é".as_bytes();
        assert_eq!(t.push(&[b'h', e[0]]), "h");
        assert_eq!(t.push(&[e[1], b'!']), "é!");
        // Invalid bytes decode lossily, and are not held.
        assert_eq!(t.push(b"\xff x"), "\u{fffd} x");
        assert_eq!(t.push(b""), "");
    }
}
