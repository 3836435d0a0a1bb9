//! The MCP server's handler: `tools/list` from the catalog, and
//! `tools/call` handed to the run's thread as a request of the run (the
//! one door, the sandbox and the record apply), with its progress relayed,
//! its asks put to the person behind the client, and its cancellation
//! passed on.

use super::asks::{self, ClientAsker, Open, Question, Refused, Suspended, INPUT_KEY};
use super::catalog::{Catalog, Entry};
use super::render;
use crate::kernel::approval::Shared;
use crate::runtime::{Caller, Incoming, Outcome, Tool as Runs};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitResult, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// What the server tells a client about itself.
const INSTRUCTIONS: &str = "Each tool is a sluice flow (or a Lua tool the operator vetted). Every call passes sluice's policy, \
runs commands in its sandbox, and is recorded in its audit log. A refusal is an isError result naming the capability and the rule; \
a call that needs approval asks the person behind this client, when it can ask.";

/// How many bytes of streamed output one call relays as progress: a
/// command's is bounded where it is read; a model's text is bounded here.
const PROGRESS_BYTES: usize = 30_000;

/// The handler every transport serves, one per client session: stdio's
/// one client, each HTTP session of a client that starts with
/// `initialize`, and each request of a 2026 client over HTTP (that
/// protocol has no session).
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
    session: Arc<Session>,
}

struct Inner {
    catalog: Catalog,
    /// The run's thread, where requests run.
    run: mpsc::UnboundedSender<Incoming>,
    /// Calls waiting for a 2026 client's answer.
    suspended: Suspended<Live>,
    /// Whether clients share the run's jobs and answers for the run
    /// (`--shared-run`).
    shared_run: bool,
    /// The open questions of requests that belong to no session (2026
    /// requests over HTTP), counted together.
    sessionless: Arc<Open>,
    /// The plan shared by every client (`--shared-run`, and 2026 requests
    /// over HTTP).
    plan: super::plan::Latest,
}

/// One client, as its jobs and answers for the run belong to it.
struct Session {
    /// An id nobody is given: what its jobs and answers are kept under.
    id: String,
    /// Whether it is one of many over HTTP: then a 2026 request is a
    /// session of its own, whose answers no later request can be told to
    /// share.
    http: bool,
    /// Its open questions.
    open: Arc<Open>,
    /// The latest plan it set (`sluice://plan`).
    plan: super::plan::Latest,
}

impl Session {
    fn new(http: bool) -> Arc<Session> {
        Arc::new(Session {
            id: asks::unguessable(),
            http,
            open: Arc::default(),
            plan: Default::default(),
        })
    }
}

impl Server {
    /// A server offering `catalog`, whose calls run as requests sent to
    /// `run`; with `shared_run`, clients share the run's jobs and answers
    /// for the run. Its one session is stdio's client.
    pub fn new(catalog: Catalog, run: mpsc::UnboundedSender<Incoming>, shared_run: bool) -> Server {
        Server {
            inner: Arc::new(Inner {
                catalog,
                run,
                suspended: Suspended::default(),
                shared_run,
                sessionless: Arc::default(),
                plan: Default::default(),
            }),
            session: Session::new(false),
        }
    }

    /// The handler of a new HTTP session (or 2026 request).
    pub(super) fn fresh(&self) -> Server {
        Server {
            inner: self.inner.clone(),
            session: Session::new(true),
        }
    }

    /// What a request of this session (`modern`: of the 2026 protocol)
    /// owns: the owner of its jobs (`None`: the run's), whose answers for
    /// the run its asks share, and the count of its open questions.
    fn scope(&self, modern: bool) -> (Option<String>, Shared, Arc<Open>) {
        let sessionless = modern && self.session.http;
        let open = match sessionless {
            true => self.inner.sessionless.clone(),
            false => self.session.open.clone(),
        };
        if self.inner.shared_run {
            return (None, Shared::Run, open);
        }
        let shares = match sessionless {
            true => Shared::Nobody,
            false => Shared::Caller(self.session.id.clone()),
        };
        (Some(self.session.id.clone()), shares, open)
    }

    /// Where a request of this session (`modern`: of the 2026 protocol)
    /// keeps and reads its plan: the run's when the run is shared or the
    /// request belongs to no session, else its session's.
    fn plan(&self, modern: bool) -> &super::plan::Latest {
        match self.inner.shared_run || (modern && self.session.http) {
            true => &self.inner.plan,
            false => &self.session.plan,
        }
    }
}

/// A call under way on the run's thread, as its handler follows it.
struct Live {
    runs: Runs,
    progress: mpsc::UnboundedReceiver<String>,
    asks: mpsc::UnboundedReceiver<Question>,
    reply: oneshot::Receiver<Outcome>,
    /// Bytes relayed as progress so far (what each notification counts).
    relayed: usize,
    client: String,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("sluice", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.catalog.tools()))
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            super::plan::resource(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        self.plan(modern).read(&request.uri).map(Into::into)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.catalog.get(name).map(|e| e.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        if let Some(state) = &request.request_state {
            return self.resume(state, &request, &args, ctx).await;
        }
        let Some(entry) = self.inner.catalog.get(&request.name) else {
            let names: Vec<String> = self
                .inner
                .catalog
                .tools()
                .iter()
                .map(|t| t.name.to_string())
                .collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "there is no tool named {:?}; the tools are {}",
                    request.name,
                    names.join(", ")
                ),
                None,
            ));
        };
        let live = self.start(entry, args.clone(), &ctx)?;
        self.follow(live, &request.name, &args, ctx).await
    }
}

impl Server {
    /// Sends the call to the run's thread, with the caller it comes from.
    fn start(
        &self,
        entry: &Entry,
        input: Value,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Live, ErrorData> {
        let client = client(ctx);
        let (progress_tx, progress) = mpsc::unbounded_channel::<String>();
        let (ask_tx, asks) = mpsc::unbounded_channel();
        let (reply_tx, reply) = oneshot::channel();
        let can_ask = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        // A call nobody asked progress of streams nothing: its command's
        // output is not tapped.
        let watched = ctx.meta.get_progress_token().is_some();
        let relay: Option<crate::runtime::Progress> = watched.then(|| {
            Arc::new(move |piece: &str| {
                let _ = progress_tx.send(piece.to_string());
            }) as crate::runtime::Progress
        });
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let (owner, shares, open) = self.scope(modern);
        let caller = Caller {
            client: Some(client.clone()),
            approver: Some(Arc::new(ClientAsker::new(
                can_ask.then_some(ask_tx),
                &client,
                open,
                shares,
            ))),
            progress: relay,
            owner,
            session: Some(self.session.id.clone()),
        };
        let incoming = Incoming {
            tool: entry.runs.clone(),
            input,
            caller,
            reply: reply_tx,
        };
        self.inner.run.send(incoming).map_err(|_| {
            ErrorData::internal_error("the server's run has ended; restart sluice mcp", None)
        })?;
        Ok(Live {
            runs: entry.runs.clone(),
            progress,
            asks,
            reply,
            relayed: 0,
            client,
        })
    }

    /// A 2026 client's next call, carrying the answer to the question a
    /// call waits on.
    async fn resume(
        &self,
        state: &str,
        request: &CallToolRequestParams,
        args: &Value,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A malformed answer is refused before the waiting call is taken:
        // the right one can still follow.
        let reply = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(INPUT_KEY))
            .cloned()
            .map(elicit_result)
            .transpose()
            .map_err(|e| {
                ErrorData::invalid_params(
                    format!("inputResponses.{INPUT_KEY} is not an elicitation result: {e}"),
                    None,
                )
            })?;
        let waiting = self.inner.suspended.take(state, &request.name, args).map_err(|why| {
            let message = match why {
                Refused::Unknown => "requestState names no call waiting for an answer: it was answered already, expired, or never given; call the tool again without it",
                Refused::Mismatch => "requestState was given for another tool or other arguments; send the same call again with the answer",
            };
            ErrorData::invalid_params(message, None)
        })?;
        let answer = match reply {
            Some(reply) => asks::answer(&reply, &waiting.question.ask, &waiting.call.client),
            None => {
                // No answer: the question stands; it is put again.
                let ask = waiting.question.ask.clone();
                let token =
                    self.inner
                        .suspended
                        .park(waiting.call, waiting.question, &request.name, args);
                return Ok(input_required(&ask, token).into());
            }
        };
        let _ = waiting.question.answer.send(answer);
        self.follow(waiting.call, &request.name, args, ctx).await
    }

    /// Follows a call to its end: relays its progress, puts its asks to
    /// the client, and returns its result; a client that cancels drops it,
    /// which cancels the call on the run's thread.
    async fn follow(
        &self,
        mut live: Live,
        tool: &str,
        args: &Value,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let token = ctx.meta.get_progress_token();
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        loop {
            tokio::select! {
                // Progress first: what a command printed is relayed before
                // the result that follows it.
                biased;
                Some(piece) = live.progress.recv() => {
                    if let Some(token) = &token {
                        relay(&ctx, token, &mut live, piece).await;
                    }
                }
                () = ctx.ct.cancelled() => {
                    return Err(ErrorData::invalid_request("the request was cancelled", None));
                }
                outcome = &mut live.reply => {
                    let outcome = outcome.unwrap_or_else(|_| Outcome::Raised("the run ended before the call did".into()));
                    self.plan(modern).note(&live.runs, args, &outcome);
                    if let (Some(token), Ok(piece)) = (&token, live.progress.try_recv()) {
                        relay(&ctx, token, &mut live, piece).await;
                    }
                    return Ok(render::result(&live.runs, outcome).into());
                }
                Some(question) = live.asks.recv() => {
                    if modern {
                        let ask = question.ask.clone();
                        let state = self.inner.suspended.park(live, question, tool, args);
                        return Ok(input_required(&ask, state).into());
                    }
                    // A client that cancels while its person decides ends
                    // the call (dropping the question answers it).
                    let answer = tokio::select! {
                        answer = elicit(&ctx, &question, &live.client) => answer,
                        () = ctx.ct.cancelled() => {
                            return Err(ErrorData::invalid_request("the request was cancelled", None));
                        }
                    };
                    let _ = question.answer.send(answer);
                }
            }
        }
    }
}

/// An elicitation result as the spec shapes it: an action, and a
/// `content` that is an object when present.
fn elicit_result(v: Value) -> Result<ElicitResult, String> {
    if v.get("content")
        .is_some_and(|c| !c.is_object() && !c.is_null())
    {
        return Err("its content is not an object".into());
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// An "input required" result: the question, under [`INPUT_KEY`], and
/// the state to send back with the answer.
fn input_required(ask: &crate::kernel::approval::Ask, state: String) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(
        INPUT_KEY.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(asks::question(ask))),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

/// Asks the person behind a 2025 client with `elicitation/create`.
async fn elicit(
    ctx: &RequestContext<RoleServer>,
    q: &Question,
    client: &str,
) -> crate::kernel::approval::Answer {
    use crate::kernel::approval::Answer;
    match ctx
        .peer
        .create_elicitation_with_timeout(asks::question(&q.ask), Some(asks::ASK_TIMEOUT))
        .await
    {
        Ok(reply) => asks::answer(&reply, &q.ask, client),
        Err(e) => Answer::Unanswered(format!("the client ({client}) could not ask: {e}")),
    }
}

/// Relays a piece of streamed output as a progress notification: its
/// bytes so far count the progress, and past [`PROGRESS_BYTES`] one last
/// notification says the rest is in the result.
async fn relay(
    ctx: &RequestContext<RoleServer>,
    token: &rmcp::model::ProgressToken,
    live: &mut Live,
    mut piece: String,
) {
    while let Ok(more) = live.progress.try_recv() {
        piece.push_str(&more);
    }
    if piece.is_empty() || live.relayed > PROGRESS_BYTES {
        return;
    }
    let room = PROGRESS_BYTES - live.relayed;
    if piece.len() > room {
        let mut cut = room;
        while !piece.is_char_boundary(cut) {
            cut -= 1;
        }
        piece.truncate(cut);
        piece.push_str("\n[progress shows the first 30000 bytes; the result has the output]");
    }
    live.relayed += piece.len().max(1);
    let note =
        ProgressNotificationParam::new(token.clone(), live.relayed as f64).with_message(piece);
    let _ = ctx.peer.notify_progress(note).await;
}

/// The client as the record names it: its name and version, from the
/// request (2026) or the handshake (2025); `unknown client` when it said
/// neither.
fn client(ctx: &RequestContext<RoleServer>) -> String {
    let Some(info) = ctx.client_info() else {
        return "unknown client".into();
    };
    let text = format!("{} {}", info.name, info.version);
    let clean: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    clean.trim().to_string()
}
