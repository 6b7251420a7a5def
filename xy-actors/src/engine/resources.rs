//! CPU % and RSS figures for `list` and `status`: one process-table scan
//! shared by concurrent callers, run off the async workers.

use std::sync::{MutexGuard, PoisonError};

use super::Engine;
use crate::os::resources::{Measured, Sampler};

impl Engine {
    /// Fills CPU % and RSS of the running entries. Figures younger than
    /// [`crate::os::resources::MAX_AGE`] are reused; otherwise one process-table
    /// scan for all of them runs off the async threads (never in an actor).
    pub(super) async fn add_resources<T: Measured + Send>(&self, entries: &mut [T]) {
        let pgids: Vec<i32> = entries
            .iter()
            .filter_map(|e| e.pid().and_then(|p| i32::try_from(p).ok()))
            .collect();
        if self.fill_if_fresh(entries, &pgids) {
            return;
        }
        let _scan = self.inner.scanning.lock().await;
        // Another caller may have scanned while this one waited.
        if self.fill_if_fresh(entries, &pgids) {
            return;
        }
        let uptimes: std::collections::HashMap<i32, std::time::Duration> = entries
            .iter()
            .filter_map(|e| {
                let pgid = i32::try_from(e.pid()?).ok()?;
                Some((pgid, std::time::Duration::from_secs(e.uptime_secs()?)))
            })
            .collect();
        let scan = pgids.clone();
        let usage = tokio::task::spawn_blocking(move || crate::os::resources::sample(&scan))
            .await
            .unwrap_or_default();
        let mut sampler = self.sampler();
        sampler.record(&pgids, &usage, std::time::Instant::now(), |g| {
            uptimes.get(&g).copied()
        });
        sampler.fill(entries);
    }

    fn fill_if_fresh<T: Measured>(&self, entries: &mut [T], pgids: &[i32]) -> bool {
        let sampler = self.sampler();
        let fresh = sampler.is_fresh(pgids, std::time::Instant::now());
        if fresh {
            sampler.fill(entries);
        }
        fresh
    }

    fn sampler(&self) -> MutexGuard<'_, Sampler> {
        self.inner
            .sampler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
