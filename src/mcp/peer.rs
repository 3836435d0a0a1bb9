//! Whether an HTTP connection comes from a process of the run itself: the
//! server's own process or anything it started (a command of the run, or
//! what that command started) that reached the server over this machine's
//! network. Such a caller must not call the run's tools nor answer its
//! questions, whatever token it found.
//!
//! Every connection is looked up, whatever its address: the kernel names
//! the socket at its other end by the whole 4-tuple (`diag.rs`), and the
//! processes holding that socket open are found in `/proc`; each one
//! found is judged by its ancestry, read afresh. Where nobody can tell,
//! the connection is refused: a peer on one of this machine's addresses
//! whose socket is in no table, a socket no process holds any more (closed
//! before the server looked: what it sent would otherwise be served), a
//! holder no process this server can read is. A process that left this
//! process's tree (under landlock, a double fork reparents it to init) is
//! taken for an outside one, and so is an outside process a process of
//! the run handed the connection to (passing its descriptor) before the
//! server looked; under bubblewrap every process a command starts stays in
//! the sandbox's PID namespace, below this one.

mod diag;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

/// Who holds the other end of a connection to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A process outside the run, or a peer on another machine.
    Outside,
    /// A process of the run: this pid holds it.
    Run(u32),
    /// Nobody can tell, so the connection is refused: why.
    Unknown(String),
}

/// Who holds the other end of the connection from `peer` to `local`.
pub fn of_the_run(peer: SocketAddr, local: SocketAddr) -> Holder {
    let inode = match diag::socket_of(peer, local) {
        Ok(Some(inode)) => inode,
        Ok(None) => {
            return unless_local(
                peer.ip(),
                "its other end is in none of this machine's TCP tables (it closed, or it was \
                 made in another network namespace)",
            )
        }
        Err(why) => {
            return unless_local(
                peer.ip(),
                &format!("the kernel could not be asked which socket is its other end ({why})"),
            )
        }
    };
    if inode == 0 {
        return Holder::Unknown(
            "its other end was closed before the server looked (what it sent would be served \
             with nobody there to check)"
                .into(),
        );
    }
    holder(inode)
}

/// A connection whose other end was not found: outside, unless it came
/// from one of this machine's addresses (then its socket had to be in the
/// tables, and `why` it was not is the refusal).
fn unless_local(peer: IpAddr, why: &str) -> Holder {
    let ip = peer.to_canonical();
    let local = ip.is_loopback()
        || crate::net::destination::LocalAddrs::now().map_or(true, |mine| mine.holds(ip));
    match local {
        true => Holder::Unknown(why.to_string()),
        false => Holder::Outside,
    }
}

/// The first process found holding socket `inode`, judged by its ancestry:
/// this process's own, then those below it (from a snapshot, only to look
/// there first), then every other.
fn holder(inode: u64) -> Holder {
    let me = std::process::id();
    let wanted = format!("socket:[{inode}]");
    let parents = parents();
    let below = descendants(me, &parents);
    let rest = parents.keys().filter(|p| **p != me && !below.contains(p));
    let order = std::iter::once(me)
        .chain(below.iter().copied())
        .chain(rest.copied());
    for pid in order {
        if !holds(pid, &wanted) {
            continue;
        }
        return match ancestry(pid, me) {
            Some(true) => Holder::Run(pid),
            Some(false) => Holder::Outside,
            None => Holder::Unknown(format!(
                "process {pid}, which held its other end, ended while the server looked"
            )),
        };
    }
    Holder::Unknown(
        "no process this server can read holds its other end (it closed, was handed on while the \
         server looked, or belongs to another user)"
            .into(),
    )
}

/// Whether `pid` is `root` or below it, by the parents each process names
/// now; `None` when a process on the way ended (its place in the tree is
/// then not known).
fn ancestry(pid: u32, root: u32) -> Option<bool> {
    let mut at = pid;
    // Deeper than the kernel lets a tree grow would be a loop.
    for _ in 0..4096 {
        if at == root {
            return Some(true);
        }
        if at <= 1 {
            return Some(false);
        }
        at = parent_of(at)?;
    }
    None
}

/// Each process's parent, as its `stat` names it.
fn parents() -> HashMap<u32, u32> {
    pids()
        .into_iter()
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect()
}

/// Every process below `root` in `parents`.
fn descendants(root: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &parent) in parents {
        children.entry(parent).or_default().push(pid);
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
    use std::io::BufRead;

    /// A child of this process that connects to `to` (from `from` when
    /// given, bound with SO_REUSEADDR), says its port once connected, and
    /// keeps the connection open.
    fn child_connecting(to: SocketAddr, from: Option<SocketAddr>) -> std::process::Child {
        let bind = from.map_or(String::new(), |f| {
            format!(
                "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('{}', {}));",
                f.ip(),
                f.port()
            )
        });
        let script = format!(
            "import socket,time; s=socket.socket(); {bind} s.connect(('{}',{})); print(s.getsockname()[1], flush=True); time.sleep(30)",
            to.ip(),
            to.port()
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (apt-get install python3)");
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        child
    }

    #[test]
    fn a_child_holding_a_loopback_connection_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let mut child = child_connecting(local, None);
        let (_conn, peer) = listener.accept().unwrap();
        let found = of_the_run(peer, local);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Holder::Run(child.id()));
    }

    #[test]
    fn a_child_connecting_from_the_servers_own_port_on_another_loopback_address_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let from = SocketAddr::new("127.0.0.2".parse().unwrap(), local.port());
        let mut child = child_connecting(local, Some(from));
        let (_conn, peer) = listener.accept().unwrap();
        assert_eq!(peer, from);
        let found = of_the_run(peer, local);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Holder::Run(child.id()));
    }

    #[test]
    fn a_child_connecting_from_the_machines_own_address_is_found() {
        let Some(own) = crate::net::destination::LocalAddrs::now()
            .unwrap()
            .addrs()
            .iter()
            .copied()
            .find(|a| a.is_ipv4() && !a.is_loopback())
        else {
            panic!("this test needs an IPv4 address besides loopback on this machine (`ip addr`)");
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let mut child = child_connecting(local, Some(SocketAddr::new(own, 0)));
        let (_conn, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), own);
        let found = of_the_run(peer, local);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, Holder::Run(child.id()));
    }

    #[test]
    fn this_process_is_the_runs_and_a_process_outside_its_tree_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // This process connecting to itself (a flow of the run would).
        let own = std::net::TcpStream::connect(local).unwrap();
        let (_c, own_peer) = listener.accept().unwrap();
        assert_eq!(own_peer, own.local_addr().unwrap());
        assert_eq!(of_the_run(own_peer, local), Holder::Run(std::process::id()));
        // A process that left this tree: a double fork reparents the
        // connecting grandchild to init (or the nearest subreaper).
        let script = format!(
            "import os,socket,sys,time\nif os.fork() == 0:\n  if os.fork() == 0:\n    s=socket.create_connection(('127.0.0.1',{}))\n    print(os.getpid(), flush=True)\n    time.sleep(30)\n  os._exit(0)\nos.wait()",
            local.port()
        );
        let mut first = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(first.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        first.wait().unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let (_c2, outside_peer) = listener.accept().unwrap();
        let found = of_the_run(outside_peer, local);
        let holder = match &found {
            Holder::Run(pid) => Some(*pid),
            _ => None,
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(grandchild),
            nix::sys::signal::Signal::SIGKILL,
        );
        assert_eq!(found, Holder::Outside, "{holder:?}");
    }

    #[test]
    fn a_connection_closed_before_the_server_looked_is_refused_not_taken_for_an_outside_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let (_conn, peer) = listener.accept().unwrap();
        drop(client);
        assert!(
            matches!(of_the_run(peer, local), Holder::Unknown(ref why) if why.contains("closed before the server looked")),
        );
        // A peer address of another machine is not looked for in vain.
        let remote: SocketAddr = "198.51.100.7:40000".parse().unwrap();
        assert_eq!(of_the_run(remote, local), Holder::Outside);
    }
}
