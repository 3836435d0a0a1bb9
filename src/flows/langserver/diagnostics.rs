//! A document's diagnostics after a change: pulled (`textDocument/
//! diagnostic`) where the server offers it, else the ones it pushes
//! (`publishDiagnostics`): the first publish newer than the change (by its
//! version when the server gives one, else the first received after the
//! change), followed while more come within `settleMs` when it gives no
//! version. Waiting too long is `timeout`, never `clean`.

use super::client::{Client, Failure, Publish};
use super::convert::{self, Converter, Lines};
use super::server::{Doc, Server};
use crate::flows::Context;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// The most error items an edit's output carries.
pub const MAX_ERRORS: usize = 20;

/// What a file flow's output says of the file it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostics {
    pub status: Status,
    /// At most [`MAX_ERRORS`] error-severity items.
    pub errors: Vec<Item>,
    /// Why nothing is known (`unchecked`, `timeout`): so a file nobody
    /// checked never reads as one that was checked and found clean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether the server had anything to say, and whether it said it in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Clean,
    Errors,
    /// No server looked at it (none is bound to its language, or it
    /// failed).
    Unchecked,
    /// The server did not answer in time: nothing is known.
    Timeout,
}

/// One error, 1-based.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub path: String,
    pub line: u64,
    pub character: u64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl Diagnostics {
    fn unknown(status: Status, reason: impl Into<String>) -> Diagnostics {
        Diagnostics {
            status,
            errors: Vec::new(),
            reason: Some(reason.into()),
        }
    }
}

/// Why no diagnostics came.
#[derive(Debug)]
pub enum Missing {
    Timeout,
    /// The server died or refused: why.
    Failed(String),
}

/// The diagnostics of `path` after a file flow changed it: `None` when
/// the run declares no language server at all (the output then has no
/// `diagnostics`), `unchecked` when none serves this file. Never an error:
/// an edit does not fail because of its server.
pub async fn after_change(ctx: &Context, path: &Path) -> Option<Diagnostics> {
    let servers = ctx.lsp.as_ref()?;
    // The file is the container's; a server on the host would read the
    // host's file of that name, which no check was made for.
    if let Some(name) = ctx.route.container() {
        return Some(Diagnostics::unknown(
            Status::Unchecked,
            format!("the file is in container {name}, and language servers run on the host"),
        ));
    }
    let Some(decl) = servers.serving(path) else {
        return Some(Diagnostics::unknown(
            Status::Unchecked,
            "no language server of the run serves this file's ending",
        ));
    };
    let unchecked = |why: String| Diagnostics::unknown(Status::Unchecked, why);
    let limit = Duration::from_millis(decl.timeout_ms);
    let deadline = Instant::now() + limit;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            return Some(unchecked(format!(
                "the file could not be read as text: {e}"
            )))
        }
    };
    let server = match servers.get(ctx, decl).await {
        Ok(server) => server,
        Err(e) => return Some(unchecked(failure(&e))),
    };
    let caps = match server.ready(limit).await {
        Ok(caps) => caps,
        Err(e) if e.code == crate::error::ErrorCode::Timeout => {
            return Some(Diagnostics::unknown(Status::Timeout, e.message))
        }
        Err(e) => return Some(unchecked(failure(&e))),
    };
    let doc = server.sync(path, &text, true);
    Some(match collect(&server, &caps, path, &doc, deadline).await {
        Ok(items) => errors_of(&server, &ctx.workspace, path, &doc, &items),
        Err(Missing::Timeout) => Diagnostics::unknown(
            Status::Timeout,
            server
                .timed_out("with this file's diagnostics", limit)
                .message,
        ),
        Err(Missing::Failed(why)) => unchecked(failure(&server.crashed(&why))),
    })
}

/// A server's failure as an edit's `reason`: what happened and the end of
/// what it printed on its standard error, if anything.
fn failure(e: &crate::error::FlowError) -> String {
    const SHOWN: usize = 1024;
    let tail = e
        .details
        .get("stderr")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_end();
    if tail.is_empty() {
        return e.message.clone();
    }
    let cut = tail.len().saturating_sub(SHOWN);
    let start = (cut..=tail.len())
        .find(|i| tail.is_char_boundary(*i))
        .unwrap_or(tail.len());
    format!("{}; its standard error ends: {}", e.message, &tail[start..])
}

/// [`after_change`] for every file a change touched (a patch's), as one:
/// `timeout` if any timed out (so it never looks clean), else `errors` if
/// any has errors (at most [`MAX_ERRORS`] in all), else `clean` if any was
/// checked, else `unchecked`.
pub async fn after_changes(ctx: &Context, paths: &[std::path::PathBuf]) -> Option<Diagnostics> {
    ctx.lsp.as_ref()?;
    let mut all = Vec::new();
    // Each file not checked says why, named, so none hides another.
    let mut reasons = Vec::new();
    for path in paths {
        let Some(d) = after_change(ctx, path).await else {
            continue;
        };
        if let Some(why) = &d.reason {
            reasons.push(format!("{}: {why}", convert::shown(path, &ctx.workspace)));
        }
        all.push(d);
    }
    let has = |s: Status| all.iter().any(|d| d.status == s);
    let status = [Status::Timeout, Status::Errors, Status::Clean]
        .into_iter()
        .find(|s| has(*s))
        .unwrap_or(Status::Unchecked);
    let errors = all
        .into_iter()
        .flat_map(|d| d.errors)
        .take(MAX_ERRORS)
        .collect();
    let unknown = matches!(status, Status::Timeout | Status::Unchecked);
    let reason = (unknown && !reasons.is_empty()).then(|| reasons.join("; "));
    Some(Diagnostics {
        status,
        errors,
        reason,
    })
}

/// The server's diagnostics of `path` as sent in `doc`, raw.
pub async fn collect(
    server: &Server,
    caps: &Value,
    path: &Path,
    doc: &Doc,
    deadline: Instant,
) -> Result<Vec<Value>, Missing> {
    let uri = convert::uri_of(path);
    let pulls = caps
        .get("diagnosticProvider")
        .is_some_and(|p| p.is_object() || p == &json!(true));
    if pulls {
        let left = deadline.saturating_duration_since(Instant::now());
        let params = json!({"textDocument": {"uri": uri}});
        return match server
            .client
            .request("textDocument/diagnostic", params, left)
            .await
        {
            Ok(report) => Ok(report["items"].as_array().cloned().unwrap_or_default()),
            Err(Failure::Timeout) => Err(Missing::Timeout),
            Err(Failure::Rpc { message, .. }) => Err(Missing::Failed(message)),
            Err(Failure::Ended(why)) => Err(Missing::Failed(why)),
        };
    }
    let first = pushed(&server.client, &uri, doc, server.decl.settle_ms, deadline).await?;
    if first.version.is_some() || server.decl.settle_ms == 0 {
        return Ok(first.diagnostics);
    }
    Ok(
        settled(&server.client, &uri, first, server.decl.settle_ms, deadline)
            .await
            .diagnostics,
    )
}

/// How long a publish that may answer the send before is given company:
/// a server that coalesces two quick sends (typescript-language-server,
/// busy) answers both once.
const PENDING_GRACE: Duration = Duration::from_millis(1000);

/// The first publish for `uri` newer than `doc`. Without a version, a
/// publish answers the last send when it is the first after it; when the
/// send before had no answer yet that one may be its, so a second is
/// awaited for a moment ([`PENDING_GRACE`], or `settle_ms` if longer) and
/// taken if it comes.
async fn pushed(
    client: &Client,
    uri: &str,
    doc: &Doc,
    settle_ms: u64,
    deadline: Instant,
) -> Result<Publish, Missing> {
    let newer = |p: &Publish| match p.version {
        Some(v) => v >= doc.version,
        None => p.seq > doc.mark && p.count > doc.count,
    };
    let first = publish_where(client, uri, newer, deadline).await?;
    if first.version.is_some() || !doc.pending {
        return Ok(first);
    }
    let grace = PENDING_GRACE.max(Duration::from_millis(settle_ms));
    let until = (Instant::now() + grace).min(deadline);
    match publish_where(client, uri, |p| p.count > first.count, until).await {
        Err(Missing::Timeout) => Ok(first),
        second => second,
    }
}

/// The current publish for `uri` once it satisfies `wanted`; `timeout`
/// at `deadline`, `Failed` when the server ends first.
async fn publish_where(
    client: &Client,
    uri: &str,
    wanted: impl Fn(&Publish) -> bool,
    deadline: Instant,
) -> Result<Publish, Missing> {
    let mut publishes = client.publishes();
    let mut ended = client.ended();
    loop {
        if let Some(p) = client.published(uri).filter(&wanted) {
            return Ok(p);
        }
        if let Some(why) = ended.borrow().clone() {
            return Err(Missing::Failed(why));
        }
        tokio::select! {
            _ = publishes.changed() => {}
            _ = ended.changed() => {}
            _ = tokio::time::sleep_until(deadline) => return Err(Missing::Timeout),
        }
    }
}

/// The last of the publishes for `uri` that follow `first` each within
/// `settle_ms` of the one before.
async fn settled(
    client: &Client,
    uri: &str,
    first: Publish,
    settle_ms: u64,
    deadline: Instant,
) -> Publish {
    let mut last = first;
    let mut publishes = client.publishes();
    loop {
        let quiet = (Instant::now() + Duration::from_millis(settle_ms)).min(deadline);
        tokio::select! {
            r = publishes.changed() => {
                if r.is_err() {
                    return last;
                }
                if let Some(p) = client.published(uri).filter(|p| p.seq > last.seq) {
                    last = p;
                }
            }
            _ = tokio::time::sleep_until(quiet) => return last,
        }
    }
}

/// The error-severity items of `items` (a protocol `Diagnostic` list for
/// `path` as sent in `doc`), at most [`MAX_ERRORS`].
fn errors_of(
    server: &Server,
    workspace: &Path,
    path: &Path,
    doc: &Doc,
    items: &[Value],
) -> Diagnostics {
    let mut lines = Lines::default();
    lines.seed(path, &doc.text);
    let mut conv = Converter {
        workspace,
        encoding: server.encoding(),
        lines,
        // Only `path`, as sent, is converted against.
        may_read: &|_| false,
    };
    let errors: Vec<Item> = items
        .iter()
        .filter_map(|d| serde_json::from_value::<lsp_types::Diagnostic>(d.clone()).ok())
        .filter(|d| {
            d.severity
                .is_none_or(|s| s == lsp_types::DiagnosticSeverity::ERROR)
        })
        .take(MAX_ERRORS)
        .map(|d| {
            let mut start =
                json!({"line": d.range.start.line, "character": d.range.start.character});
            conv.result(&mut start, Some(path));
            Item {
                path: convert::shown(path, workspace),
                line: start["line"].as_u64().unwrap_or(1),
                character: start["character"].as_u64().unwrap_or(1),
                message: d.message,
                source: d.source,
                code: d.code.map(|c| match c {
                    lsp_types::NumberOrString::Number(n) => n.to_string(),
                    lsp_types::NumberOrString::String(s) => s,
                }),
            }
        })
        .collect();
    let status = if errors.is_empty() {
        Status::Clean
    } else {
        Status::Errors
    };
    Diagnostics {
        status,
        errors,
        reason: None,
    }
}

/// Output samples for the file flows' schema tests: every field shown.
#[cfg(test)]
pub fn samples() -> Vec<Diagnostics> {
    vec![
        Diagnostics {
            status: Status::Errors,
            errors: vec![Item {
                path: "a.py".into(),
                line: 3,
                character: 5,
                message: "x".into(),
                source: Some("basedpyright".into()),
                code: Some("reportGeneralTypeIssues".into()),
            }],
            reason: None,
        },
        Diagnostics {
            status: Status::Clean,
            errors: vec![Item {
                path: "a.py".into(),
                line: 1,
                character: 1,
                message: "x".into(),
                source: None,
                code: None,
            }],
            reason: Some("language server ts failed: the server closed its output".into()),
        },
    ]
}

/// The output schema of a file flow's `diagnostics`.
pub fn schema() -> Value {
    use crate::flows::{choice, closed, field, list, nested};
    let item = closed(
        &[
            (
                "path",
                field("string", "The file, relative to the workspace inside it."),
            ),
            ("line", field("integer", "1-based line.")),
            (
                "character",
                field("integer", "1-based character on the line."),
            ),
            ("message", field("string", "What the server says.")),
        ],
        &[
            (
                "source",
                field("string", "Who found it (the server's checker)."),
            ),
            ("code", field("string", "The server's code for it.")),
        ],
    );
    nested(
        "Diagnostics",
        "What the language server bound to the file's language says after the change; absent when the run declares no language server.",
        closed(
            &[
                ("status", choice(&["clean", "errors", "unchecked", "timeout"], "clean: no errors; errors: see `errors`; unchecked: no server looked (none is bound to this language, or it failed); timeout: the server did not answer in time, so nothing is known.")),
                ("errors", list(nested("DiagnosticError", "One error.", item), "At most 20 error-severity diagnostics.")),
            ],
            &[("reason", field("string", "Why nothing is known, with unchecked and timeout: no server serves the file, or what the server did (its standard error's tail when it died)."))],
        ),
    )
}
