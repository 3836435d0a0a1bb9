//! A real PostgreSQL server for the tests: PostgreSQL 15's own `initdb`
//! and `pg_ctl`, as the `postgres` user when the tests run as root (initdb
//! refuses root), in a temp folder, on 127.0.0.1 at a free port, stopped
//! and removed after.
//!
//! `initdb` runs once per build (a template in cargo's temp folder, copied
//! for each server). Each server has a role [`USER`] (not a superuser, as
//! a deployment's) with a password of its own, reached over TCP with
//! SCRAM; the harness administers it as `postgres` over its Unix socket
//! (trusted). A guardian process stops the server and removes the folder
//! if the test process dies without dropping it (a shared server, a kill).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// What a test says when PostgreSQL is missing.
pub const MISSING: &str =
    "PostgreSQL 15 is not installed: apt-get install postgresql-15 (scripts/test and scripts/bench install it)";

/// The role tests connect as.
pub const USER: &str = "sluice";

/// The superuser's password in the template (the harness itself uses the
/// trusted socket).
const ADMIN_PASSWORD: &str = "harness-admin-0b7c";

/// How a server is started.
#[derive(Debug, Clone, Default)]
pub struct PgOptions {
    /// Turns `fsync` off: faster, and a machine crash may lose commits.
    /// Never for a fault test (a server stopped with `-m immediate` keeps
    /// every commit either way; a test that claims more needs it on).
    pub no_fsync: bool,
    /// Serves TLS (`ssl=on`) with this certificate and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// A running PostgreSQL server of the test's own.
pub struct PgServer {
    root: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    password: String,
    options: PgOptions,
    running: bool,
    guardian: Option<Child>,
}

impl PgServer {
    /// A new server, with `fsync` on and no TLS.
    pub fn start() -> PgServer {
        PgServer::start_with(PgOptions::default())
    }

    /// One server for every test of this process that only needs a
    /// database of its own ([`PgServer::fresh_database`]): never stopped
    /// by a test; its guardian removes it when the process ends.
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<PgServer> = OnceLock::new();
        SHARED.get_or_init(PgServer::start)
    }

    /// A new server started as `options` say.
    pub fn start_with(options: PgOptions) -> PgServer {
        let bin = binaries();
        let template = template(&bin);
        let root = tempfile::Builder::new()
            .prefix("sluice-pg-")
            .tempdir()
            .expect("a temp folder for PostgreSQL")
            .keep();
        let data = root.join("data");
        run(Command::new("cp").arg("-a").arg(&template).arg(&data));
        give_to_postgres(&root, 0o700);
        let mut server = PgServer {
            password: format!("pw-{}", random_hex()),
            root,
            data,
            bin,
            port: 0,
            options,
            running: false,
            guardian: None,
        };
        server.install_tls();
        server.guardian = Some(server.guard());
        server.start_on_free_port();
        server.admin(
            "postgres",
            &format!(
                "CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{}'",
                server.password
            ),
        );
        server
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The password of [`USER`].
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The URL of database `db` as [`USER`], unencrypted.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{}/{db}?sslmode=disable",
            self.port
        )
    }

    /// A new, empty database owned by [`USER`]; its URL.
    pub fn fresh_database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.admin("postgres", &format!("CREATE DATABASE {name} OWNER {USER}"));
        self.url(&name)
    }

    /// Runs `sql` in database `db` as the superuser, over the socket; what
    /// it printed (unaligned, tuples only), trimmed. Panics on an error.
    pub fn admin(&self, db: &str, sql: &str) -> String {
        let out = self.psql(db, sql);
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Everything database `db` holds, as `pg_dump` writes it (plain SQL:
    /// the schema, then every row's text in `COPY` blocks), taken as the
    /// superuser over the socket. Panics on an error.
    pub fn dump(&self, db: &str) -> Vec<u8> {
        let out = Command::new(self.bin.join("pg_dump"))
            .args(["-U", "postgres"])
            .arg("-h")
            .arg(&self.root)
            .args(["-p", &self.port.to_string(), "-d", db])
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .output()
            .expect("run pg_dump");
        assert!(
            out.status.success(),
            "pg_dump {db} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Replaces database `db` with the state `dump` ([`PgServer::dump`])
    /// holds: dropped (its sessions ended), created again for [`USER`],
    /// and the dump loaded, as an operator restoring a backup would.
    pub fn restore(&self, db: &str, dump: &[u8]) {
        self.admin("postgres", &format!("DROP DATABASE {db} WITH (FORCE)"));
        self.admin("postgres", &format!("CREATE DATABASE {db} OWNER {USER}"));
        let mut child = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", "postgres"])
            .arg("-h")
            .arg(&self.root)
            .args(["-p", &self.port.to_string(), "-d", db])
            .env_remove("PGPASSWORD")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run psql");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(dump).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "loading the dump into {db} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn psql(&self, db: &str, sql: &str) -> Output {
        Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-t",
                "-A",
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "postgres",
            ])
            .arg("-h")
            .arg(&self.root)
            .args(["-p", &self.port.to_string(), "-d", db, "-c", sql])
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .output()
            .expect("run psql")
    }

    /// Stops the server as a crash would (`pg_ctl -m immediate stop`): no
    /// checkpoint, recovery from the WAL at the next start.
    pub fn stop_immediate(&mut self) {
        if self.running {
            self.pg_ctl(&["-m", "immediate", "stop"]);
            self.running = false;
        }
    }

    /// Starts the stopped server again, on the same port.
    pub fn restart(&mut self) {
        self.stop_immediate();
        let started = self.try_start();
        assert!(
            started.is_ok(),
            "PostgreSQL did not start again: {started:?}"
        );
    }

    fn start_on_free_port(&mut self) {
        let mut last = String::new();
        for _ in 0..5 {
            self.port = free_port();
            match self.try_start() {
                Ok(()) => return,
                Err(log) => last = log,
            }
        }
        panic!("PostgreSQL did not start:\n{last}");
    }

    /// `pg_ctl start`, waiting until the server accepts connections; the
    /// server's log when it did not.
    fn try_start(&mut self) -> Result<(), String> {
        let mut settings = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync={}",
            self.port,
            self.root.display(),
            if self.options.no_fsync { "off" } else { "on" }
        );
        if self.options.tls.is_some() {
            settings.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={0}/server.crt -c ssl_key_file={0}/server.key",
                self.root.display()
            ));
        }
        let log = self.root.join("server.log");
        let out = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o", &settings, "start"])
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl");
        if out.status.success() {
            self.running = true;
            return Ok(());
        }
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    }

    fn pg_ctl(&self, args: &[&str]) {
        let out = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn as_owner(&self, program: &Path) -> Command {
        owner_command(program)
    }

    /// Copies the certificate and key in, owned by the server's user.
    fn install_tls(&self) {
        let Some((cert, key)) = &self.options.tls else {
            return;
        };
        let (to_cert, to_key) = (self.root.join("server.crt"), self.root.join("server.key"));
        std::fs::copy(cert, &to_cert).expect("copy the server certificate");
        std::fs::copy(key, &to_key).expect("copy the server key");
        give_to_postgres(&to_cert, 0o644);
        give_to_postgres(&to_key, 0o600);
    }

    /// A process that, once this one is gone, stops the server and removes
    /// its folder (a shared server is never dropped).
    fn guard(&self) -> Child {
        let pg_ctl = self.bin.join("pg_ctl");
        let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done
if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$2" -D "$3" -m immediate stop
else "$2" -D "$3" -m immediate stop; fi >/dev/null 2>&1
rm -rf "$4""#;
        use std::os::unix::process::CommandExt;
        Command::new("bash")
            .args(["-c", script, "pg-guardian"])
            .arg(std::process::id().to_string())
            .arg(&pg_ctl)
            .arg(&self.data)
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the test's process group: a Ctrl-C to the tests
            // does not end the guardian before it has cleaned up.
            .process_group(0)
            .spawn()
            .expect("start the server's guardian")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .as_owner(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "stop"])
                .stdin(Stdio::null())
                .output();
        }
        if let Some(mut g) = self.guardian.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `program` run as the `postgres` user when this is root.
fn owner_command(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// `path` (a folder: all of it) owned by `postgres` when this is root,
/// with `mode` on `path` itself.
fn give_to_postgres(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    if is_root() {
        run(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(path));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The folder of PostgreSQL 15's programs: Debian's, else wherever
/// `initdb` on the PATH really is (`/usr/local/bin/initdb` may link to
/// Debian's).
fn binaries() -> PathBuf {
    let debian = PathBuf::from("/usr/lib/postgresql/15/bin");
    if debian.join("initdb").is_file() && debian.join("pg_ctl").is_file() {
        return debian;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let initdb = dir.join("initdb");
        if let Ok(real) = std::fs::canonicalize(&initdb) {
            let bin = real.parent().unwrap().to_path_buf();
            if bin.join("pg_ctl").is_file() && bin.join("psql").is_file() {
                return bin;
            }
        }
    }
    panic!("{MISSING}");
}

/// The initialized data folder every server copies, made once per build
/// (and again after a `cargo clean`).
fn template(bin: &Path) -> PathBuf {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let version = initdb_version(bin);
            let dir = tmp.join(format!("postgres-template-{version}"));
            if dir.join("PG_VERSION").is_file() {
                return dir;
            }
            make_template(bin, &dir);
            dir
        })
        .clone()
}

fn initdb_version(bin: &Path) -> String {
    let out = Command::new(bin.join("initdb"))
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{MISSING} ({e})"));
    // "initdb (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)": the number.
    let said = String::from_utf8_lossy(&out.stdout);
    let mut words = said.split_whitespace();
    words.find(|w| *w == "(PostgreSQL)");
    words.next().unwrap_or("unknown").to_string()
}

/// `initdb` into a folder beside `dir`, then renamed into place, so test
/// processes making it at once each see a whole one.
fn make_template(bin: &Path, dir: &Path) {
    let name = dir.file_name().unwrap().to_string_lossy();
    let build = dir.with_file_name(format!("{name}.{}.new", std::process::id()));
    let pwfile = dir.with_file_name(format!("{name}.{}.pw", std::process::id()));
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build).unwrap();
    std::fs::write(&pwfile, ADMIN_PASSWORD).unwrap();
    give_to_postgres(&build, 0o700);
    give_to_postgres(&pwfile, 0o600);
    let out = owner_command(&bin.join("initdb"))
        .arg("-D")
        .arg(&build)
        .args([
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .args(["-E", "UTF8", "--locale=C", "--no-sync"])
        .stdin(Stdio::null())
        .output()
        .expect("run initdb");
    let _ = std::fs::remove_file(&pwfile);
    assert!(
        out.status.success(),
        "initdb failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if std::fs::rename(&build, dir).is_err() {
        // Another test process made it first.
        let _ = std::fs::remove_dir_all(&build);
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}

fn random_hex() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Waits until `ok` holds, up to `limit`.
pub fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ok()
}
