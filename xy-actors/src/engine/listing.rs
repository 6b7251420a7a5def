//! `list` as cached JSON rows (D41): each server's row comes serialised from
//! its snapshot; only `uptime_secs`, `cpu_percent` and `rss_bytes` are
//! computed per call. [`Engine::list`] is the same result, typed.

use std::sync::Arc;

use xy_core::protocol::{ListRow, ListRows, PerCall};

use super::Engine;
use super::call::{QUERY_TIMEOUT, ask};
use super::error::EngineError;
use crate::os::resources::Measured;
use crate::supervisor::RootMsg;

/// One cached row and its per-call fields, while they are filled in.
struct Row {
    row: Arc<ListRow>,
    pid: Option<u32>,
    now: PerCall,
}

impl Measured for Row {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn uptime_secs(&self) -> Option<u64> {
        self.now.uptime_secs
    }

    fn set_figures(&mut self, cpu_percent: Option<f64>, rss_bytes: Option<u64>) {
        self.now.cpu_percent = cpu_percent;
        self.now.rss_bytes = rss_bytes;
    }
}

impl Engine {
    /// What [`Engine::list`] returns, as rows ready to write: the `list`
    /// reply without a per-row serialisation.
    pub async fn list_rows(&self) -> Result<ListRows, EngineError> {
        let listed = ask(&self.inner.root, "list", QUERY_TIMEOUT, RootMsg::Rows).await?;
        let now = tokio::time::Instant::now();
        let gateway_port = self.gateway_port();
        let mut rows: Vec<Row> = listed
            .into_iter()
            .map(|l| Row {
                row: l.row,
                pid: l.pid,
                now: PerCall {
                    uptime_secs: l
                        .started
                        .map(|t| now.saturating_duration_since(t).as_secs()),
                    cpu_percent: None,
                    rss_bytes: None,
                    gateway_port,
                },
            })
            .collect();
        self.add_resources(&mut rows).await;
        Ok(ListRows(rows.into_iter().map(|r| (r.row, r.now)).collect()))
    }
}
