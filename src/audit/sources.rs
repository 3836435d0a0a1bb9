//! The Lua source a run ran, kept so that a replay or a resume does not
//! depend on the files on disk: the script's text, kept by content in
//! `outputs` under the run's `script_sha256` (which its head covers), and
//! each module its script `require`d from its folder, a row of `modules`
//! (name, file, SHA-256; the run's seal covers them) with its text kept by
//! content likewise. `sluice audit verify` checks that each text still
//! hashes to its key ([`problem`]).
//!
//! The texts are written as the run seals, when every secret the run met
//! is known (a token its script sets as a command's environment is learned
//! only from that call's input): a text that holds one is not kept (the
//! record never holds a secret), nor is any text of a run killed before it
//! could seal. Such a run replays from its files, as a run recorded before
//! schema 7 does.

use super::chain;
use super::db::{self, vals, Db};
use crate::digest::sha256_hex;

/// A module row: what the seal covers of a module the script required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredModule {
    /// Its place in the order the run loaded modules, from 1.
    pub k: i64,
    /// The name `require` was given (`util`, `lib.text`).
    pub name: String,
    /// The file it was loaded from.
    pub path: String,
    /// The SHA-256 of the text that ran.
    pub sha256: String,
}

impl StoredModule {
    /// The module as the seal hashes it.
    pub fn sealed(&self) -> chain::Module<'_> {
        chain::Module {
            k: self.k,
            name: &self.name,
            path: &self.path,
            sha256: &self.sha256,
        }
    }
}

/// A module of a recorded run, with its text: what a replay loads in its
/// place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedModule {
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub text: String,
}

/// Run `run`'s module rows, in the order they loaded. A run requires a
/// handful (each is a file of its folder): they are read at once.
pub fn modules(db: &dyn Db, run: &str) -> db::Result<Vec<StoredModule>> {
    let rows = db.query(
        "SELECT k, name, path, sha256 FROM modules WHERE run = ?1 ORDER BY k",
        vals![run],
    )?;
    rows.into_iter()
        .map(|r| {
            Ok(StoredModule {
                k: r.get(0)?,
                name: r.get(1)?,
                path: r.get(2)?,
                sha256: r.get(3)?,
            })
        })
        .collect()
}

/// The text kept under `sha`, when it is there and still hashes to it.
pub fn text(db: &dyn Db, sha: &str) -> db::Result<Option<String>> {
    let body = super::rows::body(db, sha)?;
    Ok(body.filter(|b| sha256_hex(b.as_bytes()) == sha))
}

/// The modules the runs of `chain` recorded, the first run's first: for
/// each name, the loads of the first run that loaded it, in order. A
/// module whose text is gone or no longer hashes to its key is left out
/// (a replay forced past `verify` reads its file instead).
pub fn recorded(db: &dyn Db, chain: &[String]) -> db::Result<Vec<RecordedModule>> {
    let mut found: Vec<RecordedModule> = Vec::new();
    for run in chain {
        let mut own = Vec::new();
        for m in modules(db, run)? {
            if found.iter().any(|f| f.name == m.name) {
                continue;
            }
            if let Some(text) = text(db, &m.sha256)? {
                own.push(RecordedModule {
                    name: m.name,
                    path: m.path,
                    sha256: m.sha256,
                    text,
                });
            }
        }
        found.extend(own);
    }
    Ok(found)
}

/// What is wrong with the texts run `run` keeps, if anything: the
/// script's (under `script_sha256`, when it is kept) or a module's that no
/// longer hashes to its key, or a module's that is gone.
pub fn problem(db: &dyn Db, run: &str, script_sha256: Option<&str>) -> db::Result<Option<String>> {
    if let Some(sha) = script_sha256 {
        let body = super::rows::body(db, sha)?;
        if body.is_some_and(|b| sha256_hex(b.as_bytes()) != sha) {
            return Ok(Some(
                "script text edited: the script's text kept in the record no longer hashes to \
the SHA-256 the run's head covers"
                    .to_string(),
            ));
        }
    }
    for m in modules(db, run)? {
        let what = match super::rows::body(db, &m.sha256)? {
            None => "is gone from the record",
            Some(b) if sha256_hex(b.as_bytes()) != m.sha256 => {
                "kept in the record no longer hashes to its SHA-256"
            }
            Some(_) => continue,
        };
        return Ok(Some(format!(
            "module text edited: the text of module {:?} ({}) {what}",
            m.name, m.path
        )));
    }
    Ok(None)
}

/// Copies run `run`'s kept texts and module rows from `from` into `to`
/// (inside the caller's transaction): a copied run replays from its record
/// in the target too.
pub fn copy(from: &dyn Db, to: &dyn Db, run: &str, script_sha256: Option<&str>) -> db::Result<()> {
    let keep = |sha: &str| -> db::Result<()> {
        if let Some(body) = super::rows::body(from, sha)? {
            to.execute(
                "INSERT INTO outputs (sha256, body) VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING",
                vals![sha, body],
            )?;
        }
        Ok(())
    };
    if let Some(sha) = script_sha256 {
        keep(sha)?;
    }
    for m in modules(from, run)? {
        keep(&m.sha256)?;
        to.execute(
            "INSERT INTO modules (run, k, name, path, sha256) VALUES (?1, ?2, ?3, ?4, ?5)",
            vals![run, m.k, &m.name, &m.path, &m.sha256],
        )?;
    }
    Ok(())
}

/// Whether `text` may be kept: it holds none of `secrets` (a loaded
/// credential's value never reaches the record).
pub fn keepable(text: &str, secrets: &[String]) -> bool {
    !secrets
        .iter()
        .any(|s| !s.is_empty() && text.contains(s.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::fixtures::{db, run_start};
    use crate::audit::recorder::{Recorder, RunStart};
    use crate::audit::verify::{verify, Failure};

    /// Records run `id` of script `script` (its text kept), loading the
    /// modules `loads` (name, text) in turn; its record's file.
    fn recorded_run(dir: &std::path::Path, id: &str, script: &str, loads: &[(&str, &str)]) {
        let run = RunStart {
            script_sha256: Some(sha256_hex(script.as_bytes())),
            script_text: Some(script.to_string()),
            ..run_start(id)
        };
        let recorder = Recorder::start(&dir.join("audit.db"), run).unwrap();
        for (k, (name, text)) in loads.iter().enumerate() {
            recorder.module(k as i64 + 1, name, &format!("/w/{name}.lua"), text);
        }
        recorder.end("ok", None).unwrap();
    }

    #[test]
    fn a_run_keeps_its_script_and_modules_and_the_seal_covers_the_modules() {
        let (dir, conn) = db();
        let script = "local u = require('util')\n";
        recorded_run(
            dir.path(),
            "r1",
            script,
            &[("util", "return 1\n"), ("util", "return 2\n")],
        );
        let v = verify(&conn, "r1").unwrap();
        assert!(v.intact && v.sealed, "{v:?}");
        let sha = sha256_hex(script.as_bytes());
        assert_eq!(text(&conn, &sha).unwrap().as_deref(), Some(script));
        let kept = recorded(&conn, &["r1".to_string()]).unwrap();
        let got: Vec<(&str, &str)> = kept
            .iter()
            .map(|m| (m.name.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(got, [("util", "return 1\n"), ("util", "return 2\n")]);

        // A module's row renamed: the seal no longer covers what is there.
        conn.execute("UPDATE modules SET name = 'other' WHERE k = 2", [])
            .unwrap();
        let v = verify(&conn, "r1").unwrap();
        assert_eq!(v.problem.map(|p| p.failure), Some(Failure::SealMismatch));
    }

    #[test]
    fn a_text_holding_a_loaded_secret_is_not_kept() {
        let (dir, conn) = db();
        let secret = "sk-sources-test-7f3a91c2e5";
        crate::credentials::remember_secret(secret);
        let script = format!("local key = '{secret}'\n");
        let module = format!("return '{secret}'\n");
        recorded_run(
            dir.path(),
            "r2",
            &script,
            &[("plain", "return 0\n"), ("key", &module)],
        );
        let bodies: Vec<String> = (&conn as &dyn Db)
            .column("SELECT body FROM outputs", &[])
            .unwrap();
        assert!(bodies.iter().all(|b| !b.contains(secret)), "{bodies:?}");
        let names: Vec<String> = modules(&conn, "r2")
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["plain"]);
        assert!(verify(&conn, "r2").unwrap().intact);
        assert!(keepable("return 0", &[secret.to_string()]));
        assert!(!keepable(&module, &[secret.to_string()]));
    }

    #[test]
    fn a_kept_text_edited_or_gone_is_named_by_verify() {
        let (dir, conn) = db();
        let script = "print(1)\n";
        recorded_run(dir.path(), "r3", script, &[("util", "return 1\n")]);
        let module_sha = sha256_hex(b"return 1\n");
        conn.execute("DELETE FROM outputs WHERE sha256 = ?1", [&module_sha])
            .unwrap();
        let p = verify(&conn, "r3").unwrap().problem.unwrap();
        assert_eq!(p.failure, Failure::SourceEdited);
        assert_eq!(
            p.message,
            "module text edited: the text of module \"util\" (/w/util.lua) is gone from the record"
        );
        assert!(recorded(&conn, &["r3".to_string()]).unwrap().is_empty());
    }
}
