//! The audit trail through the real binary: what a run records for each
//! tier, what never reaches the database, the hash chain against edits,
//! deletions, reordering and inserted rows, a SIGKILL in the middle of an
//! irreversible call, replay against a world that changed, divergence, and
//! resume. Each test runs on both stores (`both_stores!`: the workspace's
//! SQLite file and a PostgreSQL database); those about the SQLite file
//! itself run on SQLite alone.

mod common;

use common::stores::{exec, one, Store};
use common::*;
use rusqlite::Connection;
use serde_json::{json, Value};
use sluice::internals::audit::db::{Db, FromVal, Val};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::sluice_in as sluice;

/// Every call row of the run, by chain position, as JSON objects.
fn calls(db: &dyn Db, run: &str) -> Vec<Value> {
    let sql =
        "SELECT task, seq, n, flow, tier, input, capabilities, decisions, route, redacted, status,
                      coalesce(output, (SELECT body FROM outputs WHERE sha256 = output_ref)),
                      error, capped, duration_us, started_ms, hash, prev, outcome_hash
               FROM calls WHERE run = ?1 ORDER BY n";
    let rows = db
        .query(sql, &[Val::from(run)])
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter()
        .map(|r| {
            let text = |i: usize| r.get::<Option<String>>(i).unwrap();
            let int = |i: usize| r.get::<Option<i64>>(i).unwrap();
            let json_col = |i: usize| -> Value {
                text(i).map_or(Value::Null, |t| serde_json::from_str(&t).unwrap())
            };
            json!({
                "task": r.get::<String>(0).unwrap(), "seq": r.get::<i64>(1).unwrap(), "n": r.get::<i64>(2).unwrap(),
                "flow": r.get::<String>(3).unwrap(), "tier": r.get::<String>(4).unwrap(), "input": json_col(5),
                "capabilities": json_col(6), "decisions": json_col(7), "route": json_col(8),
                "redacted": json_col(9), "status": text(10), "output": json_col(11),
                "error": json_col(12), "capped": r.get::<bool>(13).unwrap(),
                "duration_us": int(14), "started_ms": r.get::<i64>(15).unwrap(),
                "hash": r.get::<String>(16).unwrap(), "prev": r.get::<String>(17).unwrap(),
                "outcome_hash": text(18),
            })
        })
        .collect()
}

/// Starts `sluice run PATH` in `ws` and returns once the file `marker`
/// exists in the workspace (the script got that far), so a test can kill it
/// there.
fn spawn_until(ws: &Path, path: &Path, marker: &str) -> std::process::Child {
    spawn_until_with(ws, path, marker, &[])
}

/// [`spawn_until`] with extra `sluice run` flags.
fn spawn_until_with(ws: &Path, path: &Path, marker: &str, flags: &[&str]) -> std::process::Child {
    let child = Command::new(sluice_bin())
        .arg("run")
        .arg(path)
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .envs(common::stores::current_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ws.join(marker).exists() {
        assert!(Instant::now() < deadline, "the run never made {marker}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The newest run's id.
fn last_run(db: &dyn Db) -> String {
    one(
        db,
        "SELECT id FROM runs ORDER BY started_ms DESC, n DESC LIMIT 1",
        &[],
    )
}

fn run_field<T: FromVal>(db: &dyn Db, run: &str, col: &str) -> T {
    one(
        db,
        &format!("SELECT {col} FROM runs WHERE id = ?1"),
        &[Val::from(run)],
    )
}

fn sha256(bytes: &[u8]) -> String {
    sluice::internals::digest::sha256_hex(bytes)
}

both_stores! {
    fn a_run_records_its_facts_and_every_call_with_tier_decisions_route_and_outcome(store) {
        let ws = workspace();
        std::fs::write(ws.file("in.txt"), "hello\n").unwrap();
        let script = script_file(
            ws.path(),
            r#"
local page = assert(sluice.read{path = "in.txt"})
assert(sluice.write{path = "out.txt", content = page.content})
assert(sluice.bash{command = "echo hi"})
local _, err = sluice.read{path = "/var/lib/dpkg/status"}
local _, bad = sluice.read{nope = 1}
print(err.code, bad.code)
"#,
        );
        let run = run_script_with(ws.path(), &script, &[], &["first", "second"]).ok();
        assert_eq!(run.stdout.trim(), "permission_required\tinvalid_input");
        let db = store.db(ws.path());
        let id = last_run(&*db);
        assert_eq!(run_field::<String>(&*db, &id, "status"), "ok");
        assert_eq!(
            run_field::<String>(&*db, &id, "script"),
            canon(&script).display().to_string()
        );
        assert_eq!(
            run_field::<String>(&*db, &id, "script_sha256"),
            sha256(&std::fs::read(&script).unwrap())
        );
        assert_eq!(
            run_field::<String>(&*db, &id, "args"),
            r#"["first","second"]"#
        );
        assert_eq!(
            run_field::<String>(&*db, &id, "workspace"),
            ws.path().display().to_string()
        );
        assert_eq!(
            run_field::<String>(&*db, &id, "version"),
            env!("CARGO_PKG_VERSION")
        );
        let policies: Value =
            serde_json::from_str(&run_field::<String>(&*db, &id, "policies")).unwrap();
        let default_text =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.lua")).unwrap();
        assert_eq!(
            policies,
            json!([{"name": "default", "sha256": sha256(&default_text)}])
        );
        let started: i64 = run_field(&*db, &id, "started_ms");
        let ended: i64 = run_field(&*db, &id, "ended_ms");
        assert!(started > 0 && ended >= started);
        assert!(run_field::<Option<String>>(&*db, &id, "seal").is_some());

        let rows = calls(&*db, &id);
        let flows: Vec<&str> = rows.iter().map(|r| r["flow"].as_str().unwrap()).collect();
        assert_eq!(flows, ["read", "write", "bash", "read", "read"]);
        let tiers: Vec<&str> = rows.iter().map(|r| r["tier"].as_str().unwrap()).collect();
        assert_eq!(
            tiers,
            ["sealed", "compensable", "irreversible", "sealed", "sealed"]
        );
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r["task"], "0");
            assert_eq!(r["seq"], i as i64 + 1);
            assert_eq!(r["n"], i as i64 + 1);
            assert!(r["started_ms"].as_i64().unwrap() >= started);
            assert!(r["duration_us"].as_i64().is_some(), "{r}");
            assert!(r["outcome_hash"].is_string());
        }
        let ws_text = ws.path().display().to_string();
        assert_eq!(rows[0]["input"], json!({"path": "in.txt"}));
        assert_eq!(
            rows[0]["capabilities"],
            json!([format!("fs:read:{ws_text}/in.txt")])
        );
        let d = &rows[0]["decisions"][0];
        assert_eq!(d["capability"], format!("fs:read:{ws_text}/in.txt"));
        assert_eq!(d["decision"], "allow");
        assert!(d["by"].as_str().unwrap().contains("default.lua"), "{d}");
        assert_eq!(rows[0]["status"], "ok");
        assert_eq!(rows[0]["output"]["content"], "hello");
        assert_eq!(rows[0]["route"], Value::Null);
        assert_eq!(
            rows[1]["capabilities"],
            json!([format!("fs:write:{ws_text}/out.txt")])
        );
        assert_eq!(rows[2]["route"], json!({"host": "sandbox"}));
        assert_eq!(rows[2]["capabilities"], json!(["proc:spawn:echo hi"]));
        assert_eq!(rows[2]["output"]["stdout"], "hi\n");
        // An ask nobody answered: the decision, and the error.
        assert_eq!(rows[3]["decisions"][0]["decision"], "ask");
        assert_eq!(rows[3]["decisions"][0]["approvedBy"], Value::Null);
        assert_eq!(rows[3]["status"], "error");
        assert_eq!(rows[3]["error"]["code"], "permission_required");
        // Invalid input never reached authorization.
        assert_eq!(rows[4]["capabilities"], json!([]));
        assert_eq!(rows[4]["decisions"], json!([]));
        assert_eq!(rows[4]["error"]["code"], "invalid_input");
        // The chain links each row to the one before it.
        for pair in rows.windows(2) {
            assert_eq!(pair[1]["prev"], pair[0]["hash"]);
        }
        assert_eq!(
            rows[0]["prev"],
            json!(run_field::<String>(&*db, &id, "head"))
        );
    }
}

#[test]
fn no_audit_records_nothing_and_audit_path_and_env_choose_the_database() {
    let ws = workspace();
    run_lua_with(ws.path(), "sluice.ls{path = '.'}", &["--no-audit"], &[]).ok();
    assert!(!ws.file(".sluice").exists());
    let elsewhere = ws.path().parent().unwrap().join("elsewhere.db");
    run_lua_with(
        ws.path(),
        "sluice.ls{path = '.'}",
        &["--audit", elsewhere.to_str().unwrap()],
        &[],
    )
    .ok();
    assert!(elsewhere.exists());
    assert!(!ws.file(".sluice").exists());
    let by_env = ws.path().parent().unwrap().join("env.db");
    let path = script_file(ws.path(), "sluice.ls{path = '.'}");
    let out = Command::new(sluice_bin())
        .arg("run")
        .arg(&path)
        .arg("--workspace")
        .arg(ws.path())
        .env("SLUICE_AUDIT", &by_env)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(by_env.exists());
    let conn = Connection::open(&by_env).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM calls", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

both_stores! {
    /// `--no-audit` beside a store the environment names: nothing is
    /// recorded there, and no `.sluice` folder is made.
    fn no_audit_records_nothing_in_the_store_the_environment_names(store) {
        let ws = workspace();
        run_lua_with(ws.path(), "sluice.ls{path = '.'}", &["--no-audit"], &[]).ok();
        assert!(!ws.file(".sluice").exists());
        if store.kind == common::stores::Kind::Postgres {
            let runs: i64 = one(&*store.db(ws.path()), "SELECT count(*) FROM runs", &[]);
            assert_eq!(runs, 0);
        }
        run_lua(ws.path(), "sluice.ls{path = '.'}", &[]).ok();
        let runs: i64 = one(&*store.db(ws.path()), "SELECT count(*) FROM runs", &[]);
        assert_eq!(runs, 1, "the same run without --no-audit is recorded there");
    }
}

#[test]
fn flows_cannot_write_into_the_audit_store() {
    let ws = workspace();
    run_lua(ws.path(), "sluice.ls{path='.'}", &[]).ok();
    let out = lua_json(
        ws.path(),
        r#"local _, e = sluice.write{path = ".sluice/audit.db", content = "x"}; emit(e)"#,
    );
    assert_eq!(out[0]["code"], "permission_denied");
    assert!(
        out[0]["message"].as_str().unwrap().contains("audit store"),
        "{}",
        out[0]
    );
}

/// A loopback HTTP server answering every request with `body` and a
/// set-cookie header; it stops when dropped.
struct Http {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Http {
    fn start(body: &'static str) -> Http {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            while !halt.load(std::sync::atomic::Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        conn.set_nonblocking(false).unwrap();
                        let mut buf = [0u8; 65536];
                        let mut seen = Vec::new();
                        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nset-cookie: session=c00kie-v4lue\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = conn.write_all(reply.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Http {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/page", self.port)
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

both_stores! {
    fn secrets_never_reach_the_database_and_the_record_names_what_was_redacted(store) {
        let ws = workspace();
        let server = Http::start("body echoes tok-3nv-s3cret and h3ader-s3cret");
        let script = format!(
            r#"
assert(sluice.bash{{command = "echo $GITHUB_TOKEN; echo $DB_PASSWORD", env = {{GITHUB_TOKEN = "tok-3nv-s3cret", DB_PASSWORD = "pw-3nv-s3cret", LANG = "C"}}}})
assert(sluice.fetch{{url = "{url}", headers = {{authorization = "Bearer h3ader-s3cret", cookie = "sid=c00kie-s3cret", ["x-api-key"] = "k3y-s3cret", accept = "text/plain"}}}})
"#,
            url = server.url()
        );
        let grant = format!("net:private:{}", server.origin());
        run_lua_with(ws.path(), &script, &["--approve", &grant], &[]).ok();
        drop(server);
        let bytes = store.bytes(ws.path());
        for secret in [
            "tok-3nv-s3cret",
            "pw-3nv-s3cret",
            "h3ader-s3cret",
            "c00kie-s3cret",
            "k3y-s3cret",
        ] {
            assert!(
                !contains(&bytes, secret),
                "{secret} is in the database file"
            );
        }
        assert!(
            contains(&bytes, "text/plain"),
            "non-secret headers are kept"
        );
        if let Some(password) = store.password() {
            assert!(!contains(&bytes, password), "the store's own password is in it");
        }
        let db = store.db(ws.path());
        let rows = calls(&*db, &last_run(&*db));
        assert_eq!(rows[0]["input"]["env"]["GITHUB_TOKEN"], "[redacted]");
        assert_eq!(rows[0]["input"]["env"]["LANG"], "C");
        assert_eq!(rows[0]["output"]["stdout"], "[redacted]\n[redacted]\n");
        let redacted: Vec<&str> = rows[0]["redacted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(redacted.contains(&"input.env.GITHUB_TOKEN"), "{redacted:?}");
        assert!(redacted.contains(&"input.env.DB_PASSWORD"), "{redacted:?}");
        assert!(
            redacted.contains(&"output.stdout (a secret's value)"),
            "{redacted:?}"
        );
        let headers = &rows[1]["input"]["headers"];
        assert_eq!(headers["authorization"], "[redacted]");
        assert_eq!(headers["cookie"], "[redacted]");
        assert_eq!(headers["x-api-key"], "[redacted]");
        assert_eq!(headers["accept"], "text/plain");
        assert_eq!(
            rows[1]["output"]["body"],
            "body echoes [redacted] and [redacted]"
        );
    }
}

both_stores! {
    fn a_named_credential_is_cut_from_the_record_even_when_a_provider_echoes_it(store) {
        let ws = workspace();
        const KEY: &str = "exa-n4med-cred3ntial";
        // An Exa-shaped answer whose text repeats the key.
        let server = Http::start(
            r#"{"results":[{"title":"t","url":"https://a.example/","text":"the key is exa-n4med-cred3ntial"}]}"#,
        );
        let path = script_file(
            ws.path(),
            "local r = assert(sluice.websearch{query = 'q'}); print(r.results[1].url)",
        );
        let out = Command::new(sluice_bin())
            .arg("run")
            .arg(&path)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--search", &format!("exa={}/search", server.origin())])
            .args(["--approve", &format!("net:private:{}", server.origin())])
            .args(["--approve", "net:post:*"])
            .env("SLUICE_CREDENTIAL_EXA", KEY)
            .envs(common::stores::current_env())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        drop(server);
        assert!(!contains(&store.bytes(ws.path()), KEY));
    }
}

/// Runs a script of three calls and returns (workspace, run id).
fn recorded_run(store: &Store) -> (Workspace, String) {
    let ws = workspace();
    run_lua(
        ws.path(),
        "sluice.write{path = 'a.txt', content = 'a'}\nsluice.read{path = 'a.txt'}\nsluice.ls{path = '.'}\nsluice.read{path = 'a.txt'}",
        &[],
    )
    .ok();
    let id = last_run(&*store.db(ws.path()));
    (ws, id)
}

fn verify(ws: &Path) -> Run {
    sluice(ws, &["audit", "verify"])
}

both_stores! {
    fn verify_passes_an_intact_run_and_names_an_edited_row(store) {
        let (ws, id) = recorded_run(store);
        let ok = verify(ws.path());
        assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
        exec(
            &*store.db(ws.path()),
            "UPDATE calls SET input = '{\"path\":\"b.txt\"}' WHERE run = ?1 AND n = 2",
            &[Val::from(&id)],
        );
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        let text = format!("{}{}", bad.stdout, bad.stderr);
        assert!(text.contains(&id) && text.contains("#2"), "{text}");
    }
}

both_stores! {
    fn verify_detects_a_deleted_row(store) {
        let (ws, id) = recorded_run(store);
        exec(
            &*store.db(ws.path()),
            "DELETE FROM calls WHERE run = ?1 AND n = 2",
            &[Val::from(&id)],
        );
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        let text = format!("{}{}", bad.stdout, bad.stderr);
        assert!(text.contains("#3") || text.contains("#2"), "{text}");
    }
}

both_stores! {
    fn verify_detects_reordered_rows(store) {
        let (ws, id) = recorded_run(store);
        let db = store.db(ws.path());
        let run = [Val::from(&id)];
        exec(&*db, "UPDATE calls SET n = -1 WHERE run = ?1 AND n = 2", &run);
        exec(&*db, "UPDATE calls SET n = 2 WHERE run = ?1 AND n = 3", &run);
        exec(&*db, "UPDATE calls SET n = 3 WHERE run = ?1 AND n = -1", &run);
        drop(db);
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert!(format!("{}{}", bad.stdout, bad.stderr).contains("#2"));
    }
}

/// Copies call row `from` of run `id` into the record as row `n`, sequence
/// `seq`, chained after `prev`, with its hashes made again as the writer
/// would: a forged row that verifies on its own, as an attacker who knows
/// the chain's hashing writes it. Every other column is the copied row's
/// (a temporary table keeps the copy's columns whatever the schema holds).
fn forge_row(db: &dyn Db, id: &str, from: i64, n: i64, seq: i64, prev: &str) {
    exec(db, "DROP TABLE IF EXISTS forged", &[]);
    exec(
        db,
        "CREATE TEMPORARY TABLE forged AS SELECT * FROM calls WHERE run = ?1 AND n = ?2",
        &[Val::from(id), Val::from(from)],
    );
    exec(
        db,
        "UPDATE forged SET n = ?1, seq = ?2, prev = ?3",
        &[Val::from(n), Val::from(seq), Val::from(prev)],
    );
    let (hash, outcome) = hashes_of(db, "forged");
    exec(
        db,
        "UPDATE forged SET hash = ?1, outcome_hash = ?2",
        &[Val::from(hash), Val::from(outcome)],
    );
    assert_eq!(exec(db, "INSERT INTO calls SELECT * FROM forged", &[]), 1);
}

/// The call hash and outcome hash the one row of `table` (a finished call)
/// would have, from its columns, by sluice's own chain functions.
fn hashes_of(db: &dyn Db, table: &str) -> (String, String) {
    use sluice::internals::audit::chain::{self, CallIntent, CallOutcome};
    let r = common::stores::row(
        db,
        &format!(
            "SELECT task, seq, n, flow, tier, input, capabilities, decisions, route, replayed_from,
                    started_ms, parts, client, prev, status, output, output_ref, error, capped,
                    duration_us, late_decisions, redacted FROM {table}"
        ),
        &[],
    );
    let int = |i: usize| r.get::<i64>(i).unwrap();
    let s = |i: usize| r.text(i).unwrap();
    let intent = CallIntent {
        task: s(0).unwrap(),
        seq: int(1),
        n: int(2),
        flow: s(3).unwrap(),
        tier: s(4).unwrap(),
        input: s(5).unwrap(),
        capabilities: s(6).unwrap(),
        decisions: s(7).unwrap(),
        route: s(8),
        replayed_from: s(9),
        started_ms: int(10),
        parts: s(11),
        client: s(12),
    };
    let hash = chain::call(s(13).unwrap(), &intent);
    let output_sha = s(15)
        .map(|o| sha256(o.as_bytes()))
        .or_else(|| s(16).map(String::from));
    let outcome = chain::outcome_of(
        &hash,
        &CallOutcome {
            status: s(14).unwrap(),
            output: None,
            error: s(17),
            capped: int(18) != 0,
            duration_us: int(19),
            late_decisions: s(20).unwrap_or("[]"),
            redacted: s(21).unwrap(),
        },
        output_sha.as_deref(),
    );
    (hash, outcome)
}

fn hash_of(db: &dyn Db, id: &str, n: i64) -> String {
    one(
        db,
        "SELECT hash FROM calls WHERE run = ?1 AND n = ?2",
        &[Val::from(id), Val::from(n)],
    )
}

both_stores! {
    /// A well-formed row slipped in between rows #2 and #3 (those after
    /// it moved down one place), chained to row #2: it verifies on its
    /// own, and the row after it, chained to row #2 too, shows it.
    fn verify_detects_a_row_inserted_between_two(store) {
        let (ws, id) = recorded_run(store);
        let db = store.db(ws.path());
        for n in [4_i64, 3] {
            exec(
                &*db,
                "UPDATE calls SET n = ?2 WHERE run = ?1 AND n = ?3",
                &[Val::from(&id), Val::from(n + 1), Val::from(n)],
            );
        }
        forge_row(&*db, &id, 2, 3, 5, &hash_of(&*db, &id, 2));
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert_eq!(
            bad.stdout,
            format!(
                "{id}  NOT INTACT at #4 (task 0, seq 3, ls): rows out of order: it links to #2, not to the \
row before it\n"
            )
        );
    }

    /// A well-formed row added after the last of a sealed run, chained to
    /// it: the seal covers the rows the run ended with, so verify fails.
    fn verify_detects_a_row_appended_to_a_sealed_run(store) {
        let (ws, id) = recorded_run(store);
        let db = store.db(ws.path());
        forge_row(&*db, &id, 4, 5, 5, &hash_of(&*db, &id, 4));
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert_eq!(
            bad.stdout,
            format!(
                "{id}  NOT INTACT: seal mismatch: the run's status, error or end time, a clock reading, a \
module it required, or rows at its end changed after it was sealed\n"
            )
        );
    }
}

both_stores! {
    fn a_scripts_calls_name_no_client_and_a_client_written_in_afterwards_fails_verify(store) {
        let (ws, id) = recorded_run(store);
        let shown = sluice(ws.path(), &["audit", "show", &id, "--json"]);
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        let view: Value = serde_json::from_str(&shown.stdout).unwrap();
        let calls = view["calls"].as_array().unwrap();
        assert!(
            calls.iter().all(|c| c.get("client") == Some(&Value::Null)),
            "{calls:?}"
        );
        let text = sluice(ws.path(), &["audit", "show", &id]);
        assert!(!text.stdout.contains("CLIENT"), "{}", text.stdout);
        // A call the script made, passed off as an MCP client's.
        exec(
            &*store.db(ws.path()),
            "UPDATE calls SET client = 'claude-code 1.2.3' WHERE run = ?1 AND n = 2",
            &[Val::from(&id)],
        );
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert!(
            bad.stdout
                .contains("NOT INTACT at #2 (task 0, seq 2, read): content edited"),
            "{}",
            bad.stdout
        );
        let text = sluice(ws.path(), &["audit", "show", &id, "--call", "2"]);
        assert!(
            text.stdout.contains("client       claude-code 1.2.3"),
            "{}",
            text.stdout
        );
    }
}

both_stores! {
    fn a_run_killed_during_an_irreversible_call_is_interrupted_with_an_unknown_outcome(store)
    {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let path = script_file(
            ws.path(),
            "sluice.read{path = '.'}\nsluice.bash{command = 'touch started; while [ -e hold ]; do sleep 0.05; done'}\n",
        );
        let mut child = spawn_until(ws.path(), &path, "started");
        child.kill().unwrap();
        child.wait().unwrap();
        // The command outlives sluice (SIGKILL leaves no time to stop it).
        std::fs::remove_file(ws.file("hold")).unwrap();

        let list = sluice(ws.path(), &["audit", "list", "--json"]);
        assert_eq!(list.code, 0, "{}", list.stderr);
        let runs: Value = serde_json::from_str(&list.stdout).unwrap();
        let runs = runs
            .as_array()
            .unwrap_or_else(|| runs["runs"].as_array().unwrap())
            .clone();
        assert_eq!(runs[0]["status"], "interrupted", "{runs:?}");
        let db = store.db(ws.path());
        let id = last_run(&*db);
        let rows = calls(&*db, &id);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["flow"], "bash");
        assert_eq!(rows[1]["status"], Value::Null);
        assert_eq!(rows[1]["outcome_hash"], Value::Null);
        let show = sluice(ws.path(), &["audit", "show", &id]);
        assert_eq!(show.code, 0, "{}", show.stderr);
        assert!(
            show.stdout.to_lowercase().contains("outcome unknown"),
            "{}",
            show.stdout
        );
    }
}

both_stores! {
    fn replay_reproduces_a_run_after_its_server_is_gone_and_its_files_changed(store) {
        let ws = workspace();
        let server = Http::start("served once");
        std::fs::write(ws.file("in.txt"), "original\n").unwrap();
        let script = format!(
            r#"
local page = assert(sluice.read{{path = "in.txt"}})
local got = assert(sluice.fetch{{url = "{url}"}})
assert(sluice.write{{path = "out.txt", content = page.content .. got.body}})
local r = assert(sluice.bash{{command = "date +%N"}})
print(page.content, got.body, r.stdout, sluice.now(), os.time(), math.random(1000000))
"#,
            url = server.url()
        );
        let grant = format!("net:private:{}", server.origin());
        let path = script_file(ws.path(), &script);
        let first = run_script_with(ws.path(), &path, &["--approve", &grant], &[]).ok();
        drop(server);
        std::fs::write(ws.file("in.txt"), "changed\n").unwrap();
        std::fs::write(ws.file("out.txt"), "untouched").unwrap();

        let replay = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
        assert_eq!(
            replay.stdout, first.stdout,
            "the script saw the recorded values"
        );
        assert!(replay.stderr.contains("reproduced"), "{}", replay.stderr);
        assert_eq!(
            std::fs::read_to_string(ws.file("out.txt")).unwrap(),
            "untouched"
        );
        assert_eq!(
            std::fs::read_to_string(ws.file("in.txt")).unwrap(),
            "changed\n"
        );
    }
}

both_stores! {
    fn replay_runs_the_recorded_text_of_a_changed_script_unless_given_and_diverges_at_the_call_that_differs(store) {
        let ws = workspace();
        std::fs::write(ws.file("a.txt"), "a").unwrap();
        std::fs::write(ws.file("b.txt"), "b").unwrap();
        let path = script_file(
            ws.path(),
            "sluice.read{path = 'a.txt'}\nsluice.read{path = 'a.txt'}\nsluice.ls{path = '.'}\n",
        );
        run_script_with(ws.path(), &path, &[], &[]).ok();
        let edited =
            "sluice.read{path = 'a.txt'}\nsluice.read{path = 'b.txt'}\nsluice.ls{path = '.'}\n";
        std::fs::write(&path, edited).unwrap();

        // The record keeps the script's text: it replays as recorded, and
        // says that the file differs.
        let recorded = sluice(ws.path(), &["replay", "last"]);
        assert_eq!(recorded.code, 0, "{}", recorded.stderr);
        assert!(
            recorded.stderr.contains("differs from the text run") && recorded.stderr.contains("--script"),
            "{}",
            recorded.stderr
        );
        assert!(recorded.stderr.contains("reproduced"), "{}", recorded.stderr);

        let diverged = sluice(
            ws.path(),
            &["replay", "last", "--script", path.to_str().unwrap()],
        );
        assert_eq!(diverged.code, 1, "{}", diverged.stderr);
        let e = &diverged.stderr;
        assert!(
            e.contains("replay diverged at call #2 (task 0, call 2)"),
            "{e}"
        );
        assert!(e.contains(r#"recorded: read {"path":"a.txt"}"#), "{e}");
        assert!(e.contains(r#"now:      read {"path":"b.txt"}"#), "{e}");
        assert!(e.contains(r#"path: recorded "a.txt", now "b.txt""#), "{e}");
        let file = path.file_name().unwrap().to_string_lossy();
        assert!(
            e.contains(&format!("{file}:2:")),
            "names the script line: {e}"
        );
    }
}

both_stores! {
    /// A replay verifies its record beside the script (on a second thread):
    /// whatever the script prints waits for the verdict, so a tampered record
    /// is refused with nothing of it shown, wherever the edit is, while an
    /// intact one replays with its output and `--force` goes on regardless.
    fn a_replay_of_a_tampered_record_shows_nothing_but_the_refusal(store) {
        let ws = workspace();
        std::fs::write(ws.file("a.txt"), "a").unwrap();
        let path = script_file(
            ws.path(),
            "print('before any call')\nfor i = 1, 300 do\n  local r = assert(sluice.read{path = 'a.txt'})\n  print(i, r.content)\nend\n",
        );
        run_script_with(ws.path(), &path, &[], &[]).ok();
        let id = last_run(&*store.db(ws.path()));
        let intact = sluice(ws.path(), &["replay", &id]);
        assert_eq!(intact.code, 0, "{}", intact.stderr);
        assert!(
            intact.stdout.starts_with("before any call\n1\ta\n"),
            "{}",
            intact.stdout
        );
        assert!(intact.stdout.ends_with("300\ta\n"), "{}", intact.stdout);

        for n in [1_i64, 150, 300] {
            let db = store.db(ws.path());
            exec(
                &*db,
                "UPDATE calls SET status = 'error' WHERE run = ?1 AND n = ?2",
                &[Val::from(&id), Val::from(n)],
            );
            let refused = sluice(ws.path(), &["replay", &id]);
            assert_eq!(
                (refused.code, refused.stdout.as_str()),
                (2, ""),
                "row {n}: {}",
                refused.stderr
            );
            assert_eq!(
                refused.stderr,
                format!(
                    "sluice: the record of run {id} does not verify (outcome edited: its status, output, error, \
                     duration, late decisions or redactions do not hash to its outcome hash); \
                     `sluice audit verify {id}` shows where. Give --force to go on anyway\n"
                ),
                "row {n}"
            );
            let forced = sluice(ws.path(), &["replay", &id, "--force"]);
            assert!(
                forced.stdout.starts_with("before any call\n"),
                "row {n}: {}",
                forced.stdout
            );
            exec(
                &*db,
                "UPDATE calls SET status = 'ok' WHERE run = ?1 AND n = ?2",
                &[Val::from(&id), Val::from(n)],
            );
        }
        let restored = sluice(ws.path(), &["replay", &id]);
        assert_eq!((restored.code, restored.stdout), (0, intact.stdout));
    }
}

both_stores! {
    fn resume_continues_after_a_kill_without_repeating_done_calls(store)
    {
        let ws = workspace();
        let script = r#"
for i = 1, 4 do
  assert(sluice.bash{command = "echo " .. i .. " >> log"})
  if i == 2 then assert(sluice.write{path = "two", content = ""}) sluice.sleep(30000) end
end
"#;
        let path = script_file(ws.path(), script);
        let mut child = spawn_until(ws.path(), &path, "two");
        // The file is there before the write's outcome is committed: the
        // kill comes once the record holds it, however loaded the machine.
        let db = store.db(ws.path());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while one::<i64>(&*db, "SELECT count(*) FROM calls WHERE flow = 'write' AND status = 'ok'", &[]) == 0 {
            assert!(std::time::Instant::now() < deadline, "the write's outcome was never recorded");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "1\n2\n");

        // Without the sleep the rest runs at once.
        let resumed = script.replace("sluice.sleep(30000)", "");
        std::fs::write(&path, resumed).unwrap();
        let out = sluice(
            ws.path(),
            &["resume", "last", "--script", path.to_str().unwrap()],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stderr
                .contains("3 calls answered from the record, then live"),
            "{}",
            out.stderr
        );
        assert_eq!(
            std::fs::read_to_string(ws.file("log")).unwrap(),
            "1\n2\n3\n4\n"
        );
        let db = store.db(ws.path());
        let id = last_run(&*db);
        let from: Option<String> = run_field(&*db, &id, "resumed_from");
        assert!(from.is_some());
        assert_eq!(run_field::<String>(&*db, &id, "status"), "ok");
        let rows = calls(&*db, &id);
        assert_eq!(rows.len(), 5, "three copied, two live");
        let tiers: Vec<&str> = rows.iter().map(|r| r["tier"].as_str().unwrap()).collect();
        assert_eq!(
            tiers,
            [
                "irreversible",
                "irreversible",
                "compensable",
                "irreversible",
                "irreversible"
            ]
        );
        let copied: i64 = one(
            &*db,
            "SELECT count(*) FROM calls WHERE run = ?1 AND replayed_from = ?2",
            &[Val::from(&id), Val::from(from.unwrap())],
        );
        assert_eq!(copied, 3);
        // Both chains hold; the killed run could not seal, which verify says.
        let verified = sluice(ws.path(), &["audit", "verify"]);
        assert_eq!(verified.code, 0, "{}", verified.stdout);
        assert!(
            verified.stdout.contains("not sealed"),
            "{}",
            verified.stdout
        );
    }
}

both_stores! {
    fn resume_stops_at_an_unknown_outcome_unless_told_to_retry_it(store)
    {
        let ws = workspace();
        // The command holds while `hold` exists, so the kill lands inside it.
        std::fs::write(ws.file("hold"), "").unwrap();
        let path = script_file(
            ws.path(),
            "assert(sluice.bash{command = 'echo x >> log; touch started; while [ -e hold ]; do sleep 0.05; done'})\n\
             assert(sluice.write{path = 'done', content = ''})\n",
        );
        let mut child = spawn_until(ws.path(), &path, "started");
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_file(ws.file("hold")).unwrap();

        let stopped = sluice(ws.path(), &["resume", "last"]);
        assert_eq!(stopped.code, 1, "{}", stopped.stderr);
        assert!(
            stopped.stderr.contains("outcome is unknown") && stopped.stderr.contains("--retry-unknown"),
            "{}",
            stopped.stderr
        );
        assert!(!ws.file("done").exists());
        assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\n");

        // The stopped resume is a failed run of its own that keeps the unknown
        // call: resuming it stops there again, and the original, once resumed,
        // cannot be resumed a second time.
        let again = sluice(ws.path(), &["resume", "last"]);
        assert_eq!(again.code, 1, "{}", again.stderr);
        assert!(
            again.stderr.contains("outcome is unknown"),
            "{}",
            again.stderr
        );
        assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\n");
        let db = store.db(ws.path());
        let original: String = one(
            &*db,
            "SELECT id FROM runs WHERE resumed_from IS NULL",
            &[],
        );
        let twice = sluice(ws.path(), &["resume", &original, "--retry-unknown"]);
        assert_eq!(twice.code, 2, "{}", twice.stderr);
        assert!(
            twice.stderr.contains("was already resumed as run"),
            "{}",
            twice.stderr
        );
        let retried = sluice(ws.path(), &["resume", "last", "--retry-unknown"]);
        assert_eq!(retried.code, 0, "{}", retried.stderr);
        assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\nx\n");
        assert!(ws.file("done").exists());
    }
}

both_stores! {
    fn resume_told_the_unknown_call_ran_goes_on_without_running_it_and_records_that(store)
    {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let path = script_file(
            ws.path(),
            "local r = assert(sluice.bash{command = 'echo x >> log; touch started; while [ -e hold ]; do sleep 0.05; done'})\n\
             assert(sluice.write{path = 'done', content = tostring(r.resolved)})\n",
        );
        let mut child = spawn_until(ws.path(), &path, "started");
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_file(ws.file("hold")).unwrap();
        // Both words at once are refused before anything runs.
        let both = sluice(ws.path(), &["resume", "last", "--retry-unknown", "--unknown-ran"]);
        assert_eq!(both.code, 2, "{}", both.stderr);
        assert!(both.stderr.contains("cannot be used with"), "{}", both.stderr);
        let ran = sluice(ws.path(), &["resume", "last", "--unknown-ran"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        // Not run again; the script saw {resolved = "ran"}.
        assert_eq!(std::fs::read_to_string(ws.file("log")).unwrap(), "x\n");
        assert_eq!(std::fs::read_to_string(ws.file("done")).unwrap(), "ran");
        // The new run records that outcome, so replaying it reproduces it.
        let db = store.db(ws.path());
        let newest: String = one(&*db, "SELECT id FROM runs WHERE resumed_from IS NOT NULL", &[]);
        let output: String = one(
            &*db,
            "SELECT output FROM calls WHERE run = ?1 AND flow = 'bash'",
            &[Val::from(&newest)],
        );
        assert_eq!(output, r#"{"resolved":"ran"}"#);
        let replayed = sluice(ws.path(), &["replay", &newest]);
        assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    }
}

both_stores! {
    fn a_run_stopped_by_sigint_is_sealed_as_interrupted(store) {
        let ws = workspace();
        let mut child = spawn_lua(
            ws.path(),
            "print('ready')\nsluice.ls{path = '.'}\nsluice.sleep(30000)",
            &[],
        );
        let line = read_stdout_line(&mut child);
        assert_eq!(line.trim(), "ready");
        std::thread::sleep(Duration::from_millis(200));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let status = exit_within(&mut child, Duration::from_secs(10));
        assert_eq!(status.code(), Some(130));
        let db = store.db(ws.path());
        let id = last_run(&*db);
        assert_eq!(run_field::<String>(&*db, &id, "status"), "interrupted");
        assert!(run_field::<Option<String>>(&*db, &id, "seal").is_some());
        assert!(run_field::<String>(&*db, &id, "error").contains("SIGINT"));
        let verified = sluice(ws.path(), &["audit", "verify", &id]);
        assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    }
}

both_stores! {
    fn replay_answers_background_jobs_clock_readings_and_coroutine_calls_from_the_record(store) {
        let ws = workspace();
        std::fs::write(ws.file("a.txt"), "a").unwrap();
        let script = r#"
local job = assert(sluice.bash{command = "echo out; date +%N", background = true})
job:wait(5000)
local got = job:read()
local co = coroutine.create(function()
  local r = assert(sluice.read{path = "a.txt"})
  coroutine.yield(r.content)
  return assert(sluice.ls{path = "."}).total
end)
local _, first = coroutine.resume(co)
local _, second = coroutine.resume(co)
print(job.status, job.exitCode, got.stdout, first, second)
print(sluice.now(), os.time(), os.date("%Y-%m-%d %H:%M:%S"), os.clock(), math.random(), math.random(1, 100))
math.randomseed()
print(math.random())
"#;
        let path = script_file(ws.path(), script);
        let first = run_script_with(ws.path(), &path, &[], &[]).ok();
        let db = store.db(ws.path());
        let id = last_run(&*db);
        let rows = calls(&*db, &id);
        let keys: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r["task"].as_str().unwrap().to_string(),
                    r["flow"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = |t: &str, f: &str| (t.to_string(), f.to_string());
        assert!(keys.contains(&want("0", "bash")), "{keys:?}");
        assert!(keys.contains(&want("0", "job.wait")), "{keys:?}");
        assert!(keys.contains(&want("0", "job.read")), "{keys:?}");
        assert!(
            keys.contains(&want("0.1", "read")),
            "the coroutine is task 0.1: {keys:?}"
        );
        assert!(keys.contains(&want("0.1", "ls")), "{keys:?}");
        std::fs::write(ws.file("a.txt"), "changed").unwrap();

        let replay = sluice(ws.path(), &["replay", &id]);
        assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
        assert_eq!(replay.stdout, first.stdout);
    }
}

both_stores! {
    fn export_gives_the_run_then_one_line_per_call_and_list_counts_them(store) {
        let (ws, id) = recorded_run(store);
        let out = sluice(ws.path(), &["audit", "export", &id, "--format", "jsonl"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let lines: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0]["type"], "run");
        assert!(lines[1..].iter().all(|l| l["type"] == "call"));
        let csv = sluice(ws.path(), &["audit", "export", &id, "--format", "csv"]);
        assert_eq!(csv.code, 0, "{}", csv.stderr);
        assert_eq!(
            csv.stdout.lines().count(),
            5,
            "a header and four rows:\n{}",
            csv.stdout
        );
        let list = sluice(ws.path(), &["audit", "list"]);
        assert_eq!(list.code, 0, "{}", list.stderr);
        assert!(list.stdout.contains(&id[..8]), "{}", list.stdout);
    }
}

both_stores! {
    fn a_large_output_is_kept_once_however_many_calls_return_it_and_its_edit_shows(store) {
        let ws = workspace();
        let text = "a line of the big file\n".repeat(200);
        std::fs::write(ws.file("big.txt"), &text).unwrap();
        run_lua(
            ws.path(),
            "for i = 1, 3 do assert(sluice.read{path = 'big.txt'}) end\nsluice.ls{path = '.'}",
            &[],
        )
        .ok();
        let db = store.db(ws.path());
        let id = last_run(&*db);
        // Beside the script's text, which the record keeps too.
        let kept: i64 = one(
            &*db,
            "SELECT count(*) FROM outputs WHERE sha256 <> (SELECT script_sha256 FROM runs WHERE id = ?1)",
            &[Val::from(&id)],
        );
        assert_eq!(kept, 1, "three reads of one file, one stored output");
        let rows = calls(&*db, &id);
        for r in &rows[..3] {
            assert_eq!(r["output"]["content"], text.trim_end_matches('\n'));
        }
        let inline: i64 = one(
            &*db,
            "SELECT count(*) FROM calls WHERE output IS NOT NULL",
            &[],
        );
        assert_eq!(inline, 1, "the small ls output stays in its row");
        assert_eq!(verify(ws.path()).code, 0);
        exec(
            &*db,
            "UPDATE outputs SET body = replace(body, 'big', 'BIG')",
            &[],
        );
        let bad = verify(ws.path());
        assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
        assert!(bad.stdout.contains("#1"), "{}", bad.stdout);
    }
}

both_stores! {
    fn a_resume_keeps_the_run_ceiling_and_judges_recorded_refusals_again(store)
    {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let outside = ws.path().parent().unwrap().join("outside.txt");
        let script = format!(
            "local _, e = sluice.write{{path = {o}, content = 'x'}}\n\
             print(e and e.code)\n\
             assert(sluice.write{{path = 'committed', content = ''}})\n\
             assert(sluice.write{{path = 'marker', content = ''}})\n\
             while sluice.ls{{path = '.'}} and #sluice.glob{{pattern = 'hold'}}.paths > 0 do sluice.sleep(20) end\n\
             assert(sluice.write{{path = 'after', content = 'y'}})\n",
            o = lua_str(outside.to_str().unwrap())
        );
        let path = script_file(ws.path(), &script);
        let ceiling = [
            "--ceiling".to_string(),
            format!("fs:*:{}/**", ws.path().display()),
            "--ceiling".to_string(),
            format!("fs:*:{}", ws.path().display()),
        ];
        let flags: Vec<&str> = ceiling.iter().map(String::as_str).collect();
        let mut child = spawn_until_with(ws.path(), &path, "marker", &flags);
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_file(ws.file("hold")).unwrap();
        // Approving the outside write now: the recorded refusal is judged again,
        // and the run's ceiling still refuses it.
        let grant = format!("fs:write:{}", outside.display());
        let out = sluice(ws.path(), &["resume", "last", "--approve", &grant]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.stdout.trim(), "permission_denied", "{}", out.stdout);
        assert!(!outside.exists(), "the ceiling was lost on resume");
        assert_eq!(std::fs::read_to_string(ws.file("after")).unwrap(), "y");
    }
}

both_stores! {
    fn secrets_are_cut_from_capabilities_decisions_errors_and_urls_too(store) {
        let ws = workspace();
        let run = run_lua(
            ws.path(),
            "assert(sluice.bash{command = 'true', env = {API_TOKEN = 's3cr3tTOKENvalue1'}})\n\
             sluice.bash{command = 'echo s3cr3tTOKENvalue1'}\n\
             sluice.fetch{url = 'http://user:pa55w0rdXYZ@127.0.0.1:9/'}\n\
             error('failing with s3cr3tTOKENvalue1')",
            &[],
        );
        assert_eq!(run.code, 1);
        let bytes = store.bytes(ws.path());
        assert!(
            !contains(&bytes, "s3cr3tTOKENvalue1"),
            "a secret reached the database"
        );
        assert!(
            !contains(&bytes, "pa55w0rdXYZ"),
            "a URL password reached the database"
        );
    }
}

both_stores! {
    fn jobs_started_after_a_resume_are_numbered_after_the_recorded_ones(store)
    {
        let ws = workspace();
        std::fs::write(ws.file("hold"), "").unwrap();
        let script = "local j = assert(sluice.bash{command = 'echo A', background = true})\n\
                      j:wait(5000)\n\
                      assert(sluice.write{path = 'committed', content = ''})\n\
                      assert(sluice.write{path = 'marker', content = ''})\n\
                      while #sluice.glob{pattern = 'hold'}.paths > 0 do sluice.sleep(20) end\n\
                      local k = assert(sluice.bash{command = 'echo B', background = true})\n\
                      k:wait(5000)\n\
                      print(j.jobId, k.jobId, k:read().stdout)\n";
        let path = script_file(ws.path(), script);
        // A write returns once its row is committed, and the rows before it
        // with it: `marker` appears only after the wait is on disk (a file a
        // write made can appear before its own row is).
        let mut child = spawn_until(ws.path(), &path, "marker");
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_file(ws.file("hold")).unwrap();
        let out = sluice(ws.path(), &["resume", "last"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        // The job id goes on from the recorded one; its output is its own.
        assert_eq!(out.stdout, "1\t2\tB\n\n");
    }
}
