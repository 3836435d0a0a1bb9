//! Draining a command's output pipe into its [`Collector`], moving with
//! splice(2) the bytes nobody needs to see.
//!
//! Once a stream has overflowed its budget, its head is settled and its
//! tail is only the stream's last bytes; the bytes between matter only to
//! the spill file (up to its cap) and to the count. So once the file is
//! full or there is none, the drain moves pipe → /dev/null whatever the
//! writer has put in the pipe ahead of the reader, reading only what may be
//! the stream's last [`Collector::tail_cap`] bytes. What the [`Captured`]
//! holds is the same as reading every byte would make it.
//!
//! The spill file itself is written from reads, not spliced: splice(2)
//! into a file holds the pipe's lock while the file is written, so the
//! writer waits; a read lets go of the pipe at once, and the file's write
//! overlaps the writer's next ones. Measured on 1 GiB of `head -c` with
//! its 64 MiB spill: 0.30 s spliced, 0.28 s read.
//!
//! A stream past its budget is drained on a thread of its own, which sleeps
//! in poll(2) when the pipe is empty ([`on_thread`]): the async reader woke
//! the runtime for each of the writer's writes (a large stream of small
//! writes is one event each), and the writer paid for the wake-ups. Measured
//! on 1 GiB of `head -c` (BENCHMARKS.md, exec-1GiB): 0.31-0.33 s through the
//! runtime, 0.29 s on a thread. A stream within its budget never pays for
//! the thread.
//!
//! Every byte is still read where something needs each one: an output tap
//! (a caller showing progress), a stream whose lines are counted, a stream
//! still within its budget or its spill file's cap, and a pipe splice
//! refuses.

use super::{Captured, Collector};
use crate::exec::Tap;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, Interest};
use tokio::sync::watch;

/// A command's output pipe as the executor holds it: read asynchronously,
/// and a descriptor for splice.
pub(crate) trait Source: AsyncRead + AsFd + Unpin + Send {}

impl<T: AsyncRead + AsFd + Unpin + Send> Source for T {}

use crate::exec::process::{FIRST_READ_BYTES, READ_BYTES};

/// Reads `pipe` into `collector` until end-of-file or until `stop` fires
/// (then the capture is `cut_short`), and settles the capture. `tap` sees
/// every byte, so with one every byte is read.
pub(crate) async fn drain(
    pipe: Box<dyn Source>,
    mut collector: Collector,
    stop: watch::Receiver<bool>,
    tap: Option<Tap>,
) -> Captured {
    let splices = tap.is_none() && !collector.counts_lines();
    let own = if splices {
        own_registration(&*pipe)
    } else {
        None
    };
    let (mut collector, cut_short) = match own {
        Some(fd) => {
            // The copy registered on its own carries on; the original's
            // registration and descriptor go.
            drop(pipe);
            spliced(fd, collector, stop).await
        }
        None => {
            let cut_short = read_all(pipe, &mut collector, stop, tap).await;
            (collector, cut_short)
        }
    };
    if cut_short {
        collector.mark_cut_short();
    }
    collector.finish()
}

/// Every byte through memory, to the tap and the collector.
async fn read_all(
    pipe: Box<dyn Source>,
    collector: &mut Collector,
    stop: watch::Receiver<bool>,
    tap: Option<Tap>,
) -> bool {
    let sink = |chunk: &[u8]| {
        if let Some(tap) = &tap {
            (tap.0)(chunk);
        }
        collector.push(chunk);
    };
    crate::exec::process::collect_into(pipe, stop, sink).await
}

/// A duplicate of the pipe's descriptor, registered with the runtime on its
/// own: the async reader hides its descriptor's readiness, which splice
/// needs. `None` (every byte is read then) when either step fails.
fn own_registration(pipe: &dyn Source) -> Option<AsyncFd<OwnedFd>> {
    let fd = pipe.as_fd().try_clone_to_owned().ok()?;
    // SAFETY: an OwnedFd is open, and names the same file description
    // until it is dropped with the AsyncFd that owns it.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
}

/// The drain loop: each time the pipe is readable, move what it holds,
/// until the stream overflows its budget and goes [`on_thread`]; the
/// collector back, and true when `stop` ended it first.
async fn spliced(
    fd: AsyncFd<OwnedFd>,
    mut collector: Collector,
    mut stop: watch::Receiver<bool>,
) -> (Collector, bool) {
    let mut mover = Mover {
        splices: true,
        buf: Vec::new(),
        backlog: false,
        spliced: 0,
    };
    // Without a stop pipe (no descriptors left) the thread could not be
    // told to stop, and the stream stays here.
    let mut threads = true;
    loop {
        if threads && collector.overflowed() {
            match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
                Ok(stopper) => {
                    return on_thread(fd.into_inner(), collector, mover, stop, stopper).await
                }
                Err(_) => threads = false,
            }
        }
        let mut ready = tokio::select! {
            r = fd.readable() => match r {
                Ok(guard) => guard,
                Err(_) => return (collector, false),
            },
            _ = stop.wait_for(|s| *s) => return (collector, true),
        };
        match ready.try_io(|fd| mover.step(fd.get_ref().as_fd(), &mut collector)) {
            // End of file, or a read error, which ends the stream as it
            // ends it for a reader of every byte.
            Ok(Ok(0)) | Ok(Err(_)) => return (collector, false),
            Ok(Ok(_)) => {}
            // Empty for now: the readiness was cleared, wait for more.
            Err(_would_block) => {}
        }
    }
}

/// The rest of an overflowed stream, drained on a blocking thread that
/// sleeps in poll(2) on the pipe and on the `stopper` pipe, which a `stop`
/// writes (dropping this future closes it: the thread stops too).
async fn on_thread(
    pipe: OwnedFd,
    collector: Collector,
    mover: Mover,
    mut stop: watch::Receiver<bool>,
    (stop_r, stop_w): (OwnedFd, OwnedFd),
) -> (Collector, bool) {
    let mut thread =
        tokio::task::spawn_blocking(move || thread_loop(pipe, collector, mover, stop_r));
    let stopped = async { stop.wait_for(|s| *s).await.is_ok() };
    let joined = tokio::select! {
        r = &mut thread => r,
        _ = stopped => {
            let _ = nix::unistd::write(&stop_w, b"s");
            thread.await
        }
    };
    // The mover is dropped here, on the drain's own thread (see its Drop).
    let (collector, cut_short, _mover) = joined.expect("the drain thread does not panic");
    (collector, cut_short)
}

/// The thread's loop: [`Mover::step`] until the stream ends, sleeping in
/// poll(2) while the pipe is empty; the collector, whether the stop pipe
/// ended it, and the mover.
fn thread_loop(
    pipe: OwnedFd,
    mut collector: Collector,
    mut mover: Mover,
    stop: OwnedFd,
) -> (Collector, bool, Mover) {
    let mut steps = 0u32;
    let cut_short = loop {
        match mover.step(pipe.as_fd(), &mut collector) {
            Ok(0) => break false,
            Ok(_) => {
                // A writer as fast as the thread never lets the pipe empty:
                // the stop pipe is looked at between steps too.
                steps = steps.wrapping_add(1);
                if steps.is_multiple_of(STOP_EVERY)
                    && wait(pipe.as_fd(), stop.as_fd(), PollTimeout::ZERO)
                {
                    break true;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if wait(pipe.as_fd(), stop.as_fd(), PollTimeout::NONE) {
                    break true;
                }
            }
            // A read error ends the stream as it ends it for the runtime.
            Err(_) => break false,
        }
    };
    (collector, cut_short, mover)
}

/// Steps of a busy drain thread between two looks at its stop pipe.
const STOP_EVERY: u32 = 64;

/// Sleeps up to `timeout` until the pipe has bytes or an end (false), or
/// until the stop pipe is written or closed (true).
fn wait(pipe: BorrowedFd<'_>, stop: BorrowedFd<'_>, timeout: PollTimeout) -> bool {
    loop {
        let mut fds = [
            PollFd::new(pipe, PollFlags::POLLIN),
            PollFd::new(stop, PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) => return fds[1].revents().is_some_and(|r| !r.is_empty()),
            Err(Errno::EINTR) => continue,
            // poll(2) failing on two open descriptors is unheard of: stop
            // rather than spin.
            Err(_) => return true,
        }
    }
}

/// Moves one batch of a pipe's bytes by the cheapest way that keeps the
/// capture exact.
struct Mover {
    /// False once splice was refused (not a pipe): every later byte is
    /// read.
    splices: bool,
    /// The read buffer, made at the first read.
    buf: Vec<u8>,
    /// The last read filled the buffer: the writer is ahead and the pipe
    /// holds more. Only then is what it holds measured and skipped: a
    /// reader keeping up with a writer of small writes never holds more
    /// than a tail's worth, and measuring would cost a call per read.
    backlog: bool,
    /// Bytes spliced so far (tests tell by it that bytes skipped memory).
    #[cfg_attr(not(test), allow(dead_code))]
    spliced: u64,
}

/// A test's drain runs on the test's thread, and a drain thread's mover is
/// handed back to it: the count joins the test thread's when a drain ends.
#[cfg(test)]
impl Drop for Mover {
    fn drop(&mut self) {
        tests::SPLICED.with(|c| c.set(c.get() + self.spliced));
    }
}

impl Mover {
    /// Moves what the pipe holds; the bytes moved, 0 at end of file,
    /// `WouldBlock` when it holds nothing.
    fn step(&mut self, pipe: BorrowedFd<'_>, c: &mut Collector) -> io::Result<usize> {
        if self.splices && !c.needs_bytes() && self.backlog {
            if let Some(n) = self.skip(pipe, c)? {
                return Ok(n);
            }
        }
        self.read(pipe, c)
    }

    /// Discards unread what cannot be among the stream's last
    /// [`Collector::tail_cap`] bytes (more than that follows it in the
    /// pipe), then reads the rest; `None` when the pipe holds no more than
    /// that.
    fn skip(&mut self, pipe: BorrowedFd<'_>, c: &mut Collector) -> io::Result<Option<usize>> {
        let keep = c.tail_cap();
        let queued = queued(pipe)?;
        let Some(null) = dev_null().filter(|_| queued > keep) else {
            return Ok(None);
        };
        let Some(n) = self.splice(pipe, null.as_fd(), queued - keep)? else {
            return Ok(None);
        };
        c.skipped(n as u64);
        // What follows is at least a tail's worth, already queued: read
        // now, so the tail is whole again at once.
        let read = match self.read(pipe, c) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
            other => other?,
        };
        Ok(Some(n + read))
    }

    /// One splice from the pipe: the bytes moved (0 at end of file),
    /// `WouldBlock` when it is empty, `None` when splice refused or failed
    /// (unheard of into /dev/null), after which every byte is read.
    fn splice(
        &mut self,
        pipe: BorrowedFd<'_>,
        to: BorrowedFd<'_>,
        len: usize,
    ) -> io::Result<Option<usize>> {
        let flags = nix::libc::SPLICE_F_NONBLOCK | nix::libc::SPLICE_F_MOVE;
        loop {
            // SAFETY: two descriptors borrowed for the call, no offsets
            // (each file's own position is used), a length and flags.
            let r = unsafe {
                nix::libc::splice(
                    pipe.as_raw_fd(),
                    std::ptr::null_mut(),
                    to.as_raw_fd(),
                    std::ptr::null_mut(),
                    len,
                    flags,
                )
            };
            return match Errno::result(r) {
                Ok(n) => {
                    self.spliced += n as u64;
                    Ok(Some(n as usize))
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => Err(ErrorKind::WouldBlock.into()),
                Err(_) => {
                    self.splices = false;
                    Ok(None)
                }
            };
        }
    }

    /// One read into memory, pushed to the collector.
    fn read(&mut self, pipe: BorrowedFd<'_>, c: &mut Collector) -> io::Result<usize> {
        if self.buf.is_empty() {
            // Most commands print little or nothing: a whole pipe's worth
            // is made only once a read fills this.
            self.buf = vec![0; FIRST_READ_BYTES];
        }
        loop {
            return match nix::unistd::read(pipe.as_raw_fd(), &mut self.buf) {
                Ok(n) => {
                    c.push(&self.buf[..n]);
                    self.backlog = n == self.buf.len();
                    if self.backlog && self.buf.len() < READ_BYTES {
                        self.buf = vec![0; READ_BYTES];
                    }
                    Ok(n)
                }
                Err(Errno::EINTR) => continue,
                Err(e) => Err(e.into()),
            };
        }
    }
}

/// Bytes the pipe holds now.
fn queued(pipe: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at
    // `n`, alive for the call.
    let r = unsafe { nix::libc::ioctl(pipe.as_raw_fd(), nix::libc::FIONREAD, &mut n) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// /dev/null, opened once per process, where discarded bytes are spliced.
fn dev_null() -> Option<&'static File> {
    static NULL: OnceLock<Option<File>> = OnceLock::new();
    NULL.get_or_init(|| File::options().write(true).open("/dev/null").ok())
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::super::{Spill, SpillDir};
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use std::time::Duration;

    thread_local! {
        /// Bytes this thread's drains spliced (see `Mover`'s Drop), so a
        /// test can tell the bytes did not pass through memory.
        pub(super) static SPLICED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn spliced_mib() -> u64 {
        SPLICED.with(|c| c.get()) >> 20
    }

    const MIB: usize = 1 << 20;
    /// The bash flow's stdout budget: 15,000 bytes of head, 15,000 of tail.
    const BUDGET: usize = 30_000;

    /// `len` bytes in which every 8-byte word is its own offset: a byte
    /// lost, doubled or moved anywhere shows.
    fn pattern(len: usize) -> Vec<u8> {
        let mut out: Vec<u8> = (0..len.div_ceil(8) as u64)
            .flat_map(|i| (i * 8).to_le_bytes())
            .collect();
        out.truncate(len);
        out
    }

    /// What reading every byte makes of `stream`: the collector as the
    /// executor fed it before splice, one 256 KiB read at a time.
    fn read_every_byte(stream: &[u8], dir: Option<Arc<SpillDir>>, cap: u64) -> Captured {
        let mut c = Collector::new("stdout", BUDGET, dir, cap);
        for chunk in stream.chunks(READ_BYTES) {
            c.push(chunk);
        }
        c.finish()
    }

    /// Drains a real 1 MiB pipe into a collector while a thread writes
    /// `pieces` into it, pausing `pause` after each so the drain catches up
    /// (and splices what the pipe holds at that moment).
    async fn drained(
        pieces: Vec<Vec<u8>>,
        pause: Duration,
        dir: Option<Arc<SpillDir>>,
        cap: u64,
    ) -> Captured {
        let collector = Collector::new("stdout", BUDGET, dir, cap);
        drained_into(pieces, pause, collector, None).await
    }

    /// [`drained`] into a given collector, with a tap.
    async fn drained_into(
        pieces: Vec<Vec<u8>>,
        pause: Duration,
        collector: Collector,
        tap: Option<Tap>,
    ) -> Captured {
        let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
        let _ = nix::fcntl::fcntl(rx.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        let mut tx = File::from(tx.into_blocking_fd().unwrap());
        let writer = std::thread::spawn(move || {
            for piece in pieces {
                tx.write_all(&piece).unwrap();
                std::thread::sleep(pause);
            }
        });
        let (_stop_tx, stop) = watch::channel(false);
        let got = drain(Box::new(rx), collector, stop, tap).await;
        writer.join().unwrap();
        got
    }

    /// The spill's facts other than its name, and the file's bytes.
    fn spill_facts(c: &Captured) -> Option<(u64, bool, Vec<u8>)> {
        c.spill.as_ref().map(
            |Spill {
                 path,
                 bytes,
                 complete,
             }| (*bytes, *complete, std::fs::read(path).unwrap()),
        )
    }

    /// Every fact of `got` is the one reading every byte gives.
    fn assert_same(got: &Captured, want: &Captured) {
        assert_eq!(got.head, want.head, "head");
        assert_eq!(got.tail.len(), want.tail.len(), "tail length");
        assert!(got.tail == want.tail, "tail bytes differ");
        assert_eq!(got.total_bytes, want.total_bytes, "total");
        assert_eq!(got.dropped_bytes, want.dropped_bytes, "dropped");
        assert_eq!(
            (&got.spill_error, got.cut_short),
            (&want.spill_error, want.cut_short)
        );
        assert!(spill_facts(got) == spill_facts(want), "spill files differ");
    }

    /// A spill folder, which the caller keeps (as the run does) while it
    /// reads the files.
    fn spill_dir(parent: &tempfile::TempDir, name: &str) -> Arc<SpillDir> {
        Arc::new(SpillDir::create_in(parent.path(), name).unwrap())
    }

    #[tokio::test]
    async fn a_64_mib_stream_spilled_from_its_reads_is_exactly_what_reading_it_makes() {
        let before = spliced_mib();
        let stream = pattern(64 * MIB);
        let parent = tempfile::tempdir().unwrap();
        let pieces = stream.chunks(4096).map(<[u8]>::to_vec).collect();
        let (a, b) = (spill_dir(&parent, "a"), spill_dir(&parent, "b"));
        let got = drained(pieces, Duration::ZERO, Some(a.clone()), 64 << 20).await;
        let want = read_every_byte(&stream, Some(b.clone()), 64 << 20);
        assert_same(&got, &want);
        // The file is the whole stream, byte for byte, and says so.
        let (bytes, complete, file) = spill_facts(&got).unwrap();
        assert_eq!((bytes, complete), (64 << 20, true));
        assert!(file == stream);
        assert_eq!(got.head, stream[..15_000]);
        assert_eq!(got.tail, stream[stream.len() - 15_000..]);
        assert_eq!(got.dropped_bytes, (64 * MIB - 30_000) as u64);
        // While the file takes bytes, none is spliced past it.
        assert_eq!(spliced_mib(), before, "nothing was spliced");
    }

    #[tokio::test]
    async fn past_the_spill_cap_the_file_holds_the_first_bytes_and_the_tail_is_the_last() {
        // 100 MiB in pieces of odd sizes, so no boundary falls on a page;
        // each a widened pipe's worth, so the writer is ahead of the drain
        // and there is a backlog to skip.
        let stream = pattern(100 * MIB + 12_345);
        let parent = tempfile::tempdir().unwrap();
        let pieces = stream.chunks(MIB + 12_345).map(<[u8]>::to_vec).collect();
        let (a, b) = (spill_dir(&parent, "a"), spill_dir(&parent, "b"));
        let got = drained(pieces, Duration::ZERO, Some(a.clone()), 64 << 20).await;
        let want = read_every_byte(&stream, Some(b.clone()), 64 << 20);
        assert_same(&got, &want);
        let (bytes, complete, file) = spill_facts(&got).unwrap();
        assert_eq!((bytes, complete), (64 << 20, false));
        assert!(file[..] == stream[..64 * MIB]);
        assert_eq!(got.tail, stream[stream.len() - 15_000..]);
        assert_eq!(got.total_bytes, stream.len() as u64);
        // Most of the 36 MiB after the file's 64: each time the drain
        // catches up with the writer it reads at most a tail's worth.
        assert!(spliced_mib() >= 18, "spliced {} MiB", spliced_mib());
    }

    #[tokio::test]
    async fn without_a_spill_folder_the_skipped_middle_is_counted_and_the_tail_exact() {
        let stream = pattern(20 * MIB + 7);
        let pieces = stream.chunks(MIB + 1).map(<[u8]>::to_vec).collect();
        let got = drained(pieces, Duration::ZERO, None, 64 << 20).await;
        assert_same(&got, &read_every_byte(&stream, None, 64 << 20));
        assert!(got.spill.is_none());
        assert!(spliced_mib() >= 10, "spliced {} MiB", spliced_mib());
    }

    #[tokio::test]
    async fn a_secret_written_in_two_halves_across_a_splice_lands_whole_in_the_tail() {
        // The drain runs between the halves (the writer pauses), so the
        // first half was queued when the drain spliced everything before
        // the last tail's worth away.
        const SECRET: &[u8] = b"ghp_0123456789abcdefghijABCDEFGHIJ0123";
        for spill in [true, false] {
            let parent = tempfile::tempdir().unwrap();
            let (a, b) = (spill_dir(&parent, "a"), spill_dir(&parent, "b"));
            let dir = |d: &Arc<SpillDir>| spill.then(|| d.clone());
            let (front, back) = SECRET.split_at(17);
            let mut first = pattern(8 * MIB);
            first.extend_from_slice(front);
            let mut second = back.to_vec();
            second.extend_from_slice(&[b'z'; 9_000]);
            let stream = [&first[..], &second[..]].concat();
            let pieces = vec![first, second];
            let got = drained(pieces, Duration::from_millis(50), dir(&a), 1 << 20).await;
            assert_same(&got, &read_every_byte(&stream, dir(&b), 1 << 20));
            let at = got.tail.windows(SECRET.len()).position(|w| w == SECRET);
            assert_eq!(at, Some(15_000 - 9_000 - SECRET.len()), "spill: {spill}");
        }
    }

    #[tokio::test]
    async fn a_tap_and_a_line_count_still_see_every_byte() {
        let stream: Vec<u8> = pattern(16 * MIB)
            .into_iter()
            .map(|b| if b == 7 { b'\n' } else { b })
            .collect();
        let pieces: Vec<Vec<u8>> = stream.chunks(65_537).map(<[u8]>::to_vec).collect();
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = seen.clone();
        let tap = Tap(Arc::new(move |chunk: &[u8]| {
            counter.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }));
        let before = spliced_mib();
        let plain = Collector::new("stdout", BUDGET, None, 0);
        let got = drained_into(pieces.clone(), Duration::ZERO, plain, Some(tap)).await;
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::Relaxed),
            stream.len() as u64
        );
        assert_same(&got, &read_every_byte(&stream, None, 0));
        let counting = Collector::new("stdout", BUDGET, None, 0).counting_lines();
        let got = drained_into(pieces, Duration::ZERO, counting, None).await;
        let lines =
            stream.split(|b| *b == b'\n').count() as u64 - u64::from(stream.ends_with(b"\n"));
        assert_eq!(got.lines, lines);
        assert_eq!(got.tail, stream[stream.len() - 15_000..]);
        assert_eq!(spliced_mib(), before, "nothing was spliced");
    }

    /// A 1 MiB pipe whose writer stays with the test: the drain's end and
    /// the writer's file.
    fn open_pipe() -> (tokio::net::unix::pipe::Receiver, File) {
        let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
        let _ = nix::fcntl::fcntl(rx.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        (rx, File::from(tx.into_blocking_fd().unwrap()))
    }

    #[tokio::test]
    async fn a_stop_ends_an_overflowed_stream_whose_writer_keeps_the_pipe_open() {
        // Past its budget the stream is drained on a thread sleeping in
        // poll(2); the stop must wake it though no byte and no end come.
        let (rx, mut tx) = open_pipe();
        // Less than the pipe holds: the test writes before the drain reads.
        let stream = pattern(MIB / 2 + 5);
        tx.write_all(&stream).unwrap();
        let (stop_tx, stop) = watch::channel(false);
        let collector = Collector::new("stdout", BUDGET, None, 0);
        let drain = tokio::spawn(drain(Box::new(rx), collector, stop, None));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!drain.is_finished(), "the writer is still there");
        stop_tx.send(true).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), drain)
            .await
            .expect("the stop ends the drain")
            .unwrap();
        assert!(got.cut_short);
        assert_eq!(got.total_bytes, stream.len() as u64);
        assert_eq!(got.head, stream[..15_000]);
        assert_eq!(got.tail, stream[stream.len() - 15_000..]);
        drop(tx);
    }

    #[tokio::test]
    async fn a_dropped_drain_lets_go_of_the_pipe_it_was_draining_on_its_thread() {
        // A drain whose task is aborted must not leave its thread reading:
        // the pipe's read end closes, and the writer learns it (EPIPE).
        let (rx, mut tx) = open_pipe();
        tx.write_all(&pattern(MIB / 2)).unwrap();
        let (_stop_tx, stop) = watch::channel(false);
        let collector = Collector::new("stdout", BUDGET, None, 0);
        let drain = tokio::spawn(drain(Box::new(rx), collector, stop, None));
        tokio::time::sleep(Duration::from_millis(200)).await;
        drain.abort();
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'x'; 64 << 10];
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::time::Instant::now() < deadline {
                if let Err(e) = tx.write_all(&chunk) {
                    return Some(e.kind());
                }
            }
            None
        });
        let ended = tokio::task::spawn_blocking(move || writer.join().unwrap())
            .await
            .unwrap();
        assert_eq!(ended, Some(ErrorKind::BrokenPipe));
    }
}
