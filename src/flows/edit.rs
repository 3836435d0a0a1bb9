//! `edit`: change one region of a text file, anchored either by its exact
//! bytes (`oldString`) or by a line range from an earlier `read` or `grep`
//! (`startLine`/`endLine`, optionally checked against `expect`).
//!
//! Anchors are byte exact with no fuzzy fallback: a match that is not the
//! caller's bytes is an edit nobody inspected. A miss instead reports what the
//! file really holds near where the anchor should be, so the next attempt can
//! re-anchor from reality. Success returns the edited region with two lines of
//! context (`hunk`).

use super::files::{check_host, Files};
use super::lines::{count_lines, line_range_fields, line_start};
use super::region::nearest_region;
use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::fsops::Target;
use crate::kernel::gate::Authorized;
use crate::kernel::Action;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Lines of context on each side of the returned hunk.
pub const HUNK_CONTEXT: u64 = 2;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    pub path: String,
    pub old_string: Option<String>,
    pub new_string: String,
    pub replace_all: Option<bool>,
    pub start_line: Option<u64>,
    pub end_line: Option<u64>,
    pub expect: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// First line of `hunk`.
    pub start_line: u64,
    /// Last line of `hunk`.
    pub end_line: u64,
    pub replacements: u64,
    /// The edited region as it now stands, raw, with context.
    pub hunk: String,
    /// What the language server bound to the file says now; absent when
    /// the run declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::langserver::Diagnostics>,
}

/// How the caller pointed at the region.
#[derive(Debug, Clone, PartialEq)]
pub enum Anchor {
    Text {
        old: String,
        all: bool,
    },
    Lines {
        start: u64,
        end: u64,
        expect: Option<String>,
    },
}

pub struct Edit {
    target: Target,
    anchor: Anchor,
    new: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path", "newString"],
        "properties": {
            "path": {"type": "string", "description": "File to edit, relative to the workspace or absolute."},
            "oldString": {"type": "string", "minLength": 1, "description": "Exact bytes to replace; must occur once unless replaceAll. Not with startLine/endLine."},
            "newString": {"type": "string", "description": "Replacement bytes, literal (keep \\r to keep CRLF endings)."},
            "replaceAll": {"type": "boolean", "description": "Replace every occurrence of oldString. Not with a line range."},
            "startLine": {"type": "integer", "minimum": 1, "description": "First line to replace, 1-based, inclusive. Needs endLine."},
            "endLine": {"type": "integer", "minimum": 1, "description": "Last line to replace, inclusive; its final \\n stays. Needs startLine."},
            "expect": {"type": "string", "description": "What lines startLine..endLine must hold now, checked byte for byte. Only with a line range."}
        }
    })
}

/// The audit's one-line gist of an input: the file it names.
fn summary(input: &Value) -> String {
    super::field_or_json(input, "path")
}

impl Flow for Edit {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "edit",
        description: "Edits one region of a text file, anchored by its exact bytes or by a line range, and returns the edited hunk.",
        tier: Tier::Compensable,
        actions: &[Action::FsRead, Action::FsWrite],
        read_only: false,
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
            ErrorCode::NoMatch,
            ErrorCode::CommandFailed,
            ErrorCode::ProviderUnavailable,
            ErrorCode::ResponseTooLarge,
        ],
    };

    fn output_schema() -> Value {
        let [start, end] = line_range_fields("`hunk`");
        closed(
            &[
                start,
                end,
                ("replacements", field("integer", "Regions replaced (more than 1 only with replaceAll).")),
                ("hunk", field("string", "The edited region as it now stands, raw, with two lines of context on each side.")),
            ],
            &[("diagnostics", super::langserver::diagnostics::schema())],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        let with = super::langserver::diagnostics::samples()
            .into_iter()
            .map(|d| Output {
                start_line: 1,
                end_line: 3,
                replacements: 1,
                hunk: "a\nb\nc".into(),
                diagnostics: Some(d),
            });
        let mut out = vec![Output {
            start_line: 1,
            end_line: 3,
            replacements: 1,
            hunk: "a\nb\nc".into(),
            diagnostics: None,
        }];
        out.extend(with);
        out
    }

    fn validate(input: &Input) -> FlowResult<()> {
        anchor_of(input).map(drop)
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let anchor = anchor_of(&input)?;
        let target = ctx.resolve_file("path", &input.path)?;
        let envelope = Envelope {
            tier: Tier::Compensable,
            reads: vec![ctx.fs_name(&target.real)],
            writes: vec![ctx.fs_name(&target.real)],
            commands: vec![],
            network: vec![],
            cwd: None,
            container: None,
            anywhere: false,
        };
        let call = Edit {
            target,
            anchor,
            new: input.new_string,
        };
        Ok((call, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        let files = Files::of(ctx).await?;
        if let Files::Host(_) = files {
            check_host(&self.target)?;
        }
        let lock = files.lock(&self.target)?;
        let both = [Action::FsRead, Action::FsWrite];
        let (t, text, existing) = files.load(ctx, &self.target, &both).await?;
        let applied = apply(&t, &text, &self.anchor, &self.new)?;
        files
            .replace(&t, applied.text.as_bytes(), Some(&existing))
            .await?;
        let (start_line, end_line, hunk) = hunk(&applied.text, applied.first, applied.last_end);
        // The server reads the file as edited; other writers need not
        // wait for it.
        drop(lock);
        Ok(Output {
            start_line,
            end_line,
            replacements: applied.replacements,
            hunk,
            diagnostics: super::langserver::after_change(ctx, &t.real).await,
        })
    }
}

/// Checks that the anchor fields form exactly one of the two anchor forms.
pub fn anchor_of(input: &Input) -> FlowResult<Anchor> {
    let bad = FlowError::invalid_input;
    let has_range = input.start_line.is_some() || input.end_line.is_some();
    match (&input.old_string, input.start_line, input.end_line) {
        (Some(_), _, _) if has_range => Err(bad(
            "oldString",
            "give oldString or startLine/endLine, not both: they are two ways to anchor one edit.",
        )),
        (Some(_), _, _) if input.expect.is_some() => Err(bad(
            "expect",
            "expect checks a line range; with oldString the anchor already is the expected text. Drop expect.",
        )),
        (Some(old), _, _) if old.is_empty() => Err(bad(
            "oldString",
            "oldString is empty, so it anchors nothing. Use write to create or replace a whole file.",
        )),
        (Some(old), _, _) => Ok(Anchor::Text {
            old: old.clone(),
            all: input.replace_all.unwrap_or(false),
        }),
        (None, None, None) => Err(bad(
            "oldString",
            "edit needs an anchor: oldString, or startLine and endLine. Use write to create a file.",
        )),
        (None, Some(_), None) => Err(bad("endLine", "startLine needs endLine (inclusive).")),
        (None, None, Some(_)) => Err(bad("startLine", "endLine needs startLine (1-based).")),
        (None, Some(_), Some(_)) if input.replace_all.is_some() => Err(bad(
            "replaceAll",
            "replaceAll goes with oldString; a line range already names one region.",
        )),
        (None, Some(0), Some(_)) => Err(bad("startLine", "startLine is 1-based: give 1 or more.")),
        (None, Some(s), Some(e)) if e < s => Err(FlowError::invalid_input(
            "endLine",
            format!("endLine {e} is before startLine {s}; the range is inclusive, so give endLine >= startLine."),
        )),
        (None, Some(start), Some(end)) => Ok(Anchor::Lines {
            start,
            end,
            expect: input.expect.clone(),
        }),
    }
}

/// The file after an edit, and where the replaced text now lies.
#[derive(Debug, PartialEq)]
pub struct Applied {
    pub text: String,
    pub replacements: u64,
    /// Byte offset in `text` where the first replacement starts.
    pub first: usize,
    /// Byte offset in `text` where the last replacement ends.
    pub last_end: usize,
}

/// Applies `anchor` to `text`, or says why it does not hold.
pub fn apply(t: &Target, text: &str, anchor: &Anchor, new: &str) -> FlowResult<Applied> {
    match anchor {
        Anchor::Text { old, all } => apply_text(t, text, old, new, *all),
        Anchor::Lines { start, end, expect } => {
            apply_lines(t, text, *start, *end, expect.as_deref(), new)
        }
    }
}

fn apply_text(t: &Target, text: &str, old: &str, new: &str, all: bool) -> FlowResult<Applied> {
    let starts = occurrences(text, old);
    match starts.len() {
        0 => return Err(missed(t, text, old)),
        1 => {}
        _ if !all => return Err(ambiguous(t, text, &starts)),
        // replaceAll replaces left to right, never inside a replaced match.
        _ => return Ok(replace_every(text, old, new)),
    }
    let at = starts[0];
    Ok(Applied {
        text: [&text[..at], new, &text[at + old.len()..]].concat(),
        replacements: 1,
        first: at,
        last_end: at + new.len(),
    })
}

fn replace_every(text: &str, old: &str, new: &str) -> Applied {
    let at: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    let n = at.len();
    let grow = new.len() as isize - old.len() as isize;
    let last = at[n - 1] as isize + grow * (n as isize - 1);
    Applied {
        text: text.replace(old, new),
        replacements: n as u64,
        first: at[0],
        last_end: last as usize + new.len(),
    }
}

/// Where `old` starts in `text`, overlapping occurrences included: in
/// "end\nend\nend" the anchor "end\nend" sits in two places, and picking one
/// would be an edit nobody chose.
fn occurrences(text: &str, old: &str) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&text.as_bytes()[from..]) {
        starts.push(from + i);
        // Step one character on: `old` may start again inside this match.
        from += i + text[from + i..].chars().next().map_or(1, char::len_utf8);
    }
    starts
}

/// `invalid_input` for an anchor that occurs more than once, naming every
/// line an occurrence starts on.
fn ambiguous(t: &Target, text: &str, starts: &[usize]) -> FlowError {
    let lines: Vec<u64> = starts.iter().map(|&i| line_of(text, i)).collect();
    let list: Vec<String> = lines.iter().map(u64::to_string).collect();
    FlowError::invalid_input(
        "oldString",
        format!(
            "oldString occurs {} times in {}, starting on lines {}. Widen it with neighbouring lines until it occurs once, \
             or pass replaceAll = true to change every occurrence.",
            starts.len(),
            t.shown.display(),
            list.join(", ")
        ),
    )
    .with("lines", lines)
}

fn apply_lines(
    t: &Target,
    text: &str,
    start: u64,
    end: u64,
    expect: Option<&str>,
    new: &str,
) -> FlowResult<Applied> {
    let total = count_lines(text);
    if end > total {
        return Err(FlowError::new(
            ErrorCode::OffsetOutOfRange,
            format!(
                "lines {start}-{end} run past the end of {}, which has {total} line{}.",
                t.shown.display(),
                if total == 1 { "" } else { "s" }
            ),
        )
        .with("startLine", start)
        .with("endLine", end)
        .with("totalLines", total));
    }
    let (from, to) = (line_start(text, start), line_end(text, end));
    let held = &text[from..to];
    if expect.is_some_and(|e| e != held) {
        return Err(FlowError::new(
            ErrorCode::NoMatch,
            format!(
                "lines {start}-{end} of {} do not hold what expect says. They actually hold this, raw:\n{held}\n\n\
                 The file may have moved under your line numbers: copy the lines you meant from that text, or re-read it.",
                t.shown.display()
            ),
        )
        .with("actual", region_json(start, end, held)));
    }
    Ok(Applied {
        text: [&text[..from], new, &text[to..]].concat(),
        replacements: 1,
        first: from,
        last_end: from + new.len(),
    })
}

/// Byte offset where line `line` ends, before its `\n`.
fn line_end(text: &str, line: u64) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes())
        .nth((line - 1) as usize)
        .unwrap_or(text.len())
}

/// The 1-based line holding byte `at`.
fn line_of(text: &str, at: usize) -> u64 {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() as u64 + 1
}

fn region_json(start: u64, end: u64, content: &str) -> Value {
    json!({"startLine": start, "endLine": end, "content": content})
}

/// `no_match` for an `oldString` that occurs nowhere, carrying the file's real
/// bytes where the anchor most nearly sits.
fn missed(t: &Target, text: &str, old: &str) -> FlowError {
    let shown = t.shown.display();
    let crlf_hint = if !old.contains('\r')
        && text.contains("\r\n")
        && text.contains(&old.replace('\n', "\r\n"))
    {
        " The file has CRLF line endings: keep the \\r before each \\n in oldString."
    } else {
        ""
    };
    let Some((start, end)) = nearest_region(text, old) else {
        return FlowError::new(
            ErrorCode::NoMatch,
            format!(
                "oldString does not occur in {shown}, and not one of its lines occurs there either: \
                 this is the wrong file, or the region is not what you remember. Re-read the file, or grep for the text, before editing again."
            ),
        )
        .with("path", shown.to_string());
    };
    let held = &text[line_start(text, start)..line_end(text, end)];
    FlowError::new(
        ErrorCode::NoMatch,
        format!(
            "oldString does not occur in {shown}.{crlf_hint} Lines {start}-{end} actually hold this, raw:\n{held}\n\n\
             Copy the lines you meant from that text, or anchor by startLine/endLine instead."
        ),
    )
    .with("path", shown.to_string())
    .with("nearest", region_json(start, end, held))
}

/// The lines holding bytes `first..last_end` of `text`, with context:
/// (first line, last line, raw text without the final `\n`).
pub fn hunk(text: &str, first: usize, last_end: usize) -> (u64, u64, String) {
    let total = count_lines(text);
    let from_line = line_of(text, first);
    let to_line = if last_end > first {
        line_of(text, last_end - 1)
    } else {
        from_line
    };
    let start = from_line.saturating_sub(HUNK_CONTEXT).max(1);
    let end = (to_line + HUNK_CONTEXT).min(total);
    if total == 0 || end < start {
        return (1, 0, String::new());
    }
    let body = &text[line_start(text, start)..line_end(text, end)];
    (start, end, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Target {
        Target::at("/w/widen.ts")
    }

    fn input(fields: Value) -> Input {
        let mut base = json!({"path": "f", "newString": "x"});
        base.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn invalid_field(fields: Value) -> String {
        let e = anchor_of(&input(fields)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        e.details["field"].as_str().unwrap().to_string()
    }

    #[test]
    fn the_six_invalid_anchor_combinations() {
        assert_eq!(
            invalid_field(json!({"oldString": "a", "startLine": 1})),
            "oldString"
        );
        assert_eq!(
            invalid_field(json!({"oldString": "a", "endLine": 1})),
            "oldString"
        );
        assert_eq!(invalid_field(json!({})), "oldString");
        assert_eq!(invalid_field(json!({"oldString": ""})), "oldString");
        assert_eq!(
            invalid_field(json!({"oldString": "a", "expect": "a"})),
            "expect"
        );
        assert_eq!(
            invalid_field(json!({"startLine": 1, "endLine": 1, "replaceAll": true})),
            "replaceAll"
        );
        assert_eq!(
            invalid_field(json!({"startLine": 3, "endLine": 2})),
            "endLine"
        );
        // Any replaceAll, even false, says the caller mixed the two forms.
        assert_eq!(
            invalid_field(json!({"startLine": 1, "endLine": 1, "replaceAll": false})),
            "replaceAll"
        );
    }

    #[test]
    fn exact_text_replaces_once_and_reports_the_hunk() {
        let text = "a\nb\nexport function widen(value: number): number {\n  return value * 2\n}\nc\nd\ne\n";
        let a = apply_text(
            &t(),
            text,
            "  return value * 2",
            "  return value * 3",
            false,
        )
        .unwrap();
        assert_eq!(a.replacements, 1);
        assert!(a.text.contains("value * 3"));
        let (s, e, h) = hunk(&a.text, a.first, a.last_end);
        assert_eq!((s, e), (2, 6));
        assert_eq!(
            h,
            "b\nexport function widen(value: number): number {\n  return value * 3\n}\nc"
        );
    }

    #[test]
    fn a_repeated_anchor_names_every_line() {
        let e = apply_text(&t(), "x\nfoo\ny\nfoo\nfoo\n", "foo", "bar", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["lines"], json!([2, 4, 5]));
        assert!(e.message.contains("lines 2, 4, 5"), "{}", e.message);
        let a = apply_text(&t(), "x\nfoo\ny\nfoo\nfoo\n", "foo", "quux", true).unwrap();
        assert_eq!(a.text, "x\nquux\ny\nquux\nquux\n");
        assert_eq!(a.replacements, 3);
        assert_eq!(&a.text[a.first..a.last_end], "quux\ny\nquux\nquux");
    }

    #[test]
    fn a_miss_shows_the_real_bytes_of_the_nearest_region() {
        let text = "export function widen(value: number): number {\n  return value * 2\n}\n";
        let e = apply_text(&t(), text, "  return value * 2;\n}", "", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        assert_eq!(
            e.message,
            "oldString does not occur in /w/widen.ts. Lines 2-3 actually hold this, raw:\n  return value * 2\n}\n\n\
             Copy the lines you meant from that text, or anchor by startLine/endLine instead."
        );
        assert_eq!(e.details["nearest"]["startLine"], 2);
    }

    #[test]
    fn a_miss_with_no_line_in_common_says_so() {
        let e = apply_text(&t(), "alpha\nbeta\n", "gamma\ndelta", "", false).unwrap_err();
        assert!(
            e.message.contains("not one of its lines occurs"),
            "{}",
            e.message
        );
        assert!(e.details.get("nearest").is_none());
    }

    #[test]
    fn no_fuzzy_fallback_for_whitespace() {
        let e = apply_text(&t(), "  a = 1\n", "a  = 1", "", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
    }

    #[test]
    fn crlf_miss_hints_at_the_carriage_returns() {
        let e = apply_text(&t(), "one\r\ntwo\r\n", "one\ntwo", "", false).unwrap_err();
        assert!(e.message.contains("CRLF"), "{}", e.message);
    }

    #[test]
    fn line_range_keeps_the_final_newline_and_checks_expect() {
        let a = apply_lines(&t(), "a\nb\nc\n", 2, 2, Some("b"), "B").unwrap();
        assert_eq!(a.text, "a\nB\nc\n");
        let a = apply_lines(&t(), "one\r\ntwo\r\n", 2, 2, Some("two\r"), "2\r").unwrap();
        assert_eq!(a.text, "one\r\n2\r\n");
        let a = apply_lines(&t(), "a\nb", 2, 2, None, "B\nC").unwrap();
        assert_eq!(a.text, "a\nB\nC");
        let e = apply_lines(&t(), "a\nb\nc\n", 1, 2, Some("a\nc"), "x").unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        assert_eq!(e.details["actual"]["content"], "a\nb");
        let e = apply_lines(&t(), "a\nb\n", 2, 3, None, "x").unwrap_err();
        assert_eq!(e.code, ErrorCode::OffsetOutOfRange);
    }

    #[test]
    fn hunk_of_an_emptied_file_is_empty() {
        let a = apply_lines(&t(), "only", 1, 1, None, "").unwrap();
        assert_eq!(hunk(&a.text, a.first, a.last_end), (1, 0, String::new()));
    }
}
