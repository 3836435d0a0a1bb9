//! The base protocol's framing: `Content-Length: N\r\n\r\n` then N bytes
//! of JSON. A frame over [`MAX_FRAME`] is refused from its header, before
//! any of its body is read, so a server cannot make sluice hold more than
//! that for one message.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame sluice reads: 8 MiB.
pub const MAX_FRAME: usize = 8 << 20;

/// The most header bytes one frame may have.
const MAX_HEADER: usize = 8 << 10;

/// Why no frame could be read.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The stream ended (the server closed its output or exited).
    Closed,
    /// A header announced a body over [`MAX_FRAME`].
    TooLarge(u64),
    /// The header was not the base protocol's.
    Malformed(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => f.write_str("the server closed its output"),
            FrameError::TooLarge(n) => write!(
                f,
                "the server sent a frame of {n} bytes, over the {} MiB limit; it was refused unread",
                MAX_FRAME >> 20
            ),
            FrameError::Malformed(why) => write!(f, "the server broke the protocol's framing: {why}"),
        }
    }
}

/// Reads one frame's body.
pub async fn read<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Vec<u8>, FrameError> {
    let mut length: Option<u64> = None;
    let mut seen = 0usize;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut *r)
            .take((MAX_HEADER - seen + 1) as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| FrameError::Malformed(e.to_string()))?;
        if n == 0 {
            return Err(FrameError::Closed);
        }
        seen += n;
        if seen > MAX_HEADER || !line.ends_with(b"\n") {
            return Err(FrameError::Malformed(format!(
                "a header over {MAX_HEADER} bytes"
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(FrameError::Malformed(format!("header line {text:?}")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n = value
                .trim()
                .parse::<u64>()
                .map_err(|_| FrameError::Malformed(format!("Content-Length {:?}", value.trim())))?;
            length = Some(n);
        }
    }
    let length = length.ok_or_else(|| FrameError::Malformed("no Content-Length".into()))?;
    if length > MAX_FRAME as u64 {
        return Err(FrameError::TooLarge(length));
    }
    let mut body = vec![0u8; length as usize];
    r.read_exact(&mut body)
        .await
        .map_err(|_| FrameError::Closed)?;
    Ok(body)
}

/// Writes `body` as one frame.
pub async fn write<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, body: &[u8]) -> std::io::Result<()> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(bytes: &[u8]) -> Vec<Result<Vec<u8>, FrameError>> {
        let mut r = tokio::io::BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            let f = read(&mut r).await;
            let end = f.is_err();
            out.push(f);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn frames_are_read_one_after_another() {
        let got =
            frames(b"Content-Length: 2\r\n\r\n{}content-length:3\r\nContent-Type: x\r\n\r\n[1]")
                .await;
        assert_eq!(
            got,
            vec![
                Ok(b"{}".to_vec()),
                Ok(b"[1]".to_vec()),
                Err(FrameError::Closed)
            ]
        );
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_from_its_header() {
        let got = frames(b"Content-Length: 104857600\r\n\r\n{").await;
        assert_eq!(got, vec![Err(FrameError::TooLarge(104857600))]);
    }

    #[tokio::test]
    async fn an_endless_header_is_refused() {
        let long = vec![b'x'; MAX_HEADER + 10];
        let got = frames(&long).await;
        assert!(matches!(got[0], Err(FrameError::Malformed(_))), "{got:?}");
    }

    #[tokio::test]
    async fn a_frame_is_written_with_its_length() {
        let mut out = Vec::new();
        write(&mut out, b"{\"a\":1}").await.unwrap();
        assert_eq!(out, b"Content-Length: 7\r\n\r\n{\"a\":1}");
    }
}
