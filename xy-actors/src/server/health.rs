//! The ServerActor's side of health checks (SPEC §12): one probe task per
//! spawn (which also lists an HTTP or remote server, SPEC §20), its
//! verdicts recorded and announced, `status.mcp` fed from `mcp` probes,
//! and the lifecycle told when a verdict asks for a restart.

use std::time::SystemTime;

use ractor::ActorRef;
use xy_core::protocol::{HealthState, HealthTransition};

use super::lifecycle::Event;
use super::{MAX_TRANSITIONS, ServerActorState, ServerMsg};
use crate::events::EngineEvent;
use crate::health::{ProbeReport, ProbeTask, Tracker};

impl ServerActorState {
    /// Starts the probe task for spawn `run`: its health probes, if the
    /// config has a `health` block, and xy's own listing of an HTTP or a
    /// remote server (SPEC §20; a stdio server's bridge lists its child).
    pub(super) fn start_probe(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        run: u64,
        r: Option<std::sync::Arc<crate::log_router::redact::Redactor>>,
    ) {
        self.end_probe();
        // The era and the tools are learned again for every spawn.
        self.mcp.on_spawn();
        let listing = (self.config.transport != xy_core::protocol::Transport::Stdio).then(|| {
            let me = myself.clone();
            crate::health::listing::Duty {
                path: self.config.path.clone(),
                relist: std::sync::Arc::clone(&self.relist),
                send: Box::new(move |listing| {
                    let listing = listing.map(Box::new);
                    me.cast(ServerMsg::HttpListed { run, listing }).is_ok()
                }),
            }
        });
        // A remote server is always probed: that is how xy knows it is
        // there at all.
        let cfg = self.config.effective_health();
        if cfg.is_none() && listing.is_none() {
            return;
        }
        self.tracker = cfg
            .as_ref()
            .map(|cfg| Tracker::new(cfg, std::time::Instant::now()));
        let me = myself.clone();
        self.probe = Some(ProbeTask::spawn(
            cfg,
            self.config.port,
            self.upstream.clone(),
            r,
            move |report| me.cast(ServerMsg::Health { run, report }).is_ok(),
            listing,
        ));
    }

    /// Stops the probe task (it ends its session in the background); the
    /// verdict goes back to `unknown`.
    pub(super) fn end_probe(&mut self) {
        if let Some(probe) = self.probe.take() {
            tokio::spawn(probe.stop());
        }
        self.tracker = None;
    }

    pub(super) fn on_probe(&mut self, myself: &ActorRef<ServerMsg>, report: &ProbeReport) {
        if let Some(found) = &report.mcp {
            self.mcp.observe(&found.info);
        }
        // The server answers, but the grant needs a login: the verdict
        // stays what the broker said until one (SPEC §23: `status` says
        // `login needed`).
        let held;
        let report = match (&report.outcome, &self.auth_hold) {
            (Ok(_), Some(why)) => {
                held = ProbeReport {
                    outcome: Err(why.clone()),
                    ..report.clone()
                };
                &held
            }
            _ => report,
        };
        let Some(tracker) = self.tracker.as_mut() else {
            return;
        };
        let Some((from, to, reason)) = tracker.observe(report, std::time::Instant::now()) else {
            return;
        };
        let failures = tracker.consecutive();
        let error = report.outcome.as_ref().err().cloned().unwrap_or_default();
        self.health_changed(myself, (from, to, reason), failures, &error, true);
    }

    /// A remote's credentials failed (SPEC §23): `unhealthy` at once, the
    /// supplier's message as the why (no probe count to wait for).
    pub(super) fn credentials_failed(&mut self, myself: &ActorRef<ServerMsg>, why: &str) {
        let Some(tracker) = self.tracker.as_mut() else {
            return;
        };
        let Some(change) = tracker.fail_now(why, SystemTime::now()) else {
            return;
        };
        let failures = tracker.consecutive();
        // No restart: reconnecting cannot log in, and a reconnect would
        // find the same credentials and fail again at every probe.
        self.health_changed(myself, change, failures, why, false);
    }

    /// Records, announces and acts on one change of verdict; `restartable`:
    /// `restart-on-failure` may act on it.
    fn health_changed(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        (from, to, reason): crate::health::Change,
        failures: u32,
        error: &str,
        restartable: bool,
    ) {
        match to {
            HealthState::Unhealthy => {
                tracing::warn!(server = %self.config.name, %from, %to, %reason, "health changed")
            }
            _ => tracing::info!(server = %self.config.name, %from, %to, %reason, "health changed"),
        }
        if self.health_history.len() == MAX_TRANSITIONS {
            self.health_history.pop_front();
        }
        let ts = xy_core::time::rfc3339_ms(SystemTime::now());
        self.events.publish(EngineEvent {
            name: self.config.name.as_str().into(),
            kind: xy_core::protocol::EventKind::Health,
            ts: ts.clone(),
            from: Some(from.as_str().to_owned()),
            to: Some(to.as_str().to_owned()),
            reason: reason.clone(),
        });
        self.health_history.push_back(HealthTransition {
            from,
            to,
            ts,
            reason: reason.clone(),
        });
        match (from, to) {
            (_, HealthState::Unhealthy) => {
                self.fire_hook(xy_core::config::HookEvent::Unhealthy, reason.clone(), false);
            }
            (HealthState::Unhealthy, HealthState::Healthy) => {
                self.fire_hook(xy_core::config::HookEvent::Recovered, reason.clone(), false);
            }
            _ => {}
        }
        let restart_on_failure = restartable
            && self
                .config
                .health
                .as_ref()
                .is_some_and(|h| h.restart_on_failure);
        if to == HealthState::Unhealthy && restart_on_failure {
            let s = if failures == 1 { "" } else { "s" };
            let why = format!("{failures} failed health check{s} ({error})");
            // The lifecycle decides whether this run is ended (only a
            // running child, once per run); its exit then goes through
            // the restart policy.
            let before = self.lc.killed_for.is_some();
            self.apply(myself, Event::HealthFailed(why));
            if !before && self.lc.killed_for.is_some() {
                tracing::warn!(server = %self.config.name, "restarting after failed health checks");
            }
        }
    }
}
