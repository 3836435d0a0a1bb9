//! The audit store's PostgreSQL backend against a real PostgreSQL 15
//! server the tests start (tests/common/postgres.rs): values, the
//! dialect's parameters, transactions and the store's lock, the schema's
//! creation and refusals, lost servers, TLS, and the password never shown.
#![cfg(feature = "postgres")]

mod common;

use common::postgres::{PgOptions, PgServer};
use sluice::internals::audit::db::{Begin, Db, ErrorKind, Val};
use sluice::internals::audit::location::{Location, PgLocation};
use sluice::internals::audit::postgres::{self, Postgres};
use sluice::internals::audit::store;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn loc(url: &str) -> PgLocation {
    match Location::parse(url) {
        Ok(Location::Postgres(pg)) => pg,
        other => panic!("{url} is not a PostgreSQL location: {other:?}"),
    }
}

/// A new store (schema created) on the shared server; its URL too.
fn new_store() -> (String, Postgres) {
    let server = PgServer::shared();
    let url = server.fresh_database();
    let db = postgres::open(&loc(&url), Some(server.password())).expect("open the store");
    (url, db)
}

fn connect(server: &PgServer, url: &str) -> Postgres {
    Postgres::connect(&loc(url), Some(server.password())).expect("connect")
}

fn dbname(url: &str) -> String {
    loc(url).dbname
}

fn text(s: &str) -> Val {
    Val::Text(s.to_string())
}

#[test]
fn every_kind_of_value_round_trips_and_nulls_of_int_and_text_columns() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    d.execute(
        "CREATE TABLE t (k TEXT PRIMARY KEY, i BIGINT, r DOUBLE PRECISION, s TEXT, \
         i4 INTEGER, i2 SMALLINT, f4 REAL, b BOOLEAN, v VARCHAR(20))",
        &[],
    )
    .unwrap();
    let insert = "INSERT INTO t (k, i, r, s, i4, i2, f4, b, v) \
                  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    let odd = "é ☃ 'quoted' ?1 \\ \"";
    let full = [
        text("full"),
        Val::Int(i64::MIN),
        Val::Real(-2.5e-300),
        text(odd),
        Val::Int(-2_000_000_000),
        Val::Int(-32768),
        Val::Real(0.5),
        Val::Int(1),
        text("short"),
    ];
    // A BOOLEAN column takes no integer: the record has none, so NULL here.
    let bound: Vec<Val> = full
        .iter()
        .enumerate()
        .map(|(i, v)| if i == 7 { Val::Null } else { v.clone() })
        .collect();
    assert_eq!(d.execute(insert, &bound).unwrap(), 1);
    let nulls = [vec![text("nulls")], vec![Val::Null; 8]].concat();
    assert_eq!(d.execute(insert, &nulls).unwrap(), 1);
    d.execute("UPDATE t SET b = true WHERE k = 'full'", &[])
        .unwrap();

    let row = d
        .first(
            "SELECT k, i, r, s, i4, i2, f4, b, v FROM t WHERE k = ?1",
            &[text("full")],
        )
        .unwrap()
        .unwrap();
    assert_eq!(row.0, full.to_vec());
    let row = d
        .first(
            "SELECT k, i, r, s, i4, i2, f4, b, v FROM t WHERE k = ?1",
            &[text("nulls")],
        )
        .unwrap()
        .unwrap();
    assert_eq!(row.0, nulls);
    assert_eq!(row.get::<Option<i64>>(1).unwrap(), None);
    assert_eq!(row.get::<Option<String>>(3).unwrap(), None);

    let max = d
        .value::<i64>("SELECT CAST(?1 AS BIGINT)", &[Val::Int(i64::MAX)])
        .unwrap();
    assert_eq!(max, Some(i64::MAX));
    assert_eq!(
        d.value::<String>("SELECT CAST(?1 AS TEXT)", &[Val::Null])
            .unwrap_err()
            .kind,
        ErrorKind::Other,
        "a NULL read as String is an error"
    );
    assert_eq!(
        d.value::<Option<String>>("SELECT CAST(?1 AS TEXT)", &[Val::Null])
            .unwrap(),
        Some(None)
    );
}

#[test]
fn a_value_of_the_wrong_kind_or_a_type_the_record_has_not_is_an_error_naming_it() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    d.execute("CREATE TABLE t (i BIGINT, h SMALLINT)", &[])
        .unwrap();
    let e = d
        .execute("INSERT INTO t (i) VALUES (?1)", &[text("seven")])
        .unwrap_err();
    assert!(
        e.message.contains("text bound where the query wants int8"),
        "{e}"
    );
    let e = d
        .execute("INSERT INTO t (h) VALUES (?1)", &[Val::Int(70_000)])
        .unwrap_err();
    assert!(
        e.message.contains("70000 does not fit the query's int2"),
        "{e}"
    );
    d.execute(
        "INSERT INTO t (i) VALUES (?1), (?2)",
        &[Val::Int(2), Val::Int(3)],
    )
    .unwrap();
    let e = d.first("SELECT sum(i) FROM t", &[]).unwrap_err();
    assert!(e.message.contains("type numeric"), "{e}");
    assert!(e.message.contains("CAST it AS BIGINT"), "{e}");
    let sum = d
        .value::<i64>("SELECT CAST(sum(i) AS BIGINT) FROM t", &[])
        .unwrap();
    assert_eq!(sum, Some(5));
    let e = d
        .first("SELECT a FROM t WHERE i = ?", &[Val::Int(1)])
        .unwrap_err();
    assert!(e.message.contains("without a number"), "{e}");
}

#[test]
fn numbered_parameters_are_renumbered_repeated_and_out_of_order() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    let sql = "SELECT CAST(?2 AS TEXT) || CAST(?1 AS TEXT) || CAST(?2 AS TEXT), '?3 stays', \
               CAST(?1 AS TEXT) -- ?4 in a comment";
    for (a, b) in [("a", "b"), ("x", "yz")] {
        let row = d.first(sql, &[text(a), text(b)]).unwrap().unwrap();
        assert_eq!(
            row.0,
            vec![text(&format!("{b}{a}{b}")), text("?3 stays"), text(a)]
        );
    }
    d.execute("CREATE TABLE t (k TEXT, n BIGINT)", &[]).unwrap();
    d.execute(
        "INSERT INTO t (n, k) VALUES (?2, ?1), (?3, ?1)",
        &[text("k"), Val::Int(1), Val::Int(2)],
    )
    .unwrap();
    let ns: Vec<i64> = d
        .column(
            "SELECT n FROM t WHERE k = ?2 AND n >= ?1 ORDER BY n",
            &[Val::Int(1), text("k")],
        )
        .unwrap();
    assert_eq!(ns, vec![1, 2]);
}

#[test]
fn each_hands_out_rows_that_may_query_the_store_again() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    let mut seen = Vec::new();
    d.each(
        "SELECT key, value FROM meta ORDER BY key",
        &[],
        &mut |row| {
            let key: String = row.get(0)?;
            let again = d.value::<i64>("SELECT value FROM meta WHERE key = ?1", &[text(&key)])?;
            seen.push((key, again));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(seen, vec![("unchained_runs".to_string(), Some(0))]);
}

#[test]
fn a_rolled_back_transaction_leaves_nothing() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    let insert = "INSERT INTO outputs (sha256, body) VALUES (?1, ?2)";
    d.begin(Begin::Rows).unwrap();
    d.execute(insert, &[text("a"), text("body a")]).unwrap();
    d.rollback().unwrap();
    let failed: Result<(), _> = d.transaction(Begin::Store, || {
        d.execute(insert, &[text("b"), text("body b")])?;
        Err(sluice::internals::audit::db::Error::other(
            "the caller gave up",
        ))
    });
    assert_eq!(failed.unwrap_err().message, "the caller gave up");
    assert_eq!(
        d.value::<i64>("SELECT count(*) FROM outputs", &[]).unwrap(),
        Some(0)
    );

    // A statement that failed inside a transaction spoils it whole, as
    // PostgreSQL has it: the commit says so, and nothing is kept.
    d.begin(Begin::Rows).unwrap();
    d.execute(insert, &[text("c"), text("body c")]).unwrap();
    assert!(d.execute("INSERT INTO nowhere VALUES (1)", &[]).is_err());
    let e = d.commit().unwrap_err();
    assert!(e.message.contains("rolled back, not committed"), "{e}");
    assert!(e.message.contains("nowhere"), "{e}");
    assert_eq!(
        d.value::<i64>("SELECT count(*) FROM outputs", &[]).unwrap(),
        Some(0)
    );

    d.transaction(Begin::Rows, || {
        d.execute(insert, &[text("d"), text("kept")])
    })
    .unwrap();
    assert_eq!(
        d.column::<String>("SELECT body FROM outputs", &[]).unwrap(),
        vec!["kept"]
    );
}

#[test]
fn a_unique_violation_is_a_conflict() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    let e = d
        .execute(
            "INSERT INTO meta (key, value) VALUES ('unchained_runs', 1)",
            &[],
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("duplicate key"), "{e}");
    let kept = d
        .execute(
            "INSERT INTO meta (key, value) VALUES ('unchained_runs', 1) ON CONFLICT (key) DO NOTHING",
            &[],
        )
        .unwrap();
    assert_eq!(kept, 0);
    let runs_chain =
        "INSERT INTO runs (id, script, policies, args, workspace, started_ms, status, \
                      version, random_seed, ceiling, pid, pid_start, head, n) \
                      VALUES (?1, 's', '[]', '[]', '/w', 0, 'ok', 'v', 0, '[]', 1, 0, 'h', 1)";
    d.execute(runs_chain, &[text("run-a")]).unwrap();
    let e = d.execute(runs_chain, &[text("run-b")]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("runs_chain"), "{e}");
}

#[test]
fn two_store_transactions_serialize_and_rows_transactions_do_not_wait() {
    let server = PgServer::shared();
    let (url, a) = new_store();
    let ad: &dyn Db = &a;
    ad.begin(Begin::Store).unwrap();
    ad.execute("INSERT INTO meta (key, value) VALUES ('first', 1)", &[])
        .unwrap();

    // Rows of other runs are written while the store's lock is held.
    let other = connect(server, &url);
    let od: &dyn Db = &other;
    let started = Instant::now();
    od.transaction(Begin::Rows, || {
        od.execute("INSERT INTO outputs (sha256, body) VALUES ('x', 'y')", &[])
    })
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let url = url.clone();
        std::thread::spawn(move || {
            let b = connect(PgServer::shared(), &url);
            let bd: &dyn Db = &b;
            tx.send(Instant::now()).unwrap();
            bd.begin(Begin::Store).unwrap();
            let locked = Instant::now();
            // What the first holder committed is seen once the lock is had.
            let first = bd
                .value::<i64>("SELECT value FROM meta WHERE key = 'first'", &[])
                .unwrap();
            bd.commit().unwrap();
            (locked, first)
        })
    };
    let asked = rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let committing = Instant::now();
    ad.commit().unwrap();
    let (locked, first) = waiter.join().unwrap();
    assert!(
        locked >= committing,
        "the second took the store's lock {:?} before the first committed",
        committing - locked
    );
    assert!(
        locked - asked >= Duration::from_millis(500),
        "{:?}",
        locked - asked
    );
    assert_eq!(first, Some(1));
}

#[test]
fn four_connections_opening_a_new_database_at_once_create_the_schema_once() {
    let server = PgServer::shared();
    let url = server.fresh_database();
    let start = Arc::new(Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (url, start) = (url.clone(), start.clone());
            std::thread::spawn(move || {
                let server = PgServer::shared();
                start.wait();
                postgres::open(&loc(&url), Some(server.password())).map(|_| ())
            })
        })
        .collect();
    for o in openers {
        o.join().unwrap().expect("each opener gets the store");
    }
    let db = dbname(&url);
    assert_eq!(
        server.admin(
            &db,
            "SELECT count(*) || ' ' || max(version) || ' ' || max(application) FROM sluice_schema"
        ),
        format!("1 {} sluice audit store", store::SCHEMA_VERSION)
    );
    assert_eq!(
        server.admin(&db, "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'"),
        "calls,meta,modules,outputs,readings,runs,sluice_schema"
    );
}

/// The tables, columns and sluice_schema rows of database `db`.
fn shape(server: &PgServer, db: &str) -> String {
    server.admin(
        db,
        "SELECT string_agg(table_name || '.' || column_name || ':' || data_type, ',' \
         ORDER BY table_name, ordinal_position) FROM information_schema.columns \
         WHERE table_schema = 'public'",
    )
}

#[test]
fn the_schema_matches_sqlite_s_column_for_column() {
    let (url, _db) = new_store();
    let server = PgServer::shared();
    let columns = shape(server, &dbname(&url));
    let sqlite = sqlite_columns();
    let ours: Vec<String> = columns
        .split(',')
        .filter(|c| !c.starts_with("sluice_schema."))
        .map(|c| {
            let (name, ty) = c.rsplit_once(':').unwrap();
            let ty = match ty {
                "bigint" => "INTEGER",
                "double precision" => "REAL",
                "text" => "TEXT",
                other => panic!("{name} is of type {other}"),
            };
            format!("{name}:{ty}")
        })
        .collect();
    assert_eq!(ours, sqlite);
    let indexes = server.admin(
        &dbname(&url),
        "SELECT string_agg(indexname || '=' || indexdef, ';' ORDER BY indexname) FROM pg_indexes \
         WHERE schemaname = 'public' AND indexname IN ('calls_chain', 'runs_chain')",
    );
    assert!(
        indexes.contains(
            "calls_chain=CREATE UNIQUE INDEX calls_chain ON public.calls USING btree (run, n)"
        ),
        "{indexes}"
    );
    assert!(
        indexes
            .contains("runs_chain=CREATE UNIQUE INDEX runs_chain ON public.runs USING btree (n)"),
        "{indexes}"
    );
}

/// The columns of a new SQLite store, `table.column:TYPE`, ordered as
/// PostgreSQL lists them (by table, then position).
fn sqlite_columns() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let conn = sluice::internals::audit::store::open(&dir.path().join("a.db")).unwrap();
    let mut out = Vec::new();
    for table in ["calls", "meta", "modules", "outputs", "readings", "runs"] {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT name, type FROM pragma_table_info('{table}') ORDER BY cid"
            ))
            .unwrap();
        let cols = stmt
            .query_map([], |r| {
                Ok(format!(
                    "{table}.{}:{}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?
                ))
            })
            .unwrap();
        out.extend(cols.map(Result::unwrap));
    }
    out
}

#[test]
fn a_store_of_a_newer_sluice_is_refused_and_left_as_it_was() {
    let (url, db) = new_store();
    drop(db);
    let server = PgServer::shared();
    let name = dbname(&url);
    let newer = store::SCHEMA_VERSION + 1;
    server.admin(
        &name,
        &format!("UPDATE sluice_schema SET version = {newer}"),
    );
    server.admin(
        &name,
        "INSERT INTO outputs (sha256, body) VALUES ('k', 'v')",
    );
    let before = (
        shape(server, &name),
        server.admin(&name, "SELECT version FROM sluice_schema"),
    );
    let e = postgres::open(&loc(&url), Some(server.password())).unwrap_err();
    assert!(
        e.contains(&format!(
            "schema version {newer}, newer than this sluice knows ({})",
            store::SCHEMA_VERSION
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "audit store postgres://sluice@127.0.0.1:{}/{name}",
            server.port()
        )),
        "{e}"
    );
    let after = (
        shape(server, &name),
        server.admin(&name, "SELECT version FROM sluice_schema"),
    );
    assert_eq!(before, after);
    assert_eq!(server.admin(&name, "SELECT body FROM outputs"), "v");
}

#[test]
fn a_database_of_something_else_is_refused_naming_its_tables_and_untouched() {
    let server = PgServer::shared();
    let url = server.fresh_database();
    let name = dbname(&url);
    server.admin(
        &name,
        "CREATE TABLE invoices (id int); CREATE TABLE ledger (id int)",
    );
    server.admin(&name, "GRANT ALL ON invoices, ledger TO sluice");
    let e = postgres::open(&loc(&url), Some(server.password())).unwrap_err();
    assert!(e.contains("not a sluice audit store"), "{e}");
    assert!(
        e.contains("the tables invoices, ledger and no sluice_schema"),
        "{e}"
    );
    assert_eq!(
        server.admin(&name, "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'public'"),
        "invoices,ledger"
    );
}

#[test]
fn a_lost_server_is_unreachable_and_its_restart_keeps_every_committed_row() {
    let mut server = PgServer::start();
    let url = server.fresh_database();
    let db = postgres::open(&loc(&url), Some(server.password())).unwrap();
    let d: &dyn Db = &db;
    d.durable(true).unwrap();
    d.transaction(Begin::Rows, || {
        d.execute(
            "INSERT INTO outputs (sha256, body) VALUES ('kept', 'committed')",
            &[],
        )
    })
    .unwrap();
    d.begin(Begin::Rows).unwrap();
    d.execute(
        "INSERT INTO outputs (sha256, body) VALUES ('lost', 'uncommitted')",
        &[],
    )
    .unwrap();

    server.stop_immediate();
    let e = d
        .execute(
            "INSERT INTO outputs (sha256, body) VALUES ('more', 'x')",
            &[],
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    let e = d.commit().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    d.rollback().unwrap();
    let e = d.begin(Begin::Rows).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");

    server.restart();
    // The next call makes the connection again.
    let bodies = d
        .column::<String>("SELECT sha256 FROM outputs ORDER BY sha256", &[])
        .unwrap();
    assert_eq!(bodies, vec!["kept"]);
    d.transaction(Begin::Store, || {
        d.execute(
            "INSERT INTO outputs (sha256, body) VALUES ('after', 'restart')",
            &[],
        )
    })
    .unwrap();
    assert_eq!(
        d.value::<i64>("SELECT count(*) FROM outputs", &[]).unwrap(),
        Some(2)
    );
}

#[test]
fn a_server_that_is_not_there_is_unreachable_and_the_error_says_so() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let at = loc(&format!(
        "postgres://sluice@127.0.0.1:{port}/x?sslmode=disable&connect_timeout=2"
    ));
    let e = Postgres::connect(&at, Some("pw")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    let e = postgres::open(&at, Some("pw")).unwrap_err();
    assert!(
        e.contains(&format!(
            "cannot connect to the audit store postgres://sluice@127.0.0.1:{port}/x"
        )),
        "{e}"
    );
    assert!(e.contains("is the server running"), "{e}");
}

#[test]
fn durable_sets_synchronous_commit_for_the_session() {
    let (_, db) = new_store();
    let d: &dyn Db = &db;
    let setting = || {
        d.value::<String>("SHOW synchronous_commit", &[])
            .unwrap()
            .unwrap()
    };
    assert_eq!(setting(), "on");
    d.durable(false).unwrap();
    assert_eq!(setting(), "off");
    d.durable(true).unwrap();
    assert_eq!(setting(), "on");
    // Set inside a transaction that rolls back: the setting asked for
    // still holds after it.
    d.begin(Begin::Rows).unwrap();
    d.durable(false).unwrap();
    d.rollback().unwrap();
    assert_eq!(setting(), "off");
}

/// A self-signed certificate for 127.0.0.1 and localhost, and its key.
fn self_signed(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is installed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn tls_require_encrypts_and_verify_full_checks_the_certificate() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let server = PgServer::start_with(PgOptions {
        tls: Some((cert.clone(), key)),
        ..PgOptions::default()
    });
    let plain = server.fresh_database();
    let base = plain.trim_end_matches("?sslmode=disable");
    let ssl = |url: &str| {
        let db = postgres::open(&loc(url), Some(server.password())).unwrap();
        let d: &dyn Db = &db;
        d.value::<bool>(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .unwrap()
        .unwrap()
    };
    assert!(!ssl(&plain));
    assert!(ssl(&format!("{base}?sslmode=require")));
    assert!(ssl(&format!("{base}?sslmode=prefer")));

    let e = postgres::open(
        &loc(&format!("{base}?sslmode=verify-full")),
        Some(server.password()),
    )
    .unwrap_err();
    assert!(e.contains("invalid peer certificate"), "{e}");
    assert!(e.contains("sslrootcert"), "{e}");
    let trusted = format!("{base}?sslmode=verify-full&sslrootcert={}", cert.display());
    assert!(ssl(&trusted));
    let by_name = trusted.replace("127.0.0.1", "localhost");
    assert!(ssl(&by_name));
}

#[test]
fn the_password_never_shows_in_an_error_or_debug_output() {
    let server = PgServer::shared();
    let url = server.fresh_database();
    let real = server.password().to_string();
    let wrong = "Wr0ng-Passw0rd-Zq81";
    let secrets = [real.as_str(), wrong];
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cases = [
        (url.clone(), Some(wrong), "password authentication failed"),
        (
            format!("postgres://sluice@127.0.0.1:{closed_port}/x?sslmode=disable"),
            Some(real.as_str()),
            "is the server running",
        ),
        (
            url.replace(&dbname(&url), "no_such_db"),
            Some(real.as_str()),
            "does not exist",
        ),
        (url.clone(), None, "no password was found"),
    ];
    for (at, pw, says) in cases {
        let l = loc(&at);
        let e = postgres::open(&l, pw).unwrap_err();
        assert!(e.contains(says), "{e}");
        assert!(
            e.contains("SLUICE_CREDENTIAL_AUDIT") || !says.contains("password"),
            "{e}"
        );
        let e2 = Postgres::connect(&l, pw).unwrap_err();
        for shown in [
            e.clone(),
            e2.to_string(),
            format!("{e2:?}"),
            format!("{l:?}"),
            l.to_string(),
        ] {
            for secret in secrets {
                assert!(!shown.contains(secret), "the password shows in: {shown}");
            }
        }
    }
    let db = postgres::open(&loc(&url), Some(&real)).unwrap();
    let shown = format!("{db:?}");
    assert!(
        shown.contains("connected: Some(true)") && !shown.contains(&real),
        "{shown}"
    );
    let with_pw = url.replace("sluice@", &format!("sluice:{real}@"));
    let e = Location::parse(&with_pw).unwrap_err();
    assert!(
        !e.contains(&real) && e.contains("SLUICE_CREDENTIAL_AUDIT"),
        "{e}"
    );
}
