//! Reaching the network: one HTTP client for every network flow, with
//! destination checks before DNS and transport, pinned connections, sluice's
//! own redirect handling, and the renderers and search providers the flows use.

pub mod client;
pub mod destination;
pub mod dns;
pub mod inside;
pub mod search;

pub use client::{Incoming, Method, Net, Opened, Outgoing};

/// Returned text keeps its first 60,000 bytes.
pub const TEXT_LIMIT: usize = 60_000;

/// Text cut to [`TEXT_LIMIT`] bytes on a character boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clipped {
    pub text: String,
    pub truncated: bool,
    /// Says what was kept of how much, when something was cut.
    pub notice: Option<String>,
}

/// Keeps the head of `text`: a page's start says what it is.
pub fn clip(mut text: String) -> Clipped {
    let total = text.len();
    if total <= TEXT_LIMIT {
        return Clipped {
            text,
            truncated: false,
            notice: None,
        };
    }
    let mut end = TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    Clipped {
        text,
        truncated: true,
        notice: Some(format!(
            "kept the first {end} of {total} bytes; the rest was cut"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_the_head_on_a_character_boundary() {
        let short = clip("abc".into());
        assert_eq!(
            (short.text.as_str(), short.truncated, short.notice),
            ("abc", false, None)
        );
        let exact = clip("x".repeat(TEXT_LIMIT));
        assert!(!exact.truncated);
        let long = clip(format!("{}é{}", "x".repeat(TEXT_LIMIT - 1), "y".repeat(10)));
        assert_eq!(long.text.len(), TEXT_LIMIT - 1);
        assert!(long.truncated);
        assert_eq!(
            long.notice.unwrap(),
            format!(
                "kept the first {} of {} bytes; the rest was cut",
                TEXT_LIMIT - 1,
                TEXT_LIMIT + 11
            )
        );
    }
}
