//! What the side-by-side benches share: timing a whole process, medians of
//! interleaved turns, the words a ratio line ends with, and the text files
//! they read.
#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// Wall time and the peak RSS (KiB) of the direct child; panics unless it
/// exits 0.
pub fn measure(cmd: &mut Command) -> (Duration, i64) {
    let started = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of that plain C struct,
    // and wait4 writes into the two out-pointers we own.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { nix::libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, pid, "wait4 failed");
    assert!(
        nix::libc::WIFEXITED(status) && nix::libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed (status {status})"
    );
    // The Child was reaped by wait4; forget it so its drop does nothing.
    std::mem::forget(child);
    (elapsed, usage.ru_maxrss)
}

/// The middle of the samples (sorts them).
pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Whether a part named `name` runs: every part, unless the bench's
/// arguments name some (a word of the name is enough).
pub fn wanted() -> impl Fn(&str) -> bool {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    move |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()))
}

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// Text of exactly `bytes` bytes in `\n`-ended lines of `line` bytes (the last
/// one shorter when `line` does not divide `bytes`), words varying by line.
pub fn text_file(bytes: usize, line: usize) -> String {
    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    let mut out = String::with_capacity(bytes);
    let mut n = 0usize;
    while out.len() < bytes {
        let len = line.min(bytes - out.len());
        let start = out.len();
        out.push_str(&format!("{n:07}"));
        let mut w = n;
        while out.len() - start < len {
            out.push(' ');
            out.push_str(WORDS[w % WORDS.len()]);
            w = w / 3 + 7;
        }
        out.truncate(start + len - 1);
        out.push('\n');
        n += 1;
    }
    out
}

/// A loopback server answering every request `ok` after `delay`, each on
/// its own thread; its origin.
pub fn slow_server(delay: std::time::Duration) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                std::thread::sleep(delay);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                );
            });
        }
    });
    origin
}

/// The body of the next HTTP/1.1 request `reader` gives (its headers read
/// for `content-length`); `None` once the client closed the connection.
pub fn next_request_body(reader: &mut impl std::io::BufRead) -> Option<Vec<u8>> {
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}
