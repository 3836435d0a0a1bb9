//! Models: the two wire protocols sluice speaks to a model provider (OpenAI
//! Chat Completions, and every server that speaks it; Anthropic Messages),
//! streamed and not, behind one neutral request and reply.
//!
//! - [`wire`]: the neutral types ([`Request`], [`Message`], [`Reply`], ...);
//! - [`sse`]: server-sent events, parsed from bytes as they arrive;
//! - [`openai`] and [`anthropic`]: each protocol's request body, its JSON
//!   reply, its stream of events folded into a [`Reply`], and its error body;
//! - [`providers`]: the operator's providers (the policy's `providers`
//!   table, `sluice run --provider`), their endpoints and credentials;
//! - [`transport`]: one model call through the run's HTTP client (the
//!   destination checks and pinning of `fetch`), with retries and backoff.

pub mod anthropic;
pub mod openai;
pub mod providers;
#[cfg(test)]
mod samples;
pub mod sse;
pub mod transport;
pub mod wire;

pub use providers::{Provider, Providers};
pub use wire::{Message, Request, Role, ToolCall, ToolChoice, ToolDef, Usage};
