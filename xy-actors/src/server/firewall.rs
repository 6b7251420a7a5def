//! The ServerActor's side of the firewall (SPEC §20): xy's own listing of
//! the child goes to [`crate::server::mcp_state::McpState`], which decides; this
//! carries out what follows — the `tools` events (the listing's change, and
//! one per item newly held back), the desktop notification with `notify
//! #true`, the new verdicts to the bridge, and the `list` view; and an
//! approval of an item xy's latest listing lacks, which waits for a new
//! listing before it is answered.

use std::time::{Duration, SystemTime};

use ractor::{ActorRef, RpcReplyPort};

use xy_core::config::HookEvent;
use xy_core::protocol::EventKind;

use super::ServerActorState;
use crate::bridge::BridgeMsg;
use crate::events::EngineEvent;
use crate::mcp::listing::Listing;
use crate::server::ServerMsg;
use crate::server::mcp_state::{Approval, Held, Refused};

/// How long an approval naming an item xy has not listed waits for the new
/// listing it asks for (a child that changed without `list_changed`):
/// well within the engine's wait for the answer.
const RELIST_WAIT: Duration = Duration::from_secs(3);

type ApproveReply = RpcReplyPort<Result<Vec<String>, Refused>>;

/// Approvals waiting for a new listing, by id.
#[derive(Default)]
pub(crate) struct Parked {
    next: u64,
    waiting: Vec<(u64, Approval, ApproveReply)>,
}

impl ServerActorState {
    /// xy listed the current child's tools (and prompts).
    pub(super) fn on_listed(&mut self, listing: Listing) {
        let now = SystemTime::now();
        let (change, held) = self.mcp.listed(listing, now);
        if let Some(change) = change {
            self.events.publish(EngineEvent {
                name: self.config.name.as_str().into(),
                kind: EventKind::Tools,
                ts: xy_core::time::rfc3339_ms(now),
                from: change.from.map(|n| n.to_string()),
                to: Some(change.to.to_string()),
                reason: change.reason,
            });
        }
        self.firewall_changed(held);
        self.publish();
        // The listing parked approvals waited for.
        for (_, ask, reply) in std::mem::take(&mut self.parked.waiting) {
            self.approve_now(&ask, reply);
        }
    }

    /// `tools_approve`. A name xy's latest listing lacks may be an item the
    /// child added without `list_changed` (its refusal printed the command
    /// the user runs): xy lists again and answers after that listing, or
    /// after [`RELIST_WAIT`] (SPEC §24).
    pub(super) fn tools_approve(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        ask: Approval,
        reply: ApproveReply,
    ) {
        let running = self.lc.phase == xy_core::protocol::ServerState::Running;
        if !running || self.mcp.unknown(&ask.mentioned()).is_empty() {
            return self.approve_now(&ask, reply);
        }
        match &self.bridge {
            Some(b) => {
                let _ = b.actor.cast(BridgeMsg::Relist);
            }
            None => self.relist.notify_one(),
        }
        let id = self.parked.next;
        self.parked.next += 1;
        self.parked.waiting.push((id, ask, reply));
        myself.send_after(RELIST_WAIT, move || ServerMsg::ApproveTimeout(id));
    }

    /// A parked approval's wait is over: answered with what xy lists now.
    pub(super) fn approve_timeout(&mut self, id: u64) {
        let Some(at) = self.parked.waiting.iter().position(|p| p.0 == id) else {
            return;
        };
        let (_, ask, reply) = self.parked.waiting.remove(at);
        self.approve_now(&ask, reply);
    }

    /// Checks and applies in this one message handling: no listing lands
    /// in between (SPEC §28).
    fn approve_now(&mut self, ask: &Approval, reply: ApproveReply) {
        let r = self.mcp.approve(ask, SystemTime::now());
        self.firewall_changed(Vec::new());
        if !reply.is_closed() {
            let _ = reply.send(r);
        }
    }

    /// xy could not list the current child (it never answered MCP, or its
    /// listing failed): logged, and `status` says why.
    pub(super) fn not_listed(&mut self, why: String) {
        tracing::warn!(server = %self.config.name, "xy could not list the server's tools: {why}");
        self.mcp.not_listed(why);
    }

    /// The verdicts changed: the bridge gets them, and each item newly
    /// held back is an event (and a notification).
    pub(super) fn firewall_changed(&mut self, held: Vec<Held>) {
        if let Some(b) = &self.bridge {
            let _ = b.actor.cast(BridgeMsg::Firewall(self.mcp.verdicts()));
        }
        // `list[].tools_held` follows.
        self.publish();
        if held.is_empty() {
            return;
        }
        let ts = xy_core::time::rfc3339_ms(SystemTime::now());
        let mut lines = Vec::new();
        for h in &held {
            let reason = format!(
                "{} {} held back ({}): {}; approve with: xyctl tools approve {} {}",
                h.kind.word(),
                h.name,
                state_word(h.state),
                h.reason,
                self.config.name,
                h.name
            );
            tracing::warn!(server = %self.config.name, "{reason}");
            self.events.publish(EngineEvent {
                name: self.config.name.as_str().into(),
                kind: EventKind::Tools,
                ts: ts.clone(),
                from: None,
                to: Some(state_word(h.state).to_owned()),
                reason: reason.clone(),
            });
            lines.push(format!("{} ({})", h.name, state_word(h.state)));
        }
        let s = if held.len() == 1 { "" } else { "s" };
        let summary = format!(
            "held back {} item{s}: {}; see xyctl tools {}",
            held.len(),
            lines.join(", "),
            self.config.name
        );
        self.fire_hook(HookEvent::ToolsHeld, summary, false);
    }
}

fn state_word(s: xy_core::firewall::ToolState) -> &'static str {
    use xy_core::firewall::ToolState as T;
    match s {
        T::Approved => "approved",
        T::Pending => "pending",
        T::Changed => "changed",
        T::Flagged => "flagged",
        T::Denied => "denied",
    }
}
