//! `lsp`: asks the language server the operator bound to a file's language
//! (a policy's `lsp` table, `sluice run --lsp`) about the code: hover,
//! definition, references, implementation, symbols, the call hierarchy,
//! diagnostics. Positions are 1-based, as `read` and `grep` show them, and
//! the server's file URIs come back as paths.

use super::langserver::client::Failure;
use super::langserver::convert::{self, Converter, Lines};
use super::langserver::diagnostics::{self, Missing};
use super::langserver::server::Doc;
use super::langserver::{Declared, Server, Servers};
use super::{choice, closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::call::Action;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Every operation, as the input names it.
const OPERATIONS: &[&str] = &[
    "hover",
    "definition",
    "references",
    "implementation",
    "documentSymbols",
    "workspaceSymbols",
    "prepareCallHierarchy",
    "callHierarchyIncoming",
    "callHierarchyOutgoing",
    "diagnostics",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Input {
    operation: String,
    path: Option<String>,
    line: Option<u64>,
    character: Option<u64>,
    query: Option<String>,
    timeout_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct Output {
    /// The server's answer, positions 1-based and URIs as paths.
    result: Value,
    /// Which server answered.
    server: String,
}

pub struct Lsp {
    operation: &'static str,
    /// The file asked about (the workspace for `workspaceSymbols`
    /// without a path).
    path: Option<PathBuf>,
    /// The file as resolved, for reading it as the policy checked it.
    target: Option<crate::fsops::Target>,
    position: Option<(u64, u64)>,
    query: String,
    timeout: Option<Duration>,
}

impl Flow for Lsp {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "lsp",
        description: "Asks the language server bound to a file's language: hover, definition, references, symbols, call hierarchy, diagnostics.",
        tier: Tier::Sealed,
        actions: &[Action::FsRead],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[ErrorCode::NotFound, ErrorCode::NotADirectory, ErrorCode::BinaryFile, ErrorCode::CommandFailed, ErrorCode::RequestFailed, ErrorCode::Timeout, ErrorCode::ProviderUnavailable, ErrorCode::Unsupported, ErrorCode::ResponseTooLarge],
    };

    fn output_schema() -> Value {
        closed(
            &[
                (
                    "result",
                    json!({"description": "The server's answer as the protocol shapes it (null when it has none), with every position 1-based and every file URI a path (relative inside the workspace)."}),
                ),
                (
                    "server",
                    field(
                        "string",
                        "The name of the server that answered, as declared.",
                    ),
                ),
            ],
            &[],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        vec![Output {
            result: json!([{"uri": "a.py", "range": {}}]),
            server: "python".into(),
        }]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        let op = input.operation.as_str();
        if !OPERATIONS.contains(&op) {
            return Err(FlowError::invalid_input(
                "operation",
                format!("lsp: operation {op:?} is none of {}", OPERATIONS.join(", ")),
            ));
        }
        if op != "workspaceSymbols" && input.path.is_none() {
            return Err(FlowError::invalid_input(
                "path",
                format!("lsp: {op} needs `path`, the file to ask about"),
            ));
        }
        let positional = !matches!(op, "documentSymbols" | "workspaceSymbols" | "diagnostics");
        for (name, value) in [("line", input.line), ("character", input.character)] {
            match value {
                None if positional => {
                    return Err(FlowError::invalid_input(name, format!("lsp: {op} needs `line` and `character` (1-based, as read and grep show them)")))
                }
                Some(0) => return Err(FlowError::invalid_input(name, format!("lsp: `{name}` is 1-based; the first is 1"))),
                _ => {}
            }
        }
        if op == "workspaceSymbols" && input.query.is_none() {
            return Err(FlowError::invalid_input(
                "query",
                "lsp: workspaceSymbols needs `query`, the name (or part of it) to look for",
            ));
        }
        if op != "workspaceSymbols" && input.query.is_some() {
            return Err(FlowError::invalid_input(
                "query",
                format!("lsp: `query` is for workspaceSymbols only, not {op}"),
            ));
        }
        if input.timeout_ms.is_some_and(|t| t == 0 || t > 600_000) {
            return Err(FlowError::invalid_input(
                "timeoutMs",
                "lsp: timeoutMs is milliseconds from 1 to 600000",
            ));
        }
        Ok(())
    }

    fn unavailable(ctx: &Context) -> Option<&'static str> {
        ctx.lsp.is_none().then_some("no language server is declared: add a policy `lsp` table or sluice run --lsp NAME=EXTS:COMMAND")
    }

    fn plan(ctx: &Context, input: Input) -> FlowResult<(Self, Envelope)> {
        let operation = OPERATIONS
            .iter()
            .copied()
            .find(|o| *o == input.operation)
            .unwrap_or("hover");
        let target = match &input.path {
            Some(p) => Some(ctx.resolve("path", p)?),
            None => None,
        };
        let path = target.as_ref().map(|t| t.real.clone());
        let reads = vec![path.clone().unwrap_or_else(|| ctx.workspace.clone())];
        let envelope = Envelope {
            reads,
            ..Envelope::new(Tier::Sealed)
        };
        let position = input.line.zip(input.character);
        let flow = Lsp {
            operation,
            path,
            target,
            position,
            query: input.query.unwrap_or_default(),
            timeout: input.timeout_ms.map(Duration::from_millis),
        };
        Ok((flow, envelope))
    }

    async fn execute(self, ctx: &Context, _: Authorized) -> FlowResult<Output> {
        // A sealed host routes file flows to its container: the files asked
        // about are there, and a server on the host would read the host's.
        if let Some(name) = ctx.route.container() {
            return Err(FlowError::new(
                ErrorCode::Unsupported,
                format!("this host is sealed to container {name}: the files are there, and language servers run on the host, so lsp cannot answer for them"),
            )
            .with("container", name));
        }
        let servers = ctx.lsp.clone().ok_or_else(|| {
            FlowError::new(ErrorCode::Unsupported, "no language server is declared for this run: add a policy `lsp` table (docs/policies.md) or sluice run --lsp NAME=EXTS:COMMAND")
        })?;
        let decl = self.server_for(&servers)?.clone();
        let limit = self
            .timeout
            .unwrap_or(Duration::from_millis(decl.timeout_ms));
        // A server that died is started again once, and the question asked
        // again; a second death is the answer.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let server = servers.get(ctx, &decl).await?;
            match self.ask(ctx, &server, limit).await {
                Err(Asked::Died(_)) if attempt == 1 => continue,
                Err(Asked::Died(e)) => return Err(e),
                Err(Asked::Failed(e)) => return Err(e),
                Ok(result) => {
                    return Ok(Output {
                        result,
                        server: decl.name.clone(),
                    })
                }
            }
        }
    }
}

/// Why a question got no answer.
enum Asked {
    /// The server died meanwhile (`command_failed` with its stderr).
    Died(FlowError),
    Failed(FlowError),
}

impl From<FlowError> for Asked {
    fn from(e: FlowError) -> Asked {
        Asked::Failed(e)
    }
}

impl Lsp {
    /// The server for the call's file (or, for `workspaceSymbols` without
    /// one, the only server declared).
    fn server_for<'s>(&self, servers: &'s Servers) -> FlowResult<&'s Declared> {
        let names = || {
            servers
                .declared()
                .iter()
                .map(|d| format!("{} ({})", d.name, d.extensions.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match &self.path {
            Some(path) if path.is_file() || self.operation == "workspaceSymbols" => servers.serving(path).ok_or_else(|| {
                FlowError::new(
                    ErrorCode::Unsupported,
                    format!("no language server serves {}; the run's servers: {}", path.display(), names()),
                )
            }),
            Some(path) => Err(FlowError::new(ErrorCode::NotFound, format!("{} is not a file; lsp asks about a file", path.display()))),
            None => match servers.declared() {
                [one] => Ok(one),
                _ => Err(FlowError::invalid_input("path", format!("lsp: several language servers are declared ({}); give `path`, a file whose language picks one", names()))),
            },
        }
    }

    /// Asks `server` once.
    async fn ask(
        &self,
        ctx: &Context,
        server: &Arc<Server>,
        limit: Duration,
    ) -> Result<Value, Asked> {
        let deadline = tokio::time::Instant::now() + limit;
        let caps = match server.ready(limit).await {
            Err(e) if e.code == ErrorCode::CommandFailed => return Err(Asked::Died(e)),
            other => other?,
        };
        self.offered(server, &caps)?;
        let doc = self.synced(server)?;
        let mut lines = Lines::default();
        if let Some((path, d)) = &doc {
            lines.seed(path, &d.text);
        }
        let may_read = |p: &std::path::Path| !crate::flows::walk::refused(ctx, p);
        let mut conv = Converter {
            workspace: &ctx.workspace,
            encoding: server.encoding(),
            lines,
            may_read: &may_read,
        };
        if self.operation == "diagnostics" {
            let (path, d) = doc.as_ref().expect("diagnostics has a path");
            let mut items = match diagnostics::collect(server, &caps, path, d, deadline).await {
                Ok(items) => Value::Array(items),
                Err(Missing::Timeout) => {
                    return Err(Asked::Failed(server.timed_out("diagnostics", limit)))
                }
                Err(Missing::Failed(why)) => return Err(Asked::Died(server.crashed(&why))),
            };
            conv.result(&mut items, Some(path));
            return Ok(items);
        }
        let Some((method, params)) = self.request_of(server, &mut conv, deadline, limit).await?
        else {
            return Ok(json!([]));
        };
        let mut result = request(server, method, params, deadline, limit).await?;
        conv.result(&mut result, self.path.as_deref());
        Ok(result)
    }

    /// The file asked about, as the server now has it (opened or changed
    /// to its current text); `None` for a workspace-wide question.
    fn synced(&self, server: &Server) -> FlowResult<Option<(PathBuf, Doc)>> {
        let Some(t) = self.target.as_ref().filter(|t| t.real.is_file()) else {
            return Ok(None);
        };
        let (file, meta) = crate::fsops::text::open_checked(t)?;
        let text = crate::fsops::text::load_opened(t, file, meta)?.text;
        Ok(Some((t.real.clone(), server.sync(&t.real, &text, false))))
    }

    /// The request the operation makes, its position in the server's
    /// counting; `None` when a call hierarchy has no item to start from.
    async fn request_of(
        &self,
        server: &Server,
        conv: &mut Converter<'_>,
        deadline: tokio::time::Instant,
        limit: Duration,
    ) -> Result<Option<(&'static str, Value)>, Asked> {
        let uri = self.path.as_deref().map(convert::uri_of);
        let at = json!({"textDocument": {"uri": uri}, "position": self.position_in(conv)});
        Ok(Some(match self.operation {
            "hover" => ("textDocument/hover", at),
            "definition" => ("textDocument/definition", at),
            "implementation" => ("textDocument/implementation", at),
            "references" => {
                let mut p = at;
                p["context"] = json!({"includeDeclaration": true});
                ("textDocument/references", p)
            }
            "documentSymbols" => (
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": uri}}),
            ),
            "workspaceSymbols" => ("workspace/symbol", json!({"query": self.query})),
            "prepareCallHierarchy" => ("textDocument/prepareCallHierarchy", at),
            _ => {
                let method = "textDocument/prepareCallHierarchy";
                let items = request(server, method, at, deadline, limit).await?;
                let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
                    return Ok(None);
                };
                let method = if self.operation == "callHierarchyIncoming" {
                    "callHierarchy/incomingCalls"
                } else {
                    "callHierarchy/outgoingCalls"
                };
                (method, json!({"item": item}))
            }
        }))
    }

    /// The call's 1-based position as the protocol counts it (0-based
    /// lines, characters in the server's encoding); `null` for an
    /// operation without a path.
    fn position_in(&self, conv: &mut Converter) -> Value {
        let Some(path) = self.path.as_deref() else {
            return Value::Null;
        };
        let (line, character) = self.position.unwrap_or((1, 1));
        let text = conv
            .lines
            .line(path, line - 1)
            .unwrap_or_default()
            .to_string();
        json!({"line": line - 1, "character": convert::to_protocol(&text, character, conv.encoding)})
    }

    /// Whether the server offers the call's operation; `unsupported`
    /// naming the capability it lacks.
    fn offered(&self, server: &Server, caps: &Value) -> FlowResult<()> {
        let key = match self.operation {
            "hover" => "hoverProvider",
            "definition" => "definitionProvider",
            "references" => "referencesProvider",
            "implementation" => "implementationProvider",
            "documentSymbols" => "documentSymbolProvider",
            "workspaceSymbols" => "workspaceSymbolProvider",
            "diagnostics" => return Ok(()),
            _ => "callHierarchyProvider",
        };
        match caps.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => Err(FlowError::new(
                ErrorCode::Unsupported,
                format!(
                    "language server {} does not offer {} (its capabilities have no {key})",
                    server.decl.name, self.operation
                ),
            )
            .with("server", server.decl.name.clone())),
            Some(_) => Ok(()),
        }
    }
}

/// One request within what is left until `deadline`.
async fn request(
    server: &Server,
    method: &str,
    params: Value,
    deadline: tokio::time::Instant,
    limit: Duration,
) -> Result<Value, Asked> {
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    match server.client.request(method, params, left).await {
        Ok(v) => Ok(v),
        Err(Failure::Timeout) => Err(Asked::Failed(server.timed_out(method, limit))),
        Err(Failure::Rpc { code, message }) => Err(Asked::Failed(
            FlowError::new(
                ErrorCode::RequestFailed,
                format!(
                    "language server {} answered {method} with error {code}: {message}",
                    server.decl.name
                ),
            )
            .with("server", server.decl.name.clone())
            .with("rpcCode", code),
        )),
        Err(Failure::Ended(why)) => Err(Asked::Died(server.crashed(&why))),
    }
}

/// The audit's one-line gist: the operation and what it is about.
fn summary(input: &Value) -> String {
    let op = input["operation"].as_str().unwrap_or("?");
    match (input["path"].as_str(), input["query"].as_str()) {
        (Some(p), _) => match (input["line"].as_u64(), input["character"].as_u64()) {
            (Some(l), Some(c)) => format!("{op} {p}:{l}:{c}"),
            _ => format!("{op} {p}"),
        },
        (None, Some(q)) => format!("{op} {q:?}"),
        _ => input.to_string(),
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["operation"],
        "properties": {
            "operation": choice(OPERATIONS, "What to ask the server."),
            "path": field("string", "The file asked about, relative to the workspace or absolute (required except for workspaceSymbols; there it picks the server)."),
            "line": field("integer", "1-based line of the symbol (hover, definition, references, implementation, call hierarchy)."),
            "character": field("integer", "1-based character on that line, counted in characters as read and grep count them."),
            "query": field("string", "workspaceSymbols only: the name, or part of it, to look for."),
            "timeoutMs": field("integer", "How long to wait for the server, in milliseconds (default: the server's timeoutMs, 30000)."),
        },
    })
}
