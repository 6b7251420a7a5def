//! The bridge's routing tables (SPEC §13): request ids and progress tokens
//! rewritten between many HTTP clients and the one child, server-to-client
//! messages sent back to the exchange that caused them, list-changed
//! notifications fanned out to every listener. Pure data, no I/O: the
//! BridgeActor feeds it messages and carries out what it returns.

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use std::sync::{Arc, LazyLock};

use xy_core::firewall::Kind;

use super::mrtr::{self, Ask, Seal};
use super::raw;

use super::tasks::Tasks;
use crate::mcp::meta::{META_SUBSCRIPTION, unguessable};
use crate::mcp::record::{CallStart, Recorder};
use crate::mcp::verdicts::Verdicts;
use xy_core::protocol::mcp::CallOutcome;

pub(crate) mod exchanges;
pub(crate) mod log;
mod notify;
pub(crate) mod outbox;

use exchanges::{Asks, Relay, Waiting};
use log::Log;
use notify::Listener;

// Built once: `memmem::find` builds a searcher on every call, and these
// run on every answer line.
static INPUT_REQUIRED: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b"\"input_required\""));
static TASK_ID: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b"\"taskId\""));

/// The child's requests to clients that may wait for an answer at once.
const MAX_ASKING: usize = 1024;

/// `notifications/cancelled` for the child's request `id`.
fn cancelled(id: u64, reason: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason}})
}

/// A JSON-RPC error answer to `id`.
pub(crate) fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// Where messages for one HTTP exchange (a POST's response, a GET or
/// `subscriptions/listen` stream) go, within its bounds. Closing it ends
/// the HTTP response.
pub(crate) use outbox::Outbox;

/// One message for an HTTP exchange.
#[derive(Debug)]
pub(crate) enum Out {
    Msg(Value),
    /// The child's answer to a request as the bytes it wrote, the client's
    /// id in place (the fast path, D49).
    Answer(Bytes),
    /// A notification or a request to the client, its bytes counted in
    /// its queue's budget ([`outbox`]); `changed`: the `list_changed` kind
    /// it is.
    Note {
        bytes: Bytes,
        changed: Option<usize>,
    },
}

impl From<Value> for Out {
    fn from(v: Value) -> Out {
        Out::Msg(v)
    }
}

impl Out {
    /// An answer (ends a POST's exchange), not a request or notification.
    pub(crate) fn is_response(&self) -> bool {
        match self {
            Out::Msg(v) => v.get("method").is_none(),
            Out::Answer(_) => true,
            Out::Note { .. } => false,
        }
    }

    /// The message as JSON text.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            // A `Value` always serialises (and not through `Display`: D49).
            Out::Msg(v) => Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
            Out::Answer(b) | Out::Note { bytes: b, .. } => b,
        }
    }
}

/// How the child's answer to a forwarded request reaches the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// As the child sent it (only the id restored).
    AsIs,
    /// A 2026-era client served by a 2025-era child: a result gains
    /// `resultType: "complete"` (2026 results carry it) and, for the
    /// cacheable methods ([`super::era::cacheable`]), the `ttlMs: 0` /
    /// `cacheScope: "private"` freshness hints 2026 requires there (the
    /// child said nothing about caching: immediately stale, not shared).
    Complete {
        /// The request's method is one of the cacheable ones.
        cacheable: bool,
    },
    /// A success is replaced by this result (xy answered for the child,
    /// after checking the child answers at all); an error passes.
    Replace(Value),
    /// A 2025-era client served by a 2026-only child: a complete result
    /// loses the 2026 envelope (`resultType`, `ttlMs`, `cacheScope`), which
    /// the client's era does not have (SPEC §27: the same value apart from
    /// the era's envelope). A task's or an input request's result keeps it.
    Bare,
}

/// A request forwarded to the child.
struct Pending {
    /// What to do with the answer.
    answer: Answer,
    /// The id the client used, restored in the answer.
    client_id: Value,
    /// The client's progress token and the one the child saw.
    token: Option<(Value, String)>,
    /// The 2025 session it came in on, if any.
    session: Option<String>,
    /// Where its answer and its request-scoped messages go.
    outbox: Outbox,
    /// A `tools/call`: recorded when it ends (SPEC §20).
    call: Option<Box<CallStart>>,
    /// A `tools/list` or `prompts/list`: its result loses the held-back
    /// items (SPEC §20).
    filter: Option<Kind>,
    /// The client's capabilities, when known: what the child may ask it.
    caps: Option<Arc<Value>>,
    /// How the child's questions reach the client.
    asks: Asks,
    /// Which of the child's log messages during it reach its client.
    log: Log,
    /// The child asked this 2026 client for roots it did not declare, and
    /// only the child was told no (servers also ask unprompted): if the
    /// request then fails, it fails with `-32021` naming this (SPEC §24).
    lacked: Option<Value>,
}

/// A request the child sent to a client.
struct ServerRequest {
    /// The id the child used.
    child_id: Value,
    /// The 2025 session of the exchange it was sent to (`None`: a
    /// sessionless 2026 exchange, where the unguessable id is the proof).
    session: Option<String>,
    /// One of a 2026 child's input requests relayed to a 2025 client: the
    /// relay (the child-side id of the request it answers) and its key.
    relay: Option<(u64, String)>,
}

/// A client's answer to a server-to-client request that was sent to
/// another client.
#[derive(Debug, PartialEq)]
pub(crate) struct NotYours;

/// Something to do with a message from the child.
#[derive(Debug, PartialEq)]
pub(crate) enum ChildAction {
    /// Nothing (dropped: unknown id, closed client).
    Nothing,
    /// Messages for the child (an error answer to its request, a
    /// cancellation).
    ToChild(Vec<Value>),
    /// The child asked the client of forwarded request `id` something over
    /// MRTR: gather its questions for [`mrtr::GATHER`], then
    /// [`Router::ask`].
    Gather(u64),
}

/// Where a child's request to a client goes.
enum Cause {
    /// The client of forwarded request (child-side id) `.0`.
    Request(u64),
    /// The request of MRTR exchange `.0`, waiting for its client's retry.
    Waiting(String),
    /// A 2025 session's GET stream.
    Stream(Outbox, Option<String>),
}

/// The tables.
#[derive(Default)]
pub(crate) struct Router {
    next_id: u64,
    next_token: u64,
    next_listener: u64,
    pending: HashMap<u64, Pending>,
    /// Child-side progress token → child-side request id.
    tokens: HashMap<String, u64>,
    /// xy's id for a server-to-client request → the child's id.
    s2c: HashMap<String, ServerRequest>,
    listeners: HashMap<u64, Listener>,
    /// Where calls are recorded (`None`: not at all, unit tests).
    pub(crate) recorder: Option<Recorder>,
    /// The firewall's verdicts answers are filtered with (the bridge keeps
    /// them current).
    pub(crate) firewall: Arc<Verdicts>,
    /// Seals the `requestState`s xy issues.
    seal: Seal,
    /// The child's questions being gathered, by the child-side id of the
    /// request they belong to.
    gathering: HashMap<u64, Vec<Ask>>,
    /// Requests waiting for their client's MRTR retry, by exchange id.
    waiting: HashMap<String, Waiting>,
    /// A 2026 child's input requests out with 2025 clients, by the
    /// child-side id of the request.
    relays: HashMap<u64, Relay>,
    /// The child's tasks seen passing.
    pub(crate) tasks: Tasks,
    /// A listing answer held an item xy's own listing does not have (a
    /// child that changed without `list_changed`): xy lists again, so that
    /// what it held back can be approved by name (SPEC §24).
    pub(crate) relist: bool,
}

impl Router {
    /// Empty tables, answers filtered with `firewall`.
    pub(crate) fn with_firewall(firewall: Arc<Verdicts>) -> Router {
        Router {
            firewall,
            ..Router::default()
        }
    }

    /// Marks forwarded request `id` as a listing whose answer is filtered.
    pub(crate) fn filter(&mut self, id: u64, kind: Kind) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.filter = Some(kind);
        }
    }

    /// Marks the forwarded request `id` as a call to record when it ends.
    pub(crate) fn track(&mut self, id: u64, call: CallStart) {
        if self.recorder.is_some()
            && let Some(p) = self.pending.get_mut(&id)
        {
            p.call = Some(Box::new(call));
        }
    }

    /// Records the end of a tracked call.
    fn ended(&self, p: &Pending, outcome: CallOutcome) {
        if let (Some(call), Some(r)) = (&p.call, &self.recorder) {
            r.finish(call, outcome);
        }
    }

    /// Says what forwarded request `id`'s client declared it can be asked
    /// (`caps`; `None`: unknown) and how the child's questions reach it.
    pub(crate) fn set_asks(&mut self, id: u64, caps: Option<Arc<Value>>, asks: Asks) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.caps = caps;
            p.asks = asks;
        }
    }

    /// Says which of the child's log messages during forwarded request
    /// `id` reach its client.
    pub(crate) fn set_log(&mut self, id: u64, log: Log) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.log = log;
        }
    }

    /// Number of requests waiting for the child (or for their client's
    /// answers to the child's questions: the child holds their state).
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len() + self.waiting.len() + self.relays.len()
    }

    /// Number of open broadcast streams.
    pub(crate) fn streams(&self) -> usize {
        self.listeners.len()
    }

    /// A fresh id for a request xy itself sends (the handshake); never
    /// used by a forwarded request.
    pub(crate) fn own_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Rewrites a client request for the child: a fresh id and, if it asks
    /// for progress, a fresh token. Returns the message to write.
    pub(crate) fn forward(
        &mut self,
        mut msg: Value,
        session: Option<String>,
        outbox: Outbox,
        answer: Answer,
    ) -> Value {
        let id = self.own_id();
        let client_id = std::mem::replace(&mut msg["id"], json!(id));
        let mut token = None;
        if let Some(meta) = msg
            .get_mut("params")
            .and_then(|p| p.get_mut("_meta"))
            .and_then(Value::as_object_mut)
            && let Some(original) = meta.get("progressToken").cloned()
        {
            self.next_token += 1;
            let ours = format!("xy-{}", self.next_token);
            meta.insert("progressToken".into(), json!(ours));
            self.tokens.insert(ours.clone(), id);
            token = Some((original, ours));
        }
        self.pending.insert(
            id,
            Pending {
                answer,
                client_id,
                token,
                session,
                outbox,
                call: None,
                filter: None,
                caps: None,
                asks: Asks::Direct,
                log: Log::Session,
                lacked: None,
            },
        );
        msg
    }

    /// Registers a request forwarded as its own bytes ([`raw::RawRequest`]:
    /// no progress token, its answer as is); returns the child-side id.
    pub(crate) fn forward_raw(
        &mut self,
        client_id: Value,
        session: Option<String>,
        outbox: Outbox,
    ) -> u64 {
        let id = self.own_id();
        self.pending.insert(
            id,
            Pending {
                answer: Answer::AsIs,
                client_id,
                token: None,
                session,
                outbox,
                call: None,
                filter: None,
                caps: None,
                asks: Asks::Direct,
                log: Log::Session,
                lacked: None,
            },
        );
        id
    }

    /// The fast path for the child's answer `line` to forwarded request
    /// `id` (its id at `at`): sent on as bytes with the client's id, when
    /// the answer goes as is. `false`: the `Value` path must route it
    /// (xy's own request, a translated answer, an unknown id).
    pub(crate) fn answer_raw(
        &mut self,
        id: u64,
        line: &[u8],
        at: &Range<usize>,
        said: raw::Said,
    ) -> bool {
        if self.pending.get(&id).is_none_or(|p| {
            p.answer != Answer::AsIs
                // A failure may become `-32021` (see `finish`).
                || p.lacked.is_some()
                // A 2026 child's `InputRequiredResult` for a 2025 client
                // becomes requests to it (D113), never its answer.
                || (matches!(p.asks, Asks::Relay(_))
                    && INPUT_REQUIRED.find(line).is_some())
                || p.filter
                    .is_some_and(|k| !self.firewall.passes_as_is(k, line, at))
        }) {
            return false;
        }
        let Some(p) = self.pending.remove(&id) else {
            return false;
        };
        if let Some((_, ours)) = &p.token {
            self.tokens.remove(ours);
        }
        // Only an answer that names a task is parsed, to follow the task.
        if TASK_ID.find(line).is_some()
            && let Ok(v) = serde_json::from_slice::<Value>(line)
            && let Some(r) = v.get("result")
        {
            self.tasks.seen(r, Instant::now());
        }
        let client_id = serde_json::to_vec(&p.client_id).unwrap_or_default();
        let bytes = raw::with_id(line, at, &client_id);
        let _ = p.outbox.try_send(Out::Answer(Bytes::from(bytes)));
        self.ended(&p, said.into());
        true
    }

    /// A client's `notifications/cancelled`: the child-side id of the
    /// request it names, if that request is in flight in the sender's own
    /// 2025 session. A sessionless (2026) sender names nothing it can be
    /// told apart by (request ids are the clients' own and collide): it
    /// cancels by closing its response stream ([`Router::prune`]).
    pub(crate) fn cancel(&self, session: Option<&str>, request_id: &Value) -> Option<u64> {
        let session = session?;
        self.pending
            .iter()
            .find(|(_, p)| p.session.as_deref() == Some(session) && &p.client_id == request_id)
            .map(|(id, _)| *id)
    }

    /// A client's answer to a server-to-client request: the message for the
    /// child with the child's id restored (`None` for an unknown id), or
    /// [`NotYours`] when the request was sent to another session.
    pub(crate) fn client_response(
        &mut self,
        mut msg: Value,
        session: Option<&str>,
    ) -> Result<Option<Value>, NotYours> {
        let Some(key) = msg.get("id").and_then(Value::as_str) else {
            return Ok(None);
        };
        let Some(req) = self.s2c.get(key) else {
            return Ok(None);
        };
        if req.session.as_deref() != session {
            return Err(NotYours);
        }
        let key = key.to_owned();
        let req = self.s2c.remove(&key).ok_or(NotYours)?;
        if let Some((n, k)) = req.relay {
            return Ok(self.relay_answer(n, k, &msg));
        }
        msg["id"] = req.child_id;
        Ok(Some(msg))
    }

    /// A child's answer to forwarded request `p`, to its client.
    fn finish(&mut self, p: Pending, mut msg: Value) {
        if let Some((_, ours)) = &p.token {
            self.tokens.remove(ours);
        }
        let failed = msg.get("error").is_some()
            || msg.pointer("/result/isError") == Some(&Value::Bool(true));
        if let Some(data) = p.lacked.as_ref().filter(|_| failed) {
            // The call failed after its client was refused roots it did
            // not declare: that is the failure it gets (SPEC §24).
            self.ended(&p, CallOutcome::RpcError);
            let text = "Missing required client capability: the server asked for roots \
                        (roots/list)";
            let e = error(
                &p.client_id,
                crate::bridge::mrtr::MISSING_CAPABILITY,
                text,
                Some(data.clone()),
            );
            let _ = p.outbox.try_send(e.into());
            return;
        }
        if p.call.is_some() {
            self.ended(&p, raw::Said::of(&msg).into());
        }
        msg["id"] = p.client_id;
        if let Some(r) = msg.get("result") {
            self.tasks.seen(r, Instant::now());
            match p.answer {
                Answer::AsIs => {}
                Answer::Complete { cacheable } => {
                    if let Some(r) = msg["result"].as_object_mut() {
                        r.entry("resultType").or_insert(json!("complete"));
                        if cacheable {
                            r.entry("ttlMs").or_insert(json!(0));
                            r.entry("cacheScope").or_insert(json!("private"));
                        }
                    }
                }
                Answer::Replace(result) => msg["result"] = result,
                Answer::Bare => {
                    if let Some(r) = msg["result"].as_object_mut()
                        && r.get("resultType").is_none_or(|t| t == "complete")
                    {
                        for k in ["resultType", "ttlMs", "cacheScope"] {
                            r.remove(k);
                        }
                    }
                }
            }
            if let Some(kind) = p.filter {
                let r = &msg["result"];
                let items = match kind {
                    Kind::Tool => r.get("tools"),
                    Kind::Prompt => r.get("prompts"),
                    Kind::Resource => r.get("resources").or_else(|| r.get("skills")),
                }
                .and_then(Value::as_array);
                self.relist |=
                    items.is_some_and(|i| i.iter().any(|x| !self.firewall.knows(kind, x)));
                self.firewall.filter(kind, &mut msg["result"]);
            }
        }
        let _ = p.outbox.try_send(msg.into());
    }

    /// Forgets streams whose client went away. Returns the child-side ids
    /// of the sessionless (2026) requests among them: closing the response
    /// stream is how such a client cancels, so the child is told. A 2025
    /// client's disconnect is not a cancellation (its transport says so).
    pub(crate) fn prune(&mut self) -> Vec<u64> {
        self.listeners.retain(|_, l| !l.outbox.is_closed());
        let mut cancelled = Vec::new();
        let mut gone = Vec::new();
        self.pending.retain(|id, p| {
            let open = !p.outbox.is_closed();
            if !open && p.session.is_none() {
                cancelled.push(*id);
                gone.extend(p.call.take());
            }
            open
        });
        // A call its client cancelled got no result: a JSON-RPC error as
        // far as its record goes (D69).
        if let Some(r) = &self.recorder {
            for call in gone {
                r.finish(&call, CallOutcome::RpcError);
            }
        }
        let (pending, waiting, relays) = (&self.pending, &self.waiting, &self.relays);
        self.tokens.retain(|_, id| {
            pending.contains_key(id)
                || relays.contains_key(id)
                || waiting.values().any(|w| w.child_req == *id)
        });
        cancelled
    }

    /// Routes one message from the child. `own` is called for answers to
    /// xy's own requests (ids from [`Router::own_id`] not forwarded).
    pub(crate) fn on_child(&mut self, mut msg: Value) -> (ChildAction, Option<Value>) {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = msg.get("id").cloned();
        match (method, id) {
            // An answer to a forwarded request (or to xy's own).
            (None, Some(id)) => {
                let Some(n) = id.as_u64() else {
                    return (ChildAction::Nothing, None);
                };
                let Some(p) = self.pending.remove(&n) else {
                    if let Some(w) = self.waiting.values_mut().find(|w| w.child_req == n) {
                        // Answered while its client is away: the retry gets
                        // it (kept within the same bounds as questions).
                        w.bytes = serde_json::to_vec(&msg).map_or(0, |v| v.len());
                        w.done = Some(msg);
                        w.asks.clear();
                        return (ChildAction::ToChild(self.bound_waiting()), None);
                    }
                    return (ChildAction::Nothing, Some(msg));
                };
                self.gathering.remove(&n);
                if let Asks::Relay(_) = &p.asks
                    && msg.pointer("/result/resultType").and_then(Value::as_str)
                        == Some("input_required")
                {
                    return (self.relay(n, p, msg), None);
                }
                self.finish(p, msg);
                (ChildAction::Nothing, None)
            }
            // A server-to-client request: to the exchange that caused it.
            (Some(method), Some(child_id)) => {
                let refuse = |code: i64, message: String, data: Option<Value>| {
                    let mut e = json!({"code": code, "message": message});
                    if let Some(d) = data {
                        e["data"] = d;
                    }
                    json!({"jsonrpc": "2.0", "id": child_id, "error": e})
                };
                let (outbox, session) = match self.cause(&msg) {
                    None => {
                        let m = format!("xy: no client to send {method} to (no request in flight)");
                        return (ChildAction::ToChild(vec![refuse(-32603, m, None)]), None);
                    }
                    Some(Cause::Stream(outbox, session)) => (outbox, session),
                    Some(Cause::Waiting(x)) => {
                        let id = child_id.clone();
                        return (self.ask_later(&x, &method, msg, id, refuse), None);
                    }
                    Some(Cause::Request(k)) => {
                        let p = &self.pending[&k];
                        let input = mrtr::is_input_request(&method);
                        if input
                            && let Some(caps) = &p.caps
                            && let Some(need) = mrtr::missing(&method, msg.get("params"), caps)
                        {
                            return (self.lacks(k, &method, need, refuse), None);
                        }
                        match &p.asks {
                            Asks::Mrtr(_) if input => {
                                let list = self.gathering.entry(k).or_default();
                                let first = list.is_empty();
                                let ask = Ask::new(&msg, &method, child_id.clone(), |key| {
                                    list.iter().any(|a| a.key == key)
                                });
                                list.push(ask);
                                let act = if first {
                                    ChildAction::Gather(k)
                                } else {
                                    ChildAction::Nothing
                                };
                                return (act, None);
                            }
                            Asks::Mrtr(_) | Asks::Refuse => {
                                let m = format!(
                                    "xy: the client speaks the 2026 era, which has no \
                                     server-to-client {method} during this request"
                                );
                                return (ChildAction::ToChild(vec![refuse(-32601, m, None)]), None);
                            }
                            Asks::Direct | Asks::Relay(_) => (p.outbox.clone(), p.session.clone()),
                        }
                    }
                };
                // Each one waits here for its client's answer: a child that
                // asks more than clients answer is told so, not remembered.
                if self.s2c.len() >= MAX_ASKING {
                    let m = format!(
                        "xy: {MAX_ASKING} requests to clients wait for answers already; \
                         {method} not sent"
                    );
                    return (ChildAction::ToChild(vec![refuse(-32603, m, None)]), None);
                }
                let ours = format!("xy-s2c-{}", unguessable());
                msg["id"] = json!(ours);
                self.s2c.insert(
                    ours.clone(),
                    ServerRequest {
                        child_id: child_id.clone(),
                        session,
                        relay: None,
                    },
                );
                // A client that does not read has no room for more of the
                // child's questions: the child hears so at once.
                if outbox.try_send(msg.into()).is_err() {
                    self.s2c.remove(&ours);
                    let m = format!("xy: the client is not reading; {method} not sent");
                    return (ChildAction::ToChild(vec![refuse(-32603, m, None)]), None);
                }
                (ChildAction::Nothing, None)
            }
            (Some(method), None) => {
                self.notification(&method, msg);
                (ChildAction::Nothing, None)
            }
            (None, None) => (ChildAction::Nothing, None),
        }
    }

    /// The exchange a server-to-client request belongs to: the only
    /// request in flight, else the newest one (stdio carries no link
    /// between the two; see docs/stdio.md).
    /// Its 2025 session, if any, goes with it.
    fn cause(&self, _msg: &Value) -> Option<Cause> {
        // A request waiting for its client's MRTR retry is still in flight
        // at the child (which may ask it more).
        let newest = self
            .pending
            .iter()
            .filter(|(_, p)| !p.outbox.is_closed())
            .map(|(id, _)| (*id, None))
            .chain(
                self.waiting
                    .iter()
                    .filter(|(_, w)| w.done.is_none())
                    .map(|(x, w)| (w.child_req, Some(x))),
            )
            .max_by_key(|(id, _)| *id);
        newest
            .map(|(id, x)| match x {
                None => Cause::Request(id),
                Some(x) => Cause::Waiting(x.clone()),
            })
            .or_else(|| {
                self.listeners
                    .values()
                    .find(|l| l.subscription.is_none() && !l.outbox.is_closed())
                    .map(|l| Cause::Stream(l.outbox.clone(), l.session.clone()))
            })
    }

    /// Whether the forwarded request `id` still waits for its answer.
    pub(crate) fn is_pending(&self, id: u64) -> bool {
        self.pending.contains_key(&id)
    }

    /// Fails one forwarded request with `message` (code -32603).
    pub(crate) fn fail(&mut self, id: u64, message: &str) {
        if let Some(p) = self.pending.remove(&id) {
            if let Some((_, ours)) = &p.token {
                self.tokens.remove(ours);
            }
            // Every failure xy answers for the child is its going away
            // (restart, exit, stop, a handshake that failed).
            self.ended(&p, CallOutcome::ChildGone);
            let _ = p.outbox.try_send(
                json!({
                    "jsonrpc": "2.0",
                    "id": p.client_id,
                    "error": {"code": -32603, "message": message},
                })
                .into(),
            );
        }
    }

    /// The child is gone: every request in flight fails with `error`
    /// (code -32603); streams stay open.
    pub(crate) fn fail_all(&mut self, message: &str) {
        self.fail_all_but(message, &[]);
    }

    /// As [`Router::fail_all`], except the requests in `keep` (they never
    /// reached the child and go to the next one).
    pub(crate) fn fail_all_but(&mut self, message: &str, keep: &[u64]) {
        let ids: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|id| !keep.contains(id))
            .collect();
        for id in ids {
            self.fail(id, message);
        }
        // The child's own requests to clients died with it; a request
        // waiting for its client's answers gets the failure on its retry.
        self.s2c.clear();
        self.gathering.clear();
        for w in self.waiting.values_mut() {
            w.asks.clear();
            if w.done.is_none() {
                w.done = Some(json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32603, "message": message}}));
            }
        }
        for (_, r) in std::mem::take(&mut self.relays) {
            self.ended(&r.pending, CallOutcome::ChildGone);
            let _ = r
                .pending
                .outbox
                .try_send(error(&r.pending.client_id, -32603, message, None).into());
        }
    }

    /// Stop: fails what is in flight and closes every stream; a 2026
    /// listen stream first gets its final result.
    pub(crate) fn close_all(&mut self, message: &str) {
        self.fail_all(message);
        self.waiting.clear();
        for (_, l) in self.listeners.drain() {
            if let Some(sub) = l.subscription {
                let _ = l.outbox.try_send(
                    json!({
                        "jsonrpc": "2.0",
                        "id": sub,
                        "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION: sub}},
                    })
                    .into(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
