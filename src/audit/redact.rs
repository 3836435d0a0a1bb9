//! What never reaches the audit database, and what is cut short there.
//!
//! Redacted before anything is written, and named in the row's `redacted`
//! list (like OPA's decision logs name what they `erased`):
//! - entries of an `env` table whose names look like credentials (they hold
//!   KEY, TOKEN, SECRET, PASSWORD, PASSPHRASE, CREDENTIAL or AUTH);
//! - entries of a `headers` table named `authorization`,
//!   `proxy-authorization`, `cookie`, `set-cookie` or `x-api-key`, or shaped
//!   like a credential by the same rule;
//! - the values of those entries wherever else they appear in the call or
//!   in any later call of the run (a command that echoes its token, a server
//!   that returns it), and every named credential sluice has loaded
//!   (`crate::credentials::loaded`).
//!
//! An output whose JSON is over the cap is stored as its size, SHA-256, head
//! and tail, and the row says `capped`.

use crate::digest::sha256_hex;
use serde_json::{json, Map, Value};

/// What replaces a secret.
pub const MARK: &str = crate::credentials::MARK;
/// Outputs whose JSON is larger are stored capped (1 MiB).
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
/// Bytes of a capped output kept from each end.
const CAPPED_END: usize = 32 * 1024;
/// Values shorter than this are not searched for elsewhere: a two-letter
/// "secret" would blank every word that contains it.
const MIN_SCRUB: usize = 4;

const NAME_MARKS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
];
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// Whether an environment variable named `name` holds a credential.
pub fn credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    NAME_MARKS.iter().any(|m| upper.contains(m))
}

fn secret_header(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) || credential_name(name)
}

/// One call's redaction: the secrets found in its input, then applied to
/// its input, output and error alike.
#[derive(Debug, Default)]
pub struct Redaction {
    /// Values to cut wherever they appear, longest first.
    secrets: Vec<String>,
    /// What was redacted, as `where.name` paths.
    pub redacted: Vec<String>,
    /// The secrets this input brought (not among the known ones): later
    /// calls of the run must cut them too.
    pub learned: Vec<String>,
}

impl Redaction {
    /// Redacts `input` (named `input` in the record) and returns its JSON
    /// text; `known` are secrets to cut anywhere (named credentials, those
    /// earlier inputs of the run brought).
    pub fn input(input: &Value, known: &[String]) -> (Redaction, String) {
        let mut r = Redaction {
            secrets: Vec::new(),
            redacted: Vec::new(),
            learned: Vec::new(),
        };
        r.collect(input);
        r.learned = r
            .secrets
            .iter()
            .filter(|s| !known.contains(s))
            .cloned()
            .collect();
        r.learned.dedup();
        r.secrets
            .extend(known.iter().filter(|s| s.len() >= MIN_SCRUB).cloned());
        r.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        r.secrets.dedup();
        let out = r.text("input", input);
        (r, out)
    }

    /// The values this redaction cuts wherever they appear.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// The JSON text of `value` (named `root`: `output`, `error`), redacted.
    pub fn text(&mut self, root: &str, value: &Value) -> String {
        // Most values hold nothing to cut: serialize them as they are,
        // without building a redacted copy.
        let text = |v: &Value| serde_json::to_string(v).expect("JSON values serialize");
        if !self.touches(value, None) {
            return text(value);
        }
        text(&self.apply(root, value))
    }

    /// Redacts a value the call produced (`output` or `error`).
    pub fn apply(&mut self, root: &str, value: &Value) -> Value {
        self.walk(root, value, None)
    }

    /// Whether redaction would change anything in `value`.
    fn touches(&self, value: &Value, rule: Option<fn(&str) -> bool>) -> bool {
        match value {
            Value::Object(map) => map.iter().any(|(k, v)| {
                (rule.is_some_and(|r| r(k)) && !v.is_null()) || self.touches(v, table_rule(k))
            }),
            Value::Array(items) => items.iter().any(|v| self.touches(v, None)),
            Value::String(s) => {
                self.secrets
                    .iter()
                    .any(|secret| s.contains(secret.as_str()))
                    || (s.contains('@') && hide_password(s) != *s)
            }
            _ => false,
        }
    }

    /// Gathers the values of secret-named `env` and `headers` entries.
    fn collect(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if let Some(rule) = table_rule(k) {
                        if let Value::Object(entries) = v {
                            for (name, val) in entries {
                                if let (true, Some(text)) = (rule(name), val.as_str()) {
                                    self.learn(text);
                                }
                            }
                        }
                    }
                    self.collect(v);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect(v)),
            _ => {}
        }
    }

    /// Takes a secret value, and the parts of it that travel alone: the
    /// token of `Bearer TOKEN`, the values of `a=1; b=2` cookies.
    fn learn(&mut self, text: &str) {
        let mut parts = vec![text];
        let words: Vec<&str> = text.split_whitespace().collect();
        if let [_scheme, token] = words.as_slice() {
            parts.push(token);
        }
        parts.extend(
            text.split(';')
                .filter_map(|c| c.split_once('=').map(|(_, v)| v.trim())),
        );
        for p in parts {
            if p.len() >= MIN_SCRUB && !self.secrets.iter().any(|s| s == p) {
                self.secrets.push(p.to_string());
            }
        }
    }

    fn walk(&mut self, path: &str, value: &Value, rule: Option<fn(&str) -> bool>) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    let here = format!("{path}.{k}");
                    let redact = rule.is_some_and(|r| r(k));
                    let new = if redact && !v.is_null() {
                        self.redacted.push(here);
                        Value::String(MARK.into())
                    } else {
                        self.walk(&here, v, table_rule(k))
                    };
                    out.insert(k.clone(), new);
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.walk(&format!("{path}[{i}]"), v, None))
                    .collect(),
            ),
            Value::String(s) if path.ends_with(".url") => {
                let cut = hide_password(s);
                if cut != *s {
                    self.redacted
                        .push(format!("{path} (a password in the URL)"));
                }
                Value::String(self.scrub(path, &cut))
            }
            Value::String(s) => Value::String(self.scrub(path, s)),
            other => other.clone(),
        }
    }

    /// `text` (a capability, a decision's reason, a run's error) with every
    /// secret this redaction knows cut out, naming it `path` when it did.
    pub fn cut(&mut self, path: &str, text: &str) -> String {
        self.scrub(path, text)
    }

    fn scrub(&mut self, path: &str, text: &str) -> String {
        if self.secrets.is_empty() || !self.secrets.iter().any(|s| text.contains(s.as_str())) {
            return text.to_string();
        }
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), MARK);
        }
        self.redacted.push(format!("{path} (a secret's value)"));
        out
    }
}

/// `scheme://user:password@host...` with the password replaced.
fn hide_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_string();
    };
    let Some((user, _)) = userinfo.split_once(':') else {
        return url.to_string();
    };
    format!("{scheme}://{user}:{MARK}@{host}{}", &rest[authority_end..])
}

/// The rule for the entries of a table under key `key`, if it is one whose
/// entries may be secrets.
fn table_rule(key: &str) -> Option<fn(&str) -> bool> {
    match key {
        "env" => Some(credential_name),
        "headers" => Some(secret_header),
        _ => None,
    }
}

/// The JSON text stored for an output: the whole of it, or, over `cap`
/// bytes, its size, SHA-256, head and tail. The flag says which.
pub fn cap_output(text: String, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let head = &text[..floor_char(&text, CAPPED_END.min(cap / 2))];
    let tail = &text[ceil_char(&text, text.len() - CAPPED_END.min(cap / 2))..];
    let stored = json!({
        "capped": true,
        "bytes": text.len(),
        "sha256": sha256_hex(text.as_bytes()),
        "head": head,
        "tail": tail,
    });
    (stored.to_string(), true)
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_shaped_env_entries_are_redacted_and_named() {
        let input = json!({"command": "x", "env": {"GITHUB_TOKEN": "ghp_abc123", "LANG": "C"}});
        let (r, out) = Redaction::input(&input, &[]);
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["env"]["GITHUB_TOKEN"], MARK);
        assert_eq!(out["env"]["LANG"], "C");
        assert_eq!(r.redacted, vec!["input.env.GITHUB_TOKEN"]);
    }

    #[test]
    fn secret_headers_are_redacted_in_any_case() {
        let input = json!({"headers": {"Authorization": "Bearer abcd", "X-Api-Key": "k1234", "Accept": "*/*"}});
        let (_, out) = Redaction::input(&input, &[]);
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["headers"]["Authorization"], MARK);
        assert_eq!(out["headers"]["X-Api-Key"], MARK);
        assert_eq!(out["headers"]["Accept"], "*/*");
    }

    #[test]
    fn a_secret_echoed_in_the_output_is_cut_there_too() {
        let input = json!({"command": "echo $T", "env": {"API_TOKEN": "s3cr3t-value"}});
        let (mut r, _) = Redaction::input(&input, &[]);
        let out = r.apply("output", &json!({"stdout": "got s3cr3t-value\n"}));
        assert_eq!(out["stdout"], "got [redacted]\n");
        assert!(r
            .redacted
            .contains(&"output.stdout (a secret's value)".to_string()));
    }

    #[test]
    fn the_token_of_an_authorization_and_cookie_values_are_cut_alone_too() {
        let input = json!({"headers": {"authorization": "Bearer t0ken-abc", "cookie": "a=c00kie-1; b=c00kie-2"}});
        let (mut r, _) = Redaction::input(&input, &[]);
        let out = r.apply("output", &json!("t0ken-abc c00kie-1 c00kie-2 Bearer"));
        assert_eq!(out, "[redacted] [redacted] [redacted] Bearer");
    }

    #[test]
    fn a_password_in_a_url_is_cut() {
        let input = json!({"url": "http://me:pa55w0rd@example.com/x?y"});
        let (r, out) = Redaction::input(&input, &[]);
        assert_eq!(out, r#"{"url":"http://me:[redacted]@example.com/x?y"}"#);
        assert_eq!(r.redacted, vec!["input.url (a password in the URL)"]);
    }

    #[test]
    fn named_credentials_are_cut_anywhere() {
        let (r, out) = Redaction::input(
            &json!({"query": "key exa-123456 here"}),
            &["exa-123456".into()],
        );
        assert_eq!(out, r#"{"query":"key [redacted] here"}"#);
        assert_eq!(r.redacted, vec!["input.query (a secret's value)"]);
    }

    #[test]
    fn a_value_with_nothing_to_cut_is_serialized_as_it_is() {
        let input = json!({"path": "a.txt", "env": {"LANG": "C"}});
        let (mut r, text) = Redaction::input(&input, &[]);
        assert_eq!(text, input.to_string());
        assert_eq!(
            r.text("output", &json!({"content": "x"})),
            r#"{"content":"x"}"#
        );
        assert!(r.redacted.is_empty());
    }

    #[test]
    fn large_outputs_keep_size_hash_head_and_tail() {
        let text = "é".repeat(300_000);
        let (stored, capped) = cap_output(text.clone(), 1 << 20);
        assert!(!capped);
        assert_eq!(stored.len(), text.len());
        let big = "é".repeat(600_000);
        let (stored, capped) = cap_output(big.clone(), 1 << 20);
        assert!(capped);
        let v: Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(v["bytes"], big.len());
        assert_eq!(v["sha256"], sha256_hex(big.as_bytes()));
        assert!(v["head"].as_str().unwrap().len() <= CAPPED_END);
        assert!(v["tail"].as_str().unwrap().chars().all(|c| c == 'é'));
    }
}
