//! The BridgeActor (SPEC §13): serves one stdio server's child over
//! streamable HTTP to any number of clients of either MCP era. It owns the
//! listener, the child's stdin/stdout, xy's own handshake with the child,
//! the 2025 sessions xy mints and the routing tables; the ServerActor that
//! spawned it owns the process and tells it about each new child.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::StatusCode;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use xy_core::protocol::ServerState;

pub(crate) mod http;
pub(crate) mod raw;
pub(crate) mod route;

use raw::RawRequest;
use route::{META_SUBSCRIPTION, META_VERSION, Outbox, Router, V2026};

/// How long a request waits for a child that is starting or restarting.
const WAIT_FOR_CHILD: Duration = Duration::from_secs(30);
/// After this long without an answer to a handshake step, xy logs a
/// warning (and keeps waiting: a child may be slow to start).
const HANDSHAKE_STEP: Duration = Duration::from_secs(10);
/// Longest line accepted from a child's stdout.
const MAX_CHILD_LINE: usize = 64 * 1024 * 1024;
/// The 2025-era version xy offers a child in `initialize`.
const V2025: &str = "2025-11-25";
/// Every MCP version the endpoint takes in `MCP-Protocol-Version`.
const VERSIONS: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", V2025, V2026];

/// A child's protocol pipes.
pub(crate) struct ChildStdio {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
}

/// One POST from a client.
pub(crate) struct Post {
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
}

/// Where xy's handshake with the current child stands.
#[derive(Debug, Clone, PartialEq)]
enum Hs {
    /// No child attached.
    Detached,
    /// `server/discover` sent (own id).
    Discovering(u64),
    /// `initialize` sent (own id).
    Initializing(u64),
    /// Requests flow.
    Ready,
    /// The child answered neither era; requests fail with this.
    Broken(String),
}

/// What the current child speaks, from xy's handshake.
#[derive(Debug, Clone, Default)]
struct ChildEra {
    /// The child's `initialize` result (2025 era).
    init: Option<Value>,
    /// The child's `server/discover` result, when it lists 2026.
    discover: Option<Value>,
    /// Every version the child said it supports.
    versions: Vec<String>,
}

struct ChildLink {
    run: u64,
    /// Lines for the child, in order.
    stdin: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes the kernel took into the child's stdin pipe so far.
    in_pipe: Arc<AtomicU64>,
    /// That pipe (held open by the writer task as long as this link lives).
    stdin_fd: RawFd,
    _tasks: Vec<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a bridge needs of the ServerActor that owns it (implemented in
/// `server/stdio.rs`, so the bridge does not name the server's messages).
pub(crate) trait Owner: Send + Sync + 'static {
    /// The server's state now.
    fn state(&self) -> ServerState;
    /// A request arrived for an idle on-demand server: spawn its child.
    fn demand(&self);
    /// Nothing used the on-demand server for `idle-stop`: stop its child.
    fn idle_stop(&self);
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
    /// The last request that did work, or busy tick (in flight, streams).
    last_activity: Instant,
    listening: Option<http::Listening>,
    child: Option<ChildLink>,
    hs: Hs,
    era: ChildEra,
    router: Router,
    sessions: HashMap<String, ()>,
    waiting: VecDeque<(Instant, Box<Post>)>,
    /// Why the last child went away (named in the errors of its requests).
    gone: Option<String>,
    /// Bytes sent to the current child's writer so far (the offset of the
    /// next line in its stdin stream).
    sent: u64,
    /// Forwarded requests in flight to the current child, by child-side
    /// id: the offset of their line in its stdin stream, and the line.
    outgoing: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Requests that never reached a child that died (sent after it was
    /// killed, before xy saw its stdout close): written again to the next
    /// child once its handshake is done, or failed at the deadline.
    resend: Vec<(u64, Instant, Vec<u8>)>,
    /// A child of this server refused `initialize` (2026 only): later
    /// children get `server/discover` first (an SDK server may exit after
    /// refusing the handshake it does not speak).
    discover_first: bool,
    /// The handshake steps tried with the current child.
    tried_initialize: bool,
    tried_discover: bool,
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
        Ok(BridgeState {
            name: args.name,
            port: args.port,
            path: args.path,
            owner: args.owner,
            idle_stop: args.idle_stop,
            last_activity: Instant::now(),
            listening: None,
            child: None,
            hs: Hs::Detached,
            era: ChildEra::default(),
            router: Router::default(),
            sessions: HashMap::new(),
            waiting: VecDeque::new(),
            gone: None,
            sent: 0,
            outgoing: BTreeMap::new(),
            resend: Vec::new(),
            discover_first: false,
            tried_initialize: false,
            tried_discover: false,
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
            BridgeMsg::Configure {
                port,
                path,
                idle_stop,
            } => {
                st.port = port;
                st.path = path;
                st.idle_stop = idle_stop;
                // The command may have changed: learn its era again.
                st.discover_first = false;
            }
            BridgeMsg::Attach { run, io } => st.attach(&myself, run, io),
            BridgeMsg::ChildLine { run, msg } => {
                if st.child.as_ref().is_some_and(|c| c.run == run) {
                    st.on_child(&myself, msg);
                }
            }
            BridgeMsg::ChildAnswer { run, id, line, at } => {
                if st.child.as_ref().is_some_and(|c| c.run == run)
                    && !st.router.answer_raw(id, &line, &at)
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
                // their own bounded time and fail with -32603.
                if st.child.as_ref().is_some_and(|c| c.run == run)
                    && matches!(st.hs, Hs::Initializing(i) | Hs::Discovering(i) if i == id)
                {
                    tracing::warn!(server = %st.name, "stdio bridge: the child has not answered the handshake after {}s; still waiting", HANDSHAKE_STEP.as_secs());
                }
            }
            BridgeMsg::Post(post) => st.on_post(post),
            BridgeMsg::Listen {
                session,
                outbox,
                ack,
            } => {
                let answer = if !st.sessions.contains_key(&session) {
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
                let known = st.sessions.remove(&session).is_some();
                st.router.end_session(&session);
                let _ = ack.send(known);
            }
            BridgeMsg::Tick => st.tick(),
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

/// The message of a JSON-RPC error answer, for logs.
fn error_text(answer: &Value) -> String {
    answer
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no usable result")
        .to_owned()
}

fn refusal(message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}})
}

fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// Bytes written into a pipe that its reader has not read (`FIONREAD`,
/// asked on the write end; Linux answers for the pipe's one buffer). 0 when
/// the system does not say (macOS answers for the write end's own, empty
/// buffer): then every written request counts as read.
#[allow(unsafe_code)]
fn unread_bytes(fd: RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD stores one c_int at the pointer; `fd` is the child's
    // stdin pipe, held open by the writer task while its ChildLink lives.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r == 0 {
        u64::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

/// 128 random bits, hex: a session id nobody can guess.
fn new_session_id() -> String {
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

/// One message as a line for the child's stdin. `serde_json::to_writer`
/// writes straight into the buffer; `Value::to_string` goes through
/// `fmt::Display` a piece at a time (D49).
fn line_of(msg: &Value) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    // A `Value` always serialises (its keys are strings).
    let _ = serde_json::to_writer(&mut line, msg);
    line.push(b'\n');
    line
}

impl BridgeState {
    fn write(&mut self, msg: &Value) {
        if let Some(c) = &self.child {
            let line = line_of(msg);
            self.sent += line.len() as u64;
            let _ = c.stdin.send(line);
        }
    }

    /// Writes a forwarded request (child-side `id`), remembering where its
    /// line starts in the child's stdin until it is answered.
    fn write_request(&mut self, id: u64, line: Vec<u8>) {
        let Some(c) = &self.child else { return };
        let router = &self.router;
        self.outgoing.retain(|k, _| router.is_pending(*k));
        self.outgoing.insert(id, (self.sent, line.clone()));
        self.sent += line.len() as u64;
        let _ = c.stdin.send(line);
    }

    fn attach(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, io: ChildStdio) {
        if self.child.is_some() {
            self.detach("it was replaced");
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let in_pipe = Arc::new(AtomicU64::new(0));
        let stdin_fd = io.stdin.as_raw_fd();
        let mut stdin = io.stdin;
        let took = Arc::clone(&in_pipe);
        let writer = tokio::spawn(async move {
            let mut batch = Vec::new();
            'lines: while let Some(line) = rx.recv().await {
                // Batch what is queued already: one write for all of it.
                batch.clear();
                batch.extend_from_slice(&line);
                while let Ok(line) = rx.try_recv() {
                    batch.extend_from_slice(&line);
                }
                let mut off = 0;
                while off < batch.len() {
                    match stdin.write(&batch[off..]).await {
                        Ok(0) | Err(_) => break 'lines,
                        Ok(n) => {
                            off += n;
                            took.fetch_add(n as u64, Ordering::AcqRel);
                        }
                    }
                }
            }
            // The child is gone (EPIPE): keep the pipe open until the link
            // drops, `detach` asks it how much the child never read.
            while rx.recv().await.is_some() {}
            drop(stdin);
        });
        let me = myself.clone();
        let name = self.name.clone();
        let reader = tokio::spawn(async move {
            let mut out = BufReader::with_capacity(64 * 1024, io.stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                let n = (&mut out)
                    .take(MAX_CHILD_LINE as u64 + 1)
                    .read_until(b'\n', &mut buf)
                    .await
                    .unwrap_or_default();
                if n == 0 {
                    break;
                }
                if buf.len() > MAX_CHILD_LINE {
                    tracing::warn!(server = %name, "child wrote a line over 64 MiB; dropped");
                    // Skip the rest of that line.
                    let mut rest = Vec::new();
                    let _ = out.read_until(b'\n', &mut rest).await;
                    continue;
                }
                let len = buf.trim_ascii_end().len();
                buf.truncate(len);
                // An answer goes on unparsed; the actor decides (D49).
                if let Some((id, at)) = raw::answer_id(&buf) {
                    let line = std::mem::replace(&mut buf, Vec::with_capacity(256));
                    if me
                        .cast(BridgeMsg::ChildAnswer { run, id, line, at })
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
                match serde_json::from_slice::<Value>(&buf) {
                    Ok(msg) if msg.is_object() => {
                        if me.cast(BridgeMsg::ChildLine { run, msg }).is_err() {
                            return;
                        }
                    }
                    _ => {
                        let text = String::from_utf8_lossy(&buf);
                        let text = text.trim();
                        if !text.is_empty() {
                            tracing::debug!(server = %name, line = %text, "child wrote a non-JSON-RPC line on stdout");
                        }
                    }
                }
            }
            let _ = me.cast(BridgeMsg::ChildEof { run });
        });
        self.outgoing.clear();
        self.sent = 0;
        self.child = Some(ChildLink {
            run,
            stdin: tx,
            in_pipe,
            stdin_fd,
            _tasks: vec![AbortOnDrop(writer), AbortOnDrop(reader)],
        });
        self.era = ChildEra::default();
        // A child spawned by `start` (not by a request) gets its full
        // `idle-stop` too, however long the server sat idle before.
        self.last_activity = Instant::now();
        // `initialize` first: SDK servers of both eras pick one era per
        // stdio connection from its first message, and the 2025 era is the
        // one xy can serve to clients of both eras (2026 requests are
        // translated, see `request`). A 2026-only child refuses it and then
        // gets `server/discover` (first, for its successors).
        self.tried_initialize = false;
        self.tried_discover = false;
        if self.discover_first {
            self.send_discover(myself, run);
        } else {
            self.send_initialize(myself, run);
        }
    }

    /// The current handshake step failed: try the other era, or give up.
    fn next_handshake_step(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, why: &str) {
        if !self.tried_discover {
            self.send_discover(myself, run);
        } else if !self.tried_initialize {
            self.send_initialize(myself, run);
        } else {
            self.handshake_done(Err(format!(
                "the child accepted neither initialize nor server/discover ({why})"
            )));
        }
    }

    fn send_discover(&mut self, myself: &ActorRef<BridgeMsg>, run: u64) {
        self.tried_discover = true;
        let id = self.router.own_id();
        self.hs = Hs::Discovering(id);
        self.write(&json!({
            "jsonrpc": "2.0", "id": id, "method": "server/discover",
            "params": {"_meta": {
                META_VERSION: V2026,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "xy", "version": xy_core::VERSION},
            }},
        }));
        myself.send_after(HANDSHAKE_STEP, move || BridgeMsg::HandshakeTimeout {
            run,
            id,
        });
    }

    fn send_initialize(&mut self, myself: &ActorRef<BridgeMsg>, run: u64) {
        self.tried_initialize = true;
        let id = self.router.own_id();
        self.hs = Hs::Initializing(id);
        self.write(&json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": V2025,
                "capabilities": {"sampling": {}, "elicitation": {}},
                "clientInfo": {"name": "xy", "version": xy_core::VERSION},
            },
        }));
        myself.send_after(HANDSHAKE_STEP, move || BridgeMsg::HandshakeTimeout {
            run,
            id,
        });
    }

    fn handshake_done(&mut self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                tracing::info!(server = %self.name, versions = ?self.era.versions, "stdio bridge: child handshake done");
                self.hs = Hs::Ready;
                self.gone = None;
                for (id, _, line) in std::mem::take(&mut self.resend) {
                    if self.router.is_pending(id) {
                        self.write_request(id, line);
                    }
                }
                let waiting: Vec<_> = self.waiting.drain(..).map(|(_, p)| p).collect();
                for p in waiting {
                    self.on_post(p);
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.name, error = %e, "stdio bridge: child handshake failed");
                let m = format!("xy: server {} cannot be reached: {e}", self.name);
                for (id, _, _) in std::mem::take(&mut self.resend) {
                    self.router.fail(id, &m);
                }
                self.hs = Hs::Broken(e);
                let waiting: Vec<_> = self.waiting.drain(..).map(|(_, p)| p).collect();
                for p in waiting {
                    self.on_post(p);
                }
            }
        }
    }

    /// The child went away: what was in flight fails; sessions and streams
    /// stay. A request of which the child read not one byte (it came after
    /// a `kill -9`, before the child was gone or before xy saw its stdout
    /// close) never reached it: it goes to the next child instead of failing.
    fn detach(&mut self, why: &str) {
        // Bytes the child read = bytes the pipe took - bytes still in it.
        let read = self.child.take().map_or(u64::MAX, |c| {
            c.in_pipe
                .load(Ordering::Acquire)
                .saturating_sub(unread_bytes(c.stdin_fd))
        });
        self.hs = Hs::Detached;
        let deadline = Instant::now() + WAIT_FOR_CHILD;
        for (id, (start, line)) in std::mem::take(&mut self.outgoing) {
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
        self.gone = Some(why.to_owned());
    }

    fn close(&mut self, why: &str) {
        let message = format!("xy: server {} stopped ({why})", self.name);
        self.router.close_all(&message);
        for (_, p) in self.waiting.drain(..) {
            let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
            let _ = p.ack.send(Ack::Exchange { session: None });
            let _ = p.outbox.try_send(error(&id, -32603, &message, None).into());
        }
        self.sessions.clear();
        self.listening = None;
        self.child = None;
        self.outgoing.clear();
        self.resend.clear();
        self.hs = Hs::Detached;
    }

    fn on_child(&mut self, myself: &ActorRef<BridgeMsg>, msg: Value) {
        let (action, own) = self.router.on_child(msg);
        if let route::ChildAction::ToChild(m) = action {
            self.write(&m);
        }
        let Some(own) = own else { return };
        let id = own.get("id").and_then(Value::as_u64);
        let run = self.child.as_ref().map_or(0, |c| c.run);
        match self.hs.clone() {
            Hs::Initializing(i) if id == Some(i) => {
                if let Some(result) = own.get("result") {
                    let v = result
                        .get("protocolVersion")
                        .and_then(Value::as_str)
                        .unwrap_or(V2025)
                        .to_owned();
                    self.era.versions = vec![v];
                    self.era.init = Some(result.clone());
                    self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
                    self.handshake_done(Ok(()));
                } else {
                    // A 2026-only child refuses the handshake.
                    self.discover_first = true;
                    let why = error_text(&own);
                    self.next_handshake_step(myself, run, &why);
                }
            }
            Hs::Discovering(d) if id == Some(d) => {
                let versions: Vec<String> = own
                    .pointer("/result/supportedVersions")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if own.get("result").is_some() && versions.iter().any(|v| v.as_str() >= V2026) {
                    self.era.discover = own.get("result").cloned();
                    self.era.versions = versions;
                    self.handshake_done(Ok(()));
                } else {
                    self.discover_first = false;
                    let why = error_text(&own);
                    self.next_handshake_step(myself, run, &why);
                }
            }
            _ => {}
        }
    }

    /// Whether a request may wait for a child (one is coming).
    fn child_expected(&self) -> bool {
        matches!(
            self.owner.state(),
            ServerState::Starting
                | ServerState::Running
                | ServerState::Restarting
                | ServerState::Idle
        )
    }

    fn on_post(&mut self, mut p: Box<Post>) {
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
        // is a 400.
        if let Some(v) = p.version.as_deref()
            && !VERSIONS.contains(&v)
        {
            let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
            let mut e = self.unsupported(&id, Some(json!(v)));
            if self.era.versions.is_empty() || self.era.init.is_some() {
                e["error"]["data"]["supported"] = json!(VERSIONS);
            }
            let _ = p.ack.send(Ack::Refused(StatusCode::BAD_REQUEST, e));
            return;
        }
        // A terminated or unknown session gets 404 for every message, not
        // only requests (MCP transport spec: the client initialises again).
        if !p.era2026
            && p.session
                .as_ref()
                .is_some_and(|s| !self.sessions.contains_key(s))
            && method.as_deref() != Some("initialize")
        {
            let _ = p.ack.send(Ack::Refused(
                StatusCode::NOT_FOUND,
                refusal("session not found: initialize again"),
            ));
            return;
        }
        match (method, id) {
            // A client's answer to a server-to-client request.
            (None, Some(_)) => {
                if let Some(m) = self.router.client_response(p.msg) {
                    self.write(&m);
                }
                let _ = p.ack.send(Ack::Accepted);
            }
            (Some(method), None) => {
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
                    _ if self.hs == Hs::Ready => {
                        let mut m = p.msg;
                        if self.era.init.is_some() {
                            route::strip_envelope(&mut m);
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
        self.hs == Hs::Ready
            && self.era.init.is_some()
            && !p.era2026
            && p.version.as_deref().is_none_or(|v| VERSIONS.contains(&v))
            && p.session
                .as_ref()
                .is_some_and(|s| self.sessions.contains_key(s))
            && !matches!(raw.method.as_str(), "initialize" | "subscriptions/listen")
    }

    /// The fast path of [`BridgeState::request`] (see [`Self::can_forward_raw`]).
    fn forward_raw(&mut self, p: Box<Post>, raw: RawRequest) {
        if !matches!(raw.method.as_str(), "ping" | "server/discover") {
            self.last_activity = Instant::now();
        }
        let Post {
            session,
            outbox,
            ack,
            ..
        } = *p;
        let child_id = self.router.forward_raw(raw.id.clone(), session, outbox);
        // The line first: the writer task then runs before the HTTP task
        // that waits for the ack.
        self.write_request(child_id, raw.line(child_id));
        let _ = ack.send(Ack::Exchange { session: None });
    }

    fn request(&mut self, p: Box<Post>, method: &str, id: &Value) {
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
        match &self.hs {
            Hs::Ready => {}
            Hs::Broken(why) => {
                let m = format!("xy: server {} cannot be reached: {why}", self.name);
                self.reply(p, error(id, -32603, &m, None), None);
                return;
            }
            Hs::Detached | Hs::Discovering(_) | Hs::Initializing(_) => {
                if self.child.is_some() || self.child_expected() {
                    if self.owner.state() == ServerState::Idle {
                        self.owner.demand();
                    }
                    self.waiting.push_back((Instant::now() + WAIT_FOR_CHILD, p));
                } else {
                    let state = self.owner.state();
                    let m = format!("xy: server {} is {state}", self.name);
                    self.reply(p, error(id, -32603, &m, None), None);
                }
                return;
            }
        }
        let child_2025 = self.era.init.is_some();
        let child_2026 = self.era.discover.is_some();
        // xy did the handshake with the child: a client's `initialize` (even
        // one carrying 2026 metadata) is answered here, never forwarded.
        if method == "initialize" {
            let Some(init) = self.era.init.clone() else {
                let requested = p.msg.pointer("/params/protocolVersion").cloned();
                let e = self.unsupported(id, requested);
                self.reply(p, e, None);
                return;
            };
            let mut init = init;
            // MCP version negotiation: a server that supports the version
            // the client asks for answers with that same version (an older
            // SDK client refuses a newer one). xy relays any 2025-era
            // version up to the child's own, which is what it speaks.
            let child = init.get("protocolVersion").and_then(Value::as_str);
            if let Some(asked) = p
                .msg
                .pointer("/params/protocolVersion")
                .and_then(Value::as_str)
                && VERSIONS.contains(&asked)
                && asked < V2026
                && child.is_some_and(|c| asked <= c)
            {
                init["protocolVersion"] = json!(asked);
            }
            let session = new_session_id();
            self.sessions.insert(session.clone(), ());
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": init});
            self.reply(p, answer, Some(session));
            return;
        }
        if !p.era2026 && !child_2025 {
            let requested = p.msg.pointer("/params/protocolVersion").cloned();
            let e = self.unsupported(id, requested);
            self.reply(p, e, None);
            return;
        }
        // A 2025-mode child sends list-changed to its one client, xy: xy
        // serves 2026 listen streams itself and fans them out.
        if method == "subscriptions/listen" && child_2025 {
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
        let mut msg = p.msg;
        let answer = if p.era2026 && !child_2026 {
            // A 2026-era client, a child in the 2025 era: the request loses
            // the 2026 envelope (such a child refuses it), its answer gains
            // `resultType`. `server/discover` is answered from the child's
            // handshake once a `ping` shows the child answers (so the `mcp`
            // probe still finds a wedged child).
            route::strip_envelope(&mut msg);
            if method == "server/discover" {
                let discover = self.discover_from_init();
                msg = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
                route::Answer::Replace(discover)
            } else {
                route::Answer::Complete {
                    cacheable: route::cacheable(method),
                }
            }
        } else {
            route::Answer::AsIs
        };
        let msg = self.router.forward(msg, p.session, p.outbox, answer);
        let child_id = msg.get("id").and_then(Value::as_u64).unwrap_or(0);
        self.write_request(child_id, line_of(&msg));
        let _ = p.ack.send(Ack::Exchange { session: None });
    }

    /// A `server/discover` result for 2026-era clients of a 2025-era child,
    /// from the child's `initialize` result.
    fn discover_from_init(&self) -> Value {
        let init = self.era.init.clone().unwrap_or_default();
        let mut versions = self.era.versions.clone();
        versions.push(V2026.to_owned());
        let mut r = json!({
            "supportedVersions": versions,
            "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
        });
        if let Some(i) = init.get("instructions") {
            r["instructions"] = i.clone();
        }
        if let Some(info) = init.get("serverInfo") {
            r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": info});
        }
        r
    }

    fn unsupported(&self, id: &Value, requested: Option<Value>) -> Value {
        error(
            id,
            -32022,
            "Unsupported protocol version",
            Some(json!({
                "requested": requested.unwrap_or(Value::Null),
                "supported": self.era.versions,
            })),
        )
    }

    #[allow(clippy::boxed_local)] // callers hold the Post boxed
    fn reply(&self, p: Box<Post>, msg: Value, session: Option<String>) {
        let _ = p.ack.send(Ack::Exchange { session });
        let _ = p.outbox.try_send(msg.into());
    }

    fn tick(&mut self) {
        self.router.prune();
        let now = Instant::now();
        let expect = self.child_expected() || self.child.is_some();
        let mut keep = VecDeque::new();
        for (deadline, p) in self.waiting.drain(..) {
            if p.outbox.is_closed() {
                continue;
            }
            if now >= deadline || !expect {
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
        if self.router.in_flight() > 0 || self.router.streams() > 0 || !self.waiting.is_empty() {
            self.last_activity = now;
            return;
        }
        if self.hs == Hs::Ready
            && self.owner.state() == ServerState::Running
            && now.saturating_duration_since(self.last_activity) >= idle_stop
        {
            tracing::info!(server = %self.name, "on demand: idle for {}, stopping the child", humantime::format_duration(idle_stop));
            self.last_activity = now;
            self.owner.idle_stop();
        }
    }
}
