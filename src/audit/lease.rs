//! Fencing: who writes a run. A run's row holds the lease of the process
//! writing it (`owner`, and `attempt`, a number that only grows). Every
//! batch the writer commits first checks, in its own transaction, that
//! the run's attempt is still its own; a process that takes the run over
//! raises the number, so the old writer's next batch is refused
//! ([`ErrorKind::Fenced`]) and the run stops there: no call starts after
//! a refused write. On PostgreSQL the check locks the run's row
//! (`FOR SHARE`) until the batch commits, so a takeover waits for a batch
//! in flight and no batch commits after it.

use super::db::{vals, Backend, Begin, Db, Error, ErrorKind, Result};
use std::time::Duration;

/// How long a lease lasts without renewal: a writer that stops (SIGSTOP,
/// a stall, a partition) loses it this long after its last renewal, and a
/// takeover of its run waits until then.
pub const TTL: Duration = Duration::from_secs(10);

/// How often a writer renews its lease.
pub const RENEW: Duration = Duration::from_secs(3);

/// How close to its end a lease is treated as gone: a writer does not
/// start a call on a lease this near to running out (clocks differ).
pub const MARGIN: Duration = Duration::from_secs(2);

/// When a lease taken or renewed now runs out, in ms since the epoch.
pub fn until_from_now() -> i64 {
    super::now_ms() + TTL.as_millis() as i64
}

/// This process, as a lease's owner: `HOST:PID:START` (START the process's
/// start time in clock ticks after boot, so a reused pid is not taken for
/// it).
pub fn me() -> String {
    let pid = std::process::id();
    let start = super::store::process_start(pid).unwrap_or(0);
    format!("{}:{pid}:{start}", host())
}

/// This machine's name, as leases name it.
pub fn host() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Whether `owner` (a lease's `HOST:PID:START`) is a process of this
/// machine that is gone; `false` for another machine's (it cannot be told
/// from here) and for a live one.
pub fn owner_gone_here(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(start), Ok(pid)) = (start.parse::<u64>(), pid.parse::<u32>()) else {
        return false;
    };
    host == self::host() && !super::store::process_alive(pid, start)
}

/// Checks, inside the open write transaction, that run `run`'s lease is
/// still `attempt`: the first statement of every batch the writer commits.
pub fn check(db: &dyn Db, run: &str, attempt: i64) -> Result<()> {
    let sql = match db.backend() {
        Backend::Sqlite => "SELECT attempt, owner FROM runs WHERE id = ?1",
        Backend::Postgres => "SELECT attempt, owner FROM runs WHERE id = ?1 FOR SHARE",
    };
    let row = db.first(sql, vals![run])?;
    let Some(row) = row else {
        return Err(Error::new(
            ErrorKind::Fenced,
            format!("run {run} is no longer in the record: it was deleted while it ran"),
        ));
    };
    let now: i64 = row.get(0)?;
    if now == attempt {
        return Ok(());
    }
    let owner: Option<String> = row.get(1)?;
    Err(Error::new(
        ErrorKind::Fenced,
        format!(
            "run {run} was taken over by {} (lease {now}; this process held lease {attempt}): \
             this process stops the run and starts no call after it",
            owner.as_deref().unwrap_or("another process")
        ),
    ))
}

/// Renews run `run`'s lease `attempt` until `until` (ms since the epoch),
/// inside the writer's open transaction, after [`check`].
pub fn renew(db: &dyn Db, run: &str, attempt: i64, until: i64) -> Result<()> {
    db.execute(
        "UPDATE runs SET lease_ms = ?3 WHERE id = ?1 AND attempt = ?2",
        vals![run, attempt, until],
    )
    .map(|_| ())
}

/// A run's lease as read: attempt, owner, status and expiry.
type Held = (i64, Option<String>, String, Option<i64>);

/// What a takeover found: the lease it took, and who held the run before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The new lease's number.
    pub attempt: i64,
    /// Who held it before, if anyone was named.
    pub was: Option<String>,
}

/// The exit status of a `sluice resume` that may succeed if given again
/// later (EX_TEMPFAIL): a takeover refused because the run's writer still
/// holds its lease (it runs out), or a resume whose record became
/// unreachable while it read it (a server restarting). A fleet worker's
/// next attempt is that later try.
pub const EXIT_TRY_LATER: u8 = 75;

/// Why a takeover did not take the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotTaken {
    /// What to tell the person.
    pub message: String,
    /// The run's writer still holds its lease: the same takeover later
    /// may succeed.
    pub held: bool,
}

impl std::fmt::Display for NotTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for NotTaken {
    fn from(message: String) -> NotTaken {
        NotTaken {
            message,
            held: false,
        }
    }
}

/// Takes run `run` over for `owner`: raises its attempt number (fencing
/// whoever held it), to `floor` at least (a fleet's attempt number, so
/// the number follows the engine's), and, when it still says `running`, marks it
/// `interrupted`, naming the new owner. Exactly one of several processes
/// taking one run over at once gets it; the others get an error naming the
/// owner that did.
pub fn take_over(
    db: &dyn Db,
    run: &str,
    owner: &str,
    floor: i64,
) -> std::result::Result<Taken, NotTaken> {
    let read = |db: &dyn Db| -> Result<Option<Held>> {
        let sql = "SELECT attempt, owner, status, lease_ms FROM runs WHERE id = ?1";
        match db.first(sql, vals![run])? {
            Some(r) => Ok(Some((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))),
            None => Ok(None),
        }
    };
    let db_error = |e: Error| format!("cannot take run {run} over: {e}");
    let (attempt, was, status, lease_ms) = read(db)
        .map_err(db_error)?
        .ok_or_else(|| format!("no run {run} in the record"))?;
    let left = lease_ms.unwrap_or(0) - super::now_ms();
    if status == "running" && left > 0 && !was.as_deref().is_some_and(owner_gone_here) {
        let message = format!(
            "run {run} is running, its lease held by {} for {:.1} s more: a writer that stopped \
             renewing it (stopped, stuck or cut off) loses it {} s after its last renewal; take the \
             run over then",
            was.as_deref().unwrap_or("another process"),
            left as f64 / 1000.0,
            TTL.as_secs()
        );
        return Err(NotTaken {
            message,
            held: true,
        });
    }
    let next = (attempt + 1).max(floor);
    let changed = db
        .transaction(Begin::Rows, || {
            let n = db.execute(
                "UPDATE runs SET attempt = ?3, owner = ?4, lease_ms = ?5 WHERE id = ?1 AND attempt = ?2",
                vals![run, attempt, next, owner, until_from_now()],
            )?;
            if n == 1 {
                db.execute(
                    "UPDATE runs SET status = 'interrupted', error = ?2 \
                     WHERE id = ?1 AND status = 'running'",
                    vals![run, format!("taken over by {owner}")],
                )?;
            }
            Ok(n)
        })
        .map_err(db_error)?;
    if changed == 1 {
        return Ok(Taken { attempt: next, was });
    }
    let now = read(db).map_err(db_error)?.and_then(|(_, o, _, _)| o);
    Err(format!(
        "run {run} was taken over by {} while this process tried to: only one proceeds",
        now.as_deref().unwrap_or("another process")
    )
    .into())
}

/// Whether `e` is a refused write of a writer whose run was taken over.
pub fn is_fenced(e: &Error) -> bool {
    e.kind == ErrorKind::Fenced
}
