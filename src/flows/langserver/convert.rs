//! Between the protocol's terms and sluice's: file URIs and workspace
//! paths (relative inside the workspace, absolute outside it, as `grep`
//! shows them), 0-based and 1-based positions, and the protocol's
//! character offsets (UTF-16 code units unless the server agreed to UTF-8
//! bytes) and sluice's, which count characters (Unicode scalar values) on
//! the line, as `read` and `grep` do.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How the server counts a line's characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf16,
    Utf8,
}

impl Encoding {
    /// What the server's `capabilities.positionEncoding` says (UTF-16
    /// when it says nothing, as the protocol's default).
    pub fn of(capabilities: &Value) -> Encoding {
        match capabilities["positionEncoding"].as_str() {
            Some("utf-8") => Encoding::Utf8,
            _ => Encoding::Utf16,
        }
    }

    fn units(self, c: char) -> u64 {
        match self {
            Encoding::Utf16 => c.len_utf16() as u64,
            Encoding::Utf8 => c.len_utf8() as u64,
        }
    }
}

/// The `file:` URI of `path` (absolute).
pub fn uri_of(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(String::from)
        .unwrap_or_else(|()| format!("file://{}", path.display()))
}

/// The path a `file:` URI names, or `None` for another scheme.
pub fn file_of(uri: &str) -> Option<PathBuf> {
    url::Url::parse(uri).ok()?.to_file_path().ok()
}

/// What identifies a document whatever its URI's spelling: its path, or
/// the URI itself when it names no file.
pub fn uri_key(uri: &str) -> String {
    file_of(uri).map_or_else(|| uri.to_string(), |p| p.display().to_string())
}

/// `path` as outputs show it: relative to `workspace` inside it.
pub fn shown(path: &Path, workspace: &Path) -> String {
    match path.strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// The protocol's character offset of sluice's 1-based `character` on
/// `line_text` (past the line's end: its end).
pub fn to_protocol(line_text: &str, character: u64, enc: Encoding) -> u64 {
    line_text
        .chars()
        .take(character.saturating_sub(1) as usize)
        .map(|c| enc.units(c))
        .sum()
}

/// Sluice's 1-based character of the protocol's `offset` on `line_text`.
pub fn from_protocol(line_text: &str, offset: u64, enc: Encoding) -> u64 {
    let mut units = 0;
    let mut chars = 0;
    for c in line_text.chars() {
        if units >= offset {
            break;
        }
        units += enc.units(c);
        chars += 1;
    }
    // Past the line's end (a range ending at the newline): count on.
    chars + offset.saturating_sub(units) + 1
}

/// The largest file whose lines are read to convert columns: 16 MiB.
const MAX_FILE: u64 = 16 << 20;

/// Files' lines, read once each while one result is converted.
#[derive(Default)]
pub struct Lines {
    files: HashMap<PathBuf, Option<Vec<String>>>,
}

impl Lines {
    /// Line `line` (0-based) of `path`, if it can be read as text.
    pub fn line(&mut self, path: &Path, line: u64) -> Option<&str> {
        let lines = self
            .files
            .entry(path.to_path_buf())
            .or_insert_with(|| load(path));
        lines.as_ref()?.get(line as usize).map(String::as_str)
    }

    /// Seeds `path` with `text` (a document as sluice sent it).
    pub fn seed(&mut self, path: &Path, text: &str) {
        let lines = text.split('\n').map(str::to_string).collect();
        self.files.insert(path.to_path_buf(), Some(lines));
    }
}

/// `path`'s lines when it is a regular file of at most [`MAX_FILE`]: a
/// server's answer may name a FIFO (opening it would wait for a writer
/// for ever), a device (`/dev/zero` never ends; opening some acts) or a
/// file that grows while read, and none of them is opened or read past
/// the limit.
fn load(path: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let regular = |m: &std::fs::Metadata| m.is_file() && m.len() <= MAX_FILE;
    if !regular(&std::fs::symlink_metadata(path).ok()?) {
        return None;
    }
    // Swapped for another kind of file since: not waited on, not followed.
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .ok()?;
    if !regular(&file.metadata().ok()?) {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_FILE).read_to_string(&mut text).ok()?;
    Some(text.split('\n').map(str::to_string).collect())
}

/// A server's result as sluice shows it: every position 1-based in
/// sluice's characters, every `file:` URI a path. `doc` is the document
/// positions without a URI of their own are in.
pub struct Converter<'a> {
    pub workspace: &'a Path,
    pub encoding: Encoding,
    pub lines: Lines,
    /// Whether the call may read a file (a canonical path) an answer
    /// points to: one the policy hides is never read, not even to count
    /// its characters, and its positions stay as the server gave them.
    pub may_read: &'a dyn Fn(&Path) -> bool,
}

impl Converter<'_> {
    /// Converts `value` in place.
    pub fn result(&mut self, value: &mut Value, doc: Option<&Path>) {
        match value {
            Value::Object(map) => self.object(map, doc),
            Value::Array(items) => {
                for item in items {
                    self.result(item, doc);
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, map: &mut Map<String, Value>, doc: Option<&Path>) {
        if let Some((line, character)) = position(map) {
            let text = doc.and_then(|d| self.lines.line(d, line));
            let character = match text {
                Some(t) => from_protocol(t, character, self.encoding),
                None => character + 1,
            };
            *map = json!({"line": line + 1, "character": character})
                .as_object()
                .cloned()
                .unwrap_or_default();
            return;
        }
        let own = ["uri", "targetUri"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str));
        // A URI of its own names where its positions are: a file the call
        // may read, else nothing (columns left as the server gave them).
        let readable = own
            .and_then(file_of)
            .and_then(|p| std::fs::canonicalize(p).ok())
            .filter(|p| (self.may_read)(p));
        let here = if own.is_some() {
            readable.as_deref()
        } else {
            doc
        };
        for (key, child) in map.iter_mut() {
            // What the server keeps for itself, it must get back as it was.
            if key != "data" {
                self.result(child, here);
            }
        }
        for key in ["uri", "targetUri"] {
            if let Some(path) = map.get(key).and_then(Value::as_str).and_then(file_of) {
                map.insert(key.into(), json!(shown(&path, self.workspace)));
            }
        }
    }
}

/// A protocol position: an object of exactly `line` and `character`.
fn position(map: &Map<String, Value>) -> Option<(u64, u64)> {
    if map.len() != 2 {
        return None;
    }
    Some((map.get("line")?.as_u64()?, map.get("character")?.as_u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_count_utf16_units_or_bytes_as_agreed() {
        // "é" is one UTF-16 unit and two bytes; "𝄞" two units, four bytes.
        let line = "é𝄞x";
        assert_eq!(to_protocol(line, 3, Encoding::Utf16), 3);
        assert_eq!(to_protocol(line, 3, Encoding::Utf8), 6);
        assert_eq!(from_protocol(line, 3, Encoding::Utf16), 3);
        assert_eq!(from_protocol(line, 6, Encoding::Utf8), 3);
        assert_eq!(from_protocol(line, 0, Encoding::Utf16), 1);
        assert_eq!(from_protocol("ab", 4, Encoding::Utf16), 5);
    }

    #[test]
    fn results_turn_one_based_with_paths_for_uris() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(ws.join("a.py"), "x = 'é'; y\n").unwrap();
        let mut value = json!([{"uri": uri_of(&ws.join("a.py")), "range": {
            "start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 10}}},
            {"uri": "file:///usr/lib/x.py", "range": {"start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 2}}, "data": {"line": 1, "character": 1}}]);
        let mut c = Converter {
            workspace: &ws,
            encoding: Encoding::Utf16,
            lines: Lines::default(),
            may_read: &|_| true,
        };
        c.result(&mut value, None);
        assert_eq!(
            value,
            json!([{"uri": "a.py", "range": {
            "start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 11}}},
            {"uri": "/usr/lib/x.py", "range": {"start": {"line": 4, "character": 1}, "end": {"line": 4, "character": 3}}, "data": {"line": 1, "character": 1}}])
        );
    }
}
