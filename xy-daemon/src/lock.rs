//! The daemon's single-instance lock: an exclusive `flock` on the pidfile,
//! taken before anything else and held for the daemon's whole life (the
//! kernel drops it if the process dies, so a lock is never stale).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::DaemonError;

/// The held lock. Dropping it removes the pidfile (if it still holds our
/// pid) and releases the flock.
#[derive(Debug)]
pub struct PidLock {
    // Held only for its flock; never read again.
    _file: File,
    path: PathBuf,
    pid: u32,
}

impl PidLock {
    /// Opens `path` without truncating, takes the exclusive lock without
    /// blocking, then writes our pid. A held lock is
    /// [`DaemonError::AlreadyRunning`] with the holder's pid.
    pub fn acquire(path: &Path) -> Result<PidLock, DaemonError> {
        let io = |action: &'static str| {
            let path = path.to_path_buf();
            move |source| DaemonError::Io {
                action,
                path,
                source,
            }
        };
        // Not truncating before the lock is what keeps the winner's pid
        // readable for the loser's error message.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io("open pidfile"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(DaemonError::AlreadyRunning {
                    pid: read_pid(&mut file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("lock pidfile")(e)),
        }
        let pid = std::process::id();
        file.set_len(0).map_err(io("truncate pidfile"))?;
        file.seek(SeekFrom::Start(0)).map_err(io("write pidfile"))?;
        writeln!(file, "{pid}").map_err(io("write pidfile"))?;
        file.sync_all().map_err(io("write pidfile"))?;
        Ok(PidLock {
            _file: file,
            path: path.to_path_buf(),
            pid,
        })
    }

    /// Our pid, as written to the file.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for PidLock {
    /// Removes the pidfile if it still holds our pid; the flock goes with the
    /// file handle right after. The check matters when someone deleted our
    /// file and a second daemon created its own: we must not delete that one.
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            == Some(self.pid);
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not remove pidfile");
        }
    }
}

/// The pid a lock holder wrote; `None` while it has not written it yet.
fn read_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_with_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xy.pid");
        let held = PidLock::acquire(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim(),
            std::process::id().to_string()
        );
        // flock locks belong to the open file description: a second open in
        // the same process conflicts just like another process would.
        match PidLock::acquire(&path) {
            Err(DaemonError::AlreadyRunning { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected AlreadyRunning, got {other:?}"),
        }
        drop(held);
        assert!(!path.exists());
        let again = PidLock::acquire(&path).unwrap();
        drop(again);
    }

    #[test]
    fn stale_pid_is_overwritten_and_foreign_pid_file_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xy.pid");
        std::fs::write(&path, "999999999999\nextra junk that is longer\n").unwrap();
        let lock = PidLock::acquire(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        // Someone replaced the file: release must leave it alone.
        std::fs::write(&path, "12345\n").unwrap();
        drop(lock);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "12345\n");
    }
}
