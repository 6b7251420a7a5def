//! Child records under `run/` (SPEC §7): `{pid, pgid, start_time, command}`
//! written at spawn and removed once the group is reaped, and the boot-time
//! [`sweep_orphans`] that stops the process trees a crashed daemon left
//! behind (the group and every descendant of the recorded root, which kept
//! them as their subreaper: D175) without ever signalling an unrelated
//! process that reused the pid.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::group;
use super::tree::Tree;
use crate::atomic_file;

/// What the daemon knows about one spawned child: the record's JSON
/// (`{pid, pgid, start_time, command}`; unknown fields are ignored, so an
/// older or newer xyd's records still sweep).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ChildRecord {
    pub(crate) pid: i32,
    pub(crate) pgid: i32,
    /// The leader's start time (clock ticks since boot), which tells a
    /// reused pid from the child; `null` where it cannot be read.
    pub(crate) start_time: Option<u64>,
    pub(crate) command: String,
    /// Descendants met so far, `[pid, start_time]` each: what outlives
    /// the root (a daemon) is still found after a `kill -9` of `xyd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) descendants: Vec<(i32, u64)>,
}

impl ChildRecord {
    /// The record in file `path`, if it reads and parses.
    fn read(path: &Path) -> Option<ChildRecord> {
        let text = std::fs::read(path).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

/// `run_dir/<name>.json`.
pub(crate) fn record_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.json"))
}

/// Writes the record through [`atomic_file::write`], so a crash never leaves
/// half a record for the next boot to misread. Not synced: a record matters
/// after a crash of xyd, which leaves it in the page cache; a crash of the
/// machine ends its children too, so a lost record loses nothing, and the
/// spawn path does not wait on the disk.
pub(crate) fn write(path: &Path, rec: &ChildRecord) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec(rec).map_err(std::io::Error::other)?;
    atomic_file::write(path, &json, atomic_file::Sync::Atomic)
}

/// Held across every check-then-change of a record (the census's rewrite,
/// a stop's removal, the sweep's removal): a rewrite that checked before a
/// removal and wrote after it would bring back the record of a tree that
/// is gone — left behind after a forced exit, swept as stale at the next
/// boot.
static CHANGING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn changing() -> std::sync::MutexGuard<'static, ()> {
    CHANGING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Rewrites the record at `path` with `rec` if it still describes the same
/// group (a stop or a sweep may have removed it); whether it did.
pub(crate) fn rewrite(path: &Path, rec: &ChildRecord) -> std::io::Result<bool> {
    let _changing = changing();
    if ChildRecord::read(path).is_none_or(|r| r.pgid != rec.pgid) {
        return Ok(false);
    }
    write(path, rec).map(|()| true)
}

/// Removes the record at `path` if it still describes group `pgid` (a newer
/// child of the same server may already have replaced it).
pub(crate) fn remove_if_pid(path: &Path, pgid: i32) {
    let _changing = changing();
    let current = ChildRecord::read(path);
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
/// Blocks for up to `grace` (+ a short SIGKILL wait) in all: call it at boot,
/// before any server starts (from async code via `spawn_blocking`).
pub fn sweep_orphans(run_dir: &Path, grace: Duration) -> Vec<SweptOrphan> {
    sweep_orphans_reporting(run_dir, grace, |_, _| {})
}

/// [`sweep_orphans`], calling `progress(found, left)` once the orphans are
/// known and whenever the number still alive drops. Every group gets its
/// SIGTERM at once and they share one grace period: twenty groups that
/// ignore SIGTERM cost one grace, not twenty.
pub fn sweep_orphans_reporting(
    run_dir: &Path,
    grace: Duration,
    mut progress: impl FnMut(usize, usize),
) -> Vec<SweptOrphan> {
    let mut found: Vec<(PathBuf, SweptOrphan, Tree)> = Vec::new();
    let Ok(dir) = std::fs::read_dir(run_dir) else {
        progress(0, 0);
        return Vec::new();
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
        let record = ChildRecord::read(&path);
        match record {
            Some(rec) if is_orphan(&rec) => found.push((
                path,
                SweptOrphan {
                    name,
                    pid: rec.pid,
                    pgid: rec.pgid,
                    command: rec.command.clone(),
                    killed: false,
                },
                tree_of(&rec),
            )),
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let total = found.len();
    progress(total, total);
    for (_, o, tree) in &found {
        tracing::warn!(server = %o.name, pid = o.pid, pgid = o.pgid, command = %o.command, "stopping orphan from a previous daemon");
        tree.signal(Signal::SIGTERM);
    }
    let mut alive: Vec<usize> = (0..total).collect();
    wait_groups_gone(&found, &mut alive, grace, &mut progress);
    if !alive.is_empty() {
        for &i in &alive {
            found[i].1.killed = true;
            found[i].2.signal(Signal::SIGKILL);
        }
        wait_groups_gone(&found, &mut alive, Duration::from_secs(5), &mut progress);
        for &i in &alive {
            tracing::warn!(
                pgid = found[i].1.pgid,
                "orphan process tree still alive after SIGKILL"
            );
        }
    }
    let _changing = changing();
    found
        .into_iter()
        .map(|(path, o, _)| {
            let _ = std::fs::remove_file(&path);
            o
        })
        .collect()
}

/// Polls the groups indexed by `alive` until none is left or `within` has
/// passed, dropping each from `alive` as it goes (and reporting the count).
fn wait_groups_gone(
    found: &[(PathBuf, SweptOrphan, Tree)],
    alive: &mut Vec<usize>,
    within: Duration,
    progress: &mut impl FnMut(usize, usize),
) {
    let deadline = std::time::Instant::now() + within;
    let mut delay = Duration::from_millis(2);
    loop {
        let before = alive.len();
        alive.retain(|&i| found[i].2.alive(None));
        if alive.len() != before {
            progress(found.len(), alive.len());
        }
        if alive.is_empty() || std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

fn tree_of(rec: &ChildRecord) -> Tree {
    // A reused root pid may lead a group of that number: not ours then.
    let reused = group::start_time(rec.pid).is_some_and(|t| Some(t) != rec.start_time);
    let tree = Tree::of(rec.pid, rec.start_time, if reused { 0 } else { rec.pgid });
    tree.meet(&rec.descendants);
    tree
}

fn is_orphan(rec: &ChildRecord) -> bool {
    if rec.pgid <= 1 {
        return false;
    }
    // A recorded descendant still running (the root may be gone).
    if rec
        .descendants
        .iter()
        .any(|(p, s)| *p > 1 && group::start_time(*p) == Some(*s) && group::pid_alive(*p))
    {
        return true;
    }
    match group::start_time(rec.pid) {
        // Same pid, same start: the very process we spawned.
        Some(t) => rec.start_time == Some(t) && group::pid_alive(rec.pid),
        // Leader gone: only its own (surviving) group can still carry its id.
        None => rec.pid == rec.pgid && group::group_alive(rec.pgid, None),
    }
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
            descendants: vec![(12, 100)],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = record_path(dir.path(), "x");
        write(&path, &rec).unwrap();
        assert_eq!(ChildRecord::read(&path), Some(rec));
        // The format of every xyd so far, with a field it does not know.
        std::fs::write(
            &path,
            r#"{"pid":7,"pgid":7,"start_time":null,"command":"c","later":1}"#,
        )
        .unwrap();
        assert_eq!(
            ChildRecord::read(&path),
            Some(ChildRecord {
                pid: 7,
                pgid: 7,
                start_time: None,
                command: "c".into(),
                descendants: Vec::new(),
            })
        );
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
            descendants: vec![(me, 1)],
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
