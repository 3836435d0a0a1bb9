//! What an MCP tool call costs, side by side in one run, from one client:
//!
//! - `mcp-read-1000`: 1,000 `tools/call` of `read` on a 4 KiB file, over
//!   stdio, from the official Python `mcp` client (2.x, installed from PyPI
//!   into target/peers/mcp by scripts/bench), against `sluice mcp` (its run
//!   recorded, as by default) and against a minimal server written with the
//!   package's own server API (MCPServer) whose tool reads the same file.
//!   Each sample times the client's loop after 20 warm-up calls, so neither
//!   server pays for its start, and reads the server's CPU time (user +
//!   system) over the loop from /proc: the server-side cost per call.
//!   Target: sluice at most 1.0x. Lines for the `initialize` form
//!   (2025-11-25) and `--no-audit` follow as information.
//!
//! Not a criterion bench: each sample is two processes and a thousand
//! requests. BENCHMARKS.md has the figures.

#[path = "support/peers.rs"]
mod peers;
mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::verdict;

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");
const CALLS: usize = 1000;
const SAMPLES: usize = 5;

fn main() {
    if !support::wanted()("mcp-read-1000") {
        return;
    }
    if let Some(how) = peers::mcp_python_missing() {
        panic!("{how}");
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let file = ws.join("page.txt");
    std::fs::write(&file, support::text_file(4096, 64)).unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/mcp");
    let peer = [
        "python3".to_string(),
        here.join("server.py").display().to_string(),
    ];
    let ours = |extra: &[&str]| -> Vec<String> {
        let mut v = vec![
            SLUICE.to_string(),
            "mcp".into(),
            "--workspace".into(),
            ws.display().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let mut rows: Vec<(&str, Vec<Sample>)> = vec![
        ("sluice", vec![]),
        ("python", vec![]),
        ("sluice-init", vec![]),
        ("python-init", vec![]),
        ("sluice-no-audit", vec![]),
    ];
    // Interleaved turns, so the machine's load falls on both sides alike.
    for _ in 0..SAMPLES {
        rows[0].1.push(sample(&here, "2026", &file, &ours(&[])));
        rows[1].1.push(sample(&here, "2026", &file, &peer));
        rows[2]
            .1
            .push(sample(&here, "2025-11-25", &file, &ours(&[])));
        rows[3].1.push(sample(&here, "2025-11-25", &file, &peer));
        rows[4]
            .1
            .push(sample(&here, "2026", &file, &ours(&["--no-audit"])));
    }
    let m: Vec<Sample> = rows.iter_mut().map(|(_, s)| median(s)).collect();
    for ((name, _), s) in rows.iter().zip(&m) {
        println!(
            "mcp-read-1000 {name}: {:.0} ms for {CALLS} calls ({:.0} us/call at the client), server CPU {:.0} us/call",
            s.seconds * 1e3,
            s.seconds * 1e6 / CALLS as f64,
            s.server_cpu * 1e6 / CALLS as f64
        );
    }
    let ratio = m[0].seconds / m[1].seconds;
    println!(
        "ratio mcp-read-1000 {ratio:.2}x python-mcp-server (target <= 1.0x: {})",
        verdict(ratio <= 1.0)
    );
    println!(
        "info mcp-read-1000 server CPU per call {:.2}x python-mcp-server ({:.0} us vs {:.0} us)",
        m[0].server_cpu / m[1].server_cpu,
        m[0].server_cpu * 1e6 / CALLS as f64,
        m[1].server_cpu * 1e6 / CALLS as f64
    );
    println!(
        "info mcp-read-1000 initialize form (2025-11-25) {:.2}x python-mcp-server",
        m[2].seconds / m[3].seconds
    );
    println!(
        "info mcp-read-1000 --no-audit {:.2}x python-mcp-server",
        m[4].seconds / m[1].seconds
    );
}

/// One client loop: its seconds, and the server's CPU seconds over it.
#[derive(Clone, Copy)]
struct Sample {
    seconds: f64,
    server_cpu: f64,
}

fn sample(here: &Path, form: &str, file: &Path, server: &[String]) -> Sample {
    let out = Command::new("python3")
        .arg(here.join("client.py"))
        .args([&CALLS.to_string(), form, &file.display().to_string(), "--"])
        .args(server)
        .env("PYTHONPATH", peers::mcp_python())
        .output()
        .expect("run the bench's client");
    assert!(
        out.status.success(),
        "the MCP bench's client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");
    Sample {
        seconds: v["seconds"].as_f64().unwrap(),
        server_cpu: v["serverCpu"].as_f64().unwrap(),
    }
}

/// The sample of median client time.
fn median(v: &mut [Sample]) -> Sample {
    v.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    v[v.len() / 2]
}
