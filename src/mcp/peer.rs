//! Whether an HTTP connection comes from a process of the run itself: a
//! command the run started (or anything it started) that reached the
//! server over loopback. Such a caller must not call the run's tools nor
//! answer its questions, whatever token it found.
//!
//! The connection's other end is found in `/proc/net/tcp` and `tcp6` (by
//! its two ports), its socket's inode in the open files of this process's
//! descendants. A process that left this process's tree (under landlock, a
//! double fork reparents it to init) is not found; under bubblewrap every
//! process a command starts stays in the sandbox's PID namespace, whose
//! first process is this one's descendant.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

/// The pid of a descendant of this process holding the other end of the
/// connection from `peer` to `local`, when one does.
pub fn of_the_run(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !peer.ip().is_loopback() && peer.ip() != local.ip() {
        return None;
    }
    let inode = socket_inode(peer.port(), local.port())?;
    let wanted = format!("socket:[{inode}]");
    descendants(std::process::id())
        .into_iter()
        .find(|pid| holds(*pid, &wanted))
}

/// The inode of the socket whose own port is `port` and whose peer's is
/// `to`, in this network namespace's TCP tables.
fn socket_inode(port: u16, to: u16) -> Option<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let text = std::fs::read_to_string(table).ok()?;
            text.lines().skip(1).find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let ports = (port_of(f.get(1)?)?, port_of(f.get(2)?)?);
                (ports == (port, to)).then(|| f.get(9)?.parse().ok())?
            })
        })
}

/// The port of an `ADDR:PORT` field of a TCP table (hexadecimal).
fn port_of(field: &str) -> Option<u16> {
    u16::from_str_radix(field.rsplit(':').next()?, 16).ok()
}

/// Every process below `root`, by the parent each names in its `stat`.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in pids() {
        if let Some(parent) = parent_of(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let (mut found, mut seen, mut next) = (Vec::new(), HashSet::new(), vec![root]);
    while let Some(p) = next.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if seen.insert(c) {
                found.push(c);
                next.push(c);
            }
        }
    }
    found
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The parent `pid`'s `stat` names (the field after the state, which
/// follows the last `)` of the command's name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` has `socket` (`socket:[INODE]`) open.
fn holds(pid: u32, socket: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == socket))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_holding_a_loopback_connection_is_found_and_this_process_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // A child of this process connects, and keeps the connection open.
        let script = format!(
            "import socket,time; s=socket.create_connection(('127.0.0.1',{})); print(s.getsockname()[1], flush=True); time.sleep(30)",
            local.port()
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let (_conn, peer) = listener.accept().unwrap();
        let found = of_the_run(peer, local);
        // The control: this process's own connection is no descendant's.
        let own = std::net::TcpStream::connect(local).unwrap();
        let (_c2, own_peer) = listener.accept().unwrap();
        assert_eq!(own_peer, own.local_addr().unwrap());
        let mine = of_the_run(own_peer, local);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Some(child.id()));
        assert_eq!(mine, None);
    }
}
