//! Publishing a ServerActor's [`ServerSnapshot`]: only when a field a
//! reader sees changed, so idle servers wake nobody.

use std::sync::Arc;

use xy_core::protocol::{Health, ServerState};

use super::ServerActorState;
use crate::snapshot::{BridgeGate, FirewallGate, RemoteGate, RowCache, ServerSnapshot};

impl ServerActorState {
    /// Publishes the `list` view if any part of it changed (receivers are
    /// woken only then).
    pub(super) fn publish(&self) {
        let pid = self
            .child
            .handle
            .as_ref()
            .filter(|_| self.leader_alive)
            .map(|h| h.pid());
        let started = self
            .lc
            .run_started
            .filter(|_| self.lc.phase == ServerState::Running);
        let default_health = Health::default();
        let health = self
            .tracker
            .as_ref()
            .map_or(&default_health, |t| t.health());
        let url = self.config.url();
        let remote_url = self.config.remote.as_ref().map(|r| r.url.as_str());
        let bridge_key = self
            .bridge
            .as_ref()
            .map(|b| (b.actor.get_id(), b.listening));
        self.snapshot.send_if_modified(|s| {
            let same = s.state == self.lc.phase
                && s.pid == pid
                && s.port == self.config.port
                && s.transport == self.config.transport
                && s.url == url
                && s.remote_url.as_deref() == remote_url
                && s.started == started
                && s.restart_count == self.lc.restart_count
                && s.last_exit == self.last_exit
                && s.health == *health
                && s.tool_count == self.mcp.tool_count()
                && s.tools_held == self.mcp.held_count()
                && s.agent_allow_restart == self.config.agent.allow_restart
                && s.grace == self.config.stop.grace
                && s.child_coming == self.lc.child_coming()
                && s.bridge.as_ref().map(BridgeGate::key) == bridge_key
                && s.firewall.is_some()
                && s.remote.as_ref().map(|r| Arc::as_ptr(&r.0))
                    == self.upstream.as_ref().map(Arc::as_ptr);
            if !same {
                *s = ServerSnapshot {
                    state: self.lc.phase,
                    pid,
                    port: self.config.port,
                    transport: self.config.transport,
                    url,
                    remote_url: remote_url.map(str::to_owned),
                    started,
                    restart_count: self.lc.restart_count,
                    last_exit: self.last_exit.clone(),
                    health: health.clone(),
                    tool_count: self.mcp.tool_count(),
                    tools_held: self.mcp.held_count(),
                    agent_allow_restart: self.config.agent.allow_restart,
                    grace: self.config.stop.grace,
                    child_coming: self.lc.child_coming(),
                    bridge: self.bridge.as_ref().map(|b| BridgeGate {
                        endpoint: b.endpoint.clone(),
                        listening: b.listening,
                    }),
                    firewall: Some(FirewallGate {
                        verdicts: self.mcp.watch_verdicts(),
                        relist: Arc::clone(&self.relist),
                        log: (self.config.transport == xy_core::protocol::Transport::Http).then(
                            || crate::gateway::firewall::ServerLog {
                                sink: self.sink.clone(),
                                redactor: crate::log_router::redact::Redactor::for_spawn(
                                    &self.config,
                                ),
                            },
                        ),
                    }),
                    remote: self.upstream.clone().map(RemoteGate),
                    row: RowCache::default(),
                };
                // Built here, once, rather than by the next `list`.
                s.row(&self.config.name);
            }
            !same
        });
    }
}
