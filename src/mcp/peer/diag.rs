//! The kernel's own answer to "which socket is the other end of this
//! connection": sock_diag (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY`)
//! asked for the one TCP socket whose local end is the peer's address and
//! port and whose remote end is the server's. The kernel looks it up by
//! that whole 4-tuple in this network namespace's tables, as it finds the
//! socket an arriving packet belongs to: one socket or none, read at one
//! moment. (`/proc/net/tcp` is a text dump read in pieces while sockets
//! come and go, and two sockets of one connection share its two ports.)

use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

/// `SOCK_DIAG_BY_FAMILY`, the request and its answer's message type.
const BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
/// `TCP_LISTEN`: a lookup that finds no connection may fall back to a
/// listener bound to the same address and port, which is not the peer.
const LISTEN: u8 = 10;
/// The netlink header, then `inet_diag_req_v2` (its `inet_diag_sockid`
/// is 48 bytes).
const REQUEST_LEN: usize = 16 + 8 + 48;

/// The socket whose local end is `mine` and whose remote end is `theirs`,
/// by its inode (0: no process holds it open any more: closed, or in
/// `TIME_WAIT`); `None` when this network namespace has no such
/// connection. `Err` says why the kernel could not be asked.
pub fn socket_of(mine: SocketAddr, theirs: SocketAddr) -> Result<Option<u64>, String> {
    let (mine, theirs) = (canonical(mine), canonical(theirs));
    let family = match (mine.ip(), theirs.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => nix::libc::AF_INET,
        _ => nix::libc::AF_INET6,
    } as u8;
    let fd = socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .map_err(|e| format!("sock_diag: {e}"))?;
    // The kernel answers while the request is sent; the bound only keeps a
    // kernel that never answers from holding the connection's check.
    let bound = nix::sys::time::TimeVal::new(2, 0);
    socket::setsockopt(&fd, socket::sockopt::ReceiveTimeout, &bound)
        .map_err(|e| format!("sock_diag: {e}"))?;
    let request = request(family, mine, theirs);
    socket::send(fd.as_raw_fd(), &request, MsgFlags::empty())
        .map_err(|e| format!("sock_diag: sending the request: {e}"))?;
    let mut answer = vec![0u8; 8192];
    let n = socket::recv(fd.as_raw_fd(), &mut answer, MsgFlags::empty())
        .map_err(|e| format!("sock_diag: reading the answer: {e}"))?;
    answer.truncate(n);
    read_answer(&answer, mine, theirs)
}

/// An IPv4 address an IPv6 socket carries (`::ffff:a.b.c.d`) as itself:
/// the kernel hashes such connections with IPv4's.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The request: the netlink header, then `inet_diag_req_v2` naming the
/// socket by its whole 4-tuple, any interface, no cookie.
fn request(family: u8, mine: SocketAddr, theirs: SocketAddr) -> Vec<u8> {
    let mut r = Vec::with_capacity(REQUEST_LEN);
    r.extend((REQUEST_LEN as u32).to_ne_bytes());
    r.extend(BY_FAMILY.to_ne_bytes());
    r.extend(NLM_F_REQUEST.to_ne_bytes());
    r.extend(1u32.to_ne_bytes()); // sequence
    r.extend(0u32.to_ne_bytes()); // the kernel fills the sender's port id
    r.extend([family, nix::libc::IPPROTO_TCP as u8, 0, 0]);
    r.extend(u32::MAX.to_ne_bytes()); // every state
    r.extend(mine.port().to_be_bytes());
    r.extend(theirs.port().to_be_bytes());
    r.extend(address(mine.ip()));
    r.extend(address(theirs.ip()));
    r.extend(0u32.to_ne_bytes()); // any interface
    r.extend([0xff; 8]); // INET_DIAG_NOCOOKIE
    r
}

/// An address as `inet_diag_sockid` carries it: 16 bytes, an IPv4 one in
/// the first 4.
fn address(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

/// The inode of the socket the answer describes, when it is the one asked
/// for (a listener, or any other socket, is not).
fn read_answer(answer: &[u8], mine: SocketAddr, theirs: SocketAddr) -> Result<Option<u64>, String> {
    let u16_at = |at: usize| {
        answer
            .get(at..at + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        answer
            .get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    match u16_at(4) {
        Some(NLMSG_ERROR) => {
            let errno = u32_at(16).map_or(0, |e| -(e as i32));
            match errno {
                0 | nix::libc::ENOENT => Ok(None),
                e => Err(format!("sock_diag: {}", nix::errno::Errno::from_raw(e))),
            }
        }
        Some(NLMSG_DONE) => Ok(None),
        Some(BY_FAMILY) => {
            // inet_diag_msg: family, state, timer, retrans, the sockid
            // (ports, addresses, interface, cookie), expires, the queues,
            // uid, inode.
            let body = answer.get(16..16 + 72).ok_or("sock_diag: a short answer")?;
            let (family, state) = (body[0], body[1]);
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            let ip = |at: usize| -> IpAddr {
                let bytes: [u8; 16] = body[at..at + 16].try_into().expect("16 bytes");
                match family as i32 {
                    nix::libc::AF_INET => IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]]),
                    _ => IpAddr::V6(Ipv6Addr::from(bytes)).to_canonical(),
                }
            };
            let found = (
                SocketAddr::new(ip(8), port(4)),
                SocketAddr::new(ip(24), port(6)),
            );
            if state == LISTEN || found != (mine, theirs) {
                return Ok(None);
            }
            let inode = u32::from_ne_bytes(body[68..72].try_into().expect("4 bytes"));
            Ok(Some(u64::from(inode)))
        }
        other => Err(format!("sock_diag: an answer of type {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::socket_of;
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::MetadataExt;

    /// The inode of `stream`'s socket, as `/proc/PID/fd` names it.
    fn inode(stream: &TcpStream) -> u64 {
        use std::os::fd::AsRawFd;
        std::fs::metadata(format!("/proc/self/fd/{}", stream.as_raw_fd()))
            .unwrap()
            .ino()
    }

    #[test]
    fn the_kernel_names_the_socket_at_the_other_end_and_not_the_servers_own() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        // A client bound to the server's own port on another loopback
        // address: both sockets of the connection have the same two ports.
        let client = nix_bound_connect(&format!("127.0.0.2:{}", server.port()), server);
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer.port(), server.port());
        assert_eq!(socket_of(peer, server), Ok(Some(inode(&client))));
        // Asked the other way round, it is the server's accepted socket.
        assert_eq!(socket_of(server, peer), Ok(Some(inode(&accepted))));
        // No such connection: none, not the listener on the same port.
        let nobody = "127.0.0.3:9".parse().unwrap();
        assert_eq!(socket_of(nobody, server), Ok(None));
    }

    #[test]
    fn a_socket_closed_before_the_lookup_is_held_by_nobody() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        drop(client);
        // FIN_WAIT2 (the server has not closed its end): still in the
        // tables, and no file stands for it.
        assert_eq!(socket_of(peer, server), Ok(Some(0)));
    }

    /// A stream connected to `to` from `from`, bound with SO_REUSEADDR (as
    /// the attack binds the server's port on another address).
    fn nix_bound_connect(from: &str, to: std::net::SocketAddr) -> TcpStream {
        use nix::sys::socket::{self as s, AddressFamily, SockFlag, SockType, SockaddrIn};
        let fd = s::socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .unwrap();
        s::setsockopt(&fd, s::sockopt::ReuseAddr, &true).unwrap();
        let from: std::net::SocketAddrV4 = from.parse().unwrap();
        s::bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &SockaddrIn::from(from),
        )
        .unwrap();
        let std::net::SocketAddr::V4(to) = to else {
            unreachable!()
        };
        s::connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(to)).unwrap();
        TcpStream::from(fd)
    }
}
