//! Child records under `run/` (SPEC §7): `{pid, pgid, start_time, command}`
//! written at spawn and removed once the group is reaped, and the boot-time
//! [`sweep_orphans`] that stops groups a crashed daemon left behind without
//! ever signalling an unrelated process that reused the pid.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::group;

/// What the daemon knows about one spawned child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildRecord {
    pub(crate) pid: i32,
    pub(crate) pgid: i32,
    pub(crate) start_time: Option<u64>,
    pub(crate) command: String,
}

impl ChildRecord {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "pid": self.pid,
            "pgid": self.pgid,
            "start_time": self.start_time,
            "command": self.command,
        })
    }

    fn from_json(v: &serde_json::Value) -> Option<ChildRecord> {
        Some(ChildRecord {
            pid: i32::try_from(v.get("pid")?.as_i64()?).ok()?,
            pgid: i32::try_from(v.get("pgid")?.as_i64()?).ok()?,
            start_time: v.get("start_time").and_then(serde_json::Value::as_u64),
            command: v.get("command")?.as_str()?.to_owned(),
        })
    }
}

/// `run_dir/<name>.json`.
pub(crate) fn record_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.json"))
}

/// Writes the record atomically (tmp + rename), so a crash never leaves half a
/// record for the next boot to misread.
pub(crate) fn write(path: &Path, rec: &ChildRecord) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, rec.to_json().to_string())?;
    std::fs::rename(&tmp, path)
}

/// Removes the record at `path` if it still describes group `pgid` (a newer
/// child of the same server may already have replaced it).
pub(crate) fn remove_if_pid(path: &Path, pgid: i32) {
    let current = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| ChildRecord::from_json(&v));
    if current.is_some_and(|r| r.pgid == pgid)
        && let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove child record");
    }
}

/// An orphan group found and stopped by [`sweep_orphans`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptOrphan {
    /// Server name (the record's file stem).
    pub name: String,
    /// The recorded leader pid.
    pub pid: i32,
    /// The process group that was stopped.
    pub pgid: i32,
    /// The recorded command.
    pub command: String,
    /// Whether SIGKILL was needed after the grace period.
    pub killed: bool,
}

/// Stops the process groups of a previous daemon that are still alive, then
/// removes their records. A record counts as an orphan when its pid still
/// exists with the recorded start time, or when the pid is gone but its group
/// still has members (a pgid cannot be reused while the group exists). Stale
/// records (pid reused by another process, or nothing left) are just removed.
/// Blocks for up to `grace` (+ a short SIGKILL wait) per orphan: call it at
/// boot, before any server starts (from async code via `spawn_blocking`).
pub fn sweep_orphans(run_dir: &Path, grace: Duration) -> Vec<SweptOrphan> {
    let mut swept = Vec::new();
    let Ok(dir) = std::fs::read_dir(run_dir) else {
        return swept;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let record = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| ChildRecord::from_json(&v));
        if let Some(rec) = record
            && is_orphan(&rec)
        {
            tracing::warn!(server = %name, pid = rec.pid, pgid = rec.pgid, command = %rec.command, "stopping orphan from a previous daemon");
            let killed = stop_group_blocking(rec.pgid, grace);
            swept.push(SweptOrphan {
                name,
                pid: rec.pid,
                pgid: rec.pgid,
                command: rec.command,
                killed,
            });
        }
        let _ = std::fs::remove_file(&path);
    }
    swept
}

fn is_orphan(rec: &ChildRecord) -> bool {
    if rec.pgid <= 1 {
        return false;
    }
    match group::start_time(rec.pid) {
        // Same pid, same start: the very process we spawned.
        Some(t) => rec.start_time == Some(t) && group::pid_alive(rec.pid),
        // Leader gone: only its own (surviving) group can still carry its id.
        None => rec.pid == rec.pgid && group::group_alive(rec.pgid, None),
    }
}

/// SIGTERM, wait `grace`, SIGKILL; true if SIGKILL was needed.
fn stop_group_blocking(pgid: i32, grace: Duration) -> bool {
    let _ = group::signal_group(pgid, Signal::SIGTERM);
    if group::wait_group_gone_blocking(pgid, grace) {
        return false;
    }
    let _ = group::signal_group(pgid, Signal::SIGKILL);
    if !group::wait_group_gone_blocking(pgid, Duration::from_secs(5)) {
        tracing::warn!(pgid, "orphan group still alive after SIGKILL");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let rec = ChildRecord {
            pid: 10,
            pgid: 10,
            start_time: Some(99),
            command: "/bin/x".into(),
        };
        assert_eq!(ChildRecord::from_json(&rec.to_json()), Some(rec));
    }

    #[test]
    fn stale_records_are_removed_without_signals() {
        let dir = tempfile::tempdir().unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        // Our own pid with a wrong start time: a reused pid, must not be touched.
        let rec = ChildRecord {
            pid: me,
            pgid: me,
            start_time: Some(1),
            command: "x".into(),
        };
        let path = record_path(dir.path(), "a");
        write(&path, &rec).unwrap();
        std::fs::write(dir.path().join("junk.json"), "{not json").unwrap();
        let swept = sweep_orphans(dir.path(), Duration::from_millis(10));
        assert!(swept.is_empty());
        assert!(!path.exists());
        assert!(!dir.path().join("junk.json").exists());
    }
}
