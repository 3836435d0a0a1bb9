//! Records built by hand for the readers' tests: hashes computed with
//! `chain` exactly as the writer does, so a test can then tamper with them.

use super::chain::{self, CallIntent, CallOutcome, Reading, RunEnd, RunHead, RunLink, Seal};
use super::db::{vals, Db};
use super::recorder::{CallRow, Outcome, Recorder, RunStart};
use super::{store, FlowFacts};
use crate::call::Tier;
use rusqlite::Connection;
use serde_json::Value;
use std::path::Path;

pub const T0: i64 = 1_796_058_192_000; // 2026-11-30 17:03:12 UTC

pub fn db() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("temp dir");
    let conn = store::open(&dir.path().join("audit.db")).expect("open the database");
    (dir, conn)
}

/// A call to record: its intent and, when known, its outcome.
pub struct Spec {
    pub flow: &'static str,
    pub tier: &'static str,
    pub input: String,
    pub decisions: String,
    pub route: Option<&'static str>,
    /// Who made the call from outside the script (an MCP client).
    pub client: Option<&'static str>,
    /// (status, output, error, capped)
    pub outcome: Option<(&'static str, Option<String>, Option<String>, bool)>,
}

pub fn spec(flow: &'static str, tier: &'static str, input: serde_json::Value) -> Spec {
    Spec {
        flow,
        tier,
        input: input.to_string(),
        decisions: r#"[{"by":"rule default:3","capability":"fs:read:/w/x","decision":"allow","reason":""}]"#
            .into(),
        route: None,
        client: None,
        outcome: Some(("ok", Some(r#"{"content":"hi"}"#.into()), None, false)),
    }
}

pub fn failed(mut s: Spec, error: serde_json::Value) -> Spec {
    s.outcome = Some(("error", None, Some(error.to_string()), false));
    s
}

/// Inserts run `id` as `sluice run` would, and returns its head. A
/// `running` run carries this process's pid, so the sweep leaves it live.
pub fn insert_run(db: &dyn Db, id: &str, script: &str, started_ms: i64) -> String {
    let policies = r#"[{"name":"default","sha256":"ab12cd34ef56ab12cd34"}]"#;
    let args = r#"["src/main.rs"]"#;
    let pid = std::process::id();
    let pid_start = store::process_start(pid).unwrap_or(0);
    let link = store::next_link(db).unwrap_or_else(|_| link_before_copies(db));
    let head = chain::head(&RunHead {
        id,
        script,
        script_sha256: Some("3f2a9c1b0e4d5f6a"),
        policies,
        args,
        workspace: "/w",
        started_ms,
        version: "0.1.0",
        random_seed: 42,
        resumed_from: None,
        ceiling: "[]",
        pid: i64::from(pid),
        pid_start: pid_start as i64,
        link: Some(RunLink {
            n: link.n,
            prior: link.prior.as_deref(),
            prior_rows: link.prior_rows,
        }),
    });
    db.execute(
        "INSERT INTO runs (id, script, script_sha256, policies, args, workspace, started_ms, status,
           version, random_seed, pid, pid_start, head, ceiling, n, prior, prior_rows)
         VALUES (?1, ?2, '3f2a9c1b0e4d5f6a', ?3, ?4, '/w', ?5, 'running', '0.1.0', 42, ?6, ?7, ?8, '[]',
           ?9, ?10, ?11)",
        vals![
            id,
            script,
            policies,
            args,
            started_ms,
            pid,
            pid_start,
            &head,
            link.n,
            link.prior,
            link.prior_rows
        ],
    )
    .expect("insert run");
    head
}

/// [`store::next_link`] in a database made at a schema before 6 (no
/// `joined`, no copied runs): the newest run's seal, else its head (the
/// old-schema tests seal each run before the next).
fn link_before_copies(db: &dyn Db) -> store::NextLink {
    let newest = db
        .first(
            "SELECT n, head, seal FROM runs ORDER BY n DESC LIMIT 1",
            &[],
        )
        .expect("the newest run");
    let Some(r) = newest else {
        return store::NextLink {
            n: 1,
            prior: None,
            prior_rows: None,
        };
    };
    let seal: Option<String> = r.get(2).unwrap();
    store::NextLink {
        n: r.get::<i64>(0).unwrap() + 1,
        prior_rows: if seal.is_some() { None } else { Some(0) },
        prior: Some(seal.unwrap_or_else(|| r.get(1).unwrap())),
    }
}

/// Inserts call `n` (task "0", seq n) linked to `prev`; returns its hash.
pub fn insert_call(db: &dyn Db, run: &str, prev: &str, n: i64, s: &Spec) -> String {
    let started_ms = T0 + n * 100;
    let intent = CallIntent {
        task: "0",
        seq: n,
        n,
        flow: s.flow,
        tier: s.tier,
        input: &s.input,
        capabilities: r#"["fs:read:/w/x"]"#,
        decisions: &s.decisions,
        route: s.route,
        replayed_from: None,
        started_ms,
        parts: None,
        client: s.client,
    };
    let hash = chain::call(prev, &intent);
    db.execute(
        "INSERT INTO calls (run, task, seq, n, flow, tier, input, capabilities, decisions, route,
           redacted, started_ms, prev, hash)
         VALUES (?1, '0', ?2, ?2, ?3, ?4, ?5, '[\"fs:read:/w/x\"]', ?6, ?7, '[]', ?8, ?9, ?10)",
        vals![
            run,
            n,
            s.flow,
            s.tier,
            &s.input,
            &s.decisions,
            s.route,
            started_ms,
            prev,
            &hash
        ],
    )
    .expect("insert call");
    // Set apart, so a database of a schema before the column takes the
    // script's own calls.
    if let Some(client) = s.client {
        db.execute(
            "UPDATE calls SET client = ?3 WHERE run = ?1 AND n = ?2",
            vals![run, n, client],
        )
        .expect("set the client");
    }
    if let Some((status, output, error, capped)) = &s.outcome {
        complete(
            db,
            run,
            n,
            &hash,
            status,
            output.as_deref(),
            error.as_deref(),
            *capped,
        );
    }
    hash
}

#[allow(clippy::too_many_arguments)]
fn complete(
    db: &dyn Db,
    run: &str,
    n: i64,
    hash: &str,
    status: &str,
    output: Option<&str>,
    error: Option<&str>,
    capped: bool,
) {
    let o = CallOutcome {
        status,
        output,
        error,
        capped,
        duration_us: 1500,
        late_decisions: "[]",
        redacted: "[]",
    };
    db.execute(
        "UPDATE calls SET status = ?3, output = ?4, error = ?5, capped = ?6, duration_us = 1500,
           late_decisions = '[]', outcome_hash = ?7 WHERE run = ?1 AND n = ?2",
        vals![
            run,
            n,
            status,
            output,
            error,
            capped,
            chain::outcome(hash, &o)
        ],
    )
    .expect("complete call");
}

/// Ends run `id` with `status` and seals it as the writer does.
pub fn seal(db: &dyn Db, id: &str, status: &str) {
    let (head, ended_ms) = (head_of(db, id), T0 + 4_200);
    let mut s = Seal::new(&head);
    // Read by hand, so a database of an older schema is sealed too.
    db.each(
        "SELECT hash, outcome_hash FROM calls WHERE run = ?1 ORDER BY n",
        vals![id],
        &mut |r| {
            s.row(&r.get::<String>(0)?, r.get::<Option<String>>(1)?.as_deref());
            Ok(())
        },
    )
    .expect("calls");
    // In (task, seq) order, as the writer and `verify` read them.
    db.each(
        "SELECT task, seq, kind, value FROM readings WHERE run = ?1 ORDER BY task, seq",
        vals![id],
        &mut |r| {
            s.reading(&Reading {
                task: &r.get::<String>(0)?,
                seq: r.get(1)?,
                kind: &r.get::<String>(2)?,
                value: r.get(3)?,
            });
            Ok(())
        },
    )
    .expect("readings");
    let seal = s.finish(&RunEnd {
        status,
        error: None,
        ended_ms,
    });
    db.execute(
        "UPDATE runs SET status = ?2, ended_ms = ?3, seal = ?4 WHERE id = ?1",
        vals![id, status, ended_ms, seal],
    )
    .expect("seal");
}

pub fn head_of(db: &dyn Db, id: &str) -> String {
    db.value("SELECT head FROM runs WHERE id = ?1", vals![id])
        .expect("head")
        .expect("the run is there")
}

/// Run `id`: five calls (a read, an approved irreversible bash, a denied
/// write, an irreversible post nobody approved, a read of a missing file),
/// two clock readings, sealed `ok`.
pub fn standard(db: &dyn Db, id: &str) {
    let mut prev = insert_run(db, id, "/w/fix.lua", T0);
    let mut bash = spec(
        "bash",
        "irreversible",
        serde_json::json!({"command": "git push"}),
    );
    bash.decisions = r#"[{"approvedBy":"terminal","by":"rule default:9","capability":"proc:spawn:git push","decision":"ask","reason":"pushes"}]"#.into();
    bash.route = Some(r#"{"host":"unconfined"}"#);
    let mut write = spec(
        "write",
        "compensable",
        serde_json::json!({"path": "/w/.env", "content": "x"}),
    );
    write.decisions = r#"[{"by":"rule default:4","capability":"fs:write:/w/.env","decision":"deny","reason":"secrets"}]"#.into();
    let mut post = spec(
        "http_post",
        "irreversible",
        serde_json::json!({"url": "https://api.example.com/x"}),
    );
    post.decisions = r#"[{"by":"rule default:12","capability":"net:post:api.example.com","decision":"ask","reason":""}]"#.into();
    let specs = [
        spec("read", "sealed", serde_json::json!({"path": "src/a.rs"})),
        bash,
        failed(
            write,
            serde_json::json!({"code": "permission_denied", "message": "denied"}),
        ),
        failed(
            post,
            serde_json::json!({"code": "permission_required", "message": "nobody approved"}),
        ),
        failed(
            spec("read", "sealed", serde_json::json!({"path": "missing.txt"})),
            serde_json::json!({"code": "not_found", "message": "no such file"}),
        ),
    ];
    for (i, s) in specs.iter().enumerate() {
        prev = insert_call(db, id, &prev, i as i64 + 1, s);
    }
    for (seq, v) in [(1i64, 1.5e9), (2, 1.75e9)] {
        db.execute(
            "INSERT INTO readings (run, task, seq, kind, value) VALUES (?1, '0', ?2, 'clock', ?3)",
            vals![id, seq, v],
        )
        .expect("reading");
    }
    seal(db, id, "ok");
}

/// The MCP client of [`mcp`]'s calls.
pub const CLIENT: &str = "claude-code 1.2.3";

/// Run `id` as an MCP server records it: a read and a write an MCP client
/// made ([`CLIENT`]), then a job operation, which names no client; sealed
/// `ok`.
pub fn mcp(db: &dyn Db, id: &str) {
    let mut prev = insert_run(db, id, "sluice mcp", T0);
    let mut read = spec("read", "sealed", serde_json::json!({"path": "src/a.rs"}));
    read.client = Some(CLIENT);
    let mut write = spec(
        "write",
        "compensable",
        serde_json::json!({"path": "src/b.rs", "content": "x"}),
    );
    write.client = Some(CLIENT);
    let job = spec("job.read", "sealed", serde_json::json!({"id": 1}));
    for (i, s) in [read, write, job].iter().enumerate() {
        prev = insert_call(db, id, &prev, i as i64 + 1, s);
    }
    seal(db, id, "ok");
}

pub fn sql(conn: &Connection, statement: &str) {
    conn.execute_batch(statement).expect(statement);
}

/// The flows the tests' runs call, as their registry entries sum up an
/// input: the one field each names. (The audit cannot reach the registry,
/// which sits above it.)
pub struct Facts;

impl FlowFacts for Facts {
    fn summary(&self, flow: &str, input: &Value) -> Option<String> {
        let field = match flow {
            "read" | "write" => "path",
            "bash" => "command",
            "http_post" => "url",
            _ => return None,
        };
        Some(input.get(field)?.as_str()?.to_string())
    }

    fn starts_jobs(&self, flow: &str) -> bool {
        flow == "bash"
    }
}

// --- runs recorded through the writer -----------------------------------------

/// `turns` distinct messages of an agent loop: a user's, an assistant's
/// asking for a tool, the tool's answer, in turn.
pub fn messages(turns: usize) -> Vec<Value> {
    let text = |i: usize| format!("turn {i}: {}", "words of the conversation ".repeat(8));
    (0..turns)
        .map(|i| match i % 3 {
            0 => serde_json::json!({"role": "user", "content": text(i)}),
            1 => serde_json::json!({"role": "assistant", "content": text(i),
                "toolCalls": [{"id": format!("c{i}"), "name": "read", "input": {"path": "a.rs"}}]}),
            _ => serde_json::json!({"role": "tool", "toolCallId": format!("c{}", i - 1),
                "content": text(i), "isError": i % 2 == 0}),
        })
        .collect()
}

/// The input of turn `k` (from 0): the conversation's first `k + 1`
/// messages, as an agent loop sends them every turn.
pub fn model_input(messages: &[Value], k: usize) -> Value {
    serde_json::json!({"model": "claude-x", "maxTokens": 1024, "messages": &messages[..=k]})
}

/// What the `model` flow returned at turn `k`.
pub fn model_output(k: usize) -> Value {
    serde_json::json!({
        "text": format!("answer {k}"), "toolCalls": [], "stopReason": "end_turn", "model": "claude-x",
        "usage": {"inputTokens": 1000 + k, "outputTokens": 80, "cachedTokens": 0},
        "latencyMs": 900, "firstTokenMs": 300,
    })
}

/// Call `seq` of task 0: the `model` flow given `input`, its `messages`
/// kept by content as the pipeline asks for the `model` flow.
pub fn model_row(seq: u64, input: Value) -> CallRow {
    let row = CallRow::new("0", seq, "model", Tier::Sealed, input, super::now_ms());
    CallRow {
        shared: Some("messages".into()),
        ..row
    }
}

/// Records run `id` at `path` through the writer, as a run would: each row
/// answered by `model_output` of its place, then sealed `ok`.
pub fn record_run(path: &Path, id: &str, rows: Vec<CallRow>) {
    let recorder = Recorder::start(path, run_start(id)).expect("start the recorder");
    for (k, row) in rows.into_iter().enumerate() {
        let outcome = Outcome::new(Ok(model_output(k)), 1500, Vec::new());
        recorder.call(row, outcome, true).expect("record a call");
    }
    recorder.end("ok", None).expect("seal");
}

/// A run's fixed facts, for the writer.
pub fn run_start(id: &str) -> RunStart {
    RunStart {
        id: id.to_string(),
        script: "/w/agent.lua".into(),
        workspace: "/w".into(),
        started_ms: super::now_ms(),
        ..RunStart::default()
    }
}

/// Hashes run `id`'s rows again from what they hold now (and seals it
/// again, when it was sealed): a test that sets a row's fields by hand to
/// build a case (its task, its start) keeps a run that verifies, so only
/// what the test is about shows.
pub fn rehash(db: &dyn Db, id: &str) {
    use super::rows::{self, Output, StoredCall};
    let mut calls: Vec<StoredCall> = Vec::new();
    rows::each_stored_call(db, id, Output::Inline, rows::db, |c| {
        calls.push(c);
        Ok(())
    })
    .expect("the run's rows");
    let mut prev = head_of(db, id);
    for c in &calls {
        let hash = chain::call(&prev, &c.intent());
        let digest = match (&c.output_ref, &c.output) {
            (Some(key), _) => Some(key.clone()),
            (None, text) => text
                .as_deref()
                .map(|t| crate::digest::sha256_hex(t.as_bytes())),
        };
        let outcome = c
            .outcome()
            .map(|o| chain::outcome_of(&hash, &o, digest.as_deref()));
        db.execute(
            "UPDATE calls SET prev = ?3, hash = ?4, outcome_hash = ?5 WHERE run = ?1 AND n = ?2",
            vals![id, c.n, &prev, &hash, outcome],
        )
        .expect("rehash a row");
        prev = hash;
    }
    let sealed: Option<(Option<String>, String)> = db
        .first("SELECT seal, status FROM runs WHERE id = ?1", vals![id])
        .expect("the run")
        .map(|r| (r.get(0).expect("seal"), r.get(1).expect("status")));
    if let Some((Some(_), status)) = sealed {
        seal(db, id, &status);
    }
}
