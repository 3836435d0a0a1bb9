//! The environment a command sees.
//!
//! The harness process carries credentials (API keys, tokens) in its
//! environment; a command the model writes must not inherit them by accident.
//! So a command starts from a short bootstrap allowlist, then gets the
//! caller's declared entries (applied last among ordinary entries, so naming a
//! credential is an explicit choice), then the managed `SLUICE_*` facts of
//! this call, rebuilt per call. Ambient `SLUICE_*` values are discarded so a
//! stale fact from the harness's own environment never leaks through, and the
//! managed facts are applied after the caller's so a caller cannot displace
//! one.

use crate::error::FlowError;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Names copied from the harness environment; `LC_*` is matched by prefix.
pub const BOOTSTRAP_ALLOWLIST: [&str; 7] =
    ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR", "SHELL"];

/// The namespace owned by the harness.
pub const MANAGED_PREFIX: &str = "SLUICE_";

/// Managed facts of one call, exported as `SLUICE_RUN_ID`, `SLUICE_CALL_SEQ`
/// and `SLUICE_WORKSPACE`. Absent facts are simply not set (never inherited).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    pub run_id: Option<String>,
    pub call_seq: Option<u64>,
    pub workspace: Option<PathBuf>,
}

impl Managed {
    fn entries(&self) -> Vec<(OsString, OsString)> {
        let mut out = Vec::new();
        if let Some(id) = &self.run_id {
            out.push(("SLUICE_RUN_ID".into(), id.into()));
        }
        if let Some(seq) = self.call_seq {
            out.push(("SLUICE_CALL_SEQ".into(), seq.to_string().into()));
        }
        if let Some(ws) = &self.workspace {
            out.push(("SLUICE_WORKSPACE".into(), ws.as_os_str().to_owned()));
        }
        out
    }
}

/// A POSIX shell name: `[A-Za-z_][A-Za-z0-9_]*`. Anything else could not be
/// read back by the shell and often signals a confused or hostile caller.
pub fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Rejects declared entries the OS or the shell cannot carry; the error's
/// field is `env.<name>`.
pub fn validate(declared: &BTreeMap<String, String>) -> Result<(), FlowError> {
    for (name, value) in declared {
        if !is_shell_name(name) {
            return Err(FlowError::invalid_input(
                &format!("env.{name}"),
                format!("env name {name:?} is not a POSIX shell name ([A-Za-z_][A-Za-z0-9_]*)"),
            ));
        }
        if value.contains('\0') {
            return Err(FlowError::invalid_input(
                &format!("env.{name}"),
                format!("env value of {name} contains a NUL byte"),
            ));
        }
    }
    Ok(())
}

fn allowed(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    !name.starts_with(MANAGED_PREFIX)
        && (BOOTSTRAP_ALLOWLIST.contains(&name) || name.starts_with("LC_"))
}

/// Builds the complete environment in the documented order. Pure, so tests
/// can feed a fake ambient environment instead of mutating the process's.
pub fn build(
    ambient: impl IntoIterator<Item = (OsString, OsString)>,
    declared: &BTreeMap<String, String>,
    managed: &Managed,
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> =
        ambient.into_iter().filter(|(k, _)| allowed(k)).collect();
    for (k, v) in declared {
        env.insert(k.into(), v.into());
    }
    for (k, v) in managed.entries() {
        env.insert(k, v);
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn shell_names() {
        for ok in ["A", "_x", "PATH", "a1_B"] {
            assert!(is_shell_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "A=B", "É"] {
            assert!(!is_shell_name(bad), "{bad}");
        }
    }

    #[test]
    fn order_allowlist_then_declared_then_managed() {
        let ambient = os(&[
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("SECRET_TOKEN", "s"),
            ("SLUICE_RUN_ID", "stale"),
            ("SLUICE_OTHER", "stale"),
        ]);
        let declared: BTreeMap<_, _> = [
            ("SECRET_TOKEN".to_string(), "declared".to_string()),
            ("SLUICE_RUN_ID".to_string(), "caller".to_string()),
        ]
        .into();
        let managed = Managed {
            run_id: Some("r1".into()),
            call_seq: Some(7),
            workspace: None,
        };
        let env: BTreeMap<_, _> = build(ambient, &declared, &managed).into_iter().collect();
        let get = |k: &str| env.get(OsStr::new(k)).map(|v| v.to_str().unwrap());
        assert_eq!(get("PATH"), Some("/bin"));
        assert_eq!(get("LC_ALL"), Some("C"));
        assert_eq!(get("SECRET_TOKEN"), Some("declared"));
        assert_eq!(get("SLUICE_RUN_ID"), Some("r1"));
        assert_eq!(get("SLUICE_CALL_SEQ"), Some("7"));
        assert_eq!(get("SLUICE_OTHER"), None);
        assert_eq!(get("SLUICE_WORKSPACE"), None);
    }
}
