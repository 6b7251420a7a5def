//! `reload`: apply a freshly loaded config set (stop removed and changed,
//! then start added and changed, and unchanged ones that had failed). A
//! failure partway leaves the ConfigActor holding exactly what was applied,
//! so it and the actor tree never disagree, and the error says what that was.

use std::collections::HashMap;

use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::{ReloadResult, ServerState, Transport};

use super::Engine;
use super::call::{QUERY_TIMEOUT, ask, for_each, restart_one, start_one, stop_one};
use super::error::EngineError;
use crate::config_actor::{ConfigDiff, ConfigMsg};
use crate::server::{RestartCause, StartOutcome};
use crate::supervisor::{Refs, RootMsg, ServerRef};

/// What a reload has put in place so far.
struct Applied {
    /// The config set in effect: the old one with every applied step.
    set: ConfigSet,
    /// The same, as names.
    result: ReloadResult,
    /// Servers put in place that must start.
    to_start: Vec<ServerRef>,
    /// Changed stdio servers on the same port and path: restarted in place,
    /// so their endpoint and sessions stay (SPEC §18).
    to_restart: Vec<ServerRef>,
}

/// Whether a changed server can be restarted in place: a stdio server
/// that keeps its port and path (its endpoint is xy's own, so nothing is
/// handed from one server to another). Anything else is stopped, then
/// started, which ends its sessions.
fn restart_in_place(old: &ServerConfig, new: &ServerConfig) -> bool {
    old.transport == Transport::Stdio
        && new.transport == Transport::Stdio
        && old.port == new.port
        && old.path == new.path
}

impl Engine {
    /// Applies a freshly loaded config set: start added, stop removed,
    /// restart changed (their settings differ), leave unchanged alone.
    ///
    /// Every stop (removed, changed) completes before any start (added,
    /// changed), so a port handed from one server to another is free. A
    /// changed stdio server on the same port and path is not stopped: it
    /// is restarted in place after its new config is set, and its clients'
    /// sessions stay valid. Spawn failures do not fail the reload: those
    /// servers show `failed`. An unchanged server that had `failed` is
    /// started again. A server with `autostart #false` is never started by
    /// a reload: added, it stays `stopped`; changed, it is restarted only
    /// if it was running.
    ///
    /// When a step fails (an actor that does not answer), what was put in
    /// place before it is still started and becomes the ConfigActor's set,
    /// and the error is [`EngineError::ReloadIncomplete`] naming it; a later
    /// reload applies the rest.
    pub async fn reload(&self, configs: ConfigSet) -> Result<ReloadResult, EngineError> {
        let _ops = self.inner.ops.lock().await;
        self.reload_locked(configs).await
    }

    /// [`Engine::reload`] of the set `load` reads, with the loading done
    /// under the same lock as the apply (the one lock reload and shutdown
    /// share): two reloads apply in the order they read the directory, and
    /// a reload waiting for the lock reads the newest files. `load`'s error
    /// comes back as is; engine errors go through `engine_err`.
    pub async fn reload_with<E>(
        &self,
        load: impl std::future::Future<Output = Result<ConfigSet, E>>,
        engine_err: impl FnOnce(EngineError) -> E,
    ) -> Result<ReloadResult, E> {
        let _ops = self.inner.ops.lock().await;
        let configs = load.await?;
        self.reload_locked(configs).await.map_err(engine_err)
    }

    async fn reload_locked(&self, configs: ConfigSet) -> Result<ReloadResult, EngineError> {
        // The daemon's settings first: they do not depend on any server.
        self.apply_settings(&configs.settings);
        let refs = self.refs().await?;
        let (old, diff) = ask(&refs.config, "config diff", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Diff(Box::new(configs.clone()), tx)
        })
        .await?;
        crate::events::publish_reload(&self.inner.events, &diff);
        let old_servers = old.servers.clone();
        let mut applied = Applied {
            set: ConfigSet {
                dir: configs.dir.clone(),
                warnings: configs.warnings.clone(),
                settings: configs.settings.clone(),
                ..*old
            },
            result: ReloadResult::default(),
            to_start: Vec::new(),
            to_restart: Vec::new(),
        };
        let step = self
            .apply(&refs, &diff, &configs, &old_servers, &mut applied)
            .await;

        // Whatever happened: start what is in place, and make it the set.
        let to_start = std::mem::take(&mut applied.to_start);
        let to_restart = std::mem::take(&mut applied.to_restart);
        let (started, restarted) = tokio::join!(
            for_each(to_start, |s| async move { start_one(&s).await }),
            for_each(to_restart, |s| async move {
                restart_one(&s, RestartCause::Reload).await
            }),
        );
        let started = started.and_then(|mut a| {
            a.extend(restarted?);
            Ok(a)
        });
        for (name, outcome) in started.iter().flatten() {
            if let StartOutcome::Failed(f) = outcome {
                tracing::warn!(server = %name, path = %f.path, error = %f.error, "reload: spawn failed");
            }
        }
        let replaced = ask(&refs.config, "config replace", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Replace(Box::new(applied.set), tx)
        })
        .await;
        match step.and(started.map(|_| ())).and(replaced) {
            Ok(()) => Ok(applied.result),
            Err(e) => {
                tracing::error!(error = %e, applied = ?applied.result, "reload stopped partway");
                Err(EngineError::ReloadIncomplete {
                    applied: applied.result,
                    error: Box::new(e),
                })
            }
        }
    }

    /// Stops, removes, updates and adds, recording each step in `applied`
    /// as it succeeds; returns at the first failure.
    async fn apply(
        &self,
        refs: &Refs,
        diff: &ConfigDiff,
        configs: &ConfigSet,
        old: &std::collections::BTreeMap<String, ServerConfig>,
        applied: &mut Applied,
    ) -> Result<(), EngineError> {
        let known: HashMap<&str, &ServerRef> =
            refs.servers.iter().map(|s| (s.name.as_str(), s)).collect();
        let by_name = |n: &str| known.get(n).map(|s| (*s).clone());
        let root = &self.inner.root;
        let in_place =
            |cfg: &ServerConfig| old.get(&cfg.name).is_some_and(|o| restart_in_place(o, cfg));
        // Before anything stops: an `autostart #false` server that changed
        // is brought back only if it was running.
        let listed = ask(root, "list", QUERY_TIMEOUT, RootMsg::List).await?;
        let was_running: HashMap<&str, bool> = listed
            .iter()
            .map(|e| {
                let down = matches!(e.state, ServerState::Stopped | ServerState::Failed);
                (e.name.as_str(), !down)
            })
            .collect();

        // Phase 1: stop removed and changed servers (not those restarted
        // in place).
        let to_stop: Vec<ServerRef> = diff
            .removed
            .iter()
            .map(String::as_str)
            .chain(
                diff.changed
                    .iter()
                    .filter(|c| !in_place(c))
                    .map(|c| c.name.as_str()),
            )
            .filter_map(by_name)
            .collect();
        for_each(to_stop, |s| async move { stop_one(&s).await }).await?;
        for name in &diff.removed {
            self.fault(name)?;
            ask(root, "remove server", QUERY_TIMEOUT, |tx| {
                RootMsg::RemoveServer(name.clone(), tx)
            })
            .await?;
            applied.set.servers.remove(name);
            applied.result.removed.push(name.clone());
        }

        // Phase 2: new configs in place (each started at the end).
        for cfg in &diff.changed {
            // Stopped in phase 1 (or restarted in place): started again
            // with whichever config is in place, even if the update below
            // fails.
            let wanted = cfg.autostart || was_running.get(cfg.name.as_str()) == Some(&true);
            let list = if in_place(cfg) {
                &mut applied.to_restart
            } else {
                &mut applied.to_start
            };
            if wanted {
                list.extend(by_name(&cfg.name));
            }
            self.fault(&cfg.name)?;
            ask(root, "update config", QUERY_TIMEOUT, |tx| {
                RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
            })
            .await?;
            for s in applied
                .to_start
                .iter_mut()
                .chain(applied.to_restart.iter_mut())
                .filter(|s| s.name == cfg.name)
            {
                s.grace = cfg.stop.grace;
            }
            applied.set.servers.insert(cfg.name.clone(), cfg.clone());
            applied.result.changed.push(cfg.name.clone());
        }
        for cfg in &diff.added {
            self.fault(&cfg.name)?;
            let actor = ask(root, "add server", QUERY_TIMEOUT, |tx| {
                RootMsg::AddServer(Box::new(cfg.clone()), tx)
            })
            .await?;
            if cfg.autostart {
                applied.to_start.push(ServerRef {
                    name: cfg.name.clone(),
                    actor,
                    grace: cfg.stop.grace,
                });
            }
            applied.set.servers.insert(cfg.name.clone(), cfg.clone());
            applied.result.added.push(cfg.name.clone());
        }
        let unchanged: Vec<ServerRef> = diff.unchanged.iter().filter_map(|n| by_name(n)).collect();
        for s in &unchanged {
            if let Some(cfg) = configs.servers.get(&s.name) {
                // Same settings; refresh the rest (source path) for `status`.
                ask(root, "update config", QUERY_TIMEOUT, |tx| {
                    RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
                })
                .await?;
                applied.set.servers.insert(s.name.clone(), cfg.clone());
            }
            applied.result.unchanged.push(s.name.clone());
        }
        for st in self.snapshots(unchanged.clone()).await? {
            let autostart = configs
                .servers
                .get(&st.entry.name)
                .is_none_or(|c| c.autostart);
            if st.entry.state == ServerState::Failed && autostart {
                applied
                    .to_start
                    .extend(unchanged.iter().find(|s| s.name == st.entry.name).cloned());
            }
        }
        Ok(())
    }

    /// A reload step for `name` that fails on purpose (unit tests only).
    #[cfg(test)]
    fn fault(&self, name: &str) -> Result<(), EngineError> {
        let fail = self
            .inner
            .reload_fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match fail.as_deref() {
            Some(n) if n == name => Err(EngineError::Internal(format!(
                "injected failure while applying {name}"
            ))),
            _ => Ok(()),
        }
    }

    #[cfg(not(test))]
    #[inline]
    fn fault(&self, _name: &str) -> Result<(), EngineError> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
