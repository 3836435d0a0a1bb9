//! The scheduler: which calls of a run may run side by side. Calls from
//! different tasks run concurrently unless their envelopes overlap; among
//! overlapping calls the one the script issued first runs first.
//!
//! Two calls overlap when one writes a path the other reads or writes (a
//! path overlaps every path under it, and the folders above it). Reads
//! never overlap reads, so sealed calls wait only for a write in flight
//! to what they read. A call that may touch any path
//! ([`Envelope::anywhere`], an unhermetic command) overlaps every call
//! that names a path, and every other such call: it waits for all of them
//! issued before it, and holds back all of them issued after it. A call
//! that touches no path (a request, a model call) never waits for another.
//!
//! On top of the order, a run spawns at most `max_procs` commands and
//! sends at most `max_requests` requests at once; a call waits for a place
//! only once the calls it overlaps are done, so a place is never held by a
//! call that cannot run.
//!
//! A script's calls take their place in the run's order when they are
//! issued, before they are authorized. A served client session (an MCP
//! client's) has an order of its own ([`Schedule::order`]), which the
//! calls of its requests and of the tasks they start (a Lua tool's) keep
//! as a script's do; such a call takes its place in the run's order only
//! once it is authorized and the session's earlier calls it overlaps are
//! done ([`Schedule::enter_served`]). Calls of different sessions have no
//! issue order between them: they are ordered by when they are ready to
//! run, so one waiting for a person's answer holds no other client's.

use crate::call::Envelope;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The default of `--max-requests`: requests in flight at once.
pub const DEFAULT_MAX_REQUESTS: usize = 16;

/// The default of `--max-procs`: the machine's cores.
pub fn default_max_procs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The calls of one run that are waiting or running, in issue order.
pub struct Schedule {
    next: Cell<u64>,
    /// Calls issued and not yet done, oldest first.
    active: RefCell<Vec<Slot>>,
    /// Woken whenever a call is done.
    done: Rc<Notify>,
    procs: Arc<Semaphore>,
    requests: Arc<Semaphore>,
}

/// What the scheduler knows of one call.
struct Slot {
    id: u64,
    footprint: Rc<Footprint>,
}

/// The paths a call touches, as the scheduler compares them.
#[derive(Debug, Default)]
struct Footprint {
    reads: Vec<PathBuf>,
    writes: Vec<PathBuf>,
    anywhere: bool,
    procs: bool,
    requests: bool,
}

impl Footprint {
    fn of(envelope: &Envelope) -> Footprint {
        Footprint {
            reads: envelope.reads.clone(),
            writes: envelope.writes.clone(),
            anywhere: envelope.anywhere,
            procs: !envelope.commands.is_empty(),
            requests: !envelope.network.is_empty(),
        }
    }

    fn touches_paths(&self) -> bool {
        self.anywhere || !self.reads.is_empty() || !self.writes.is_empty()
    }

    /// Whether the two calls must not run at the same time.
    fn overlaps(&self, other: &Footprint) -> bool {
        if self.anywhere || other.anywhere {
            return self.touches_paths() && other.touches_paths();
        }
        let meets = |mine: &[PathBuf], theirs: &[PathBuf]| {
            mine.iter()
                .any(|a| theirs.iter().any(|b| a.starts_with(b) || b.starts_with(a)))
        };
        meets(&self.writes, &other.writes)
            || meets(&self.writes, &other.reads)
            || meets(&self.reads, &other.writes)
    }
}

impl Schedule {
    /// A schedule spawning at most `max_procs` commands and sending at most
    /// `max_requests` requests at once (each at least 1).
    pub fn new(max_procs: usize, max_requests: usize) -> Schedule {
        Schedule {
            next: Cell::new(0),
            active: RefCell::new(Vec::new()),
            done: Rc::new(Notify::new()),
            procs: Arc::new(Semaphore::new(max_procs.max(1))),
            requests: Arc::new(Semaphore::new(max_requests.max(1))),
        }
    }

    /// An issue order of its own, a client session's: its turns take their
    /// places among the commands and requests in flight in the run's
    /// schedule ([`Schedule::enter_served`]), never in this one.
    pub fn order() -> Schedule {
        Schedule::new(1, 1)
    }

    /// Takes a call's place in the issue order, at once: every call issued
    /// later that overlaps it waits until the [`Turn`] is dropped.
    pub fn enter(self: &Rc<Self>, envelope: &Envelope) -> Turn {
        self.enter_footprint(Rc::new(Footprint::of(envelope)), None)
    }

    /// Takes a served call's place in its client session's issue order
    /// (`session`, a [`Schedule::order`]), at once; its place in this (the
    /// run's) schedule is taken by [`Turn::ready`], once the session's
    /// earlier calls it overlaps are done.
    pub fn enter_served(self: &Rc<Self>, session: &Rc<Schedule>, envelope: &Envelope) -> Turn {
        session.enter_footprint(Rc::new(Footprint::of(envelope)), Some(self.clone()))
    }

    fn enter_footprint(
        self: &Rc<Self>,
        footprint: Rc<Footprint>,
        run: Option<Rc<Schedule>>,
    ) -> Turn {
        let id = self.next.get();
        self.next.set(id + 1);
        let before: Vec<u64> = self
            .active
            .borrow()
            .iter()
            .filter(|s| s.footprint.overlaps(&footprint))
            .map(|s| s.id)
            .collect();
        self.active.borrow_mut().push(Slot {
            id,
            footprint: footprint.clone(),
        });
        Turn {
            schedule: self.clone(),
            id,
            before,
            footprint,
            permits: Vec::new(),
            run,
            in_run: None,
        }
    }

    fn is_active(&self, id: u64) -> bool {
        self.active.borrow().iter().any(|s| s.id == id)
    }
}

/// One call's place in the schedule; dropping it (the call is done, or
/// was refused or cancelled) lets the calls waiting for it go.
pub struct Turn {
    schedule: Rc<Schedule>,
    id: u64,
    /// The earlier calls it overlaps.
    before: Vec<u64>,
    footprint: Rc<Footprint>,
    permits: Vec<OwnedSemaphorePermit>,
    /// The run's schedule, for a turn in a client session's order: where
    /// it takes its place once the session's earlier calls are done.
    run: Option<Rc<Schedule>>,
    /// Its place in the run's schedule, once taken (dropped after the
    /// place in the session's order: fields drop after `Drop::drop`).
    in_run: Option<Box<Turn>>,
}

impl Turn {
    /// Waits until every earlier call this one overlaps is done, then for
    /// a place among the commands or requests in flight, as it needs. A
    /// served call waits for its session's earlier calls, then takes its
    /// place in the run's order and waits there.
    pub async fn ready(&mut self) {
        self.ordered().await;
        let Some(run) = &self.run else {
            return self.placed().await;
        };
        let footprint = self.footprint.clone();
        // Kept before it waits, so a wait dropped and begun again keeps
        // the place it took.
        let turn = self
            .in_run
            .get_or_insert_with(|| Box::new(run.enter_footprint(footprint, None)));
        turn.ordered().await;
        turn.placed().await;
    }

    /// Waits until every earlier call of its schedule that it overlaps is
    /// done.
    async fn ordered(&mut self) {
        loop {
            let done = self.schedule.done.clone();
            let notified = done.notified();
            tokio::pin!(notified);
            // Registered before the check, so a call finishing between the
            // check and the wait still wakes this one.
            notified.as_mut().enable();
            self.before.retain(|id| self.schedule.is_active(*id));
            if self.before.is_empty() {
                break;
            }
            notified.await;
        }
    }

    /// Waits for a place among the commands or requests in flight, as the
    /// call needs.
    async fn placed(&mut self) {
        for (needed, places) in [
            (self.footprint.procs, &self.schedule.procs),
            (self.footprint.requests, &self.schedule.requests),
        ] {
            if needed {
                let permit = places.clone().acquire_owned().await;
                self.permits
                    .push(permit.expect("the schedule never closes its semaphores"));
            }
        }
    }

    /// How many earlier calls it still waits for.
    #[cfg(test)]
    fn waiting_for(&self) -> usize {
        self.before
            .iter()
            .filter(|id| self.schedule.is_active(**id))
            .count()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.schedule
            .active
            .borrow_mut()
            .retain(|s| s.id != self.id);
        self.schedule.done.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Tier;

    fn env(reads: &[&str], writes: &[&str]) -> Envelope {
        Envelope {
            reads: reads.iter().map(PathBuf::from).collect(),
            writes: writes.iter().map(PathBuf::from).collect(),
            ..Envelope::new(Tier::Compensable)
        }
    }

    fn command(anywhere: bool) -> Envelope {
        Envelope {
            commands: vec!["make".into()],
            anywhere,
            ..Envelope::new(Tier::Irreversible)
        }
    }

    #[test]
    fn schedule_orders_writes_of_one_file_and_not_of_two() {
        let s = Rc::new(Schedule::new(2, 2));
        let first = s.enter(&env(&["/w/a"], &["/w/a"]));
        assert_eq!(s.enter(&env(&["/w/a"], &["/w/a"])).waiting_for(), 1);
        assert_eq!(s.enter(&env(&["/w/b"], &["/w/b"])).waiting_for(), 0);
        drop(first);
    }

    #[test]
    fn schedule_reads_beside_reads_and_after_an_overlapping_write() {
        let s = Rc::new(Schedule::new(2, 2));
        let _read = s.enter(&env(&["/w/src"], &[]));
        assert_eq!(s.enter(&env(&["/w/src/a.rs"], &[])).waiting_for(), 0);
        let _write = s.enter(&env(&[], &["/w/src/a.rs"]));
        // The write waited for both reads; a later read of its folder waits for it.
        assert_eq!(s.enter(&env(&["/w/src"], &[])).waiting_for(), 1);
        assert_eq!(s.enter(&env(&["/w/srcx"], &[])).waiting_for(), 0);
    }

    #[test]
    fn schedule_a_command_that_may_touch_anything_orders_every_path_call() {
        let s = Rc::new(Schedule::new(2, 2));
        let _write = s.enter(&env(&[], &["/w/a"]));
        let wide = s.enter(&command(true));
        assert_eq!(wide.waiting_for(), 1);
        assert_eq!(s.enter(&env(&["/tmp/x"], &[])).waiting_for(), 1);
        assert_eq!(s.enter(&command(true)).waiting_for(), 2);
        // A request touches no path; a declared command only its own.
        let fetch = Envelope {
            network: vec![crate::call::Capability {
                action: crate::call::Action::NetGet,
                resource: "example.org".into(),
            }],
            ..Envelope::new(Tier::Sealed)
        };
        assert_eq!(s.enter(&fetch).waiting_for(), 0);
        assert_eq!(s.enter(&command(false)).waiting_for(), 0);
    }

    #[test]
    fn schedule_lets_a_waiting_call_go_when_the_one_before_is_done() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Rc::new(Schedule::new(1, 1));
            let first = s.enter(&env(&[], &["/w/a"]));
            let mut second = s.enter(&env(&["/w/a"], &[]));
            let waited = tokio::time::timeout(std::time::Duration::from_millis(50), second.ready());
            assert!(waited.await.is_err(), "the read ran beside the write");
            drop(first);
            let went = tokio::time::timeout(std::time::Duration::from_millis(50), second.ready());
            assert!(
                went.await.is_ok(),
                "the read still waits after the write is done"
            );
        });
    }

    #[test]
    fn schedule_a_served_call_keeps_its_sessions_order_and_holds_no_place_in_the_runs_until_ready()
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Rc::new(Schedule::new(1, 1));
            let (one, two) = (Rc::new(Schedule::order()), Rc::new(Schedule::order()));
            // A call of session one, issued and not yet ready (its ask waits).
            let mut asking = s.enter_served(&one, &env(&[], &["/w"]));
            // Another session's call, and a script's, do not wait for it...
            let mut other = s.enter_served(&two, &env(&[], &["/w/a"]));
            assert_eq!(s.enter(&env(&["/w/a"], &[])).waiting_for(), 0);
            let went = tokio::time::timeout(std::time::Duration::from_millis(50), other.ready());
            assert!(
                went.await.is_ok(),
                "another session's call waited for an ask"
            );
            // ...but a later call of its own session does.
            let mut own = s.enter_served(&one, &env(&["/w/b"], &[]));
            assert_eq!(own.waiting_for(), 1);
            // Once it is ready, it waits in the run's order for what took
            // its place there first, and holds back what comes after.
            let waited = tokio::time::timeout(std::time::Duration::from_millis(50), asking.ready());
            assert!(
                waited.await.is_err(),
                "it ran beside an overlapping call ready before it"
            );
            drop(other);
            asking.ready().await;
            assert_eq!(s.enter(&env(&["/w/c"], &[])).waiting_for(), 1);
            let own_waits = tokio::time::timeout(std::time::Duration::from_millis(50), own.ready());
            assert!(
                own_waits.await.is_err(),
                "its session's later call ran beside it"
            );
            drop(asking);
            own.ready().await;
        });
    }

    #[test]
    fn schedule_holds_commands_to_max_procs() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Rc::new(Schedule::new(1, 4));
            let mut a = s.enter(&command(false));
            let mut b = s.enter(&command(false));
            a.ready().await;
            let b_waits = tokio::time::timeout(std::time::Duration::from_millis(50), b.ready());
            assert!(
                b_waits.await.is_err(),
                "a second command ran beside the first with max_procs 1"
            );
            drop(a);
            b.ready().await;
        });
    }
}
