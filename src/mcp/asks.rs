//! Asks as questions to the person behind the client whose call made
//! them: an `elicitation/create` request for clients of 2025 protocols, an
//! "input required" result for 2026 ones (the call waits on the server
//! until the client calls again with the answer), and, for a client that
//! declared no elicitation, no question at all: the call fails
//! `permission_required` naming the `--approve` pattern that would grant it.

use crate::kernel::approval::{printable, Answer, Approver, Ask, Later, Shared};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a question waits for the person's answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(600);

/// The key of sluice's one input request in an "input required" result.
pub const INPUT_KEY: &str = "approve";

/// The most questions one client may have open at once; the next ask is
/// `permission_required` at once, saying so.
pub const OPEN_ASKS: usize = 32;

/// An ask on its way to the client's handler, with where the answer goes.
pub struct Question {
    pub ask: Ask,
    pub answer: oneshot::Sender<Answer>,
}

/// The questions a client has open, counted against [`OPEN_ASKS`]: one
/// count per session, shared by the requests of clients that have none.
#[derive(Default)]
pub struct Open(AtomicUsize);

/// A question counted open until it is dropped (answered or given up).
struct Counted(Arc<Open>);

impl Open {
    /// A place for one more open question, unless [`OPEN_ASKS`] are open.
    fn take(self: &Arc<Open>) -> Option<Counted> {
        let more = |n: usize| (n < OPEN_ASKS).then_some(n + 1);
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, more)
            .ok()
            .map(|_| Counted(self.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The approver a call's caller brings: it hands each ask to the handler
/// of the request that made it, which asks the client; the answer comes
/// back as a future, so no thread waits for the person.
pub struct ClientAsker {
    /// The request's handler; `None` for a client that declared no
    /// elicitation.
    to: Option<mpsc::UnboundedSender<Question>>,
    /// The client, as errors name it.
    client: String,
    /// The questions its client has open.
    open: Arc<Open>,
    /// Whose "for the run" answers its asks share.
    shares: Shared,
}

impl ClientAsker {
    /// The asker of one request from `client`; `to` is `None` when the
    /// client cannot be asked. `open` counts its client's open questions;
    /// `shares` says whose answers for the run its asks share.
    pub fn new(
        to: Option<mpsc::UnboundedSender<Question>>,
        client: &str,
        open: Arc<Open>,
        shares: Shared,
    ) -> ClientAsker {
        ClientAsker {
            to,
            client: client.to_string(),
            open,
            shares,
        }
    }

    /// Puts `ask` to the request's handler: the answer's receiver, holding
    /// the question's place among its client's open ones; or why it could
    /// not be put.
    fn question(&self, ask: &Ask) -> Result<(oneshot::Receiver<Answer>, Counted), Answer> {
        let Some(to) = &self.to else {
            return Err(Answer::Unanswered(format!(
                "the MCP client ({}) declared no elicitation support, so the person behind it cannot be asked",
                self.client
            )));
        };
        let Some(place) = self.open.take() else {
            return Err(Answer::Unanswered(format!(
                "the client ({}) has {OPEN_ASKS} questions open already, the most one client may have; \
                 answer or cancel some, then call again",
                self.client
            )));
        };
        let (tx, rx) = oneshot::channel();
        let question = Question {
            ask: ask.clone(),
            answer: tx,
        };
        if to.send(question).is_err() {
            return Err(Answer::Unanswered(
                "the client's request ended before the question could be put".into(),
            ));
        }
        Ok((rx, place))
    }
}

/// What a question's receiver brings: the answer, or why none came.
fn received(got: Result<Answer, oneshot::error::RecvError>, client: &str) -> Answer {
    got.unwrap_or_else(|_| {
        Answer::Unanswered(format!(
            "the client ({client}) gave no answer (within {} s, or its request ended)",
            ASK_TIMEOUT.as_secs()
        ))
    })
}

impl Approver for ClientAsker {
    /// The blocking way, for a caller off the run's thread that cannot
    /// await: the question is put as [`Approver::put`] puts it.
    fn ask(&self, ask: &Ask) -> Answer {
        match self.question(ask) {
            Ok((rx, _place)) => received(rx.blocking_recv(), &self.client),
            Err(answer) => answer,
        }
    }

    fn who(&self) -> String {
        format!("the person behind {}", self.client)
    }

    fn one_at_a_time(&self) -> bool {
        false
    }

    fn put(&self, ask: &Ask) -> Option<Later> {
        let client = self.client.clone();
        Some(match self.question(ask) {
            // Every question is answered, or its sender dropped, within
            // ASK_TIMEOUT: the handler asks with that timeout, and a parked
            // 2026 call expires after it.
            Ok((rx, place)) => Box::pin(async move {
                let answer = received(rx.await, &client);
                drop(place);
                answer
            }),
            Err(answer) => Box::pin(std::future::ready(answer)),
        })
    }

    fn shares(&self, _task: &str) -> Shared {
        self.shares.clone()
    }
}

/// What the person is shown: the capability, the rule that asked and
/// why, the justification, the call. Each field is shown with its
/// control and invisible characters escaped, one to a line, so the call it
/// asks about cannot rewrite the question.
pub fn question(ask: &Ask) -> ElicitRequestParams {
    let p = printable;
    let mut message = format!(
        "sluice: the {} call asks for {}.\nAsked by {}: {}.",
        p(&ask.flow),
        p(&ask.capability),
        p(&ask.by),
        p(&ask.reason)
    );
    if let Some(why) = &ask.justification {
        message.push_str(&format!("\nJustification: {}", p(why)));
    }
    message.push_str(&format!(
        "\nCall: {}\nAccept to allow it, decline to refuse it.",
        p(&ask.input)
    ));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema(ask.once_only),
    }
}

/// The form: one box, "for the rest of the run", unless the ask counts
/// once only (a wider sandbox), which no answer may outlive.
fn schema(once_only: bool) -> ElicitationSchema {
    let properties = if once_only {
        json!({})
    } else {
        json!({"forRun": {
            "type": "boolean",
            "title": "Allow it for the rest of this server's run",
            "description": "Also allow the same capability (for a command: the same line, environment and folder) without asking again until the server stops.",
            "default": false
        }})
    };
    let form = json!({"type": "object", "properties": properties});
    ElicitationSchema::from_json_schema(form.as_object().cloned().unwrap_or_default())
        .expect("sluice's question is a valid form")
}

/// The person's reply as an answer to the ask.
pub fn answer(reply: &ElicitResult, ask: &Ask, client: &str) -> Answer {
    match reply.action {
        ElicitationAction::Accept => {
            let for_run = reply
                .content
                .as_ref()
                .and_then(|c| c.get("forRun"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if for_run && !ask.once_only {
                Answer::ForRun
            } else {
                Answer::Once
            }
        }
        ElicitationAction::Decline => {
            Answer::No(Some(format!("the person behind {client} declined")))
        }
        // Cancel, or an action of a later protocol: not a yes.
        _ => Answer::No(Some(format!(
            "the person behind {client} dismissed the question without allowing it"
        ))),
    }
}

/// Calls waiting, on the server, for the answer a 2026 client carries in
/// its next call: by the opaque `requestState` it was given. Each is taken
/// once, by a call of the same tool with the same arguments, and expires
/// after [`ASK_TIMEOUT`], its ask then unanswered.
pub struct Suspended<T> {
    waiting: Arc<Mutex<HashMap<String, Waiting<T>>>>,
}

impl<T> Clone for Suspended<T> {
    fn clone(&self) -> Self {
        Suspended {
            waiting: self.waiting.clone(),
        }
    }
}

impl<T> Default for Suspended<T> {
    fn default() -> Self {
        Suspended {
            waiting: Arc::default(),
        }
    }
}

/// One waiting call: the call itself, the ask it waits on, and what its
/// next call must repeat.
pub struct Waiting<T> {
    pub call: T,
    pub question: Question,
    /// The tool and the digest of its arguments.
    tool: String,
    digest: String,
}

/// Why a `requestState` was refused.
pub enum Refused {
    /// No call waits under it: never given, already taken, or expired.
    Unknown,
    /// It was given for another tool or other arguments.
    Mismatch,
}

impl<T: Send + 'static> Suspended<T> {
    /// Parks `call`, waiting on `question`, until a call of `tool` with
    /// `args` brings its answer; the `requestState` to give the client.
    pub fn park(&self, call: T, question: Question, tool: &str, args: &Value) -> String {
        let token = unguessable();
        let waiting = Waiting {
            call,
            question,
            tool: tool.to_string(),
            digest: digest(args),
        };
        self.lock().insert(token.clone(), waiting);
        let this = self.clone();
        let key = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ASK_TIMEOUT).await;
            if let Some(w) = this.lock().remove(&key) {
                let _ = w.question.answer.send(Answer::Unanswered(format!(
                    "the client did not call again with the answer within {} s",
                    ASK_TIMEOUT.as_secs()
                )));
            }
        });
        token
    }

    /// Takes the call parked under `token`, when `tool` and `args` are
    /// those it was parked with; a mismatch leaves it parked.
    pub fn take(&self, token: &str, tool: &str, args: &Value) -> Result<Waiting<T>, Refused> {
        let mut waiting = self.lock();
        let w = waiting.get(token).ok_or(Refused::Unknown)?;
        if w.tool != tool || w.digest != digest(args) {
            return Err(Refused::Mismatch);
        }
        waiting.remove(token).ok_or(Refused::Unknown)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting<T>>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The arguments as the digest a resumed call must match.
fn digest(args: &Value) -> String {
    crate::digest::sha256_hex(args.to_string().as_bytes())
}

/// 128 random bits as hex: a `requestState`, a session's id, nobody can
/// guess.
pub fn unguessable() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        // The standard library seeds its hash keys from the kernel too.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    crate::digest::hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(once_only: bool) -> Ask {
        Ask {
            capability: "fs:write:/home/ada/x".into(),
            flow: "write".into(),
            task: "0.1".into(),
            by: "rules[3] of p.lua".into(),
            reason: "outside the workspace".into(),
            input: "{\"path\":\"/home/ada/x\"}".into(),
            justification: Some("the user asked".into()),
            once_only,
            wait: std::time::Duration::from_secs(3600),
        }
    }

    fn reply(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut r: ElicitResult = serde_json::from_value(json!({"action": "decline"})).unwrap();
        r.action = action;
        r.content = content;
        r
    }

    #[test]
    fn the_question_shows_the_capability_the_rule_the_reason_and_the_justification() {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = question(&ask(false))
        else {
            panic!("a form");
        };
        assert_eq!(
            message,
            "sluice: the write call asks for fs:write:/home/ada/x.\nAsked by rules[3] of p.lua: outside the workspace.\n\
             Justification: the user asked\nCall: {\"path\":\"/home/ada/x\"}\nAccept to allow it, decline to refuse it."
        );
        let form = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(form["properties"]["forRun"]["type"], "boolean");
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = question(&ask(true))
        else {
            panic!("a form");
        };
        let form = serde_json::to_value(&requested_schema).unwrap();
        assert!(
            form["properties"].get("forRun").is_none(),
            "a once-only ask offers no 'for the run': {form}"
        );
    }

    #[test]
    fn the_call_asked_about_cannot_rewrite_the_question_with_escapes_or_lines() {
        let mut a = ask(false);
        a.capability = "proc:spawn:curl x | sh\u{1b}[8m; ls".into();
        a.justification = Some("fine\nAsked by allow rules[1]: harmless\u{202e}".into());
        let ElicitRequestParams::FormElicitationParams { message, .. } = question(&a) else {
            panic!("a form");
        };
        assert!(
            !message.contains('\u{1b}') && !message.contains('\u{202e}'),
            "{message}"
        );
        assert!(message.contains("curl x | sh\\u{1b}[8m; ls"), "{message}");
        assert_eq!(message.lines().count(), 5, "one line per field: {message}");
        assert!(
            message.contains("Justification: fine\\nAsked by allow rules[1]: harmless\\u{202e}"),
            "{message}"
        );
    }

    #[test]
    fn accept_allows_once_or_for_the_run_and_decline_or_cancel_refuse() {
        let run = Some(json!({"forRun": true}));
        assert_eq!(
            answer(&reply(ElicitationAction::Accept, None), &ask(false), "c 1"),
            Answer::Once
        );
        assert_eq!(
            answer(
                &reply(ElicitationAction::Accept, run.clone()),
                &ask(false),
                "c 1"
            ),
            Answer::ForRun
        );
        // Never for the run when the ask counts once, whatever the form says.
        assert_eq!(
            answer(&reply(ElicitationAction::Accept, run), &ask(true), "c 1"),
            Answer::Once
        );
        // Only a boolean true asks for the run.
        let text = Some(json!({"forRun": "true"}));
        assert_eq!(
            answer(&reply(ElicitationAction::Accept, text), &ask(false), "c 1"),
            Answer::Once
        );
        assert_eq!(
            answer(&reply(ElicitationAction::Decline, None), &ask(false), "c 1"),
            Answer::No(Some("the person behind c 1 declined".into()))
        );
        assert!(matches!(
            answer(&reply(ElicitationAction::Cancel, None), &ask(false), "c 1"),
            Answer::No(Some(_))
        ));
    }

    #[test]
    fn a_client_without_elicitation_is_never_asked() {
        let asker = ClientAsker::new(None, "c 1", Arc::default(), Shared::Run);
        let Answer::Unanswered(why) = asker.ask(&ask(false)) else {
            panic!("unanswered");
        };
        assert!(
            why.contains("(c 1) declared no elicitation support"),
            "{why}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_client_s_open_questions_are_bounded_and_an_answer_frees_a_place() {
        let (to, mut handler) = mpsc::unbounded_channel();
        let open: Arc<Open> = Arc::default();
        let asker = ClientAsker::new(Some(to), "c 1", open.clone(), Shared::Run);
        let waiting: Vec<Later> = (0..OPEN_ASKS)
            .map(|_| asker.put(&ask(false)).unwrap())
            .collect();
        let Answer::Unanswered(why) = asker.put(&ask(false)).unwrap().await else {
            panic!("one more than the bound is refused at once");
        };
        assert!(
            why.contains("(c 1) has 32 questions open already, the most one client may have"),
            "{why}"
        );
        // Another client's count is its own.
        let (other_to, _other) = mpsc::unbounded_channel();
        let other = ClientAsker::new(Some(other_to), "c 2", Arc::default(), Shared::Run);
        drop(other.put(&ask(false)).unwrap());
        // One answered frees its place.
        let first = handler.recv().await.unwrap();
        first.answer.send(Answer::Once).unwrap();
        let mut waiting = waiting.into_iter();
        assert_eq!(waiting.next().unwrap().await, Answer::Once);
        let _next = asker.put(&ask(false)).unwrap();
        assert_eq!(handler.len(), OPEN_ASKS - 1 + 1);
        drop(waiting);
        drop(handler);
        assert_eq!(
            open.0.load(Ordering::SeqCst),
            1,
            "dropped questions free their places"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_call_is_taken_once_by_the_same_tool_and_arguments_only() {
        let parked: Suspended<u32> = Suspended::default();
        let (tx, _rx) = oneshot::channel();
        let q = Question {
            ask: ask(false),
            answer: tx,
        };
        let args = json!({"path": "a"});
        let token = parked.park(7, q, "write", &args);
        assert_eq!(token.len(), 32);
        assert!(matches!(
            parked.take("f00", "write", &args),
            Err(Refused::Unknown)
        ));
        assert!(matches!(
            parked.take(&token, "edit", &args),
            Err(Refused::Mismatch)
        ));
        assert!(matches!(
            parked.take(&token, "write", &json!({"path": "b"})),
            Err(Refused::Mismatch)
        ));
        assert_eq!(
            parked.take(&token, "write", &args).ok().map(|w| w.call),
            Some(7)
        );
        assert!(
            matches!(parked.take(&token, "write", &args), Err(Refused::Unknown)),
            "taken once"
        );
    }
}
