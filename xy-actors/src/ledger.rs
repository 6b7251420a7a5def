//! The tool ledger on disk (SPEC §12): `<state>/tools/<name>.json` holds a
//! server's last ten `tools/list` snapshots, one per spawn, so the tool
//! changes since the previous start survive daemon restarts. Its owner is
//! the server's ServerActor; this module only reads and writes the file.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::time::SystemTime;

use xy_core::protocol::mcp::{
    LEDGER_FORMAT, McpStatus, ToolLedger, ToolSnapshot, ToolsResult, diff_tools,
};

use crate::health::McpReport;

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
    /// The ledger directory; `None` keeps the ledger in memory (unit tests).
    dir: Option<PathBuf>,
    name: String,
    ledger: ToolLedger,
    /// `status.mcp`: `None` until a probe of this spawn succeeded.
    status: Option<McpStatus>,
}

impl McpState {
    /// The state of server `name`, its ledger read from `dir`.
    pub(crate) fn load(dir: Option<PathBuf>, name: &str) -> McpState {
        let ledger = dir.as_deref().map(|d| load(d, name)).unwrap_or_default();
        McpState {
            dir,
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
                if let Some(dir) = &self.dir
                    && let Err(e) = save(dir, &self.name, &self.ledger)
                {
                    tracing::warn!(server = %self.name, dir = %dir.display(), error = %e, "cannot write the tool ledger");
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

/// The ledger file of server `name` in `dir`.
pub(crate) fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Reads a ledger; a missing file is an empty ledger. A file that does not
/// parse is moved aside to `<name>.json.bad` (kept for the user, logged)
/// and the ledger starts empty, so one bad write never blocks new snapshots.
pub(crate) fn load(dir: &Path, name: &str) -> ToolLedger {
    let path = file(dir, name);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ToolLedger::default(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the tool ledger");
            return ToolLedger::default();
        }
    };
    match serde_json::from_str::<ToolLedger>(&text) {
        Ok(ledger) if ledger.format <= LEDGER_FORMAT => ledger,
        Ok(ledger) => {
            tracing::warn!(path = %path.display(), format = ledger.format, "tool ledger from a newer xy; starting a new one");
            set_aside(&path);
            ToolLedger::default()
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "tool ledger does not parse; moved aside");
            set_aside(&path);
            ToolLedger::default()
        }
    }
}

fn set_aside(path: &Path) {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".bad");
    let _ = std::fs::rename(path, aside);
}

/// Writes a ledger atomically (temp file in the same directory, fsync,
/// rename), creating the directory `0700` if needed.
pub(crate) fn save(dir: &Path, name: &str, ledger: &ToolLedger) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = file(dir, name);
    let tmp = dir.join(format!(".{name}.json.tmp"));
    let text = serde_json::to_vec_pretty(ledger).map_err(std::io::Error::other)?;
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&text)?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::protocol::mcp::ToolSnapshot;

    fn snap(ts: &str) -> ToolSnapshot {
        ToolSnapshot {
            ts: ts.into(),
            protocol_version: "2026-07-28".into(),
            server_name: None,
            server_version: None,
            tools: vec![],
        }
    }

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

    #[test]
    fn round_trip_missing_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools");
        assert_eq!(load(&tools, "a"), ToolLedger::default());
        let mut l = ToolLedger::default();
        l.push(snap("t1"));
        save(&tools, "a", &l).unwrap();
        assert_eq!(load(&tools, "a"), l);
        std::fs::write(file(&tools, "b"), "{not json").unwrap();
        assert_eq!(load(&tools, "b"), ToolLedger::default());
        assert!(tools.join("b.json.bad").is_file());
        assert!(!file(&tools, "b").exists());
    }
}
