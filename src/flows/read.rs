//! `read`: one page of a text file, raw, with its line numbers as fields.
//!
//! Lines split on `\n`; a `\r` stays part of its line and the page omits the
//! final `\n`, so text copied from `content` is a byte-exact edit anchor. A
//! page ends on a whole line when the byte budget cuts it, and over-long lines
//! are clipped and named in the notice, because neither a fragment nor a
//! clipped line can anchor an edit.

use super::{Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::{text, Target};
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Lines in a page when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters kept of one line; longer lines are clipped.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of content in one page, at most.
pub const PAGE_BYTES: usize = 50 * 1024;
/// Line numbers named in a notice before it summarises the rest.
const NAMED_LINES: usize = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub path: String,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    pub content: String,
    pub start_line: u64,
    pub end_line: u64,
    pub total_lines: u64,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

pub struct Read {
    target: Target,
    offset: u64,
    limit: u64,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "description": "File to read, relative to the workspace or absolute."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line of the page, 1-based. Default 1."},
            "limit": {"type": "integer", "minimum": 1, "description": "Lines in the page. Default 2000."}
        }
    })
}

impl Flow for Read {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "read",
        description: "Reads one page of a UTF-8 text file, raw and without a line-number gutter, with its line range as fields.",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
    };

    fn validate(input: &Input) -> FlowResult<()> {
        positive("offset", input.offset)?;
        positive("limit", input.limit)
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve("path", &input.path)?;
        let envelope = Envelope {
            tier: Tier::Sealed,
            reads: vec![target.real.clone()],
            writes: vec![],
        };
        let call = Read {
            target,
            offset: input.offset.unwrap_or(1),
            limit: input.limit.unwrap_or(DEFAULT_LIMIT),
        };
        Ok((call, envelope))
    }

    async fn execute(self, _ctx: &Context) -> FlowResult<Output> {
        let file = text::load(&self.target)?;
        page(&self.target, file.text, self.offset, self.limit)
    }
}

/// `invalid_input` unless an optional line number is at least 1.
pub(crate) fn positive(field: &str, value: Option<u64>) -> FlowResult<()> {
    match value {
        Some(0) => Err(FlowError::invalid_input(
            field,
            format!("`{field}` is 1-based: give 1 or more."),
        )),
        _ => Ok(()),
    }
}

/// The number of lines in `text`: a final line without `\n` counts.
pub fn count_lines(text: &str) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Byte offset where 1-based line `line` starts; `line` must exist.
pub fn line_start(text: &str, line: u64) -> usize {
    if line <= 1 {
        return 0;
    }
    memchr::memchr_iter(b'\n', text.as_bytes())
        .nth((line - 2) as usize)
        .map_or(text.len(), |i| i + 1)
}

/// Cuts the page `offset..offset+limit` out of `text`.
pub fn page(target: &Target, text: String, offset: u64, limit: u64) -> FlowResult<Output> {
    let total = count_lines(&text);
    if offset > total.max(1) {
        return Err(FlowError::new(
            ErrorCode::OffsetOutOfRange,
            format!(
                "offset {offset} is past the end of {}, which has {total} line{}. Give an offset from 1 to {}.",
                target.shown.display(),
                if total == 1 { "" } else { "s" },
                total.max(1)
            ),
        )
        .with("offset", offset)
        .with("totalLines", total));
    }
    // First find where the page ends and which lines need clipping, then cut
    // it out in one piece: no per-line copies in the common case.
    let from = line_start(&text, offset);
    let mut to = from;
    let mut bytes = 0;
    let mut clipped = Vec::new();
    let mut end = offset - 1;
    let mut budget_hit = false;
    let wanted = limit.min(total + 1 - offset);
    for line in text[from..].split('\n').take(wanted as usize) {
        let kept = clip(line).len();
        let sep = usize::from(end >= offset);
        if sep == 1 && bytes + sep + kept > PAGE_BYTES {
            budget_hit = true;
            break;
        }
        bytes += sep + kept;
        end += 1;
        to = line.as_ptr() as usize - text.as_ptr() as usize + line.len();
        if kept < line.len() {
            clipped.push(end);
        }
    }
    let content = if clipped.is_empty() {
        cut(text, from, to)
    } else {
        let lines: Vec<&str> = text[from..to].split('\n').map(clip).collect();
        lines.join("\n")
    };
    let notice = notice(offset, end, total, budget_hit, &clipped);
    Ok(Output {
        content,
        start_line: offset,
        end_line: end,
        total_lines: total,
        truncated: notice.is_some(),
        notice,
    })
}

/// `text[from..to]`, reusing the file's buffer when the page starts it.
fn cut(mut text: String, from: usize, to: usize) -> String {
    if from == 0 {
        text.truncate(to);
        text
    } else {
        text[from..to].to_string()
    }
}

/// `line` cut to its first [`MAX_LINE_CHARS`] characters.
fn clip(line: &str) -> &str {
    if line.len() <= MAX_LINE_CHARS {
        return line;
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

fn notice(start: u64, end: u64, total: u64, budget_hit: bool, clipped: &[u64]) -> Option<String> {
    let mut parts = Vec::new();
    if end < total {
        let why = if budget_hit {
            format!(" (the page stopped at its {PAGE_BYTES}-byte budget, on a whole line)")
        } else {
            String::new()
        };
        parts.push(format!(
            "Showing lines {start}-{end} of {total}{why}. Continue with offset = {}.",
            end + 1
        ));
    }
    if !clipped.is_empty() {
        let mut named: Vec<String> = clipped
            .iter()
            .take(NAMED_LINES)
            .map(u64::to_string)
            .collect();
        if clipped.len() > NAMED_LINES {
            named.push(format!("and {} more", clipped.len() - NAMED_LINES));
        }
        let (noun, verb) = if clipped.len() == 1 {
            ("Line", "is")
        } else {
            ("Lines", "are")
        };
        parts.push(format!(
            "{noun} {} {verb} longer than {MAX_LINE_CHARS} characters and clipped to their first {MAX_LINE_CHARS}; \
             a clipped line cannot be an edit anchor, so anchor it by startLine/endLine.",
            named.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn t() -> Target {
        Target {
            shown: PathBuf::from("/w/f"),
            real: PathBuf::from("/w/f"),
        }
    }

    #[test]
    fn counts_lines_like_an_editor() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("\n"), 1);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines("one\r\ntwo\r\n"), 2);
    }

    #[test]
    fn crlf_keeps_every_cr_and_drops_the_final_newline() {
        let p = page(&t(), "one\r\ntwo\r\n".into(), 1, 2000).unwrap();
        assert_eq!(p.content, "one\r\ntwo\r");
        assert_eq!(
            (p.start_line, p.end_line, p.total_lines, p.truncated),
            (1, 2, 2, false)
        );
    }

    #[test]
    fn empty_lines_keep_their_separators() {
        let p = page(&t(), "\nb\n\n".into(), 1, 2000).unwrap();
        assert_eq!((p.content.as_str(), p.end_line), ("\nb\n", 3));
        let p = page(&t(), "a\n\n\nd".into(), 2, 2).unwrap();
        assert_eq!((p.content.as_str(), p.end_line), ("\n", 3));
    }

    #[test]
    fn empty_file_is_an_empty_page() {
        let p = page(&t(), "".into(), 1, 2000).unwrap();
        assert_eq!(
            (p.content.as_str(), p.start_line, p.end_line, p.total_lines),
            ("", 1, 0, 0)
        );
        assert_eq!(
            page(&t(), "".into(), 2, 10).unwrap_err().code,
            ErrorCode::OffsetOutOfRange
        );
    }

    #[test]
    fn offset_and_limit_select_lines() {
        let p = page(&t(), "a\nb\nc\nd\n".into(), 2, 2).unwrap();
        assert_eq!(p.content, "b\nc");
        assert_eq!((p.start_line, p.end_line), (2, 3));
        assert!(p.truncated);
        assert!(p.notice.unwrap().contains("offset = 4"));
        let e = page(&t(), "a\nb\n".into(), 3, 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::OffsetOutOfRange);
        assert_eq!(e.details["totalLines"], 2);
    }

    #[test]
    fn byte_budget_ends_on_a_whole_line() {
        let line = "x".repeat(999);
        let text: String = (0..200).map(|_| format!("{line}\n")).collect();
        let p = page(&t(), text.clone(), 1, 2000).unwrap();
        // 999 bytes, then 1,000 per further line (separator included).
        assert_eq!(p.end_line, 51);
        assert!(p.content.len() <= PAGE_BYTES && p.content.len() + 1000 > PAGE_BYTES);
        assert!(p.content.split('\n').all(|l| l == line));
        assert!(p.notice.unwrap().contains("byte budget"));
    }

    #[test]
    fn long_lines_are_clipped_by_characters_and_named() {
        let long = "é".repeat(5000);
        let text = format!("short\n{long}\nend");
        let p = page(&t(), text.clone(), 1, 2000).unwrap();
        let lines: Vec<&str> = p.content.split('\n').collect();
        assert_eq!(lines[1].chars().count(), MAX_LINE_CHARS);
        assert_eq!(lines[2], "end");
        assert!(p.truncated);
        assert!(p
            .notice
            .unwrap()
            .contains("Line 2 is longer than 2000 characters"));
    }
}
