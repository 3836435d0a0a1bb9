//! What running a command through sluice costs, next to the shell doing it
//! alone. Whole processes on both sides, timed in interleaved turns, so
//! the ratio of medians holds on a noisy machine. BENCHMARKS.md has the
//! targets, the command and the figures.
//!
//! - `exec-spawn`: one `sluice run` of a script making 500
//!   `sluice.bash{command = "true"}` calls, against one `sh` loop running
//!   `sh -c true` 500 times. Target: at most 1.5x.
//! - `exec-1GiB`: one `sluice run` of a script whose `bash` call writes
//!   1 GiB to stdout, against `sh -c` of the same command redirected to
//!   /dev/null. Targets (issue 21): at most 2x the time; sluice's peak
//!   memory (max RSS of the `sluice` process) under 32 MiB. Two more sides
//!   are floors: the command piped through `cat` to /dev/null, and piped
//!   into this bench's own binary (`--drain-stdin`) keeping what sluice
//!   keeps the way sluice does, in a bare loop: the first 64 MiB read into
//!   a spill file, the rest spliced to /dev/null unread. What a pipe and
//!   the spill cost, without sluice's runtime around them.
//!
//! Both run under `--policy unconfined --no-audit`: the commands run without
//! a sandbox, whose cost `sandbox-true` measures against bare bubblewrap.
//!
//! Not a criterion bench: each sample is a process tree of a second or more.

mod support;

use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;
use support::{measure, median, verdict};

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 500;
const GIB: u64 = 1 << 30;

/// `sluice run` of `script` with nothing to confine or record, so that
/// what is timed is the process flow itself: confinement has its own bench
/// against bare bubblewrap (sandbox.rs), the record its own (audit.rs).
fn sluice_run(script: &Path, ws: &Path) -> Command {
    let mut c = Command::new(SLUICE);
    c.arg("run").arg(script).arg("--workspace").arg(ws);
    c.args(["--policy", "unconfined", "--no-audit"]);
    c
}

fn sh(line: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(line);
    c
}

/// The floor's reader: sluice's way of keeping an overflowing stream, in a
/// bare loop. It sleeps in poll(2) while the pipe is empty, reads the first
/// `DEFAULT_SPILL_CAP` bytes and writes them to a file at `spill`, and
/// moves the rest to /dev/null with nonblocking splice(2) of what the pipe
/// holds (FIONREAD), copying none of it. Each choice was measured (1 GiB,
/// where `cat` takes 0.23 s): a reader blocked in splice(2) sleeps at every
/// write, and waking it costs the writer more than copying does (0.45 s);
/// a splice asking for more than the pipe holds keeps taking from the
/// writer as it writes (0.28-0.42 s, bounded 0.23 s); a splice into the
/// file holds the pipe while the file is written (0.30 s, read 0.28 s).
fn drain_stdin(spill: &Path) {
    use nix::libc;
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::io::{ErrorKind, Write};
    let mut file = std::fs::File::create(spill).unwrap();
    let null = std::fs::File::options()
        .write(true)
        .open("/dev/null")
        .unwrap();
    let stdin = std::io::stdin();
    let mut buf = vec![0u8; 256 << 10];
    let mut spilled = 0u64;
    // SAFETY: fcntl on the process's own stdin, open for its whole life.
    unsafe {
        libc::fcntl(0, libc::F_SETPIPE_SZ, 1 << 20);
        libc::fcntl(0, libc::F_SETFL, libc::O_NONBLOCK);
    }
    loop {
        let left = sluice::internals::exec::DEFAULT_SPILL_CAP - spilled;
        let moved = if left > 0 {
            let want = buf.len().min(left as usize);
            let read = nix::unistd::read(0, &mut buf[..want]).map_err(std::io::Error::from);
            read.inspect(|&n| {
                file.write_all(&buf[..n]).unwrap();
                spilled += n as u64;
            })
        } else {
            splice_queued(&null)
        };
        match moved {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::NONE);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("draining stdin: {e}"),
        }
    }
}

/// Splices what stdin's pipe holds (at least a byte's worth, so an empty
/// pipe says so, or that the stream ended) to `null`.
fn splice_queued(null: &std::fs::File) -> std::io::Result<usize> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    let (nul, no) = (std::ptr::null_mut(), std::ptr::null_mut());
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
    // SAFETY: FIONREAD writes one int, through a pointer to `queued`; the
    // splice is between descriptors that stay open for the call.
    let n = unsafe {
        libc::ioctl(0, libc::FIONREAD, &mut queued);
        let len = queued.max(1) as usize;
        libc::splice(0, nul, null.as_raw_fd(), no, len, flags)
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--drain-stdin") {
        return drain_stdin(Path::new(&args[at + 1]));
    }
    // `cargo bench -- FILTER`: only the parts the filter names.
    let wanted = support::wanted();
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let mut lines = vec![];
    if wanted("exec-spawn") {
        lines.push(exec_spawn(&ws, scripts.path()));
    }
    if wanted("exec-1GiB") {
        lines.extend(exec_1gib(&ws, scripts.path()));
    }
    println!();
    for line in lines {
        println!("{line}");
    }
}

/// `CALLS` `bash` calls of `true` against a shell loop of `sh -c true`;
/// the ratio line.
fn exec_spawn(ws: &Path, scripts: &Path) -> String {
    let spawn_lua = scripts.join("spawn.lua");
    std::fs::write(
        &spawn_lua,
        format!(
            "for i = 1, {CALLS} do\n  local r, err = sluice.bash{{command = \"true\"}}\n  \
             assert(r and r.exitCode == 0, tostring(err))\nend\n"
        ),
    )
    .unwrap();
    let loop_line = format!("i=0; while [ $i -lt {CALLS} ]; do sh -c true; i=$((i+1)); done");
    // Warm both sides once (page cache, binary loading).
    measure(&mut sluice_run(&spawn_lua, ws));
    measure(&mut sh(&loop_line));
    let turns = 7;
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..turns {
        a.push(measure(&mut sluice_run(&spawn_lua, ws)).0);
        b.push(measure(&mut sh(&loop_line)).0);
    }
    let (ma, mb) = (median(&mut a), median(&mut b));
    let ratio = ma.as_secs_f64() / mb.as_secs_f64();
    println!(
        "exec-spawn: {CALLS} sluice.bash{{command=\"true\"}} {ma:.2?} / {CALLS} sh -c true {mb:.2?} \
         (per call {:.0?} / {:.0?})",
        ma / CALLS as u32,
        mb / CALLS as u32
    );
    format!(
        "ratio exec-spawn sluice.bash/sh-loop = {ratio:.2}x (target <= 1.5x): {} \
         [medians of {turns} interleaved turns: {ma:.2?} / {mb:.2?}]",
        verdict(ratio <= 1.5)
    )
}

/// The `sluice run` of one `bash` call printing 1 GiB, which checks what
/// the result says of it.
fn big_script(scripts: &Path, writer: &str) -> std::path::PathBuf {
    let big_lua = scripts.join("big.lua");
    std::fs::write(
        &big_lua,
        format!(
            "local r, err = sluice.bash{{command = \"{writer}\"}}\n\
             assert(r, tostring(err))\n\
             assert(r.stdoutDroppedBytes == {GIB} - 30000, r.stdoutDroppedBytes)\n"
        ),
    )
    .unwrap();
    big_lua
}

/// 1 GiB through `bash` against the same command to /dev/null, through
/// `cat`, and into a reader that only spills and splices; the ratio lines.
fn exec_1gib(ws: &Path, scripts: &Path) -> Vec<String> {
    let writer = format!("head -c {GIB} /dev/zero");
    let big_lua = big_script(scripts, &writer);
    let me = std::env::current_exe().unwrap();
    let sides = [
        format!("{writer} > /dev/null"),
        // What any reader of a pipe pays: the same bytes through `cat`.
        format!("{writer} | cat > /dev/null"),
        // What the writer pays for a pipe and the spill when its reader
        // does nothing else.
        format!(
            "{writer} | '{}' --drain-stdin '{}'",
            me.display(),
            scripts.join("floor.spill").display()
        ),
    ];
    let turns = 5;
    let (mut a, mut rss, mut floors) = (vec![], vec![], [vec![], vec![], vec![]]);
    for _ in 0..turns {
        let (t, kib) = measure(&mut sluice_run(&big_lua, ws));
        a.push(t);
        rss.push(kib);
        for (side, times) in sides.iter().zip(floors.iter_mut()) {
            times.push(measure(&mut sh(side)).0);
        }
    }
    let ma = median(&mut a);
    let [mb, mc, md] = floors.map(|mut v| median(&mut v));
    let peak_mib = *rss.iter().max().unwrap() as f64 / 1024.0;
    println!(
        "exec-1GiB: through bash {ma:.2?} / to /dev/null {mb:.2?} / through cat {mc:.2?} / \
         into a bare spilling reader {md:.2?}; peak RSS of sluice {peak_mib:.1} MiB"
    );
    let r = |x: std::time::Duration, y: std::time::Duration| x.as_secs_f64() / y.as_secs_f64();
    vec![
        format!(
            "ratio exec-1GiB bash/devnull = {:.2}x (target <= 2x): {} \
             [medians of {turns} interleaved turns: {ma:.2?} / {mb:.2?}; command: {writer}]",
            r(ma, mb),
            verdict(r(ma, mb) <= 2.0)
        ),
        format!(
            "ratio exec-1GiB bash/cat-floor = {:.2}x (no target, information: cat/devnull = {:.2}x is what \
             reading the pipe at all costs)",
            r(ma, mc),
            r(mc, mb)
        ),
        format!(
            "ratio exec-1GiB bash/spill-floor = {:.2}x (no target, information: spill-floor/devnull = {:.2}x is \
             what a pipe and a 64 MiB spill cost a bare loop)",
            r(ma, md),
            r(md, mb)
        ),
        format!(
            "ratio exec-1GiB peak RSS of sluice = {peak_mib:.1} MiB (target < 32 MiB): {}",
            verdict(peak_mib < 32.0)
        ),
    ]
}
