//! One server's log sink: the ring buffer, the live broadcast and the queue
//! to its log file, fed a read at a time by that server's two pumps.
//!
//! Documented exception to "no shared mutable state": the sink is an
//! `Arc<std::sync::Mutex<LogSink>>`. The LogRouterActor creates and owns it;
//! the ServerActor hands it to the pumps of each child it spawns. A ractor
//! message per line would cost more than the child's own write (SPEC §5 wants
//! the child never slowed), so the pumps lock it once per read — never
//! across an `.await`, and never around a disk write (see `disk.rs`) — and
//! the router reads it for `logs --tail`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::broadcast;
use xy_core::protocol::LogStream;

use super::chunk::Chunk;
use super::disk::{DiskLog, DiskQueue};
use super::ring::{Block, Ring, ms_since_epoch, ms_to_time};
use crate::logs::LogLine;

/// Reads with at least this much text (a flood's) are kept by the ring as
/// their file buffer instead of being copied into it line by line.
const BLOCK_TEXT: usize = 64 * 1024;

/// Lines of the live broadcast: room for a burst between two turns of a
/// follower's forwarder, which drains it at once (a follower's own bound is
/// in bytes, `logs::FOLLOW_BEHIND`); a forwarder this far behind lags too.
pub(crate) const DEFAULT_FOLLOW_BUFFER: usize = 8192;

/// Where and how big: the per-server sink settings.
#[derive(Debug, Clone)]
pub(crate) struct SinkSettings {
    pub(crate) log_dir: PathBuf,
    pub(crate) rotate_bytes: u64,
    pub(crate) ring_bytes: usize,
    pub(crate) follow_buffer: usize,
}

/// A sink shared by the router and the pumps; see the module docs.
pub(crate) type SharedSink = Arc<Mutex<LogSink>>;

/// Locks a sink; a pump that panicked mid-batch leaves nothing half-done
/// that matters, so poisoning is ignored.
pub(crate) fn lock(sink: &SharedSink) -> MutexGuard<'_, LogSink> {
    sink.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LogSink {
    name: Arc<str>,
    disk: Arc<DiskQueue>,
    ring: Ring,
    follow: Follow,
    /// Capacity of the broadcast channel, created at the first follower.
    follow_buffer: usize,
    /// `<RFC 3339 ms> [out] ` of the last batch, and its ms and stream:
    /// formatted once per millisecond, not per line.
    prefix: (u64, LogStream, String),
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
        let path = settings.log_dir.join(format!("{name}.log"));
        LogSink {
            name: Arc::from(name),
            disk: DiskQueue::new(DiskLog::open(name, path, settings.rotate_bytes)),
            ring: Ring::new(Arc::from(name), settings.ring_bytes),
            follow: Follow::Idle,
            follow_buffer: settings.follow_buffer.max(1),
            prefix: (u64::MAX, LogStream::Stdout, String::new()),
        }
    }

    pub(crate) fn shared(self) -> SharedSink {
        Arc::new(Mutex::new(self))
    }

    /// The file queue, for a pump to wait on while the disk is behind.
    pub(crate) fn disk(&self) -> Arc<DiskQueue> {
        self.disk.clone()
    }

    /// Takes the lines of one read of one stream (`chunk`, cut from `data`):
    /// every line goes to the ring, the followers and the file, each line
    /// with its own `<RFC 3339 ms> [out|err] ` prefix on disk; all lines of
    /// one read share its millisecond.
    ///
    /// Every captured line passes here, a chunk at a time, before anything
    /// keeps it; secrets are already redacted (the pumps do it before they
    /// take the lock, `Chunk::redact`).
    pub(crate) fn push_chunk(&mut self, stream: LogStream, chunk: &Chunk, data: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let ts_ms = ms_since_epoch(SystemTime::now());
        if self.prefix.0 != ts_ms || self.prefix.1 != stream {
            let mut p = xy_core::time::rfc3339_ms(ms_to_time(ts_ms));
            p.push_str(" [");
            p.push_str(stream.tag());
            p.push_str("] ");
            self.prefix = (ts_ms, stream, p);
        }
        let prefix = self.prefix.2.as_bytes();
        let cost = Block::cost_of(chunk.len(), chunk.text_len());
        let bytes = chunk.text_len() + chunk.len() * (prefix.len() + 1);
        // A big read is kept by the ring as its file buffer (below), not
        // copied in line by line: a flood copies each line once, not twice.
        // Only while that buffer costs at most 1.25× the records it stands
        // for (lines of ~90 bytes and up): the ring's memory stays within
        // 1.25× its budget during a flood too.
        let keep_whole =
            chunk.text_len() >= BLOCK_TEXT && self.ring.takes_block(cost) && bytes * 4 <= cost * 5;
        if !keep_whole {
            self.ring.push_batch(
                stream,
                ts_ms,
                chunk.len(),
                chunk.text_len(),
                chunk.lines(data),
            );
        }
        self.broadcast(stream, ts_ms, chunk, data);
        let prefix = self.prefix.2.as_bytes();
        let mut buf = self.disk.buffer();
        buf.reserve(bytes);
        // `2026-12-01T02:17:40.123Z [out] ` is 31 bytes until the year 10000.
        match <&[u8; 31]>::try_from(prefix) {
            Ok(p) => gather(&mut buf, p, chunk, data),
            Err(_) => gather(&mut buf, prefix, chunk, data),
        }
        if keep_whole {
            let bytes = Arc::new(buf);
            let disk = &self.disk;
            self.ring.push_block(
                Block {
                    bytes: bytes.clone(),
                    prefix: prefix.len(),
                    stream,
                    ts_ms,
                    cost,
                },
                |old| disk.give_back(old),
            );
            self.disk.write_shared(bytes);
        } else {
            self.disk.write(buf);
        }
    }

    /// One line of xy's own about the server (`text` has no newline), in
    /// the server's log like a line the child wrote on `stream`.
    pub(crate) fn push_note(&mut self, stream: LogStream, text: &str) {
        let mut data = Vec::with_capacity(text.len() + 1);
        data.extend_from_slice(text.as_bytes());
        data.push(b'\n');
        let mut chunk = Chunk::default();
        chunk.cut(&data, true);
        self.push_chunk(stream, &chunk, &data);
    }

    fn broadcast(&mut self, stream: LogStream, ts_ms: u64, chunk: &Chunk, data: &[u8]) {
        if let Follow::Live(tx) = &self.follow
            && tx.receiver_count() == 0
        {
            // The last follower left: give the slots back.
            self.follow = Follow::Idle;
        }
        let Follow::Live(tx) = &self.follow else {
            return;
        };
        let ts = ms_to_time(ts_ms);
        for line in chunk.lines(data) {
            // Never blocks: a slow receiver lags and is dropped.
            let _ = tx.send(LogLine {
                name: self.name.clone(),
                stream,
                line: String::from_utf8_lossy(line).into_owned(),
                ts,
            });
        }
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
}

/// Appends `<prefix><line>\n` for every line of `chunk` to `buf`. Generic
/// so that the usual fixed-size prefix is two vector stores, not a `memcpy`
/// call per line; out of line (once per read) so a profile shows it.
#[inline(never)]
fn gather<P: AsRef<[u8]> + ?Sized>(buf: &mut Vec<u8>, prefix: &P, chunk: &Chunk, data: &[u8]) {
    let prefix = prefix.as_ref();
    for (line, nl) in chunk.lines_nl(data) {
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(line);
        if !nl {
            buf.push(b'\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_router::chunk::tests::cut_all;

    fn settings(dir: &std::path::Path) -> SinkSettings {
        SinkSettings {
            log_dir: dir.to_path_buf(),
            rotate_bytes: 1 << 20,
            ring_bytes: 1 << 20,
            follow_buffer: 16,
        }
    }

    /// Pushes `lines` as one read (no runtime: written at once).
    fn push(s: &mut LogSink, stream: LogStream, lines: &[&str]) {
        let mut data = Vec::new();
        for l in lines {
            data.extend_from_slice(l.as_bytes());
            data.push(b'\n');
        }
        let mut chunk = Chunk::default();
        chunk.cut(&data, true);
        s.push_chunk(stream, &chunk, &data);
    }

    fn out(s: &mut LogSink, lines: &[&str]) {
        push(s, LogStream::Stdout, lines);
    }

    fn check(s: &LogSink) {
        s.disk.with_log(DiskLog::force_check);
    }

    /// The stdout lines of a log file, without their prefixes.
    fn disk_texts(path: &std::path::Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .map(|l| l.split_once(" [out] ").unwrap().1.to_owned())
            .collect()
    }

    fn disk_ok(s: &LogSink) -> bool {
        s.disk.with_log(|l| l.is_ok())
    }

    fn counts(s: &LogSink) -> (usize, usize) {
        s.disk.with_log(|l| (l.fault_warnings, l.recoveries))
    }

    #[test]
    fn writes_tagged_lines_and_fills_ring() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        out(&mut s, &["hello", "world"]);
        push(&mut s, LogStream::Stderr, &["oops"]);
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
        // The ring's timestamp is the one on disk.
        assert_eq!(
            xy_core::time::rfc3339_ms(tail[1].ts),
            got[2].split(' ').next().unwrap()
        );
        assert_eq!(tail[1].stream, LogStream::Stderr);
    }

    /// What the disk, the ring and a follower get for awkward input: split
    /// long lines, lossy bytes, `\r\n`, an unterminated last line.
    #[test]
    fn every_sink_gets_the_same_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        let (_, rx) = s.subscribe(None, true);
        let mut rx = rx.unwrap();
        let long = format!("x{}", "é".repeat(40_000)); // split inside an é
        let mut input = format!("plain\r\n{long}\nbad ").into_bytes();
        input.extend_from_slice(b"\xff\xfe\nlast");
        let mut want = Vec::new();
        let mut data = Vec::new();
        let mut chunk = Chunk::default();
        for piece in input.chunks(333) {
            data.extend_from_slice(piece);
            let used = chunk.cut(&data, false);
            s.push_chunk(LogStream::Stdout, &chunk, &data);
            data.drain(..used);
        }
        chunk.cut(&data, true);
        s.push_chunk(LogStream::Stdout, &chunk, &data);
        for lines in cut_all(&[&input]) {
            want.extend(lines);
        }
        assert_eq!(want.len(), 5, "{want:?}");
        assert_eq!(want[0], "plain");
        assert_eq!(want[1].len(), 65_535, "cut before the split é");
        assert_eq!(want[3], "bad \u{fffd}\u{fffd}");
        assert_eq!(want[4], "last");
        let ring: Vec<String> = s
            .subscribe(None, false)
            .0
            .into_iter()
            .map(|l| l.line)
            .collect();
        assert_eq!(ring, want);
        let live: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|l| l.line)
            .collect();
        assert_eq!(live, want);
        assert_eq!(disk_texts(&dir.path().join("a.log")), want);
    }

    #[test]
    fn disk_failure_degrades_to_ring_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        let mut s = LogSink::new("a", &settings(&logs));
        out(&mut s, &["one"]);
        // The file and its directory vanish, and a plain file takes the
        // directory's place, so reopening fails.
        std::fs::remove_dir_all(&logs).unwrap();
        std::fs::write(&logs, "not a dir").unwrap();
        check(&s);
        out(&mut s, &["two"]);
        assert!(!disk_ok(&s));
        assert_eq!(s.subscribe(None, false).0.len(), 2, "ring keeps every line");
        // Writing works again: the next check reopens the file.
        std::fs::remove_file(&logs).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        check(&s);
        out(&mut s, &["three"]);
        assert!(disk_ok(&s));
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
        out(&mut s, &["one"]);
        let file = dir.path().join("a.log");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/full", &file).unwrap();
        for i in 0..5 {
            check(&s);
            out(&mut s, &[&format!("full {i}")]);
            assert!(!disk_ok(&s));
        }
        assert_eq!(
            counts(&s),
            (1, 0),
            "one warning for one fault; reopening is no recovery"
        );
        std::fs::remove_file(&file).unwrap();
        check(&s);
        out(&mut s, &["room again"]);
        assert!(disk_ok(&s));
        assert_eq!(counts(&s), (1, 1));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("[out] room again"), "{text}");
        assert_eq!(s.subscribe(None, false).0.len(), 7, "ring keeps every line");
    }

    #[test]
    fn live_file_replaced_by_a_directory_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        out(&mut s, &["one"]);
        let file = dir.path().join("a.log");
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        for i in 0..3 {
            check(&s);
            out(&mut s, &[&format!("dir {i}")]);
            assert!(!disk_ok(&s));
        }
        assert_eq!(counts(&s).0, 1);
        std::fs::remove_dir(&file).unwrap();
        check(&s);
        out(&mut s, &["file again"]);
        assert!(disk_ok(&s));
        assert_eq!(counts(&s).1, 1);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("[out] file again"), "{text}");
    }

    #[test]
    fn live_file_renamed_away_is_reopened_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        out(&mut s, &["one"]);
        let file = dir.path().join("a.log");
        std::fs::rename(&file, dir.path().join("a.log.old")).unwrap();
        std::fs::write(&file, "").unwrap();
        check(&s);
        out(&mut s, &["two"]);
        assert!(disk_ok(&s));
        assert_eq!(counts(&s).0, 0, "not a fault: the file is writable");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("[out] two") && !text.contains("one"),
            "{text}"
        );
    }

    /// A flood's big reads, kept by the ring as their file buffers, give
    /// the ring, the file and a follower the same lines as small reads do;
    /// so does a big read over a small ring's whole budget (copied in).
    #[test]
    fn big_reads_kept_whole_give_the_same_lines() {
        for ring_bytes in [1 << 20, 50_000] {
            let dir = tempfile::tempdir().unwrap();
            let mut set = settings(dir.path());
            set.ring_bytes = ring_bytes;
            set.follow_buffer = 100_000;
            set.rotate_bytes = 1 << 30;
            let mut s = LogSink::new("a", &set);
            let (_, rx) = s.subscribe(None, true);
            let mut rx = rx.unwrap();
            let mut want = Vec::new();
            for read in 0..12 {
                let n = if read % 3 == 2 { 3 } else { 1000 };
                let lines: Vec<String> = (0..n)
                    .map(|i| format!("r{read} l{i} {} {}", "ü".repeat(i % 30), "x".repeat(120)))
                    .collect();
                let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
                out(&mut s, &refs);
                want.extend(lines);
                if read == 0 {
                    assert_eq!(s.ring.blocks_kept(), usize::from(ring_bytes == 1 << 20));
                }
            }
            let ring: Vec<String> = s
                .subscribe(None, false)
                .0
                .into_iter()
                .map(|l| l.line)
                .collect();
            assert!(
                ring.len() > 100 && ring.len() < want.len(),
                "{}",
                ring.len()
            );
            assert_eq!(ring, want[want.len() - ring.len()..], "ring {ring_bytes}");
            let cost: usize = ring.iter().map(|l| l.len() + 8).sum();
            assert!(cost <= ring_bytes, "{cost}");
            assert_eq!(disk_texts(&dir.path().join("a.log")), want);
            let live: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
                .map(|l| l.line)
                .collect();
            assert_eq!(live, want);
        }
    }

    /// A big read of short lines is copied in: kept whole, its prefixes
    /// would make the ring cost more than 1.25× its budget.
    #[test]
    fn big_reads_of_short_lines_are_copied() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        let lines: Vec<String> = (0..3000).map(|i| format!("{i:030}")).collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        out(&mut s, &refs);
        assert_eq!(s.ring.blocks_kept(), 0);
        let long: Vec<String> = (0..1000).map(|i| format!("{i:0150}")).collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        out(&mut s, &refs);
        assert_eq!(s.ring.blocks_kept(), 1);
        let tail: Vec<String> = s
            .subscribe(Some(2), false)
            .0
            .into_iter()
            .map(|l| l.line)
            .collect();
        assert_eq!(tail, long[998..]);
    }

    /// The fixed-size prefix and any other give the same bytes.
    #[test]
    fn gather_with_any_prefix() {
        let data = b"a\r\nbb\n\nc\xff\nend".to_vec();
        let mut chunk = Chunk::default();
        chunk.cut(&data, true);
        let p31 = [b'p'; 31];
        let (mut fixed, mut other) = (Vec::new(), Vec::new());
        gather(&mut fixed, &p31, &chunk, &data);
        gather(&mut other, &p31[..], &chunk, &data);
        assert_eq!(fixed, other);
        let p = "p".repeat(31);
        let want = format!("{p}a\n{p}bb\n{p}\n{p}c\u{fffd}\n{p}end\n");
        assert_eq!(String::from_utf8(fixed).unwrap(), want);
        let mut short = Vec::new();
        gather(&mut short, b"> ".as_slice(), &chunk, &data);
        assert_eq!(
            String::from_utf8(short).unwrap(),
            "> a\n> bb\n> \n> c\u{fffd}\n> end\n"
        );
    }

    #[test]
    fn broadcast_exists_only_while_followed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        assert!(matches!(s.follow, Follow::Idle));
        let (_, rx) = s.subscribe(None, true);
        let mut rx = rx.unwrap();
        out(&mut s, &["live"]);
        assert_eq!(rx.try_recv().unwrap().line, "live");
        drop(rx);
        out(&mut s, &["nobody"]);
        assert!(matches!(s.follow, Follow::Idle), "slots released");
        let (tail, rx) = s.subscribe(Some(1), true);
        assert_eq!(tail[0].line, "nobody");
        let mut rx = rx.unwrap();
        out(&mut s, &["again"]);
        assert_eq!(rx.try_recv().unwrap().line, "again");
        s.close();
        assert!(rx.try_recv().is_err());
        assert!(s.subscribe(None, true).1.is_none(), "closed: no follower");
    }

    /// On a runtime the file is written by the blocking pool, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_off_the_async_threads_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogSink::new("a", &settings(dir.path()));
        for i in 0..500 {
            out(&mut s, &[&format!("n {i}"), &format!("m {i}")]);
        }
        xy_testbins::wait::poll(
            "the writer to catch up",
            std::time::Duration::from_secs(30),
            || std::future::ready(s.disk.idle().then_some(())),
        )
        .await;
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.split_once("] ").unwrap().1)
            .collect();
        let want: Vec<String> = (0..500)
            .flat_map(|i| [format!("n {i}"), format!("m {i}")])
            .collect();
        assert_eq!(lines, want);
    }
}
