//! The closed list of error codes every flow reports, and the error value that
//! carries one to Lua, JSON and Rust callers alike.
//!
//! A code is a promise about what went wrong and what the caller can do next;
//! add one only with its meaning here and in the docs.

use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// Why a flow call failed. The wire form is the snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The input is malformed: an unknown field, a wrong type, or a combination
    /// the flow refuses. The message names the field.
    InvalidInput,
    /// The path does not exist; the error names the nearest existing folder.
    NotFound,
    /// The path exists but is not a regular file.
    NotAFile,
    /// The path exists but is not a directory.
    NotADirectory,
    /// A file flow was pointed at a directory.
    IsDirectory,
    /// The file holds a NUL byte or invalid UTF-8.
    BinaryFile,
    /// A line offset or range lies past the end of the file.
    OffsetOutOfRange,
    /// A glob or regular expression does not parse.
    InvalidPattern,
    /// An anchor or expectation does not match the file, or the file is busy.
    NoMatch,
    /// The policy or the ceiling refused a capability.
    PermissionDenied,
    /// The policy asked for approval and nobody could answer.
    PermissionRequired,
    /// A sandboxed command read outside the reads it declared.
    OutsideDeclaredReads,
    /// A sandboxed command wrote outside the writes it declared.
    OutsideDeclaredWrites,
    /// A container-routed call reached outside its container.
    OutsideContainer,
    /// An operation the flow needed failed (a process, a filesystem call).
    CommandFailed,
    /// A network request failed before a response arrived.
    RequestFailed,
    /// The call ran past its time limit.
    Timeout,
    /// The remote side asked us to slow down.
    RateLimited,
    /// A provider the flow needs (search, versioned host) is not configured.
    ProviderUnavailable,
    /// The request is well formed but this host cannot do it.
    Unsupported,
    /// The response's content type is not one the flow can render.
    UnsupportedContentType,
    /// A file or response is larger than the flow's limit.
    ResponseTooLarge,
    /// A replayed call differs from the recorded one.
    ReplayDiverged,
}

impl ErrorCode {
    /// Every code, in the order of DESIGN.md.
    pub const ALL: [ErrorCode; 23] = [
        ErrorCode::InvalidInput,
        ErrorCode::NotFound,
        ErrorCode::NotAFile,
        ErrorCode::NotADirectory,
        ErrorCode::IsDirectory,
        ErrorCode::BinaryFile,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::InvalidPattern,
        ErrorCode::NoMatch,
        ErrorCode::PermissionDenied,
        ErrorCode::PermissionRequired,
        ErrorCode::OutsideDeclaredReads,
        ErrorCode::OutsideDeclaredWrites,
        ErrorCode::OutsideContainer,
        ErrorCode::CommandFailed,
        ErrorCode::RequestFailed,
        ErrorCode::Timeout,
        ErrorCode::RateLimited,
        ErrorCode::ProviderUnavailable,
        ErrorCode::Unsupported,
        ErrorCode::UnsupportedContentType,
        ErrorCode::ResponseTooLarge,
        ErrorCode::ReplayDiverged,
    ];

    /// The wire name, as Lua and JSON callers see it in `err.code`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotFound => "not_found",
            ErrorCode::NotAFile => "not_a_file",
            ErrorCode::NotADirectory => "not_a_directory",
            ErrorCode::IsDirectory => "is_directory",
            ErrorCode::BinaryFile => "binary_file",
            ErrorCode::OffsetOutOfRange => "offset_out_of_range",
            ErrorCode::InvalidPattern => "invalid_pattern",
            ErrorCode::NoMatch => "no_match",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::PermissionRequired => "permission_required",
            ErrorCode::OutsideDeclaredReads => "outside_declared_reads",
            ErrorCode::OutsideDeclaredWrites => "outside_declared_writes",
            ErrorCode::OutsideContainer => "outside_container",
            ErrorCode::CommandFailed => "command_failed",
            ErrorCode::RequestFailed => "request_failed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ProviderUnavailable => "provider_unavailable",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::UnsupportedContentType => "unsupported_content_type",
            ErrorCode::ResponseTooLarge => "response_too_large",
            ErrorCode::ReplayDiverged => "replay_diverged",
        }
    }
}

impl ErrorCode {
    /// The code whose wire name is `name` (a recorded error read back).
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flow's expected failure: a code, a message that tells the caller what to
/// do next, and structured details (the field, the nearest region, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowError {
    /// One of the closed list of codes a script can branch on.
    pub code: ErrorCode,
    /// What went wrong and what to do next, for a person.
    pub message: String,
    /// Structured facts about the failure (`field`, `path`, `capability`,
    /// `nearest`, ...), flattened beside `code` and `message` in JSON.
    pub details: Map<String, Value>,
}

impl FlowError {
    /// An error with `code` and `message` and no details yet.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        FlowError {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Adds one detail field; `code` and `message` are reserved.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        debug_assert!(
            key != "code" && key != "message",
            "reserved error field {key}"
        );
        self.details.insert(key.to_string(), value.into());
        self
    }

    /// `invalid_input` naming the input `field` at fault.
    pub fn invalid_input(field: &str, message: impl Into<String>) -> Self {
        FlowError::new(ErrorCode::InvalidInput, message).with("field", field)
    }

    /// The error as one JSON object: `{code, message, ...details}`.
    pub fn to_json(&self) -> Value {
        let mut map = self.details.clone();
        map.insert("code".into(), Value::from(self.code.as_str()));
        map.insert("message".into(), Value::from(self.message.clone()));
        Value::Object(map)
    }
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for FlowError {}

/// What a flow call returns: its output, or its expected failure.
pub type FlowResult<T> = Result<T, FlowError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_match_serde_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let via_serde = serde_json::to_value(code).unwrap();
            assert_eq!(via_serde, Value::from(code.as_str()));
            assert!(seen.insert(code.as_str()), "duplicate {code}");
        }
        assert_eq!(seen.len(), 23);
    }

    #[test]
    fn display_is_code_colon_message() {
        let e = FlowError::new(ErrorCode::NoMatch, "nope").with("line", 3);
        assert_eq!(e.to_string(), "no_match: nope");
        assert_eq!(
            e.to_json(),
            serde_json::json!({"code": "no_match", "message": "nope", "line": 3})
        );
    }
}
