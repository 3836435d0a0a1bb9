//! Patch text → hunks, line by line, the way Codex's `apply_patch` reads it
//! (the streaming parser of codex-rs/apply-patch as shipped in Codex CLI
//! 0.171.0). Nothing here touches the filesystem.
//!
//! Codex's Lark grammar for the format:
//!
//! ```text
//! start: begin_patch environment_id? hunk+ end_patch
//! begin_patch: "*** Begin Patch" LF
//! environment_id: "*** Environment ID: " filename LF
//! end_patch: "*** End Patch" LF?
//!
//! hunk: add_hunk | delete_hunk | update_hunk
//! add_hunk: "*** Add File: " filename LF add_line+
//! delete_hunk: "*** Delete File: " filename LF
//! update_hunk: "*** Update File: " filename LF change_move? change?
//! filename: /(.+)/
//! add_line: "+" /(.+)/ LF -> line
//!
//! change_move: "*** Move to: " filename LF
//! change: (change_context | change_line)+ eof_line?
//! change_context: ("@@" | "@@ " /(.+)/) LF
//! change_line: ("+" | "-" | " ") /(.+)/ LF
//! eof_line: "*** End of File" LF
//! ```
//!
//! What Codex accepts beyond the grammar, and so does this parser:
//!
//! - The text is trimmed first, then split into lines (`\n` or `\r\n`), and
//!   the first and last lines are compared trimmed. If they are not the
//!   markers, a heredoc wrapper is peeled: a first line of exactly `<<EOF`,
//!   `<<'EOF'` or `<<"EOF"`, a last line ending in `EOF`, at least four lines.
//! - Line numbers count from the `*** Begin Patch` line, which is line 1.
//! - Outside an update section every line is compared trimmed: markers may
//!   carry whitespace on both sides, and a file name is what follows the
//!   marker in the trimmed line. Inside an update section a line is compared
//!   with only its trailing whitespace removed, so an indented marker there
//!   is a context line, and `@@`, `*** End of File`, `*** Move to:` and the
//!   next hunk's header may end in whitespace.
//! - An update section may open without `@@`; its first diff line starts the
//!   first chunk. A line that is empty (not even a space) is an empty context
//!   line. `*** Move to:` is only recognised before the first chunk.
//! - After `*** End of File` only blank lines or a new `@@` chunk may follow
//!   in that section.
//! - An add section takes `+` lines until the next header; any other line
//!   there is "not a valid hunk header".
//! - `*** Environment ID:` may appear once, right after `*** Begin Patch`; it
//!   must name something, and is otherwise ignored.
//! - Lines after an inner `*** End Patch` must be blank.
//! - `*** Begin Patch` followed directly by `*** End Patch` parses to no
//!   hunks; applying it is the caller's "No files were modified." error.

use std::fmt;

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File: ";
const DELETE_FILE: &str = "*** Delete File: ";
const UPDATE_FILE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";
const CONTEXT: &str = "@@ ";
const EMPTY_CONTEXT: &str = "@@";
const ENVIRONMENT_ID: &str = "*** Environment ID:";

/// One section of a patch. Paths are as written in the patch; `line` is the
/// 1-based line of the section's header.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::enum_variant_names,
    reason = "named for the patch's `*** Add File:`, `*** Delete File:` and `*** Update File:` headers"
)]
pub enum Hunk {
    AddFile {
        path: String,
        /// Each `+` line without its `+`, plus `\n`.
        contents: String,
        line: usize,
    },
    DeleteFile {
        path: String,
        line: usize,
    },
    UpdateFile {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
        line: usize,
    },
}

impl Hunk {
    /// The header's line number.
    pub fn line(&self) -> usize {
        match self {
            Hunk::AddFile { line, .. } | Hunk::DeleteFile { line, .. } => *line,
            Hunk::UpdateFile { line, .. } => *line,
        }
    }
}

/// One change inside an update section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    /// The text after `@@ `: a line sought before the old lines.
    pub change_context: Option<String>,
    /// Context and `-` lines: what the file must hold.
    pub old_lines: Vec<String>,
    /// Context and `+` lines: what replaces them.
    pub new_lines: Vec<String>,
    /// For each context line, its index in `old_lines` and in `new_lines`:
    /// the file keeps its own text (and line ending) for those lines.
    pub context_lines: Vec<(usize, usize)>,
    /// The chunk ended with `*** End of File`: the old lines are sought at
    /// the end of the file.
    pub is_end_of_file: bool,
}

impl Chunk {
    fn push_context(&mut self, text: &str) {
        self.context_lines
            .push((self.old_lines.len(), self.new_lines.len()));
        self.old_lines.push(text.to_string());
        self.new_lines.push(text.to_string());
    }

    fn is_empty(&self) -> bool {
        self.old_lines.is_empty() && self.new_lines.is_empty()
    }
}

/// Why the patch does not parse. `Display` gives Codex's words for it.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// The patch as a whole is malformed (Codex: "Invalid patch: ...").
    /// `line` is where, for callers; Codex does not print it.
    Patch { message: String, line: usize },
    /// One section is malformed (Codex: "Invalid patch hunk on line N: ...").
    Hunk { message: String, line: usize },
}

impl ParseError {
    pub fn line(&self) -> usize {
        match self {
            ParseError::Patch { line, .. } | ParseError::Hunk { line, .. } => *line,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Patch { message, .. } => write!(f, "Invalid patch: {message}"),
            ParseError::Hunk { message, line } => {
                write!(f, "Invalid patch hunk on line {line}: {message}")
            }
        }
    }
}

/// Parses patch text into its sections, in order.
pub fn parse_patch(text: &str) -> Result<Vec<Hunk>, ParseError> {
    let lines: Vec<&str> = text.trim().lines().collect();
    let body = boundaries(&lines)?;
    let mut parser = Parser::default();
    let (last, rest) = body.split_last().expect("boundaries keep two lines");
    for line in rest {
        // Codex joins the lines with `\n` and splits them again, dropping one
        // more `\r` from each line it ends; the last line it reads as is.
        let line = line.strip_suffix('\r').unwrap_or(line);
        parser.line += 1;
        parser.line_of(line)?;
    }
    parser.line += 1;
    if last.trim() == END_PATCH {
        parser.ensure_update_has_lines(last.trim())?;
        parser.mode = Mode::Ended;
    } else {
        parser.line_of(last)?;
    }
    if !matches!(parser.mode, Mode::Ended) {
        return Err(last_line_error(parser.line));
    }
    Ok(parser.hunks)
}

/// The lines between (and including) the markers, with a heredoc wrapper
/// peeled off.
fn boundaries<'a>(lines: &'a [&'a str]) -> Result<&'a [&'a str], ParseError> {
    let strict = match check_markers(lines) {
        Ok(()) => return Ok(lines),
        Err(e) => e,
    };
    match lines {
        [first, .., last]
            if matches!(*first, "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
                && last.ends_with("EOF")
                && lines.len() >= 4 =>
        {
            let inner = &lines[1..lines.len() - 1];
            check_markers(inner).map(|()| inner)
        }
        _ => Err(strict),
    }
}

fn check_markers(lines: &[&str]) -> Result<(), ParseError> {
    let first = lines.first().map(|l| l.trim());
    let last = lines.last().map(|l| l.trim());
    match (first, last) {
        (Some(BEGIN_PATCH), Some(END_PATCH)) => Ok(()),
        (Some(first), _) if first != BEGIN_PATCH => Err(ParseError::Patch {
            message: "The first line of the patch must be '*** Begin Patch'".into(),
            line: 1,
        }),
        _ => Err(last_line_error(lines.len())),
    }
}

fn last_line_error(line: usize) -> ParseError {
    ParseError::Patch {
        message: "The last line of the patch must be '*** End Patch'".into(),
        line,
    }
}

#[derive(Debug, Default, Clone, Copy)]
enum Mode {
    #[default]
    NotStarted,
    Started,
    Add,
    Delete,
    /// Inside an update section whose header is on `header`.
    Update {
        header: usize,
    },
    Ended,
}

#[derive(Debug, Default)]
struct Parser {
    mode: Mode,
    hunks: Vec<Hunk>,
    environment_seen: bool,
    /// The line being read, 1-based.
    line: usize,
}

impl Parser {
    fn line_of(&mut self, line: &str) -> Result<(), ParseError> {
        let trimmed = line.trim();
        match self.mode {
            Mode::NotStarted => {
                if trimmed == BEGIN_PATCH {
                    self.mode = Mode::Started;
                    return Ok(());
                }
                Err(ParseError::Patch {
                    message: "The first line of the patch must be '*** Begin Patch'".into(),
                    line: self.line,
                })
            }
            Mode::Started => {
                if let Some(id) = trimmed.strip_prefix(ENVIRONMENT_ID) {
                    return self.environment_id(id);
                }
                if self.header(trimmed)? {
                    return Ok(());
                }
                Err(self.invalid_header(trimmed))
            }
            Mode::Add => {
                if self.header(trimmed)? {
                    return Ok(());
                }
                match (line.strip_prefix('+'), self.hunks.last_mut()) {
                    (Some(text), Some(Hunk::AddFile { contents, .. })) => {
                        contents.push_str(text);
                        contents.push('\n');
                        Ok(())
                    }
                    _ => Err(self.invalid_header(trimmed)),
                }
            }
            Mode::Delete => {
                if self.header(trimmed)? {
                    return Ok(());
                }
                Err(self.invalid_header(trimmed))
            }
            Mode::Update { .. } => self.update_line(line),
            Mode::Ended if trimmed.is_empty() => Ok(()),
            Mode::Ended => Err(last_line_error(self.line)),
        }
    }

    fn environment_id(&mut self, id: &str) -> Result<(), ParseError> {
        let message = if self.environment_seen {
            "apply_patch environment_id cannot be specified more than once"
        } else if id.trim().is_empty() {
            "apply_patch environment_id cannot be empty"
        } else {
            self.environment_seen = true;
            return Ok(());
        };
        Err(ParseError::Patch {
            message: message.into(),
            line: self.line,
        })
    }

    /// Starts a section or ends the patch if `marker` is a header; false if
    /// it is not one.
    fn header(&mut self, marker: &str) -> Result<bool, ParseError> {
        let line = self.line;
        let (hunk, mode) = if marker == END_PATCH {
            self.ensure_update_has_lines(marker)?;
            self.mode = Mode::Ended;
            return Ok(true);
        } else if let Some(path) = marker.strip_prefix(ADD_FILE) {
            let hunk = Hunk::AddFile {
                path: path.into(),
                contents: String::new(),
                line,
            };
            (hunk, Mode::Add)
        } else if let Some(path) = marker.strip_prefix(DELETE_FILE) {
            (
                Hunk::DeleteFile {
                    path: path.into(),
                    line,
                },
                Mode::Delete,
            )
        } else if let Some(path) = marker.strip_prefix(UPDATE_FILE) {
            let hunk = Hunk::UpdateFile {
                path: path.into(),
                move_to: None,
                chunks: Vec::new(),
                line,
            };
            (hunk, Mode::Update { header: line })
        } else {
            return Ok(false);
        };
        self.ensure_update_has_lines(marker)?;
        self.hunks.push(hunk);
        self.mode = mode;
        Ok(true)
    }

    /// Before the next header (`marker`): an update section needs a chunk,
    /// and its last chunk needs a line.
    fn ensure_update_has_lines(&self, marker: &str) -> Result<(), ParseError> {
        let Some(Hunk::UpdateFile { path, chunks, .. }) = self.hunks.last() else {
            return Ok(());
        };
        if let (true, Mode::Update { header }) = (chunks.is_empty(), self.mode) {
            return Err(ParseError::Hunk {
                message: format!("Update file hunk for path '{path}' is empty"),
                line: header,
            });
        }
        if chunks.last().is_some_and(Chunk::is_empty) {
            let message = if marker == END_PATCH {
                "Update hunk does not contain any lines".to_string()
            } else {
                unexpected_update_line(marker)
            };
            return Err(ParseError::Hunk {
                message,
                line: self.line,
            });
        }
        Ok(())
    }

    fn update_line(&mut self, line: &str) -> Result<(), ParseError> {
        let at = self.line;
        let bare = line.trim_end();
        if self.header(bare)? {
            return Ok(());
        }
        let Some(Hunk::UpdateFile {
            move_to, chunks, ..
        }) = self.hunks.last_mut()
        else {
            return Err(hunk_error(unexpected_update_line(line), at));
        };
        let is_context_marker = bare == EMPTY_CONTEXT || bare.starts_with(CONTEXT);
        if chunks.last().is_some_and(|c| c.is_end_of_file) {
            if bare.is_empty() {
                return Ok(());
            }
            if !is_context_marker {
                return Err(hunk_error(expected_context_marker(line), at));
            }
        }
        if chunks.is_empty() && move_to.is_none() {
            if let Some(dest) = bare.strip_prefix(MOVE_TO) {
                *move_to = Some(dest.to_string());
                return Ok(());
            }
        }
        if is_context_marker {
            if chunks.last().is_some_and(Chunk::is_empty) {
                return Err(hunk_error(unexpected_update_line(line), at));
            }
            chunks.push(Chunk {
                change_context: bare.strip_prefix(CONTEXT).map(str::to_string),
                ..Chunk::default()
            });
            return Ok(());
        }
        if bare == END_OF_FILE {
            if chunks.last().is_some_and(Chunk::is_empty) {
                return Err(hunk_error(
                    "Update hunk does not contain any lines".into(),
                    at,
                ));
            }
            if let Some(chunk) = chunks.last_mut() {
                chunk.is_end_of_file = true;
            }
            return Ok(());
        }
        let diff_line = match line.chars().next() {
            None => Some((' ', "")),
            Some(c @ (' ' | '+' | '-')) => Some((c, &line[1..])),
            Some(_) => None,
        };
        if let Some((kind, text)) = diff_line {
            if chunks.is_empty() {
                chunks.push(Chunk::default());
            }
            let chunk = chunks.last_mut().expect("a chunk was just ensured");
            match kind {
                ' ' => chunk.push_context(text),
                '+' => chunk.new_lines.push(text.to_string()),
                _ => chunk.old_lines.push(text.to_string()),
            }
            return Ok(());
        }
        if chunks.last().is_some_and(|c| !c.is_empty()) {
            return Err(hunk_error(expected_context_marker(line), at));
        }
        Err(hunk_error(unexpected_update_line(line), at))
    }

    fn invalid_header(&self, trimmed: &str) -> ParseError {
        hunk_error(
            format!(
                "'{trimmed}' is not a valid hunk header. Valid hunk headers: \
                 '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
            ),
            self.line,
        )
    }
}

fn hunk_error(message: String, line: usize) -> ParseError {
    ParseError::Hunk { message, line }
}

fn unexpected_update_line(line: &str) -> String {
    format!(
        "Unexpected line found in update hunk: '{line}'. Every line should start with \
         ' ' (context line), '+' (added line), or '-' (removed line)"
    )
}

fn expected_context_marker(line: &str) -> String {
    format!("Expected update hunk to start with a @@ context marker, got: '{line}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: &str) -> String {
        format!("*** Begin Patch\n{body}\n*** End Patch")
    }

    fn error(text: &str) -> String {
        parse_patch(text).unwrap_err().to_string()
    }

    fn chunk(old: &[&str], new: &[&str], context: &[(usize, usize)]) -> Chunk {
        Chunk {
            change_context: None,
            old_lines: old.iter().map(|s| s.to_string()).collect(),
            new_lines: new.iter().map(|s| s.to_string()).collect(),
            context_lines: context.to_vec(),
            is_end_of_file: false,
        }
    }

    #[test]
    fn every_section_kind_with_its_header_line() {
        let hunks = parse_patch(&patch(
            "*** Add File: path/add.py\n+abc\n+\n+def\n*** Delete File: path/delete.py\n\
             *** Update File: path/update.py\n*** Move to: path/update2.py\n@@ def f():\n-    pass\n+    return 123",
        ))
        .unwrap();
        assert_eq!(
            hunks,
            vec![
                Hunk::AddFile {
                    path: "path/add.py".into(),
                    contents: "abc\n\ndef\n".into(),
                    line: 2
                },
                Hunk::DeleteFile {
                    path: "path/delete.py".into(),
                    line: 6
                },
                Hunk::UpdateFile {
                    path: "path/update.py".into(),
                    move_to: Some("path/update2.py".into()),
                    chunks: vec![Chunk {
                        change_context: Some("def f():".into()),
                        ..chunk(&["    pass"], &["    return 123"], &[])
                    }],
                    line: 7
                },
            ]
        );
    }

    #[test]
    fn an_empty_line_in_a_chunk_is_an_empty_context_line() {
        let hunks = parse_patch(&patch(
            "*** Update File: f\n@@ ctx\n\n context\n-remove\n+add\n context2",
        ))
        .unwrap();
        let Hunk::UpdateFile { chunks, .. } = &hunks[0] else {
            panic!()
        };
        assert_eq!(
            chunks[0],
            Chunk {
                change_context: Some("ctx".into()),
                ..chunk(
                    &["", "context", "remove", "context2"],
                    &["", "context", "add", "context2"],
                    &[(0, 0), (1, 1), (3, 3)]
                )
            }
        );
    }

    #[test]
    fn the_first_chunk_may_omit_its_marker_and_end_of_file_marks_it() {
        let hunks = parse_patch(&patch(
            "*** Update File: f\n import foo\n+bar\n*** End of File  ",
        ))
        .unwrap();
        let Hunk::UpdateFile { chunks, .. } = &hunks[0] else {
            panic!()
        };
        assert_eq!(
            chunks[0],
            Chunk {
                is_end_of_file: true,
                ..chunk(&["import foo"], &["import foo", "bar"], &[(0, 0)])
            }
        );
    }

    #[test]
    fn markers_may_carry_whitespace_and_the_patch_may_be_crlf() {
        let text = "  *** Begin Patch \r\n   *** Update File: f\r\n@@  \r\n-a\r\n+b\r\n *** End Patch  \r\n";
        let hunks = parse_patch(text).unwrap();
        assert_eq!(
            hunks,
            vec![Hunk::UpdateFile {
                path: "f".into(),
                move_to: None,
                chunks: vec![chunk(&["a"], &["b"], &[])],
                line: 2
            }]
        );
    }

    #[test]
    fn heredoc_wrappers_are_peeled_and_lines_count_from_begin_patch() {
        for open in ["<<EOF", "<<'EOF'", "<<\"EOF\""] {
            let text = format!("{open}\n{}\nEOF\n", patch("*** Add File: a\n+x"));
            assert_eq!(parse_patch(&text).unwrap().len(), 1, "{open}");
        }
        let text = format!("<<'EOF'\n{}\nEOF", patch("*** Add File: a\n+x\njunk"));
        assert!(error(&text).starts_with("Invalid patch hunk on line 4: 'junk'"));
        // Mismatched quotes, or a wrapper with padding, are not peeled.
        let text = format!("<<\"EOF'\n{}\nEOF\n", patch("*** Add File: a\n+x"));
        assert_eq!(
            error(&text),
            "Invalid patch: The first line of the patch must be '*** Begin Patch'"
        );
        let text = "<<EOF\n*** Begin Patch\n*** Update File: f\nEOF\n";
        assert_eq!(
            error(text),
            "Invalid patch: The last line of the patch must be '*** End Patch'"
        );
    }

    #[test]
    fn boundary_errors() {
        assert_eq!(
            error("bad"),
            "Invalid patch: The first line of the patch must be '*** Begin Patch'"
        );
        assert_eq!(
            error("*** Begin Patch\nbad"),
            "Invalid patch: The last line of the patch must be '*** End Patch'"
        );
        assert_eq!(
            error(""),
            "Invalid patch: The last line of the patch must be '*** End Patch'"
        );
        assert_eq!(
            error("\u{feff}*** Begin Patch\n*** End Patch"),
            "Invalid patch: The first line of the patch must be '*** Begin Patch'"
        );
        assert_eq!(
            parse_patch("*** Begin Patch\n*** End Patch").unwrap(),
            vec![]
        );
        assert_eq!(
            error(&patch(
                "*** Update File: f\n@@\n-a\n*** End Patch\n*** Delete File: f"
            )),
            "Invalid patch: The last line of the patch must be '*** End Patch'"
        );
    }

    #[test]
    fn section_errors_name_codex_line_numbers() {
        let cases = [
            (
                "*** Add File: a\n+x\njunk",
                "Invalid patch hunk on line 4: 'junk' is not a valid hunk header. Valid hunk headers: \
                 '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'",
            ),
            (
                "*** Add File: \n+x",
                "Invalid patch hunk on line 2: '*** Add File:' is not a valid hunk header. Valid hunk headers: \
                 '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'",
            ),
            (
                "*** Update File: f",
                "Invalid patch hunk on line 2: Update file hunk for path 'f' is empty",
            ),
            (
                "*** Update File: f\n@@",
                "Invalid patch hunk on line 4: Update hunk does not contain any lines",
            ),
            (
                "*** Update File: f\n@@\n*** End of File",
                "Invalid patch hunk on line 4: Update hunk does not contain any lines",
            ),
            (
                "*** Update File: f\n@@\n@@\n-a",
                "Invalid patch hunk on line 4: Unexpected line found in update hunk: '@@'. Every line \
                 should start with ' ' (context line), '+' (added line), or '-' (removed line)",
            ),
            (
                "*** Update File: f\njunk",
                "Invalid patch hunk on line 3: Unexpected line found in update hunk: 'junk'. Every line \
                 should start with ' ' (context line), '+' (added line), or '-' (removed line)",
            ),
            (
                "*** Update File: f\n@@\n-a\n+A\njunk",
                "Invalid patch hunk on line 6: Expected update hunk to start with a @@ context marker, got: 'junk'",
            ),
            (
                "*** Update File: f\n@@\n-d\n*** End of File\n-c",
                "Invalid patch hunk on line 6: Expected update hunk to start with a @@ context marker, got: '-c'",
            ),
            (
                "*** Update File: f\n\n*** Move to: g",
                "Invalid patch hunk on line 4: Expected update hunk to start with a @@ context marker, got: '*** Move to: g'",
            ),
            (
                "*** Update File: f\n@@\n*** Add File: g\n+x",
                "Invalid patch hunk on line 4: Unexpected line found in update hunk: '*** Add File: g'. Every line \
                 should start with ' ' (context line), '+' (added line), or '-' (removed line)",
            ),
            (
                "",
                "Invalid patch hunk on line 2: '' is not a valid hunk header. Valid hunk headers: \
                 '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(error(&patch(body)), want, "{body:?}");
        }
    }

    #[test]
    fn environment_id_once_right_after_begin_patch() {
        assert_eq!(
            parse_patch(&patch("*** Environment ID:x\n*** Add File: a\n+x"))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            error(&patch("*** Environment ID:  \n*** Add File: a\n+x")),
            "Invalid patch: apply_patch environment_id cannot be empty"
        );
        assert_eq!(
            error(&patch(
                "*** Environment ID: a\n*** Environment ID: b\n*** Add File: a\n+x"
            )),
            "Invalid patch: apply_patch environment_id cannot be specified more than once"
        );
        assert!(
            error(&patch("*** Add File: a\n+x\n*** Environment ID: a")).starts_with(
                "Invalid patch hunk on line 4: '*** Environment ID: a' is not a valid hunk header"
            )
        );
    }

    #[test]
    fn update_lines_are_compared_without_trailing_whitespace_only() {
        let hunks = parse_patch(&patch(
            "*** Update File:   f\n*** Move to: g  \n@@ ctx  \n-a\n  *** Delete File: x\n*** End of File",
        ))
        .unwrap();
        assert_eq!(
            hunks,
            vec![Hunk::UpdateFile {
                path: "  f".into(),
                move_to: Some("g".into()),
                chunks: vec![Chunk {
                    change_context: Some("ctx".into()),
                    is_end_of_file: true,
                    ..chunk(
                        &["a", " *** Delete File: x"],
                        &[" *** Delete File: x"],
                        &[(1, 0)]
                    )
                }],
                line: 2
            }]
        );
    }

    #[test]
    fn blank_lines_after_end_of_file_are_skipped_before_the_next_chunk() {
        let hunks = parse_patch(&patch(
            "*** Update File: f\n*** End of File\n@@\n-d\n*** End of File\n\n   \n@@\n-a\n+A",
        ))
        .unwrap();
        let Hunk::UpdateFile { chunks, .. } = &hunks[0] else {
            panic!()
        };
        assert_eq!(chunks.len(), 2);
        assert!(chunks[0].is_end_of_file && !chunks[1].is_end_of_file);
    }

    #[test]
    fn an_add_section_with_no_lines_is_an_empty_file() {
        assert_eq!(
            parse_patch(&patch("*** Add File: a")).unwrap(),
            vec![Hunk::AddFile {
                path: "a".into(),
                contents: String::new(),
                line: 2
            }]
        );
    }
}
