//! The bridge's routing tables (SPEC §13): request ids and progress tokens
//! rewritten between many HTTP clients and the one child, server-to-client
//! messages sent back to the exchange that caused them, list-changed
//! notifications fanned out to every listener. Pure data, no I/O: the
//! BridgeActor feeds it messages and carries out what it returns.

use std::collections::HashMap;
use std::ops::Range;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use std::sync::{Arc, LazyLock};

use xy_core::firewall::Kind;

use super::mrtr::{self, Ask, Refused, Seal};
use super::raw;

use super::tasks::Tasks;
use crate::mcp::meta::{META_SUBSCRIPTION, unguessable};
use crate::mcp::record::{CallStart, Recorder};
use crate::mcp::verdicts::Verdicts;
use xy_core::protocol::mcp::CallOutcome;

// Built once: `memmem::find` builds a searcher on every call, and these
// run on every answer line.
static INPUT_REQUIRED: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b"\"input_required\""));
static TASK_ID: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(b"\"taskId\""));

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
/// `subscriptions/listen` stream) go. Closing it ends the HTTP response.
pub(crate) type Outbox = mpsc::Sender<Out>;

/// One message for an HTTP exchange.
#[derive(Debug)]
pub(crate) enum Out {
    Msg(Value),
    /// The child's answer to a request as the bytes it wrote, the client's
    /// id in place (the fast path, D49).
    Answer(Bytes),
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
        }
    }

    /// The message as JSON text.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            // A `Value` always serialises (and not through `Display`: D49).
            Out::Msg(v) => Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
            Out::Answer(b) => b,
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
}

/// How the child's requests to a client (elicitation, sampling, roots)
/// reach the client of a forwarded request (SPEC §19).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asks {
    /// As server-to-client requests on the request's stream (both sides
    /// speak the 2025 era).
    Direct,
    /// A 2026 client, a 2025 child, a request that may take input: the
    /// client gets an `InputRequiredResult`, its retry's answers go to the
    /// child (MRTR).
    Mrtr(Box<MrtrCall>),
    /// A 2026 client and a request that takes no input: refused to the child.
    Refuse,
    /// A 2025 client, a 2026 child: the child's `InputRequiredResult`
    /// becomes server-to-client requests, their answers its retry. Holds
    /// the request as the child got it (retried with a fresh id).
    Relay(Box<Value>),
}

/// A client request carried over MRTR rounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MrtrCall {
    /// Its method and name (a retry must name the same).
    pub(crate) method: String,
    pub(crate) name: Option<String>,
    /// Its exchange id and last round, once it has had one.
    exchange: Option<(String, u32)>,
}

impl MrtrCall {
    pub(crate) fn new(method: &str, name: Option<String>) -> MrtrCall {
        MrtrCall {
            method: method.to_owned(),
            name,
            exchange: None,
        }
    }
}

/// A client request whose child asked its client something: waits, out of
/// the pending table (its response went out), for the client's retry.
struct Waiting {
    pending: Pending,
    /// The child-side id of the request.
    child_req: u64,
    /// The round whose `requestState` is good (once).
    round: u32,
    /// The child's questions not answered yet.
    asks: Vec<Ask>,
    /// The child's answer to the request, if it came meanwhile: what the
    /// retry gets.
    done: Option<Value>,
    deadline: Instant,
    bytes: usize,
}

/// A 2026 child's `InputRequiredResult` being asked of a 2025 client.
struct Relay {
    pending: Pending,
    /// The request as the child got it.
    request: Value,
    state: Option<Value>,
    answers: Map<String, Value>,
    /// Keys not answered yet.
    open: usize,
    deadline: Instant,
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
}

/// Which log messages (`notifications/message`) sent during a request
/// reach its client, on the request's own stream (2026-07-28, SEP-2577:
/// a 2026 client opts in per request with `_meta`'s `logLevel`; a 2025
/// client set its level with `logging/setLevel`, which the child applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Log {
    /// A 2025 client: every message the child sends.
    #[default]
    Session,
    /// A 2026 client that did not opt in: none.
    Off,
    /// A 2026 client: those at this severity (RFC 5424 rank) or above.
    AtLeast(u8),
}

impl Log {
    /// A 2026 request's opt-in, from its `_meta`.
    pub(crate) fn of_2026(meta: Option<&Value>) -> Log {
        meta.and_then(|m| m.get("io.modelcontextprotocol/logLevel"))
            .and_then(Value::as_str)
            .and_then(severity)
            .map_or(Log::Off, Log::AtLeast)
    }

    fn passes(self, level: Option<&str>) -> bool {
        match self {
            Log::Session => true,
            Log::Off => false,
            Log::AtLeast(n) => level.and_then(severity).is_some_and(|l| l >= n),
        }
    }
}

/// An MCP logging level's rank, `debug` lowest.
fn severity(level: &str) -> Option<u8> {
    const LEVELS: [&str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    LEVELS.iter().position(|l| *l == level).map(|n| n as u8)
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

/// A stream that receives broadcast notifications.
struct Listener {
    /// `None`: a 2025 session's GET stream, messages as they are.
    /// `Some(id)`: a 2026 `subscriptions/listen` stream (the client's request id).
    subscription: Option<Value>,
    /// The 2026 filter (`toolsListChanged`, …); `None` takes everything.
    filter: Option<Map<String, Value>>,
    /// The 2025 session owning a GET stream.
    session: Option<String>,
    outbox: Outbox,
}

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

    /// A 2025 client's answer to input request `key` of the relay of the
    /// child's request `n`: once every one is answered, the retry for the
    /// child.
    fn relay_answer(&mut self, n: u64, key: String, msg: &Value) -> Option<Value> {
        let r = self.relays.get_mut(&n)?;
        match msg.get("result") {
            Some(result) => {
                if r.answers.insert(key, result.clone()).is_none() {
                    r.open = r.open.saturating_sub(1);
                }
                if r.open > 0 {
                    return None;
                }
                let r = self.relays.remove(&n)?;
                Some(self.relay_retry(n, r))
            }
            None => {
                // The client refused: so does its request.
                let r = self.relays.remove(&n)?;
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != n));
                let e = msg
                    .get("error")
                    .cloned()
                    .unwrap_or_else(|| json!({"code": -32603, "message": "no answer"}));
                self.ended(&r.pending, CallOutcome::RpcError);
                let _ = r.pending.outbox.try_send(
                    json!({"jsonrpc": "2.0", "id": r.pending.client_id, "error": e}).into(),
                );
                None
            }
        }
    }

    /// The retry of relayed request `n` with its client's answers, under a
    /// fresh child-side id (MRTR: the retry is another request).
    fn relay_retry(&mut self, n: u64, r: Relay) -> Value {
        let id = self.own_id();
        let mut msg = r.request;
        msg["id"] = json!(id);
        if !msg["params"].is_object() {
            msg["params"] = json!({});
        }
        let params = &mut msg["params"];
        params["inputResponses"] = Value::Object(r.answers);
        match r.state {
            Some(st) => params["requestState"] = st,
            None => {
                if let Some(o) = params.as_object_mut() {
                    o.remove("requestState");
                }
            }
        }
        for t in self.tokens.values_mut() {
            if *t == n {
                *t = id;
            }
        }
        let mut pending = r.pending;
        pending.asks = Asks::Relay(Box::new(msg.clone()));
        self.pending.insert(id, pending);
        msg
    }

    /// The child answered relayed request `n` with an `InputRequiredResult`:
    /// its input requests go to the 2025 client as server-to-client
    /// requests on the request's stream.
    fn relay(&mut self, n: u64, p: Pending, msg: Value) -> ChildAction {
        let Asks::Relay(request) = &p.asks else {
            return ChildAction::Nothing;
        };
        let request = (**request).clone();
        let result = &msg["result"];
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let state = result.get("requestState").cloned();
        for r in requests.values() {
            let method = r.get("method").and_then(Value::as_str).unwrap_or("");
            let need = p
                .caps
                .as_ref()
                .and_then(|c| mrtr::missing(method, r.get("params"), c));
            if let Some(need) = need {
                self.ended(&p, CallOutcome::RpcError);
                let m =
                    format!("xy: the server asked for {method}, which this client did not declare");
                let e = error(
                    &p.client_id,
                    -32603,
                    &m,
                    Some(json!({"requiredCapabilities": need})),
                );
                let _ = p.outbox.try_send(e.into());
                return ChildAction::Nothing;
            }
        }
        let relay = Relay {
            open: requests.len(),
            pending: p,
            request,
            state,
            answers: Map::new(),
            deadline: Instant::now() + mrtr::TTL,
        };
        if requests.is_empty() {
            // Only a state: retry at once.
            return ChildAction::ToChild(vec![self.relay_retry(n, relay)]);
        }
        // As many relays wait at most as exchanges do; the oldest goes.
        while self.relays.len() >= mrtr::MAX_WAITING {
            let Some(oldest) = self
                .relays
                .iter()
                .min_by_key(|(_, r)| r.deadline)
                .map(|(m, _)| *m)
            else {
                break;
            };
            if let Some(r) = self.relays.remove(&oldest) {
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != oldest));
                self.ended(&r.pending, CallOutcome::RpcError);
                let m =
                    "xy: too many requests wait for their clients' answers; the oldest was dropped";
                let _ = r
                    .pending
                    .outbox
                    .try_send(error(&r.pending.client_id, -32603, m, None).into());
            }
        }
        for (key, r) in requests {
            let ours = format!("xy-s2c-{}", unguessable());
            let mut ask = json!({"jsonrpc": "2.0", "id": ours, "method": r.get("method").cloned().unwrap_or(Value::Null)});
            if let Some(params) = r.get("params") {
                ask["params"] = params.clone();
            }
            self.s2c.insert(
                ours,
                ServerRequest {
                    child_id: Value::Null,
                    session: relay.pending.session.clone(),
                    relay: Some((n, key)),
                },
            );
            let _ = relay.pending.outbox.try_send(ask.into());
        }
        self.relays.insert(n, relay);
        ChildAction::Nothing
    }

    /// A child's answer to forwarded request `p`, to its client.
    fn finish(&mut self, p: Pending, mut msg: Value) {
        if let Some((_, ours)) = &p.token {
            self.tokens.remove(ours);
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
            }
            if let Some(kind) = p.filter {
                self.firewall.filter(kind, &mut msg["result"]);
            }
        }
        let _ = p.outbox.try_send(msg.into());
    }

    /// The child asked forwarded request `k`'s client for something it did
    /// not declare (`need`): refused on the client's behalf. A 2026 client's
    /// request fails with -32021 and the child's is cancelled; a 2025
    /// client's child gets an error, as such a client would answer. So does
    /// the child for `roots/list`, whoever asks: servers ask for roots on
    /// their own (after the handshake, on `roots/list_changed`), so the
    /// request in flight is likely not its cause and is left alone.
    fn lacks(
        &mut self,
        k: u64,
        method: &str,
        need: Value,
        refuse: impl Fn(i64, String, Option<Value>) -> Value,
    ) -> ChildAction {
        let data = json!({"requiredCapabilities": need});
        let what = need
            .as_object()
            .and_then(|o| o.keys().next())
            .cloned()
            .unwrap_or_default();
        let m = format!("xy: the client did not declare the {what} capability {method} needs");
        let mut out = vec![refuse(-32601, m, Some(data.clone()))];
        let mrtr = method != "roots/list"
            && self
                .pending
                .get(&k)
                .is_some_and(|p| matches!(p.asks, Asks::Mrtr(_) | Asks::Refuse));
        if !mrtr {
            return ChildAction::ToChild(out);
        }
        let Some(p) = self.pending.remove(&k) else {
            return ChildAction::ToChild(out);
        };
        if let Some((_, ours)) = &p.token {
            self.tokens.remove(ours);
        }
        self.ended(&p, CallOutcome::RpcError);
        let text =
            format!("Missing required client capability: the server asked for {what} ({method})");
        let _ = p
            .outbox
            .try_send(error(&p.client_id, mrtr::MISSING_CAPABILITY, &text, Some(data)).into());
        for a in self.gathering.remove(&k).unwrap_or_default() {
            out.push(error(
                &a.child_id,
                -32603,
                "xy: the client's request ended",
                None,
            ));
        }
        out.push(cancelled(
            k,
            "xy: the client lacks a capability the request needs",
        ));
        ChildAction::ToChild(out)
    }

    /// The child asks more of a client whose request waits for its retry
    /// (the question missed the round's gathering): it joins the waiting
    /// questions, and the retry, which cannot answer it, asks it in the
    /// next round.
    fn ask_later(
        &mut self,
        x: &str,
        method: &str,
        msg: Value,
        child_id: Value,
        refuse: impl Fn(i64, String, Option<Value>) -> Value,
    ) -> ChildAction {
        let Some(w) = self.waiting.get_mut(x) else {
            return ChildAction::Nothing;
        };
        if !mrtr::is_input_request(method) {
            let m = format!(
                "xy: the client speaks the 2026 era, which has no server-to-client {method}"
            );
            return ChildAction::ToChild(vec![refuse(-32601, m, None)]);
        }
        if let Some(need) = w
            .pending
            .caps
            .as_ref()
            .and_then(|c| mrtr::missing(method, msg.get("params"), c))
        {
            let data = json!({"requiredCapabilities": need});
            let m = format!("xy: the client did not declare the capability {method} needs");
            return ChildAction::ToChild(vec![refuse(-32601, m, Some(data))]);
        }
        let ask = Ask::new(&msg, method, child_id, |key| {
            w.asks.iter().any(|a| a.key == key)
        });
        w.bytes += ask.bytes;
        w.asks.push(ask);
        ChildAction::ToChild(self.bound_waiting())
    }

    /// The questions gathered for forwarded request `k` go to its 2026
    /// client as an `InputRequiredResult`; the request waits for the
    /// retry. Returns messages for the child (errors, when the client or
    /// room is gone).
    pub(crate) fn ask(&mut self, k: u64, now: Instant) -> Vec<Value> {
        let asks = self.gathering.remove(&k).unwrap_or_default();
        if asks.is_empty() {
            return Vec::new();
        }
        let Some(mut p) = self.pending.remove(&k) else {
            return asks
                .iter()
                .map(|a| error(&a.child_id, -32603, "xy: the client's request ended", None))
                .collect();
        };
        let Asks::Mrtr(call) = &mut p.asks else {
            self.pending.insert(k, p);
            return Vec::new();
        };
        let (xid, round) = match &call.exchange {
            Some((x, r)) => (x.clone(), r + 1),
            None => (unguessable(), 1),
        };
        call.exchange = Some((xid.clone(), round));
        let state = self.seal.seal(&xid, round, mrtr::unix_after(mrtr::TTL));
        let answer = json!({"jsonrpc": "2.0", "id": p.client_id, "result": mrtr::input_required(&asks, &state)});
        let _ = p.outbox.try_send(answer.into());
        let bytes = asks.iter().map(|a| a.bytes).sum();
        self.waiting.insert(
            xid,
            Waiting {
                pending: p,
                child_req: k,
                round,
                asks,
                done: None,
                deadline: now + mrtr::TTL,
                bytes,
            },
        );
        self.bound_waiting()
    }

    /// Past [`mrtr::MAX_WAITING`] exchanges or [`mrtr::MAX_WAITING_BYTES`],
    /// the oldest go.
    fn bound_waiting(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let bytes: usize = self.waiting.values().map(|w| w.bytes).sum();
            if self.waiting.len() <= mrtr::MAX_WAITING && bytes <= mrtr::MAX_WAITING_BYTES {
                return out;
            }
            let Some(oldest) = self
                .waiting
                .iter()
                .min_by_key(|(_, w)| w.deadline)
                .map(|(x, _)| x.clone())
            else {
                return out;
            };
            if let Some(w) = self.waiting.remove(&oldest) {
                out.extend(self.drop_waiting(
                    w,
                    "xy: too many requests wait for their clients' answers; the oldest was dropped",
                ));
            }
        }
    }

    /// A waiting exchange is given up: the child's questions get `why` as
    /// an error, its request is cancelled.
    fn drop_waiting(&mut self, w: Waiting, why: &str) -> Vec<Value> {
        let mut out: Vec<Value> = w
            .asks
            .iter()
            .map(|a| error(&a.child_id, -32603, why, None))
            .collect();
        if w.done.is_none() {
            out.push(cancelled(w.child_req, why));
        }
        if let Some((_, ours)) = &w.pending.token {
            self.tokens.remove(ours);
        }
        self.ended(&w.pending, CallOutcome::RpcError);
        out
    }

    /// Gives up what waited for a client past its deadline. Returns
    /// messages for the child.
    pub(crate) fn expire_waiting(&mut self, now: Instant) -> Vec<Value> {
        let late: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| now >= w.deadline)
            .map(|(x, _)| x.clone())
            .collect();
        let mut out = Vec::new();
        let why = format!(
            "xy: the client did not answer within {}",
            humantime::format_duration(mrtr::TTL)
        );
        for x in late {
            if let Some(w) = self.waiting.remove(&x) {
                out.extend(self.drop_waiting(w, &why));
            }
        }
        let late: Vec<u64> = self
            .relays
            .iter()
            .filter(|(_, r)| now >= r.deadline || r.pending.outbox.is_closed())
            .map(|(n, _)| *n)
            .collect();
        for n in late {
            if let Some(r) = self.relays.remove(&n) {
                self.s2c
                    .retain(|_, q| q.relay.as_ref().is_none_or(|(m, _)| *m != n));
                self.ended(&r.pending, CallOutcome::RpcError);
                let _ = r
                    .pending
                    .outbox
                    .try_send(error(&r.pending.client_id, -32603, &why, None).into());
            }
        }
        out
    }

    /// A 2026 client's retry carrying a `requestState` xy issued: the
    /// answers in its `inputResponses` go to the child's waiting questions
    /// (returned, for the child), and the request carries on with this
    /// retry as its client request. A refused state: the JSON-RPC error
    /// code and message for the client.
    pub(crate) fn retry(
        &mut self,
        msg: &Value,
        client_id: Value,
        outbox: Outbox,
        now: Instant,
    ) -> Result<Vec<Value>, (i64, &'static str)> {
        let refused = |r: Refused| (mrtr::BAD_STATE, r.message());
        let state = msg
            .pointer("/params/requestState")
            .and_then(Value::as_str)
            .ok_or(refused(Refused::Forged))?;
        let (xid, round) = self.seal.open(state, mrtr::unix_now()).map_err(refused)?;
        let w = self.waiting.get(&xid).ok_or(refused(Refused::Used))?;
        if w.round != round {
            return Err(refused(Refused::Used));
        }
        let Asks::Mrtr(call) = &w.pending.asks else {
            return Err(refused(Refused::Used));
        };
        if msg.get("method").and_then(Value::as_str) != Some(call.method.as_str())
            || mrtr::request_name(msg) != call.name
        {
            return Err(refused(Refused::Elsewhere));
        }
        let Some(mut w) = self.waiting.remove(&xid) else {
            return Err(refused(Refused::Used));
        };
        let responses = msg
            .pointer("/params/inputResponses")
            .and_then(Value::as_object);
        let mut to_child = Vec::new();
        let mut left = Vec::new();
        for a in std::mem::take(&mut w.asks) {
            match responses.and_then(|r| r.get(&a.key)) {
                Some(v) => to_child.push(json!({"jsonrpc": "2.0", "id": a.child_id, "result": v})),
                None => left.push(a),
            }
        }
        w.pending.client_id = client_id;
        w.pending.outbox = outbox;
        if let Some(done) = w.done.take() {
            self.finish(w.pending, done);
            return Ok(to_child);
        }
        if !left.is_empty() {
            // What is still missing is asked again (the MRTR spec prefers
            // that to an error), in the next round.
            let round = round + 1;
            if let Asks::Mrtr(call) = &mut w.pending.asks {
                call.exchange = Some((xid.clone(), round));
            }
            let state = self.seal.seal(&xid, round, mrtr::unix_after(mrtr::TTL));
            let answer = json!({"jsonrpc": "2.0", "id": w.pending.client_id, "result": mrtr::input_required(&left, &state)});
            let _ = w.pending.outbox.try_send(answer.into());
            w.round = round;
            w.bytes = left.iter().map(|a| a.bytes).sum();
            w.asks = left;
            w.deadline = now + mrtr::TTL;
            self.waiting.insert(xid, w);
            return Ok(to_child);
        }
        if let Asks::Mrtr(call) = &mut w.pending.asks {
            call.exchange = Some((xid, round));
        }
        self.pending.insert(w.child_req, w.pending);
        Ok(to_child)
    }

    /// Registers a broadcast stream; returns its key (for [`Router::unlisten`]).
    pub(crate) fn listen(
        &mut self,
        session: Option<String>,
        subscription: Option<Value>,
        filter: Option<Map<String, Value>>,
        outbox: Outbox,
    ) -> u64 {
        self.next_listener += 1;
        self.listeners.insert(
            self.next_listener,
            Listener {
                subscription,
                filter,
                session,
                outbox,
            },
        );
        self.next_listener
    }

    /// Whether `session` has a GET stream open already.
    pub(crate) fn has_stream(&self, session: &str) -> bool {
        self.listeners
            .values()
            .any(|l| l.session.as_deref() == Some(session) && !l.outbox.is_closed())
    }

    /// Ends a session: its GET stream closes, its requests stay in flight
    /// (their answers still reach the open POSTs).
    pub(crate) fn end_session(&mut self, session: &str) {
        self.listeners
            .retain(|_, l| l.session.as_deref() != Some(session));
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
                let ours = format!("xy-s2c-{}", unguessable());
                msg["id"] = json!(ours);
                self.s2c.insert(
                    ours,
                    ServerRequest {
                        child_id,
                        session,
                        relay: None,
                    },
                );
                let _ = outbox.try_send(msg.into());
                (ChildAction::Nothing, None)
            }
            (Some(method), None) => {
                self.notification(&method, msg);
                (ChildAction::Nothing, None)
            }
            (None, None) => (ChildAction::Nothing, None),
        }
    }

    fn notification(&mut self, method: &str, mut msg: Value) {
        if matches!(method, "notifications/tasks" | "notifications/tasks/status")
            && let Some(p) = msg.get("params")
        {
            self.tasks.seen(p, Instant::now());
        }
        // Progress: back to the request that asked for it, its token restored.
        if method == "notifications/progress" {
            let token = msg
                .pointer("/params/progressToken")
                .and_then(Value::as_str)
                .and_then(|t| self.tokens.get(t))
                .copied();
            if let Some(p) = token.and_then(|id| self.pending.get(&id))
                && let Some((original, _)) = &p.token
            {
                msg["params"]["progressToken"] = original.clone();
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // A 2026 child's notification on a forwarded `subscriptions/listen`.
        if let Some(sub) = msg
            .pointer(&format!(
                "/params/_meta/{}",
                META_SUBSCRIPTION.replace('/', "~1")
            ))
            .and_then(Value::as_u64)
        {
            if let Some(p) = self.pending.get(&sub) {
                msg["params"]["_meta"][META_SUBSCRIPTION] = p.client_id.clone();
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // A log message during a request goes on that request's stream
        // (stdio carries no link between the two, so with several in
        // flight the newest one's, as for the child's questions), to the
        // extent its client asked for logs; with none in flight, to the
        // listeners, as before 2026 made logging request-scoped.
        if method == "notifications/message"
            && let Some(Cause::Request(k)) = self.cause(&msg)
        {
            let p = &self.pending[&k];
            let level = msg.pointer("/params/level").and_then(Value::as_str);
            if p.log.passes(level) {
                let _ = p.outbox.try_send(msg.into());
            }
            return;
        }
        // The child cancels one of its requests to a client.
        if method == "notifications/cancelled"
            && let Some(child_id) = msg.pointer("/params/requestId").cloned()
        {
            if let Some((ours, _)) = self.s2c.iter().find(|(_, r)| r.child_id == child_id) {
                let ours = ours.clone();
                self.s2c.remove(&ours);
                msg["params"]["requestId"] = json!(ours);
                self.broadcast(method, &msg);
            }
            return;
        }
        self.broadcast(method, &msg);
    }

    /// Tells every listener that follows task `id` its new state `task`:
    /// 2025 GET streams as `notifications/tasks/status`, 2026 listen
    /// streams whose `taskIds` name it as `notifications/tasks`.
    pub(crate) fn task_news(&mut self, id: &str, task: &Value) {
        self.listeners.retain(|_, l| !l.outbox.is_closed());
        for l in self.listeners.values() {
            let msg = match &l.subscription {
                None => {
                    json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})
                }
                Some(sub) => {
                    let follows = l
                        .filter
                        .as_ref()
                        .and_then(|f| f.get("taskIds"))
                        .and_then(Value::as_array)
                        .is_some_and(|ids| ids.iter().any(|i| i == id));
                    if !follows {
                        continue;
                    }
                    let mut params = task.clone();
                    params["_meta"] = json!({META_SUBSCRIPTION: sub});
                    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
                }
            };
            let _ = l.outbox.try_send(msg.into());
        }
    }

    /// Fans a notification out to every listener that wants it.
    pub(crate) fn broadcast(&mut self, method: &str, msg: &Value) {
        let key = match method {
            "notifications/tools/list_changed" => Some("toolsListChanged"),
            "notifications/prompts/list_changed" => Some("promptsListChanged"),
            "notifications/resources/list_changed" => Some("resourcesListChanged"),
            _ => None,
        };
        self.listeners.retain(|_, l| !l.outbox.is_closed());
        for l in self.listeners.values() {
            match &l.subscription {
                None => {
                    let _ = l.outbox.try_send(msg.clone().into());
                }
                Some(sub) => {
                    let wanted = match (&l.filter, key) {
                        (None, _) => true,
                        // A task's news, to the streams that follow it.
                        (Some(f), None) if method == "notifications/tasks" => {
                            let id = msg.pointer("/params/taskId");
                            f.get("taskIds")
                                .and_then(Value::as_array)
                                .is_some_and(|ids| id.is_some_and(|id| ids.contains(id)))
                        }
                        (Some(f), Some(k)) => f.get(k).and_then(Value::as_bool) == Some(true),
                        // resources/updated and the rest: only with a
                        // resource subscription, which xy does not forward.
                        (Some(_), None) => false,
                    };
                    if wanted {
                        let mut m = msg.clone();
                        if !m["params"].is_object() {
                            m["params"] = json!({});
                        }
                        if !m["params"]["_meta"].is_object() {
                            m["params"]["_meta"] = json!({});
                        }
                        m["params"]["_meta"][META_SUBSCRIPTION] = sub.clone();
                        let _ = l.outbox.try_send(m.into());
                    }
                }
            }
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
mod tests {
    use super::*;

    /// What an exchange receives, as JSON values.
    struct Rx(mpsc::Receiver<Out>);

    impl Rx {
        fn try_recv(&mut self) -> Result<Value, mpsc::error::TryRecvError> {
            self.0
                .try_recv()
                .map(|o| serde_json::from_slice(&o.into_bytes()).unwrap())
        }
    }

    fn outbox() -> (Outbox, Rx) {
        let (tx, rx) = mpsc::channel(16);
        (tx, Rx(rx))
    }

    #[test]
    fn ids_are_rewritten_and_restored_per_client() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let ma = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            None,
            a,
            Answer::AsIs,
        );
        let mb = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            None,
            b,
            Answer::AsIs,
        );
        assert_ne!(ma["id"], mb["id"]);
        r.on_child(json!({"jsonrpc":"2.0","id":mb["id"],"result":{"who":"b"}}));
        r.on_child(json!({"jsonrpc":"2.0","id":ma["id"],"result":{"who":"a"}}));
        assert_eq!(
            ra.try_recv().unwrap(),
            json!({"jsonrpc":"2.0","id":1,"result":{"who":"a"}})
        );
        assert_eq!(
            rb.try_recv().unwrap(),
            json!({"jsonrpc":"2.0","id":1,"result":{"who":"b"}})
        );
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn progress_reaches_only_its_request_with_the_token_restored() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let req = |id| {
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"progress","_meta":{"progressToken":7}}})
        };
        let ma = r.forward(req(1), None, a, Answer::AsIs);
        let mb = r.forward(req(2), None, b, Answer::AsIs);
        let (ta, tb) = (
            ma["params"]["_meta"]["progressToken"].clone(),
            mb["params"]["_meta"]["progressToken"].clone(),
        );
        assert_ne!(ta, tb);
        r.on_child(json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":tb,"progress":1}}));
        assert!(ra.try_recv().is_err());
        let got = rb.try_recv().unwrap();
        assert_eq!(got["params"]["progressToken"], json!(7));
    }

    #[test]
    fn list_changed_fans_out_to_every_listener_with_2026_meta() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let (c, mut rc) = outbox();
        r.listen(Some("s1".into()), None, None, a);
        let mut f = Map::new();
        f.insert("toolsListChanged".into(), json!(true));
        r.listen(None, Some(json!("L")), Some(f), b);
        let mut f = Map::new();
        f.insert("promptsListChanged".into(), json!(true));
        r.listen(None, Some(json!(9)), Some(f), c);
        r.on_child(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
        assert_eq!(
            ra.try_recv().unwrap()["method"],
            "notifications/tools/list_changed"
        );
        let got = rb.try_recv().unwrap();
        assert_eq!(got["params"]["_meta"][META_SUBSCRIPTION], json!("L"));
        assert!(rc.try_recv().is_err(), "filtered out");
    }

    #[test]
    fn server_requests_go_to_the_cause_and_answers_back_to_the_child() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        r.forward(
            json!({"jsonrpc":"2.0","id":"x","method":"tools/call"}),
            None,
            a,
            Answer::AsIs,
        );
        r.on_child(json!({"jsonrpc":"2.0","id":0,"method":"sampling/createMessage"}));
        let got = ra.try_recv().unwrap();
        let ours = got["id"].clone();
        assert!(ours.as_str().unwrap().starts_with("xy-s2c-"));
        let back = r
            .client_response(json!({"jsonrpc":"2.0","id":ours,"result":{}}), None)
            .unwrap()
            .unwrap();
        assert_eq!(back["id"], json!(0));
    }

    #[test]
    fn a_server_request_is_answered_only_from_its_session_and_its_id_is_unguessable() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
            Some("A".into()),
            a,
            Answer::AsIs,
        );
        r.on_child(json!({"jsonrpc":"2.0","id":7,"method":"roots/list"}));
        let ours = ra.try_recv().unwrap()["id"].clone();
        let hex = ours.as_str().unwrap().strip_prefix("xy-s2c-").unwrap();
        assert_eq!(hex.len(), 32, "{ours}");
        let answer = json!({"jsonrpc":"2.0","id":ours,"result":{"roots":[]}});
        assert_eq!(r.client_response(answer.clone(), Some("B")), Err(NotYours));
        assert_eq!(r.client_response(answer.clone(), None), Err(NotYours));
        let back = r
            .client_response(answer.clone(), Some("A"))
            .unwrap()
            .unwrap();
        assert_eq!(back["id"], json!(7));
        assert_eq!(r.client_response(answer, Some("A")), Ok(None), "taken once");
        // A second request gets another id, not the next number.
        r.on_child(json!({"jsonrpc":"2.0","id":8,"method":"roots/list"}));
        assert_ne!(ra.try_recv().unwrap()["id"], ours);
    }

    #[test]
    fn a_cancel_names_only_a_request_of_the_senders_session() {
        let mut r = Router::default();
        let (a, _ra) = outbox();
        let (b, _rb) = outbox();
        let ma = r.forward(
            json!({"jsonrpc":"2.0","id":5,"method":"tools/call"}),
            Some("A".into()),
            a,
            Answer::AsIs,
        );
        r.forward(
            json!({"jsonrpc":"2.0","id":5,"method":"tools/call"}),
            None,
            b,
            Answer::AsIs,
        );
        assert_eq!(r.cancel(Some("B"), &json!(5)), None);
        assert_eq!(r.cancel(None, &json!(5)), None, "sessionless names nothing");
        assert_eq!(r.cancel(Some("A"), &json!(5)), ma["id"].as_u64());
    }

    #[test]
    fn a_closed_2026_stream_cancels_its_request_and_a_2025_one_does_not() {
        let mut r = Router::default();
        let (a, ra) = outbox();
        let (b, rb) = outbox();
        r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
            Some("A".into()),
            a,
            Answer::AsIs,
        );
        let mb = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
            None,
            b,
            Answer::AsIs,
        );
        drop((ra, rb));
        assert_eq!(r.prune(), vec![mb["id"].as_u64().unwrap()]);
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn server_request_without_a_cause_is_refused_to_the_child() {
        let mut r = Router::default();
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
        match act {
            ChildAction::ToChild(m) => {
                let m = &m[0];
                assert_eq!(m["id"], json!(3));
                assert_eq!(m["error"]["code"], json!(-32603));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fail_all_answers_every_request_and_keeps_streams() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (l, mut rl) = outbox();
        r.listen(Some("s".into()), None, None, l);
        r.forward(
            json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}),
            None,
            a,
            Answer::AsIs,
        );
        r.fail_all("restarting");
        let got = ra.try_recv().unwrap();
        assert_eq!(
            got,
            json!({"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"restarting"}})
        );
        assert_eq!(r.streams(), 1);
        r.close_all("stopped");
        assert_eq!(r.streams(), 0);
        assert!(rl.try_recv().is_err());
    }

    #[test]
    fn fail_all_but_keeps_the_requests_that_never_reached_the_child() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let req = |id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call"});
        r.forward(req(1), None, a, Answer::AsIs);
        let mb = r.forward(req(2), None, b, Answer::AsIs);
        let kept = mb["id"].as_u64().unwrap();
        r.fail_all_but("restarting", &[kept]);
        assert_eq!(ra.try_recv().unwrap()["error"]["code"], json!(-32603));
        assert!(rb.try_recv().is_err(), "kept for the next child");
        assert!(r.is_pending(kept));
        // The next child answers it with the same child-side id.
        r.on_child(json!({"jsonrpc":"2.0","id":kept,"result":{"ok":true}}));
        assert_eq!(rb.try_recv().unwrap()["id"], json!(2));
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn an_answer_as_is_goes_on_as_its_bytes_and_a_translated_one_does_not() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let fast = r.forward_raw(json!("req-1"), Some("s".into()), a);
        let line = format!(r#"{{"jsonrpc":"2.0", "result":{{"id":9}}, "id":{fast}}}"#);
        let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
        assert!(r.answer_raw(id, line.as_bytes(), &at, said));
        match ra.0.try_recv().unwrap() {
            Out::Answer(bytes) => assert_eq!(
                &bytes[..],
                br#"{"jsonrpc":"2.0", "result":{"id":9}, "id":"req-1"}"#
            ),
            other => panic!("not forwarded as bytes: {other:?}"),
        }
        assert_eq!(r.in_flight(), 0);
        // Answered already, or an id xy never sent: the Value path decides.
        assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
            None,
            b,
            Answer::Complete { cacheable: true },
        );
        let child = m["id"].as_u64().unwrap();
        let line = format!(r#"{{"jsonrpc":"2.0","id":{child},"result":{{"tools":[]}}}}"#);
        let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
        assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
        assert!(r.is_pending(child));
        r.on_child(serde_json::from_str(&line).unwrap());
        assert_eq!(
            rb.try_recv().unwrap()["result"]["resultType"],
            json!("complete")
        );
    }

    #[test]
    fn answers_are_completed_or_replaced_for_translated_requests() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            None,
            a.clone(),
            Answer::Complete { cacheable: true },
        );
        r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{"tools":[]}}));
        assert_eq!(
            ra.try_recv().unwrap()["result"],
            json!({"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"})
        );
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":4,"method":"tools/call"}),
            None,
            a.clone(),
            Answer::Complete { cacheable: false },
        );
        r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{"content":[]}}));
        assert_eq!(
            ra.try_recv().unwrap()["result"],
            json!({"content":[],"resultType":"complete"})
        );
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":2,"method":"ping"}),
            None,
            a.clone(),
            Answer::Replace(json!({"supportedVersions":["2026-07-28"]})),
        );
        r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{}}));
        assert_eq!(
            ra.try_recv().unwrap()["result"]["supportedVersions"],
            json!(["2026-07-28"])
        );
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":3,"method":"ping"}),
            None,
            a,
            Answer::Replace(json!({})),
        );
        r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"error":{"code":-1,"message":"no"}}));
        assert_eq!(ra.try_recv().unwrap()["error"]["code"], json!(-1));
    }

    #[test]
    fn a_tracked_call_is_recorded_once_however_it_ends() {
        let calls = crate::calls::Calls::new(None);
        let mut feed = calls.subscribe();
        let mut r = Router {
            recorder: Some(Recorder {
                calls: calls.clone(),
                server: "s".into(),
            }),
            ..Router::default()
        };
        let start = |tool: &str| CallStart {
            tool: tool.into(),
            client: Some("c 1".into()),
            at: std::time::SystemTime::now(),
            arrived: tokio::time::Instant::now(),
        };
        let (a, _ra) = outbox();
        let req = |id| json!({"jsonrpc":"2.0","id":id,"method":"tools/call"});
        // The Value path: a tool error.
        let m = r.forward(req(1), None, a.clone(), Answer::AsIs);
        let id = m["id"].as_u64().unwrap();
        r.track(id, start("v"));
        r.on_child(json!({"jsonrpc":"2.0","id":id,"result":{"isError":true}}));
        // The fast path: an error answer.
        let fast = r.forward_raw(json!(2), Some("x".into()), a.clone());
        r.track(fast, start("raw"));
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{fast},"error":{{"code":-1,"message":"m"}}}}"#);
        let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
        assert!(r.answer_raw(id, line.as_bytes(), &at, said));
        // The child goes away; a 2026 client closes its stream.
        let m = r.forward(req(3), Some("x".into()), a.clone(), Answer::AsIs);
        r.track(m["id"].as_u64().unwrap(), start("gone"));
        r.fail_all("restarting");
        let (b, rb) = outbox();
        let m = r.forward(req(4), None, b, Answer::AsIs);
        r.track(m["id"].as_u64().unwrap(), start("closed"));
        drop(rb);
        r.prune();
        // Not tracked (not a call): not recorded.
        let m = r.forward(req(5), None, a, Answer::AsIs);
        r.on_child(json!({"jsonrpc":"2.0","id":m["id"],"result":{}}));
        let mut got = Vec::new();
        while let Ok(c) = feed.try_recv() {
            got.push((c.record.tool.clone(), c.record.outcome));
        }
        assert_eq!(
            got,
            [
                ("v".to_owned(), CallOutcome::ToolError),
                ("raw".to_owned(), CallOutcome::RpcError),
                ("gone".to_owned(), CallOutcome::ChildGone),
                ("closed".to_owned(), CallOutcome::RpcError),
            ]
        );
        assert_eq!(calls.total("s"), 4);
    }

    /// A 2026 client's `tools/call` of `name` forwarded to a 2025 child,
    /// its client declaring `caps`; the child-side id.
    fn mrtr_call(r: &mut Router, id: Value, name: &str, caps: Value, out: Outbox) -> u64 {
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name}}),
            None,
            out,
            Answer::Complete { cacheable: false },
        );
        let k = m["id"].as_u64().unwrap();
        r.set_asks(
            k,
            Some(Arc::new(caps)),
            Asks::Mrtr(Box::new(MrtrCall::new("tools/call", Some(name.into())))),
        );
        k
    }

    fn retry_of(name: &str, id: u64, state: &Value, responses: Value) -> Value {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,
            "inputResponses":responses,"requestState":state}})
    }

    fn all_caps() -> Value {
        json!({"elicitation":{},"sampling":{},"roots":{}})
    }

    #[test]
    fn a_2025_childs_questions_become_input_required_over_rounds() {
        let mut r = Router::default();
        let now = Instant::now();
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
        // Round 1: two questions in one burst, one InputRequiredResult.
        let (act, _) = r.on_child(
            json!({"jsonrpc":"2.0","id":"user_name","method":"elicitation/create",
            "params":{"message":"name?","requestedSchema":{"type":"object"}}}),
        );
        assert_eq!(act, ChildAction::Gather(k));
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":5,"method":"roots/list"}));
        assert_eq!(act, ChildAction::Nothing, "gathered with the first");
        assert!(r.ask(k, now).is_empty());
        let got = ra.try_recv().unwrap();
        assert_eq!(got["id"], json!(1));
        let res = &got["result"];
        assert_eq!(res["resultType"], "input_required");
        assert_eq!(
            res["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        assert_eq!(res["inputRequests"]["roots-5"]["method"], "roots/list");
        let state1 = res["requestState"].clone();
        assert_eq!(r.in_flight(), 1, "the child's request still waits");
        // The retry answers both: they go to the child with its ids.
        let (b, mut rb) = outbox();
        let retry = retry_of(
            "ask",
            2,
            &state1,
            json!({"user_name":{"action":"accept","content":{"name":"A"}},"roots-5":{"roots":[]}}),
        );
        let to_child = r.retry(&retry, json!(2), b.clone(), now).unwrap();
        assert_eq!(to_child.len(), 2);
        assert!(
            to_child
                .iter()
                .any(|m| m["id"] == "user_name" && m["result"]["action"] == "accept")
        );
        assert!(
            to_child
                .iter()
                .any(|m| m["id"] == 5 && m["result"]["roots"] == json!([]))
        );
        // The same state again: replayed, refused.
        let (c, _rc) = outbox();
        assert_eq!(
            r.retry(&retry, json!(3), c.clone(), now).unwrap_err().0,
            mrtr::BAD_STATE
        );
        // Round 2: another question, answered on the retry's stream.
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":6,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}));
        assert_eq!(act, ChildAction::Gather(k));
        r.ask(k, now);
        let got = rb.try_recv().unwrap();
        assert_eq!(got["id"], json!(2));
        let state2 = got["result"]["requestState"].clone();
        assert_ne!(state1, state2);
        // The round-1 state cannot stand in for round 2.
        assert_eq!(
            r.retry(&retry, json!(4), c.clone(), now).unwrap_err().0,
            mrtr::BAD_STATE
        );
        let (d, mut rd) = outbox();
        let to_child = r
            .retry(
                &retry_of(
                    "ask",
                    7,
                    &state2,
                    json!({"sampling-6":{"role":"assistant"}}),
                ),
                json!(7),
                d,
                now,
            )
            .unwrap();
        assert_eq!(to_child[0]["id"], json!(6));
        // The child's result answers the last retry, completed for 2026.
        r.on_child(json!({"jsonrpc":"2.0","id":k,"result":{"content":[]}}));
        let got = rd.try_recv().unwrap();
        assert_eq!(got["id"], json!(7));
        assert_eq!(got["result"]["resultType"], "complete");
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn a_forged_or_misplaced_state_is_refused_and_missing_answers_asked_again() {
        let mut r = Router::default();
        let now = Instant::now();
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
        r.on_child(
            json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"?"}}),
        );
        r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
        r.ask(k, now);
        let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
        let (b, mut rb) = outbox();
        let s = state.as_str().unwrap();
        let forged = format!("{}0", &s[..s.len() - 1]);
        let forged = if forged == s {
            format!("{}1", &s[..s.len() - 1])
        } else {
            forged
        };
        let e = r
            .retry(
                &retry_of("ask", 2, &json!(forged), json!({})),
                json!(2),
                b.clone(),
                now,
            )
            .unwrap_err();
        assert_eq!(e.0, mrtr::BAD_STATE);
        assert!(e.1.contains("altered"), "{e:?}");
        let e = r
            .retry(
                &retry_of("other", 2, &state, json!({})),
                json!(2),
                b.clone(),
                now,
            )
            .unwrap_err();
        assert!(e.1.contains("another request"), "{e:?}");
        // One of two answered: that one goes on, the other is asked again.
        let to_child = r
            .retry(
                &retry_of(
                    "ask",
                    2,
                    &state,
                    json!({"elicitation-1":{"action":"decline"}}),
                ),
                json!(2),
                b,
                now,
            )
            .unwrap();
        assert_eq!(to_child.len(), 1);
        let again = rb.try_recv().unwrap();
        let asked: Vec<&String> = again["result"]["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(asked, ["roots-2"]);
        assert_ne!(again["result"]["requestState"], state);
    }

    #[test]
    fn a_question_that_misses_the_round_is_asked_in_the_next() {
        let mut r = Router::default();
        let now = Instant::now();
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
        r.on_child(
            json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"?"}}),
        );
        r.ask(k, now);
        let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
        // Late: the client has its InputRequiredResult already.
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
        assert_eq!(act, ChildAction::ToChild(vec![]));
        let (b, mut rb) = outbox();
        let to_child = r
            .retry(
                &retry_of(
                    "ask",
                    2,
                    &state,
                    json!({"elicitation-1":{"action":"accept"}}),
                ),
                json!(2),
                b,
                now,
            )
            .unwrap();
        assert_eq!(to_child[0]["id"], json!(1));
        let next = rb.try_recv().unwrap();
        let keys: Vec<&String> = next["result"]["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["roots-2"]);
    }

    #[test]
    fn an_unanswered_question_expires_and_the_child_hears_of_it() {
        let mut r = Router::default();
        let now = Instant::now();
        let (a, _ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a);
        r.on_child(json!({"jsonrpc":"2.0","id":9,"method":"roots/list"}));
        r.ask(k, now);
        assert!(
            r.expire_waiting(now + mrtr::TTL - std::time::Duration::from_secs(1))
                .is_empty()
        );
        let out = r.expire_waiting(now + mrtr::TTL);
        assert_eq!(out[0]["id"], json!(9));
        assert_eq!(out[0]["error"]["code"], json!(-32603));
        assert_eq!(out[1]["method"], "notifications/cancelled");
        assert_eq!(out[1]["params"]["requestId"], json!(k));
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn waiting_exchanges_are_bounded_the_oldest_going_first() {
        let mut r = Router::default();
        let t0 = Instant::now();
        let mut first = None;
        let mut dropped = Vec::new();
        for i in 0..=mrtr::MAX_WAITING {
            let (a, _ra) = outbox();
            let k = mrtr_call(&mut r, json!(i), "ask", all_caps(), a);
            first.get_or_insert(k);
            let pad = "p".repeat(200);
            r.on_child(
                json!({"jsonrpc":"2.0","id":1000 + i,"method":"roots/list","params":{"pad":pad}}),
            );
            dropped.extend(r.ask(k, t0 + std::time::Duration::from_millis(i as u64)));
        }
        assert_eq!(r.in_flight(), mrtr::MAX_WAITING);
        assert_eq!(dropped[0]["id"], json!(1000), "the oldest question");
        assert_eq!(dropped[1]["params"]["requestId"], json!(first.unwrap()));
        // Bytes bound too: one huge question evicts the rest.
        let (a, _ra) = outbox();
        let k = mrtr_call(&mut r, json!("big"), "ask", all_caps(), a);
        let big = "x".repeat(mrtr::MAX_WAITING_BYTES - 100);
        r.on_child(json!({"jsonrpc":"2.0","id":"big","method":"elicitation/create","params":{"message":big}}));
        r.ask(k, t0 + std::time::Duration::from_secs(60));
        let bytes: usize = r.waiting.values().map(|w| w.bytes).sum();
        assert!(bytes <= mrtr::MAX_WAITING_BYTES);
        assert!(r.waiting.len() < mrtr::MAX_WAITING);
    }

    #[test]
    fn a_question_the_client_cannot_answer_is_refused_on_its_behalf() {
        let mut r = Router::default();
        // 2026: the client's request fails -32021, the child's is cancelled.
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", json!({"elicitation":{}}), a);
        let (act, _) = r.on_child(
            json!({"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}),
        );
        let ChildAction::ToChild(out) = act else {
            panic!("{act:?}")
        };
        assert_eq!(out[0]["id"], json!(4));
        assert!(out[0]["error"].is_object());
        assert_eq!(out[1]["params"]["requestId"], json!(k));
        let got = ra.try_recv().unwrap();
        assert_eq!(got["error"]["code"], json!(mrtr::MISSING_CAPABILITY));
        assert_eq!(
            got["error"]["data"]["requiredCapabilities"],
            json!({"sampling":{}})
        );
        assert_eq!(r.in_flight(), 0);
        // Roots are asked for unprompted too: only the child hears no.
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", json!({}), a);
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":3,"method":"roots/list"}));
        let ChildAction::ToChild(out) = act else {
            panic!("{act:?}")
        };
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0]["error"]["data"]["requiredCapabilities"],
            json!({"roots":{}})
        );
        assert!(ra.try_recv().is_err());
        r.fail(k, "x");
        // 2025: the child gets the error the client would give; nothing else.
        let (b, mut rb) = outbox();
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call"}),
            Some("s".into()),
            b,
            Answer::AsIs,
        );
        let k = m["id"].as_u64().unwrap();
        r.set_asks(k, Some(Arc::new(json!({}))), Asks::Direct);
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":5,"method":"roots/list"}));
        let ChildAction::ToChild(out) = act else {
            panic!("{act:?}")
        };
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0]["error"]["data"]["requiredCapabilities"],
            json!({"roots":{}})
        );
        assert!(rb.try_recv().is_err());
        assert!(r.is_pending(k));
        // A 2026 request that takes no input: the child is told no.
        let (c, _rc) = outbox();
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            None,
            c,
            Answer::AsIs,
        );
        r.fail(k, "x");
        let k2 = m["id"].as_u64().unwrap();
        r.set_asks(k2, Some(Arc::new(all_caps())), Asks::Refuse);
        let (act, _) = r.on_child(json!({"jsonrpc":"2.0","id":6,"method":"roots/list"}));
        let ChildAction::ToChild(out) = act else {
            panic!("{act:?}")
        };
        assert_eq!(out[0]["error"]["code"], json!(-32601));
    }

    #[test]
    fn the_childs_answer_while_its_client_is_away_goes_to_the_retry_and_a_restart_fails_it() {
        let mut r = Router::default();
        let now = Instant::now();
        let (a, mut ra) = outbox();
        let k = mrtr_call(&mut r, json!(1), "ask", all_caps(), a.clone());
        r.on_child(json!({"jsonrpc":"2.0","id":1,"method":"roots/list"}));
        r.ask(k, now);
        let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
        r.on_child(
            json!({"jsonrpc":"2.0","id":k,"result":{"content":[{"type":"text","text":"gave up"}]}}),
        );
        let (b, mut rb) = outbox();
        let to_child = r
            .retry(
                &retry_of("ask", 2, &state, json!({"roots-1":{"roots":[]}})),
                json!(2),
                b,
                now,
            )
            .unwrap();
        assert!(to_child.is_empty(), "the child is done with it");
        assert_eq!(
            rb.try_recv().unwrap()["result"]["content"][0]["text"],
            "gave up"
        );
        // A restart while waiting: the retry gets the failure.
        let k = mrtr_call(&mut r, json!(3), "ask", all_caps(), a);
        r.on_child(json!({"jsonrpc":"2.0","id":2,"method":"roots/list"}));
        r.ask(k, now);
        let state = ra.try_recv().unwrap()["result"]["requestState"].clone();
        r.fail_all("xy: restarting");
        let (c, mut rc) = outbox();
        r.retry(&retry_of("ask", 4, &state, json!({})), json!(4), c, now)
            .unwrap();
        let got = rc.try_recv().unwrap();
        assert_eq!(got["id"], json!(4));
        assert_eq!(got["error"]["message"], "xy: restarting");
    }

    #[test]
    fn log_messages_go_on_the_requests_stream_as_far_as_its_client_asked() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let m = r.forward(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"log"}}),
            None,
            a,
            Answer::Complete { cacheable: false },
        );
        let k = m["id"].as_u64().unwrap();
        let log = |level: &str| {
            json!({"jsonrpc":"2.0","method":"notifications/message",
                "params":{"level":level,"data":level}})
        };
        let meta = json!({"io.modelcontextprotocol/logLevel": "warning"});
        r.set_log(k, Log::of_2026(Some(&meta)));
        r.on_child(log("info"));
        r.on_child(log("error"));
        assert_eq!(ra.try_recv().unwrap()["params"]["data"], "error");
        assert!(ra.try_recv().is_err(), "info is below warning");
        // A 2026 client that did not opt in gets none.
        r.set_log(k, Log::of_2026(Some(&json!({}))));
        r.on_child(log("emergency"));
        assert!(ra.try_recv().is_err());
        // A 2025 client gets what the child sends (its setLevel is the child's).
        r.set_log(k, Log::Session);
        r.on_child(log("debug"));
        assert_eq!(ra.try_recv().unwrap()["params"]["data"], "debug");
    }

    #[test]
    fn a_2026_childs_input_required_is_asked_of_a_2025_client_and_retried() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let req = json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"ask","_meta":{"progressToken":"p"}}});
        let m = r.forward(req, Some("S".into()), a, Answer::AsIs);
        let k = m["id"].as_u64().unwrap();
        r.set_asks(
            k,
            Some(Arc::new(all_caps())),
            Asks::Relay(Box::new(m.clone())),
        );
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{k},"result":{{"resultType":"input_required",
            "inputRequests":{{"who":{{"method":"elicitation/create","params":{{"message":"?"}}}},
                             "where":{{"method":"roots/list"}}}},
            "requestState":"opaque"}}}}"#
        )
        .replace('\n', "");
        // Not the bytes fast path, though the answer would go as is.
        let (id, at, said) = raw::answer_id(line.as_bytes()).unwrap();
        assert!(!r.answer_raw(id, line.as_bytes(), &at, said));
        let (act, _) = r.on_child(serde_json::from_str(&line).unwrap());
        assert_eq!(act, ChildAction::Nothing);
        let q1 = ra.try_recv().unwrap();
        let q2 = ra.try_recv().unwrap();
        assert!(q1["id"].as_str().unwrap().starts_with("xy-s2c-"));
        let by = |m: &str| {
            if q1["method"] == m {
                q1["id"].clone()
            } else {
                q2["id"].clone()
            }
        };
        let e_id = by("elicitation/create");
        let r_id = by("roots/list");
        assert_eq!(
            r.client_response(
                json!({"jsonrpc":"2.0","id":e_id.clone(),"result":{}}),
                Some("T")
            ),
            Err(NotYours)
        );
        assert_eq!(
            r.client_response(
                json!({"jsonrpc":"2.0","id":e_id,"result":{"action":"accept","content":{"n":1}}}),
                Some("S")
            ),
            Ok(None)
        );
        let retry = r
            .client_response(
                json!({"jsonrpc":"2.0","id":r_id,"result":{"roots":[]}}),
                Some("S"),
            )
            .unwrap()
            .unwrap();
        let k2 = retry["id"].as_u64().unwrap();
        assert_ne!(k2, k, "a retry is another request");
        assert_eq!(retry["params"]["requestState"], "opaque");
        assert_eq!(retry["params"]["inputResponses"]["who"]["action"], "accept");
        assert_eq!(
            retry["params"]["inputResponses"]["where"]["roots"],
            json!([])
        );
        assert_eq!(retry["params"]["name"], "ask");
        // Progress of the retry still reaches the client, its token restored.
        let token = retry["params"]["_meta"]["progressToken"].clone();
        r.on_child(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}}));
        assert_eq!(ra.try_recv().unwrap()["params"]["progressToken"], "p");
        r.on_child(json!({"jsonrpc":"2.0","id":k2,"result":{"content":[]}}));
        assert_eq!(ra.try_recv().unwrap()["id"], "c1");
        assert_eq!(r.in_flight(), 0);
    }

    #[test]
    fn task_news_reach_2025_streams_and_the_2026_streams_following_the_task() {
        let mut r = Router::default();
        let (a, mut ra) = outbox();
        let (b, mut rb) = outbox();
        let (c, mut rc) = outbox();
        r.listen(Some("s".into()), None, None, a);
        let mut f = Map::new();
        f.insert("taskIds".into(), json!(["t1"]));
        r.listen(None, Some(json!("L")), Some(f), b);
        let mut f = Map::new();
        f.insert("taskIds".into(), json!(["t2"]));
        r.listen(None, Some(json!("M")), Some(f), c);
        r.task_news("t1", &super::super::tasks::failed("t1", "gone"));
        let got = ra.try_recv().unwrap();
        assert_eq!(got["method"], "notifications/tasks/status");
        assert_eq!(got["params"]["status"], "failed");
        let got = rb.try_recv().unwrap();
        assert_eq!(got["method"], "notifications/tasks");
        assert_eq!(got["params"]["_meta"][META_SUBSCRIPTION], "L");
        assert!(rc.try_recv().is_err(), "follows another task");
        // A child's own task notification: to the stream following it.
        r.on_child(json!({"jsonrpc":"2.0","method":"notifications/tasks",
            "params":{"taskId":"t2","status":"working"}}));
        assert_eq!(
            rc.try_recv().unwrap()["params"]["_meta"][META_SUBSCRIPTION],
            "M"
        );
        assert!(rb.try_recv().is_err());
        assert_eq!(r.tasks.open(), 1, "followed as it passed");
    }

    #[test]
    fn own_answers_are_handed_back() {
        let mut r = Router::default();
        let id = r.own_id();
        let (_, own) = r.on_child(json!({"jsonrpc":"2.0","id":id,"result":{}}));
        assert_eq!(own.unwrap()["id"], json!(id));
    }
}
