//! What the sub-agent is shown of each tool's result, and the lines it
//! saw: a `read` page and `grep`'s matches as numbered lines (so the model
//! cites what it was shown, by the numbers it was shown), cut at a line
//! under [`RESULT_LIMIT`]; only the lines that made it into the text count
//! as seen, and a finding may cite only those ([`super::findings`]).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The most bytes of one tool result sent to the model.
pub const RESULT_LIMIT: usize = 30_000;
/// The most lines the sub-agent's whole exploration remembers as seen.
const MAX_SEEN: usize = 200_000;

/// The lines the sub-agent was shown, by file (a normalized absolute
/// path) and 1-based line number, with their text.
#[derive(Debug, Default)]
pub struct Seen {
    lines: BTreeMap<(PathBuf, u64), String>,
}

impl Seen {
    fn note(&mut self, file: PathBuf, line: u64, text: &str) {
        if self.lines.len() < MAX_SEEN {
            self.lines.insert((file, line), text.to_string());
        }
    }

    /// The text of `line` of `file` as the sub-agent saw it, if it did.
    pub fn get(&self, file: &Path, line: u64) -> Option<&str> {
        self.lines
            .get(&(file.to_path_buf(), line))
            .map(String::as_str)
    }
}

/// `given` as an absolute path against `root`, `.` and `..` taken away by
/// their names alone: the same file however a tool's input or output or
/// the model's citation spells it (a link is not followed, so citing a
/// file by another name than it was read by does not count).
pub fn normalized(root: &Path, given: &str) -> PathBuf {
    let joined = root.join(given);
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// How `file` is named to the model and in findings: relative to `root`
/// when under it.
pub fn named(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .map_or_else(|_| file.display().to_string(), |r| r.display().to_string())
}

/// Lines kept while they fit under [`RESULT_LIMIT`] after `head`; the
/// note says where the cut is, when there is one.
struct Page {
    text: String,
    full: bool,
}

impl Page {
    fn new(head: String) -> Page {
        Page {
            text: head,
            full: false,
        }
    }

    /// Adds `line`; false when it does not fit (nothing more will).
    fn push(&mut self, line: &str) -> bool {
        if self.full || self.text.len() + line.len() + 1 > RESULT_LIMIT - 200 {
            self.full = true;
            return false;
        }
        self.text.push('\n');
        self.text.push_str(line);
        true
    }
}

/// A `read` output as numbered lines; the lines shown are noted as seen.
pub fn read(root: &Path, input: &Value, out: &Value, seen: &mut Seen) -> String {
    let path = input["path"].as_str().unwrap_or_default();
    let file = normalized(root, path);
    let start = out["startLine"].as_u64().unwrap_or(1);
    let total = out["totalLines"].as_u64().unwrap_or(0);
    let content = out["content"].as_str().unwrap_or_default();
    let mut page = Page::new(String::new());
    let mut last = start.saturating_sub(1);
    if !(content.is_empty() && total == 0) {
        for (i, text) in content.split('\n').enumerate() {
            let n = start + i as u64;
            if !page.push(&format!("{n}\t{text}")) {
                break;
            }
            seen.note(file.clone(), n, text);
            last = n;
        }
    }
    let mut head = format!("{} lines {start}-{last} of {total}", named(root, &file));
    if last < total {
        head.push_str(&format!(" (more: read with offset = {})", last + 1));
    }
    head + &page.text
}

/// A `grep` output as `file:line: text` lines (context lines as
/// `file-line- text`); the lines shown are noted as seen.
pub fn grep(root: &Path, out: &Value, seen: &mut Seen) -> String {
    let none = Vec::new();
    let matches = out["matches"].as_array().unwrap_or(&none);
    let total = out["totalMatches"].as_u64().unwrap_or(matches.len() as u64);
    let mut page = Page::new(format!("{total} matching lines"));
    if matches.is_empty() {
        // filesWithMatches: the files, which are no lines.
        let files = out["files"].as_array().unwrap_or(&none);
        for f in files.iter().filter_map(Value::as_str) {
            page.push(f);
        }
    }
    'matches: for m in matches {
        let shown = m["file"].as_str().unwrap_or_default();
        let file = normalized(root, shown);
        let line = m["line"].as_u64().unwrap_or(0);
        let before = m["before"].as_array().unwrap_or(&none);
        let after = m["after"].as_array().unwrap_or(&none);
        let first = line.saturating_sub(before.len() as u64);
        let context = before
            .iter()
            .enumerate()
            .map(|(i, t)| (first + i as u64, t, '-'));
        let hit = std::iter::once((line, &m["text"], ':'));
        let rest = after
            .iter()
            .enumerate()
            .map(|(i, t)| (line + 1 + i as u64, t, '-'));
        for (n, text, mark) in context.chain(hit).chain(rest) {
            let text = text.as_str().unwrap_or_default();
            if !page.push(&format!("{shown}{mark}{n}{mark} {text}")) {
                break 'matches;
            }
            // A clipped match's text is a prefix of the line: still seen.
            seen.note(file.clone(), n, text);
        }
    }
    if page.full || out["truncated"] == Value::Bool(true) {
        page.text
            .push_str("\n[more matches were left out: narrow the pattern or the folder]");
    }
    page.text
}

/// Any other output as its JSON, [`clip`]ped.
pub fn json(out: &Value) -> String {
    clip(out.to_string())
}

/// `text` cut at [`RESULT_LIMIT`] bytes (at a character's edge), with a
/// note when it was.
pub fn clip(text: String) -> String {
    if text.len() <= RESULT_LIMIT {
        return text;
    }
    let mut end = RESULT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[cut: kept the first {end} of {} bytes; ask for less]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_page_is_numbered_from_its_start_and_each_line_shown_is_seen() {
        let root = Path::new("/w");
        let mut seen = Seen::default();
        let out = json!({"content": "a\nb", "startLine": 4, "endLine": 5, "totalLines": 9});
        let text = read(root, &json!({"path": "./src/../x.py"}), &out, &mut seen);
        assert_eq!(
            text,
            "x.py lines 4-5 of 9 (more: read with offset = 6)\n4\ta\n5\tb"
        );
        assert_eq!(seen.get(Path::new("/w/x.py"), 5), Some("b"));
        assert_eq!(seen.get(Path::new("/w/x.py"), 6), None);
    }

    #[test]
    fn lines_past_the_limit_are_neither_shown_nor_seen() {
        let root = Path::new("/w");
        let mut seen = Seen::default();
        let long = "x".repeat(1000);
        let content = vec![long.as_str(); 100].join("\n");
        let out = json!({"content": content, "startLine": 1, "endLine": 100, "totalLines": 100});
        let text = read(root, &json!({"path": "big"}), &out, &mut seen);
        assert!(text.len() <= RESULT_LIMIT, "{}", text.len());
        let shown = text.lines().count() as u64 - 1;
        assert!(seen.get(Path::new("/w/big"), shown).is_some());
        assert!(seen.get(Path::new("/w/big"), shown + 1).is_none());
    }

    #[test]
    fn grep_matches_and_their_context_are_seen_where_they_are() {
        let root = Path::new("/w");
        let mut seen = Seen::default();
        let out = json!({"matches": [{"file": "a.rs", "line": 3, "text": "fn x", "before": ["// doc"]}],
                         "totalMatches": 1, "truncated": false});
        let text = grep(root, &out, &mut seen);
        assert_eq!(text, "1 matching lines\na.rs-2- // doc\na.rs:3: fn x");
        assert_eq!(seen.get(Path::new("/w/a.rs"), 2), Some("// doc"));
        assert_eq!(seen.get(Path::new("/w/a.rs"), 3), Some("fn x"));
    }
}
