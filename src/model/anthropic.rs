//! The anthropic protocol: request body, JSON reply, stream, error body.

use super::sse::Event;
use super::wire::{OnText, Reply, Request, WireError};
use serde_json::Value;

/// The path under the provider's base URL requests go to.
pub const PATH: &str = "messages";

/// The request body for `req` (`stream` set as `req.stream` says).
pub fn body(_req: &Request) -> Value {
    todo!("anthropic")
}

/// A whole (not streamed) reply.
pub fn reply(_body: &Value) -> Result<Reply, WireError> {
    todo!("anthropic")
}

/// The error an error response's body carries: its type, if given, and its
/// message; `None` when the body is not the protocol's error shape.
pub fn error(_body: &[u8]) -> Option<(Option<String>, String)> {
    todo!("anthropic")
}

/// A streamed reply, folded event by event.
#[derive(Debug, Default)]
pub struct Stream {}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Folds one event in, handing new text to `on_text`; `Ok(true)` once
    /// the stream says it is complete.
    pub fn event(&mut self, _ev: &Event, _on_text: OnText) -> Result<bool, WireError> {
        todo!("anthropic")
    }

    /// The text received so far.
    pub fn text(&self) -> &str {
        todo!("anthropic")
    }

    /// The reply, once the stream is complete.
    pub fn finish(self) -> Result<Reply, WireError> {
        todo!("anthropic")
    }
}
