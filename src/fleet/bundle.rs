//! What a fleet run carries: the script's text, its arguments and every
//! policy file's text, each with its SHA-256. A worker runs exactly this,
//! never its own disk's copy, and refuses a bundle whose text does not
//! hash to what it says. Arguments go into the engine's history, which
//! keeps them: a credential-shaped one is refused at submit (a fleet
//! run's secrets are named credentials the workers hold).

use crate::digest::sha256_hex;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A file carried by text, with the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    /// The name it was submitted as (the file's path on the submitter's
    /// machine, for the record and for messages).
    pub name: String,
    pub text: String,
    pub sha256: String,
}

impl Carried {
    /// The file at `path`, read whole.
    pub fn read(path: &Path) -> Result<Carried, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Carried {
            name: path.display().to_string(),
            sha256: sha256_hex(text.as_bytes()),
            text,
        })
    }

    /// An error naming the file when its text does not hash to its SHA-256.
    fn check(&self, what: &str) -> Result<(), String> {
        let actual = sha256_hex(self.text.as_bytes());
        if actual == self.sha256 {
            return Ok(());
        }
        Err(format!(
            "the {what} {} does not match its SHA-256 (it says {}, its text hashes to {actual}): \
the bundle was altered after it was submitted, so it is not run",
            self.name, self.sha256
        ))
    }
}

/// A run as submitted to a fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// The run's id, which is also its workflow's.
    pub run: String,
    pub script: Carried,
    pub args: Vec<String>,
    /// Every policy file, in the order given.
    pub policies: Vec<Carried>,
    /// The workspace, a path every worker reaches (shared storage).
    pub workspace: String,
}

impl Bundle {
    /// Checks every file's text against its SHA-256: what a worker does
    /// before it runs anything of it.
    pub fn check(&self) -> Result<(), String> {
        self.script.check("script")?;
        self.policies.iter().try_for_each(|p| p.check("policy"))
    }

    /// Refuses arguments shaped like credentials (tokens, keys, `--token=`
    /// values): the engine's history would keep them. Named credentials
    /// the workers hold are how a fleet run gets secrets.
    pub fn refuse_secrets(args: &[String]) -> Result<(), String> {
        let (_, cut) = crate::credentials::redact_args(args, &[]);
        if cut.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} argument(s) look like credentials; a fleet run's arguments are kept in the \
engine's history, so they are not submitted. Give the secret to the workers as a named \
credential (their --credentials file, or SLUICE_CREDENTIAL_NAME) and pass its name",
            cut.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> Bundle {
        let carried = |name: &str, text: &str| Carried {
            name: name.into(),
            text: text.into(),
            sha256: sha256_hex(text.as_bytes()),
        };
        Bundle {
            run: "3f9a1c7e-19ad2c4b1e0".into(),
            script: carried("fix.lua", "sluice.ls{path = '.'}\n"),
            args: vec!["src".into()],
            policies: vec![carried("team.lua", "return {}\n")],
            workspace: "/srv/ws".into(),
        }
    }

    #[test]
    fn a_bundle_whose_texts_hash_to_what_they_say_passes() {
        assert_eq!(bundle().check(), Ok(()));
    }

    #[test]
    fn an_altered_script_or_policy_is_refused_naming_it() {
        let mut b = bundle();
        b.script.text.push_str("os.execute('curl evil')\n");
        let e = b.check().unwrap_err();
        assert!(
            e.starts_with("the script fix.lua does not match its SHA-256"),
            "{e}"
        );
        let mut b = bundle();
        b.policies[0].text = "return {allow = {'*'}}\n".into();
        let e = b.check().unwrap_err();
        assert!(e.starts_with("the policy team.lua does not match"), "{e}");
    }

    #[test]
    fn credential_shaped_arguments_are_refused_and_plain_ones_pass() {
        assert_eq!(
            Bundle::refuse_secrets(&["src".into(), "--fix".into()]),
            Ok(())
        );
        let e = Bundle::refuse_secrets(&["--token=hunter2".into()]).unwrap_err();
        assert!(e.starts_with("1 argument(s) look like credentials"), "{e}");
        assert!(
            !e.contains("hunter2"),
            "the refusal never repeats the secret: {e}"
        );
    }
}
