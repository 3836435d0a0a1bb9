//! The words sluice and a shared sandbox's helper exchange over their
//! socket (a Unix stream socket pair), with the file descriptors some of
//! them carry.
//!
//! # Grammar
//!
//! ```text
//! frame   = length:u32 kind:u8 fds:u8 id:u64 body    (little-endian; length counts what follows it)
//! command = 'C' fds=3+n id list(argv) list(env "K=V") list(cwd) list(rlimits)
//!                                                               sluice -> helper: stdin, stdout, stderr, then the
//!                                                               file each cgroup the command joins is joined through (n <= 2);
//!                                                               rlimits: none, or one item (exec::resources::ChildStep)
//! ready   = 'R' fds=1 id=0 apart:u8                             helper -> sluice, once, when it serves: its pidfd; 1 when commands are kept apart
//! started = 'S' fds=1 id  pid:i32                                the command runs: its pidfd
//! failed  = 'F' fds=0 id  errno:i32 stage:u8                     it could not be executed (0), its folder entered (1),
//!                                                               its cgroups joined or rlimits set (2)
//! ack     = 'A' fds=0 id                                         sluice -> helper: the pid is known
//! exited  = 'X' fds=0 id  status:i32 over:u8                    its raw wait status; 1 when nothing of its session is left
//! connect = 'N' fds=0 id  address                               sluice -> helper: open a TCP connection inside to a loopback address
//! connected = 'N' fds=0|1 id errno:i32                          helper -> sluice: the socket (errno 0), connecting or connected; else why not
//! address = family:u8 (4: ip:4 bytes, 6: ip:16 bytes) port:u16
//! list    = count:u32 (len:u32 bytes)*
//! ```
//!
//! The helper reaps a command only once sluice acknowledged its start: until
//! then its pid (which sluice learns from the pidfd, and which is also its
//! session's id) cannot be reused, even if it has already exited.
//!
//! The descriptors of a frame travel with its first bytes; a stream socket
//! never joins the bytes of two sends that carry descriptors, so a reader
//! queues descriptors in arrival order and each frame takes the number it
//! declares.

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The header's size after the length: kind, fds, id.
const HEADER: usize = 1 + 1 + 8;

/// A frame larger than this is a broken peer, not a command (argv and
/// environment together are bounded by the kernel's own exec limit).
const MAX_FRAME: usize = 64 << 20;

/// The largest body a frame carries.
pub const MAX_BODY: usize = MAX_FRAME - HEADER;

/// One frame, its descriptors taken.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub id: u64,
    pub body: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Sends one frame with `fds` (all of them, or none, on failure).
pub fn send(sock: RawFd, kind: u8, id: u64, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let length = (HEADER + body.len()) as u32;
    let mut head = Vec::with_capacity(4 + HEADER);
    head.extend_from_slice(&length.to_le_bytes());
    head.push(kind);
    head.push(fds.len() as u8);
    head.extend_from_slice(&id.to_le_bytes());
    let whole = [head.as_slice(), body].concat();
    let rights = [ControlMessage::ScmRights(fds)];
    let control: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    let mut sent = sendmsg::<()>(
        sock,
        &[IoSlice::new(&whole)],
        control,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    while sent < whole.len() {
        sent += sendmsg::<()>(
            sock,
            &[IoSlice::new(&whole[sent..])],
            &[],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
    }
    Ok(())
}

/// The reading end: bytes and descriptors received and not yet framed.
pub struct Reader {
    sock: RawFd,
    bytes: Vec<u8>,
    fds: VecDeque<OwnedFd>,
    /// What one receive lands in, made once.
    buf: Box<[u8]>,
}

impl Reader {
    pub fn new(sock: RawFd) -> Reader {
        Reader {
            sock,
            bytes: Vec::new(),
            fds: VecDeque::new(),
            buf: vec![0u8; 64 << 10].into_boxed_slice(),
        }
    }

    /// The next whole frame already received, if any.
    pub fn take(&mut self) -> io::Result<Option<Frame>> {
        if self.bytes.len() < 4 {
            return Ok(None);
        }
        let length = u32::from_le_bytes(self.bytes[..4].try_into().expect("4 bytes")) as usize;
        if !(HEADER..=MAX_FRAME).contains(&length) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {length} bytes"),
            ));
        }
        if self.bytes.len() < 4 + length {
            return Ok(None);
        }
        let frame: Vec<u8> = self.bytes.drain(..4 + length).skip(4).collect();
        let count = frame[1] as usize;
        if self.fds.len() < count {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a frame without its descriptors",
            ));
        }
        Ok(Some(Frame {
            kind: frame[0],
            id: u64::from_le_bytes(frame[2..10].try_into().expect("8 bytes")),
            body: frame[HEADER..].to_vec(),
            fds: self.fds.drain(..count).collect(),
        }))
    }

    /// Receives once (blocking); false at end of stream. Descriptors
    /// arrive close-on-exec.
    pub fn fill(&mut self) -> io::Result<bool> {
        let buf = &mut self.buf;
        let mut space = nix::cmsg_space!([RawFd; 8]);
        let (n, fds) = {
            let mut iov = [IoSliceMut::new(buf)];
            let msg = recvmsg::<()>(
                self.sock,
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )?;
            let mut fds = Vec::new();
            for c in msg.cmsgs()? {
                if let ControlMessageOwned::ScmRights(got) = c {
                    fds.extend(got);
                }
            }
            (msg.bytes, fds)
        };
        // SAFETY: the kernel just installed these descriptors for us.
        self.fds.extend(
            fds.into_iter()
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
        );
        self.bytes.extend_from_slice(&self.buf[..n]);
        Ok(n > 0)
    }

    /// The next frame, receiving until one is whole; `None` at end of
    /// stream.
    pub fn next(&mut self) -> io::Result<Option<Frame>> {
        loop {
            if let Some(frame) = self.take()? {
                return Ok(Some(frame));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }
}

/// `addr` as an `address`.
pub fn address(addr: std::net::SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(19);
    match addr.ip() {
        std::net::IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_le_bytes());
    out
}

/// The `address` `body` holds, if it is one.
pub fn read_address(body: &[u8]) -> Option<std::net::SocketAddr> {
    let (ip, rest): (std::net::IpAddr, &[u8]) = match body.split_first()? {
        (4, rest) if rest.len() == 6 => {
            let octets: [u8; 4] = rest[..4].try_into().ok()?;
            (octets.into(), &rest[4..])
        }
        (6, rest) if rest.len() == 18 => {
            let octets: [u8; 16] = rest[..16].try_into().ok()?;
            (octets.into(), &rest[16..])
        }
        _ => return None,
    };
    let port = u16::from_le_bytes(rest.try_into().ok()?);
    Some(std::net::SocketAddr::new(ip, port))
}

/// Appends `items` as a `list`.
pub fn put_list<T: AsRef<[u8]>>(out: &mut Vec<u8>, items: &[T]) {
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for item in items {
        let item = item.as_ref();
        out.extend_from_slice(&(item.len() as u32).to_le_bytes());
        out.extend_from_slice(item);
    }
}

/// Reads a `list` from the front of `input`.
pub fn take_list(input: &mut &[u8]) -> Option<Vec<Vec<u8>>> {
    let count = take_u32(input)? as usize;
    let mut items = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let len = take_u32(input)? as usize;
        if input.len() < len {
            return None;
        }
        let (item, rest) = input.split_at(len);
        items.push(item.to_vec());
        *input = rest;
    }
    Some(items)
}

fn take_u32(input: &mut &[u8]) -> Option<u32> {
    if input.len() < 4 {
        return None;
    }
    let (n, rest) = input.split_at(4);
    *input = rest;
    Some(u32::from_le_bytes(n.try_into().ok()?))
}

/// The body of a frame that carries one number.
pub fn number(n: i32) -> [u8; 4] {
    n.to_le_bytes()
}

/// The number a frame's body carries.
pub fn read_number(body: &[u8]) -> Option<i32> {
    Some(i32::from_le_bytes(body.get(..4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn frames_and_their_descriptors_arrive_in_order_across_partial_reads() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        let big = vec![7u8; 200 << 10];
        let sent = big.clone();
        let writer = std::thread::spawn(move || {
            send(
                a.as_raw_fd(),
                b'C',
                9,
                &sent,
                &[file.as_raw_fd(), file.as_raw_fd()],
            )
            .unwrap();
            send(a.as_raw_fd(), b'X', 10, &number(-3), &[]).unwrap();
            a
        });
        let mut reader = Reader::new(b.as_raw_fd());
        let first = reader.next().unwrap().unwrap();
        assert_eq!(
            (first.kind, first.id, first.body.len(), first.fds.len()),
            (b'C', 9, big.len(), 2)
        );
        let second = reader.next().unwrap().unwrap();
        assert_eq!(
            (second.kind, second.id, read_number(&second.body)),
            (b'X', 10, Some(-3))
        );
        drop(writer.join().unwrap());
        assert!(reader.next().unwrap().is_none());
    }

    #[test]
    fn lists_read_back_and_a_short_list_is_refused() {
        let mut out = Vec::new();
        put_list(&mut out, &[b"sh".as_slice(), b"-c", b""]);
        let mut input = out.as_slice();
        assert_eq!(
            take_list(&mut input).unwrap(),
            vec![b"sh".to_vec(), b"-c".to_vec(), vec![]]
        );
        assert!(input.is_empty());
        let mut cut = &out[..out.len() - 3];
        assert!(take_list(&mut cut).is_none());
    }
}
