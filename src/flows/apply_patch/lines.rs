//! A text file as lines that remember their own endings, so an update
//! changes only the lines a patch replaces: the rest keep their bytes.
//!
//! As Codex 0.171.0 does: `\r\n`, a lone `\r` and `\n` each end a line; the
//! ending of the first line is the file's preferred one (`\n` when the file
//! has none) and every replacement line gets it; after an update every line
//! has an ending, so an updated file always ends with one.

/// Replace `.1` lines from index `.0` with the lines `.2`.
pub type Replacement = (usize, usize, Vec<String>);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    Lf,
    CrLf,
    Cr,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
            Ending::Cr => "\r",
        }
    }
}

#[derive(Debug)]
struct Line {
    text: String,
    ending: Option<Ending>,
}

#[derive(Debug)]
pub struct SourceFile {
    lines: Vec<Line>,
    preferred: Ending,
}

impl SourceFile {
    pub fn parse(contents: &str) -> SourceFile {
        let bytes = contents.as_bytes();
        let mut lines = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let (ending, width) = match bytes[i] {
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => (Ending::CrLf, 2),
                b'\r' => (Ending::Cr, 1),
                b'\n' => (Ending::Lf, 1),
                _ => {
                    i += 1;
                    continue;
                }
            };
            lines.push(Line {
                text: contents[start..i].to_string(),
                ending: Some(ending),
            });
            i += width;
            start = i;
        }
        if start < contents.len() {
            lines.push(Line {
                text: contents[start..].to_string(),
                ending: None,
            });
        }
        let preferred = lines.first().and_then(|l| l.ending).unwrap_or(Ending::Lf);
        SourceFile { lines, preferred }
    }

    /// Each line's text, without its ending.
    pub fn texts(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.text.clone()).collect()
    }

    /// Applies `replacements`, sorted by index and not overlapping.
    pub fn apply(&mut self, replacements: &[Replacement]) {
        let mut old = std::mem::take(&mut self.lines).into_iter();
        let mut lines = Vec::new();
        let mut at = 0;
        for (start, len, new) in replacements {
            // Codex's release build wraps this subtraction; an overlap (which
            // ordered chunks never produce) would keep every remaining line.
            let keep = start.checked_sub(at).unwrap_or(usize::MAX);
            lines.extend(old.by_ref().take(keep));
            old.by_ref().take(*len).for_each(drop);
            lines.extend(new.iter().map(|text| Line {
                text: text.clone(),
                ending: Some(self.preferred),
            }));
            at = start + len;
        }
        lines.extend(old);
        for line in &mut lines {
            line.ending.get_or_insert(self.preferred);
        }
        self.lines = lines;
    }

    pub fn into_contents(self) -> String {
        let mut out = String::new();
        for line in self.lines {
            out.push_str(&line.text);
            out.push_str(line.ending.map_or("", Ending::as_str));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(contents: &str, replacements: &[Replacement]) -> String {
        let mut file = SourceFile::parse(contents);
        file.apply(replacements);
        file.into_contents()
    }

    fn rep(start: usize, len: usize, new: &[&str]) -> Replacement {
        (start, len, new.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn cr_crlf_and_lf_each_end_a_line() {
        let file = SourceFile::parse("a\rb\r\nc\nd");
        assert_eq!(file.texts(), vec!["a", "b", "c", "d"]);
        assert_eq!(SourceFile::parse("x\n\r\r\n").texts(), vec!["x", "", ""]);
        assert!(SourceFile::parse("").texts().is_empty());
    }

    #[test]
    fn new_lines_take_the_first_lines_ending_and_others_keep_theirs() {
        assert_eq!(
            edit("a\r\nb\nc\n", &[rep(2, 1, &["C", "D"])]),
            "a\r\nb\nC\r\nD\r\n"
        );
        assert_eq!(edit("a\nb\r\nc\r\n", &[rep(2, 1, &["C"])]), "a\nb\r\nC\n");
        assert_eq!(edit("a\rb\nc\n", &[rep(2, 1, &["C"])]), "a\rb\nC\r");
    }

    #[test]
    fn an_updated_file_always_ends_with_a_line_ending() {
        assert_eq!(edit("a\r\nb", &[rep(2, 0, &["c"])]), "a\r\nb\r\nc\r\n");
        assert_eq!(edit("a\nb", &[rep(0, 1, &["A"])]), "A\nb\n");
        assert_eq!(edit("", &[rep(0, 0, &["x", "y"])]), "x\ny\n");
        assert_eq!(edit("only", &[]), "only\n");
    }

    #[test]
    fn replacements_at_one_index_apply_in_order() {
        assert_eq!(
            edit("a\nb\nc\n", &[rep(1, 0, &["X"]), rep(1, 1, &["B"])]),
            "a\nX\nB\nc\n"
        );
    }
}
