//! Server-sent events (the WHATWG `text/event-stream` format), parsed from
//! bytes as they arrive, whatever the chunking.

/// One event: its `event:` name, if any, and its `data:` lines joined by
/// newlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: Option<String>,
    pub data: String,
}

/// Turns a byte stream into events.
#[derive(Debug, Default)]
pub struct Parser {}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    /// The events `bytes` completes.
    pub fn feed(&mut self, _bytes: &[u8]) -> Vec<Event> {
        todo!("sse")
    }

    /// The last event, when the stream ended without its blank line.
    pub fn finish(&mut self) -> Option<Event> {
        todo!("sse")
    }
}
