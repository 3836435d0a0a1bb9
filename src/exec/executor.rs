//! The executor of one run: the limits its process flows share, the private
//! spill folder their overflowing output goes to, its background jobs, and
//! the managed `SLUICE_*` facts each call's command receives.

use super::job::{Jobs, DEFAULT_MAX_LIVE};
use super::{CommandLine, Limits, Managed, Request, SpillDir};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Per-run process services, shared by every process flow of the run.
pub struct Executor {
    pub limits: Limits,
    pub jobs: Jobs,
    run_id: String,
    workspace: PathBuf,
    /// Created on first use: most runs never overflow a stream.
    spill: OnceLock<Option<Arc<SpillDir>>>,
    keep_spill: AtomicBool,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("run_id", &self.run_id)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Each stream of a foreground command keeps this much in memory: bash's
/// 30,000-byte bound, head and tail.
pub const STREAM_BUDGET: usize = 30_000;

impl Executor {
    /// An executor whose commands run in `workspace` by default.
    pub fn new(workspace: &Path, run_id: &str) -> Executor {
        let mut limits = Limits::new(workspace);
        limits.default_output_bytes = STREAM_BUDGET;
        Executor {
            jobs: Jobs::new(DEFAULT_MAX_LIVE, limits.max_output_bytes),
            limits,
            run_id: run_id.to_string(),
            workspace: workspace.to_path_buf(),
            spill: OnceLock::new(),
            keep_spill: AtomicBool::new(false),
        }
    }

    /// Allows `max` background jobs alive at once (default 16).
    pub fn with_max_jobs(mut self, max: usize) -> Executor {
        self.jobs = Jobs::new(max, self.limits.max_output_bytes);
        self
    }

    /// Leave spill files on disk when the run ends (`--keep-spill`).
    pub fn keep_spill(&self) {
        self.keep_spill.store(true, Ordering::Relaxed);
        if let Some(Some(dir)) = self.spill.get() {
            dir.keep();
        }
    }

    /// The run's spill folder, created on first use. Without one (the temp
    /// folder is not writable) overflowing output is counted, not kept.
    pub fn spill_dir(&self) -> Option<Arc<SpillDir>> {
        self.spill
            .get_or_init(|| {
                let dir = SpillDir::create(&self.run_id).ok()?;
                if self.keep_spill.load(Ordering::Relaxed) {
                    dir.keep();
                }
                Some(Arc::new(dir))
            })
            .clone()
    }

    /// A request for call number `call_seq` of the run, with its managed
    /// facts and the spill folder filled in.
    pub fn request(&self, command: CommandLine, call_seq: u64) -> Request {
        let mut req = Request::new(command);
        req.managed = Managed {
            run_id: Some(self.run_id.clone()),
            call_seq: Some(call_seq),
            workspace: Some(self.workspace.clone()),
        };
        req.spill = self.spill_dir();
        req
    }

    /// Kills and reaps every background job still running. Spill files
    /// go when the executor is dropped, unless kept.
    pub async fn shutdown(&self) {
        self.jobs.shutdown().await;
    }
}

/// bash where it is installed, else the POSIX shell: for flows that mimic
/// a tool whose users expect bash (`shell_command`, as Codex runs it).
pub fn bash_or_sh() -> PathBuf {
    ["/bin/bash", "/usr/bin/bash"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}
