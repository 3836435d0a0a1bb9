//! JSON-RPC with one language server: requests and their replies,
//! notifications both ways, and the server's own requests answered as
//! little as the protocol allows. A reader task takes every frame the
//! server sends; a writer task sends ours in order. What the server
//! publishes is kept only for the documents sluice opened, so a server
//! flooding diagnostics for other files holds nothing here.

use super::frame::{self, FrameError};
use crate::exec::piped::{Reader, Writer};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No reply within the time given (the request was cancelled).
    Timeout,
    /// The server answered with an error.
    Rpc { code: i64, message: String },
    /// The connection ended (the server exited, closed its output, or
    /// broke the framing): why.
    Ended(String),
}

/// The diagnostics a server last published for one document.
#[derive(Debug, Clone)]
pub struct Publish {
    /// The publish's place among every publish of this connection.
    pub seq: u64,
    /// How many publishes for this document came, this one included.
    pub count: u64,
    /// The document version it is for, when the server says.
    pub version: Option<i64>,
    pub diagnostics: Vec<Value>,
}

type Reply = Result<Value, Failure>;

struct Shared {
    pending: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    published: Mutex<HashMap<String, Publish>>,
    /// The documents whose publishes are kept.
    watched: Mutex<HashSet<String>>,
    /// Bumped on each publish kept: its `seq`.
    changed: watch::Sender<u64>,
    /// Why the connection ended, once it has.
    ended: watch::Sender<Option<String>>,
    /// What `workspace/configuration` answers.
    settings: Option<Value>,
    /// Bytes handed to the writer and not yet written: a server that
    /// stops reading its input must not make sluice hold its replies
    /// without end.
    unwritten: AtomicUsize,
}

/// The most bytes waiting for a server to read them before the connection
/// is given up ("the server stopped reading its input").
pub const MAX_UNWRITTEN: usize = 16 << 20;

/// One connection to a server.
pub struct Client {
    out: mpsc::UnboundedSender<Vec<u8>>,
    next: AtomicI64,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}

impl Client {
    /// Talks to a server over its `stdin` and `stdout`; `settings` answer
    /// its configuration requests.
    pub fn start(stdin: Writer, stdout: Reader, settings: Option<Value>) -> Client {
        let (out, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            pending: Mutex::default(),
            published: Mutex::default(),
            watched: Mutex::default(),
            changed: watch::Sender::new(0),
            ended: watch::Sender::new(None),
            settings,
            unwritten: AtomicUsize::new(0),
        });
        tokio::spawn(write_all(stdin, rx, shared.clone()));
        tokio::spawn(read_all(stdout, shared.clone(), out.clone()));
        Client {
            out,
            next: AtomicI64::new(1),
            shared,
        }
    }

    /// Sends request `method` and waits up to `timeout` for its result; a
    /// timeout cancels it (`$/cancelRequest`).
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Reply {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        if let Some(why) = self.shared.ended.borrow().clone() {
            lock(&self.shared.pending).remove(&id);
            return Err(Failure::Ended(why));
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(Failure::Ended(self.why_ended())),
            Err(_) => {
                lock(&self.shared.pending).remove(&id);
                self.notify("$/cancelRequest", json!({"id": id}));
                Err(Failure::Timeout)
            }
        }
    }

    /// Sends notification `method`.
    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn send(&self, message: Value) {
        queue(&self.shared, &self.out, message.to_string().into_bytes());
    }

    /// Keeps what the server publishes for document `uri` from now on.
    pub fn watch(&self, uri: &str) {
        lock(&self.shared.watched).insert(super::convert::uri_key(uri));
    }

    /// What the server last published for `uri`, if it was watched then.
    pub fn published(&self, uri: &str) -> Option<Publish> {
        lock(&self.shared.published)
            .get(&super::convert::uri_key(uri))
            .cloned()
    }

    /// The `seq` of the last publish kept; changes as publishes come.
    pub fn publishes(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    /// Changes to `Some(why)` when the connection ends.
    pub fn ended(&self) -> watch::Receiver<Option<String>> {
        self.shared.ended.subscribe()
    }

    fn why_ended(&self) -> String {
        self.shared
            .ended
            .borrow()
            .clone()
            .unwrap_or_else(|| "the connection ended".into())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hands `body` to the writer, unless the server has left more than
/// [`MAX_UNWRITTEN`] bytes unread: then the connection ends, and every
/// call waiting on it fails saying so.
fn queue(shared: &Shared, out: &mpsc::UnboundedSender<Vec<u8>>, body: Vec<u8>) {
    if shared.ended.borrow().is_some() {
        return;
    }
    let waiting = shared.unwritten.fetch_add(body.len(), Ordering::Relaxed) + body.len();
    if waiting > MAX_UNWRITTEN {
        end(
            shared,
            format!(
                "the server stopped reading its input ({waiting} bytes waited to be written to it)"
            ),
        );
        return;
    }
    let _ = out.send(body);
}

/// Ends the connection for `why`: calls waiting on it fail with it.
fn end(shared: &Shared, why: String) {
    if shared.ended.borrow().is_some() {
        return;
    }
    shared.ended.send_replace(Some(why.clone()));
    for (_, tx) in lock(&shared.pending).drain() {
        let _ = tx.send(Err(Failure::Ended(why.clone())));
    }
}

async fn write_all(
    mut stdin: Writer,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    while let Some(body) = rx.recv().await {
        if frame::write(&mut stdin, &body).await.is_err() {
            return;
        }
        shared.unwritten.fetch_sub(body.len(), Ordering::Relaxed);
        if shared.ended.borrow().is_some() {
            return;
        }
    }
}

async fn read_all(stdout: Reader, shared: Arc<Shared>, out: mpsc::UnboundedSender<Vec<u8>>) {
    let mut r = tokio::io::BufReader::with_capacity(64 << 10, stdout);
    let why = loop {
        match frame::read(&mut r).await {
            Ok(body) => match serde_json::from_slice::<Value>(&body) {
                Ok(message) => {
                    take(&shared, &out, message);
                    // Given up while answering it (the server stopped
                    // reading): nothing more of it is read.
                    if shared.ended.borrow().is_some() {
                        return;
                    }
                }
                Err(e) => break format!("the server sent a frame that is not JSON: {e}"),
            },
            Err(FrameError::Closed) => break FrameError::Closed.to_string(),
            Err(e) => break e.to_string(),
        }
    };
    end(&shared, why);
}

/// Handles one message from the server.
fn take(shared: &Shared, out: &mpsc::UnboundedSender<Vec<u8>>, message: Value) {
    let id = message.get("id").cloned();
    match (message.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => {
            let reply = answer(shared, method, &message["params"]);
            let body = match reply {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(message) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": message}})
                }
            };
            queue(shared, out, body.to_string().into_bytes());
        }
        (Some("textDocument/publishDiagnostics"), None) => publish(shared, &message["params"]),
        (Some(_), None) => {}
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let Some(tx) = lock(&shared.pending).remove(&id) else {
                return;
            };
            let reply = match message.get("error") {
                Some(e) => Err(Failure::Rpc {
                    code: e["code"].as_i64().unwrap_or(0),
                    message: e["message"].as_str().unwrap_or_default().to_string(),
                }),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = tx.send(reply);
        }
        (None, None) => {}
    }
}

/// The least a client may answer to the server's requests.
fn answer(shared: &Shared, method: &str, params: &Value) -> Result<Value, String> {
    match method {
        "workspace/configuration" => {
            let items = params["items"].as_array().cloned().unwrap_or_default();
            Ok(Value::Array(
                items
                    .iter()
                    .map(|item| section(shared.settings.as_ref(), item["section"].as_str()))
                    .collect(),
            ))
        }
        "window/workDoneProgress/create"
        | "client/registerCapability"
        | "client/unregisterCapability"
        | "window/showMessageRequest"
        | "workspace/diagnostic/refresh"
        | "workspace/semanticTokens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/codeLens/refresh" => Ok(Value::Null),
        "workspace/workspaceFolders" => Ok(Value::Null),
        "workspace/applyEdit" => {
            Ok(json!({"applied": false, "failureReason": "sluice applies no server edits"}))
        }
        _ => Err(format!("sluice does not answer {method}")),
    }
}

/// The part of `settings` a configuration item asks for (`a.b` walks
/// into tables); null when there is none.
fn section(settings: Option<&Value>, name: Option<&str>) -> Value {
    let Some(mut at) = settings else {
        return Value::Null;
    };
    for part in name
        .unwrap_or_default()
        .split('.')
        .filter(|p| !p.is_empty())
    {
        match at.get(part) {
            Some(v) => at = v,
            None => return Value::Null,
        }
    }
    at.clone()
}

fn publish(shared: &Shared, params: &Value) {
    let Some(uri) = params["uri"].as_str() else {
        return;
    };
    // Servers spell a URI their own way (case, escapes): it is known by
    // the path it names.
    let uri = super::convert::uri_key(uri);
    if !lock(&shared.watched).contains(&uri) {
        return;
    }
    let diagnostics = params["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let seq = *shared.changed.borrow() + 1;
    let mut published = lock(&shared.published);
    let count = published.get(&uri).map_or(0, |p| p.count) + 1;
    published.insert(
        uri,
        Publish {
            seq,
            count,
            version: params["version"].as_i64(),
            diagnostics,
        },
    );
    drop(published);
    shared.changed.send_replace(seq);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_answers_the_section_asked_for() {
        let s = json!({"python": {"analysis": {"mode": "strict"}}});
        assert_eq!(
            section(Some(&s), Some("python.analysis")),
            json!({"mode": "strict"})
        );
        assert_eq!(section(Some(&s), Some("other")), Value::Null);
        assert_eq!(section(Some(&s), None), s);
        assert_eq!(section(None, Some("python")), Value::Null);
    }
}
