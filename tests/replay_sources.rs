//! Replay and resume do not depend on the script file: the record keeps
//! the script's text and the text of each module it required from its
//! folder, `sluice replay` and `sluice resume` run those, and say so in
//! one line when a file on disk differs (naming it, with both SHA-256
//! prefixes); a stored text tampered with fails `sluice audit verify`.
//! Each test runs on both stores (`both_stores!`).

mod common;

use common::stores::{exec, one};
use common::*;
use sluice::internals::audit::db::{Db, Val};
use std::path::{Path, PathBuf};

use common::sluice_in as sluice;

fn sha256(bytes: &[u8]) -> String {
    sluice::internals::digest::sha256_hex(bytes)
}

/// The newest run's id.
fn last_run(db: &dyn Db) -> String {
    one(db, "SELECT id FROM runs ORDER BY n DESC LIMIT 1", &[])
}

/// A script that reads the file its module `util` names, and prints it:
/// run once and recorded. Returns the script's path, its module's, and
/// what the run printed.
fn recorded_run(ws: &Path) -> (PathBuf, PathBuf, String) {
    std::fs::write(ws.join("a.txt"), "from a\n").unwrap();
    std::fs::write(ws.join("b.txt"), "from b\n").unwrap();
    let script = script_file(
        ws,
        "local util = require('util')\nlocal page = assert(sluice.read{path = util.file})\nprint(page.content)\n",
    );
    let module = script.parent().unwrap().join("util.lua");
    std::fs::write(&module, "return {file = 'a.txt'}\n").unwrap();
    let first = run_script_with(ws, &script, &[], &[]).ok();
    assert_eq!(first.stdout, "from a\n");
    (script, module, first.stdout)
}

/// The first 12 digits of `text`'s SHA-256, as sluice shows it.
fn short(text: &str) -> String {
    sha256(text.as_bytes())[..12].to_string()
}

both_stores! {
    fn a_replay_of_a_run_whose_script_file_was_deleted_runs_the_recorded_text(store) {
        let ws = workspace();
        let (script, _, printed) = recorded_run(ws.path());
        let text = std::fs::read_to_string(&script).unwrap();
        std::fs::remove_file(&script).unwrap();

        let replay = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(replay.stdout, printed);
        let id = last_run(&*store.db(ws.path()));
        let said: Vec<&str> = replay.stderr.lines().collect();
        assert_eq!(
            said,
            [
                format!(
                    "sluice: the script {} is gone (SHA-256 {} recorded, none on disk); the text run {id} \
recorded runs",
                    script.display(),
                    short(&text)
                )
                .as_str(),
                format!(
                    "sluice: run {id} reproduced: 1 call answered from the record, and it ended ok as recorded"
                )
                .as_str(),
            ]
        );
    }
}

both_stores! {
    fn a_replay_of_an_edited_script_says_it_differs_and_runs_the_recorded_text(store) {
        let ws = workspace();
        let (script, _, printed) = recorded_run(ws.path());
        let then = std::fs::read_to_string(&script).unwrap();
        let edited = "local page = assert(sluice.read{path = 'b.txt'})\nprint(page.content)\n";
        std::fs::write(&script, edited).unwrap();

        let replay = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(replay.stdout, printed, "the recorded text ran, not the edit");
        let id = last_run(&*store.db(ws.path()));
        let line = format!(
            "sluice: the script {} differs from the text run {id} recorded (SHA-256 {} recorded, {} on \
disk); the recorded text runs (--script {} runs the file)",
            script.display(),
            short(&then),
            short(edited),
            script.display()
        );
        assert_eq!(replay.stderr.lines().next(), Some(line.as_str()), "{}", replay.stderr);
        assert_eq!(replay.stderr.lines().count(), 2, "{}", replay.stderr);

        // --script FILE keeps its meaning: the file as it is now, which
        // departs from the record at its first call.
        let file = sluice(
            ws.path(),
            &["replay", "last", "--script", script.to_str().unwrap()],
        );
        assert_eq!(file.code, 1, "{}", file.stderr);
        assert!(file.stderr.contains("replay diverged at call #1"), "{}", file.stderr);
        assert!(!file.stderr.contains("differs from the text"), "{}", file.stderr);
    }
}

both_stores! {
    fn a_replay_runs_the_recorded_text_of_a_module_edited_since_and_says_so(store) {
        let ws = workspace();
        let (_, module, printed) = recorded_run(ws.path());
        let then = std::fs::read_to_string(&module).unwrap();
        let edited = "return {file = 'b.txt'}\n";
        std::fs::write(&module, edited).unwrap();

        let replay = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(replay.stdout, printed, "the recorded module ran, not the edit");
        let id = last_run(&*store.db(ws.path()));
        let line = format!(
            "sluice: module \"util\": {} differs from the text run {id} recorded (SHA-256 {} recorded, {} \
on disk); the recorded text runs",
            module.display(),
            short(&then),
            short(edited)
        );
        assert_eq!(replay.stderr.lines().next(), Some(line.as_str()), "{}", replay.stderr);
        assert!(replay.stderr.contains("reproduced"), "{}", replay.stderr);

        // The module gone altogether: the recorded text runs all the same.
        std::fs::remove_file(&module).unwrap();
        let gone = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(gone.code, 0, "{}", gone.stderr);
        assert_eq!(gone.stdout, printed);
        assert!(
            gone.stderr.contains(&format!("module \"util\": {} is gone", module.display())),
            "{}",
            gone.stderr
        );
    }
}

both_stores! {
    fn a_resume_runs_the_recorded_texts_and_records_them_again(store) {
        let ws = workspace();
        let (script, module, _) = recorded_run(ws.path());
        let (text, util) = (
            std::fs::read_to_string(&script).unwrap(),
            std::fs::read_to_string(&module).unwrap(),
        );
        std::fs::remove_file(&script).unwrap();
        std::fs::write(&module, "return {file = 'b.txt'}\n").unwrap();

        let resumed = sluice(ws.path(), &["resume", "last", "--live-from", "1"]);
        assert_eq!(resumed.code, 0, "{}", resumed.stderr);
        assert_eq!(resumed.stdout, "from a\n", "the recorded module's file was read, live");
        assert!(resumed.stderr.contains("is gone"), "{}", resumed.stderr);
        assert!(resumed.stderr.contains("module \"util\""), "{}", resumed.stderr);
        let db = store.db(ws.path());
        let new = last_run(&*db);
        let kept: String = one(&*db, "SELECT script_sha256 FROM runs WHERE id = ?1", &[Val::from(&new)]);
        assert_eq!(kept, sha256(text.as_bytes()));
        let modules: Vec<String> = common::stores::column(
            &*db,
            "SELECT name || ' ' || sha256 FROM modules WHERE run = ?1 ORDER BY k",
            &[Val::from(&new)],
        );
        assert_eq!(modules, [format!("util {}", sha256(util.as_bytes()))]);
        let verify = sluice(ws.path(), &["audit", "verify"]);
        assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    }
}

both_stores! {
    fn a_stored_script_or_module_text_tampered_with_fails_verify(store) {
        let ws = workspace();
        let (script, module, _) = recorded_run(ws.path());
        let db = store.db(ws.path());
        let id = last_run(&*db);
        let verify = || sluice(ws.path(), &["audit", "verify", &id]);
        assert_eq!(verify().code, 0, "{}", verify().stdout);

        let script_sha = sha256(&std::fs::read(&script).unwrap());
        let original = std::fs::read_to_string(&script).unwrap();
        let edit = "UPDATE outputs SET body = ?2 WHERE sha256 = ?1";
        let evil = "os.exit(1)\n";
        assert_eq!(exec(&*db, edit, &[Val::from(&script_sha), Val::from(evil)]), 1);
        let bad = verify();
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert_eq!(
            bad.stdout,
            format!(
                "{id}  NOT INTACT: script text edited: the script's text kept in the record no longer \
hashes to the SHA-256 the run's head covers\n"
            )
        );
        // A replay refuses the tampered record.
        let replay = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 2, "{}", replay.stderr);
        assert!(replay.stderr.contains("does not verify"), "{}", replay.stderr);
        exec(&*db, edit, &[Val::from(&script_sha), Val::from(&original)]);
        assert_eq!(verify().code, 0, "restored: {}", verify().stdout);

        let module_sha = sha256(&std::fs::read(&module).unwrap());
        exec(&*db, edit, &[Val::from(&module_sha), Val::from("return {file = 'b.txt'}\n")]);
        let bad = verify();
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        let canonical = std::fs::canonicalize(&module).unwrap();
        assert_eq!(
            bad.stdout,
            format!(
                "{id}  NOT INTACT: module text edited: the text of module \"util\" ({}) kept in the \
record no longer hashes to its SHA-256\n",
                canonical.display()
            )
        );
        // The module's row, pointed at another text that hashes, breaks the seal.
        exec(&*db, edit, &[Val::from(&module_sha), Val::from("return {file = 'a.txt'}\n")]);
        let other = "return {file = 'b.txt'}\n";
        exec(
            &*db,
            "INSERT INTO outputs (sha256, body) VALUES (?1, ?2)",
            &[Val::from(sha256(other.as_bytes())), Val::from(other)],
        );
        exec(
            &*db,
            "UPDATE modules SET sha256 = ?2 WHERE run = ?1",
            &[Val::from(&id), Val::from(sha256(other.as_bytes()))],
        );
        let bad = verify();
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert!(bad.stdout.contains("NOT INTACT: seal mismatch"), "{}", bad.stdout);
    }
}

both_stores! {
    fn a_run_copied_to_another_store_keeps_its_texts_and_replays_from_there(store) {
        let ws = workspace();
        let (script, module, printed) = recorded_run(ws.path());
        let target = ws.path().parent().unwrap().join("copy.db");
        let to = target.to_str().unwrap();
        let copied = sluice(ws.path(), &["audit", "copy", "--to", to]);
        assert_eq!(copied.code, 0, "{}{}", copied.stdout, copied.stderr);
        std::fs::remove_file(&script).unwrap();
        std::fs::remove_file(&module).unwrap();

        let replay = sluice(ws.path(), &["replay", "last", "--audit", to]);
        assert_eq!(replay.code, 0, "{}", replay.stderr);
        assert_eq!(replay.stdout, printed);
        assert!(replay.stderr.contains("module \"util\""), "{}", replay.stderr);
        let verify = sluice(ws.path(), &["audit", "verify", "--audit", to]);
        assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    }
}
