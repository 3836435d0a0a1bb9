//! `--otlp URL [--otlp-content]`: a run sent to an OpenTelemetry receiver,
//! after the fact (`sluice audit export RUN --otlp URL`) or while it runs
//! (`sluice run --otlp URL`).

use crate::audit::db::Db;
use crate::otel::{self, live::Live, send::Sender, Failed};
use clap::Args;
use std::path::Path;
use std::process::ExitCode;

/// `sluice audit export`'s OpenTelemetry flags.
#[derive(Debug, Args)]
pub struct ExportOtlp {
    /// Send the run to an OpenTelemetry receiver instead, as one trace over OTLP/HTTP
    /// (protobuf): URL is its traces endpoint, and one without a path gets /v1/traces
    /// (http://127.0.0.1:6006 for Arize Phoenix, http://127.0.0.1:4318 for a Collector). Headers
    /// (a token) come from OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS
    /// (key1=value1,key2=value2).
    #[arg(long, value_name = "URL", conflicts_with_all = ["format", "output", "json"])]
    pub otlp: Option<String>,
    /// With --otlp, send each call's input, output and error (and a model call's
    /// conversation) too, as the record holds them (secrets already redacted), each cut to
    /// 64 KiB; without it no content leaves.
    #[arg(long, requires = "otlp")]
    pub otlp_content: bool,
}

/// `sluice run`'s OpenTelemetry flags.
#[derive(Debug, Args, Default)]
pub struct RunOtlp {
    /// Send the run to an OpenTelemetry receiver while it runs, as one trace over OTLP/HTTP
    /// (protobuf; a URL without a path gets /v1/traces): each call's span once its outcome is
    /// recorded (looked for every second), the tasks' and the run's at its end, before sluice
    /// exits. A receiver that fails is said once on stderr and never fails or slows the run;
    /// `sluice audit export RUN --otlp URL` sends it again. Headers (a token) come from
    /// OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS (key1=value1,key2=value2).
    #[arg(long, value_name = "URL", conflicts_with = "no_audit")]
    pub otlp: Option<String>,
    /// With --otlp, send each call's input, output and error (and a model call's
    /// conversation) too, as the record holds them (secrets already redacted), each cut to
    /// 64 KiB; without it no content leaves.
    #[arg(long, requires = "otlp")]
    pub otlp_content: bool,
}

/// `sluice audit export RUN --otlp URL`: run `id` of `db` sent to `url`.
/// Exit 0 once the receiver took every span, 1 when it could not be
/// reached or refused, 2 when the URL or the record is wrong.
pub fn export(db: &dyn Db, id: &str, url: &str, content: bool) -> ExitCode {
    let sender = match Sender::new(url) {
        Ok(s) => s,
        Err(e) => return failed(&e, 2),
    };
    match otel::export(db, id, &sender, content) {
        Ok(sent) => super::print(&format!(
            "run {id}: {} spans sent to {} as trace {}{}\n",
            sent.spans,
            sender.url(),
            sent.trace_id,
            if content { " (with content)" } else { "" }
        )),
        Err(Failed::Record(e)) => failed(&e, 2),
        Err(Failed::Send(e)) => failed(
            &format!("OpenTelemetry export to {} failed: {e}", sender.url()),
            1,
        ),
    }
}

fn failed(message: &str, code: u8) -> ExitCode {
    eprintln!("sluice: {message}");
    ExitCode::from(code)
}

/// The sender `sluice run --otlp URL` sends to, checked before the run
/// starts (a wrong URL is the command's error, not the run's).
pub fn run_sender(flags: &RunOtlp) -> Result<Option<Sender>, String> {
    flags.otlp.as_deref().map(Sender::new).transpose()
}

/// Starts sending run `run_id`, recorded at `at` (its password from
/// `credentials`), to `sender`.
pub fn follow(
    sender: Sender,
    at: &crate::audit::location::Location,
    credentials: Option<&Path>,
    run_id: &str,
    content: bool,
) -> Result<Live, String> {
    let readers = crate::audit::open::readers(at, credentials);
    otel::live::start(readers, run_id, sender, content)
}
