//! `read`: one page of a text file, raw, with its line numbers as fields.
//!
//! Lines split on `\n`; a `\r` stays part of its line and the page omits the
//! final `\n`, so text copied from `content` is a byte-exact edit anchor. A
//! page ends on a whole line when the byte budget cuts it, and over-long lines
//! are clipped and named in the notice, because neither a fragment nor a
//! clipped line can anchor an edit.
//!
//! The file is streamed, not loaded: counting its lines takes every byte of a
//! file of up to 64 MiB, but a page keeps at most [`PAGE_BYTES`] of them, so
//! the flow sees the file a chunk at a time through one reused buffer
//! ([`crate::fsops::text::stream`]) and copies out only the page.

use super::files::Files;
use super::lines::{line_range_fields, positive};
use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
#[cfg(test)]
use crate::fsops::text;
use crate::fsops::Target;
use crate::kernel::gate::Authorized;
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

/// The audit's one-line gist of an input: the file it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "path")
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
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[
            ErrorCode::NotFound,
            ErrorCode::NotAFile,
            ErrorCode::NotADirectory,
            ErrorCode::IsDirectory,
            ErrorCode::BinaryFile,
            ErrorCode::OffsetOutOfRange,
            ErrorCode::CommandFailed,
            ErrorCode::ProviderUnavailable,
            ErrorCode::ResponseTooLarge,
        ],
    };

    fn output_schema() -> Value {
        let [start, end] = line_range_fields("the page");
        closed(
            &[
                ("content", field("string", "The page's lines, raw: no line-number gutter, every \\r kept, joined by \\n, without the final \\n.")),
                start,
                end,
                ("totalLines", field("integer", "Lines in the whole file.")),
                ("truncated", field("boolean", "Whether the page leaves lines out or clips one; `notice` then says what.")),
            ],
            &[("notice", field("string", "What the page shows out of what there is, and which lines were clipped; present when truncated."))],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let page = |notice: Option<&str>| Output {
            content: "a".into(),
            start_line: 1,
            end_line: 1,
            total_lines: 2,
            truncated: notice.is_some(),
            notice: notice.map(String::from),
        };
        vec![page(Some("lines 1-1 of 2")), page(None)]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        positive("offset", input.offset)?;
        positive("limit", input.limit)
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let target = ctx.resolve_file("path", &input.path)?;
        let envelope = Envelope {
            reads: vec![ctx.fs_name(&target.real)],
            ..Envelope::new(Tier::Sealed)
        };
        let call = Read {
            target,
            offset: input.offset.unwrap_or(1),
            limit: input.limit.unwrap_or(DEFAULT_LIMIT),
        };
        Ok((call, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let scan = PageScan::new(self.offset, self.limit);
        let files = Files::of(ctx).await?;
        let scan = files
            .stream(ctx, &self.target, scan, PageScan::feed)
            .await?;
        scan.finish(&self.target)
    }
}

/// Cuts the page `offset..offset+limit` out of `text` in memory, as `read`
/// cuts it out of a file.
#[cfg(test)]
pub fn page(target: &Target, text: String, offset: u64, limit: u64) -> FlowResult<Output> {
    let mut scan = PageScan::new(offset, limit);
    scan.feed(text.as_bytes());
    scan.finish(target)
}

/// Bytes of a line collected before it is clipped. A character is at most 4
/// bytes, so these hold a line of [`MAX_LINE_CHARS`] characters whole, and of
/// a longer line, the first byte of the character it is clipped before.
const LINE_CAP: usize = 4 * MAX_LINE_CHARS + 1;

/// One page of a text fed to it a chunk at a time, in a single pass: it
/// counts every line but copies out only the page's, so what it holds is
/// bounded by the page, not the text. A chunk may end anywhere, inside a line
/// or a character: lines split on `\n`, which no multibyte character holds,
/// and a page line is clipped only once it has ended.
struct PageScan {
    offset: u64,
    limit: u64,
    /// `\n` bytes so far; the line under way is `newlines + 1`.
    newlines: u64,
    /// Whether bytes follow the last `\n`: a final line without one counts.
    unterminated: bool,
    /// The page's lines so far, clipped and joined by `\n`.
    page: Vec<u8>,
    /// Lines in `page`.
    taken: u64,
    /// Where the page line under way starts in `page`, while there is one.
    open: Option<usize>,
    /// The page's lines longer than [`MAX_LINE_CHARS`], by number.
    clipped: Vec<u64>,
    /// Whether a line was left out for the byte budget, ending the page.
    budget_hit: bool,
}

impl PageScan {
    fn new(offset: u64, limit: u64) -> PageScan {
        PageScan {
            offset,
            limit,
            newlines: 0,
            unterminated: false,
            page: Vec::new(),
            taken: 0,
            open: None,
            clipped: Vec::new(),
            budget_hit: false,
        }
    }

    /// Whether the line under way, if at or past `offset`, joins the page.
    fn taking(&self) -> bool {
        self.taken < self.limit && !self.budget_hit
    }

    /// Scans the next bytes of the text.
    fn feed(&mut self, mut chunk: &[u8]) {
        if let Some(&last) = chunk.last() {
            self.unterminated = last != b'\n';
        }
        while !chunk.is_empty() {
            let line = self.newlines + 1;
            if line < self.offset {
                // Before the page: skip to the `\n` ending the line before it.
                let wanted = self.offset - line;
                let mut skipped = 0;
                let mut page_at = None;
                for i in memchr::memchr_iter(b'\n', chunk) {
                    skipped += 1;
                    if skipped == wanted {
                        page_at = Some(i + 1);
                        break;
                    }
                }
                self.newlines += skipped;
                match page_at {
                    Some(at) => chunk = &chunk[at..],
                    None => return,
                }
            } else if self.taking() {
                if self.open.is_none() {
                    self.begin_line(chunk.len());
                }
                match memchr::memchr(b'\n', chunk) {
                    Some(i) => {
                        self.keep(&chunk[..i]);
                        self.end_line();
                        self.newlines += 1;
                        chunk = &chunk[i + 1..];
                    }
                    None => {
                        self.keep(chunk);
                        return;
                    }
                }
            } else {
                // Past the page: only the count is left.
                self.newlines += memchr::memchr_iter(b'\n', chunk).count() as u64;
                return;
            }
        }
    }

    /// Starts a page line, after its separator. `ahead` is the bytes left in
    /// this chunk: the whole page when a small file ends in it, so the page
    /// is allocated once.
    fn begin_line(&mut self, ahead: usize) {
        if self.taken == 0 {
            self.page.reserve(ahead.min(PAGE_BYTES));
        } else {
            self.page.push(b'\n');
        }
        self.open = Some(self.page.len());
    }

    /// Appends a part of the page line under way, up to the line's first
    /// [`LINE_CAP`] bytes: clipping it needs no more, and a line may be the
    /// whole 64 MiB file.
    fn keep(&mut self, part: &[u8]) {
        let Some(start) = self.open else { return };
        let room = LINE_CAP.saturating_sub(self.page.len() - start);
        self.page.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// Ends the page line under way: clips it, then keeps it if the page
    /// still fits its byte budget, and otherwise ends the page before it, so
    /// the page ends on a whole line.
    fn end_line(&mut self) {
        let Some(start) = self.open.take() else {
            return;
        };
        let kept = clip_len(&self.page[start..]);
        let clipped = start + kept < self.page.len();
        self.page.truncate(start + kept);
        // The first line is kept whatever the budget (clipped, it is at most
        // 8,000 bytes anyway); a later one leaves with its separator.
        if self.taken > 0 && self.page.len() > PAGE_BYTES {
            self.page.truncate(start - 1);
            self.budget_hit = true;
            return;
        }
        self.taken += 1;
        if clipped {
            self.clipped.push(self.offset - 1 + self.taken);
        }
    }

    /// The page, once the whole text has been fed.
    fn finish(mut self, target: &Target) -> FlowResult<Output> {
        // A last line without `\n` ends with the text.
        self.end_line();
        let total = self.newlines + u64::from(self.unterminated);
        // Only now is the line count known, after the whole text.
        if self.offset > total.max(1) {
            return Err(out_of_range(target, self.offset, total));
        }
        let end = self.offset - 1 + self.taken;
        let content = String::from_utf8(self.page)
            .expect("a page is whole lines of UTF-8 text, clipped between characters");
        let notice = notice(self.offset, end, total, self.budget_hit, &self.clipped);
        Ok(Output {
            content,
            start_line: self.offset,
            end_line: end,
            total_lines: total,
            truncated: notice.is_some(),
            notice,
        })
    }
}

/// Bytes of the UTF-8 `line` in its first [`MAX_LINE_CHARS`] characters.
/// Counts characters by their first bytes, so it takes a line cut anywhere
/// after them, as [`PageScan`] collects it.
fn clip_len(line: &[u8]) -> usize {
    // Fewer bytes than the limit means fewer characters: the common case.
    if line.len() <= MAX_LINE_CHARS {
        return line.len();
    }
    let is_char_start = |b: u8| (b as i8) >= -0x40; // not 0b10xx_xxxx
    line.iter()
        .enumerate()
        .filter(|&(_, &b)| is_char_start(b))
        .nth(MAX_LINE_CHARS)
        .map_or(line.len(), |(at, _)| at)
}

/// `offset_out_of_range` for a page starting past the last of `total` lines.
fn out_of_range(target: &Target, offset: u64, total: u64) -> FlowError {
    FlowError::new(
        ErrorCode::OffsetOutOfRange,
        format!(
            "offset {offset} is past the end of {}, which has {total} line{}. Give an offset from 1 to {}.",
            target.shown.display(),
            if total == 1 { "" } else { "s" },
            total.max(1)
        ),
    )
    .with("offset", offset)
    .with("totalLines", total)
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
    use crate::flows::lines::{count_lines, line_start};

    fn t() -> Target {
        Target::at("/w/f")
    }

    /// The whole-file `page` that `read` used before it streamed, verbatim:
    /// the oracle the streamed page must match byte for byte.
    fn whole_page(target: &Target, text: String, offset: u64, limit: u64) -> FlowResult<Output> {
        let total = count_lines(&text);
        if offset > total.max(1) {
            return Err(out_of_range(target, offset, total));
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

    /// What `read` answers for a file holding `bytes`, streamed `chunk`
    /// bytes at a time.
    fn streamed(bytes: &[u8], chunk: usize, offset: u64, limit: u64) -> FlowResult<Output> {
        let mut scan = PageScan::new(offset, limit);
        text::stream_from(&t(), bytes, chunk, |part| scan.feed(part))?;
        scan.finish(&t())
    }

    /// What `read` answered before it streamed: the file loaded whole
    /// (`text::load`'s checks), then paged.
    fn loaded(bytes: &[u8], offset: u64, limit: u64) -> FlowResult<Output> {
        let text = text::decode(&t(), bytes.to_vec())?;
        whole_page(&t(), text, offset, limit)
    }

    /// Chunk sizes to stream with: tiny ones put a chunk boundary at every
    /// byte, inside every character and line; the last is the real one.
    const CHUNKS: [usize; 7] = [1, 2, 3, 4, 7, 64, text::CHUNK_BYTES];

    /// Pages to ask for: around the start, the middle, the end and past it.
    const PAGES: [(u64, u64); 9] = [
        (1, DEFAULT_LIMIT),
        (1, 1),
        (2, 1),
        (2, 3),
        (3, DEFAULT_LIMIT),
        (4, 2),
        (6, 1),
        (7, 1),
        (60, 5),
    ];

    /// Streaming `bytes` in chunks of every size answers, for each page,
    /// exactly what loading them whole does: page, notice or error.
    fn agrees_on(bytes: &[u8], pages: &[(u64, u64)]) {
        for &(offset, limit) in pages {
            let want = loaded(bytes, offset, limit);
            for chunk in CHUNKS {
                let got = streamed(bytes, chunk, offset, limit);
                assert!(
                    got == want,
                    "{:?}, chunk {chunk}, offset {offset}, limit {limit}:\n got {got:?}\nwant {want:?}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
                );
            }
            // In memory, `page` pages any text as it always did, NUL or not.
            if let Ok(text) = std::str::from_utf8(bytes) {
                let old = whole_page(&t(), text.into(), offset, limit);
                assert_eq!(page(&t(), text.into(), offset, limit), old);
            }
        }
    }

    fn agrees(bytes: &[u8]) {
        agrees_on(bytes, &PAGES);
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

    #[test]
    fn crlf_text_streams_across_chunk_boundaries() {
        agrees(b"one\r\ntwo\r\n");
        agrees(b"one\r\ntwo\r\n\r\nthree\r\nfour\r");
        agrees(b"\r\n\r\n\r");
        let p = streamed(b"one\r\ntwo\r\n", 1, 1, DEFAULT_LIMIT).unwrap();
        assert_eq!((p.content.as_str(), p.total_lines), ("one\r\ntwo\r", 2));
    }

    #[test]
    fn multibyte_characters_split_across_chunks_stream_whole() {
        let text = "é€😀\n日本語 text\n\nx😀y\n😀";
        agrees(text.as_bytes());
        for chunk in CHUNKS {
            let p = streamed(text.as_bytes(), chunk, 2, 3).unwrap();
            assert_eq!(p.content, "日本語 text\n\nx😀y");
        }
    }

    #[test]
    fn a_nul_byte_in_the_second_chunk_is_binary_at_its_file_offset() {
        let bytes = b"abcdefg\0hij\n";
        agrees(bytes);
        let e = streamed(bytes, 7, 1, DEFAULT_LIMIT).unwrap_err();
        assert_eq!(
            (e.code, &e.details["offset"]),
            (ErrorCode::BinaryFile, &json!(7))
        );
        assert!(e.message.contains("a NUL byte at byte 7"));
        // A NUL byte outranks invalid UTF-8, before or after it.
        agrees(b"ab\xffcd\nef\0");
        agrees(b"ab\0cd\nef\xff");
        agrees(b"\xe2\x82\0");
    }

    #[test]
    fn invalid_utf8_split_across_chunks_is_binary_at_its_file_offset() {
        for bytes in [
            &b"ab\xe2\x82x\n"[..],     // a character cut short by ASCII
            b"line\n\xf0\x9f\x98\xff", // ... by a byte no character starts with
            b"ok\n\xed\xa0\x80\n",     // a surrogate
            b"\xc0\x80",               // an overlong NUL
            b"a\x80b",                 // a lone continuation byte
            b"caf\xe9 ok\n",           // Latin-1
            b"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xe2",
        ] {
            agrees(bytes);
        }
        for chunk in CHUNKS {
            let e = streamed(b"ab\xe2\x82x\n", chunk, 1, 1).unwrap_err();
            assert_eq!(
                (e.code, &e.details["offset"]),
                (ErrorCode::BinaryFile, &json!(2))
            );
        }
    }

    #[test]
    fn a_file_ending_inside_a_character_is_invalid_where_it_starts() {
        for bytes in [&b"ok\n\xe2\x82"[..], b"\xf0", b"\xf0\x9f\x98", b"abc\xc3"] {
            agrees(bytes);
        }
        for chunk in CHUNKS {
            let e = streamed(b"ok\n\xe2\x82", chunk, 1, 1).unwrap_err();
            assert_eq!(
                (e.code, &e.details["offset"]),
                (ErrorCode::BinaryFile, &json!(3))
            );
            assert!(e.message.contains("invalid UTF-8 at byte 3"));
        }
    }

    #[test]
    fn a_clipped_line_spanning_chunks_is_cut_between_characters() {
        let long = "é".repeat(5000);
        agrees(format!("short\n{long}\nend").as_bytes());
        // Four-byte characters: exactly the limit, one byte over it (the
        // clip falls on the last byte collected), and one character over.
        let wide = "😀".repeat(MAX_LINE_CHARS);
        agrees(format!("{wide}\n{wide}a\n{wide}😀\n{wide}").as_bytes());
        // Over the limit in bytes but not in characters: not clipped.
        let mixed = format!("{}{}", "a".repeat(MAX_LINE_CHARS - 1), "€");
        agrees(format!("{mixed}\n{mixed}x\n").as_bytes());
        // A line far longer than what is collected of it, last in the file.
        agrees(format!("a\n{}", "€".repeat(20_000)).as_bytes());
        let p = streamed(format!("short\n{long}\nend").as_bytes(), 3, 1, 9).unwrap();
        assert_eq!(
            p.content,
            format!("short\n{}\nend", "é".repeat(MAX_LINE_CHARS))
        );
        assert_eq!(
            p.notice,
            whole_page(&t(), format!("short\n{long}\nend"), 1, 9)
                .unwrap()
                .notice
        );
    }

    #[test]
    fn empty_files_and_lone_newlines_stream_like_they_load() {
        agrees(b"");
        agrees(b"\n");
        agrees(b"\n\n");
        let p = streamed(b"", 1, 1, DEFAULT_LIMIT).unwrap();
        assert_eq!(
            (p.content.as_str(), p.start_line, p.end_line, p.total_lines),
            ("", 1, 0, 0)
        );
    }

    #[test]
    fn a_file_without_a_final_newline_counts_its_last_line_when_streamed() {
        agrees(b"alpha\nbeta");
        agrees(b"a\n\nb");
        agrees(b"x");
        let p = streamed(b"alpha\nbeta", 2, 2, 1).unwrap();
        assert_eq!((p.content.as_str(), p.total_lines), ("beta", 2));
    }

    #[test]
    fn the_byte_budget_cuts_a_streamed_page_on_the_same_line() {
        let pages = [(1, DEFAULT_LIMIT), (2, DEFAULT_LIMIT), (40, 30), (51, 1)];
        let line = "x".repeat(999);
        let text: String = (0..200).map(|_| format!("{line}\n")).collect();
        agrees_on(text.as_bytes(), &pages);
        // Varied widths and multibyte characters, as in the integration test.
        let text: String = (1..=300)
            .map(|i| format!("{i}:{}\n", "é-abcdefg".repeat((i * 7) % 60 + 1)))
            .collect();
        agrees_on(text.as_bytes(), &pages);
        // A clipped line is what the budget leaves out: it is not named.
        let long = "é".repeat(3000);
        let text: String = (0..60)
            .map(|i| format!("{}\n", if i == 51 { &long } else { &line }))
            .collect();
        agrees_on(text.as_bytes(), &pages);
        // The limit and the budget ending the page on the same line.
        agrees_on(text.as_bytes(), &[(1, 51), (1, 52)]);
        // A page of exactly the budget, and one byte over it.
        for (first, lines) in [(200, 52), (201, 51)] {
            let text = format!("{}\n{text}", "x".repeat(first));
            agrees_on(text.as_bytes(), &pages);
            let p = streamed(text.as_bytes(), text::CHUNK_BYTES, 1, DEFAULT_LIMIT).unwrap();
            assert_eq!(p.end_line, lines);
        }
    }

    /// Bytes built from pieces picked by a fixed pseudo-random sequence:
    /// text with line endings and multibyte characters, and now and then a
    /// NUL or a broken character.
    fn mixed_bytes(seed: u64, len: usize) -> Vec<u8> {
        const PIECES: [&[u8]; 12] = [
            b"a",
            b"bc",
            b"\n",
            b"\n",
            b"\r\n",
            "é".as_bytes(),
            "€".as_bytes(),
            "😀".as_bytes(),
            b"",
            b"\0",
            b"\xff",
            b"\xe2\x82",
        ];
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut out = Vec::new();
        for _ in 0..len {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as usize;
            // Mostly text: the last three pieces one time in 40 each.
            let i = if r.is_multiple_of(40) {
                9 + (r / 40) % 3
            } else {
                r % 9
            };
            out.extend_from_slice(PIECES[i]);
        }
        out
    }

    #[test]
    fn streaming_agrees_with_loading_on_mixed_bytes() {
        for seed in 0..400 {
            agrees(&mixed_bytes(seed, (seed % 37) as usize));
        }
    }
}
