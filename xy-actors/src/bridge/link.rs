//! The bridge's current child: attaching its pipes, xy's handshake with
//! it, what happens to requests in flight when it goes (resent, failed or
//! kept waiting), closing the endpoint, and xy's own listing of the child
//! for the firewall (SPEC §13, §20).

use std::sync::Arc;

use ractor::ActorRef;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use xy_core::firewall::Kind;

use super::child::{ChildLink, ChildStdio, FromChild};
use super::handshake::{HANDSHAKE_STEP, Hs, Step};
use super::{BridgeMsg, BridgeState, WAIT_FOR_CHILD, era, listing, tasks};
use crate::mcp::gates::{self, Gates};
use crate::mcp::listing::Listing;
use crate::mcp::verdicts::Verdicts;

impl BridgeState {
    pub(super) fn attach(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, io: ChildStdio) {
        if self.child.is_some() {
            self.detach("it was replaced");
        }
        let me = myself.clone();
        let deliver = move |from: FromChild, held| {
            let msg = match from {
                FromChild::Line(msg) => BridgeMsg::ChildLine {
                    run,
                    msg,
                    _held: held,
                },
                FromChild::Answer { id, line, at, said } => BridgeMsg::ChildAnswer {
                    run,
                    id,
                    line,
                    at,
                    said,
                    _held: held,
                },
                FromChild::Eof => BridgeMsg::ChildEof { run, _held: held },
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
    pub(super) fn handshake_step(&mut self, myself: &ActorRef<BridgeMsg>, run: u64, step: Step) {
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

    pub(super) fn handshake_done(&mut self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                tracing::info!(server = %self.name, versions = ?self.hs.era.versions, "stdio bridge: child handshake done");
                self.gone = None;
                self.job = None;
                // A 2025 child lists for xy as for the most capable client:
                // until its gates are known, a client that lacks a
                // capability waits to list or call (D210). Gates the
                // ledger kept for the listing it served stand until this
                // child's listing confirms or replaces them (D281): a
                // first call need not wait for xy's listing.
                if self.hs.era.init.is_some() {
                    self.router.gates = (self.router.firewall.ledger.as_ref())
                        .and_then(|l| l.gates.clone())
                        .unwrap_or_else(|| Arc::new(Gates::unknown()));
                } else {
                    self.router.gates = Arc::new(Gates::none());
                }
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
    pub(super) fn detach(&mut self, why: &str) {
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
    pub(super) fn tasks_lost(&mut self, why: &str) {
        for id in self.router.tasks.child_gone(why, Instant::now()) {
            let task = tasks::failed(&id, why);
            self.router.task_news(&id, &task);
        }
    }

    pub(super) fn close(&mut self, why: &str) {
        let message = format!("xy: server {} stopped ({why})", self.name);
        self.tasks_lost(&message);
        self.router.close_all(&message);
        for (_, p) in std::mem::take(&mut self.waiting) {
            self.give_up(p, &message);
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

    /// A 2026-only child sends list-changed notifications on a
    /// `subscriptions/listen` stream: xy opens one of its own for the
    /// lists the child says change, and fans them out to every listener
    /// (2025 sessions' GET streams, the 2026 listen streams xy serves).
    pub(super) fn listen_to_child(&mut self) {
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

    /// Lists the child's tools and prompts for the ServerActor (after a
    /// handshake, or a `list_changed`); one listing at a time, another
    /// follows if asked for meanwhile.
    pub(super) fn start_listing(&mut self) {
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
            handshake: Some(Box::new(crate::mcp::listing::Handshake {
                init: era.init.clone(),
                discover: era.discover.clone(),
                versions: era.versions.clone(),
            })),
            ..Listing::default()
        };
        let stages = listing::Stage::offered(caps);
        if stages.is_empty() {
            self.owner.listed(base);
            self.set_gates(Arc::new(Gates::none()));
            return;
        }
        let era2026 = era.init.is_none();
        let id = self.router.own_id();
        let (job, msg) = listing::Job::start(id, base, era2026, &stages);
        self.job = Some(job);
        self.write(&msg);
    }

    pub(super) fn on_listing_answer(
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
                if self.hs.era.init.is_some() {
                    self.owner.probe_gates(
                        gates::listing_key(&l.tools),
                        gates::names(&l.tools).into_iter().collect(),
                    );
                }
                self.owner.listed(*l);
                if again {
                    self.start_listing();
                }
            }
            listing::Next::Failed(e) => {
                tracing::warn!(server = %self.name, error = %e, "xy could not list the child's tools");
                self.job = None;
                if !self.router.gates.known {
                    self.set_gates(Arc::new(Gates::failed(e)));
                }
                if again {
                    self.start_listing();
                }
            }
        }
    }

    /// New verdicts: when the tools (or prompts) clients see changed,
    /// every listening client is told to list again.
    pub(super) fn set_verdicts(&mut self, v: Arc<Verdicts>) {
        let old = std::mem::replace(&mut self.router.firewall, v);
        for (kind, method) in [
            (Kind::Tool, "notifications/tools/list_changed"),
            (Kind::Prompt, "notifications/prompts/list_changed"),
        ] {
            let new = &self.router.firewall;
            // What the ledger answered may differ from what the child now
            // lists though the names are the same (SPEC §26).
            let fingerprint =
                |v: &Verdicts| v.ledger.as_ref().map(|l| l.fingerprint(kind == Kind::Tool));
            let answered_differently = fingerprint(&old)
                .zip(fingerprint(new))
                .is_some_and(|(a, b)| a != b);
            if old.visible_names(kind) != new.visible_names(kind)
                || old.policy.mode != new.policy.mode
                || answered_differently
            {
                tracing::debug!(server = %self.name, "{method}: the firewall changed what clients see");
                self.router
                    .broadcast(method, &json!({"jsonrpc": "2.0", "method": method}));
            }
        }
    }

    /// The child's gates (D210): a change of what some client is shown
    /// tells listening clients to list again; requests that waited for
    /// them go on.
    pub(super) fn set_gates(&mut self, g: Arc<Gates>) {
        let old = std::mem::replace(&mut self.router.gates, g);
        if old.known && old.needs != self.router.gates.needs {
            let method = "notifications/tools/list_changed";
            self.router
                .broadcast(method, &json!({"jsonrpc": "2.0", "method": method}));
        }
        if self.router.gates.known && self.hs.ready() && !self.waiting.is_empty() {
            let waiting: Vec<_> = self.waiting.drain(..).map(|(_, p)| p).collect();
            self.waiting_bytes = 0;
            for p in waiting {
                self.on_post(p);
            }
        }
    }
}
