//! `reload`: apply a freshly loaded config set (stop removed and changed,
//! then start added and changed, and unchanged ones that had failed).

use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::{ReloadResult, ServerState};

use super::Engine;
use super::call::{QUERY_TIMEOUT, ask, for_each, start_one, stop_one};
use super::error::EngineError;
use crate::config_actor::ConfigMsg;
use crate::server::StartOutcome;
use crate::supervisor::{RootMsg, ServerRef};

impl Engine {
    /// Applies a freshly loaded config set: start added, stop removed,
    /// restart changed (by content hash), leave unchanged alone.
    ///
    /// Every stop (removed, changed) completes before any start (added,
    /// changed), so a port handed from one server to another is free.
    /// Spawn failures do not fail the reload: those servers show `failed`.
    /// An unchanged server that had `failed` is started again.
    pub async fn reload(&self, configs: ConfigSet) -> Result<ReloadResult, EngineError> {
        let _ops = self.inner.ops.lock().await;
        let refs = self.refs().await?;
        let diff = ask(&refs.config, "config diff", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Diff(Box::new(configs.clone()), tx)
        })
        .await?;
        crate::events::publish_reload(&self.inner.events, &diff);
        let by_name = |n: &str| refs.servers.iter().find(|s| s.name == n).cloned();

        // Phase 1: stop removed and changed servers.
        let to_stop: Vec<ServerRef> = diff
            .removed
            .iter()
            .map(String::as_str)
            .chain(diff.changed.iter().map(|c| c.name.as_str()))
            .filter_map(by_name)
            .collect();
        for_each(to_stop, |s| async move { stop_one(&s).await }).await?;
        let root = &self.inner.root;
        for name in &diff.removed {
            ask(root, "remove server", QUERY_TIMEOUT, |tx| {
                RootMsg::RemoveServer(name.clone(), tx)
            })
            .await?;
        }

        // Phase 2: new configs in place, then start added and changed ones.
        let mut to_start: Vec<ServerRef> = Vec::new();
        for cfg in &diff.changed {
            ask(root, "update config", QUERY_TIMEOUT, |tx| {
                RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
            })
            .await?;
            to_start.extend(by_name(&cfg.name).map(|s| ServerRef {
                grace: cfg.stop.grace,
                ..s
            }));
        }
        for cfg in &diff.added {
            let actor = ask(root, "add server", QUERY_TIMEOUT, |tx| {
                RootMsg::AddServer(Box::new(cfg.clone()), tx)
            })
            .await?;
            to_start.push(ServerRef {
                name: cfg.name.clone(),
                actor,
                grace: cfg.stop.grace,
            });
        }
        let unchanged: Vec<ServerRef> = diff.unchanged.iter().filter_map(|n| by_name(n)).collect();
        for s in &unchanged {
            if let Some(cfg) = configs.servers.get(&s.name) {
                // Same settings; refresh the rest (source path) for `status`.
                ask(root, "update config", QUERY_TIMEOUT, |tx| {
                    RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
                })
                .await?;
            }
        }
        for st in self.snapshots(unchanged.clone()).await? {
            if st.entry.state == ServerState::Failed {
                to_start.extend(unchanged.iter().find(|s| s.name == st.entry.name).cloned());
            }
        }
        let started = for_each(to_start, |s| async move { start_one(&s).await }).await?;
        for (name, outcome) in started {
            if let StartOutcome::Failed(f) = outcome {
                tracing::warn!(server = %name, path = %f.path, error = %f.error, "reload: spawn failed");
            }
        }
        ask(&refs.config, "config replace", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Replace(Box::new(configs), tx)
        })
        .await?;

        let names = |v: &[ServerConfig]| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        Ok(ReloadResult {
            added: names(&diff.added),
            removed: diff.removed,
            changed: names(&diff.changed),
            unchanged: diff.unchanged,
        })
    }
}
