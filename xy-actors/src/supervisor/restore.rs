//! Restoring a failed child of the root by asking the surviving owners: a
//! ServerActor's config comes from the ConfigActor and its sink from the
//! LogRouterActor; a ConfigActor's set and a LogRouterActor's sinks come
//! from the ServerActors. Every question is bounded; a late answer is handed
//! to the new actor when it comes, off the root's handler.

use std::collections::BTreeMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinSet;
use xy_core::config::ConfigSet;

use super::{CHILD_CALL, RootMsg, RootState};
use crate::config_actor::{ConfigActor, ConfigMsg};
use crate::log_router::{LogRouterActor, LogRouterArgs, LogRouterMsg};
use crate::server::ServerMsg;

/// How long a server that missed [`CHILD_CALL`] may still answer; its answer
/// then goes straight to the restored actor.
const LATE_ANSWER: Duration = Duration::from_secs(60);

/// Answers still outstanding after the bound: (server, value) as they come.
type Late<T> = JoinSet<Option<(String, T)>>;

impl RootState {
    /// A failed ServerActor: SIGKILL its last reported group, then spawn a
    /// successor with the config the ConfigActor holds and the sink the
    /// LogRouterActor holds, started again if it was desired running. A
    /// server no owner has a config for is forgotten (a reload adds it back).
    pub(super) async fn restore_server(
        &mut self,
        myself: &ActorRef<RootMsg>,
        name: &str,
        err: &str,
    ) -> Result<(), ActorProcessingErr> {
        let Some(e) = self.servers.get(name) else {
            return Ok(());
        };
        let (desired, pgid) = (e.desired, e.pgid);
        tracing::error!(server = %name, error = %err, desired, "ServerActor failed; restarting it");
        if let Some(pgid) = pgid {
            // Its state's guard already did this on drop; a second SIGKILL is harmless.
            let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
        }
        let cfg = match ractor::call_t!(
            self.config,
            ConfigMsg::Get,
            xy_core::time::as_millis_u64(CHILD_CALL),
            name.to_owned()
        ) {
            Ok(Some(cfg)) => cfg,
            Ok(None) => {
                self.forget(name, "the ConfigActor has no config for it");
                return Ok(());
            }
            Err(e) => {
                self.forget(name, &format!("the ConfigActor did not answer: {e}"));
                return Ok(());
            }
        };
        let sink = match self.create_sink(name).await {
            Ok(sink) => sink,
            Err(e) => {
                // The LogRouterActor is failing too: a fresh sink on the same
                // file; the router's own restore asks this server for it.
                tracing::warn!(server = %name, error = %e, "LogRouterActor did not answer; a new sink");
                crate::log_router::sink::LogSink::new(name, &self.sink_settings).shared()
            }
        };
        self.spawn_server(
            myself,
            cfg,
            sink,
            desired,
            Some(crate::server::Prior { pgid }),
        )
        .await
    }

    fn forget(&mut self, name: &str, why: &str) {
        tracing::error!(server = %name, "{why}: the server is dropped until a reload adds it back");
        self.servers.remove(name);
        self.publish_routes();
        let _ = self.router.cast(LogRouterMsg::RemoveSink(name.to_owned()));
    }

    /// A failed ConfigActor: its successor holds the configs the ServerActors
    /// run with, i.e. what was applied (not what is on disk now; D37 in
    /// `docs/decisions.md`).
    pub(super) async fn restore_config(
        &mut self,
        myself: &ActorRef<RootMsg>,
    ) -> Result<(), ActorProcessingErr> {
        let (configs, late) = self.ask_servers(ServerMsg::Config).await;
        let set = ConfigSet {
            dir: self.dir.clone(),
            servers: configs,
            warnings: Vec::new(),
            settings: Default::default(),
        };
        let (config, _) = Actor::spawn_linked(None, ConfigActor, set, myself.get_cell()).await?;
        self.config = config.clone();
        adopt_late(late, move |_, cfg| {
            let _ = config.cast(ConfigMsg::Adopt(Box::new(cfg)));
        });
        Ok(())
    }

    /// A failed LogRouterActor: its successor gets the sink every ServerActor
    /// writes to, so buffered lines and live followers survive.
    pub(super) async fn restore_router(
        &mut self,
        myself: &ActorRef<RootMsg>,
    ) -> Result<(), ActorProcessingErr> {
        let (sinks, late) = self.ask_servers(ServerMsg::Sink).await;
        let args = LogRouterArgs {
            settings: self.sink_settings.clone(),
            sinks,
        };
        let (router, _) =
            Actor::spawn_linked(None, LogRouterActor, args, myself.get_cell()).await?;
        self.router = router.clone();
        adopt_late(late, move |name, sink| {
            let _ = router.cast(LogRouterMsg::AdoptSink(name, sink));
        });
        Ok(())
    }

    /// Asks every ServerActor concurrently; returns the answers within
    /// [`CHILD_CALL`] and the rest still running. A dead actor (its own
    /// failure is queued behind this one) answers nothing.
    async fn ask_servers<T: Send + 'static>(
        &self,
        ask: fn(RpcReplyPort<T>) -> ServerMsg,
    ) -> (BTreeMap<String, T>, Late<T>) {
        let mut pending: Late<T> = JoinSet::new();
        for (name, e) in &self.servers {
            let (name, actor) = (name.clone(), e.actor.clone());
            pending.spawn(async move {
                match actor.call(ask, Some(LATE_ANSWER)).await {
                    Ok(ractor::rpc::CallResult::Success(v)) => Some((name, v)),
                    _ => {
                        tracing::warn!(server = %name, "no answer while restoring an owner");
                        None
                    }
                }
            });
        }
        let deadline = tokio::time::Instant::now() + CHILD_CALL;
        let mut got = BTreeMap::new();
        while let Ok(Some(joined)) = tokio::time::timeout_at(deadline, pending.join_next()).await {
            if let Ok(Some((name, v))) = joined {
                got.insert(name, v);
            }
        }
        if !pending.is_empty() {
            tracing::warn!(
                late = pending.len(),
                "servers did not answer in time; their answers are adopted when they come"
            );
        }
        (got, pending)
    }
}

/// Hands each late answer to `adopt` as it arrives, off the root's handler.
fn adopt_late<T: Send + 'static>(mut late: Late<T>, adopt: impl Fn(String, T) + Send + 'static) {
    if late.is_empty() {
        return;
    }
    tokio::spawn(async move {
        while let Some(joined) = late.join_next().await {
            if let Ok(Some((name, v))) = joined {
                adopt(name, v);
            }
        }
    });
}
