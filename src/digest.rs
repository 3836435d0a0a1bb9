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

/// Whether two secrets (a bearer token) are equal, in time that depends
/// neither on where they differ nor on their lengths: their SHA-256
/// digests are compared whole.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (sha256_hex(a), sha256_hex(b));
    a.bytes()
        .zip(b.bytes())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }
}
