//! One server's log file writer, off the async threads: the pumps queue
//! formatted bytes, and the shared log writers (`writers.rs`) write them in
//! order (one writer at a time per server, so a stuck file holds only its
//! own queue). Owns the disk-fault rules of SPEC §5: a failed, removed or
//! stalled file degrades to ring-only with one warning and recovers.

use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::rotating::RotatingWriter;
use crate::writers::{Drain, Writers};

/// How often a broken disk is retried and a live file checked for removal.
const DISK_RETRY: Duration = Duration::from_secs(1);
/// Bytes queued for the writer before a pump waits for it: the child is
/// slowed only by a disk slower than itself.
const MAX_PENDING: usize = 2 * 1024 * 1024;
/// A writer that makes no progress for this long (a hung filesystem, a
/// FIFO nobody reads) is a fault: pumps stop waiting and lines go to the
/// ring only until it moves again.
const STALL: Duration = Duration::from_secs(5);
/// A recycled buffer above this size is freed once the queue is idle.
const KEEP_BUF: usize = 64 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug, Default)]
struct Queue {
    /// Shared with the ring when it keeps a big read (see `ring::Block`).
    jobs: VecDeque<Arc<Vec<u8>>>,
    /// The queue is with the writers (waiting for one, or being written).
    draining: bool,
    /// Written buffers, for the next batches.
    spare: Vec<Vec<u8>>,
}

/// The per-server queue between the pumps and the file; see the module docs.
#[derive(Debug)]
pub(crate) struct DiskQueue {
    queue: Mutex<Queue>,
    /// Bytes queued and not yet written.
    pending: AtomicUsize,
    /// Batches written (progress, for stall detection).
    written: AtomicU64,
    /// Signalled after every batch written.
    room: Notify,
    /// The writer is stalled: batches are dropped until it moves.
    stalled: AtomicBool,
    log: Mutex<DiskLog>,
    writers: Arc<Writers>,
}

impl DiskQueue {
    pub(crate) fn new(log: DiskLog) -> Arc<DiskQueue> {
        DiskQueue::with_writers(log, crate::writers::shared().clone())
    }

    /// A queue written by `writers` (the tests' own, with other limits).
    pub(crate) fn with_writers(log: DiskLog, writers: Arc<Writers>) -> Arc<DiskQueue> {
        Arc::new(DiskQueue {
            queue: Mutex::default(),
            pending: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            room: Notify::new(),
            stalled: AtomicBool::new(false),
            log: Mutex::new(log),
            writers,
        })
    }

    /// Returns once the queue has room, or the writer is declared stalled.
    pub(crate) async fn wait_for_room(&self) {
        let mut progress = self.written.load(Ordering::Acquire);
        let mut since = tokio::time::Instant::now();
        loop {
            let notified = self.room.notified();
            if self.pending.load(Ordering::Acquire) < MAX_PENDING
                || self.stalled.load(Ordering::Acquire)
            {
                return;
            }
            if tokio::time::timeout_at(since + STALL, notified)
                .await
                .is_err()
            {
                let now = self.written.load(Ordering::Acquire);
                if now == progress {
                    self.stall();
                    return;
                }
                progress = now;
                since = tokio::time::Instant::now();
            }
        }
    }

    fn stall(&self) {
        if !self.stalled.swap(true, Ordering::AcqRel) {
            let log = self.log.try_lock();
            let (name, path) = match &log {
                Ok(l) => (l.name.clone(), l.path.display().to_string()),
                Err(_) => (String::new(), String::new()),
            };
            drop(log);
            tracing::warn!(server = %name, path = %path, "log file writes stalled for {}s; keeping logs in memory only until it moves", STALL.as_secs());
        }
    }

    /// An empty buffer for the next batch (a recycled one if any).
    pub(crate) fn buffer(&self) -> Vec<u8> {
        lock(&self.queue).spare.pop().unwrap_or_default()
    }

    /// A buffer the ring let go of: kept for the next batch if the file
    /// has it written already (no other owner) and few are kept, so a
    /// flood reuses its buffers instead of faulting in new ones.
    pub(crate) fn give_back(&self, bytes: Arc<Vec<u8>>) {
        if let Ok(bytes) = Arc::try_unwrap(bytes) {
            let mut q = lock(&self.queue);
            if q.spare.len() < 2 {
                q.spare.push(recycle(bytes, true));
            }
        }
    }

    /// Queues `bytes` (whole `\n`-terminated lines) for the file. Without a
    /// tokio runtime (unit tests) they are written at once.
    pub(crate) fn write(self: &Arc<Self>, bytes: Vec<u8>) {
        if bytes.is_empty() || self.stalled.load(Ordering::Acquire) {
            lock(&self.queue).spare.push(recycle(bytes, true));
            return;
        }
        self.write_shared(Arc::new(bytes));
    }

    /// [`DiskQueue::write`] for a buffer the ring keeps too: recycled only
    /// if the ring has let go of it by the time it is written.
    pub(crate) fn write_shared(self: &Arc<Self>, bytes: Arc<Vec<u8>>) {
        if bytes.is_empty() || self.stalled.load(Ordering::Acquire) {
            return;
        }
        self.pending.fetch_add(bytes.len(), Ordering::AcqRel);
        let start = {
            let mut q = lock(&self.queue);
            q.jobs.push_back(bytes);
            !std::mem::replace(&mut q.draining, true)
        };
        if start {
            if tokio::runtime::Handle::try_current().is_ok() {
                self.writers.submit(self.clone());
            } else {
                while self.drain_turn(usize::MAX) {}
            }
        }
    }

    /// Nothing queued or being written.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Queues `bytes` as if a writer were on its way (for a test to run
    /// the turns itself).
    #[cfg(test)]
    pub(crate) fn enqueue_for_test(&self, bytes: Vec<u8>) {
        self.pending.fetch_add(bytes.len(), Ordering::AcqRel);
        let mut q = lock(&self.queue);
        q.jobs.push_back(Arc::new(bytes));
        q.draining = true;
    }

    #[cfg(test)]
    pub(crate) fn with_log<T>(&self, f: impl FnOnce(&mut DiskLog) -> T) -> T {
        f(&mut lock(&self.log))
    }
}

/// An emptied buffer; a large one is shrunk unless more work is queued.
fn recycle(mut buf: Vec<u8>, busy: bool) -> Vec<u8> {
    buf.clear();
    if !busy && buf.capacity() > KEEP_BUF {
        buf.shrink_to(KEEP_BUF);
    }
    buf
}

#[derive(Debug)]
enum Disk {
    Ok(RotatingWriter),
    /// Writing failed or the file is gone; ring-only until a reopen works.
    Broken,
}

/// The file itself and its fault state.
#[derive(Debug)]
pub(crate) struct DiskLog {
    name: String,
    path: PathBuf,
    rotate_bytes: u64,
    disk: Disk,
    /// A fault was reported and no write has succeeded since. Reopening
    /// proves nothing (it succeeds on a full disk), so only a successful
    /// write clears it: one warning per fault, one "writable again" after.
    degraded: bool,
    /// Warnings issued, for the tests.
    #[cfg(test)]
    pub(crate) fault_warnings: usize,
    /// "Writable again" messages issued, for the tests.
    #[cfg(test)]
    pub(crate) recoveries: usize,
    /// Last reopen attempt or identity check.
    last_check: Instant,
}

impl DiskLog {
    /// Opens `<log_dir>/<name>.log` (a failure is reported and retried).
    pub(crate) fn open(name: &str, path: PathBuf, rotate_bytes: u64) -> DiskLog {
        let (disk, degraded) = match open_live(&path, rotate_bytes) {
            Ok(w) => (Disk::Ok(w), false),
            Err(e) => {
                tracing::warn!(server = %name, path = %path.display(), error = %e, "cannot open log file; keeping logs in memory only until it works");
                (Disk::Broken, true)
            }
        };
        DiskLog {
            name: name.to_owned(),
            path,
            rotate_bytes,
            disk,
            degraded,
            #[cfg(test)]
            fault_warnings: usize::from(degraded),
            #[cfg(test)]
            recoveries: 0,
            last_check: Instant::now(),
        }
    }

    /// Writes whole lines (one write per batch, rotation between lines).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.maintain();
        let Disk::Ok(w) = &mut self.disk else {
            return;
        };
        match w.write_lines(bytes).and_then(|()| std::io::Write::flush(w)) {
            Ok(()) if self.degraded => {
                self.degraded = false;
                #[cfg(test)]
                {
                    self.recoveries += 1;
                }
                tracing::info!(server = %self.name, path = %self.path.display(), "log file writable again");
            }
            Ok(()) => {}
            Err(e) => {
                self.disk = Disk::Broken;
                self.last_check = Instant::now();
                self.fault(
                    &e,
                    "log file write failed; keeping logs in memory only until it works",
                );
            }
        }
    }

    /// Reopens a broken disk, or notices that the live file was removed or
    /// replaced (by another file, a directory, …), at most once per
    /// [`DISK_RETRY`].
    fn maintain(&mut self) {
        if self.last_check.elapsed() < DISK_RETRY {
            return;
        }
        self.last_check = Instant::now();
        match &self.disk {
            Disk::Ok(w) if same_file(w, &self.path) => {}
            Disk::Ok(_) => {
                // Lines written now would go to an unlinked file (or fail).
                self.disk = Disk::Broken;
                match open_live(&self.path, self.rotate_bytes) {
                    Ok(w) => {
                        self.disk = Disk::Ok(w);
                        tracing::warn!(server = %self.name, path = %self.path.display(), "log file was removed or replaced; reopened it");
                    }
                    Err(e) => self.fault(&e, "log file was removed or replaced and cannot reopen log file; keeping logs in memory only until it works"),
                }
            }
            Disk::Broken => match open_live(&self.path, self.rotate_bytes) {
                // Quietly: "writable again" waits for a write that works.
                Ok(w) => self.disk = Disk::Ok(w),
                Err(e) => self.fault(
                    &e,
                    "cannot reopen log file; keeping logs in memory only until it works",
                ),
            },
        }
    }

    /// Reports a disk fault unless this one was already reported.
    fn fault(&mut self, error: &std::io::Error, what: &str) {
        if self.degraded {
            return;
        }
        self.degraded = true;
        #[cfg(test)]
        {
            self.fault_warnings += 1;
        }
        tracing::warn!(server = %self.name, path = %self.path.display(), error = %error, "{what}");
    }

    #[cfg(test)]
    pub(crate) fn is_ok(&self) -> bool {
        matches!(self.disk, Disk::Ok(_)) && !self.degraded
    }

    #[cfg(test)]
    pub(crate) fn force_check(&mut self) {
        self.last_check = Instant::now() - DISK_RETRY;
    }
}

/// Opens the live file. A directory fails to open by itself, a socket is
/// refused. A FIFO is opened without blocking (no reader yet: a fault,
/// retried) and then written like a file: its reader's pace is the disk's.
fn open_live(path: &Path, rotate_bytes: u64) -> std::io::Result<RotatingWriter> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => Err(std::io::Error::other(
            "the log path is a socket, not a file",
        )),
        Ok(m) if m.file_type().is_fifo() => RotatingWriter::open_fifo(path),
        _ => RotatingWriter::open(path, rotate_bytes),
    }
}

/// Whether `path` still names the file `w` writes to (same device and
/// inode): a removed, renamed or replaced file is not.
fn same_file(w: &RotatingWriter, path: &Path) -> bool {
    match (w.file_id(), std::fs::metadata(path)) {
        (Ok(open), Ok(now)) => open == (now.dev(), now.ino()),
        _ => false,
    }
}

/// The writers' side of the queue: one turn of writes (see [`Drain`]).
impl Drain for DiskQueue {
    fn drain_turn(&self, budget: usize) -> bool {
        let mut log = lock(&self.log);
        let mut done = 0usize;
        loop {
            let job = {
                let mut q = lock(&self.queue);
                match q.jobs.pop_front() {
                    Some(job) => job,
                    None => {
                        q.draining = false;
                        return false;
                    }
                }
            };
            log.write(&job);
            done = done.saturating_add(job.len());
            self.pending.fetch_sub(job.len(), Ordering::AcqRel);
            self.written.fetch_add(1, Ordering::AcqRel);
            if self.stalled.swap(false, Ordering::AcqRel) {
                tracing::info!(server = %log.name, path = %log.path.display(), "log file writes moving again");
            }
            self.room.notify_waiters();
            let mut q = lock(&self.queue);
            if q.spare.len() < 2
                && let Ok(job) = Arc::try_unwrap(job)
            {
                let busy = !q.jobs.is_empty();
                q.spare.push(recycle(job, busy));
            }
            if done >= budget {
                if q.jobs.is_empty() {
                    q.draining = false;
                    return false;
                }
                return true;
            }
        }
    }
}
