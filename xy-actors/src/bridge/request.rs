//! One client request through the stdio bridge (SPEC §13, §19, §20): what
//! xy answers itself (the handshake it did, sessions, listen streams, a
//! held-back tool), what waits for a child, and what is written to the
//! child, on the parsed path and on the raw fast path (D49). A `tools/call`
//! gets its call record in one place, [`BridgeState::settle`], from what
//! became of it ([`Routed`]).

use std::sync::Arc;

use hyper::StatusCode;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use xy_core::firewall::Kind;
use xy_core::protocol::ServerState;
use xy_core::protocol::mcp::CallOutcome;

use super::budget::STDIN_BUDGET;
use super::child::line_of;
use super::era::VERSIONS;
use super::handshake::Hs;
use super::raw::RawRequest;
use super::route::error;
use super::route::exchanges::{Asks, MrtrCall};
use super::route::log::Log;
use super::{Ack, BridgeState, Post, WAIT_FOR_CHILD, era, mrtr, refusal, tasks};
use crate::mcp::gates::Gates;
use crate::mcp::meta::{META_SUBSCRIPTION, unguessable};
use crate::mcp::record::{self, CallStart};
use crate::mcp::verdicts::HeldBack;

/// What became of one client request.
pub(super) enum Routed {
    /// Written to the child under this id: its answer ends a call.
    Forwarded(u64),
    /// Nothing to record: it waits for a child, it opened a stream, or xy
    /// answered a method that is not a call.
    Taken,
    /// xy answers it before any child saw it (an error, a held-back tool).
    Answered(Box<Post>, Value, CallOutcome),
    /// Refused for want of stdin room (`503`).
    Busy(Box<Post>, CallOutcome),
}

/// The kind of a call the firewall decides by name.
fn call_kind(method: &str) -> Option<Kind> {
    match method {
        "tools/call" => Some(Kind::Tool),
        "prompts/get" => Some(Kind::Prompt),
        "resources/read" | "skills/get" => Some(Kind::Resource),
        _ => None,
    }
}

/// The name a call is decided by: a tool's or prompt's `name`, a
/// resource's (or skill's) `uri`.
fn call_name(kind: Kind, params: Option<&Value>) -> &str {
    let key = if kind == Kind::Resource {
        "uri"
    } else {
        "name"
    };
    params
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The kind of a listing whose answer the firewall filters.
fn list_kind(method: &str) -> Option<Kind> {
    match method {
        "tools/list" => Some(Kind::Tool),
        "prompts/list" => Some(Kind::Prompt),
        "resources/list" | "resources/templates/list" | "skills/list" => Some(Kind::Resource),
        _ => None,
    }
}

impl BridgeState {
    /// The capabilities `p`'s client declared: a 2026 request's `_meta`,
    /// a 2025 session's `initialize`.
    pub(super) fn client_caps(&self, p: &Post) -> Option<Arc<Value>> {
        if p.era2026 {
            p.msg
                .pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities")
                .cloned()
                .map(Arc::new)
        } else {
            p.session.as_deref().and_then(|s| self.sessions.caps(s))
        }
    }

    /// One parsed client request: its call record (for a `tools/call`)
    /// is made here, once, from what [`Self::route`] did with it.
    pub(super) fn request(&mut self, p: Box<Post>, method: &str, id: &Value) {
        let call = self.call_of(&p);
        let routed = self.route(p, method, id);
        self.settle(call, routed, id);
    }

    /// Where one parsed client request goes: xy answers it, it waits for a
    /// child, or it is written to the child.
    fn route(&mut self, p: Box<Post>, method: &str, id: &Value) -> Routed {
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
            return Routed::Taken;
        }
        // An idle server's session start, from the ledger (SPEC §26).
        let mut p = match self.answer_from_ledger(p, method, id) {
            Ok(routed) => return routed,
            Err(p) => p,
        };
        match &self.hs.state {
            Hs::Ready => {}
            Hs::Broken(why) => {
                let m = format!("xy: server {} cannot be reached: {why}", self.name);
                return Routed::Answered(p, error(id, -32603, &m, None), CallOutcome::ChildGone);
            }
            Hs::Detached | Hs::Discovering(_) | Hs::Initializing(_) => {
                if self.child.is_some() || self.child_expected() {
                    if self.waiting_bytes + p.size as u64 > STDIN_BUDGET {
                        return Routed::Busy(p, CallOutcome::RpcError);
                    }
                    if self.owner.state() == ServerState::Idle {
                        self.owner.demand();
                    }
                    self.waiting_bytes += p.size as u64;
                    self.waiting.push_back((Instant::now() + WAIT_FOR_CHILD, p));
                    return Routed::Taken;
                }
                let state = self.owner.state();
                let m = format!("xy: server {} is {state}", self.name);
                return Routed::Answered(p, error(id, -32603, &m, None), CallOutcome::ChildGone);
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
            return Routed::Taken;
        }
        // xy did the handshake with the child: a client's `initialize` is
        // answered here, never forwarded (in 2026 form it was refused on
        // the HTTP side: the 2026 era has no `initialize`).
        if method == "initialize" {
            let era = self.hs.era.clone();
            return self.initialize(p, id, &era, None);
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
            return Routed::Taken;
        }
        // xy serves 2026 listen streams itself and fans out what the child
        // announces: a 2025-mode child sends list-changed to its one
        // client, xy; a 2026 child on xy's own listen stream (or, when it
        // serves none, as plain notifications).
        if method == "subscriptions/listen" {
            return self.listen(p, id);
        }
        // What the child may ask this client, and how (SPEC §19); and
        // which of the child's tools it is shown and may call (D210).
        let caps = self.client_caps(&p);
        let called = (method == "tools/call").then(|| call_name(Kind::Tool, p.msg.get("params")));
        if matches!(method, "tools/list" | "tools/call")
            && self.router.gates.must_wait(caps.as_deref(), called)
        {
            self.waiting_bytes += p.size as u64;
            self.waiting.push_back((Instant::now() + WAIT_FOR_CHILD, p));
            return Routed::Taken;
        }
        if let Some(kind) = call_kind(method) {
            let name = call_name(kind, p.msg.get("params"));
            if kind == Kind::Tool
                && let Some(msg) = self.gated(name, caps.as_deref(), id)
            {
                return Routed::Answered(p, msg, CallOutcome::HeldBack);
            }
            if let Err(HeldBack(text)) = self.router.firewall.call(kind, name) {
                // A name xy's listing lacks: list again, so the approval
                // the refusal prints finds it (SPEC §24).
                if !self.router.firewall.knows_name(kind, name) {
                    self.start_listing();
                }
                let era2026 = p.era2026;
                return self.held_back(p, kind, id, text, era2026);
            }
        }
        if !self.room(p.size) {
            return Routed::Busy(p, CallOutcome::RpcError);
        }
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
                return match self
                    .router
                    .retry(&p.msg, id.clone(), p.outbox.clone(), Instant::now())
                {
                    Ok(to_child) => {
                        for m in to_child {
                            self.write(&m);
                        }
                        let _ = p.ack.send(Ack::Exchange { session: None });
                        Routed::Taken
                    }
                    Err((code, m)) => {
                        Routed::Answered(p, error(id, code, m, None), CallOutcome::RpcError)
                    }
                };
            }
            // Answers with no state xy issued answer nothing it waits for:
            // a fresh request, which a 2025 child takes without them.
            if let Some(params) = p.msg.get_mut("params").and_then(Value::as_object_mut) {
                params.remove("inputResponses");
            }
        }
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
        if let Some(kind) = list_kind(method) {
            self.router.filter(child_id, kind);
        }
        self.write_request(child_id, line_of(&msg));
        let _ = p.ack.send(Ack::Exchange { session: None });
        Routed::Forwarded(child_id)
    }

    /// A client's `initialize`, answered from `era` (the child's handshake,
    /// or the ledger's when `ledger` is given: then marked as its answer).
    pub(super) fn initialize(
        &mut self,
        p: Box<Post>,
        id: &Value,
        era: &era::ChildEra,
        ledger: Option<&crate::mcp::from_ledger::FromLedger>,
    ) -> Routed {
        let asked = p.msg.pointer("/params/protocolVersion");
        let Some(mut init) = era.initialize_result(asked.and_then(Value::as_str)) else {
            let e = era.unsupported(id, asked.cloned());
            self.reply(p, e, None);
            return Routed::Taken;
        };
        if let (Some(l), Some(r)) = (ledger, init.as_object_mut())
            && let Some(meta) = r
                .entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
        {
            meta.insert(crate::mcp::from_ledger::META_LEDGER.to_owned(), l.marker());
        }
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
        Routed::Taken
    }

    /// A 2026 client's `subscriptions/listen`: xy serves the stream itself.
    pub(super) fn listen(&mut self, p: Box<Post>, id: &Value) -> Routed {
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
        Routed::Taken
    }

    /// Whether an unparsed request goes to the child as it is: the child
    /// is ready and speaks the 2025 era, the request comes in a known
    /// session and is one xy does not answer or translate itself.
    pub(super) fn can_forward_raw(&self, p: &Post, raw: &RawRequest) -> bool {
        self.hs.ready()
            && self.hs.era.init.is_some()
            && self.router.gates.known
            && self.router.gates.provisional.is_none()
            && !p.era2026
            && p.version.as_deref().is_none_or(|v| VERSIONS.contains(&v))
            && p.session
                .as_ref()
                .is_some_and(|s| self.sessions.contains(s, Instant::now()))
            && !matches!(raw.method.as_str(), "initialize" | "subscriptions/listen")
            && !(tasks::names_task(&raw.method) && self.router.tasks.any_lost())
    }

    /// The fast path of [`BridgeState::request`] (see [`Self::can_forward_raw`]).
    pub(super) fn forward_raw(&mut self, p: Box<Post>, raw: RawRequest) {
        let call = raw.tool().map(|tool| self.call_start(&p, tool, None));
        let id = raw.id.clone();
        let routed = self.route_raw(p, raw);
        self.settle(call, routed, &id);
    }

    fn route_raw(&mut self, p: Box<Post>, raw: RawRequest) -> Routed {
        if !matches!(raw.method.as_str(), "ping" | "server/discover") {
            self.last_activity = Instant::now();
        }
        if let Some(kind) = call_kind(&raw.method)
            && let Err(HeldBack(text)) = self.router.firewall.call(kind, raw.name_of(kind))
        {
            return self.held_back(p, kind, &raw.id, text, false);
        }
        let caps = p.session.as_deref().and_then(|s| self.sessions.caps(s));
        if raw.method == "tools/call"
            && let Some(msg) =
                self.gated(raw.name.as_deref().unwrap_or(""), caps.as_deref(), &raw.id)
        {
            return Routed::Answered(p, msg, CallOutcome::HeldBack);
        }
        if !self.room(raw.bytes.len()) {
            return Routed::Busy(p, CallOutcome::RpcError);
        }
        let Post {
            session,
            outbox,
            ack,
            ..
        } = *p;
        let child_id = self.router.forward_raw(raw.id.clone(), session, outbox);
        self.router.set_asks(child_id, caps, Asks::Direct);
        if let Some(kind) = list_kind(&raw.method) {
            self.router.filter(child_id, kind);
        }
        // The line first: the writer task then runs before the HTTP task
        // that waits for the ack.
        self.write_request(child_id, raw.line(child_id));
        let _ = ack.send(Ack::Exchange { session: None });
        Routed::Forwarded(child_id)
    }

    /// A call of a tool the child offers only to clients of a capability
    /// this one did not declare (D210): refused as the child would have
    /// (`-32021`, naming what it needs), never forwarded.
    fn gated(&self, tool: &str, caps: Option<&Value>, id: &Value) -> Option<Value> {
        let required = self.router.gates.missing(tool, caps)?;
        let (text, data) = Gates::refusal(&self.name, tool, required);
        tracing::info!(server = %self.name, "{text}");
        Some(error(id, mrtr::MISSING_CAPABILITY, &text, Some(data)))
    }

    /// Answers a call of a held-back tool (a tool result with `isError`,
    /// so the model reads why) or prompt (a JSON-RPC error) for xy.
    fn held_back(
        &self,
        p: Box<Post>,
        kind: Kind,
        id: &Value,
        text: String,
        era2026: bool,
    ) -> Routed {
        tracing::info!(server = %self.name, "{text}");
        let msg = crate::mcp::verdicts::held_back_answer(kind, id, &text, era2026);
        Routed::Answered(p, msg, CallOutcome::HeldBack)
    }

    /// Ends what [`Self::route`] began: the one place a `tools/call`'s
    /// record is made or handed to the router (which makes it when the
    /// child answers), and where xy's own answer is sent.
    pub(super) fn settle(&mut self, call: Option<CallStart>, routed: Routed, id: &Value) {
        match routed {
            Routed::Forwarded(child_id) => {
                if let Some(call) = call {
                    self.router.track(child_id, call);
                }
            }
            Routed::Taken => {}
            Routed::Answered(p, msg, outcome) => {
                self.record_now(call.as_ref(), outcome);
                self.reply(p, msg, None);
            }
            Routed::Busy(p, outcome) => {
                self.record_now(call.as_ref(), outcome);
                self.busy(p, id);
            }
        }
    }

    /// Refuses a request xy could not read (SPEC §24): `400`/`-32700`,
    /// recorded when it may have been a `tools/call`.
    pub(super) fn unreadable(&mut self, p: Box<Post>, why: &str) {
        let call = self.call_of(&p);
        self.record_now(call.as_ref(), CallOutcome::RpcError);
        let message = format!(
            "xy: parse error: the request for server {} cannot be read exactly: {why}; not forwarded",
            self.name
        );
        tracing::info!(server = %self.name, "{message}");
        let body = json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700, "message": message, "data": {"server": self.name}}});
        let _ = p.ack.send(Ack::Refused(StatusCode::BAD_REQUEST, body));
    }

    /// The record-to-be of `p` if it is a parsed `tools/call`, or a
    /// `resources/read` of a skill file or app (SPEC §27; its URI is what
    /// the record names).
    fn call_of(&self, p: &Post) -> Option<CallStart> {
        let tool = match p.msg.get("method").and_then(Value::as_str) {
            Some("tools/call") => record::tool_of(&p.msg)?,
            Some("resources/read") => p
                .msg
                .pointer("/params/uri")
                .and_then(Value::as_str)
                .filter(|u| xy_core::firewall::pins_uri(u))?,
            _ => return None,
        };
        Some(self.call_start(p, tool, record::meta_client(&p.msg)))
    }

    /// A request that waited for a child and will not get one: xy answers
    /// `message` for it (and records it, for a `tools/call`).
    pub(super) fn give_up(&mut self, p: Box<Post>, message: &str) {
        let id = p.msg.get("id").cloned().unwrap_or(Value::Null);
        let call = self.call_of(&p);
        let answer = error(&id, -32603, message, None);
        self.settle(
            call,
            Routed::Answered(p, answer, CallOutcome::ChildGone),
            &id,
        );
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
    fn record_now(&self, call: Option<&CallStart>, outcome: CallOutcome) {
        if let (Some(r), Some(call)) = (&self.router.recorder, call) {
            r.finish(call, outcome);
        }
    }
}
