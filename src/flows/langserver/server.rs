//! The run's language servers: each started on first use, confined like a
//! command (what the policy lets commands read, nothing writable but its
//! private temp storage, the network only when commands have it, a memory
//! limit), initialized with the workspace as its root, kept for the run,
//! started again once if it dies, and stopped at the run's end.

use super::client::{Client, Failure};
use super::convert::{self, Encoding};
use super::declare::Declared;
use crate::error::{ErrorCode, FlowError, FlowResult};
use crate::exec::piped::{self, Piped};
use crate::flows::Context;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// The most of a server's standard error kept: its tail, for the error
/// that says why it died.
const STDERR_TAIL: usize = 4096;

/// How long a server gets to answer `initialize` before it is given up.
const INITIALIZE_LIMIT: Duration = Duration::from_secs(300);

/// Every language server of one run.
#[derive(Debug)]
pub struct Servers {
    declared: Vec<Declared>,
    slots: tokio::sync::Mutex<HashMap<String, Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    live: Option<Arc<Server>>,
    /// How many times it was started.
    starts: u32,
    /// Why it is not started again, once it died after its restart.
    given_up: Option<FlowError>,
}

/// One running server.
pub struct Server {
    pub decl: Declared,
    pub client: Arc<Client>,
    /// `Some` once `initialize` was answered: its capabilities, or why
    /// the server could not be used.
    ready: watch::Receiver<Option<Result<Value, String>>>,
    process: Mutex<Option<Piped>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The documents it has open: what sluice sent of each.
    docs: Mutex<HashMap<PathBuf, Doc>>,
    /// How many times its slot started a server, this one included.
    pub starts: u32,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.decl.name)
            .finish()
    }
}

/// A document as the server last got it.
#[derive(Debug, Clone)]
pub struct Doc {
    pub version: i64,
    pub text: String,
    /// The last publish's `seq` when it was last sent.
    pub mark: u64,
    /// How many publishes for it had come when it was last sent.
    pub count: u64,
    /// Whether the publish answering the send before had not come yet:
    /// then the first publish after this send may answer that one.
    pub pending: bool,
}

impl Servers {
    /// The run's servers, none started.
    pub fn new(declared: Vec<Declared>) -> Servers {
        Servers {
            declared,
            slots: tokio::sync::Mutex::default(),
        }
    }

    /// Every declared server.
    pub fn declared(&self) -> &[Declared] {
        &self.declared
    }

    /// The server declared for `path`'s language, if any.
    pub fn serving(&self, path: &Path) -> Option<&Declared> {
        self.declared.iter().find(|d| d.serves(path))
    }

    /// Server `decl`, started if it is not running: a server that died is
    /// started again once, never twice (`command_failed` with its stderr).
    pub async fn get(&self, ctx: &Context, decl: &Declared) -> FlowResult<Arc<Server>> {
        let mut slots = self.slots.lock().await;
        let slot = slots.entry(decl.name.clone()).or_default();
        if let Some(why) = &slot.given_up {
            return Err(why.clone());
        }
        if let Some(live) = &slot.live {
            if live.alive() {
                return Ok(live.clone());
            }
            let dead = slot.live.take().expect("a live server");
            dead.kill();
            if slot.starts >= 2 {
                let why = dead.crashed(
                    "it died again after its restart, so it is not started again in this run",
                );
                slot.given_up = Some(why.clone());
                return Err(why);
            }
        }
        slot.starts += 1;
        let server = Arc::new(Server::start(ctx, decl, slot.starts)?);
        slot.live = Some(server.clone());
        Ok(server)
    }

    /// Stops every server: `shutdown` and `exit` asked politely, then the
    /// signals.
    pub async fn shutdown(&self) {
        let live: Vec<Arc<Server>> = self
            .slots
            .lock()
            .await
            .values_mut()
            .filter_map(|s| s.live.take())
            .collect();
        for server in live {
            server.stop().await;
        }
    }
}

impl Server {
    fn start(ctx: &Context, decl: &Declared, starts: u32) -> FlowResult<Server> {
        let failed = |m: String| {
            FlowError::new(ErrorCode::CommandFailed, m).with("server", decl.name.clone())
        };
        let path_var = std::env::var("PATH").ok();
        decl.refuse(&ctx.workspace, path_var.as_deref())
            .and_then(|()| decl.program(path_var.as_deref()))
            .map_err(failed)?;
        let argv = crate::exec::CommandLine::Argv(decl.command.iter().map(Into::into).collect());
        let mut req = ctx.exec.request(argv, ctx.call_seq);
        req.cwd = Some(ctx.workspace.clone());
        req.env = decl.env.clone();
        // Started in the workspace, `python3 -m NAME` would put it first
        // on the import path: any .py file there could stand in for a
        // module the server imports. Python 3.11 and later leave it off.
        req.env
            .entry("PYTHONSAFEPATH".into())
            .or_insert_with(|| "1".into());
        if let Some(confined) = ctx.confine_server(decl.memory_mb)? {
            confined.attach(&mut req);
        }
        let spec = crate::exec::resolve(req, &ctx.exec.limits)?;
        let mut process = piped::spawn(spec).map_err(|f| {
            failed(format!(
                "language server {} would not start: {}",
                decl.name, f.message
            ))
        })?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(pipe) = process.stderr.take() {
            tokio::spawn(keep_tail(pipe, stderr.clone()));
        }
        let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
            return Err(failed(format!(
                "language server {}: no pipes to talk over",
                decl.name
            )));
        };
        let client = Arc::new(Client::start(stdin, stdout, decl.settings.clone()));
        let (tx, ready) = watch::channel(None);
        tokio::spawn(initialize(client.clone(), init_params(ctx, decl), tx));
        Ok(Server {
            decl: decl.clone(),
            client,
            ready,
            process: Mutex::new(Some(process)),
            stderr,
            docs: Mutex::default(),
            starts,
        })
    }

    /// Waits until the server answered `initialize`, at most `limit`: its
    /// capabilities, or why it cannot be used (`timeout`, `command_failed`).
    pub async fn ready(&self, limit: Duration) -> FlowResult<Value> {
        let mut ready = self.ready.clone();
        let wait = ready.wait_for(|r| r.is_some());
        let answer = match tokio::time::timeout(limit, wait).await {
            Err(_) => return Err(self.timed_out("initialize", limit)),
            Ok(Err(_)) => return Err(self.crashed("it stopped while starting")),
            Ok(Ok(r)) => r.clone(),
        };
        match answer {
            Some(Ok(caps)) => Ok(caps),
            Some(Err(why)) => Err(self.crashed(&why)),
            None => Err(self.crashed("it stopped while starting")),
        }
    }

    /// Whether the connection still works.
    pub fn alive(&self) -> bool {
        self.client.ended().borrow().is_none() && !matches!(&*self.ready.borrow(), Some(Err(_)))
    }

    /// How the server counts characters, once ready.
    pub fn encoding(&self) -> Encoding {
        match &*self.ready.borrow() {
            Some(Ok(caps)) => Encoding::of(caps),
            _ => Encoding::Utf16,
        }
    }

    /// `timeout` for `what`, which the server did not answer within `limit`.
    pub fn timed_out(&self, what: &str, limit: Duration) -> FlowError {
        FlowError::new(
            ErrorCode::Timeout,
            format!(
                "language server {} did not answer {what} within {} ms; raise timeoutMs if it is still indexing",
                self.decl.name,
                limit.as_millis()
            ),
        )
        .with("server", self.decl.name.clone())
    }

    /// `command_failed` for a server that died (`why`), with the tail of
    /// what it printed on its standard error.
    pub fn crashed(&self, why: &str) -> FlowError {
        let tail = self.stderr_tail();
        FlowError::new(
            ErrorCode::CommandFailed,
            format!("language server {} failed: {why}", self.decl.name),
        )
        .with("server", self.decl.name.clone())
        .with("stderr", tail)
        .with("restarts", self.starts.saturating_sub(1))
    }

    /// What the server last printed on its standard error.
    pub fn stderr_tail(&self) -> String {
        let bytes = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Sends `path`'s current `text` to the server: opened the first time,
    /// changed (the whole text, a new version) when it differs from what
    /// it has, and saved when `save`. Returns the document as sent.
    pub fn sync(&self, path: &Path, text: &str, save: bool) -> Doc {
        let uri = convert::uri_of(path);
        let mark = *self.client.publishes().borrow();
        let count = self.client.published(&uri).map_or(0, |p| p.count);
        let mut docs = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        let pending = docs.get(path).is_some_and(|d| count <= d.count);
        let doc = match docs.get(path) {
            None => {
                self.client.watch(&uri);
                self.client.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language_id(path), "version": 1, "text": text}}),
                );
                Doc {
                    version: 1,
                    text: text.to_string(),
                    mark,
                    count,
                    pending: false,
                }
            }
            Some(doc) if doc.text == text && !save => return doc.clone(),
            Some(doc) => {
                let version = doc.version + 1;
                self.client.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
                );
                Doc {
                    version,
                    text: text.to_string(),
                    mark,
                    count,
                    pending,
                }
            }
        };
        if save {
            self.client.notify(
                "textDocument/didSave",
                json!({"textDocument": {"uri": uri}, "text": text}),
            );
        }
        docs.insert(path.to_path_buf(), doc.clone());
        doc
    }

    /// Kills the server's processes at once.
    fn kill(&self) {
        drop(
            self.process
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }

    async fn stop(&self) {
        let polite = Duration::from_millis(500);
        if self.alive() && self.ready.borrow().is_some() {
            let _ = self.client.request("shutdown", Value::Null, polite).await;
            self.client.notify("exit", Value::Null);
        }
        let process = self
            .process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = process {
            p.stop(polite, polite).await;
        }
    }
}

/// `initialize`, then `initialized`; what the server answered goes to `tx`.
async fn initialize(
    client: Arc<Client>,
    params: Value,
    tx: watch::Sender<Option<Result<Value, String>>>,
) {
    let answer = match client.request("initialize", params, INITIALIZE_LIMIT).await {
        Ok(result) => {
            client.notify("initialized", json!({}));
            Ok(result["capabilities"].clone())
        }
        Err(Failure::Timeout) => Err(format!(
            "it did not answer initialize within {} s",
            INITIALIZE_LIMIT.as_secs()
        )),
        Err(Failure::Rpc { code, message }) => {
            Err(format!("it refused initialize ({code}): {message}"))
        }
        Err(Failure::Ended(why)) => Err(why),
    };
    tx.send_replace(Some(answer));
}

/// What `initialize` sends: the workspace as root and only folder, the
/// operator's `initializationOptions`, and what this client can take.
fn init_params(ctx: &Context, decl: &Declared) -> Value {
    use lsp_types::{
        CallHierarchyClientCapabilities, ClientCapabilities, DiagnosticClientCapabilities,
        DocumentSymbolClientCapabilities, GeneralClientCapabilities, GotoCapability,
        HoverClientCapabilities, MarkupKind, PositionEncodingKind,
        PublishDiagnosticsClientCapabilities, TextDocumentClientCapabilities,
        TextDocumentSyncClientCapabilities, WindowClientCapabilities, WorkspaceClientCapabilities,
    };
    let goto = Some(GotoCapability {
        dynamic_registration: Some(false),
        link_support: Some(true),
    });
    let capabilities = ClientCapabilities {
        general: Some(GeneralClientCapabilities {
            position_encodings: Some(vec![
                PositionEncodingKind::UTF8,
                PositionEncodingKind::UTF16,
            ]),
            ..Default::default()
        }),
        text_document: Some(TextDocumentClientCapabilities {
            synchronization: Some(TextDocumentSyncClientCapabilities {
                did_save: Some(true),
                ..Default::default()
            }),
            hover: Some(HoverClientCapabilities {
                dynamic_registration: Some(false),
                content_format: Some(vec![MarkupKind::Markdown, MarkupKind::PlainText]),
            }),
            definition: goto,
            implementation: goto,
            references: Some(Default::default()),
            document_symbol: Some(DocumentSymbolClientCapabilities {
                hierarchical_document_symbol_support: Some(true),
                ..Default::default()
            }),
            call_hierarchy: Some(CallHierarchyClientCapabilities {
                dynamic_registration: Some(false),
            }),
            publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                version_support: Some(true),
                ..Default::default()
            }),
            diagnostic: Some(DiagnosticClientCapabilities {
                dynamic_registration: Some(false),
                related_document_support: Some(false),
            }),
            ..Default::default()
        }),
        workspace: Some(WorkspaceClientCapabilities {
            configuration: Some(true),
            workspace_folders: Some(true),
            symbol: Some(Default::default()),
            ..Default::default()
        }),
        window: Some(WindowClientCapabilities {
            work_done_progress: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let root = convert::uri_of(&ctx.workspace);
    let name = ctx
        .workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workspace".into());
    json!({
        // No pid: inside the sandbox's pid namespace sluice's pid names
        // nobody (or another process), and servers that watch their
        // parent's pid (typescript-language-server checks it every few
        // seconds) would exit as orphans. sluice stops them itself.
        "processId": null,
        "clientInfo": {"name": "sluice", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": root,
        "rootPath": ctx.workspace.display().to_string(),
        "workspaceFolders": [{"uri": root, "name": name}],
        "capabilities": serde_json::to_value(capabilities).unwrap_or_default(),
        "initializationOptions": decl.initialization_options.clone().unwrap_or(Value::Null),
    })
}

/// Keeps the last [`STDERR_TAIL`] bytes the server prints.
async fn keep_tail(mut pipe: piped::Reader, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.extend_from_slice(&buf[..n]);
        if t.len() > STDERR_TAIL {
            let cut = t.len() - STDERR_TAIL;
            t.drain(..cut);
        }
    }
}

/// The protocol's language id of a file, by its extension.
fn language_id(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "rs" => "rust",
        "go" => "go",
        "java" => "java",
        "rb" => "ruby",
        "lua" => "lua",
        _ => "plaintext",
    }
}
