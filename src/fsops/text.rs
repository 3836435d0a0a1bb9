//! Loading a file as text: the checks every text flow shares (directory,
//! size limit, NUL byte, UTF-8), each with its own error code.

use super::path::{io_error, Target};
use super::MAX_FILE_BYTES;
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// A text file as loaded: its contents and the metadata they were read with.
pub struct TextFile {
    pub text: String,
    pub meta: Metadata,
}

/// Reads `target` whole, refusing what is not a regular UTF-8 text file no
/// larger than [`MAX_FILE_BYTES`].
pub fn load(target: &Target) -> FlowResult<TextFile> {
    let file = open(target)?;
    let meta = file.metadata().map_err(|e| io_error(target, "read", e))?;
    check_regular(target, &meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(target, meta.len()));
    }
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

fn too_large(target: &Target, len: u64) -> FlowError {
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

/// Opens without blocking, so a FIFO is refused as `not_a_file` instead of
/// hanging the call until some writer appears.
fn open(target: &Target) -> FlowResult<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&target.real)
        .map_err(|e| io_error(target, "read", e))
}

/// `is_directory` for a directory, `not_a_file` for anything else irregular.
pub fn check_regular(target: &Target, meta: &Metadata) -> FlowResult<()> {
    if meta.is_dir() {
        return Err(FlowError::new(
            ErrorCode::IsDirectory,
            format!(
                "{} is a directory; list it with ls, or name a file inside it.",
                target.shown.display()
            ),
        )
        .with("path", target.shown.display().to_string()));
    }
    if !meta.is_file() {
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

fn decode(target: &Target, bytes: Vec<u8>) -> FlowResult<String> {
    let binary = |what: String, offset: usize| {
        FlowError::new(
            ErrorCode::BinaryFile,
            format!(
                "{} holds {what} at byte {offset}: it is a binary file, and text flows only handle UTF-8 text.",
                target.shown.display()
            ),
        )
        .with("path", target.shown.display().to_string())
        .with("offset", offset)
    };
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(binary("a NUL byte".into(), at));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        binary("invalid UTF-8".into(), at)
    })
}
