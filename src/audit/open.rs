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
    let db: Box<dyn Db + Send> = match loc {
        Location::Sqlite(path) => Box::new(store::open(path)?),
        Location::Postgres(pg) => Box::new(super::postgres::open(pg, password)?),
    };
    Ok(Opened {
        db,
        at: loc.clone(),
        name: loc.to_string(),
        again: reader(loc, password),
    })
}

/// Opens the record at `loc` to read it: a SQLite file that is missing or
/// not a record is an error saying so.
pub fn for_reading(loc: &Location, password: Option<&str>) -> Result<Opened, String> {
    let db: Box<dyn Db + Send> = match loc {
        Location::Sqlite(path) => Box::new(store::open_existing(path)?),
        Location::Postgres(pg) => Box::new(super::postgres::open(pg, password)?),
    };
    Ok(Opened {
        db,
        at: loc.clone(),
        name: loc.to_string(),
        again: reader(loc, password),
    })
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
    match &store.at {
        Location::Sqlite(path) => claim_file(path, id).map(Claim::File),
        Location::Postgres(_) => {
            let session = (store.again)()?;
            let key = crate::digest::sha256_hex(format!("sluice-resume:{id}").as_bytes());
            let key = i64::from_str_radix(&key[..15], 16).unwrap_or(0);
            let held = (&*session as &dyn Db)
                .value::<bool>(
                    "SELECT pg_try_advisory_lock(CAST(?1 AS BIGINT))",
                    super::db::vals![key],
                )
                .map_err(|e| format!("cannot claim run {id}'s resume in {}: {e}", store.name))?;
            if held != Some(true) {
                return Err(busy(id));
            }
            Ok(Claim::Session(session))
        }
    }
}

fn busy(id: &str) -> String {
    format!(
        "run {id} is being resumed right now by another sluice; wait for that resume to end, then resume \
         the run it records instead (`sluice audit list` shows it), so no call runs twice"
    )
}

fn claim_file(db: &Path, id: &str) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
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
            format!(
                "cannot open {} to claim run {id}'s resume: {e}",
                path.display()
            )
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        if e == nix::errno::Errno::EWOULDBLOCK {
            busy(id)
        } else {
            format!(
                "cannot lock {} to claim run {id}'s resume: {e}",
                path.display()
            )
        }
    })
}
