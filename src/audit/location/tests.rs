use super::*;

fn pg(given: &str) -> PgLocation {
    match Location::parse(given) {
        Ok(Location::Postgres(pg)) => pg,
        other => panic!("{given} is not a PostgreSQL location: {other:?}"),
    }
}

fn loc() -> PgLocation {
    pg("postgres://ops@db.example:6543/audit")
}

#[test]
fn a_path_or_sqlite_prefix_is_sqlite() {
    assert_eq!(
        Location::parse("/srv/rec/audit.db").unwrap(),
        Location::Sqlite("/srv/rec/audit.db".into())
    );
    assert_eq!(
        Location::parse("rel/audit.db").unwrap(),
        Location::Sqlite("rel/audit.db".into())
    );
    assert_eq!(
        Location::parse("sqlite:/srv/a.db").unwrap(),
        Location::Sqlite("/srv/a.db".into())
    );
    assert!(Location::parse("sqlite:")
        .unwrap_err()
        .contains("sqlite:PATH"));
    assert!(Location::parse("").unwrap_err().contains("empty"));
}

#[test]
fn another_scheme_is_refused_naming_it() {
    let e = Location::parse("mysql://u@h/db").unwrap_err();
    assert!(e.contains("mysql://"), "{e}");
    assert!(e.contains("not a store sluice knows"), "{e}");
}

#[test]
fn a_postgres_url_gives_each_part_with_libpq_defaults() {
    let full = pg("postgresql://ops@db.example:6543/audit?sslmode=verify-full&sslrootcert=/etc/ca.pem&connect_timeout=3");
    assert_eq!(
        full,
        PgLocation {
            host: "db.example".into(),
            port: 6543,
            user: "ops".into(),
            dbname: "audit".into(),
            sslmode: SslMode::VerifyFull,
            sslrootcert: Some("/etc/ca.pem".into()),
            connect_timeout: Duration::from_secs(3),
        }
    );
    let short = pg("postgres://ops@10.0.0.7");
    assert_eq!(
        (short.port, short.dbname.as_str(), short.sslmode),
        (5432, "ops", SslMode::Prefer)
    );
    let v6 = pg("postgres://ops@[::1]:5433/r%20ec");
    assert_eq!((v6.host.as_str(), v6.dbname.as_str()), ("::1", "r ec"));
}

#[test]
fn display_shows_no_password_and_parses_back() {
    for given in [
        "postgres://ops@db.example:6543/audit?sslmode=require",
        "postgres://o%40ps@[::1]:5433/r%20ec?sslmode=verify-full&sslrootcert=/etc/ca.pem&connect_timeout=3",
    ] {
        let loc = pg(given);
        let shown = loc.to_string();
        assert_eq!(pg(&shown), loc, "{shown}");
    }
    assert_eq!(
        loc().to_string(),
        "postgres://ops@db.example:6543/audit?sslmode=prefer"
    );
}

#[test]
fn a_url_with_a_password_is_refused_without_repeating_it() {
    for given in [
        "postgres://ops:Hunter2-Zq9@db.example/audit",
        "postgres://ops:Hunter2-Zq9@db.example:99999/audit",
        "postgres://ops@db.example/audit?password=Hunter2-Zq9",
        "postgres://ops:Hunter2-Zq9@/audit",
    ] {
        let e = Location::parse(given).unwrap_err();
        assert!(!e.contains("Hunter2"), "{given}: {e}");
        assert!(!format!("{e:?}").contains("Hunter2"), "{given}");
    }
    let e = Location::parse("postgres://ops:Hunter2-Zq9@db.example/audit").unwrap_err();
    assert!(e.contains("SLUICE_CREDENTIAL_AUDIT"), "{e}");
    assert!(e.contains("PGPASSWORD") && e.contains("~/.pgpass"), "{e}");
    assert!(e.contains("postgres://ops@db.example/audit"), "{e}");
}

#[test]
fn a_bad_sslmode_or_parameter_is_refused_naming_it() {
    let e = Location::parse("postgres://u@h/d?sslmode=verify-ca").unwrap_err();
    assert!(
        e.contains("sslmode=verify-ca") && e.contains("verify-full"),
        "{e}"
    );
    let e = Location::parse("postgres://u@h/d?sslmode=always").unwrap_err();
    assert!(e.contains("sslmode=always"), "{e}");
    let e = Location::parse("postgres://u@h/d?options=-csearch_path%3Dx").unwrap_err();
    assert!(e.contains("`options`"), "{e}");
    let e = Location::parse("postgres://u@h/a/b").unwrap_err();
    assert!(e.contains("a/b"), "{e}");
}

#[test]
fn the_credential_comes_before_pgpassword_before_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = private_file(dir.path(), "db.example:6543:audit:ops:from-file\n");
    let both = |v: &str| match v {
        "SLUICE_CREDENTIAL_AUDIT" => Some(" from-credential \n".to_string()),
        "PGPASSWORD" => Some("from-pgpassword".to_string()),
        _ => None,
    };
    let pgpw = |v: &str| (v == "PGPASSWORD").then(|| "from-pgpassword".to_string());
    let blank = |v: &str| (v == "SLUICE_CREDENTIAL_AUDIT").then(|| "  ".to_string());
    let l = loc();
    assert_eq!(
        password_from(&l, both, Some(&file)).as_deref(),
        Some("from-credential")
    );
    assert_eq!(
        password_from(&l, pgpw, Some(&file)).as_deref(),
        Some("from-pgpassword")
    );
    assert_eq!(
        password_from(&l, blank, Some(&file)).as_deref(),
        Some("from-file")
    );
    assert_eq!(password_from(&l, blank, None), None);
}

#[test]
fn pgpass_lines_match_by_field_with_wildcards_and_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let file = private_file(
        dir.path(),
        "# comment\n\
         other:6543:audit:ops:wrong-host\n\
         db.example:5432:audit:ops:wrong-port\n\
         db.example:6543:*:nobody:wrong-user\n\
         *:6543:*:ops:pa\\:ss\\\\word:tail\n\
         db.example:6543:audit:ops:later-line\n",
    );
    let none = |_: &str| None;
    assert_eq!(
        password_from(&loc(), none, Some(&file)).as_deref(),
        Some("pa:ss\\word:tail")
    );
    let escaped_host = private_file(dir.path(), "db\\.example:6543:audit:ops:esc\n");
    assert_eq!(
        password_from(&loc(), none, Some(&escaped_host)).as_deref(),
        Some("esc")
    );
}

#[test]
fn a_pgpass_others_may_read_is_ignored_as_libpq_does() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = private_file(dir.path(), "*:*:*:*:open-secret\n");
    let none = |_: &str| None;
    assert_eq!(
        password_from(&loc(), none, Some(&file)).as_deref(),
        Some("open-secret")
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(password_from(&loc(), none, Some(&file)), None);
}

fn private_file(dir: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("pgpass-{}", text.len()));
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}
