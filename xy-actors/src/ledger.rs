//! The tool ledger on disk (SPEC §12): `<state>/tools/<name>.json` holds a
//! server's last ten `tools/list` snapshots, one per spawn, so the tool
//! changes since the previous start survive daemon restarts. Its owner is
//! the server's ServerActor (through [`crate::server::mcp_state::McpState`]); this
//! module only reads and writes the file, writing on the blocking pool
//! ([`Saver`]) so the fsync never holds up the daemon's async thread.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use xy_core::protocol::mcp::{LEDGER_FORMAT, ToolLedger};

use crate::atomic_file;

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

/// Writes a ledger through [`atomic_file::write`], synced (a lost ledger
/// loses the tool history a restart compares against), creating the
/// directory `0700` if needed. Blocking.
pub(crate) fn save(dir: &Path, name: &str, ledger: &ToolLedger) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut text = serde_json::to_vec_pretty(ledger).map_err(std::io::Error::other)?;
    text.push(b'\n');
    atomic_file::write(&file(dir, name), &text, atomic_file::Sync::Durable)
}

/// Writes one server's ledger off the async thread, newest last: each save
/// gets a generation, and a write that finds a newer one already on disk is
/// skipped, so two saves the blocking pool runs out of order never leave
/// the older ledger behind.
#[derive(Debug)]
pub(crate) struct Saver {
    dir: PathBuf,
    name: String,
    next: u64,
    /// The generation on disk. A lock, not a message: it is shared only by
    /// this saver's own blocking jobs, and held for one file write.
    written: Arc<Mutex<u64>>,
}

impl Saver {
    /// The saver of server `name`'s ledger in `dir`.
    pub(crate) fn new(dir: PathBuf, name: &str) -> Saver {
        Saver {
            dir,
            name: name.to_owned(),
            next: 0,
            written: Arc::new(Mutex::new(0)),
        }
    }

    /// Writes `ledger` on the blocking pool (inline without a runtime);
    /// a failure is logged.
    pub(crate) fn save(&mut self, ledger: ToolLedger) {
        self.next += 1;
        let generation = self.next;
        let (dir, name, written) = (self.dir.clone(), self.name.clone(), self.written.clone());
        let job = move || {
            let mut on_disk = written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *on_disk >= generation {
                return;
            }
            match save(&dir, &name, &ledger) {
                Ok(()) => *on_disk = generation,
                Err(e) => {
                    tracing::warn!(server = %name, dir = %dir.display(), error = %e, "cannot write the tool ledger");
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(job)),
            Err(_) => job(),
        }
    }
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

    #[tokio::test]
    async fn the_saver_writes_off_thread_and_the_newest_ledger_wins() {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools");
        let mut saver = Saver::new(tools.clone(), "a");
        let mut l = ToolLedger::default();
        for i in 0..5 {
            l.push(snap(&format!("t{i}")));
            saver.save(l.clone());
        }
        xy_testbins::wait::poll(
            "the last ledger written",
            std::time::Duration::from_secs(10),
            || async { (load(&tools, "a") == l).then_some(()) },
        )
        .await;
        // The older jobs, if any ran late, did not overwrite it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(load(&tools, "a"), l);
    }
}
