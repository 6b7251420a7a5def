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
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;
use xy_core::protocol::ServerState;

mod budget;
mod child;
mod era;
mod handshake;
pub(crate) mod http;
pub(crate) mod listing;
mod mrtr;
pub(crate) mod raw;
pub(crate) mod route;
mod sessions;
mod tasks;
mod validate;

use crate::mcp::meta::{META_SUBSCRIPTION, unguessable};
use crate::mcp::record::{self, CallStart, Recorder};
use budget::{Kept, STDIN_BUDGET};
pub(crate) use child::ChildStdio;
use child::{ChildLink, FromChild, line_of};
use era::VERSIONS;
use handshake::{HANDSHAKE_STEP, Handshake, Hs, Step};
use raw::RawRequest;
use route::exchanges::{Asks, MrtrCall};
use route::log::Log;
use route::{Outbox, Router, error};
use sessions::Sessions;
use xy_core::protocol::mcp::CallOutcome;
use xy_core::protocol::mcp::wire::VERSION_2026;

use xy_core::firewall::Kind;

use crate::mcp::listing::Listing;
use crate::mcp::verdicts::{HeldBack, Verdicts};

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
    /// One message from the child's stdout.
    ChildLine { run: u64, msg: Value },
    /// The child's answer to request `id` (its id at `at` in `line`), unparsed.
    ChildAnswer {
        run: u64,
        id: u64,
        line: Vec<u8>,
        at: std::ops::Range<usize>,
        said: raw::Said,
    },
    /// The child's stdout closed.
    ChildEof { run: u64 },
    /// A handshake step of spawn `run` has had no answer for a while.
    HandshakeTimeout { run: u64, id: u64 },
    /// A client POST.
    Post(Box<Post>),
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
                };
                match http::serve(listener, ep) {
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
            BridgeMsg::ChildLine { run, msg } => {
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
            BridgeMsg::ChildEof { run } => {
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

/// The kind of a call the firewall decides by name.
fn call_kind(method: &str) -> Option<Kind> {
    match method {
        "tools/call" => Some(Kind::Tool),
        "prompts/get" => Some(Kind::Prompt),
        _ => None,
    }
}

/// The kind of a listing whose answer the firewall filters.
fn list_kind(method: &str) -> Option<Kind> {
    match method {
        "tools/list" => Some(Kind::Tool),
        "prompts/list" => Some(Kind::Prompt),
        _ => None,
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

    fn attach(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, io: ChildStdio) {
        if self.child.is_some() {
            self.detach("it was replaced");
        }
        let me = myself.clone();
        let deliver = move |from: FromChild| {
            let msg = match from {
                FromChild::Line(msg) => BridgeMsg::ChildLine { run, msg },
                FromChild::Answer { id, line, at, said } => BridgeMsg::ChildAnswer {
                    run,
                    id,
                    line,
                    at,
                    said,
                },
                FromChild::Eof => BridgeMsg::ChildEof { run },
            };
            me.cast(msg).is_ok()
        };
        self.kept.clear();
        self.sent = 0;
        self.child = Some(ChildLink::spawn(run, io, self.name.clone(), deliver));
        // A child spawned by `start` (not by a request) gets its full
        // `idle-stop` too, however long the server sat idle before.
        self.last_activity = Instant::now();
        // `server/discover` first, then `initialize` unless the child speaks
        // only 2026 (see `handshake`). Requests across eras are translated
        // (see `request`).
        self.own_listen = None;
        let step = self.hs.begin(self.router.own_id());
        self.handshake_step(myself, run, step);
    }

    /// Carries out a handshake step.
    fn handshake_step(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, step: Step) {
        match step {
            Step::Ask { id, msg } => {
                self.write(&msg);
                myself.send_after(HANDSHAKE_STEP, move || BridgeMsg::HandshakeTimeout {
                    run,
                    id,
                });
            }
            Step::Done { notify, outcome } => {
                if let Some(n) = notify {
                    self.write(&n);
                }
                self.handshake_done(outcome);
            }
        }
    }

    fn handshake_done(&mut self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                tracing::info!(server = %self.name, versions = ?self.hs.era.versions, "stdio bridge: child handshake done");
                self.gone = None;
                self.job = None;
                self.start_listing();
                self.listen_to_child();
                for (id, _, line) in std::mem::take(&mut self.resend) {
                    if self.router.is_pending(id) {
                        self.write_request(id, line);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.name, error = %e, "stdio bridge: child handshake failed");
                let m = format!("xy: server {} cannot be reached: {e}", self.name);
                for (id, _, _) in std::mem::take(&mut self.resend) {
                    self.router.fail(id, &m);
                }
            }
        }
        let waiting: Vec<_> = self.waiting.drain(..).map(|(_, p)| p).collect();
        self.waiting_bytes = 0;
        for p in waiting {
            self.on_post(p);
        }
    }

    /// The child went away: what was in flight fails; sessions and streams
    /// stay. A request of which the child read not one byte (it came after
    /// a `kill -9`, before the child was gone or before xy saw its stdout
    /// close) never reached it: it goes to the next child instead of failing.
    fn detach(&mut self, why: &str) {
        // Bytes the child read = bytes the pipe took - bytes still in it.
        let read = self.child.take().map_or(u64::MAX, |c| c.read_by_child());
        self.hs.detached();
        self.own_listen = None;
        let deadline = Instant::now() + WAIT_FOR_CHILD;
        for (id, (start, line)) in self.kept.take() {
            if start >= read && self.router.is_pending(id) {
                self.resend.push((id, deadline, line));
            }
        }
        let keep: Vec<u64> = self.resend.iter().map(|(id, _, _)| *id).collect();
        let message = format!(
            "xy: server {} is restarting ({why}); the request was lost, send it again",
            self.name
        );
        self.router.fail_all_but(&message, &keep);
        self.tasks_lost(&format!(
            "xy: server {} restarted ({why}); the task was lost with its process",
            self.name
        ));
        self.gone = Some(why.to_owned());
        self.job = None;
    }

    /// The child's open tasks died with it: every client following one is
    /// told it failed, and why; asking about one later says so too.
    fn tasks_lost(&mut self, why: &str) {
        for id in self.router.tasks.child_gone(why, Instant::now()) {
            let task = tasks::failed(&id, why);
            self.router.task_news(&id, &task);
        }
    }

    fn close(&mut self, why: &str) {
        let message = format!("xy: server {} stopped ({why})", self.name);
        self.tasks_lost(&message);
        self.router.close_all(&message);
        for (_, p) in std::mem::take(&mut self.waiting) {
            self.unsent(&p, CallOutcome::ChildGone);
            let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
            let _ = p.ack.send(Ack::Exchange { session: None });
            let _ = p.outbox.try_send(error(&id, -32603, &message, None).into());
        }
        self.waiting_bytes = 0;
        self.sessions.clear();
        self.listening = None;
        self.child = None;
        self.job = None;
        self.kept.clear();
        self.resend.clear();
        self.own_listen = None;
        self.hs.state = Hs::Detached;
    }

    fn on_child(&mut self, myself: &ActorRef<BridgeMsg>, mut msg: Value) {
        // The child's own list changed: xy lists it again (and clients
        // are told, as before, by the broadcast below).
        if msg.get("id").is_none()
            && matches!(
                msg.get("method").and_then(Value::as_str),
                Some("notifications/tools/list_changed" | "notifications/prompts/list_changed")
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

    /// A 2026-only child sends list-changed notifications on a
    /// `subscriptions/listen` stream: xy opens one of its own for the
    /// lists the child says change, and fans them out to every listener
    /// (2025 sessions' GET streams, the 2026 listen streams xy serves).
    fn listen_to_child(&mut self) {
        let Some(d) = self
            .hs
            .era
            .discover
            .as_ref()
            .filter(|_| self.hs.era.init.is_none())
        else {
            return;
        };
        let mut wanted = Map::new();
        for (cap, key) in [
            ("tools", "toolsListChanged"),
            ("prompts", "promptsListChanged"),
            ("resources", "resourcesListChanged"),
        ] {
            if d.pointer(&format!("/capabilities/{cap}/listChanged")) == Some(&json!(true)) {
                wanted.insert(key.to_owned(), json!(true));
            }
        }
        if wanted.is_empty() {
            return;
        }
        let id = self.router.own_id();
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"notifications": wanted}});
        era::add_envelope(&mut msg, None);
        self.own_listen = Some(id);
        self.write(&msg);
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

    /// Whether an unparsed request goes to the child as it is: the child
    /// is ready and speaks the 2025 era, the request comes in a known
    /// session and is one xy does not answer or translate itself.
    fn can_forward_raw(&self, p: &Post, raw: &RawRequest) -> bool {
        self.hs.ready()
            && self.hs.era.init.is_some()
            && !p.era2026
            && p.version.as_deref().is_none_or(|v| VERSIONS.contains(&v))
            && p.session
                .as_ref()
                .is_some_and(|s| self.sessions.contains(s, Instant::now()))
            && !matches!(raw.method.as_str(), "initialize" | "subscriptions/listen")
            && !(tasks::names_task(&raw.method) && self.router.tasks.any_lost())
    }

    /// The fast path of [`BridgeState::request`] (see [`Self::can_forward_raw`]).
    fn forward_raw(&mut self, p: Box<Post>, raw: RawRequest) {
        if !matches!(raw.method.as_str(), "ping" | "server/discover") {
            self.last_activity = Instant::now();
        }
        if let Some(kind) = call_kind(&raw.method)
            && let Err(HeldBack(text)) = self
                .router
                .firewall
                .call(kind, raw.name.as_deref().unwrap_or(""))
        {
            let name = raw.name.clone().unwrap_or_default();
            self.held_back(p, kind, &raw.id, &name, text, false);
            return;
        }
        if !self.room(raw.bytes.len()) {
            if let Some(tool) = raw.tool() {
                let call = self.call_start(&p, tool, None);
                self.record_now(&call, CallOutcome::RpcError);
            }
            self.busy(p, &raw.id);
            return;
        }
        let call = raw.tool().map(|tool| self.call_start(&p, tool, None));
        let caps = p.session.as_deref().and_then(|s| self.sessions.caps(s));
        let Post {
            session,
            outbox,
            ack,
            ..
        } = *p;
        let child_id = self.router.forward_raw(raw.id.clone(), session, outbox);
        self.router.set_asks(child_id, caps, Asks::Direct);
        if let Some(call) = call {
            self.router.track(child_id, call);
        }
        if let Some(kind) = list_kind(&raw.method) {
            self.router.filter(child_id, kind);
        }
        // The line first: the writer task then runs before the HTTP task
        // that waits for the ack.
        self.write_request(child_id, raw.line(child_id));
        let _ = ack.send(Ack::Exchange { session: None });
    }

    fn request(&mut self, mut p: Box<Post>, method: &str, id: &Value) {
        // A probe's ping or discover does no work: it keeps nothing alive.
        if !matches!(method, "ping" | "server/discover") {
            self.last_activity = Instant::now();
        }
        // Sessions are xy's, so they are checked before anything waits.
        // (An unknown session was refused in `on_post`.)
        if !p.era2026 && method != "initialize" && p.session.is_none() {
            let _ = p.ack.send(Ack::Refused(
                StatusCode::BAD_REQUEST,
                refusal(
                    "missing Mcp-Session-Id: send initialize first (2025 era), \
                     or 2026-era _meta",
                ),
            ));
            return;
        }
        match &self.hs.state {
            Hs::Ready => {}
            Hs::Broken(why) => {
                let m = format!("xy: server {} cannot be reached: {why}", self.name);
                self.unsent(&p, CallOutcome::ChildGone);
                self.reply(p, error(id, -32603, &m, None), None);
                return;
            }
            Hs::Detached | Hs::Discovering(_) | Hs::Initializing(_) => {
                if self.child.is_some() || self.child_expected() {
                    if self.waiting_bytes + p.size as u64 > STDIN_BUDGET {
                        self.unsent(&p, CallOutcome::RpcError);
                        self.busy(p, id);
                        return;
                    }
                    if self.owner.state() == ServerState::Idle {
                        self.owner.demand();
                    }
                    self.waiting_bytes += p.size as u64;
                    self.waiting.push_back((Instant::now() + WAIT_FOR_CHILD, p));
                } else {
                    let state = self.owner.state();
                    let m = format!("xy: server {} is {state}", self.name);
                    self.unsent(&p, CallOutcome::ChildGone);
                    self.reply(p, error(id, -32603, &m, None), None);
                }
                return;
            }
        }
        let child_2025 = self.hs.era.init.is_some();
        if tasks::names_task(method)
            && let Some(task) = p.msg.pointer("/params/taskId").and_then(Value::as_str)
            && let Some(why) = self.router.tasks.lost(task)
        {
            // The child that had it is gone: what happened, not "unknown task".
            let answer = if method == "tasks/get" {
                let mut t = tasks::failed(task, why);
                if p.era2026 {
                    t["resultType"] = json!("task");
                }
                json!({"jsonrpc": "2.0", "id": id, "result": t})
            } else {
                error(id, -32603, why, None)
            };
            self.reply(p, answer, None);
            return;
        }
        // xy did the handshake with the child: a client's `initialize` is
        // answered here, never forwarded (in 2026 form it was refused on
        // the HTTP side: the 2026 era has no `initialize`).
        if method == "initialize" {
            let asked = p.msg.pointer("/params/protocolVersion");
            let Some(init) = self.hs.era.initialize_result(asked.and_then(Value::as_str)) else {
                let e = self.hs.era.unsupported(id, asked.cloned());
                self.reply(p, e, None);
                return;
            };
            let session = unguessable();
            if let Some(evicted) = self.sessions.insert(session.clone(), Instant::now()) {
                self.router.end_session(&evicted);
            }
            if let Some(client) = record::client_name(p.msg.pointer("/params/clientInfo")) {
                self.sessions.set_client(&session, client);
            }
            if let Some(caps) = p.msg.pointer("/params/capabilities") {
                self.sessions.set_caps(&session, caps.clone());
            }
            self.sessions
                .set_envelope(&session, era::session_envelope(p.msg.get("params")));
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": init});
            self.reply(p, answer, Some(session));
            return;
        }
        // A 2025 client of a 2026-only child: the 2026 era has no log
        // level to set (it goes in each request's `_meta`); xy takes it.
        if !p.era2026 && !child_2025 && method == "logging/setLevel" {
            // The session's level becomes each later request's opt-in
            // (`_meta`'s `logLevel`), which is how a 2026 child is asked
            // for log messages.
            if let (Some(s), Some(level)) = (
                p.session.as_deref(),
                p.msg.pointer("/params/level").filter(|l| l.is_string()),
            ) && let Some(mut e) = self.sessions.envelope(s).map(|e| (*e).clone())
            {
                e["io.modelcontextprotocol/logLevel"] = level.clone();
                self.sessions.set_envelope(s, e);
            }
            self.reply(p, json!({"jsonrpc": "2.0", "id": id, "result": {}}), None);
            return;
        }
        // xy serves 2026 listen streams itself and fans out what the child
        // announces: a 2025-mode child sends list-changed to its one
        // client, xy; a 2026 child on xy's own listen stream (or, when it
        // serves none, as plain notifications).
        if method == "subscriptions/listen" {
            let filter: Option<Map<String, Value>> = p
                .msg
                .pointer("/params/notifications")
                .and_then(Value::as_object)
                .cloned();
            let accepted = filter.clone().unwrap_or_default();
            let _ = p.outbox.try_send(
                json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": accepted, "_meta": {META_SUBSCRIPTION: id}},
                })
                .into(),
            );
            self.router
                .listen(None, Some(id.clone()), filter, p.outbox.clone());
            let _ = p.ack.send(Ack::Exchange { session: None });
            return;
        }
        if let Some(kind) = call_kind(method) {
            let name = p
                .msg
                .pointer("/params/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if let Err(HeldBack(text)) = self.router.firewall.call(kind, name) {
                let era2026 = p.era2026;
                let name = name.to_owned();
                self.held_back(p, kind, id, &name, text, era2026);
                return;
            }
        }
        if !self.room(p.size) {
            self.unsent(&p, CallOutcome::RpcError);
            self.busy(p, id);
            return;
        }
        // What the child may ask this client, and how (SPEC §19).
        let caps = if p.era2026 {
            p.msg
                .pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities")
                .cloned()
                .map(Arc::new)
        } else {
            p.session.as_deref().and_then(|s| self.sessions.caps(s))
        };
        let mut asks = match (p.era2026, child_2025) {
            (true, true) if mrtr::takes_input(method) => {
                Asks::Mrtr(Box::new(MrtrCall::new(method, mrtr::request_name(&p.msg))))
            }
            (true, true) => Asks::Refuse,
            _ => Asks::Direct,
        };
        if let Asks::Mrtr(_) = asks {
            if p.msg.pointer("/params/requestState").is_some() {
                // A retry: its answers go to the child's waiting questions.
                match self
                    .router
                    .retry(&p.msg, id.clone(), p.outbox.clone(), Instant::now())
                {
                    Ok(to_child) => {
                        for m in to_child {
                            self.write(&m);
                        }
                        let _ = p.ack.send(Ack::Exchange { session: None });
                    }
                    Err((code, m)) => {
                        self.unsent(&p, CallOutcome::RpcError);
                        self.reply(p, error(id, code, m, None), None);
                    }
                }
                return;
            }
            // Answers with no state xy issued answer nothing it waits for:
            // a fresh request, which a 2025 child takes without them.
            if let Some(params) = p.msg.get_mut("params").and_then(Value::as_object_mut) {
                params.remove("inputResponses");
            }
        }
        let call = (method == "tools/call")
            .then(|| record::tool_of(&p.msg).map(str::to_owned))
            .flatten()
            .map(|tool| {
                let client = record::meta_client(&p.msg);
                self.call_start(&p, &tool, client)
            });
        let log = if p.era2026 {
            Log::of_2026(p.msg.pointer("/params/_meta"))
        } else {
            Log::Session
        };
        let envelope = p.session.as_deref().and_then(|s| self.sessions.envelope(s));
        let (msg, answer) =
            self.hs
                .era
                .translate(p.era2026, method, id, p.msg, envelope.as_deref());
        let msg = self.router.forward(msg, p.session, p.outbox, answer);
        let child_id = msg.get("id").and_then(Value::as_u64).unwrap_or(0);
        if !p.era2026 && !child_2025 {
            // A 2025 client, a 2026 child: its `InputRequiredResult`s become
            // requests to the client, their answers the retry.
            asks = Asks::Relay(Box::new(msg.clone()));
        }
        self.router.set_asks(child_id, caps, asks);
        self.router.set_log(child_id, log);
        if let Some(call) = call {
            self.router.track(child_id, call);
        }
        if let Some(kind) = list_kind(method) {
            self.router.filter(child_id, kind);
        }
        self.write_request(child_id, line_of(&msg));
        let _ = p.ack.send(Ack::Exchange { session: None });
    }

    /// Answers a call of a held-back tool (a tool result with `isError`,
    /// so the model reads why) or prompt (a JSON-RPC error) for xy.
    #[allow(clippy::boxed_local)] // callers hold the Post boxed
    fn held_back(
        &self,
        p: Box<Post>,
        kind: Kind,
        id: &Value,
        name: &str,
        text: String,
        era2026: bool,
    ) {
        tracing::info!(server = %self.name, "{text}");
        if kind == Kind::Tool {
            let call = self.call_start(&p, name, record::meta_client(&p.msg));
            self.record_now(&call, CallOutcome::HeldBack);
        }
        let msg = crate::mcp::verdicts::held_back_answer(kind, id, &text, era2026);
        self.reply(p, msg, None);
    }

    /// Lists the child's tools and prompts for the ServerActor (after a
    /// handshake, or a `list_changed`); one listing at a time, another
    /// follows if asked for meanwhile.
    fn start_listing(&mut self) {
        if !self.hs.ready() || self.child.is_none() {
            return;
        }
        if let Some(job) = &mut self.job {
            job.again = true;
            return;
        }
        let era = &self.hs.era;
        let caps = era
            .init
            .as_ref()
            .or(era.discover.as_ref())
            .and_then(|r| r.get("capabilities"));
        let info = era
            .init
            .as_ref()
            .and_then(|i| i.get("serverInfo"))
            .or_else(|| {
                era.discover
                    .as_ref()
                    .and_then(|d| d.pointer("/_meta/io.modelcontextprotocol~1serverInfo"))
            });
        let text = |k: &str| {
            info.and_then(|i| i.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let base = Listing {
            protocol_version: era.versions.last().cloned().unwrap_or_default(),
            server_name: text("name"),
            server_version: text("version"),
            ..Listing::default()
        };
        let with_prompts = crate::mcp::listing::offers(caps, "prompts");
        if !crate::mcp::listing::offers(caps, "tools") && !with_prompts {
            self.owner.listed(base);
            return;
        }
        let era2026 = era.init.is_none();
        let id = self.router.own_id();
        let (job, msg) = listing::Job::start(id, base, era2026, with_prompts);
        self.job = Some(job);
        self.write(&msg);
    }

    fn on_listing_answer(
        &mut self,
        answer: &Value,
        line: Option<(&[u8], &std::ops::Range<usize>)>,
    ) {
        let Some(job) = &mut self.job else { return };
        let router = &mut self.router;
        let next = job.on_answer(answer, line, || router.own_id());
        let again = job.again;
        match next {
            listing::Next::Ask(m) => self.write(&m),
            listing::Next::Done(l) => {
                self.job = None;
                self.owner.listed(l);
                if again {
                    self.start_listing();
                }
            }
            listing::Next::Failed(e) => {
                tracing::warn!(server = %self.name, error = %e, "xy could not list the child's tools");
                self.job = None;
                if again {
                    self.start_listing();
                }
            }
        }
    }

    /// New verdicts: when the tools (or prompts) clients see changed,
    /// every listening client is told to list again.
    fn set_verdicts(&mut self, v: Arc<Verdicts>) {
        let old = std::mem::replace(&mut self.router.firewall, v);
        for (kind, method) in [
            (Kind::Tool, "notifications/tools/list_changed"),
            (Kind::Prompt, "notifications/prompts/list_changed"),
        ] {
            let new = &self.router.firewall;
            if old.visible_names(kind) != new.visible_names(kind)
                || old.policy.mode != new.policy.mode
            {
                tracing::debug!(server = %self.name, "{method}: the firewall changed what clients see");
                self.router
                    .broadcast(method, &json!({"jsonrpc": "2.0", "method": method}));
            }
        }
    }

    #[allow(clippy::boxed_local)] // callers hold the Post boxed
    fn reply(&self, p: Box<Post>, msg: Value, session: Option<String>) {
        let _ = p.ack.send(Ack::Exchange { session });
        let _ = p.outbox.try_send(msg.into());
    }

    /// The record-to-be of a `tools/call` of `tool` that came in `p`;
    /// `client` is what a 2026 request said of itself.
    fn call_start(&self, p: &Post, tool: &str, client: Option<std::sync::Arc<str>>) -> CallStart {
        let client = client
            .or_else(|| {
                p.session
                    .as_deref()
                    .and_then(|s| self.sessions.client(s))
                    .cloned()
            })
            .or_else(|| {
                p.user_agent
                    .as_ref()
                    .and_then(|ua| ua.to_str().ok())
                    .map(Into::into)
            });
        CallStart {
            tool: tool.to_owned(),
            client,
            at: p.at,
            arrived: p.arrived,
        }
    }

    /// Records a call that ends now without an answer from the child.
    fn record_now(&self, call: &CallStart, outcome: CallOutcome) {
        if let Some(r) = &self.router.recorder {
            r.finish(call, outcome);
        }
    }

    /// If `p` (parsed) is a `tools/call`, records that xy answered it
    /// itself, with `outcome`, before any child saw it.
    fn unsent(&self, p: &Post, outcome: CallOutcome) {
        if p.msg.get("method").and_then(Value::as_str) != Some("tools/call") {
            return;
        }
        if let Some(tool) = record::tool_of(&p.msg) {
            let call = self.call_start(p, tool, record::meta_client(&p.msg));
            self.record_now(&call, outcome);
        }
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
                self.unsent(&p, CallOutcome::ChildGone);
                let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
                let state = self.owner.state();
                let m = format!(
                    "xy: server {} did not become ready in time (state {state})",
                    self.name
                );
                let _ = p.ack.send(Ack::Exchange { session: None });
                let _ = p.outbox.try_send(error(&id, -32603, &m, None).into());
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
