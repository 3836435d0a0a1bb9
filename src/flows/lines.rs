//! Line arithmetic the flows share: counting lines, finding where one
//! starts, and the 1-based line fields of their inputs.

use super::field;
use crate::error::{FlowError, FlowResult};
use serde_json::Value;

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

/// The `startLine` and `endLine` fields of an output that shows a range
/// of lines (`read`'s page, `edit`'s hunk), one convention for both.
pub(crate) fn line_range_fields(of: &str) -> [(&'static str, Value); 2] {
    [
        (
            "startLine",
            field("integer", &format!("The first line of {of}, 1-based.")),
        ),
        (
            "endLine",
            field(
                "integer",
                &format!("The last line of {of} (startLine - 1 when it is empty)."),
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines_like_an_editor() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("\n"), 1);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines("one\r\ntwo\r\n"), 2);
    }
}
