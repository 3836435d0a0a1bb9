//! From where a record is ([`Location`]) to its store ([`Db`]): the one
//! place that knows both backends by name. A command opens its record
//! here; everything after works through [`Db`].

use super::db::Db;
use super::location::{self, Location};
use super::replay::{Opener, Reopen};

use super::store;
use std::path::Path;
use std::sync::Arc;

/// A record's store, opened, with what names it in messages and what opens
/// it again (a replay's reader, a verification beside the run).
pub struct Opened {
    /// Where it is.
    pub at: Location,
    /// The store.
    pub db: Box<dyn Db + Send>,
    /// The location as messages show it: a path, or a URL without its
    /// password.
    pub name: String,
    /// Opens another connection to the same store.
    pub again: Opener,
}

impl Reopen for Opened {
    fn opener(&self) -> Result<Opener, String> {
        Ok(self.again.clone())
    }
}

/// The password for `loc`: the credential named `audit` (from
/// `credentials`, the file `--credentials` gives, or
/// `SLUICE_CREDENTIAL_AUDIT`), else `PGPASSWORD`, else `~/.pgpass`. `None`
/// for a SQLite file, or when none is set. A password found is cut from
/// everything the run records or hands a script.
pub fn password(loc: &Location, credentials: Option<&Path>) -> Option<String> {
    let Location::Postgres(pg) = loc else {
        return None;
    };
    let named = credentials
        .map(crate::credentials::Credentials::with_file)
        .and_then(|c| c.get(location::CREDENTIAL).ok().flatten());
    match named {
        Some(secret) => {
            let pw = secret.expose().to_string();
            crate::credentials::remember_secret(&pw);
            Some(pw)
        }
        None => location::password(pg),
    }
}

/// Opens the record at `loc` to write: a SQLite file is created when
/// missing, a PostgreSQL database gets its schema on first use.
pub fn for_writing(loc: &Location, password: Option<&str>) -> Result<Opened, String> {
    opened(loc, password, store::open)
}

/// Opens the record at `loc` to read it: a SQLite file that is missing or
/// not a record is an error saying so.
pub fn for_reading(loc: &Location, password: Option<&str>) -> Result<Opened, String> {
    opened(loc, password, store::open_existing)
}

/// [`for_reading`] with the password the credentials give ([`password`]):
/// how a command that only reads opens the record it is given.
pub fn to_read(loc: &Location, credentials: Option<&Path>) -> Result<Opened, String> {
    for_reading(loc, password(loc, credentials).as_deref())
}

/// What opens read-only connections to the record at `loc`, with the
/// password the credentials give, without opening one now: for a reader
/// beside a live run (its OpenTelemetry exporter), which writes nothing
/// and sweeps nothing.
pub fn readers(loc: &Location, credentials: Option<&Path>) -> Opener {
    reader(loc, password(loc, credentials).as_deref())
}

/// The record at `loc`, a SQLite file opened by `sqlite`.
fn opened(
    loc: &Location,
    password: Option<&str>,
    sqlite: fn(&Path) -> Result<rusqlite::Connection, String>,
) -> Result<Opened, String> {
    let db: Box<dyn Db + Send> = match loc {
        Location::Sqlite(path) => Box::new(sqlite(path)?),
        Location::Postgres(pg) => postgres(pg, password)?,
    };
    Ok(Opened {
        db,
        at: loc.clone(),
        name: loc.to_string(),
        again: reader(loc, password),
    })
}

/// Opens a PostgreSQL record, and marks its runs whose process on this
/// machine is gone as interrupted (the SQLite store does so as it opens).
fn postgres(
    pg: &super::location::PgLocation,
    password: Option<&str>,
) -> Result<Box<dyn Db + Send>, String> {
    let db = super::postgres::open(pg, password)?;
    store::sweep(&db).map_err(|e| format!("audit store {pg}: {e}"))?;
    Ok(Box::new(db))
}

/// What opens more connections to read the record at `loc`.
fn reader(loc: &Location, password: Option<&str>) -> Opener {
    let loc = loc.clone();
    let password = password.map(str::to_string);
    Arc::new(move || match &loc {
        Location::Sqlite(path) => super::sqlite::reader(path.display().to_string())(),
        Location::Postgres(pg) => super::postgres::open(pg, password.as_deref())
            .map(|db| Box::new(db) as Box<dyn Db + Send>),
    })
}

/// The claim on resuming a run, held while it lives; see [`claim_resume`].
// Never read: what each holds is released when it drops.
#[allow(dead_code)]
pub enum Claim {
    /// An exclusive lock on a file beside a SQLite record (the kernel drops
    /// it when the process ends, however it ends).
    File(nix::fcntl::Flock<std::fs::File>),
    /// A PostgreSQL session holding an advisory lock on the run (the server
    /// drops it when the session ends, however the process ends).
    Session(Box<dyn Db + Send>),
}

/// Claims the resume of run `id` in `store`: refused while another resume
/// of that run, on this machine or another sharing the record, holds it.
pub fn claim_resume(store: &Opened, id: &str) -> Result<Claim, String> {
    claim(store, id).map_err(|e| match e {
        Busy => busy(store, id),
        Failed(why) => why,
    })
}

/// Why a claim was not had.
enum Refused {
    /// Another resume holds it.
    Busy,
    /// The claim could not be tried.
    Failed(String),
}
use Refused::{Busy, Failed};

fn claim(store: &Opened, id: &str) -> Result<Claim, Refused> {
    match &store.at {
        Location::Sqlite(path) => claim_file(path, id).map(Claim::File),
        Location::Postgres(_) => {
            let session = (store.again)().map_err(Failed)?;
            let key = crate::digest::sha256_hex(format!("sluice-resume:{id}").as_bytes());
            let key = i64::from_str_radix(&key[..15], 16).unwrap_or(0);
            let held = (&*session as &dyn Db)
                .value::<bool>(
                    "SELECT pg_try_advisory_lock(CAST(?1 AS BIGINT))",
                    super::db::vals![key],
                )
                .map_err(|e| {
                    Failed(format!(
                        "cannot claim run {id}'s resume in {}: {e}",
                        store.name
                    ))
                })?;
            if held != Some(true) {
                return Err(Busy);
            }
            Ok(Claim::Session(session))
        }
    }
}

/// Who holds run `id`'s lease now: its owner as the record says, while
/// the lease is fresh and the owner not a process of this machine that is
/// gone (a killed run's lease outlives it by up to the lease's length).
fn holder(store: &Opened, id: &str) -> Option<String> {
    let db: &dyn Db = &*store.db;
    let row = db
        .first(
            "SELECT owner, lease_ms FROM runs WHERE id = ?1",
            super::db::vals![id],
        )
        .ok()??;
    let (owner, until): (Option<String>, Option<i64>) = (row.get(0).ok()?, row.get(1).ok()?);
    let owner = owner?;
    let fresh = until.is_some_and(|t| t > super::now_ms());
    (fresh && !super::lease::owner_gone_here(&owner)).then_some(owner)
}

/// The refusal of a second resume, naming the process that resumes the
/// run: the winner takes the run's lease right after its claim, so its
/// name is waited for, briefly.
fn busy(store: &Opened, id: &str) -> String {
    let started = std::time::Instant::now();
    let mut now = holder(store, id);
    while now.is_none() && started.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        now = holder(store, id);
    }
    let who = now.map_or_else(|| "by another sluice".to_string(), |o| format!("by {o}"));
    format!(
        "run {id} is being resumed right now {who}; only one resume of a run proceeds: wait for that one \
         to end, then resume the run it records instead (`sluice audit list` shows it), so no call runs twice"
    )
}

fn claim_file(db: &Path, id: &str) -> Result<nix::fcntl::Flock<std::fs::File>, Refused> {
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = db.with_file_name(format!("{name}.resume-{id}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| {
            Failed(format!(
                "cannot open {} to claim run {id}'s resume: {e}",
                path.display()
            ))
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        if e == nix::errno::Errno::EWOULDBLOCK {
            Busy
        } else {
            Failed(format!(
                "cannot lock {} to claim run {id}'s resume: {e}",
                path.display()
            ))
        }
    })
}
