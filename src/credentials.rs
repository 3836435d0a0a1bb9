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

/// `bytes` with every copy of `secret` replaced by [`MARK`], as sent or
/// in a JSON string's escapes ([`spellings`]).
pub fn cut_bytes(bytes: &[u8], secret: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(secret) {
        Ok(text) => spellings(text)
            .iter()
            .fold(bytes.to_vec(), |b, s| cut_one(&b, s.as_bytes())),
        Err(_) => cut_one(bytes, secret),
    }
}

/// `bytes` with every copy of `secret`, spelled as given, replaced.
fn cut_one(bytes: &[u8], secret: &[u8]) -> Vec<u8> {
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

/// `text` with every copy of `secret` replaced by [`MARK`], as sent or in
/// a JSON string's escapes ([`spellings`]).
pub fn cut_text(text: &mut String, secret: &str) {
    cut_spelled(text, &spellings(secret));
}

/// Whether `text` holds any of `spelled`.
fn holds(text: &str, spelled: &[String]) -> bool {
    spelled
        .iter()
        .any(|s| !s.is_empty() && text.contains(s.as_str()))
}

/// `text` with every copy of each of `spelled` replaced by [`MARK`].
fn cut_spelled(text: &mut String, spelled: &[String]) {
    for s in spelled {
        if !s.is_empty() && text.contains(s.as_str()) {
            *text = text.replace(s.as_str(), MARK);
        }
    }
}

/// How a secret is spelled where it may come back: as sent, and inside a
/// JSON string, where a server echoing it escapes `"`, `\` and control
/// characters, and may escape `/` (PHP) or `<`, `>` and `&` (Go), so that
/// decoding the text would give the secret back. No other encoding is
/// recognized (base64, percent-encoding, reversed): those pass.
pub fn spellings(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string()];
    let quoted = serde_json::Value::from(secret).to_string();
    let json = quoted[1..quoted.len() - 1].to_string();
    let variants = [
        json.replace('/', "\\/"),
        json.replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026"),
        json,
    ];
    for v in variants {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// `v` with every copy of `secret` replaced by [`MARK`], in its strings and
/// its objects' keys, as [`cut_text`] recognizes it.
pub fn cut_value(v: &mut serde_json::Value, secret: &str) {
    cut_value_spelled(v, &spellings(secret));
}

fn cut_value_spelled(v: &mut serde_json::Value, spelled: &[String]) {
    use serde_json::Value;
    match v {
        Value::String(s) => cut_spelled(s, spelled),
        Value::Array(items) => items.iter_mut().for_each(|i| cut_value_spelled(i, spelled)),
        Value::Object(map) => {
            map.values_mut().for_each(|v| cut_value_spelled(v, spelled));
            // A key is rewritten, and the map rebuilt, only where one holds a
            // secret: an output's maps are not copied for every call.
            if map.keys().any(|k| holds(k, spelled)) {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(mut k, v)| {
                        cut_spelled(&mut k, spelled);
                        (k, v)
                    })
                    .collect();
            }
        }
        _ => {}
    }
}

/// Streamed text (a model's reply as it arrives, a command's output relayed
/// as progress) with secrets cut out, even when one is split across pieces:
/// the end of the text so far that could be the start of a secret is held
/// back until the next piece shows whether it is, and
/// [`StreamCut::finish`] hands over what is left at the stream's end.
#[derive(Debug, Default)]
pub struct StreamCut {
    /// Each secret as it may be spelled ([`spellings`]).
    spelled: Vec<String>,
    /// The text held back.
    pending: String,
}

impl StreamCut {
    /// A cut of `secrets`, each as [`spellings`] spells it; with none,
    /// every piece passes whole at once.
    pub fn new<S: AsRef<str>>(secrets: &[S]) -> StreamCut {
        let mut spelled: Vec<String> = Vec::new();
        for s in secrets.iter().map(AsRef::as_ref).filter(|s| !s.is_empty()) {
            for one in spellings(s) {
                if !spelled.contains(&one) {
                    spelled.push(one);
                }
            }
        }
        StreamCut {
            spelled,
            pending: String::new(),
        }
    }

    /// A cut of every secret this process has loaded ([`loaded`]) and
    /// `also` (a key a flow holds).
    pub fn loaded_and(also: Option<&str>) -> StreamCut {
        let mut secrets = loaded();
        secrets.extend(also.map(str::to_string));
        StreamCut::new(&secrets)
    }

    /// What of the text so far can be passed on now.
    pub fn push(&mut self, piece: &str) -> String {
        if self.spelled.is_empty() {
            return piece.to_string();
        }
        self.pending.push_str(piece);
        cut_spelled(&mut self.pending, &self.spelled);
        let keep = self
            .spelled
            .iter()
            .map(|s| start_at_end(&self.pending, s))
            .max()
            .unwrap_or(0);
        let held = self.pending.split_off(self.pending.len() - keep);
        std::mem::replace(&mut self.pending, held)
    }

    /// The text held back, at the stream's end.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// The length of the longest end of `text` that is a start of `secret`
/// shorter than it (0 when none is), on a character boundary.
fn start_at_end(text: &str, secret: &str) -> usize {
    let longest = secret.len().saturating_sub(1).min(text.len());
    (1..=longest)
        .rev()
        .find(|&n| {
            let at = text.len() - n;
            text.is_char_boundary(at) && secret.as_bytes().starts_with(&text.as_bytes()[at..])
        })
        .unwrap_or(0)
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

/// A named credential as a call's input carries it, in place of its
/// secret: `{"credential": "github", "prefix": "Bearer "}` (what
/// `sluice.credential(NAME, {prefix = ...})` makes). The record, the policy
/// (`req.input`) and every prompt see this; the flow puts the secret in when
/// it runs, once `cred:use` was authorized.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reference {
    /// The credential's name ([`Credentials::get`]).
    pub credential: String,
    /// Text sent before the secret (`Bearer `).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl Reference {
    /// The reference `value` spells, if it is one: an object with a string
    /// `credential` and at most a string `prefix`. `field` names where it
    /// sits, for the error a malformed one is.
    pub fn parse(field: &str, value: &serde_json::Value) -> FlowResult<Option<Reference>> {
        let Some(map) = value.as_object() else {
            return Ok(None);
        };
        let shape = || {
            FlowError::invalid_input(
                field,
                format!("`{field}` is a string or a credential, {{credential = NAME, prefix = TEXT}} (what sluice.credential(NAME, {{prefix = ...}}) makes)"),
            )
        };
        let name = map
            .get("credential")
            .and_then(|n| n.as_str())
            .ok_or_else(shape)?;
        let prefix = match map.get("prefix") {
            None => None,
            Some(p) => Some(p.as_str().ok_or_else(shape)?.to_string()),
        };
        if map.keys().any(|k| k != "credential" && k != "prefix") {
            return Err(shape());
        }
        check_name(field, name)?;
        if prefix
            .as_deref()
            .is_some_and(|p| p.chars().any(char::is_control))
        {
            return Err(FlowError::invalid_input(
                field,
                format!("the prefix of credential `{name}` holds control characters; give plain text such as \"Bearer \""),
            ));
        }
        Ok(Some(Reference {
            credential: name.to_string(),
            prefix,
        }))
    }

    /// The `cred:use` capability of sending it to `to` (an origin, or
    /// `command`).
    pub fn capability(&self, to: &str) -> crate::call::Capability {
        crate::call::Capability {
            action: crate::call::Action::CredUse,
            resource: format!("{}@{to}", self.credential),
        }
    }
}

/// Whether `name` can name a credential: letters, digits, `_`, `-` and
/// `.`, as the environment backend's variable and a `cred:use` capability
/// (`NAME@...`) can carry it.
pub fn check_name(field: &str, name: &str) -> FlowResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        return Ok(());
    }
    Err(FlowError::invalid_input(
        field,
        format!("{name:?} is not a credential name: letters, digits, `_`, `-` and `.`, at most 64"),
    ))
}

/// The value of a `headers` or `env` entry: text as given, or a named
/// credential whose secret the flow puts in when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Text, sent as it is.
    Text(String),
    /// A credential, sent as its prefix and secret.
    Credential(Reference),
}

impl Held {
    /// The text, if it is text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Held::Text(t) => Some(t),
            Held::Credential(_) => None,
        }
    }

    /// The text to send: the text itself, or the credential's prefix and
    /// secret from `store` (a missing one is `provider_unavailable` saying
    /// how to set it, for `who`).
    /// What checks that run before the secret is known see of it: the text,
    /// or a credential's prefix and a stand-in.
    pub fn shape(&self) -> String {
        match self {
            Held::Text(t) => t.clone(),
            Held::Credential(r) => format!("{}secret", r.prefix.as_deref().unwrap_or("")),
        }
    }

    pub fn reveal(&self, store: &Credentials, who: &str) -> FlowResult<String> {
        match self {
            Held::Text(t) => Ok(t.clone()),
            Held::Credential(r) => {
                let secret = store.require(&r.credential, who)?;
                Ok(format!(
                    "{}{}",
                    r.prefix.as_deref().unwrap_or(""),
                    secret.expose()
                ))
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Held {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Held, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        if let serde_json::Value::String(t) = value {
            return Ok(Held::Text(t));
        }
        match Reference::parse("value", &value) {
            Ok(Some(r)) => Ok(Held::Credential(r)),
            Ok(None) => Err(D::Error::custom(format!(
                "expected a string or a credential (sluice.credential(NAME)), got {value}"
            ))),
            Err(e) => Err(D::Error::custom(e.message.replace("`value` is", "it is"))),
        }
    }
}

/// Flags whose value is a secret, as `--flag=VALUE` or `--flag VALUE`.
const SECRET_FLAGS: &[&str] = &[
    "--token",
    "--api-key",
    "--apikey",
    "--password",
    "--passwd",
    "--secret",
    "--access-token",
];

/// Prefixes of well-known tokens, the shortest run of token characters
/// that may follow, and what each is.
const TOKEN_SHAPES: &[(&str, usize, &str)] = &[
    ("sk-", 16, "an API key (sk-...)"),
    ("ghp_", 20, "a GitHub token (ghp_...)"),
    ("gho_", 20, "a GitHub token (gho_...)"),
    ("ghu_", 20, "a GitHub token (ghu_...)"),
    ("ghs_", 20, "a GitHub token (ghs_...)"),
    ("ghr_", 20, "a GitHub token (ghr_...)"),
    ("github_pat_", 20, "a GitHub token (github_pat_...)"),
    ("xoxb-", 10, "a Slack token (xoxb-...)"),
    ("xoxp-", 10, "a Slack token (xoxp-...)"),
    ("AKIA", 16, "an AWS access key (AKIA...)"),
];

/// A run's arguments as the record keeps them: each that is, holds or
/// follows a secret has the secret replaced by a mark saying what it was
/// (`[redacted: a GitHub token (ghp_...)]`, `--token=[redacted]`, `Bearer
/// [redacted]`); a value of `named` (the values of the named credentials)
/// is `[redacted: a named credential]`, whether it is the whole argument or
/// part of one (`--header=X-Key: VALUE`). Also returns the secrets the
/// rest of the run must cut wherever they turn up ([`remember_secret`]):
/// those cut here, and every named credential's value, sent or not, which a
/// file an earlier run left may hold.
pub fn redact_args(args: &[String], named: &[String]) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::with_capacity(args.len());
    let mut cut = Vec::new();
    let mut after_flag = false;
    for arg in args {
        let kept = if std::mem::take(&mut after_flag) && !arg.starts_with('-') {
            cut.push(arg.clone());
            MARK.to_string()
        } else if named.iter().any(|n| n == arg.trim()) {
            cut.push(arg.trim().to_string());
            "[redacted: a named credential]".to_string()
        } else if let Some((flag, value)) = arg
            .split_once('=')
            .filter(|(f, _)| SECRET_FLAGS.iter().any(|s| f.eq_ignore_ascii_case(s)))
        {
            cut.push(value.to_string());
            format!("{flag}={MARK}")
        } else if SECRET_FLAGS.iter().any(|s| arg.eq_ignore_ascii_case(s)) {
            after_flag = true;
            arg.clone()
        } else {
            redact_words(arg, &mut cut)
        };
        out.push(within(kept, named, &mut cut));
    }
    cut.extend(named.iter().cloned());
    cut.retain(|s| !s.is_empty());
    let mut seen = std::collections::HashSet::new();
    cut.retain(|s| seen.insert(s.clone()));
    (out, cut)
}

/// `arg` with each of `named` it holds cut (and added to `cut`); shorter
/// than four bytes one is left, as [`remember_secret`] leaves it.
fn within(mut arg: String, named: &[String], cut: &mut Vec<String>) -> String {
    for value in named.iter().filter(|v| v.len() >= 4) {
        if arg.contains(value.as_str()) {
            arg = arg.replace(value.as_str(), "[redacted: a named credential]");
            cut.push(value.clone());
        }
    }
    arg
}

/// `arg` with each token-shaped word, and the word after `Bearer `, cut
/// (and added to `cut`).
fn redact_words(arg: &str, cut: &mut Vec<String>) -> String {
    let token_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    let mut bearer = false;
    while let Some(start) = rest.find(token_char) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail.find(|c: char| !token_char(c)).unwrap_or(tail.len());
        if bearer {
            // The whole credential, dots and slashes too (a JWT).
            let end = tail.find(char::is_whitespace).unwrap_or(tail.len());
            cut.push(tail[..end].to_string());
            out.push_str(MARK);
            rest = &tail[end..];
            bearer = false;
            continue;
        }
        let word = &tail[..end];
        let shape = TOKEN_SHAPES
            .iter()
            .find(|(p, min, _)| word.starts_with(p) && word.len() >= p.len() + min);
        match shape {
            Some((_, _, what)) => {
                cut.push(word.to_string());
                out.push_str(&format!("[redacted: {what}]"));
            }
            None => out.push_str(word),
        }
        bearer = word.eq_ignore_ascii_case("bearer") && tail[end..].starts_with(' ');
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The arguments a replay or resume of a run gives its script: the
/// recorded ones, unless some were redacted, when `given` must be the run's
/// arguments again, each one the record kept matching it. An error says
/// which are missing or differ.
pub fn restore_args(
    run: &str,
    recorded: &[String],
    given: &[String],
) -> Result<Vec<String>, String> {
    let redacted: Vec<usize> = recorded
        .iter()
        .enumerate()
        .filter(|(_, a)| a.contains("[redacted"))
        .map(|(i, _)| i + 1)
        .collect();
    if given.is_empty() && redacted.is_empty() {
        return Ok(recorded.to_vec());
    }
    let list = |v: &[usize]| {
        v.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if given.is_empty() {
        return Err(format!(
            "run {run} was given arguments that looked like credentials, which the record keeps redacted (argument {}); \
             give the run's arguments again after `--`: sluice replay {run} -- ARG... (or sluice resume)",
            list(&redacted)
        ));
    }
    if given.len() != recorded.len() {
        return Err(format!(
            "run {run} was given {} arguments and {} were given now; give the run's arguments again, all of them, after `--`",
            recorded.len(),
            given.len()
        ));
    }
    if let Some(i) =
        (0..given.len()).find(|&i| !recorded[i].contains("[redacted") && recorded[i] != given[i])
    {
        return Err(format!(
            "argument {} differs from run {run}'s ({:?}, given {:?}); give the run's arguments again after `--`",
            i + 1,
            recorded[i],
            given[i]
        ));
    }
    Ok(given.to_vec())
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
/// Each is kept with its [`spellings`] (the value first), made once when it
/// is loaded rather than at every call whose outcome is cut.
static LOADED: std::sync::Mutex<Vec<Vec<String>>> = std::sync::Mutex::new(Vec::new());

fn remember(secret: &Secret) {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if !loaded.iter().any(|s| s[0] == secret.expose()) {
        loaded.push(spellings(secret.expose()));
    }
}

/// Every spelling of every loaded secret, in load order.
fn loaded_spellings() -> Vec<String> {
    let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.iter().flatten().cloned().collect()
}

/// Cuts `secret` wherever it turns up for the rest of this process, as a
/// loaded credential's value is: in what flows return and in the record.
/// A run's arguments that looked like secrets ([`redact_args`]). Shorter
/// than four bytes it is not searched for, as the record does not: it
/// would blank every word that holds it.
pub fn remember_secret(secret: &str) {
    if secret.len() >= 4 {
        remember(&Secret::new(secret));
    }
}

/// The values of the credentials loaded so far: for redaction only.
pub fn loaded() -> Vec<String> {
    let loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded.iter().map(|s| s[0].clone()).collect()
}

/// `text` with every loaded secret cut: for text a flow goes on to clip or
/// render (Markdown escapes `_`), which the cut of its output would then
/// no longer recognize.
pub fn cut_loaded_text(text: &mut String) {
    cut_spelled(text, &loaded_spellings());
}

/// `v` with every loaded secret cut: what a job operation (`job:read()`)
/// hands back, as a flow's output is.
pub fn cut_loaded_value(v: &mut serde_json::Value) {
    let spelled = loaded_spellings();
    if !spelled.is_empty() {
        cut_value_spelled(v, &spelled);
    }
}

/// `result` with every loaded secret cut, output or error: what a flow
/// hands back to a script.
pub fn cut_loaded(result: &mut FlowResult<serde_json::Value>) {
    match result {
        Ok(v) => cut_loaded_value(v),
        Err(e) => {
            cut_loaded_text(&mut e.message);
            e.details.values_mut().for_each(cut_loaded_value);
        }
    }
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

    /// The values of every named credential there is: the environment's
    /// `SLUICE_CREDENTIAL_*` and the file's, whether loaded or not. For
    /// recognizing one where it must not be stored (a run's arguments); a
    /// file that cannot be read holds none.
    pub fn values(&self) -> Vec<String> {
        let env = std::env::vars()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .map(|(_, v)| v.trim().to_string());
        let file = self
            .file
            .as_deref()
            .and_then(|f| entries(f).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(_, v)| v.expose().to_string());
        let mut all: Vec<String> = env.chain(file).filter(|v| !v.is_empty()).collect();
        all.sort();
        all.dedup();
        all
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
    let last = entries(path)?
        .into_iter()
        .rev()
        .find_map(|(n, v)| (n == name).then_some(v));
    Ok(last.filter(|v| !v.expose().is_empty()))
}

/// Every `name = value` line of the file at `path`, checked as
/// [`Credentials::get`] checks it; a missing file holds none.
fn entries(path: &Path) -> FlowResult<Vec<(String, Secret)>> {
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
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
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
    parse(&text, path)
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

    /// Pieces through a [`StreamCut`] of `secrets`, as a watcher gets
    /// them, with what was held back at the end.
    fn relayed(secrets: &[&str], pieces: &[&str]) -> Vec<String> {
        let mut u = StreamCut::new(secrets);
        let mut out: Vec<String> = pieces.iter().map(|p| u.push(p)).collect();
        out.push(u.finish());
        out
    }

    #[test]
    fn a_secret_split_across_streamed_pieces_reaches_no_piece() {
        let key = "sk-SECRET-123";
        let pieces = ["the key is sk-", "SECR", "ET-123 and ", "sk-", "nope"];
        let got = relayed(&[key], &pieces);
        assert_eq!(
            got,
            ["the key is ", "", "[redacted] and ", "", "sk-nope", ""]
        );
        assert!(got.iter().all(|p| !p.contains("SECR")), "{got:?}");
        // Joined: the text the output carries.
        assert_eq!(got.concat(), pieces.concat().replace(key, MARK));
        // Text that starts like the key at its very end is handed over by
        // `finish`; with no secret, every piece goes at once.
        assert_eq!(relayed(&[key], &["a sk-SE"]), ["a ", "sk-SE"]);
        assert_eq!(relayed(&[], &["a", "b"]), ["a", "b", ""]);
        // A multi-byte character is never split.
        assert_eq!(relayed(&["ké"], &["aké", "k"]), ["a[redacted]", "", "k"]);
        assert_eq!(relayed(&["éx"], &["aé"]), ["a", "é"]);
    }

    #[test]
    fn several_secrets_byte_by_byte_and_as_json_spells_them_are_cut() {
        let (a, b) = ("tok-AAAA-1111", "p\\w\"d/9");
        let text = format!("x {a} y {b} z {} w", spellings(b)[1]);
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        let got = relayed(&[a, b], &pieces);
        for p in &got {
            assert!(!p.contains("AAAA") && !p.contains("w\\"), "{got:?}");
        }
        assert_eq!(got.concat(), "x [redacted] y [redacted] z [redacted] w");
    }

    #[test]
    fn credential_shaped_arguments_are_kept_redacted_saying_what_they_were() {
        let args: Vec<String> = [
            "fix",
            "ghp_abcdefghijklmnopqrstuvwxyz",
            "--token=hunter2",
            "--api-key",
            "k-123",
            "url=https://x/?key=sk-abcdefghijklmnopqrstu&y=1",
            "Authorization: Bearer eyJhbGc.eyJzdWIi.sig-nature x",
            "AKIAABCDEFGHIJKLMNOP",
            "xoxb-1234567890-abc",
            "the-named-value",
            "sk-short",
            "--tokenizer=x",
            "github_pat_11ABCDEFG0123456789abcdef",
        ]
        .map(String::from)
        .to_vec();
        let (kept, cut) = redact_args(&args, &["the-named-value".to_string()]);
        assert_eq!(
            cut,
            [
                "ghp_abcdefghijklmnopqrstuvwxyz",
                "hunter2",
                "k-123",
                "sk-abcdefghijklmnopqrstu",
                "eyJhbGc.eyJzdWIi.sig-nature",
                "AKIAABCDEFGHIJKLMNOP",
                "xoxb-1234567890-abc",
                "the-named-value",
                "github_pat_11ABCDEFG0123456789abcdef",
            ]
        );
        assert_eq!(
            kept,
            [
                "fix",
                "[redacted: a GitHub token (ghp_...)]",
                "--token=[redacted]",
                "--api-key",
                "[redacted]",
                "url=https://x/?key=[redacted: an API key (sk-...)]&y=1",
                "Authorization: Bearer [redacted] x",
                "[redacted: an AWS access key (AKIA...)]",
                "[redacted: a Slack token (xoxb-...)]",
                "[redacted: a named credential]",
                "sk-short",
                "--tokenizer=x",
                "[redacted: a GitHub token (github_pat_...)]",
            ]
        );
    }

    #[test]
    fn a_named_credential_is_cut_from_inside_an_argument_and_every_one_is_returned_to_cut() {
        let args: Vec<String> = ["--header=X-Key: horse-staple", "ab-cd", "plain"]
            .map(String::from)
            .to_vec();
        let named = ["horse-staple", "ab", "unsent-value"].map(String::from);
        let (kept, cut) = redact_args(&args, &named);
        assert_eq!(
            kept,
            [
                "--header=X-Key: [redacted: a named credential]",
                "ab-cd",
                "plain"
            ],
            "a value under four bytes is not searched for inside words"
        );
        assert_eq!(cut, ["horse-staple", "ab", "unsent-value"]);
    }

    #[test]
    fn a_replay_needs_redacted_arguments_given_again_and_matching_the_rest() {
        let recorded = vec!["a".to_string(), "--token=[redacted]".to_string()];
        let e = restore_args("r1", &recorded, &[]).unwrap_err();
        assert!(
            e.contains("argument 2") && e.contains("sluice replay r1 -- ARG..."),
            "{e}"
        );
        let given = vec!["a".to_string(), "--token=s3cret".to_string()];
        assert_eq!(restore_args("r1", &recorded, &given).unwrap(), given);
        let wrong = vec!["b".to_string(), "--token=s3cret".to_string()];
        assert!(restore_args("r1", &recorded, &wrong)
            .unwrap_err()
            .contains("argument 1 differs"));
        assert!(restore_args("r1", &recorded, &given[..1]).is_err());
        // The control: nothing redacted, nothing to give.
        let plain = vec!["a".to_string()];
        assert_eq!(restore_args("r1", &plain, &[]).unwrap(), plain);
    }

    #[test]
    fn a_reference_names_a_credential_and_at_most_a_prefix() {
        let r = Reference::parse(
            "headers.a",
            &serde_json::json!({"credential": "gh", "prefix": "Bearer "}),
        );
        assert_eq!(
            r.unwrap(),
            Some(Reference {
                credential: "gh".into(),
                prefix: Some("Bearer ".into())
            })
        );
        assert_eq!(
            Reference::parse("x", &serde_json::json!("text")).unwrap(),
            None
        );
        for bad in [
            serde_json::json!({"credential": "gh", "secret": "x"}),
            serde_json::json!({"credential": 1}),
            serde_json::json!({"credential": "a@b"}),
            serde_json::json!({"credential": "gh", "prefix": "a\nb"}),
            serde_json::json!({}),
        ] {
            let e = Reference::parse("headers.a", &bad).unwrap_err();
            assert_eq!(e.details["field"], "headers.a", "{bad}");
        }
        assert_eq!(
            Reference {
                credential: "gh".into(),
                prefix: None
            }
            .capability("https://api.github.com")
            .to_string(),
            "cred:use:gh@https://api.github.com"
        );
    }

    #[test]
    fn a_secret_is_cut_in_the_spellings_a_json_string_gives_it_and_no_others() {
        let secret = r#"a/b"c<d>&e"#;
        for body in [
            r#"{"k":"a/b\"c<d>&e"}"#,
            r#"{"k":"a\/b\"c<d>&e"}"#,
            r#"{"k":"a/b\"c\u003cd\u003e\u0026e"}"#,
        ] {
            let mut t = body.to_string();
            cut_text(&mut t, secret);
            assert_eq!(t, r#"{"k":"[redacted]"}"#, "{body}");
            assert_eq!(
                cut_bytes(body.as_bytes(), secret.as_bytes()),
                br#"{"k":"[redacted]"}"#
            );
        }
        let mut raw = format!("<{secret}>");
        cut_text(&mut raw, secret);
        assert_eq!(raw, "<[redacted]>");
        // An encoding other than JSON's passes: only copies as sent and as
        // JSON spells them are recognized.
        let mut encoded = "a%2Fb".to_string();
        cut_text(&mut encoded, "a/b");
        assert_eq!(encoded, "a%2Fb");
        assert_eq!(spellings("plain"), ["plain"]);
    }

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
