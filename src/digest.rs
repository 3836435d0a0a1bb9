//! Content hashes: the one SHA-256 the record, the kernel and the sandbox
//! use, as lowercase hex.

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`, as lowercase hex: for files (scripts, policies),
/// outputs stored capped, and names derived from a path.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}
