//! A run's writer when its store cannot be reached (a PostgreSQL server
//! restarting, a network cut): what it keeps in memory meanwhile, how it
//! tries again, how it tells whether a commit whose answer was lost landed,
//! and what it says when it gives up.
//!
//! The writer turns each message into [`Write`]s (a statement and its
//! values) before it writes any: the statements of a batch that did not
//! reach the store are kept, exactly as linked, and written again once it
//! can be reached. Rows are hashed into the run's chain once, when linked,
//! so what lands after an outage is what the writer's chain and seal cover.
//! A SQLite file is never unreachable (its errors are of other kinds): none
//! of this happens there.

use super::db::{vals, Db, Result, Val};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// How long a run waits for an unreachable store by default before it
/// stops (`--audit-retry`).
pub const DEFAULT_RETRY: Duration = Duration::from_secs(60);

/// The first wait before trying the store again; each next wait doubles.
const FIRST_WAIT: Duration = Duration::from_millis(100);

/// The longest wait between two tries.
const LONGEST_WAIT: Duration = Duration::from_secs(5);

/// Statements (call rows, outcomes, readings, outputs kept by content) the
/// writer keeps in memory while the store is unreachable; past this, or
/// [`QUEUED_BYTES`], no call starts until the store takes them.
pub const QUEUED_ROWS: usize = 10_000;

/// The text of the statements kept in memory, at most (64 MiB).
pub const QUEUED_BYTES: usize = 64 << 20;

/// One statement the writer linked: its SQL, its values, and what it
/// leaves in the store.
pub struct Write {
    /// The statement, in the portable dialect.
    pub sql: &'static str,
    /// Its parameters, `?1` first.
    pub params: Vec<Val>,
    /// What it leaves that can be looked for; `None` for an output kept by
    /// content (an idempotent insert, which a row's effect accompanies),
    /// and in a store that is never unreachable (SQLite's file).
    pub effect: Option<Effect>,
}

impl Write {
    /// A statement with what it leaves in the store.
    pub fn new(sql: &'static str, params: Vec<Val>, effect: Option<Effect>) -> Write {
        Write {
            sql,
            params,
            effect,
        }
    }

    /// The text it holds, as the queue's bound counts it.
    pub fn bytes(&self) -> usize {
        self.params
            .iter()
            .map(|v| match v {
                Val::Text(s) => s.len(),
                _ => 8,
            })
            .sum()
    }
}

/// What a write leaves in the store: found there, it landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Call `n` (`task`, `seq`) of `flow`: its row, hashed `hash`;
    /// `intent` when it is an irreversible call's intent (the call runs
    /// only once it is committed).
    Row {
        task: String,
        seq: u64,
        n: i64,
        flow: String,
        hash: String,
        intent: bool,
    },
    /// The outcome of irreversible call `n`, hashed `hash`.
    Outcome {
        task: String,
        seq: u64,
        n: i64,
        flow: String,
        hash: String,
    },
    /// The clock reading `seq` of `task`.
    Reading { task: String, seq: u64 },
    /// The run's seal.
    Seal(String),
}

/// Whether `effect` is in run `run`'s record: the transaction that wrote it
/// committed (a transaction lands whole or not at all, so one effect of it
/// answers for all).
pub fn landed(db: &dyn Db, run: &str, effect: &Effect) -> Result<bool> {
    let found = match effect {
        Effect::Row {
            task, seq, hash, ..
        } => {
            let sql = "SELECT hash FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3";
            db.value::<String>(sql, vals![run, task, *seq])?
                .is_some_and(|h| h == *hash)
        }
        Effect::Outcome {
            task, seq, hash, ..
        } => {
            let sql = "SELECT outcome_hash FROM calls WHERE run = ?1 AND task = ?2 AND seq = ?3";
            db.value::<Option<String>>(sql, vals![run, task, *seq])?
                .flatten()
                .is_some_and(|h| h == *hash)
        }
        Effect::Reading { task, seq } => {
            let sql = "SELECT count(*) FROM readings WHERE run = ?1 AND task = ?2 AND seq = ?3";
            db.value::<i64>(sql, vals![run, task, *seq])?.unwrap_or(0) > 0
        }
        Effect::Seal(seal) => db
            .value::<Option<String>>("SELECT seal FROM runs WHERE id = ?1", vals![run])?
            .flatten()
            .is_some_and(|s| s == *seal),
    };
    Ok(found)
}

/// The effect that tells whether `writes`, committed as one transaction,
/// landed: the last that leaves one.
pub fn witness(writes: &[Write]) -> Option<Effect> {
    writes.iter().rev().find_map(|w| w.effect.clone())
}

/// Commits made without a sync since the last one that synced, kept
/// until one does: a PostgreSQL server that crashes (`-m immediate`, a
/// kill, a power cut) may lose them though it acknowledged them, and a
/// writer that reconnects writes again the ones it finds missing, so its
/// chain and the store agree. Bounded: past [`UNSYNCED_STATEMENTS`],
/// [`UNSYNCED_BYTES`] or [`UNSYNCED_FOR`], the next commit syncs.
#[derive(Default)]
pub struct Unsynced {
    /// Whether commits are kept at all.
    keep: bool,
    commits: Vec<Vec<Write>>,
    statements: usize,
    bytes: usize,
    since: Option<Instant>,
    /// The run's calls up to this one were committed by a commit that
    /// synced.
    pub synced_through: i64,
}

/// Statements of unsynced commits kept at most before a commit syncs.
const UNSYNCED_STATEMENTS: usize = 2_000;
/// Their text at most (16 MiB).
const UNSYNCED_BYTES: usize = 16 << 20;
/// How long the oldest of them is kept at most.
const UNSYNCED_FOR: Duration = Duration::from_secs(1);

impl Unsynced {
    /// Keeps unsynced commits when `keep` (a store with a server of its
    /// own, which may crash while this process lives: not SQLite's file).
    pub fn new(keep: bool) -> Unsynced {
        Unsynced {
            keep,
            ..Unsynced::default()
        }
    }

    /// A commit of `writes` went through, syncing or not; the run's calls
    /// now reach `n`. `writes` is emptied (kept here, or dropped).
    pub fn committed(&mut self, writes: &mut Vec<Write>, synced: bool, n: i64) {
        if synced || !self.keep {
            writes.clear();
            if !self.commits.is_empty() {
                *self = Unsynced::new(self.keep);
            }
            self.synced_through = n;
            return;
        }
        if writes.is_empty() {
            return;
        }
        self.statements += writes.len();
        self.bytes += writes.iter().map(Write::bytes).sum::<usize>();
        self.since.get_or_insert_with(Instant::now);
        self.commits.push(std::mem::take(writes));
    }

    /// Whether the next commit must sync, so that fewer are kept.
    pub fn due(&self) -> bool {
        self.statements >= UNSYNCED_STATEMENTS
            || self.bytes >= UNSYNCED_BYTES
            || self.since.is_some_and(|t| t.elapsed() >= UNSYNCED_FOR)
    }

    /// Writes again, in the open transaction, the kept commits that run
    /// `run`'s store no longer holds: those after the newest one found
    /// (the server's log keeps commits in order, so one found means every
    /// earlier one is there too).
    pub fn restore(&self, db: &dyn Db, run: &str) -> Result<()> {
        let mut from = 0;
        for (i, writes) in self.commits.iter().enumerate().rev() {
            if let Some(w) = witness(writes) {
                if landed(db, run, &w)? {
                    from = i + 1;
                    break;
                }
            }
        }
        for w in self.commits[from..].iter().flatten() {
            db.execute(w.sql, &w.params)?;
        }
        Ok(())
    }
}

/// An outage as the writer rides it out: since when, and when it tries
/// the store next.
#[derive(Debug)]
pub struct Outage {
    since: Instant,
    next: Instant,
    wait: Duration,
    /// What the store said last.
    pub last: String,
}

impl Outage {
    /// An outage beginning now; its first failure is told with
    /// [`Outage::failed`].
    pub fn new() -> Outage {
        let now = Instant::now();
        Outage {
            since: now,
            next: now,
            wait: FIRST_WAIT,
            last: String::new(),
        }
    }

    /// A write (the first, or a try) failed with `error`: `false` once
    /// `budget`, counted from the outage's start, is spent; else the next
    /// try is set, after a wait that doubles from [`FIRST_WAIT`] up to
    /// [`LONGEST_WAIT`], the last try coming as the budget runs out.
    pub fn failed(&mut self, error: &str, budget: Duration) -> bool {
        self.last = error.to_string();
        let now = Instant::now();
        let deadline = self.since + budget;
        if now >= deadline {
            return false;
        }
        self.next = (now + self.wait).min(deadline);
        self.wait = (self.wait * 2).min(LONGEST_WAIT);
        true
    }

    /// How long until the next try (zero: now).
    pub fn due_in(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// How long the store has been unreachable.
    pub fn lasted(&self) -> Duration {
        self.since.elapsed()
    }
}

/// A duration as the flags take it: `500ms`, `30s`, `2m`, `1h`, `0`.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| format_help(text))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format_help(text))
}

fn format_help(text: &str) -> String {
    format!(
        "{text:?} is not a duration: give a whole number with its unit (500ms, 30s, 2m, 1h), or 0 for none"
    )
}

/// A duration as [`parse_duration`] reads it back.
pub fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0".to_string(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1_000) => format!("{}s", ms / 1_000),
        _ => format!("{ms}ms"),
    }
}

/// What a run whose store was lost recorded and did not: the words of its
/// stop.
pub struct Lost<'a> {
    /// The store, as messages name it.
    pub store: &'a str,
    /// The retry budget that ran out.
    pub budget: Duration,
    /// How long the store was unreachable.
    pub lasted: Duration,
    /// What the store said last.
    pub last: &'a str,
    /// The calls committed: #1 to this.
    pub committed: i64,
    /// The calls committed by a commit that synced: #1 to this (a server
    /// that crashed may have lost the rest).
    pub synced: i64,
    /// Calls whose commit's answer was lost: perhaps recorded.
    pub uncertain: &'a [Write],
    /// What was linked and never committed.
    pub queued: &'a [Write],
    /// Irreversible calls whose intent is committed and whose outcome is
    /// not: (n, flow).
    pub open: &'a [(i64, String)],
}

/// Calls named in a message at most; the rest are counted.
const NAMED: usize = 5;

impl Lost<'_> {
    /// The stop's message: why, what the record holds, what it lacks.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "the audit store {} could not be reached for {:.1} s, the retry budget ({}, --audit-retry), \
             so the run stops and starts no further call (last error: {})",
            self.store,
            self.lasted.as_secs_f64(),
            show_duration(self.budget),
            self.last
        );
        let _ = match self.committed {
            0 => write!(s, ". Recorded: no call of the run"),
            k => write!(s, ". Recorded: calls #1 to #{k}"),
        };
        let first = self.synced.max(0) + 1;
        let _ = match self.committed - first {
            0 => write!(
                s,
                " (#{first} was committed without a sync, which a server that crashed may have lost)"
            ),
            d if d > 0 => write!(
                s,
                " (#{first} to #{} were committed without a sync, which a server that crashed may have lost)",
                self.committed
            ),
            _ => Ok(()),
        };
        // An intent whose commit went unanswered may be there too: its
        // call did not run (see "Not run" below), but its row may be kept.
        let maybe = rows(self.uncertain, |_| true);
        let _ = match (maybe.first(), maybe.last()) {
            (Some(first), Some(last)) if first.0 == last.0 => write!(
                s,
                ", and perhaps #{} (the connection was lost as it was committed)",
                first.0
            ),
            (Some(first), Some(last)) => write!(
                s,
                ", and perhaps #{} to #{} (the connection was lost as they were committed)",
                first.0, last.0
            ),
            _ => Ok(()),
        };
        let ran = rows(self.queued, |intent| !intent);
        let readings = self
            .queued
            .iter()
            .filter(|w| matches!(w.effect, Some(Effect::Reading { .. })))
            .count();
        let _ = match (ran.len(), readings) {
            (0, 0) => write!(s, ". Not recorded: nothing that ran"),
            (0, r) => write!(s, ". Not recorded: {r} clock reading(s)"),
            (n, r) => write!(
                s,
                ". Not recorded: {n} call(s) that ran ({}){}",
                named(&ran),
                if r > 0 {
                    format!(" and {r} clock reading(s)")
                } else {
                    String::new()
                }
            ),
        };
        let mut unknown: Vec<(i64, String)> = self.open.to_vec();
        unknown.sort();
        if !unknown.is_empty() {
            let _ = write!(
                s,
                ". Outcome unknown: {} (irreversible, its intent recorded; it ran or was running, and its \
                 outcome could not be recorded)",
                named(&unknown)
            );
        }
        let mut waiting = rows(self.uncertain, |intent| intent);
        waiting.extend(rows(self.queued, |intent| intent));
        if !waiting.is_empty() {
            let _ = write!(
                s,
                ". Not run: {} (irreversible, waiting for its intent to be recorded)",
                named(&waiting)
            );
        }
        s.push_str(". No irreversible call ran without its intent recorded");
        s
    }
}

/// The calls rows among `writes` whose intent flag `keep` accepts, as
/// (n, flow), in chain order.
fn rows(writes: &[Write], keep: impl Fn(bool) -> bool) -> Vec<(i64, String)> {
    writes
        .iter()
        .filter_map(|w| match &w.effect {
            Some(Effect::Row {
                n, flow, intent, ..
            }) if keep(*intent) => Some((*n, flow.clone())),
            _ => None,
        })
        .collect()
}

/// `#13 read, #14 bash` for the first few, then how many more.
fn named(calls: &[(i64, String)]) -> String {
    let mut s = calls
        .iter()
        .take(NAMED)
        .map(|(n, flow)| format!("#{n} {flow}"))
        .collect::<Vec<_>>()
        .join(", ");
    if calls.len() > NAMED {
        let _ = write!(s, " and {} more", calls.len() - NAMED);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: i64, flow: &str, intent: bool) -> Write {
        let effect = Effect::Row {
            task: "0".into(),
            seq: n as u64,
            n,
            flow: flow.into(),
            hash: format!("h{n}"),
            intent,
        };
        Write::new("INSERT", vec![Val::from("x")], Some(effect))
    }

    #[test]
    fn durations_read_with_their_unit_and_zero_alone() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in [
            "",
            "30",
            "s",
            "-1s",
            "1.5s",
            "3 s",
            "2d",
            "99999999999999999999h",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "{bad:?} is not a duration: give a whole number with its unit (500ms, 30s, 2m, 1h), or 0 for none"
                )
            );
        }
        for d in ["0", "500ms", "30s", "2m", "1h", "90s", "1500ms"] {
            assert_eq!(show_duration(parse_duration(d).unwrap()), d);
        }
    }

    #[test]
    fn the_waits_double_to_their_cap_and_the_last_try_comes_at_the_budget() {
        let mut o = Outage::new();
        let budget = Duration::from_secs(60);
        let mut waits = Vec::new();
        for _ in 0..8 {
            waits.push(o.wait.as_millis());
            assert!(o.failed("down", budget));
            assert!(o.due_in() <= Duration::from_millis(waits[waits.len() - 1] as u64));
        }
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        // A budget that runs out sooner: the next try is at its end, and a
        // failure past it gives up.
        let mut short = Outage::new();
        assert!(short.failed("down", Duration::from_millis(150)));
        assert!(short.failed("down", Duration::from_millis(150)));
        assert!(short.due_in() <= Duration::from_millis(150));
        std::thread::sleep(Duration::from_millis(160));
        assert!(!short.failed("still down", Duration::from_millis(150)));
        assert_eq!(short.last, "still down");
        // No budget: the first failure gives up.
        assert!(!Outage::new().failed("down", Duration::ZERO));
    }

    #[test]
    fn the_stop_says_what_is_recorded_what_is_not_and_what_is_unknown() {
        let queued = [
            row(8, "read", false),
            row(9, "grep", false),
            Write::new(
                "INSERT",
                vec![],
                Some(Effect::Reading {
                    task: "0".into(),
                    seq: 1,
                }),
            ),
            row(10, "bash", true),
        ];
        let lost = Lost {
            store: "postgres://u@h:5432/d",
            budget: Duration::from_secs(3),
            lasted: Duration::from_millis(3040),
            last: "connection refused",
            committed: 5,
            synced: 5,
            uncertain: &[row(6, "read", false), row(7, "read", false)],
            queued: &queued,
            open: &[(5, "bash".to_string())],
        };
        assert_eq!(
            lost.describe(),
            "the audit store postgres://u@h:5432/d could not be reached for 3.0 s, the retry budget (3s, \
             --audit-retry), so the run stops and starts no further call (last error: connection refused). \
             Recorded: calls #1 to #5, and perhaps #6 to #7 (the connection was lost as they were committed). \
             Not recorded: 2 call(s) that ran (#8 read, #9 grep) and 1 clock reading(s). Outcome unknown: \
             #5 bash (irreversible, its intent recorded; it ran or was running, and its outcome could not be \
             recorded). Not run: #10 bash (irreversible, waiting for its intent to be recorded). No \
             irreversible call ran without its intent recorded"
        );
        let many: Vec<Write> = (1..=8).map(|n| row(n, "read", false)).collect();
        let none = Lost {
            committed: 0,
            synced: 0,
            uncertain: &[],
            queued: &many,
            open: &[],
            ..lost
        };
        let said = none.describe();
        assert!(
            said.contains(
                ". Recorded: no call of the run. Not recorded: 8 call(s) that ran (#1 read, #2 read, #3 read, \
                 #4 read, #5 read and 3 more). No irreversible"
            ),
            "{said}"
        );
        // The full suite's case: the commit of a bash call's intent lost
        // its answer and landed; the message must allow for its row.
        let intent = Lost {
            uncertain: &[row(6, "bash", true)],
            queued: &[],
            open: &[],
            ..lost
        };
        let said = intent.describe();
        assert!(
            said.contains(
                "Recorded: calls #1 to #5, and perhaps #6 (the connection was lost as it was committed). \
                 Not recorded: nothing that ran. Not run: #6 bash (irreversible, waiting for its intent to be \
                 recorded)"
            ),
            "{said}"
        );
        let unsynced = Lost { synced: 3, ..lost };
        assert!(
            unsynced.describe().contains(
                "Recorded: calls #1 to #5 (#4 to #5 were committed without a sync, which a server that \
                 crashed may have lost), and perhaps #6"
            ),
            "{}",
            unsynced.describe()
        );
    }
}
