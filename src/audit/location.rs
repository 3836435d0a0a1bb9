//! Where the record is kept, as `--audit`, `SLUICE_AUDIT` and
//! `RuntimeBuilder::audit` give it: a path (or `sqlite:PATH`) is a SQLite
//! file; `postgres://user@host:port/db?sslmode=...` is a PostgreSQL
//! database. And where a PostgreSQL store's password comes from: never the
//! location itself (it is recorded, printed and seen in `ps`), but the
//! credential named `audit`, `PGPASSWORD` or `~/.pgpass`.
//!
//! Nothing here shows a password: a location that carries one is refused
//! without repeating it, and a [`PgLocation`] holds none to show.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The credential a PostgreSQL store's password is kept under
/// (`SLUICE_CREDENTIAL_AUDIT`).
pub const CREDENTIAL: &str = "audit";

/// The port a PostgreSQL location without one connects to.
pub const DEFAULT_PORT: u16 = 5432;

/// How long a connection attempt waits without `connect_timeout=SECONDS`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the record is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (the embedded default).
    Sqlite(PathBuf),
    /// A PostgreSQL database (what a fleet shares).
    Postgres(PgLocation),
}

/// A PostgreSQL database, as a `postgres://` URL names it. It holds no
/// password ([`password`] finds one), so it can be shown anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgLocation {
    /// The server's host name or IP address (IPv6 without brackets).
    pub host: String,
    /// The server's port ([`DEFAULT_PORT`] when the URL gives none).
    pub port: u16,
    /// The role to connect as (the OS user's name when the URL gives none,
    /// as libpq does).
    pub user: String,
    /// The database (the user's name when the URL gives none).
    pub dbname: String,
    /// Whether and how the connection is encrypted.
    pub sslmode: SslMode,
    /// Certificates (PEM) trusted beside the public roots under
    /// `verify-full`: a private CA's, or a self-signed server's.
    pub sslrootcert: Option<PathBuf>,
    /// How long a connection attempt waits for the server.
    pub connect_timeout: Duration,
}

/// libpq's `sslmode`, the values sluice takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never encrypt.
    Disable,
    /// Encrypt when the server offers it, without checking its certificate
    /// (libpq's default).
    Prefer,
    /// Always encrypt, without checking the certificate (as libpq does
    /// without a root certificate): safe from listeners, not from a server
    /// in the middle.
    Require,
    /// Always encrypt, and check the certificate against the public roots
    /// (and `sslrootcert`) and its name against the host.
    VerifyFull,
}

impl SslMode {
    /// The name libpq gives it.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn parse(s: &str) -> Result<SslMode, String> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-full" => SslMode::VerifyFull,
            "allow" | "verify-ca" => {
                return Err(format!(
                "sslmode={s} is not one sluice takes: use disable, prefer, require or verify-full \
                     (verify-full checks the certificate and the server's name)"
            ))
            }
            other => {
                return Err(format!(
                    "sslmode={other} is not an sslmode: use disable, prefer, require or verify-full"
                ))
            }
        })
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::Sqlite(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::Sqlite(path.clone())
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::Sqlite(path.to_path_buf())
    }
}

impl From<PgLocation> for Location {
    fn from(pg: PgLocation) -> Location {
        Location::Postgres(pg)
    }
}

impl std::str::FromStr for Location {
    type Err = String;

    fn from_str(given: &str) -> Result<Location, String> {
        Location::parse(given)
    }
}

impl Location {
    /// The location `given` names. A path, or `sqlite:PATH`, is SQLite;
    /// `postgres://` or `postgresql://` is PostgreSQL; another `SCHEME://`
    /// is refused. A URL carrying a password is refused, without repeating
    /// it.
    pub fn parse(given: &str) -> Result<Location, String> {
        if given.is_empty() {
            return Err("the audit location is empty: give a path, sqlite:PATH or \
                        postgres://user@host:port/db"
                .into());
        }
        if let Some(path) = given.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err("sqlite: names no file: give sqlite:PATH".into());
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if given.starts_with("postgres://") || given.starts_with("postgresql://") {
            return PgLocation::parse(given).map(Location::Postgres);
        }
        if let Some(scheme) = url_scheme(given) {
            return Err(format!(
                "the audit location's scheme {scheme}:// is not a store sluice knows: give a path, \
                 sqlite:PATH or postgres://user@host:port/db"
            ));
        }
        Ok(Location::Sqlite(PathBuf::from(given)))
    }
}

/// The scheme of `given` when it reads `SCHEME://...` (a URL, not a path).
fn url_scheme(given: &str) -> Option<&str> {
    let (scheme, _) = given.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first.is_ascii_alphabetic() && rest_ok).then_some(scheme)
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(pg) => pg.fmt(f),
        }
    }
}

impl PgLocation {
    /// A `postgres://` URL's parts. Its text is never repeated in an
    /// error: a URL may carry a password.
    fn parse(given: &str) -> Result<PgLocation, String> {
        let url = url::Url::parse(given)
            .map_err(|e| format!("the audit location is not a valid postgres:// URL ({e})"))?;
        if url.password().is_some() {
            return Err(carries_password(&url));
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']'),
            _ => {
                return Err("the audit URL names no host: postgres://user@host:port/db".into());
            }
        };
        if host.contains(',') {
            return Err("the audit URL names several hosts; sluice connects to one".into());
        }
        let user = match decode(url.username(), "user")? {
            u if u.is_empty() => os_user()?,
            u => u,
        };
        let dbname = match decode(url.path().trim_start_matches('/'), "database")? {
            d if d.is_empty() => user.clone(),
            d if d.contains('/') => {
                return Err(format!(
                    "the audit URL's database `{d}` holds a `/`: postgres://user@host:port/DATABASE"
                ))
            }
            d => d,
        };
        let mut loc = PgLocation {
            host: decode(host, "host")?,
            port: url.port().unwrap_or(DEFAULT_PORT),
            user,
            dbname,
            sslmode: SslMode::Prefer,
            sslrootcert: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        };
        for (key, value) in url.query_pairs() {
            loc.set(&key, &value)?;
        }
        Ok(loc)
    }

    /// Takes the URL's query parameter `key`.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "sslmode" => self.sslmode = SslMode::parse(value)?,
            "sslrootcert" => self.sslrootcert = Some(PathBuf::from(value)),
            "connect_timeout" => {
                let secs: u64 = value.parse().map_err(|_| {
                    format!("connect_timeout={value} is not a whole number of seconds")
                })?;
                self.connect_timeout = Duration::from_secs(secs.max(1));
            }
            "password" => {
                return Err("the audit URL carries a password parameter, which sluice never takes \
                            from a location (it is recorded, printed and shown by ps); remove it, and give \
                            the password as the credential named `audit` (SLUICE_CREDENTIAL_AUDIT), \
                            or as PGPASSWORD or in ~/.pgpass"
                    .into())
            }
            other => {
                return Err(format!(
                    "the audit URL's parameter `{other}` is not one sluice takes: sslmode, \
                     sslrootcert and connect_timeout"
                ))
            }
        }
        Ok(())
    }
}

/// Why a URL with a password is refused, showing the URL without it.
fn carries_password(url: &url::Url) -> String {
    let mut bare = url.clone();
    // Shown without its password, or not at all.
    let shown = match bare.set_password(None) {
        Ok(()) if bare.password().is_none() => format!(" ({bare} with a password after the user)"),
        _ => String::new(),
    };
    format!(
        "the audit URL carries a password{shown}: sluice never takes one from a location, which is \
         recorded, printed and shown by ps. Remove it from the URL, and give the password as the \
         credential named `audit` (SLUICE_CREDENTIAL_AUDIT), or as PGPASSWORD or in ~/.pgpass"
    )
}

/// A URL part's percent-escapes decoded; `what` names the part.
fn decode(part: &str, what: &str) -> Result<String, String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part.get(i + 1..i + 3).unwrap_or("");
            let b = u8::from_str_radix(hex, 16)
                .map_err(|_| format!("the audit URL's {what} holds a bad %-escape"))?;
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("the audit URL's {what} is not UTF-8"))
}

/// `part` %-escaped where a URL needs it.
fn encode(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The name of the user this process runs as: libpq's default role.
fn os_user() -> Result<String, String> {
    match nix::unistd::User::from_uid(nix::unistd::getuid()) {
        Ok(Some(u)) => Ok(u.name),
        _ => Err(
            "the audit URL names no user, and this process's user has no name: \
                  postgres://USER@host:port/db"
                .into(),
        ),
    }
}

impl fmt::Display for PgLocation {
    /// The location as a URL sluice parses back; it holds no password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            encode(&self.host)
        };
        write!(
            f,
            "postgres://{}@{host}:{}/{}?sslmode={}",
            encode(&self.user),
            self.port,
            encode(&self.dbname),
            self.sslmode.name()
        )?;
        if let Some(root) = &self.sslrootcert {
            write!(f, "&sslrootcert={}", encode(&root.to_string_lossy()))?;
        }
        if self.connect_timeout != DEFAULT_CONNECT_TIMEOUT {
            write!(f, "&connect_timeout={}", self.connect_timeout.as_secs())?;
        }
        Ok(())
    }
}

/// The password to connect to `loc` with, from the first that has one:
/// the credential named `audit` in the environment
/// (`SLUICE_CREDENTIAL_AUDIT`), `PGPASSWORD`, then the password file
/// (`PGPASSFILE`, else `~/.pgpass`; as libpq, only when no one but its
/// owner may read it). A password found is cut from whatever sluice records
/// or hands a script, as a loaded credential is.
pub fn password(loc: &PgLocation) -> Option<String> {
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")));
    let found = password_from(loc, |v| std::env::var(v).ok(), file.as_deref());
    if let Some(pw) = &found {
        crate::credentials::remember_secret(pw);
    }
    found
}

/// [`password`] with the environment given as a lookup and the password
/// file as a path.
fn password_from(
    loc: &PgLocation,
    env: impl Fn(&str) -> Option<String>,
    file: Option<&Path>,
) -> Option<String> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(v) = set(&crate::credentials::env_var(CREDENTIAL)) {
        return Some(v.trim().to_string());
    }
    if let Some(v) = set("PGPASSWORD") {
        return Some(v);
    }
    let text = read_private(file?)?;
    text.lines().find_map(|line| pgpass_match(line, loc))
}

/// The file's text, when it is a file only its owner may read or write
/// (libpq ignores a password file others may read).
fn read_private(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.mode() & 0o077 != 0 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The password a `~/.pgpass` line gives for `loc`:
/// `host:port:database:user:password`, `*` matching anything in the first
/// four, `\:` and `\\` standing for `:` and `\`.
fn pgpass_match(line: &str, loc: &PgLocation) -> Option<String> {
    if line.trim_start().starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let port = loc.port.to_string();
    let wanted = [loc.host.as_str(), port.as_str(), &loc.dbname, &loc.user];
    let mut rest = line;
    for want in wanted {
        let (field, after) = pgpass_field(rest)?;
        if field != "*" && field != want {
            return None;
        }
        rest = after;
    }
    Some(unescape(rest))
}

/// The line's first field, unescaped, and what follows its `:`.
fn pgpass_field(line: &str) -> Option<(String, &str)> {
    let mut field = String::new();
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => field.extend(chars.next().map(|(_, c)| c)),
            ':' => return Some((field, &line[i + 1..])),
            c => field.push(c),
        }
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
