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

use std::sync::Arc;

use xy_core::firewall::Kind;

use super::raw;
use super::record::{CallStart, Recorder};
use crate::firewall::Verdicts;
use xy_core::protocol::mcp::CallOutcome;

/// The `_meta` key of a 2026-era request's protocol version.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key naming the `subscriptions/listen` request a notification belongs to.
pub(crate) const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// The one 2026-era protocol version.
pub(crate) const V2026: &str = "2026-07-28";

/// 128 random bits, hex: an id nobody can guess (sessions, and the ids of
/// server-to-client requests, which are what lets an answer in).
pub(crate) fn unguessable() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        // Never on a working system; still unique per daemon.
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b.copy_from_slice(&n.to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
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
}

/// A request the child sent to a client.
struct ServerRequest {
    /// The id the child used.
    child_id: Value,
    /// The 2025 session of the exchange it was sent to (`None`: a
    /// sessionless 2026 exchange, where the unguessable id is the proof).
    session: Option<String>,
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
    /// A message for the child (an error answer to its request).
    ToChild(Value),
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

    /// Number of requests waiting for the child.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len()
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
        msg["id"] = req.child_id;
        Ok(Some(msg))
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
        let pending = &self.pending;
        self.tokens.retain(|_, id| pending.contains_key(id));
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
                    return (ChildAction::Nothing, Some(msg));
                };
                if let Some((_, ours)) = &p.token {
                    self.tokens.remove(ours);
                }
                if p.call.is_some() {
                    self.ended(&p, raw::Said::of(&msg).into());
                }
                msg["id"] = p.client_id;
                if msg.get("result").is_some() {
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
                (ChildAction::Nothing, None)
            }
            // A server-to-client request: to the exchange that caused it.
            (Some(method), Some(child_id)) => {
                let Some((outbox, session)) = self.cause(&msg) else {
                    return (
                        ChildAction::ToChild(json!({
                            "jsonrpc": "2.0",
                            "id": child_id,
                            "error": {
                                "code": -32603,
                                "message": format!(
                                    "xy: no client to send {method} to (no request in flight)"
                                ),
                            },
                        })),
                        None,
                    );
                };
                let ours = format!("xy-s2c-{}", unguessable());
                msg["id"] = json!(ours);
                self.s2c.insert(ours, ServerRequest { child_id, session });
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
    fn cause(&self, _msg: &Value) -> Option<(Outbox, Option<String>)> {
        self.pending
            .iter()
            .filter(|(_, p)| !p.outbox.is_closed())
            .max_by_key(|(id, _)| **id)
            .map(|(_, p)| (p.outbox.clone(), p.session.clone()))
            .or_else(|| {
                self.listeners
                    .values()
                    .find(|l| l.subscription.is_none() && !l.outbox.is_closed())
                    .map(|l| (l.outbox.clone(), l.session.clone()))
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
        // The child's own requests to clients died with it.
        self.s2c.clear();
    }

    /// Stop: fails what is in flight and closes every stream; a 2026
    /// listen stream first gets its final result.
    pub(crate) fn close_all(&mut self, message: &str) {
        self.fail_all(message);
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

    #[test]
    fn own_answers_are_handed_back() {
        let mut r = Router::default();
        let id = r.own_id();
        let (_, own) = r.on_child(json!({"jsonrpc":"2.0","id":id,"result":{}}));
        assert_eq!(own.unwrap()["id"], json!(id));
    }
}
