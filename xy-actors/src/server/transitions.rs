//! What a ServerActor keeps and announces about each state change: the
//! last transitions for `status`, the event on the bus (SPEC §15), and the
//! `hooks { }` / `notify` commands a change fires (SPEC §16).

use std::time::SystemTime;

use xy_core::protocol::{ServerState, Transition};

use super::{MAX_TRANSITIONS, ServerActorState};
use crate::events::EngineEvent;

impl ServerActorState {
    pub(super) fn record(&mut self, from: ServerState, to: ServerState, reason: String) {
        tracing::debug!(server = %self.config.name, %from, %to, %reason, "transition");
        if self.transitions.len() == MAX_TRANSITIONS {
            self.transitions.pop_front();
        }
        let ts = xy_core::time::rfc3339_ms(SystemTime::now());
        self.events.publish(EngineEvent {
            name: self.config.name.as_str().into(),
            kind: xy_core::protocol::EventKind::State,
            ts: ts.clone(),
            from: Some(from.as_str().to_owned()),
            to: Some(to.as_str().to_owned()),
            reason: reason.clone(),
        });
        self.transitions.push_back(Transition {
            from,
            to,
            ts,
            reason: reason.clone(),
        });
        self.hook_on_transition(from, to, reason);
    }

    /// Fires `on-failed`, `on-restart` and `on-recovered` (running again
    /// after `failed`). Detached: it never delays the lifecycle.
    pub(super) fn hook_on_transition(
        &mut self,
        from: ServerState,
        to: ServerState,
        reason: String,
    ) {
        use xy_core::config::HookEvent;
        let event = match (from, to) {
            (_, ServerState::Failed) => {
                self.down = true;
                HookEvent::Failed
            }
            (_, ServerState::Restarting) => HookEvent::Restart,
            (_, ServerState::Running) if self.down => {
                self.down = false;
                HookEvent::Recovered
            }
            (_, ServerState::Stopped) => {
                self.down = false;
                return;
            }
            _ => return,
        };
        // From `starting` nothing exited: the spawn itself failed.
        let exited = from != ServerState::Starting;
        self.fire_hook(event, reason, exited);
    }

    pub(super) fn fire_hook(
        &mut self,
        event: xy_core::config::HookEvent,
        reason: String,
        exited: bool,
    ) {
        if self.config.hooks.is_empty() {
            return;
        }
        let ctx = crate::hooks::HookContext {
            server: self.config.name.clone(),
            event,
            reason,
            exit_code: self
                .last_exit
                .as_ref()
                .filter(|_| exited)
                .and_then(|e| e.code),
            url: xy_core::protocol::endpoint_url(self.config.port, &self.config.path),
        };
        self.hooks.fire(&self.config.hooks, ctx);
    }
}
