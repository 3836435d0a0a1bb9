//! Finding a chunk's lines in a file the way Codex does: the same sequence,
//! sought from a starting line, in four passes of growing tolerance.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashMap;

/// [`Finder::seek`] over `lines`, with an index made for this one seek.
#[cfg(test)]
pub fn seek_sequence<L, P>(lines: &[L], pattern: &[P], start: usize, eof: bool) -> Option<usize>
where
    L: AsRef<str>,
    P: AsRef<str>,
{
    Finder::new(lines).seek(pattern, start, eof)
}

/// A file's lines, indexed for [`Finder::seek`]'s passes on first use.
///
/// A patch seeks many chunks in one file; scanning the file for each would
/// cost chunks × lines, which a 2,000-chunk patch whose chunks all miss the
/// exact pass turns into seconds. The index maps each line, as a pass sees
/// it, to where it occurs, so a seek only tries the places where the
/// pattern's first line matches. The answer is the one a scan gives: the
/// first such place, pass by pass.
pub struct Finder<'a, L> {
    lines: &'a [L],
    index: [OnceCell<HashMap<Cow<'a, str>, Vec<usize>>>; 4],
}

/// A line as pass `pass` compares it.
fn key(pass: usize, s: &str) -> Cow<'_, str> {
    match pass {
        0 => Cow::Borrowed(s),
        1 => Cow::Borrowed(s.trim_end()),
        2 => Cow::Borrowed(s.trim()),
        _ => Cow::Owned(normalise(s)),
    }
}

impl<'a, L: AsRef<str>> Finder<'a, L> {
    pub fn new(lines: &'a [L]) -> Self {
        Finder {
            lines,
            index: Default::default(),
        }
    }

    fn positions(&self, pass: usize) -> &HashMap<Cow<'a, str>, Vec<usize>> {
        self.index[pass].get_or_init(|| {
            let mut map: HashMap<Cow<'a, str>, Vec<usize>> = HashMap::new();
            for (i, line) in self.lines.iter().enumerate() {
                map.entry(key(pass, line.as_ref())).or_default().push(i);
            }
            map
        })
    }

    /// The first index at or after `start` where `pattern` occurs in the
    /// finder's lines.
    ///
    /// Each pass scans the whole range before the next is tried:
    /// 1. exact;
    /// 2. ignoring trailing whitespace;
    /// 3. ignoring whitespace on both sides;
    /// 4. also after normalising typographic punctuation ([`normalise`]).
    ///
    /// With `eof` the search starts where the pattern would end the file (or
    /// at `start`, if that is later), so a chunk marked `*** End of File`
    /// only matches at the very end. An empty pattern matches at `start`.
    pub fn seek<P: AsRef<str>>(&self, pattern: &[P], start: usize, eof: bool) -> Option<usize> {
        if pattern.is_empty() {
            return Some(start);
        }
        if pattern.len() > self.lines.len() {
            return None;
        }
        let last = self.lines.len() - pattern.len();
        let from = if eof { last.max(start) } else { start };
        // The exact pass scans from `from` while it has no index: chunks
        // usually follow one another, so the match is near and costs no
        // index at all. The first exact miss (a scan to the end) builds the
        // index, so later misses cost nothing.
        if self.index[0].get().is_none() {
            let exact = (from..=last).find(|&i| {
                pattern
                    .iter()
                    .zip(&self.lines[i..])
                    .all(|(want, have)| have.as_ref() == want.as_ref())
            });
            if exact.is_some() {
                return exact;
            }
            self.positions(0);
        }
        (0..4).find_map(|pass| {
            let places = self.positions(pass).get(&key(pass, pattern[0].as_ref()))?;
            let first = places.partition_point(|&p| p < from);
            places[first..]
                .iter()
                .take_while(|&&p| p <= last)
                .copied()
                .find(|&p| {
                    pattern
                        .iter()
                        .zip(&self.lines[p..])
                        .all(|(want, have)| key(pass, have.as_ref()) == key(pass, want.as_ref()))
                })
        })
    }
}

/// `s` trimmed, with Unicode dashes as `-`, curly quotes as straight ones and
/// special spaces as a space: what a patch typed in ASCII means.
pub fn normalise(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
            | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}' | '\u{2003}' | '\u{2004}' | '\u{2005}' | '\u{2006}'
            | '\u{2007}' | '\u{2008}' | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}'
            | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seek(lines: &[&str], pattern: &[&str], start: usize, eof: bool) -> Option<usize> {
        seek_sequence(lines, pattern, start, eof)
    }

    #[test]
    fn exact_match_from_the_start_line() {
        assert_eq!(
            seek(&["foo", "bar", "baz"], &["bar", "baz"], 0, false),
            Some(1)
        );
        assert_eq!(seek(&["x", "a", "x", "a"], &["x", "a"], 1, false), Some(2));
        assert_eq!(seek(&["x", "a"], &["x", "a"], 1, false), None);
    }

    #[test]
    fn an_earlier_pass_wins_over_an_earlier_line() {
        // Line 0 matches only ignoring trailing whitespace, line 2 exactly.
        assert_eq!(seek(&["a  ", "b", "a"], &["a"], 0, false), Some(2));
    }

    #[test]
    fn trailing_whitespace_then_surrounding_whitespace() {
        assert_eq!(
            seek(&["foo   ", "bar\t\t"], &["foo", "bar"], 0, false),
            Some(0)
        );
        assert_eq!(
            seek(&["    foo   ", "   bar\t"], &["foo", "bar"], 0, false),
            Some(0)
        );
    }

    #[test]
    fn typographic_punctuation_and_spaces_are_normalised() {
        let lines = [
            "    \u{2018}quoted\u{2019} \u{2014} value\u{00A0}",
            "\u{201C}x\u{201D}\u{3000}y",
        ];
        assert_eq!(
            seek(&lines, &["'quoted' - value", "\"x\" y"], 0, false),
            Some(0)
        );
        assert_eq!(normalise(" a\u{2212}b\u{2009}c "), "a-b c");
    }

    #[test]
    fn end_of_file_seeks_only_at_the_end() {
        assert_eq!(seek(&["a", "b", "c", "b"], &["b"], 0, true), Some(3));
        assert_eq!(seek(&["a", "b", "c", "d"], &["b"], 0, true), None);
        // The end of the file is before the start line: no match.
        assert_eq!(seek(&["a", "b"], &["b"], 2, true), None);
    }

    #[test]
    fn empty_and_overlong_patterns() {
        assert_eq!(seek(&["a"], &[], 1, false), Some(1));
        assert_eq!(seek(&["one"], &["too", "many"], 0, false), None);
        assert_eq!(seek(&["a"], &["a"], 5, false), None);
    }
}
