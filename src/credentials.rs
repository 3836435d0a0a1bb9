//! Named credentials: the secrets a provider needs (an API key), found by
//! name rather than read from whatever the environment happens to hold.
//!
//! [`Credentials::get`] looks in two places, in this order:
//!
//! 1. the environment variable `SLUICE_CREDENTIAL_<NAME>`: the name
//!    uppercased, with `-` and `.` written as `_` (`exa` is
//!    `SLUICE_CREDENTIAL_EXA`, `exa-api-key` is
//!    `SLUICE_CREDENTIAL_EXA_API_KEY`); an empty value counts as unset;
//! 2. the credentials file: `$XDG_CONFIG_HOME/sluice/credentials`, else
//!    `~/.config/sluice/credentials`, or the file given with
//!    [`Credentials::with_file`] (`sluice run --credentials FILE`). One
//!    `name = value` a line; `#` starts a comment line; blank lines are
//!    skipped; a value may be wrapped in matching quotes; the last line for a
//!    name wins, and an empty value is unset.
//!
//! A credentials file that group or others may read or write is refused
//! (`permission_denied`, asking for `chmod 600`) without being read. A value
//! comes back as a [`Secret`], whose `Debug` and `Display` print
//! `[redacted]`; no error this module raises holds a value. Commands never
//! inherit `SLUICE_*` variables (see `exec::env`), so the environment backend
//! does not leak keys into `bash`.

use crate::error::{ErrorCode, FlowError, FlowResult};
use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The prefix of the environment backend's variables.
pub const ENV_PREFIX: &str = "SLUICE_CREDENTIAL_";

/// What replaces a secret wherever it turns up.
pub const MARK: &str = "[redacted]";

/// `bytes` with every copy of `secret` replaced by [`MARK`].
pub fn cut_bytes(bytes: &[u8], secret: &[u8]) -> Vec<u8> {
    if secret.is_empty() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for at in memchr::memmem::find_iter(bytes, secret) {
        out.extend_from_slice(&bytes[from..at]);
        out.extend_from_slice(MARK.as_bytes());
        from = at + secret.len();
    }
    out.extend_from_slice(&bytes[from..]);
    out
}

/// `text` with every copy of `secret` replaced by [`MARK`].
pub fn cut_text(text: &mut String, secret: &str) {
    if !secret.is_empty() && text.contains(secret) {
        *text = text.replace(secret, MARK);
    }
}

/// `v` with every copy of `secret` replaced by [`MARK`], in its strings and
/// its objects' keys.
pub fn cut_value(v: &mut serde_json::Value, secret: &str) {
    use serde_json::Value;
    match v {
        Value::String(s) => cut_text(s, secret),
        Value::Array(items) => items.iter_mut().for_each(|i| cut_value(i, secret)),
        Value::Object(map) => {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(mut k, mut v)| {
                    cut_value(&mut v, secret);
                    cut_text(&mut k, secret);
                    (k, v)
                })
                .collect();
        }
        _ => {}
    }
}

/// A credential's value. It prints as `[redacted]`; [`Secret::expose`] is
/// the one way to the text, for the header that carries it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself. Put it where it is needed (a request header) and
    /// nowhere else: not in a message, a detail or a log line.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where credentials come from: the environment, then a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The file backend; `None` when there is no home folder to find it in.
    file: Option<PathBuf>,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            file: default_file(),
        }
    }
}

/// `$XDG_CONFIG_HOME/sluice/credentials` (an absolute XDG_CONFIG_HOME), else
/// `$HOME/.config/sluice/credentials`.
pub fn default_file() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let config = xdg.or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".config"))
    })?;
    Some(config.join("sluice").join("credentials"))
}

/// The environment variable that holds credential `name`.
pub fn env_var(name: &str) -> String {
    let tail: String = name
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    format!("{ENV_PREFIX}{tail}")
}

/// Every credential value this process has loaded, so the audit record
/// can cut them wherever they appear (a provider echoing its key, a script
/// printing it).
static LOADED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn remember(secret: &Secret) {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if !loaded.iter().any(|s| s == secret.expose()) {
        loaded.push(secret.expose().to_string());
    }
}

/// The values of the credentials loaded so far: for redaction only.
pub fn loaded() -> Vec<String> {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Credentials {
    /// The environment, then the default file.
    pub fn new() -> Credentials {
        Credentials::default()
    }

    /// The environment, then `path` instead of the default file.
    pub fn with_file(path: impl Into<PathBuf>) -> Credentials {
        Credentials {
            file: Some(path.into()),
        }
    }

    /// Credential `name`: from the environment, else from the file; `None`
    /// when neither has it. A file others may read is `permission_denied`.
    pub fn get(&self, name: &str) -> FlowResult<Option<Secret>> {
        let found = self.get_with(name, |var| std::env::var(var).ok())?;
        if let Some(secret) = &found {
            remember(secret);
        }
        Ok(found)
    }

    /// [`Credentials::get`] with the environment given as a lookup.
    fn get_with(
        &self,
        name: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> FlowResult<Option<Secret>> {
        if let Some(value) = env(&env_var(name)) {
            let value = value.trim();
            if !value.is_empty() {
                return Ok(Some(Secret::new(value)));
            }
        }
        match &self.file {
            Some(path) => from_file(path, name),
            None => Ok(None),
        }
    }

    /// Credential `name`, which `who` needs: a missing one is
    /// `provider_unavailable` saying both ways to set it.
    pub fn require(&self, name: &str, who: &str) -> FlowResult<Secret> {
        match self.get(name)? {
            Some(secret) => Ok(secret),
            None => Err(self.missing(name, who)),
        }
    }

    /// The error for a credential nobody set; names where to set it, never a
    /// value.
    pub fn missing(&self, name: &str, who: &str) -> FlowError {
        let var = env_var(name);
        let file = match &self.file {
            Some(path) => format!(
                ", or add the line `{name} = YOUR_KEY` to {} (chmod 600)",
                path.display()
            ),
            None => format!(
                ", or add the line `{name} = YOUR_KEY` to a credentials file given with --credentials FILE (chmod 600)"
            ),
        };
        let mut e = FlowError::new(
            ErrorCode::ProviderUnavailable,
            format!("{who} needs credential `{name}`, which is not set; set {var} in sluice's environment{file}"),
        )
        .with("credential", name)
        .with("env", var);
        if let Some(path) = &self.file {
            e = e.with("file", path.display().to_string());
        }
        e
    }
}

/// A credentials file larger than this is read no further.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Credential `name` from the file at `path`; a missing file holds nothing.
fn from_file(path: &Path, name: &str) -> FlowResult<Option<Secret>> {
    let shown = path.display().to_string();
    let failed = |e: std::io::Error| {
        FlowError::new(
            ErrorCode::CommandFailed,
            format!("cannot read the credentials file {shown}: {e}"),
        )
        .with("file", shown.clone())
    };
    // Non-blocking, so a FIFO planted at the path cannot hang the run
    // before it is found not to be a regular file.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(FlowError::new(
                ErrorCode::PermissionDenied,
                format!("the credentials file {shown} cannot be opened: {e}"),
            )
            .with("file", shown))
        }
        Err(e) => return Err(failed(e)),
    };
    // Judged on the open file, so what is checked is what is read.
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(FlowError::new(
            ErrorCode::PermissionDenied,
            format!("the credentials file {shown} is not a regular file"),
        )
        .with("file", shown));
    }
    check_mode(path, meta_mode(&meta))?;
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(FlowError::new(
            ErrorCode::PermissionDenied,
            format!("the credentials file {shown} belongs to another user, who could choose its keys; it must be yours (chown it, or use your own file with --credentials)"),
        )
        .with("file", shown));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| {
            // Only the kind: a decoding error never quotes the bytes, but say
            // nothing of them anyway.
            FlowError::new(
                ErrorCode::CommandFailed,
                format!("cannot read the credentials file {shown}: {}", e.kind()),
            )
            .with("file", shown.clone())
        })?;
    let last = parse(&text, path)?
        .into_iter()
        .rev()
        .find_map(|(n, v)| (n == name).then_some(v));
    Ok(last.filter(|v| !v.expose().is_empty()))
}

#[cfg(unix)]
fn meta_mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode() & 0o7777
}

#[cfg(not(unix))]
fn meta_mode(_meta: &std::fs::Metadata) -> u32 {
    0o600
}

/// A file group or others may read or write is refused.
fn check_mode(path: &Path, mode: u32) -> FlowResult<()> {
    if mode & 0o066 == 0 {
        return Ok(());
    }
    let shown = path.display().to_string();
    Err(FlowError::new(
        ErrorCode::PermissionDenied,
        format!(
            "the credentials file {shown} has mode {mode:04o}, so other users may read or change it; \
             sluice did not read it. Run `chmod 600 {shown}`."
        ),
    )
    .with("file", shown.clone())
    .with("mode", format!("{mode:04o}"))
    .with("fix", format!("chmod 600 {shown}")))
}

/// The `name = value` lines of a credentials file. A line that is not one
/// is named by its number only: it may be a key pasted on its own.
fn parse(text: &str, path: &Path) -> FlowResult<Vec<(String, Secret)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| {
            FlowError::new(
                ErrorCode::ProviderUnavailable,
                format!(
                    "line {} of the credentials file {} {why}; write `name = value`, one a line",
                    i + 1,
                    path.display()
                ),
            )
            .with("file", path.display().to_string())
            .with("line", i + 1)
        };
        let Some((name, value)) = line.split_once('=') else {
            return Err(bad("has no `=`"));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("has no name before `=`"));
        }
        let value = unquote(value.trim());
        out.push((name.to_string(), Secret::new(value)));
    }
    Ok(out)
}

/// `value` without one pair of matching surrounding quotes.
fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_cut_from_bytes_text_and_json_keys_and_values() {
        assert_eq!(cut_bytes(b"aXXbXX", b"XX"), b"a[redacted]b[redacted]");
        assert_eq!(cut_bytes(b"abc", b""), b"abc");
        let mut t = "k=XX".to_string();
        cut_text(&mut t, "XX");
        assert_eq!(t, "k=[redacted]");
        let mut v = serde_json::json!({"XX": ["aXX", 1], "b": "XX"});
        cut_value(&mut v, "XX");
        assert_eq!(
            v,
            serde_json::json!({"[redacted]": ["a[redacted]", 1], "b": "[redacted]"})
        );
    }
    use std::os::unix::fs::PermissionsExt;

    const KEY: &str = "sk-very-secret-4242";

    fn file_with(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn env_names_are_uppercased_with_dashes_and_dots_as_underscores() {
        assert_eq!(env_var("exa"), "SLUICE_CREDENTIAL_EXA");
        assert_eq!(env_var("exa-api-key"), "SLUICE_CREDENTIAL_EXA_API_KEY");
        assert_eq!(env_var("corp.search"), "SLUICE_CREDENTIAL_CORP_SEARCH");
    }

    #[test]
    fn secrets_print_redacted() {
        let s = Secret::new(KEY);
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some([redacted])");
        assert_eq!(s.expose(), KEY);
    }

    #[test]
    fn the_file_holds_name_value_lines_with_comments_and_quotes() {
        let text = format!(
            "# keys\n\nexa = {KEY}\n  other=  two words  \nquoted = \"q v\"\nsingle='s'\nexa = later\nempty =\n"
        );
        let (_d, path) = file_with(&text, 0o600);
        let c = Credentials::with_file(&path);
        let get = |n: &str| {
            c.get_with(n, no_env)
                .unwrap()
                .map(|s| s.expose().to_string())
        };
        assert_eq!(get("exa").as_deref(), Some("later"));
        assert_eq!(get("other").as_deref(), Some("two words"));
        assert_eq!(get("quoted").as_deref(), Some("q v"));
        assert_eq!(get("single").as_deref(), Some("s"));
        assert_eq!(get("empty"), None, "an empty value is unset");
        assert_eq!(get("missing"), None);
        assert_eq!(get("EXA"), None, "file names match exactly");
    }

    #[test]
    fn the_environment_comes_first_and_an_empty_value_is_unset() {
        let (_d, path) = file_with("exa = from-file\n", 0o600);
        let c = Credentials::with_file(&path);
        let env = |v: &str| (v == "SLUICE_CREDENTIAL_EXA").then(|| format!(" {KEY}\n"));
        assert_eq!(c.get_with("exa", env).unwrap().unwrap().expose(), KEY);
        let empty = |_: &str| Some(String::new());
        assert_eq!(
            c.get_with("exa", empty).unwrap().unwrap().expose(),
            "from-file"
        );
    }

    #[test]
    fn a_missing_file_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::with_file(dir.path().join("nope"));
        assert_eq!(c.get_with("exa", no_env).unwrap(), None);
        let none = Credentials { file: None };
        assert_eq!(none.get_with("exa", no_env).unwrap(), None);
    }

    #[test]
    fn a_file_others_may_read_or_write_is_refused_unread() {
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602, 0o666] {
            let (_d, path) = file_with(&format!("exa = {KEY}\n"), mode);
            let e = Credentials::with_file(&path)
                .get_with("exa", no_env)
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::PermissionDenied, "{mode:o}");
            let fix = format!("chmod 600 {}", path.display());
            assert!(e.message.contains(&fix), "{}", e.message);
            assert_eq!(e.details["fix"], fix);
            assert_eq!(e.details["mode"], format!("{mode:04o}"));
            assert!(!format!("{e:?}").contains(KEY));
        }
        for mode in [0o600, 0o400, 0o700] {
            let (_d, path) = file_with(&format!("exa = {KEY}\n"), mode);
            let got = Credentials::with_file(&path).get_with("exa", no_env);
            assert_eq!(got.unwrap().unwrap().expose(), KEY, "{mode:o}");
        }
    }

    #[test]
    fn a_bad_line_is_named_by_number_without_its_text() {
        let (_d, path) = file_with(&format!("# c\n{KEY}\n"), 0o600);
        let e = Credentials::with_file(&path)
            .get_with("exa", no_env)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ProviderUnavailable);
        assert!(
            e.message.contains("line 2 of the credentials file"),
            "{}",
            e.message
        );
        assert_eq!(e.details["line"], 2);
        assert!(!format!("{e:?}").contains(KEY));
        let (_d, path) = file_with(" = v\n", 0o600);
        let e = Credentials::with_file(&path)
            .get_with("exa", no_env)
            .unwrap_err();
        assert!(e.message.contains("has no name"), "{}", e.message);
    }

    #[test]
    fn a_missing_credential_says_how_to_set_it() {
        let c = Credentials::with_file("/etc/sluice-test/credentials");
        let e = c.missing("exa", "the exa search provider");
        assert_eq!(e.code, ErrorCode::ProviderUnavailable);
        assert_eq!(
            e.message,
            "the exa search provider needs credential `exa`, which is not set; set SLUICE_CREDENTIAL_EXA \
             in sluice's environment, or add the line `exa = YOUR_KEY` to /etc/sluice-test/credentials (chmod 600)"
        );
        assert_eq!(e.details["env"], "SLUICE_CREDENTIAL_EXA");
        assert_eq!(e.details["file"], "/etc/sluice-test/credentials");
    }

    #[test]
    fn the_default_file_is_under_the_config_folder() {
        // Only the shape: the variables belong to the test process.
        if let Some(p) = default_file() {
            assert!(p.ends_with("sluice/credentials"), "{}", p.display());
            assert!(p.is_absolute());
        }
    }
}
