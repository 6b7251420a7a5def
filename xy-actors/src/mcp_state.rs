//! One server's MCP view, owned by its ServerActor: the tool ledger in
//! memory (the file is [`crate::ledger`]'s), what the current spawn's `mcp`
//! probe learned (`status.mcp`), and the `tools` change a new listing makes
//! (SPEC §12, §15).

use std::path::PathBuf;
use std::time::SystemTime;

use xy_core::protocol::mcp::{McpStatus, ToolLedger, ToolSnapshot, ToolsResult, diff_tools};

use crate::health::McpReport;
use crate::ledger::{self, Saver};

/// A new snapshot whose tools differ from the previous one (or the first
/// snapshot ever): what the `tools` event reports (SPEC §15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolsChange {
    /// The previous snapshot's tool count; `None` for the first snapshot.
    pub(crate) from: Option<usize>,
    pub(crate) to: usize,
    /// `added a, b; removed c; changed d`, or `first listing`.
    pub(crate) reason: String,
}

impl ToolsChange {
    fn new(from: Option<usize>, to: usize, d: &xy_core::protocol::mcp::ToolDiff) -> Option<Self> {
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &d.added),
            ("removed", &d.removed),
            ("changed", &d.changed),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        let reason = match (from, parts.is_empty()) {
            (None, _) => "first listing".to_owned(),
            (Some(_), true) => return None,
            (Some(_), false) => parts.join("; "),
        };
        Some(ToolsChange { from, to, reason })
    }
}

/// One server's MCP view, owned by its ServerActor: the ledger (loaded at
/// actor start) and what the current spawn's `mcp` probe learned.
#[derive(Debug)]
pub(crate) struct McpState {
    /// Writes the ledger file; `None` keeps the ledger in memory (unit tests).
    saver: Option<Saver>,
    name: String,
    ledger: ToolLedger,
    /// `status.mcp`: `None` until a probe of this spawn succeeded.
    status: Option<McpStatus>,
}

impl McpState {
    /// The state of server `name`, its ledger read from `dir`.
    pub(crate) fn load(dir: Option<PathBuf>, name: &str) -> McpState {
        let ledger = dir
            .as_deref()
            .map(|d| ledger::load(d, name))
            .unwrap_or_default();
        McpState {
            saver: dir.map(|d| Saver::new(d, name)),
            name: name.to_owned(),
            ledger,
            status: None,
        }
    }

    /// A new spawn: nothing is known about it yet.
    pub(crate) fn on_spawn(&mut self) {
        self.status = None;
    }

    /// `status.mcp`.
    pub(crate) fn status(&self) -> Option<McpStatus> {
        self.status.clone()
    }

    /// `list[].tool_count`: the tools listed after this spawn.
    pub(crate) fn tool_count(&self) -> Option<u32> {
        self.status.as_ref().and_then(|s| s.tool_count)
    }

    /// The `tools` result: the newest snapshot against the one before.
    pub(crate) fn tools(&self) -> ToolsResult {
        self.ledger.result(&self.name)
    }

    /// Takes a successful probe's findings: the server's self-description
    /// and, on the first success of a spawn, its tools (a new snapshot).
    /// Returns the change when that snapshot differs from the previous one.
    pub(crate) fn observe(&mut self, report: &McpReport, now: SystemTime) -> Option<ToolsChange> {
        let mut change = None;
        let info = &report.info;
        let mut status = self.status.take().unwrap_or(McpStatus {
            protocol_version: String::new(),
            era: info.era,
            server_name: None,
            server_version: None,
            tool_count: None,
            tools_added: Vec::new(),
            tools_removed: Vec::new(),
            tools_changed: Vec::new(),
            listed_at: None,
        });
        status.protocol_version = info.protocol_version.clone();
        status.era = info.era;
        status.server_name = info.server_name.clone();
        status.server_version = info.server_version.clone();
        match &report.tools {
            None => {}
            Some(Ok(tools)) => {
                let ts = xy_core::time::rfc3339_ms(now);
                let previous = self.ledger.snapshots.last().map(|s| s.tools.as_slice());
                let d = diff_tools(previous, tools);
                change = ToolsChange::new(previous.map(<[_]>::len), tools.len(), &d);
                tracing::info!(
                    server = %self.name, tools = tools.len(), added = ?d.added,
                    removed = ?d.removed, changed = ?d.changed, "tools listed"
                );
                self.ledger.push(ToolSnapshot {
                    ts: ts.clone(),
                    protocol_version: info.protocol_version.clone(),
                    server_name: info.server_name.clone(),
                    server_version: info.server_version.clone(),
                    tools: tools.clone(),
                });
                if let Some(saver) = &mut self.saver {
                    saver.save(self.ledger.clone());
                }
                status.tool_count = Some(u32::try_from(tools.len()).unwrap_or(u32::MAX));
                status.listed_at = Some(ts);
                status.tools_added = d.added;
                status.tools_removed = d.removed;
                status.tools_changed = d.changed;
            }
            Some(Err(e)) => {
                tracing::warn!(server = %self.name, error = %e, "tools/list failed; the server stays healthy");
                status.tool_count = None;
                status.listed_at = None;
                status.tools_added.clear();
                status.tools_removed.clear();
                status.tools_changed.clear();
            }
        }
        self.status = Some(status);
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_change_is_the_first_listing_or_a_non_empty_diff() {
        use xy_core::protocol::mcp::ToolDiff;
        let none = ToolDiff::default();
        let first = ToolsChange::new(None, 2, &none).unwrap();
        assert_eq!((first.from, first.to), (None, 2));
        assert_eq!(first.reason, "first listing");
        assert_eq!(ToolsChange::new(Some(2), 2, &none), None);
        let d = ToolDiff {
            added: vec!["a".into(), "b".into()],
            removed: vec![],
            changed: vec!["c".into()],
        };
        let c = ToolsChange::new(Some(2), 3, &d).unwrap();
        assert_eq!((c.from, c.to), (Some(2), 3));
        assert_eq!(c.reason, "added a, b; changed c");
    }
}
