//! One server's call records on disk: a ring of two files,
//! `<name>.jsonl` (being written) and `<name>.jsonl.1` (the one before),
//! under `$XDG_STATE_HOME/xy/calls/` (mode `0700`). When the current file
//! holds [`FILE_RECORDS`] records or [`FILE_BYTES`] bytes it replaces the
//! previous one, so a server keeps at least the last [`FILE_RECORDS`]
//! calls (fewer only if its records are unusually long) in at most
//! 2 × [`FILE_BYTES`] (plus one line), whatever the call rate.
//!
//! Lines are written by the log-writer threads (`log_router/writers.rs`),
//! never on the async threads; a queue waiting for them holds at most
//! [`MAX_PENDING`] bytes (past that a record is dropped and counted). A
//! file found damaged when first opened (a line that is not a record) is
//! renamed `<name>.jsonl.damaged` and a fresh one started.
//!
//! The line format (docs/calls.md): `{"t":<unix ms>,"c":"<client>",
//! "n":"<tool>","d":<µs>,"o":"<outcome>"}`, `c` absent without a client.
//! The server's name is the file's.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use xy_core::protocol::mcp::{CallOutcome, CallRecord};

use crate::writers::{Drain, Writers};

/// Records per file before it rotates.
pub(crate) const FILE_RECORDS: u64 = 10_000;
/// Bytes per file before it rotates (1 MiB).
pub(crate) const FILE_BYTES: u64 = 1024 * 1024;
/// Bytes of lines waiting for a writer, at most.
pub(crate) const MAX_PENDING: usize = 256 * 1024;
/// The longest line read back: longer is damage (records are bounded by
/// [`super::MAX_FIELD`] per text field).
const MAX_LINE: usize = 2048;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One line of a calls file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Line<'a> {
    /// When the call arrived, Unix milliseconds.
    pub(crate) t: u64,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub(crate) c: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) n: std::borrow::Cow<'a, str>,
    pub(crate) d: u64,
    pub(crate) o: CallOutcome,
}

impl Line<'_> {
    pub(crate) fn record(&self, server: &str) -> CallRecord {
        CallRecord {
            ts: xy_core::time::rfc3339_ms(UNIX_EPOCH + Duration::from_millis(self.t)),
            server: server.to_owned(),
            client: self.c.as_deref().map(str::to_owned),
            tool: self.n.clone().into_owned(),
            duration_us: self.d,
            outcome: self.o,
        }
    }
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The file's paths.
fn current(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.jsonl"))
}
fn previous(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.jsonl.1"))
}
fn damaged(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.jsonl.damaged"))
}

#[derive(Debug, Default)]
struct Queue {
    lines: Vec<(u64, Vec<u8>)>,
    bytes: usize,
    /// With the writers (waiting for one, or being written).
    draining: bool,
    /// The sequence number of the last record queued.
    last_seq: u64,
}

/// The open file and what is known of it (the writers' side).
#[derive(Debug)]
struct Files {
    dir: PathBuf,
    name: String,
    file: Option<File>,
    records: u64,
    bytes: u64,
    /// A write failed: said once until one works again.
    failing: bool,
}

/// One server's queue and files; see the module docs.
#[derive(Debug)]
pub(crate) struct CallFile {
    queue: Mutex<Queue>,
    /// Held by a writer for its turn and by a reader, so a record is always
    /// in the queue or in a file for the reader.
    files: Mutex<Files>,
    writers: Arc<Writers>,
    /// Records dropped because the queue was full.
    pub(crate) dropped: AtomicU64,
}

impl CallFile {
    pub(crate) fn new(dir: PathBuf, name: &str, writers: Arc<Writers>) -> Arc<CallFile> {
        Arc::new(CallFile {
            queue: Mutex::default(),
            files: Mutex::new(Files {
                dir,
                name: name.to_owned(),
                file: None,
                records: 0,
                bytes: 0,
                failing: false,
            }),
            writers,
            dropped: AtomicU64::new(0),
        })
    }

    /// Queues one line (with its newline) as record `seq`; `false` when the
    /// queue is full and it was dropped.
    pub(crate) fn push(self: &Arc<Self>, seq: u64, line: Vec<u8>) -> bool {
        let start = {
            let mut q = lock(&self.queue);
            q.last_seq = seq;
            if q.bytes + line.len() > MAX_PENDING {
                drop(q);
                if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("calls: the writer is behind; call records are being dropped");
                }
                return false;
            }
            q.bytes += line.len();
            q.lines.push((seq, line));
            !std::mem::replace(&mut q.draining, true)
        };
        if start {
            if tokio::runtime::Handle::try_current().is_ok() {
                self.writers.submit(self.clone());
            } else {
                while self.drain_turn(usize::MAX) {}
            }
        }
        true
    }

    /// The last `limit` records (file order: by completion), and the
    /// sequence number of the last record queued at the time (live records
    /// after it are not among them). Blocking file reads.
    pub(crate) fn read(&self, limit: usize) -> (Vec<CallRecord>, u64) {
        let files = lock(&self.files);
        let name = files.name.clone();
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let want = limit.saturating_mul(MAX_LINE) as u64;
        let cur = tail(&current(&files.dir, &name), want);
        let have = cur.iter().filter(|&&b| b == b'\n').count();
        if have < limit {
            let prev = tail(&previous(&files.dir, &name), want);
            lines.extend(prev.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        }
        lines.extend(cur.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        let last_seq = {
            let q = lock(&self.queue);
            lines.extend(q.lines.iter().map(|(_, l)| l.clone()));
            q.last_seq
        };
        drop(files);
        let mut out: Vec<CallRecord> = lines
            .iter()
            .filter_map(|l| serde_json::from_slice::<Line<'_>>(l.trim_ascii()).ok())
            .map(|l| l.record(&name))
            .collect();
        let skip = out.len().saturating_sub(limit);
        out.drain(..skip);
        (out, last_seq)
    }

    /// Writes whatever is queued now, on this thread (tests, shutdown).
    pub(crate) fn flush(&self) {
        while self.drain_turn(usize::MAX) {}
    }
}

/// The last `want` bytes of a file, from a line start (empty if absent).
fn tail(path: &Path, want: u64) -> Vec<u8> {
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let from = len.saturating_sub(want);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.take(want).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    if from > 0 {
        // The first line is partial.
        let start = memchr::memchr(b'\n', &buf).map_or(buf.len(), |i| i + 1);
        buf.drain(..start);
    }
    buf
}

impl Files {
    /// The current file, opened (and checked) the first time.
    fn open(&mut self) -> std::io::Result<&mut File> {
        if self.file.is_none() {
            create_dir(&self.dir)?;
            let path = current(&self.dir, &self.name);
            let (records, bytes) = match std::fs::read(&path) {
                Ok(text) => match check(&text) {
                    Some(n) => (n, text.len() as u64),
                    None => {
                        tracing::warn!(path = %path.display(), "calls: the file is damaged; set aside as {}", damaged(&self.dir, &self.name).display());
                        std::fs::rename(&path, damaged(&self.dir, &self.name))?;
                        (0, 0)
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, 0),
                Err(e) => return Err(e),
            };
            self.records = records;
            self.bytes = bytes;
            self.file = Some(open_append(&path)?);
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    fn write(&mut self, line: &[u8]) {
        let r = self.open().and_then(|f| f.write_all(line));
        match r {
            Ok(()) => {
                self.failing = false;
                self.records += 1;
                self.bytes += line.len() as u64;
                if self.records >= FILE_RECORDS || self.bytes >= FILE_BYTES {
                    self.rotate();
                }
            }
            Err(e) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(server = %self.name, dir = %self.dir.display(), error = %e, "calls: cannot write the call records");
                }
                // Opened again next time (the directory may come back).
                self.file = None;
            }
        }
    }

    fn rotate(&mut self) {
        self.file = None;
        let (cur, prev) = (
            current(&self.dir, &self.name),
            previous(&self.dir, &self.name),
        );
        if let Err(e) = std::fs::rename(&cur, &prev) {
            tracing::warn!(path = %cur.display(), error = %e, "calls: cannot rotate");
            // Never grow past the bound: start the file again instead.
            let _ = std::fs::remove_file(&cur);
        }
        self.records = 0;
        self.bytes = 0;
    }
}

/// The records of a whole file, or `None` if a line is not one. A last
/// line cut short (the daemon died mid-write) is damage too: rare, and
/// setting the file aside keeps every later line whole.
fn check(text: &[u8]) -> Option<u64> {
    let mut n = 0;
    if !text.is_empty() && text.last() != Some(&b'\n') {
        return None;
    }
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if line.len() > MAX_LINE {
            return None;
        }
        serde_json::from_slice::<Line<'_>>(line).ok()?;
        n += 1;
    }
    Some(n)
}

fn create_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // An existing directory is tightened too: calls say what was used.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl Drain for CallFile {
    fn drain_turn(&self, budget: usize) -> bool {
        let mut files = lock(&self.files);
        let batch = {
            let mut q = lock(&self.queue);
            if q.lines.is_empty() {
                q.draining = false;
                return false;
            }
            q.bytes = 0;
            std::mem::take(&mut q.lines)
        };
        // The whole queue in one turn: it is bounded by `MAX_PENDING`, no
        // more than a turn's `budget`.
        let _ = budget;
        for (_, line) in &batch {
            files.write(line);
        }
        // Another turn for what came meanwhile (another server goes first).
        let mut q = lock(&self.queue);
        if q.lines.is_empty() {
            q.draining = false;
            false
        } else {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: u64, tool: &str, outcome: CallOutcome) -> Vec<u8> {
        let mut v = serde_json::to_vec(&Line {
            t,
            c: Some("client 1.0".into()),
            n: tool.into(),
            d: 1234,
            o: outcome,
        })
        .unwrap();
        v.push(b'\n');
        v
    }

    fn size(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    }

    #[test]
    fn the_ring_keeps_the_last_records_in_bounded_space() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("calls");
        let f = CallFile::new(dir.clone(), "srv", crate::writers::shared().clone());
        let total = 3 * FILE_RECORDS + 17;
        for i in 0..total {
            f.push(i, line(1_700_000_000_000 + i, "echo", CallOutcome::Ok));
        }
        f.flush();
        let bytes = size(&dir);
        assert!(bytes <= 2 * FILE_BYTES, "{bytes} bytes on disk");
        let (got, last) = f.read(FILE_RECORDS as usize);
        assert_eq!(
            got.len(),
            FILE_RECORDS as usize,
            "at least the last {FILE_RECORDS}"
        );
        assert_eq!(last, total - 1);
        let newest = xy_core::time::rfc3339_ms(
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + total - 1),
        );
        assert_eq!(got.last().unwrap().ts, newest);
        assert_eq!(got[0].server, "srv");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_damaged_file_is_set_aside_and_writing_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut text = line(1, "a", CallOutcome::Ok);
        text.extend_from_slice(b"\xff\xfe garbage\n");
        std::fs::write(current(&dir, "srv"), &text).unwrap();
        let f = CallFile::new(dir.clone(), "srv", crate::writers::shared().clone());
        f.push(1, line(2, "b", CallOutcome::ToolError));
        f.flush();
        assert_eq!(std::fs::read(damaged(&dir, "srv")).unwrap(), text);
        let (got, _) = f.read(10);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].tool, "b");
        assert_eq!(got[0].outcome, CallOutcome::ToolError);
        // A good file is kept and counted.
        let g = CallFile::new(dir.clone(), "srv", crate::writers::shared().clone());
        g.push(2, line(3, "c", CallOutcome::Ok));
        g.flush();
        assert_eq!(g.read(10).0.len(), 2);
        assert_eq!(lock(&g.files).records, 2);
    }

    #[test]
    fn a_full_queue_drops_records_instead_of_growing() {
        let tmp = tempfile::tempdir().unwrap();
        let writers = Writers::new(1, Duration::from_secs(60));
        let f = CallFile::new(tmp.path().to_path_buf(), "srv", writers);
        // Marked as with the writers, but none takes it: nothing drains.
        lock(&f.queue).draining = true;
        let mut kept = 0;
        for i in 0..10_000 {
            if f.push(i, line(i, "echo", CallOutcome::Ok)) {
                kept += 1;
            }
        }
        assert!(lock(&f.queue).bytes <= MAX_PENDING);
        assert_eq!(f.dropped.load(Ordering::Relaxed), 10_000 - kept);
        assert!(kept > 0);
    }
}
