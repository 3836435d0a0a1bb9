//! Server-sent events (the WHATWG `text/event-stream` format), parsed from
//! bytes as they arrive, whatever the chunking.
//!
//! Lines end with `\n`, `\r\n` or `\r` (a chunk may end between the two
//! bytes of `\r\n`); a blank line dispatches the event being built; `data:`
//! lines are joined with `\n`; one space after the colon is stripped;
//! `event:` names the event; a line starting with `:` is a comment; `id:`,
//! `retry:` and unknown fields are ignored. An event without `data:` lines
//! is not dispatched. Lines are decoded as UTF-8 once whole, so a chunk may
//! split a character; invalid bytes become U+FFFD.
//!
//! Memory is bounded: a line, and an event's data, keep at most
//! [`MAX_LINE`] bytes; what is past that is dropped and
//! [`Parser::too_long`] says so, for the caller to fail the stream (the
//! truncated data is no longer what the server sent).
//!
//! A parser made with [`Parser::cutting`] replaces every copy of a secret
//! (the provider's key) in each line, once the line is whole, before
//! anything reads it: a secret has no line end, so no copy escapes by
//! being split across chunks or lines.

/// The most bytes a line, or an event's joined data, keeps.
pub const MAX_LINE: usize = 8 << 20;

/// One event: its `event:` name, if any, and its `data:` lines joined by
/// newlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: Option<String>,
    pub data: String,
}

/// Turns a byte stream into events.
#[derive(Debug, Default)]
pub struct Parser {
    /// The line being read, without its end.
    line: Vec<u8>,
    /// The last byte fed was a `\r`: a `\n` right after it ends nothing.
    after_cr: bool,
    /// The first line has been ended (its byte order mark, if any, is
    /// stripped).
    started: bool,
    /// The event being built: its `data:` lines, each followed by `\n`.
    data: String,
    /// Whether a `data:` line was seen (`data:` alone gives empty data).
    has_data: bool,
    event: Option<String>,
    too_long: bool,
    /// Bytes no line keeps: each copy becomes `[redacted]`.
    cut: Option<Vec<u8>>,
}

impl Parser {
    /// A parser that cuts nothing.
    #[cfg(test)]
    pub fn new() -> Parser {
        Parser::default()
    }

    /// A parser that replaces every copy of `secret` (when not empty) in
    /// the lines it reads with `[redacted]`.
    pub fn cutting(secret: Option<&str>) -> Parser {
        Parser {
            cut: secret
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec()),
            ..Parser::default()
        }
    }

    /// The events `bytes` completes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', rest) {
            self.push(&rest[..at]);
            if let Some(ev) = self.end_line() {
                events.push(ev);
            }
            if rest[at] == b'\r' {
                match rest.get(at + 1) {
                    Some(b'\n') => rest = &rest[at + 2..],
                    Some(_) => rest = &rest[at + 1..],
                    None => {
                        self.after_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[at + 1..];
            }
        }
        self.push(rest);
        events
    }

    /// The last event, when the stream ended without its blank line.
    pub fn finish(&mut self) -> Option<Event> {
        let mut last = None;
        if !self.line.is_empty() {
            last = self.end_line();
        }
        if last.is_none() {
            last = self.dispatch();
        }
        self.after_cr = false;
        last
    }

    /// Whether a line, or an event's data, was longer than [`MAX_LINE`]
    /// and so was cut: the events since are not what the server sent.
    pub fn too_long(&self) -> bool {
        self.too_long
    }

    /// Adds bytes to the line being read, up to the bound.
    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_LINE - self.line.len();
        if bytes.len() > room {
            self.too_long = true;
        }
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The line is whole: interprets it; the event it dispatches, if any.
    fn end_line(&mut self) -> Option<Event> {
        let mut line = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
        }
        if line.is_empty() {
            return self.dispatch();
        }
        if let Some(secret) = &self.cut {
            if memchr::memmem::find(&line, secret).is_some() {
                line = crate::credentials::cut_bytes(&line, secret);
            }
        }
        if line[0] != b':' {
            let (field, value) = match memchr::memchr(b':', &line) {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (&line[..], &[][..]),
            };
            match field {
                b"data" => {
                    let value = String::from_utf8_lossy(value);
                    let room = MAX_LINE.saturating_sub(self.data.len());
                    if value.len() + 1 > room {
                        self.too_long = true;
                        let mut cut = room.min(value.len());
                        while !value.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        self.data.push_str(&value[..cut]);
                    } else {
                        self.data.push_str(&value);
                        self.data.push('\n');
                    }
                    self.has_data = true;
                }
                b"event" => {
                    let name = String::from_utf8_lossy(value).into_owned();
                    self.event = (!name.is_empty()).then_some(name);
                }
                _ => {}
            }
        }
        // Keep the line's allocation for the next one.
        line.clear();
        self.line = line;
        None
    }

    /// The event built so far, if it has data; starts a new one.
    fn dispatch(&mut self) -> Option<Event> {
        let event = self.event.take();
        if !std::mem::take(&mut self.has_data) {
            self.data.clear();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        Some(Event { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cutting_parser_leaves_no_copy_of_its_secret_however_the_bytes_come() {
        let stream =
            b"data: {\"t\": \"a sk-SECRET b\"}\n\nevent: sk-SECRET\ndata: x\n\ndata: sk-SECRET";
        let want = vec![
            ev(None, "{\"t\": \"a [redacted] b\"}"),
            ev(Some("[redacted]"), "x"),
            ev(None, "[redacted]"),
        ];
        for size in 1..12 {
            let mut p = Parser::cutting(Some("sk-SECRET"));
            let mut got = Vec::new();
            for chunk in stream.chunks(size) {
                got.extend(p.feed(chunk));
            }
            got.extend(p.finish());
            assert_eq!(got, want, "chunks of {size}");
        }
        let mut p = Parser::cutting(Some(""));
        assert_eq!(p.feed(b"data: a\n\n"), vec![ev(None, "a")]);
    }

    fn ev(event: Option<&str>, data: &str) -> Event {
        Event {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    /// Every event of `bytes` fed whole, then byte by byte, then in chunks
    /// of every size up to 7: the same.
    fn all(bytes: &[u8]) -> Vec<Event> {
        let mut p = Parser::new();
        let mut whole = p.feed(bytes);
        whole.extend(p.finish());
        for size in 1..8 {
            let mut p = Parser::new();
            let mut got = Vec::new();
            for chunk in bytes.chunks(size) {
                got.extend(p.feed(chunk));
            }
            got.extend(p.finish());
            assert_eq!(got, whole, "chunks of {size}");
        }
        whole
    }

    #[test]
    fn fields_comments_and_blank_lines() {
        let stream = b": a comment\n\
            event: message_start\n\
            data: {\"a\":1}\n\
            id: 7\n\
            retry: 1000\n\
            \n\
            data:no space\n\
            data:  two spaces\n\
            data\n\
            \n\
            event: lonely\n\
            \n\
            data: [DONE]\n\n";
        assert_eq!(
            all(stream),
            vec![
                ev(Some("message_start"), "{\"a\":1}"),
                ev(None, "no space\n two spaces\n"),
                ev(None, "[DONE]"),
            ]
        );
    }

    #[test]
    fn every_line_end() {
        let stream = b"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\ndata: e\r\r\n";
        assert_eq!(
            all(stream),
            vec![
                ev(None, "a"),
                ev(None, "b"),
                ev(None, "c"),
                ev(None, "d\ne")
            ]
        );
    }

    #[test]
    fn a_split_crlf_is_one_line_end() {
        let mut p = Parser::new();
        assert_eq!(p.feed(b"data: a\r"), vec![]);
        assert_eq!(p.feed(b"\n"), vec![]);
        assert_eq!(p.feed(b"\r"), vec![ev(None, "a")]);
        assert_eq!(p.feed(b"\ndata: b\n"), vec![]);
        assert_eq!(p.feed(b"\n"), vec![ev(None, "b")]);
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn utf8_split_across_chunks() {
        let stream = "event: é\ndata: héllo 🌍 wörld\n\n".as_bytes();
        assert_eq!(all(stream), vec![ev(Some("é"), "héllo 🌍 wörld")]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(all(b"data: a\xFFb\n\n"), vec![ev(None, "a\u{FFFD}b")]);
    }

    #[test]
    fn byte_order_mark_is_stripped() {
        assert_eq!(all(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev(None, "x")]);
        // Only at the start of the stream.
        assert_eq!(
            all(b"data: x\n\n\xEF\xBB\xBFdata: y\n\n"),
            vec![ev(None, "x")]
        );
    }

    #[test]
    fn empty_data_is_an_event_no_data_is_not() {
        assert_eq!(all(b"data:\n\nevent: x\n\nid: 1\n\n"), vec![ev(None, "")]);
    }

    #[test]
    fn the_event_name_does_not_carry_over() {
        assert_eq!(
            all(b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\nevent:\ndata: 3\n\n"),
            vec![ev(Some("a"), "1"), ev(None, "2"), ev(None, "3")]
        );
    }

    #[test]
    fn finish_returns_the_pending_event() {
        // The last line not ended.
        assert_eq!(
            all(b"data: a\n\ndata: b"),
            vec![ev(None, "a"), ev(None, "b")]
        );
        // The last line ended, not the event.
        assert_eq!(all(b"event: e\ndata: b\n"), vec![ev(Some("e"), "b")]);
        // Nothing pending.
        let mut p = Parser::new();
        assert_eq!(p.feed(b"data: a\n\n"), vec![ev(None, "a")]);
        assert_eq!(p.finish(), None);
        assert_eq!(Parser::new().finish(), None);
    }

    #[test]
    fn a_long_line_is_cut_and_said() {
        let mut p = Parser::new();
        p.feed(b"data: ");
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..9 {
            assert!(p.feed(&chunk).is_empty());
        }
        assert!(p.too_long());
        let events = p.feed(b"\n\ndata: next\n\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data.len(), MAX_LINE - "data: ".len());
        assert_eq!(events[1], ev(None, "next"));
    }

    #[test]
    fn long_data_over_many_lines_is_cut_and_said() {
        let mut p = Parser::new();
        let line = format!("data: {}\n", "y".repeat(1 << 20));
        for _ in 0..9 {
            assert!(p.feed(line.as_bytes()).is_empty());
        }
        assert!(p.too_long());
        let events = p.feed(b"\n");
        assert_eq!(events.len(), 1);
        assert!(events[0].data.len() <= MAX_LINE);
    }

    #[test]
    fn within_bounds_is_not_too_long() {
        let mut p = Parser::new();
        let big = format!("data: {}\n\n", "z".repeat(MAX_LINE - "data: ".len()));
        let events = p.feed(big.as_bytes());
        assert!(!p.too_long());
        assert_eq!(events[0].data.len(), MAX_LINE - "data: ".len());
    }
}
