//! `shutdown`: stop every server in parallel, SIGKILL what is left at the
//! deadline, wait for the groups to vanish, stop what `xyd` adopted (a
//! daemonised grandchild whose root died: D175), then stop the tree.

use std::time::Duration;

use super::Engine;
use super::call::{QUERY_TIMEOUT, ask, for_each, stop_one};
use super::error::EngineError;
use crate::supervisor::RootMsg;

/// Bound on waiting for SIGKILLed groups to vanish at shutdown.
const KILL_WAIT: Duration = Duration::from_secs(5);

impl Engine {
    /// Stops every server in parallel (deadline `2 × max(grace)`), then the tree.
    /// A group still alive at the deadline is SIGKILLed. Calling it again is a no-op.
    pub async fn shutdown(&self) -> Result<(), EngineError> {
        let _ops = self.inner.ops.lock().await;
        let root = &self.inner.root;
        if root.get_status() != ractor::ActorStatus::Running {
            return Ok(());
        }
        // The gateway first: no new request reaches a server being stopped.
        self.inner.gateway.stop(None);
        let refs = self.refs().await?;
        let max_grace = refs
            .servers
            .iter()
            .map(|s| s.grace)
            .max()
            .unwrap_or_default();
        let deadline = (max_grace * 2).max(Duration::from_secs(1));
        let stops = for_each(refs.servers.clone(), |s| async move { stop_one(&s).await });
        match tokio::time::timeout(deadline, stops).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "shutdown: a stop failed; killing what is left")
            }
            Err(_) => tracing::warn!(
                deadline_ms = xy_core::time::as_millis_u64(deadline),
                "shutdown: stop deadline passed; killing what is left"
            ),
        }
        let pgids = ask(root, "kill groups", QUERY_TIMEOUT, RootMsg::KillAllGroups)
            .await
            .unwrap_or_default();
        for pgid in pgids {
            if tokio::time::timeout(KILL_WAIT, crate::os::group::wait_group_gone(pgid, None))
                .await
                .is_err()
            {
                tracing::error!(pgid, "process group survived SIGKILL");
            }
        }
        let adopted = tokio::task::spawn_blocking(|| crate::os::tree::kill_adopted(KILL_WAIT))
            .await
            .unwrap_or_default();
        if adopted > 0 {
            tracing::warn!(
                adopted,
                "shutdown: stopped processes that outlived their server's root"
            );
        }
        root.stop_children_and_wait(Some("shutdown".into()), Some(QUERY_TIMEOUT))
            .await;
        let _ = root
            .stop_and_wait(Some("shutdown".into()), Some(QUERY_TIMEOUT))
            .await;
        let task = self
            .inner
            .root_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(QUERY_TIMEOUT, task).await;
        }
        Ok(())
    }
}
