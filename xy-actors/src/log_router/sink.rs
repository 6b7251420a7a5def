//! One server's log sink: the rotating file, the ring buffer and the live
//! broadcast, fed a batch at a time by that server's two pumps.
//!
//! Documented exception to "no shared mutable state": the sink is an
//! `Arc<std::sync::Mutex<LogSink>>`. The LogRouterActor creates and owns it;
//! the ServerActor hands it to the pumps of each child it spawns. A ractor
//! message per line would cost more than the child's own write (SPEC §5 wants
//! the child never slowed), so the pumps lock it once per read batch — never
//! across an `.await` — and the router reads it for `logs --tail`.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::broadcast;
use xy_core::protocol::LogStream;

use super::pump::Lines;
use super::ring::Ring;
use super::rotating::RotatingWriter;
use crate::logs::LogLine;

/// How many lines a live follower may fall behind before it is dropped.
pub(crate) const DEFAULT_FOLLOW_BUFFER: usize = 8192;

/// Where and how big: the per-server sink settings.
#[derive(Debug, Clone)]
pub(crate) struct SinkSettings {
    pub(crate) log_dir: PathBuf,
    pub(crate) rotate_bytes: u64,
    pub(crate) ring_bytes: usize,
    pub(crate) follow_buffer: usize,
}
/// Disk buffer capacity kept between batches; a larger one (from a flood)
/// is released at the first small batch after it.
const DISK_BUF_KEEP: usize = 64 * 1024;
/// How often a broken disk is retried and a live file checked for removal.
const DISK_RETRY: Duration = Duration::from_secs(1);

/// A sink shared by the router and the pumps; see the module docs.
pub(crate) type SharedSink = Arc<Mutex<LogSink>>;

/// Locks a sink; a pump that panicked mid-batch leaves nothing half-done
/// that matters, so poisoning is ignored.
pub(crate) fn lock(sink: &SharedSink) -> MutexGuard<'_, LogSink> {
    sink.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug)]
enum Disk {
    Ok(RotatingWriter),
    /// Writing failed or the file is gone; ring-only until a reopen works.
    Broken,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LogSink {
    name: Arc<str>,
    path: PathBuf,
    rotate_bytes: u64,
    disk: Disk,
    /// A fault was reported and no write has succeeded since. Reopening
    /// proves nothing (it succeeds on a full disk), so only a successful
    /// write clears it: one warning per fault, one "writable again" after.
    degraded: bool,
    /// Warnings issued, for the tests.
    #[cfg(test)]
    fault_warnings: usize,
    /// "Writable again" messages issued, for the tests.
    #[cfg(test)]
    recoveries: usize,
    /// Last reopen attempt or identity check.
    last_check: Instant,
    ring: Ring,
    follow: Follow,
    /// Capacity of the broadcast channel, created at the first follower.
    follow_buffer: usize,
    disk_buf: Vec<u8>,
}

/// The live broadcast. Its slots are allocated up front (`follow_buffer`
/// lines), so it exists only while someone follows: most servers are never
/// followed, and an idle daemon must stay small.
#[derive(Debug)]
enum Follow {
    /// Nobody follows; created at the next `subscribe(follow)`.
    Idle,
    Live(broadcast::Sender<LogLine>),
    /// The server was removed: no new follower.
    Closed,
}

impl LogSink {
    pub(crate) fn new(name: &str, settings: &SinkSettings) -> LogSink {
        let rotate_bytes = settings.rotate_bytes;
        let path = settings.log_dir.join(format!("{name}.log"));
        let (disk, degraded) = match open_live(&path, rotate_bytes) {
            Ok(w) => (Disk::Ok(w), false),
            Err(e) => {
                tracing::warn!(server = %name, path = %path.display(), error = %e, "cannot open log file; keeping logs in memory only until it works");
                (Disk::Broken, true)
            }
        };
        LogSink {
            name: Arc::from(name),
            path,
            rotate_bytes,
            disk,
            degraded,
            #[cfg(test)]
            fault_warnings: usize::from(degraded),
            #[cfg(test)]
            recoveries: 0,
            last_check: Instant::now(),
            ring: Ring::new(Arc::from(name), settings.ring_bytes),
            follow: Follow::Idle,
            follow_buffer: settings.follow_buffer.max(1),
            disk_buf: Vec::new(),
        }
    }

    pub(crate) fn shared(self) -> SharedSink {
        Arc::new(Mutex::new(self))
    }

    /// Takes one read batch of one stream: every line goes to disk, ring
    /// and followers. The disk gets one buffered write per batch.
    pub(crate) fn push_batch(&mut self, stream: LogStream, lines: Lines) {
        if lines.is_empty() {
            return;
        }
        let ts = SystemTime::now();
        self.maintain_disk();
        if let Disk::Ok(w) = &mut self.disk {
            // Every line of one read gets the same millisecond stamp: the
            // prefix is formatted once per batch.
            let mut prefix = xy_core::time::rfc3339_ms(ts);
            prefix.push_str(" [");
            prefix.push_str(stream.tag());
            prefix.push_str("] ");
            let buf = &mut self.disk_buf;
            buf.clear();
            buf.reserve(lines.text_len() + lines.len() * (prefix.len() + 1));
            for line in lines.iter() {
                buf.extend_from_slice(prefix.as_bytes());
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
            }
            let written = w.write_lines(buf).and_then(|()| w.flush());
            if buf.capacity() > DISK_BUF_KEEP && buf.len() < buf.capacity() / 4 {
                // A flood is over: an idle server must not pin its buffer.
                *buf = Vec::new();
            }
            match written {
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
        if let Follow::Live(tx) = &self.follow
            && tx.receiver_count() == 0
        {
            // The last follower left: give the slots back.
            self.follow = Follow::Idle;
        }
        if let Follow::Live(tx) = &self.follow {
            for line in lines.iter() {
                // Never blocks: a slow receiver lags and is dropped.
                let _ = tx.send(LogLine {
                    name: self.name.clone(),
                    stream,
                    line: line.to_owned(),
                    ts,
                });
            }
        }
        self.ring.push(stream, ts, lines);
    }

    /// Reopens a broken disk, or notices that the live file was removed or
    /// replaced (by another file, a directory, …), at most once per
    /// [`DISK_RETRY`].
    fn maintain_disk(&mut self) {
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

    /// The buffered tail and, when following, a live receiver. Both are taken
    /// under the same lock, so no line is missed or duplicated between them.
    pub(crate) fn subscribe(
        &mut self,
        tail: Option<usize>,
        follow: bool,
    ) -> (Vec<LogLine>, Option<broadcast::Receiver<LogLine>>) {
        let rx = if follow {
            match &self.follow {
                Follow::Live(tx) => Some(tx.subscribe()),
                Follow::Idle => {
                    let (tx, rx) = broadcast::channel(self.follow_buffer);
                    self.follow = Follow::Live(tx);
                    Some(rx)
                }
                Follow::Closed => None,
            }
        } else {
            None
        };
        (self.ring.tail(tail), rx)
    }

    /// Ends every follower (server removed).
    pub(crate) fn close(&mut self) {
        self.follow = Follow::Closed;
    }

    #[cfg(test)]
    pub(crate) fn is_disk_ok(&self) -> bool {
        matches!(self.disk, Disk::Ok(_)) && !self.degraded
    }

    #[cfg(test)]
    pub(crate) fn force_check(&mut self) {
        self.last_check = Instant::now() - DISK_RETRY;
    }
}

/// Opens the live file. A directory fails to open by itself; a FIFO is
/// refused up front (opening it for writing would block the pump). A device
/// such as `/dev/null` behind a symlink is the user's choice and allowed.
fn open_live(path: &Path, rotate_bytes: u64) -> std::io::Result<RotatingWriter> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_socket() => Err(
            std::io::Error::other("the log path is a FIFO or socket, not a file"),
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &std::path::Path) -> SinkSettings {
        SinkSettings {
            log_dir: dir.to_path_buf(),
            rotate_bytes: 1 << 20,
            ring_bytes: 1 << 20,
            follow_buffer: 16,
        }
    }

    fn lines(v: &[&str]) -> Lines {
        let mut l = Lines::default();
        for s in v {
            l.push(s.as_bytes());
        }
        l
    }

    #[test]
    fn writes_tagged_lines_and_fills_ring() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        s.push_batch(LogStream::Stdout, lines(&["hello", "world"]));
        s.push_batch(LogStream::Stderr, lines(&["oops"]));
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].ends_with("Z [out] hello"), "{}", got[0]);
        assert!(got[2].ends_with("Z [err] oops"), "{}", got[2]);
        // `2026-…T…:…:….123Z`: RFC 3339 with milliseconds.
        let stamp = got[0].split(' ').next().unwrap();
        assert_eq!(stamp.len(), "2026-11-30T05:04:54.123Z".len(), "{stamp}");
        let (tail, rx) = s.subscribe(Some(2), false);
        assert!(rx.is_none());
        assert_eq!(
            tail.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
            ["world", "oops"]
        );
    }

    #[test]
    fn disk_failure_degrades_to_ring_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        let mut s = LogSink::new("a", &settings(&logs));
        s.push_batch(LogStream::Stdout, lines(&["one"]));
        // The file and its directory vanish, and a plain file takes the
        // directory's place, so reopening fails.
        std::fs::remove_dir_all(&logs).unwrap();
        std::fs::write(&logs, "not a dir").unwrap();
        s.force_check();
        s.push_batch(LogStream::Stdout, lines(&["two"]));
        assert!(!s.is_disk_ok());
        assert_eq!(s.subscribe(None, false).0.len(), 2, "ring keeps every line");
        // Writing works again: the next check reopens the file.
        std::fs::remove_file(&logs).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        s.force_check();
        s.push_batch(LogStream::Stdout, lines(&["three"]));
        assert!(s.is_disk_ok());
        let text = std::fs::read_to_string(logs.join("a.log")).unwrap();
        assert!(text.contains("[out] three"));
    }

    /// Reopening succeeds on a full disk and the next write fails again:
    /// still one warning for the whole fault, one recovery once a write
    /// works. `/dev/full` stands in for the full disk.
    #[cfg(target_os = "linux")]
    #[test]
    fn full_disk_warns_once_and_recovers_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        s.push_batch(LogStream::Stdout, lines(&["one"]));
        let file = dir.path().join("a.log");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/full", &file).unwrap();
        for i in 0..5 {
            s.force_check();
            s.push_batch(LogStream::Stdout, lines(&[&format!("full {i}")]));
            assert!(!s.is_disk_ok());
        }
        assert_eq!(s.fault_warnings, 1, "one warning for one fault");
        assert_eq!(s.recoveries, 0, "reopening is no recovery");
        std::fs::remove_file(&file).unwrap();
        s.force_check();
        s.push_batch(LogStream::Stdout, lines(&["room again"]));
        assert!(s.is_disk_ok());
        assert_eq!((s.fault_warnings, s.recoveries), (1, 1));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("[out] room again"), "{text}");
        assert_eq!(s.subscribe(None, false).0.len(), 7, "ring keeps every line");
    }

    #[test]
    fn live_file_replaced_by_a_directory_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        s.push_batch(LogStream::Stdout, lines(&["one"]));
        let file = dir.path().join("a.log");
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        for i in 0..3 {
            s.force_check();
            s.push_batch(LogStream::Stdout, lines(&[&format!("dir {i}")]));
            assert!(!s.is_disk_ok());
        }
        assert_eq!(s.fault_warnings, 1);
        std::fs::remove_dir(&file).unwrap();
        s.force_check();
        s.push_batch(LogStream::Stdout, lines(&["file again"]));
        assert!(s.is_disk_ok());
        assert_eq!(s.recoveries, 1);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("[out] file again"), "{text}");
    }

    #[test]
    fn live_file_renamed_away_is_reopened_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        s.push_batch(LogStream::Stdout, lines(&["one"]));
        let file = dir.path().join("a.log");
        std::fs::rename(&file, dir.path().join("a.log.old")).unwrap();
        std::fs::write(&file, "").unwrap();
        s.force_check();
        s.push_batch(LogStream::Stdout, lines(&["two"]));
        assert!(s.is_disk_ok());
        assert_eq!(s.fault_warnings, 0, "not a fault: the file is writable");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("[out] two") && !text.contains("one"),
            "{text}"
        );
    }

    #[test]
    fn broadcast_exists_only_while_followed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        assert!(matches!(s.follow, Follow::Idle));
        let (_, rx) = s.subscribe(None, true);
        let mut rx = rx.unwrap();
        s.push_batch(LogStream::Stdout, lines(&["live"]));
        assert_eq!(rx.try_recv().unwrap().line, "live");
        drop(rx);
        s.push_batch(LogStream::Stdout, lines(&["nobody"]));
        assert!(matches!(s.follow, Follow::Idle), "slots released");
        let (tail, rx) = s.subscribe(Some(1), true);
        assert_eq!(tail[0].line, "nobody");
        let mut rx = rx.unwrap();
        s.push_batch(LogStream::Stdout, lines(&["again"]));
        assert_eq!(rx.try_recv().unwrap().line, "again");
        s.close();
        assert!(rx.try_recv().is_err());
        assert!(s.subscribe(None, true).1.is_none(), "closed: no follower");
    }
}
