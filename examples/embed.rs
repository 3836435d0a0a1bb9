//! Embedding sluice in a Rust program: a runtime built with the program's
//! own policy runs a Lua workflow, then the program calls a flow itself and
//! reads its outcome, and finds the record the run left.
//!
//! `cargo run --example embed -- DIR` runs it in the folder DIR (a new
//! temporary folder when none is given) and says what it did. `cargo test`
//! builds it, and `tests/embedding.rs` runs it and verifies its record.

use serde_json::json;
use sluice::policy::Source;
use sluice::{ErrorCode, Runtime};
use std::error::Error;
use std::path::Path;

/// The program's policy: its runs read the workspace and write under
/// `notes/`; anything else is asked, and nobody answers (refused).
const POLICY: &str = r#"
local p = require("sluice.policy")
return {
  rules = {
    p.allow "fs:read:${workspace}/**",
    p.allow "fs:write:${workspace}/notes/**",
  },
}
"#;

/// The workflow: count the README's lines and write a note of it.
const SCRIPT: &str = r#"
local page = assert(sluice.read{path = "README.md"})
local lines = 0
for _ in page.content:gmatch("[^\n]+") do lines = lines + 1 end
assert(sluice.write{path = "notes/summary.txt", content = "README.md: " .. lines .. " lines\n"})
"#;

/// What the example did.
#[derive(Debug)]
pub struct Done {
    /// The run's id in its record.
    pub run_id: String,
    /// The note the workflow wrote, as a `read` from Rust returned it.
    pub summary: String,
    /// What the policy made of a write outside `notes/`.
    pub refused: ErrorCode,
    /// Where the run was recorded.
    pub record: String,
}

/// Runs the example in `dir`: the workspace `dir/project`, holding a
/// README, and the workflow `dir/summarize.lua`.
pub fn run(dir: &Path) -> Result<Done, Box<dyn Error>> {
    let workspace = dir.join("project");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(
        workspace.join("README.md"),
        "# demo\nA small project.\nNothing else yet.\n",
    )?;
    let script = dir.join("summarize.lua");
    std::fs::write(&script, SCRIPT)?;

    // Recorded, as `sluice run` records, in the workspace's
    // `.sluice/audit.db` (`.no_audit()` would record nothing).
    let rt = Runtime::builder()
        .workspace(&workspace)
        .policy(Source::Embedded {
            name: "embed.lua",
            text: POLICY,
        })
        .script(&script)
        .build()?;

    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (summary, refused) = tokio.block_on(async {
        rt.run_script(&script).await?;
        // A call from Rust passes the same door as the script's: decoded,
        // judged by the policy, recorded.
        let note = rt
            .call("read", json!({"path": "notes/summary.txt"}))
            .await?;
        let summary = note["content"].as_str().unwrap_or_default().to_string();
        let write = json!({"path": "README.md", "content": "gone"});
        let refused = match rt.call("write", write).await {
            Ok(_) => return Err("the policy let the README be written".into()),
            Err(e) => e.code,
        };
        rt.shutdown().await;
        Ok::<_, Box<dyn Error>>((summary, refused))
    })?;

    // Sealing the record: `sluice audit verify` checks it from here on.
    rt.end("ok", None)?;
    let record = rt
        .recorded_in()
        .map(ToString::to_string)
        .unwrap_or_default();
    Ok(Done {
        run_id: rt.run_id().to_string(),
        summary,
        refused,
        record,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    // A folder of its own, kept afterwards for `sluice audit show`.
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => tempfile::tempdir()?.keep(),
    };
    let done = run(&dir)?;
    println!("the workflow wrote: {}", done.summary);
    println!("a write of README.md: {}", done.refused);
    println!("recorded as run {} in {}", done.run_id, done.record);
    println!(
        "see it with: sluice audit show {} --workspace {}",
        done.run_id,
        dir.join("project").display()
    );
    Ok(())
}
