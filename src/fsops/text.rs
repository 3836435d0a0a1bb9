//! Loading a file as text: the checks every text flow shares (directory,
//! size limit, NUL byte, UTF-8), each with its own error code, on a file
//! [`open_checked`] opened as the policy checked it. [`load_opened`] reads
//! the file whole; [`stream`] makes the same checks a chunk at a time, for a
//! flow that needs to see every byte but keep only a few.

use super::path::{io_error, Target};
use super::MAX_FILE_BYTES;
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read};

/// Bytes [`stream`] reads at a time: enough that the cost of a `read` call
/// vanishes against the scanning, few enough that a chunk stays in the L2
/// cache while the checks and the consumer pass over it. Measured on the
/// 64 MiB benchmark file (BENCHMARKS.md), 256 KiB and 512 KiB tie; 64 KiB
/// is 10% slower and 1 MiB 4%.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// The longest incomplete UTF-8 sequence: a 4-byte character missing its
/// last byte. [`stream_from`] carries at most this many bytes into the next
/// chunk.
const UTF8_CARRY: usize = 3;

/// A text file as loaded: its contents and the metadata they were read with.
pub struct TextFile {
    pub text: String,
    pub meta: Metadata,
}

/// Reads `target` whole, refusing what is not a regular UTF-8 text file no
/// larger than [`MAX_FILE_BYTES`]. (The flows reach files through
/// `flows::files`, which opens first and weighs the size, then calls
/// [`load_opened`]; the worked example flow calls this.)
#[cfg(test)]
pub fn load(target: &Target) -> FlowResult<TextFile> {
    let (file, meta) = open_checked(target)?;
    load_opened(target, file, meta)
}

/// Reads a file [`open_checked`] opened whole, refusing what is not UTF-8
/// text no larger than [`MAX_FILE_BYTES`].
pub fn load_opened(target: &Target, file: File, meta: Metadata) -> FlowResult<TextFile> {
    // Sized from the fstat above; `take` bounds a file that grows meanwhile
    // (and skips std's second size probe).
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    (&file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(target, "read", e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(target, bytes.len() as u64));
    }
    let text = decode(target, bytes)?;
    Ok(TextFile { text, meta })
}

/// Passes a file [`open_checked`] opened through `consume` a chunk at a
/// time, refusing what [`load_opened`] refuses with the same errors, without
/// ever holding the file: a flow that only keeps a page of a 64 MiB file
/// then neither allocates 64 MiB nor pays for faulting it in.
///
/// `consume` sees the file's bytes in order, each once, until a NUL byte or
/// invalid UTF-8 turns up; it is not called after that, and the call ends in
/// the error. The errors rank as in [`load_opened`]: the size limit first (a
/// file may grow past it while it is read), then a NUL byte anywhere, then
/// the first invalid UTF-8, each at its byte offset in the whole file.
pub fn stream(
    target: &Target,
    file: File,
    meta: Metadata,
    consume: impl FnMut(&[u8]),
) -> FlowResult<()> {
    // A file smaller than a chunk gets a buffer its size, plus the byte that
    // shows it ended (as `load` sizes its buffer), not a whole chunk.
    let chunk = (meta.len() + 1).min(CHUNK_BYTES as u64) as usize;
    stream_from(target, (&file).take(MAX_FILE_BYTES + 1), chunk, consume)
}

/// The loop of [`stream`] over any reader, `chunk` bytes at a time. Unit
/// tests run it over bytes in memory with tiny chunks, to pin what happens
/// where a chunk ends.
pub(crate) fn stream_from(
    target: &Target,
    mut reader: impl Read,
    chunk: usize,
    mut consume: impl FnMut(&[u8]),
) -> FlowResult<()> {
    // A UTF-8 sequence cut by the end of a chunk can only be checked whole:
    // its bytes move to the front of the buffer and the next read lands
    // after them, so the front `carried` bytes are the previous chunk's tail.
    // (At least one byte of room: a read into none would look like the end.)
    let mut buf = vec![0u8; UTF8_CARRY + chunk.max(1)];
    let mut carried = 0;
    // Bytes read so far: the file's length, at the end.
    let mut len: u64 = 0;
    let mut nul = None;
    let mut invalid = None;
    loop {
        let n = match reader.read(&mut buf[carried..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(target, "read", e)),
        };
        let at = len;
        len += n as u64;
        // After a NUL byte only the size limit can change the answer, and it
        // is known only at the end: read on, look no further.
        if nul.is_some() {
            continue;
        }
        let fresh = &buf[carried..carried + n];
        if let Some(i) = memchr::memchr(0, fresh) {
            nul = Some(at + i as u64);
            continue;
        }
        // After invalid UTF-8, only a later NUL byte changes the answer.
        if invalid.is_some() {
            continue;
        }
        let held = &buf[..carried + n];
        match std::str::from_utf8(held) {
            Ok(_) => {
                consume(fresh);
                carried = 0;
            }
            Err(e) if e.error_len().is_none() => {
                // Valid so far, ending in the start of a character.
                consume(fresh);
                let tail = e.valid_up_to();
                carried = held.len() - tail;
                buf.copy_within(tail..tail + carried, 0);
            }
            Err(e) => invalid = Some(at - carried as u64 + e.valid_up_to() as u64),
        }
    }
    if len > MAX_FILE_BYTES {
        return Err(too_large(target, len));
    }
    if let Some(offset) = nul {
        return Err(binary(target, "a NUL byte", offset));
    }
    if let Some(offset) = invalid {
        return Err(binary(target, "invalid UTF-8", offset));
    }
    // A file that ends inside a character is invalid where that character
    // starts.
    if carried > 0 {
        return Err(binary(target, "invalid UTF-8", len - carried as u64));
    }
    Ok(())
}

pub(crate) fn too_large(target: &Target, len: u64) -> FlowError {
    FlowError::new(
        ErrorCode::ResponseTooLarge,
        format!(
            "{} is {len} bytes, over the {MAX_FILE_BYTES} byte limit for text files; use grep to find the lines you need.",
            target.shown.display(),
        ),
    )
    .with("path", target.shown.display().to_string())
    .with("bytes", len)
    .with("limit", MAX_FILE_BYTES)
}

/// Opens `target` as the policy checked it (no link followed: see
/// [`super::checked`]) and refuses, before reading a byte, what is not a
/// regular file or is over [`MAX_FILE_BYTES`] by its size now.
pub fn open_checked(target: &Target) -> FlowResult<(File, Metadata)> {
    checked_file(target, open(target)?)
}

/// The checks of [`open_checked`] on `file`, opened for `target` some other
/// way (in a folder a call holds).
pub fn checked_file(target: &Target, file: File) -> FlowResult<(File, Metadata)> {
    let meta = file.metadata().map_err(|e| io_error(target, "read", e))?;
    if target.names_folder && !meta.is_dir() {
        return Err(super::path::not_a_folder(target));
    }
    check_regular(target, &meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(target, meta.len()));
    }
    Ok((file, meta))
}

/// Opens without blocking, so a FIFO is refused as `not_a_file` instead of
/// hanging the call until some writer appears. A socket cannot be opened
/// at all (ENXIO): it is `not_a_file` too, as `write` says of it.
fn open(target: &Target) -> FlowResult<File> {
    super::checked::open_read(&target.real).map_err(|e| {
        if e.raw_os_error() == Some(nix::libc::ENXIO) {
            if let Err(not_a_file) = check_kind(target, false, false) {
                return not_a_file;
            }
        }
        io_error(target, "read", e)
    })
}

/// `is_directory` for a directory, `not_a_file` for anything else irregular.
pub fn check_regular(target: &Target, meta: &Metadata) -> FlowResult<()> {
    check_kind(target, meta.is_dir(), meta.is_file())
}

/// [`check_regular`] from what a path is, wherever it was looked at (the
/// host's metadata, a container's `stat`).
pub fn check_kind(target: &Target, is_dir: bool, is_file: bool) -> FlowResult<()> {
    if is_dir {
        return Err(FlowError::new(
            ErrorCode::IsDirectory,
            format!(
                "{} is a directory; list it with ls, or name a file inside it.",
                target.shown.display()
            ),
        )
        .with("path", target.shown.display().to_string()));
    }
    if !is_file {
        return Err(FlowError::new(
            ErrorCode::NotAFile,
            format!(
                "{} is not a regular file (a device, socket or pipe); file flows only handle regular files.",
                target.shown.display()
            ),
        )
        .with("path", target.shown.display().to_string()));
    }
    Ok(())
}

/// `bytes` as a `String`, unless they hold a NUL byte or invalid UTF-8.
pub(crate) fn decode(target: &Target, bytes: Vec<u8>) -> FlowResult<String> {
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(binary(target, "a NUL byte", at as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        binary(target, "invalid UTF-8", at as u64)
    })
}

/// `binary_file`: the file holds `what` at byte `offset`.
fn binary(target: &Target, what: &str, offset: u64) -> FlowError {
    FlowError::new(
        ErrorCode::BinaryFile,
        format!(
            "{} holds {what} at byte {offset}: it is a binary file, and text flows only handle UTF-8 text.",
            target.shown.display()
        ),
    )
    .with("path", target.shown.display().to_string())
    .with("offset", offset)
}

/// Unicode's format characters (category Cf): they print as nothing, and
/// the bidirectional ones reorder the text around them.
pub fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
        | '\u{890}'..='\u{891}' | '\u{8e2}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{110bd}' | '\u{110cd}'
        | '\u{13430}'..='\u{1343f}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0001}' | '\u{e0020}'..='\u{e007f}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn t() -> Target {
        Target::at("/w/f")
    }

    /// A file that grows past the limit while it is streamed is refused by
    /// its size, as `load` refuses it, even after a NUL byte.
    #[test]
    fn a_file_grown_past_the_limit_is_too_large_whatever_it_holds() {
        for start in [&b"text\n"[..], b"a\0b"] {
            let grown = start.chain(io::repeat(b'a')).take(MAX_FILE_BYTES + 1);
            let e = stream_from(&t(), grown, CHUNK_BYTES, |_| {}).unwrap_err();
            assert_eq!(e.code, ErrorCode::ResponseTooLarge);
            assert_eq!(e.details["bytes"], MAX_FILE_BYTES + 1);
        }
    }

    /// A read interrupted by a signal is retried, as `read_to_end` does.
    #[test]
    fn an_interrupted_read_is_retried() {
        struct Flaky<'a>(&'a [u8], bool);
        impl io::Read for Flaky<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.1 = !self.1;
                if self.1 {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.0.read(buf)
            }
        }
        let mut seen = Vec::new();
        stream_from(&t(), Flaky("é\n😀".as_bytes(), false), 1, |part| {
            seen.extend_from_slice(part)
        })
        .unwrap();
        assert_eq!(seen, "é\n😀".as_bytes());
    }
}
