//! How the writer commits what it linked: messages gathered into batches,
//! each batch's statements written in one transaction, the store's outages
//! ridden out (the statements kept and written again once it answers,
//! within the retry budget), and what happens when it is given up on.
//!
//! A batch is linked first (redacted, hashed into the chain, turned into
//! statements: [`outage::Write`]) and written after, so a batch the store
//! did not take is written again exactly as linked. A commit whose answer
//! was lost with the connection is looked for before anything is written
//! again: found, it is not written twice; missing, it is written.

use super::*;
use crate::audit::db::ErrorKind;
use crate::audit::outage::{self, Lost, Outage};

impl Writer {
    pub(super) fn serve(mut self, rx: Receiver<Msg>) {
        // Rows nobody waits for gather for up to `QUIET` while they come
        // faster than the writer commits them: a transaction per handful
        // of sealed calls would cost the writer (and the core it shares
        // with the run) more than the calls themselves. A row that comes
        // after a quiet spell has no company coming: waiting for some
        // would only put it in the same transaction as the next awaited
        // one (an irreversible call's intent), whose caller would then
        // wait for both.
        let mut batch = Vec::new();
        let mut first: Option<Instant> = None;
        let mut urgent = false;
        let mut committed = Instant::now();
        loop {
            let closed = self.gather(&rx, &mut batch, &mut first, &mut urgent);
            let next = if self.outage.is_some() {
                (first, urgent) = (None, false);
                self.ride_out(std::mem::take(&mut batch))
            } else {
                if batch.is_empty() {
                    if closed {
                        return;
                    }
                    if self.renewed.elapsed() < crate::audit::lease::RENEW {
                        self.sleep();
                        continue;
                    }
                    batch.push(Msg::Renew(None));
                    (first, urgent) = (Some(Instant::now()), true);
                }
                let at = first.expect("a batch's first message was timed");
                let waited = at.elapsed();
                let lone = at.saturating_duration_since(committed) >= QUIET;
                let due = urgent || closed || lone || batch.len() >= BATCH || waited >= QUIET;
                if !due {
                    std::thread::park_timeout(QUIET.saturating_sub(waited));
                    continue;
                }
                (first, urgent) = (None, false);
                let next = self.commit(std::mem::take(&mut batch));
                committed = Instant::now();
                next
            };
            match next {
                Next::Go => {}
                Next::Ended => return,
                Next::Lost => return self.refuse_all(rx),
            }
        }
    }

    /// Takes what is queued into `batch` (up to `BATCH`, and while the
    /// store is unreachable, up to the queue's bound: past it, messages
    /// wait in the channel, and calls behind them), noting when the
    /// batch's first message came and whether anyone waits on one.
    /// Returns whether the recorder is gone (the channel closed).
    fn gather(
        &self,
        rx: &Receiver<Msg>,
        batch: &mut Vec<Msg>,
        first: &mut Option<Instant>,
        urgent: &mut bool,
    ) -> bool {
        while batch.len() < BATCH && self.has_room() {
            match rx.try_recv() {
                Ok(m) => {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    *urgent |= m.awaited();
                    first.get_or_insert_with(Instant::now);
                    batch.push(m);
                }
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => return true,
            }
        }
        false
    }

    /// Sleeps while nothing is queued, until a message wakes it or the
    /// lease is due for renewal: a run waiting on a slow call costs its
    /// writer no wake-ups.
    fn sleep(&self) {
        // Marked idle before the queue is looked at, and a sender counts
        // its message before it looks at the mark (`Recorder::send`):
        // either this sees the message or the sender sees the mark and
        // wakes it (an unpark before the park makes the park return).
        self.idle.store(true, Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) == 0 {
            let renewal = crate::audit::lease::RENEW.saturating_sub(self.renewed.elapsed());
            std::thread::park_timeout(renewal);
        }
        self.idle.store(false, Ordering::SeqCst);
    }

    /// Links `batch` and writes it in one transaction, then answers
    /// whoever waits.
    fn commit(&mut self, batch: Vec<Msg>) -> Next {
        for msg in batch {
            if let Err(e) = self.take(msg) {
                return self.failed(e);
            }
        }
        self.write_log()
    }

    /// While the store is unreachable: links what came, and tries the
    /// store again when its turn comes.
    fn ride_out(&mut self, batch: Vec<Msg>) -> Next {
        for msg in batch {
            if let Err(e) = self.take(msg) {
                return self.failed(e);
            }
        }
        // A stop request ends the run within seconds: the store is not
        // waited for past it.
        if self
            .ending
            .as_ref()
            .is_some_and(|e| e.status == "interrupted")
        {
            return self.give_up();
        }
        self.backed_up.store(!self.has_room(), Ordering::SeqCst);
        let wait = self.outage.as_ref().map_or(Duration::ZERO, Outage::due_in);
        if !wait.is_zero() {
            // A message someone waits for wakes the writer to take it.
            std::thread::park_timeout(wait);
            return Next::Go;
        }
        self.write_log()
    }

    /// Whether the writer takes more messages: not past its end, and,
    /// while the store is unreachable, not past the queue's bound.
    fn has_room(&self) -> bool {
        self.ending.is_none()
            && self.log.len() < outage::QUEUED_ROWS
            && self.log_bytes < outage::QUEUED_BYTES
    }

    /// Links one message into the log.
    fn take(&mut self, msg: Msg) -> db::Result<()> {
        if self.base.is_none() {
            self.base = Some(self.mark());
        }
        self.sync_wanted |= msg.needs_sync();
        match msg {
            Msg::Intent(row, ack) => {
                self.intent(&row)?;
                self.acks.push(ack);
            }
            Msg::Done(row, outcome, ack) => {
                self.done(&row, &outcome);
                self.acks.extend(ack);
            }
            Msg::Outcome { task, seq, outcome } => self.complete(task, seq, &outcome)?,
            Msg::Reading {
                task,
                seq,
                kind,
                value,
            } => self.reading(&task, seq, kind, value),
            Msg::Module {
                k,
                name,
                path,
                text,
            } => self.module(k, name, path, text),
            Msg::Renew(ack) => self.acks.extend(ack),
            Msg::End { status, error, ack } => {
                self.ending = Some(Ending {
                    status,
                    error,
                    ack,
                    sealed: false,
                });
            }
        }
        Ok(())
    }

    /// Writes the log: committed, or the store's outage begun or gone on
    /// with, or failed.
    fn write_log(&mut self) -> Next {
        match self.flush() {
            Ok(()) => self.written(),
            Err(e) if e.kind == ErrorKind::Unreachable => {
                let outage = self.outage.get_or_insert_with(Outage::new);
                if outage.failed(&e.message, self.retry) {
                    Next::Go
                } else {
                    self.give_up()
                }
            }
            Err(e) => self.failed(e),
        }
    }

    /// One transaction: the lease checked, a commit whose answer was lost
    /// looked for, the log written, the run sealed if it ends.
    fn flush(&mut self) -> db::Result<()> {
        let done = self.flush_in_tx();
        if done.is_err() {
            let _ = self.db.rollback();
            self.renewing = None;
        }
        done
    }

    fn flush_in_tx(&mut self) -> db::Result<()> {
        let sync = self.sync_wanted || self.unsynced.due();
        if sync != self.synced {
            self.db.durable(sync)?;
            self.synced = sync;
        }
        self.begin()?;
        self.restore_unsynced()?;
        self.settle_unknown()?;
        // Rows of one statement in a row go together: a store a round
        // trip away sends them as one.
        for run in self.log.chunk_by(|a, b| std::ptr::eq(a.sql, b.sql)) {
            let rows: Vec<&[Val]> = run.iter().map(|w| w.params.as_slice()).collect();
            self.db.execute_many(run[0].sql, &rows)?;
        }
        self.seal_if_ending()?;
        self.db.commit().inspect_err(|e| {
            if e.kind == ErrorKind::Unreachable {
                self.unknown = Some(Unknown {
                    upto: self.log.len(),
                    acks: self.acks.len(),
                    witness: outage::witness(&self.log),
                    after: self.mark(),
                });
            }
        })
    }

    /// On a connection made again (the server may have restarted): writes
    /// again the commits made without a sync that the store lost.
    fn restore_unsynced(&mut self) -> db::Result<()> {
        if self.db.connections() == self.connection {
            return Ok(());
        }
        self.unsynced.restore(&*self.db, &self.run)
    }

    /// Reads back whether a commit whose answer was lost landed: its
    /// statements leave the log if so (and their waiters are answered),
    /// and are written again if not.
    fn settle_unknown(&mut self) -> db::Result<()> {
        let Some(u) = &self.unknown else {
            return Ok(());
        };
        let landed = match &u.witness {
            Some(w) => outage::landed(&*self.db, &self.run, w)?,
            None => false,
        };
        let u = self.unknown.take().expect("looked at above");
        if landed {
            let mut landed: Vec<_> = self.log.drain(..u.upto).collect();
            self.unsynced.committed(&mut landed, false, u.after.n);
            self.log_bytes = self.log.iter().map(outage::Write::bytes).sum();
            for ack in self.acks.drain(..u.acks) {
                ack.answer(Ok(()));
            }
            self.base = Some(u.after);
        }
        Ok(())
    }

    /// Seals the run, when it ends with this log: inside the transaction,
    /// which holds every reading the seal covers.
    fn seal_if_ending(&mut self) -> db::Result<()> {
        let Some(end) = self.ending.as_ref().filter(|e| !e.sealed) else {
            return Ok(());
        };
        let (status, error) = (end.status.clone(), end.error.clone());
        // The texts first: the seal covers the modules as written.
        for w in self.texts() {
            self.db.execute(w.sql, &w.params)?;
            self.log.push(w);
        }
        let w = self.seal(&status, error.as_deref())?;
        self.db.execute(w.sql, &w.params)?;
        self.log.push(w);
        if let Some(end) = self.ending.as_mut() {
            end.sealed = true;
        }
        Ok(())
    }

    /// The log is committed: it is emptied and its waiters answered.
    fn written(&mut self) -> Next {
        if let Some((at, until)) = self.renewing.take() {
            self.renewed = at;
            self.lease_until.store(until, Ordering::SeqCst);
        }
        self.unsynced.committed(&mut self.log, self.synced, self.n);
        self.connection = self.db.connections();
        self.clear_log();
        self.base = None;
        self.added.clear();
        self.publish();
        for ack in self.acks.drain(..) {
            ack.answer(Ok(()));
        }
        match self.ending.take() {
            Some(end) => {
                let _ = end.ack.send(Ok(()));
                Next::Ended
            }
            None => Next::Go,
        }
    }

    /// Forgets the log and the outage it waited out.
    fn clear_log(&mut self) {
        self.log.clear();
        self.log_bytes = 0;
        self.sync_wanted = false;
        self.unknown = None;
        self.outage = None;
        self.backed_up.store(false, Ordering::SeqCst);
    }

    /// The store refused the log (another process took the run over, a
    /// statement failed, the disk is full): what it held is lost, the
    /// chain goes on from what the store holds, and the failure refuses
    /// every later intent.
    fn failed(&mut self, e: db::Error) -> Next {
        let _ = self.db.rollback();
        if crate::audit::lease::is_fenced(&e) {
            self.fenced.store(true, Ordering::SeqCst);
        }
        let why = format!("the audit database could not record the call: {e}");
        if let Some(base) = self.base.take() {
            self.restore(base);
        }
        self.clear_log();
        self.fail_with(why)
    }

    /// Gives the store up, its retry budget spent: says what the record
    /// holds and lacks, and the run starts no call after it.
    fn give_up(&mut self) -> Next {
        let outage = self.outage.take().unwrap_or_else(Outage::new);
        let log = std::mem::take(&mut self.log);
        let upto = self.unknown.as_ref().map_or(0, |u| u.upto);
        let (uncertain, queued) = log.split_at(upto);
        if let Some(base) = self.base.take() {
            self.restore(base);
        }
        let why = Lost {
            store: &self.name,
            budget: self.retry,
            lasted: outage.lasted(),
            last: &outage.last,
            committed: self.n,
            synced: self.unsynced.synced_through,
            uncertain,
            queued,
            open: &self.open_outcomes(&log),
        }
        .describe();
        // Kept: a seal at the end looks for that commit first.
        let unknown = self.unknown.take();
        self.clear_log();
        self.unknown = unknown;
        self.lost.store(true, Ordering::SeqCst);
        match self.fail_with(why) {
            Next::Go => Next::Lost,
            ended => ended,
        }
    }

    /// Irreversible calls whose intent the store holds and whose outcome
    /// it does not, as (n, flow): still running, or ended with their
    /// outcome in `log`. Call it with the chain restored to the store's.
    fn open_outcomes(&self, log: &[outage::Write]) -> Vec<(i64, String)> {
        let mut open: Vec<(i64, String)> = self
            .intents
            .values()
            .map(|(n, _, _, flow)| (*n, flow.clone()))
            .collect();
        for w in log {
            if let Some(Effect::Outcome { n, flow, .. }) = &w.effect {
                if *n <= self.n && !open.iter().any(|(m, _)| m == n) {
                    open.push((*n, flow.clone()));
                }
            }
        }
        open
    }

    /// Records `why` as the writer's failure and answers every waiter with
    /// it; a run ending now is sealed `failed`, saying so, unless another
    /// process took it over.
    fn fail_with(&mut self, why: String) -> Next {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        self.publish();
        for ack in self.acks.drain(..) {
            ack.answer(Err(why.clone()));
        }
        let Some(end) = self.ending.take() else {
            return Next::Go;
        };
        if self.is_fenced() {
            let _ = end.ack.send(Err(why));
            return Next::Ended;
        }
        // The run ends with rows lost: seal it failed, saying so, so the
        // seal itself covers the loss.
        let incomplete = format!("the audit record is incomplete: {why}");
        let sealed = self
            .seal_now("failed", Some(&incomplete))
            .map_err(|e| format!("{incomplete}; sealing failed too: {e}"));
        let _ = end.ack.send(sealed.and(Err(incomplete)));
        Next::Ended
    }

    /// Seals the run over what the store holds, in a transaction of its
    /// own: after a failure, once.
    fn seal_now(&mut self, status: &str, error: Option<&str>) -> db::Result<()> {
        let done = self.seal_now_in_tx(status, error);
        if done.is_err() {
            let _ = self.db.rollback();
        }
        done
    }

    fn seal_now_in_tx(&mut self, status: &str, error: Option<&str>) -> db::Result<()> {
        self.begin()?;
        self.restore_unsynced()?;
        if let Some(u) = self.unknown.take() {
            let landed = match &u.witness {
                Some(w) => outage::landed(&*self.db, &self.run, w)?,
                None => false,
            };
            if landed {
                self.restore(u.after);
            }
        }
        let w = self.seal(status, error)?;
        self.db.execute(w.sql, &w.params)?;
        self.db.commit()
    }

    /// Once the store was given up on: every message is refused with why,
    /// and the run's end is sealed if the store answers by then.
    fn refuse_all(mut self, rx: Receiver<Msg>) {
        let why = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let why = why.unwrap_or_default();
        for msg in rx.iter() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            match msg {
                Msg::End { status, error, ack } => {
                    let sealed = self
                        .seal_now(&status, error.as_deref())
                        .map_err(|e| format!("the audit record could not be sealed: {e}"));
                    let _ = ack.send(sealed);
                    return;
                }
                Msg::Intent(_, w) | Msg::Done(_, _, Some(w)) | Msg::Renew(Some(w)) => {
                    w.answer(Err(why.clone()));
                }
                _ => {}
            }
        }
    }
}
