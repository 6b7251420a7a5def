//! The BridgeActor (SPEC §13): serves one stdio server's child over
//! streamable HTTP to any number of clients of either MCP era. It owns the
//! listener, the current child's pipes (`child`), xy's own handshake with
//! the child (`handshake`), the 2025 sessions xy mints, the routing tables
//! (`route`) and requests waiting for a child, and decides what each
//! message does; `era` holds the 2025↔2026 translation it applies. It
//! lists each child's tools and prompts itself (`listing`) for its
//! ServerActor, and enforces the firewall's verdicts that actor publishes
//! (SPEC §20: [`crate::mcp::verdicts`]). The ServerActor that spawned it owns
//! the process and tells it about each new child.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;
use xy_core::protocol::ServerState;

mod budget;
mod child;
mod era;
mod handshake;
pub(crate) mod http;
mod ledger;
mod link;
pub(crate) mod listing;
mod mrtr;
pub(crate) mod raw;
mod request;
pub(crate) mod route;
pub(crate) mod sessions;
mod tasks;
pub(crate) mod validate;

use crate::mcp::meta::{META_SUBSCRIPTION, unguessable};
use crate::mcp::record::Recorder;
use budget::{Kept, STDIN_BUDGET};
pub(crate) use child::ChildStdio;
use child::{ChildLink, line_of};
use era::VERSIONS;
use handshake::{HANDSHAKE_STEP, Handshake, Hs};
use raw::RawRequest;
use route::{Outbox, Router, error};
use sessions::Sessions;
use xy_core::protocol::mcp::wire::VERSION_2026;

use crate::mcp::listing::Listing;
use crate::mcp::verdicts::Verdicts;

/// How long a request waits for a child that is starting or restarting.
const WAIT_FOR_CHILD: Duration = Duration::from_secs(30);

/// One POST from a client.
pub(crate) struct Post {
    /// Bytes of its body (what it costs the stdin budget).
    pub(crate) size: usize,
    /// The message (`Null` while `raw` holds it unparsed).
    pub(crate) msg: Value,
    /// An ordinary request, unparsed: forwarded as its bytes when nothing
    /// about it needs the `Value` path (D49).
    pub(crate) raw: Option<RawRequest>,
    pub(crate) session: Option<String>,
    /// Its `MCP-Protocol-Version` header, if any.
    pub(crate) version: Option<String>,
    /// Carries 2026-era metadata (header or `_meta`).
    pub(crate) era2026: bool,
    pub(crate) outbox: Outbox,
    pub(crate) ack: oneshot::Sender<Ack>,
    /// When it arrived (a call record's time and duration, SPEC §20).
    pub(crate) at: std::time::SystemTime,
    pub(crate) arrived: Instant,
    /// Its `User-Agent` header: the client of a call record when the
    /// client does not name itself.
    pub(crate) user_agent: Option<hyper::header::HeaderValue>,
}

/// How the HTTP side should answer.
pub(crate) enum Ack {
    /// `202`: a notification or response was taken.
    Accepted,
    /// An HTTP-level refusal with a JSON body.
    Refused(StatusCode, Value),
    /// Messages follow on the exchange's outbox; `session` goes in the
    /// `Mcp-Session-Id` header.
    Exchange { session: Option<String> },
}

/// Messages of the BridgeActor.
pub(crate) enum BridgeMsg {
    /// Serve this listener (bound by the ServerActor, which reports a bind
    /// failure as a spawn failure).
    Serve(std::net::TcpListener),
    /// Stop listening: requests in flight fail, every stream closes.
    Close(String),
    /// xy is restarting the child: new requests wait for the next child
    /// instead of going to this one; sessions, streams and the listener
    /// stay.
    Hold,
    /// The config changed (reload): used from the next `Serve` on.
    Configure {
        port: u16,
        path: String,
        idle_stop: Option<Duration>,
    },
    /// A new child (spawn number `run`).
    Attach { run: u64, io: ChildStdio },
    /// One message from the child's stdout. `held` (each `Child*`): its
    /// share of what the reader may have handed over, given back when the
    /// message is dropped after its handling.
    ChildLine {
        run: u64,
        msg: Value,
        _held: child::Held,
    },
    /// The child's answer to request `id` (its id at `at` in `line`), unparsed.
    ChildAnswer {
        run: u64,
        id: u64,
        line: Vec<u8>,
        at: std::ops::Range<usize>,
        said: raw::Said,
        _held: child::Held,
    },
    /// The child's stdout closed.
    ChildEof { run: u64, _held: child::Held },
    /// A handshake step of spawn `run` has had no answer for a while.
    HandshakeTimeout { run: u64, id: u64 },
    /// A client POST.
    Post(Box<Post>),
    /// A client POST xy cannot read exactly (SPEC §24): refused `400`/
    /// `-32700`, never forwarded, and a call record when it may have been
    /// a `tools/call` (its `msg` then names the tool as far as it could be
    /// made out).
    Unreadable { post: Box<Post>, why: String },
    /// A 2025 session's GET stream.
    Listen {
        session: String,
        outbox: Outbox,
        ack: oneshot::Sender<Ack>,
    },
    /// `DELETE` of a session; answers whether it existed.
    EndSession {
        session: String,
        ack: oneshot::Sender<bool>,
    },
    /// Once a second: expire waiting requests, prune closed exchanges.
    Tick,
    /// The child's questions for the client of its request (child-side
    /// id) have been gathered: ask them (MRTR).
    Ask(u64),
    /// The firewall's new verdicts (from the ServerActor): clients are
    /// told when the visible set changed.
    Firewall(Arc<Verdicts>),
    /// What the child offers only to clients of a capability (from the
    /// ServerActor's probes, D210): requests that waited for them go on.
    Gates(Arc<crate::mcp::gates::Gates>),
    /// The ServerActor asks xy's own listing of the child again (an
    /// approval named an item xy's latest listing does not have).
    Relist,
    /// Fault injection (unit tests): panic in the handler.
    #[cfg(test)]
    InjectPanic,
}

/// What a bridge needs of the ServerActor that owns it (implemented in
/// `server/stdio.rs`, so the bridge does not name the server's messages).
pub(crate) trait Owner: Send + Sync + 'static {
    /// The server's state now.
    fn state(&self) -> ServerState;
    /// Whether a child runs or is on its way (the lifecycle's view, which
    /// counts a restart's stop): requests wait for it rather than fail.
    fn child_coming(&self) -> bool;
    /// A request arrived for an idle on-demand server: spawn its child.
    fn demand(&self);
    /// Nothing used the on-demand server for `idle-stop`: stop its child.
    fn idle_stop(&self);
    /// xy's own listing of the current child is complete.
    fn listed(&self, listing: Listing);
    /// xy listed a 2025-era child with these tools: which of them it
    /// offers only to clients of a capability is to be learnt (D210),
    /// answered with [`BridgeMsg::Gates`].
    /// `key` is the listing's [`crate::mcp::gates::listing_key`].
    fn probe_gates(&self, key: String, tools: Vec<String>);
}

/// Arguments of the BridgeActor.
pub(crate) struct BridgeArgs {
    pub(crate) name: String,
    pub(crate) port: u16,
    pub(crate) path: String,
    /// Its ServerActor: its state, asked to spawn (on demand) and to idle-stop.
    pub(crate) owner: Box<dyn Owner>,
    /// `on-demand { idle-stop }`, if configured.
    pub(crate) idle_stop: Option<Duration>,
    /// Where its `tools/call`s are recorded (SPEC §20).
    pub(crate) calls: crate::calls::Calls,
    /// Bytes of POST bodies read ahead of the actor ([`http::BODIES`]),
    /// shared by its own port and the gateway.
    pub(crate) bodies: std::sync::Arc<tokio::sync::Semaphore>,
    /// Its exchanges' queue totals ([`route::outbox`]), shared with the
    /// gateway's endpoint and read by `status`.
    pub(crate) flow: Arc<route::outbox::Flow>,
    /// The firewall's verdicts as the ServerActor last published them.
    pub(crate) verdicts: Arc<Verdicts>,
}

/// See the module docs.
pub(crate) struct BridgeActor;

/// The BridgeActor's state.
pub(crate) struct BridgeState {
    name: String,
    port: u16,
    path: String,
    owner: Box<dyn Owner>,
    idle_stop: Option<Duration>,
    bodies: std::sync::Arc<tokio::sync::Semaphore>,
    flow: Arc<route::outbox::Flow>,
    /// The last request that did work, or busy tick (in flight, streams).
    last_activity: Instant,
    listening: Option<crate::http::edge::Listening>,
    child: Option<ChildLink>,
    hs: Handshake,
    router: Router,
    sessions: Sessions,
    waiting: VecDeque<(Instant, Box<Post>)>,
    /// Bytes of the bodies in `waiting`.
    waiting_bytes: u64,
    /// Why the last child went away (named in the errors of its requests).
    gone: Option<String>,
    /// Bytes sent to the current child's writer so far (the offset of the
    /// next line in its stdin stream).
    sent: u64,
    /// Copies of the requests in flight the current child may not have
    /// begun to read, for resending.
    kept: Kept,
    /// Requests that never reached a child that died (sent after it was
    /// killed, before xy saw its stdout close): written again to the next
    /// child once its handshake is done, or failed at the deadline.
    resend: Vec<(u64, Instant, Bytes)>,
    /// xy's own listing of the current child, while it runs.
    job: Option<listing::Job>,
    /// xy's own `subscriptions/listen` to a 2026-only child (its id): the
    /// list-changed notifications 2025 sessions' GET streams get.
    own_listen: Option<u64>,
}

impl Actor for BridgeActor {
    type Msg = BridgeMsg;
    type State = BridgeState;
    type Arguments = BridgeArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<BridgeMsg>,
        args: BridgeArgs,
    ) -> Result<BridgeState, ActorProcessingErr> {
        myself.send_interval(Duration::from_secs(1), || BridgeMsg::Tick);
        let recorder = Some(Recorder {
            calls: args.calls,
            server: args.name.as_str().into(),
        });
        Ok(BridgeState {
            name: args.name,
            port: args.port,
            path: args.path,
            owner: args.owner,
            idle_stop: args.idle_stop,
            bodies: args.bodies,
            flow: args.flow,
            last_activity: Instant::now(),
            listening: None,
            child: None,
            hs: Handshake::default(),
            router: {
                let mut router = Router::with_firewall(args.verdicts);
                router.recorder = recorder;
                router
            },
            sessions: Sessions::default(),
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            gone: None,
            sent: 0,
            kept: Kept::default(),
            resend: Vec::new(),
            job: None,
            own_listen: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<BridgeMsg>,
        msg: BridgeMsg,
        st: &mut BridgeState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BridgeMsg::Serve(listener) => {
                let ep = http::Endpoint {
                    path: st.path.clone(),
                    actor: myself.clone(),
                    bodies: std::sync::Arc::clone(&st.bodies),
                    flow: Arc::clone(&st.flow),
                };
                match http::serve(listener, &st.name, ep) {
                    Ok(l) => {
                        tracing::info!(server = %st.name, url = %xy_core::protocol::endpoint_url(st.port, &st.path), "stdio bridge listening");
                        st.listening = Some(l);
                    }
                    Err(e) => {
                        tracing::warn!(server = %st.name, error = %e, "cannot serve the stdio bridge");
                    }
                }
            }
            BridgeMsg::Close(why) => st.close(&why),
            // Nothing new goes to the child being restarted: requests wait
            // for the next one. What it has in flight it may still answer
            // before it exits; what it has not answered then fails naming
            // the restart (`detach` at its EOF).
            BridgeMsg::Hold => {
                if st.child.is_some() {
                    st.hs.state = Hs::Detached;
                }
            }
            BridgeMsg::Configure {
                port,
                path,
                idle_stop,
            } => {
                st.port = port;
                st.path = path;
                st.idle_stop = idle_stop;
                st.hs.relearn();
            }
            BridgeMsg::Attach { run, io } => st.attach(&myself, run, io),
            BridgeMsg::ChildLine { run, msg, .. } => {
                if st.child.as_ref().is_some_and(|c| c.run == run) {
                    st.on_child(&myself, msg);
                }
            }
            BridgeMsg::ChildAnswer {
                run,
                id,
                line,
                at,
                said,
                ..
            } => {
                if st.child.as_ref().is_some_and(|c| c.run == run)
                    && st.job.as_ref().is_some_and(|j| j.id == id)
                {
                    if let Ok(msg) = serde_json::from_slice::<Value>(&line) {
                        st.on_listing_answer(&msg, Some((&line, &at)));
                    }
                } else if st.child.as_ref().is_some_and(|c| c.run == run)
                    && !st.router.answer_raw(id, &line, &at, said)
                    && let Ok(msg) = serde_json::from_slice::<Value>(&line)
                {
                    st.on_child(&myself, msg);
                }
            }
            BridgeMsg::ChildEof { run, .. } => {
                if st.child.as_ref().is_some_and(|c| c.run == run) {
                    st.detach("its process exited");
                }
            }
            BridgeMsg::HandshakeTimeout { run, id } => {
                // A slow child (`npx -y` downloading its package first) answers
                // late, from the pipe: keep waiting; requests meanwhile wait
                // their own bounded time and fail with -32603. An unanswered
                // `server/discover` is followed by `initialize` (a legacy
                // child may answer nothing before it).
                if st.child.as_ref().is_some_and(|c| c.run == run) && st.hs.waits_for(id) {
                    let router = &mut st.router;
                    if let Some(step) = st.hs.on_timeout(id, || router.own_id()) {
                        tracing::info!(server = %st.name, "stdio bridge: no answer to server/discover after {}s; sending initialize", HANDSHAKE_STEP.as_secs());
                        st.handshake_step(&myself, run, step);
                    } else {
                        tracing::warn!(server = %st.name, "stdio bridge: the child has not answered the handshake after {}s; still waiting", HANDSHAKE_STEP.as_secs());
                    }
                }
            }
            BridgeMsg::Post(post) => st.on_post(post),
            BridgeMsg::Unreadable { post, why } => st.unreadable(post, &why),
            BridgeMsg::Listen {
                session,
                outbox,
                ack,
            } => {
                let answer = if !st.sessions.touch(&session, Instant::now()) {
                    Ack::Refused(StatusCode::NOT_FOUND, refusal("session not found"))
                } else if st.router.has_stream(&session) {
                    Ack::Refused(
                        StatusCode::CONFLICT,
                        refusal("this session has a GET stream open already"),
                    )
                } else {
                    st.router.listen(Some(session), None, None, outbox);
                    Ack::Exchange { session: None }
                };
                let _ = ack.send(answer);
            }
            BridgeMsg::EndSession { session, ack } => {
                let known = st.sessions.remove(&session, Instant::now());
                st.router.end_session(&session);
                let _ = ack.send(known);
            }
            BridgeMsg::Tick => st.tick(),
            BridgeMsg::Ask(k) => {
                for m in st.router.ask(k, Instant::now()) {
                    st.write(&m);
                }
            }
            BridgeMsg::Firewall(v) => st.set_verdicts(v),
            BridgeMsg::Gates(g) => st.set_gates(g),
            BridgeMsg::Relist => st.start_listing(),
            #[cfg(test)]
            BridgeMsg::InjectPanic => panic!("injected panic in the stdio bridge of {}", st.name),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<BridgeMsg>,
        st: &mut BridgeState,
    ) -> Result<(), ActorProcessingErr> {
        st.close("the server is being removed");
        Ok(())
    }
}

fn refusal(message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}})
}

impl BridgeState {
    fn write(&mut self, msg: &Value) {
        if let Some(c) = &self.child {
            let line = line_of(msg);
            self.sent += line.len() as u64;
            c.send(line.into());
        }
    }

    /// Writes a forwarded request (child-side `id`), remembering where its
    /// line starts in the child's stdin until the child has read some of
    /// it or it is answered.
    fn write_request(&mut self, id: u64, line: impl Into<Bytes>) {
        let Some(c) = &self.child else { return };
        let line: Bytes = line.into();
        let router = &self.router;
        self.kept.retain(|k, _| router.is_pending(k));
        self.kept.insert(id, self.sent, line.clone());
        self.sent += line.len() as u64;
        c.send(line);
    }

    /// Whether a message of `size` bytes fits the stdin budget now.
    fn room(&mut self, size: usize) -> bool {
        let Some(c) = &self.child else { return true };
        let queued = self.sent.saturating_sub(c.taken());
        let router = &self.router;
        self.kept.fits(queued, size, |kept| {
            // Forget the copies that can no longer be resent: answered, or
            // begun by the child (see `detach`).
            let read = c.read_by_child();
            kept.retain(|k, start| start >= read && router.is_pending(k));
        })
    }

    /// Refuses a POST for want of budget: `503` with a JSON-RPC error.
    #[allow(clippy::boxed_local)] // callers hold the Post boxed
    fn busy(&self, p: Box<Post>, id: &Value) {
        let m = format!(
            "xy: server {} is busy: {} MiB of messages wait for it already; try again later",
            self.name,
            STDIN_BUDGET >> 20
        );
        tracing::debug!(server = %self.name, "stdio bridge: the stdin budget is spent; 503");
        let _ = p.ack.send(Ack::Refused(
            StatusCode::SERVICE_UNAVAILABLE,
            error(id, -32000, &m, None),
        ));
    }

    fn on_child(&mut self, myself: &ActorRef<BridgeMsg>, mut msg: Value) {
        // The child's own list changed: xy lists it again (and clients
        // are told, as before, by the broadcast below).
        if msg.get("id").is_none()
            && matches!(
                msg.get("method").and_then(Value::as_str),
                Some(
                    "notifications/tools/list_changed"
                        | "notifications/prompts/list_changed"
                        | "notifications/resources/list_changed"
                )
            )
        {
            self.start_listing();
        }
        // On xy's own listen stream: for every listener, without xy's
        // subscription id (each 2026 stream gets its own in `broadcast`).
        if let Some(own) = self.own_listen
            && msg.get("id").is_none()
            && let Some(meta) = msg
                .pointer_mut("/params/_meta")
                .and_then(Value::as_object_mut)
            && meta.get(META_SUBSCRIPTION).and_then(Value::as_u64) == Some(own)
        {
            meta.remove(META_SUBSCRIPTION);
            if meta.is_empty() {
                msg["params"].as_object_mut().map(|p| p.remove("_meta"));
            }
            let method = msg["method"].as_str().unwrap_or("").to_owned();
            if method != "notifications/subscriptions/acknowledged" {
                self.router.broadcast(&method, &msg);
            }
            return;
        }
        let (action, own) = self.router.on_child(msg);
        if std::mem::take(&mut self.router.relist) {
            self.start_listing();
        }
        match action {
            route::ChildAction::Nothing => {}
            route::ChildAction::ToChild(msgs) => {
                for m in msgs {
                    self.write(&m);
                }
            }
            route::ChildAction::Gather(k) => {
                myself.send_after(mrtr::GATHER, move || BridgeMsg::Ask(k));
            }
        }
        let Some(mut own) = own else { return };
        if self
            .job
            .as_ref()
            .is_some_and(|j| own.get("id").and_then(Value::as_u64) == Some(j.id))
        {
            self.on_listing_answer(&own, None);
            return;
        }
        // An error the child answers xy's own request with is repeated to
        // daemon.log and to clients (`-32603 … cannot be reached: …`): its
        // secrets go, and its length is bounded, before anything keeps it.
        if let Some(link) = &self.child
            && let Some(m) = own.pointer_mut("/error/message")
            && let Value::String(text) = m.take()
        {
            *m = Value::String(link.scrub(text));
        }
        let run = self.child.as_ref().map_or(0, |c| c.run);
        let router = &mut self.router;
        if let Some(step) = self.hs.on_answer(&own, || router.own_id()) {
            self.handshake_step(myself, run, step);
        }
    }

    /// Whether a request may wait for a child (one is coming).
    fn child_expected(&self) -> bool {
        self.owner.child_coming()
    }

    fn on_post(&mut self, mut p: Box<Post>) {
        // Any message in a session is a use of it (its idle day restarts).
        let live = p
            .session
            .as_ref()
            .is_some_and(|s| self.sessions.touch(s, Instant::now()));
        if let Some(raw) = p.raw.take() {
            if self.can_forward_raw(&p, &raw) {
                self.forward_raw(p, raw);
                return;
            }
            // It was checked to be JSON when it was peeked at.
            p.msg = serde_json::from_slice(&raw.bytes).unwrap_or(Value::Null);
        }
        let method = p
            .msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = p.msg.get("id").cloned();
        // MCP ids are strings or numbers, never null (JSON-RPC 2.0 allows
        // nothing else either): anything else is an invalid request.
        if method.is_some()
            && id
                .as_ref()
                .is_some_and(|i| !(i.is_string() || i.is_number()))
        {
            let _ = p.ack.send(Ack::Refused(
                StatusCode::BAD_REQUEST,
                refusal("invalid request: an id must be a string or a number"),
            ));
            return;
        }
        // The transport spec: an invalid or unsupported MCP-Protocol-Version
        // is a 400. A 2026-form request (its `_meta` version equal to the
        // header, checked on the HTTP side) is served in `2026-07-28` only,
        // and is told the versions `server/discover` lists; a 2025-form one
        // every version the endpoint takes.
        let unsupported = match p.version.as_deref() {
            Some(v) if p.era2026 => v != VERSION_2026,
            Some(v) => !VERSIONS.contains(&v),
            None => false,
        };
        if unsupported {
            let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
            let requested = p.version.clone().map(Value::String);
            let mut e = self.hs.era.unsupported(&id, requested);
            e["error"]["data"]["supported"] = if p.era2026 {
                json!(self.hs.era.served_2026_versions())
            } else {
                json!(VERSIONS)
            };
            let _ = p.ack.send(Ack::Refused(StatusCode::BAD_REQUEST, e));
            return;
        }
        // A terminated or unknown session gets 404 for every message, not
        // only requests (MCP transport spec: the client initialises again).
        if !p.era2026 && p.session.is_some() && !live && method.as_deref() != Some("initialize") {
            let _ = p.ack.send(Ack::Refused(
                StatusCode::NOT_FOUND,
                refusal("session not found: initialize again"),
            ));
            return;
        }
        match (method, id) {
            // A client's answer to a server-to-client request.
            (None, Some(_)) => {
                if !self.room(p.size) {
                    self.busy(p, &Value::Null);
                    return;
                }
                match self.router.client_response(p.msg, p.session.as_deref()) {
                    Ok(Some(m)) => self.write(&m),
                    Ok(None) => {}
                    Err(route::NotYours) => {
                        let _ = p.ack.send(Ack::Refused(
                            StatusCode::BAD_REQUEST,
                            refusal("this answers a request xy sent to another client"),
                        ));
                        return;
                    }
                }
                let _ = p.ack.send(Ack::Accepted);
            }
            (Some(method), None) => {
                if !self.room(p.size) {
                    self.busy(p, &Value::Null);
                    return;
                }
                match method.as_str() {
                    // xy did its own handshake with the child.
                    "notifications/initialized" => {}
                    "notifications/cancelled" => {
                        let rid = p.msg.pointer("/params/requestId").cloned();
                        if let Some(child_id) =
                            rid.and_then(|r| self.router.cancel(p.session.as_deref(), &r))
                        {
                            let mut m = p.msg;
                            m["params"]["requestId"] = json!(child_id);
                            self.write(&m);
                        }
                    }
                    _ if self.hs.ready() => {
                        let mut m = p.msg;
                        if self.hs.era.init.is_some() {
                            era::strip_envelope(&mut m);
                        }
                        self.write(&m);
                    }
                    _ => {}
                }
                let _ = p.ack.send(Ack::Accepted);
            }
            (Some(method), Some(id)) => self.request(p, &method, &id),
            (None, None) => {
                let _ = p.ack.send(Ack::Refused(
                    StatusCode::BAD_REQUEST,
                    refusal("not a JSON-RPC request, notification or response"),
                ));
            }
        }
    }

    #[allow(clippy::boxed_local)] // callers hold the Post boxed
    fn reply(&self, p: Box<Post>, msg: Value, session: Option<String>) {
        let _ = p.ack.send(Ack::Exchange { session });
        let _ = p.outbox.try_send(msg.into());
    }

    fn tick(&mut self) {
        let now = Instant::now();
        self.router.tasks.expire(now);
        for m in self.router.expire_waiting(now) {
            self.write(&m);
        }
        for child_id in self.router.prune() {
            // A 2026 client closed its response stream: its cancellation.
            self.write(&json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": child_id, "reason": "the client closed the request's stream"},
            }));
        }
        for gone in self.sessions.expire(now) {
            self.router.end_session(&gone);
        }
        let expect = self.child_expected() || self.child.is_some();
        let mut keep = VecDeque::new();
        for (deadline, p) in std::mem::take(&mut self.waiting) {
            if p.outbox.is_closed() {
                continue;
            }
            if now >= deadline || !expect {
                let state = self.owner.state();
                let m = format!(
                    "xy: server {} did not become ready in time (state {state})",
                    self.name
                );
                self.give_up(p, &m);
            } else {
                keep.push_back((deadline, p));
            }
        }
        self.waiting = keep;
        self.waiting_bytes = self.waiting.iter().map(|(_, p)| p.size as u64).sum();
        let (late, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.resend)
            .into_iter()
            .partition(|(_, deadline, _)| now >= *deadline || !expect);
        self.resend = keep;
        if !late.is_empty() {
            let m = format!(
                "xy: server {} did not come back in time (state {})",
                self.name,
                self.owner.state()
            );
            for (id, _, _) in late {
                self.router.fail(id, &m);
            }
        }
        self.idle_check(now);
    }

    /// On demand: a child unused for `idle-stop` (no request doing work,
    /// none in flight, no open stream) is stopped; the server goes `idle`.
    fn idle_check(&mut self, now: Instant) {
        let Some(idle_stop) = self.idle_stop else {
            return;
        };
        if self.router.in_flight() > 0
            || self.router.streams() > 0
            || !self.waiting.is_empty()
            || self.router.tasks.open() > 0
        {
            self.last_activity = now;
            return;
        }
        if self.hs.ready()
            && self.owner.state() == ServerState::Running
            && now.saturating_duration_since(self.last_activity) >= idle_stop
        {
            tracing::info!(server = %self.name, "on demand: idle for {}, stopping the child", humantime::format_duration(idle_stop));
            self.last_activity = now;
            self.owner.idle_stop();
        }
    }
}
