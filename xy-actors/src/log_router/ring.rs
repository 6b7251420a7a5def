//! The in-memory tail of one server's output: the most recent lines up to a
//! byte budget (not a line count), so `logs --tail` needs no disk read.
//! One contiguous circular byte buffer per server holds every line as an
//! 8-byte header (timestamp in ms, stream, length) followed by its text, and
//! the budget counts both: what the ring holds is what it costs.
//!
//! A flood's big reads are not copied in line by line: the ring keeps the
//! read's file buffer itself (shared with the disk queue, see [`Block`]) and
//! copies the lines that are still wanted once the flood ends or someone
//! asks for the tail.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use xy_core::protocol::LogStream;

use crate::logs::LogLine;

/// SPEC §5's budget: about 1 MiB per server, headers included.
pub(crate) const DEFAULT_RING_BYTES: usize = 1024 * 1024;

/// Bytes of the per-line header.
const HEADER: usize = 8;
/// Header layout, low bits first: stream (1 bit), length (18 bits: a lossy
/// line of 64 KiB raw bytes decodes to at most 192 KiB), ms since the epoch
/// (45 bits: until the year 3085).
const LEN_BITS: u32 = 18;
const MAX_LEN: usize = (1 << LEN_BITS) - 1;
const TS_MAX: u64 = (1 << (64 - 1 - LEN_BITS)) - 1;
/// The smallest allocation. The first push allocates what it needs (rounded
/// up to a power of two) and the storage doubles from there: a server that
/// prints one startup line and then stays quiet costs that line, not a page
/// (a page per server shows in a fleet's RSS: D42).
const MIN_ALLOC: usize = 64;

/// A timestamp as the ring and the log files keep it: whole ms since the
/// epoch.
pub(crate) fn ms_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, xy_core::time::as_millis_u64)
}

/// The `SystemTime` of [`ms_since_epoch`].
pub(crate) fn ms_to_time(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

fn pack(stream: LogStream, ts_ms: u64, len: usize) -> [u8; HEADER] {
    let s = u64::from(stream == LogStream::Stderr);
    let word = (ts_ms.min(TS_MAX) << (LEN_BITS + 1)) | ((len.min(MAX_LEN) as u64) << 1) | s;
    word.to_le_bytes()
}

fn unpack(h: [u8; HEADER]) -> (LogStream, u64, usize) {
    let word = u64::from_le_bytes(h);
    let stream = if word & 1 == 1 {
        LogStream::Stderr
    } else {
        LogStream::Stdout
    };
    let len = ((word >> 1) as usize) & MAX_LEN;
    (stream, word >> (LEN_BITS + 1), len)
}

/// One big read kept as the file's buffer of it: `<prefix><text>\n` per
/// line, every prefix `prefix` bytes long (one stream, one millisecond).
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) bytes: Arc<Vec<u8>>,
    pub(crate) prefix: usize,
    pub(crate) stream: LogStream,
    pub(crate) ts_ms: u64,
    /// The lines' cost as records: `lines * HEADER + text bytes`.
    pub(crate) cost: usize,
}

impl Block {
    /// The cost of `lines` lines of `text` bytes as records.
    pub(crate) fn cost_of(lines: usize, text: usize) -> usize {
        lines * HEADER + text
    }

    fn texts(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut start = 0;
        memchr::memchr_iter(b'\n', &self.bytes).map(move |nl| {
            let line = &self.bytes[(start + self.prefix).min(nl)..nl];
            start = nl + 1;
            line
        })
    }
}

/// Newest lines, oldest evicted first once their cost passes `cap`.
#[derive(Debug)]
pub(crate) struct Ring {
    name: Arc<str>,
    /// Circular storage; its length is the allocated capacity, grown on
    /// demand up to `cap` (a silent server allocates nothing).
    buf: Vec<u8>,
    /// Where the oldest record starts.
    head: usize,
    /// Bytes in use (headers + text).
    used: usize,
    lines: usize,
    cap: usize,
    /// Big reads newer than every record, not copied yet ([`Ring::settle`]).
    blocks: VecDeque<Block>,
    /// Sum of the blocks' costs.
    block_cost: usize,
}

impl Ring {
    pub(crate) fn new(name: Arc<str>, cap: usize) -> Ring {
        Ring {
            name,
            buf: Vec::new(),
            head: 0,
            used: 0,
            lines: 0,
            cap,
            blocks: VecDeque::new(),
            block_cost: 0,
        }
    }

    /// Whether a read of this cost may be kept as a [`Block`]: not more
    /// than the whole budget.
    pub(crate) fn takes_block(&self, cost: usize) -> bool {
        cost <= self.cap
    }

    /// Keeps a big read without copying it (see [`Block`]). Blocks that the
    /// newer ones alone push out of the budget are dropped whole, and the
    /// records once the blocks fill the budget; what the ring then holds is
    /// what [`Ring::push`] per line would have left, once settled.
    /// `dropped` gets the buffers of the blocks let go, for reuse.
    pub(crate) fn push_block(&mut self, block: Block, mut dropped: impl FnMut(Arc<Vec<u8>>)) {
        debug_assert!(self.takes_block(block.cost));
        self.block_cost += block.cost;
        self.blocks.push_back(block);
        while self.blocks.len() > 1 && self.block_cost - self.blocks[0].cost >= self.cap {
            if let Some(old) = self.blocks.pop_front() {
                self.block_cost -= old.cost;
                dropped(old.bytes);
            }
        }
        if self.block_cost >= self.cap && self.lines > 0 {
            // No record can be in the budget any more: free the storage
            // too, while the blocks hold the lines.
            self.buf = Vec::new();
            self.head = 0;
            self.used = 0;
            self.lines = 0;
        }
    }

    /// Copies the lines of the kept blocks in as records (once per flood,
    /// at most about the budget), oldest first, evicting as `push` does.
    pub(crate) fn settle(&mut self) {
        let blocks = std::mem::take(&mut self.blocks);
        self.block_cost = 0;
        for b in &blocks {
            for text in b.texts() {
                self.push_one(b.stream, b.ts_ms, text);
            }
        }
    }

    /// Appends one line (at most [`MAX_LEN`] bytes are kept), evicting the
    /// oldest lines while the budget would be passed. A single line over
    /// the whole budget is still kept (the newest).
    pub(crate) fn push(&mut self, stream: LogStream, ts_ms: u64, line: &[u8]) {
        self.settle();
        self.push_one(stream, ts_ms, line);
    }

    fn push_one(&mut self, stream: LogStream, ts_ms: u64, line: &[u8]) {
        let line = &line[..line.len().min(MAX_LEN)];
        let need = HEADER + line.len();
        while self.lines > 0 && self.used + need > self.cap {
            self.pop_front();
        }
        if self.used + need > self.buf.len() {
            self.grow(self.used + need);
        }
        let end = self.wrap(self.head + self.used);
        let header = pack(stream, ts_ms, line.len());
        if end + HEADER <= self.buf.len() {
            // The common case, a fixed-size store: no call per line.
            self.buf[end..end + HEADER].copy_from_slice(&header);
        } else {
            self.write_at(end, &header);
        }
        self.write_at(self.wrap(end + HEADER), line);
        self.used += need;
        self.lines += 1;
    }

    /// Appends the lines of one read, as [`Ring::push`] would one by one,
    /// with one eviction pass and a header store and a text copy per line
    /// (the wrap handled only for the record that straddles the end): a
    /// flood's reads cost a copy per line and little else. `count` and
    /// `text` are the lines' number and bytes. Out of line (it runs once per
    /// read) so that a profile shows it on its own.
    ///
    /// A read bigger than the whole budget goes line by line. Only a line
    /// over [`MAX_LEN`] (a redacted one grown past 256 KiB) is cut short,
    /// after the eviction counted it whole.
    #[inline(never)]
    pub(crate) fn push_batch<'a>(
        &mut self,
        stream: LogStream,
        ts_ms: u64,
        count: usize,
        text: usize,
        lines: impl Iterator<Item = &'a [u8]>,
    ) {
        if count == 0 {
            return;
        }
        self.settle();
        let need = count * HEADER + text;
        if need > self.cap {
            for line in lines {
                self.push(stream, ts_ms, line);
            }
            return;
        }
        while self.lines > 0 && self.used + need > self.cap {
            self.pop_front();
        }
        if self.used + need > self.buf.len() {
            self.grow(self.used + need);
        }
        let mut at = self.wrap(self.head + self.used);
        let size = self.buf.len();
        let mut written = 0;
        for line in lines {
            let line = &line[..line.len().min(MAX_LEN)];
            let header = pack(stream, ts_ms, line.len());
            let end = at + HEADER + line.len();
            if end <= size {
                // The common record: two stores, no wrap check.
                self.buf[at..at + HEADER].copy_from_slice(&header);
                self.buf[at + HEADER..end].copy_from_slice(line);
                at = if end == size { 0 } else { end };
            } else {
                self.write_at(at, &header);
                self.write_at(self.wrap(at + HEADER), line);
                at = self.wrap(at + HEADER + line.len());
            }
            written += HEADER + line.len();
        }
        self.used += written;
        self.lines += count;
    }

    fn pop_front(&mut self) {
        let (_, _, len) = unpack(self.header_at(self.head));
        let n = HEADER + len;
        self.head = self.wrap(self.head + n);
        self.used -= n;
        self.lines -= 1;
        if self.lines == 0 {
            self.head = 0;
        }
    }

    /// Doubles the storage (at least to `need`), never past the budget
    /// unless one line alone needs more.
    fn grow(&mut self, need: usize) {
        let size = (self.buf.len() * 2)
            .max(MIN_ALLOC)
            .max(need.next_power_of_two())
            .min(self.cap.max(need));
        let mut next = Vec::with_capacity(size);
        let (a, b) = self.slices(self.head, self.used);
        next.extend_from_slice(a);
        next.extend_from_slice(b);
        next.resize(size, 0);
        self.buf = next;
        self.head = 0;
    }

    fn wrap(&self, at: usize) -> usize {
        if at >= self.buf.len() {
            at - self.buf.len()
        } else {
            at
        }
    }

    /// The (up to two) pieces of `len` bytes from physical offset `at`.
    fn slices(&self, at: usize, len: usize) -> (&[u8], &[u8]) {
        let first = len.min(self.buf.len() - at.min(self.buf.len()));
        (&self.buf[at..at + first], &self.buf[..len - first])
    }

    fn write_at(&mut self, at: usize, src: &[u8]) {
        let first = src.len().min(self.buf.len() - at);
        self.buf[at..at + first].copy_from_slice(&src[..first]);
        self.buf[..src.len() - first].copy_from_slice(&src[first..]);
    }

    fn header_at(&self, at: usize) -> [u8; HEADER] {
        if let Some(Ok(h)) = self.buf.get(at..at + HEADER).map(<[u8; HEADER]>::try_from) {
            return h;
        }
        let mut h = [0u8; HEADER];
        let (a, b) = self.slices(at, HEADER);
        h[..a.len()].copy_from_slice(a);
        h[a.len()..].copy_from_slice(b);
        h
    }

    /// The last `n` lines (all with `None`), oldest first.
    pub(crate) fn tail(&mut self, n: Option<usize>) -> Vec<LogLine> {
        self.settle();
        let want = n.unwrap_or(usize::MAX).min(self.lines);
        let mut out = Vec::with_capacity(want);
        // Headers only lead forward: skip the older lines.
        let mut at = self.head;
        for i in 0..self.lines {
            let (stream, ts_ms, len) = unpack(self.header_at(at));
            let text = self.wrap(at + HEADER);
            if i >= self.lines - want {
                let (a, b) = self.slices(text, len);
                let mut bytes = Vec::with_capacity(len);
                bytes.extend_from_slice(a);
                bytes.extend_from_slice(b);
                out.push(LogLine {
                    name: self.name.clone(),
                    stream,
                    // The pump stored valid UTF-8; lossy only as a guard.
                    line: String::from_utf8(bytes)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
                    ts: ms_to_time(ts_ms),
                });
            }
            at = self.wrap(text + len);
        }
        out
    }

    /// Big reads kept whole and not yet settled.
    #[cfg(test)]
    pub(crate) fn blocks_kept(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes counted against the budget (headers and text).
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Bytes allocated for the lines.
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(r: &mut Ring, v: &[&str]) {
        for s in v {
            r.push(LogStream::Stdout, 1, s.as_bytes());
        }
    }

    fn all(r: &mut Ring) -> Vec<String> {
        r.tail(None).into_iter().map(|l| l.line).collect()
    }

    /// Budget for `lines` lines of `len` bytes each.
    fn room(lines: usize, len: usize) -> usize {
        lines * (HEADER + len)
    }

    /// Nothing is allocated before the first line, and a server that prints
    /// one short line allocates for that line, not a page.
    #[test]
    fn the_first_line_allocates_only_its_own_room() {
        let mut r = Ring::new(Arc::from("a"), DEFAULT_RING_BYTES);
        assert_eq!(r.allocated(), 0);
        assert!(r.tail(Some(10)).is_empty());
        assert_eq!(r.allocated(), 0, "asking for the tail allocates nothing");
        push(&mut r, &["sleep server started pid=12345"]);
        assert_eq!(r.allocated(), 64);
        push(&mut r, &["tick 1"]);
        assert_eq!(r.allocated(), 64, "a second short line still fits");
        push(&mut r, &["tick 2"]);
        assert_eq!(r.allocated(), 128, "then the storage doubles");
        assert_eq!(
            all(&mut r),
            ["sleep server started pid=12345", "tick 1", "tick 2"]
        );
        // A first line bigger than the minimum gets its own size, rounded up.
        let mut r = Ring::new(Arc::from("a"), DEFAULT_RING_BYTES);
        push(&mut r, &[&"x".repeat(1000)]);
        assert_eq!(r.allocated(), 1024);
        // A small budget caps the first allocation too.
        let mut r = Ring::new(Arc::from("a"), 40);
        push(&mut r, &["0123456789"]);
        assert_eq!(r.allocated(), 40);
    }

    #[test]
    fn evicts_by_bytes_headers_included() {
        let mut r = Ring::new(Arc::from("a"), room(3, 4));
        push(&mut r, &["aaaa", "bbbb"]);
        push(&mut r, &["cccc", "dddd"]);
        assert_eq!(all(&mut r), ["bbbb", "cccc", "dddd"]);
        assert_eq!(r.used(), room(3, 4));
        // Two short lines fit where one long one left.
        push(&mut r, &["e"]);
        assert_eq!(all(&mut r), ["cccc", "dddd", "e"]);
        assert_eq!(r.used(), room(2, 4) + HEADER + 1);
        let last: Vec<String> = r.tail(Some(2)).into_iter().map(|l| l.line).collect();
        assert_eq!(last, ["dddd", "e"]);
        assert_eq!(r.tail(Some(0)).len(), 0);
        assert_eq!(r.tail(Some(99)).len(), 3);
        // A single line over budget is still kept (the newest).
        let long = "0123456789abcdefghijklmnopqrstuvwxyz";
        push(&mut r, &[long]);
        assert_eq!(all(&mut r), [long]);
        push(&mut r, &["f"]);
        assert_eq!(all(&mut r), ["f"]);
    }

    #[test]
    fn empty_ring_and_empty_lines() {
        let mut r = Ring::new(Arc::from("a"), 100);
        assert!(r.tail(None).is_empty());
        assert_eq!(r.allocated(), 0, "a silent server allocates nothing");
        push(&mut r, &["", "", "x"]);
        assert_eq!(all(&mut r), ["", "", "x"]);
    }

    #[test]
    fn wraps_around_with_exact_tail_stream_and_time() {
        // Odd sizes so headers and text straddle the physical end.
        let cap = 300;
        let mut r = Ring::new(Arc::from("srv"), cap);
        let mut expect = Vec::new();
        for i in 0..1000u64 {
            let stream = if i % 3 == 0 {
                LogStream::Stderr
            } else {
                LogStream::Stdout
            };
            let line = format!("{i}:{}", "é".repeat((i % 7) as usize));
            let ts = 1_764_480_000_000 + i;
            r.push(stream, ts, line.as_bytes());
            expect.push((stream, ts, line));
            assert!(r.used() <= cap);
            assert!(r.allocated() <= cap);
        }
        let got = r.tail(None);
        let want: Vec<_> = expect[expect.len() - got.len()..].to_vec();
        assert!(got.len() > 5);
        for (g, (stream, ts, line)) in got.iter().zip(&want) {
            assert_eq!(&*g.name, "srv");
            assert_eq!(g.stream, *stream);
            assert_eq!(g.line, *line);
            assert_eq!(g.ts, ms_to_time(*ts));
        }
        // Nothing older was kept while a newer line was dropped.
        let used: usize = got.iter().map(|l| HEADER + l.line.len()).sum();
        assert_eq!(used, r.used());
        let next = &expect[expect.len() - got.len() - 1];
        assert!(
            used + HEADER + next.2.len() > cap,
            "one more line would not fit"
        );
        let last3: Vec<_> = r.tail(Some(3)).into_iter().map(|l| l.line).collect();
        let want3: Vec<_> = expect[expect.len() - 3..]
            .iter()
            .map(|e| e.2.clone())
            .collect();
        assert_eq!(last3, want3);
    }

    #[test]
    fn a_full_ring_costs_its_budget() {
        let cap = DEFAULT_RING_BYTES;
        let mut r = Ring::new(Arc::from("a"), cap);
        // 40-byte lines printed by a chatty server, then a mix of sizes.
        for i in 0..100_000u32 {
            r.push(LogStream::Stdout, u64::from(i), &[b'x'; 39]);
        }
        assert!(r.used() <= cap && r.used() > cap - 47);
        assert_eq!(r.allocated(), cap);
        for i in 0..100_000usize {
            r.push(LogStream::Stderr, 5, &vec![b'y'; (i * 7919) % 3000]);
            assert!(r.allocated() <= cap);
        }
        // 64 KiB lines (the pump's split size), and a lossy one of 3 × 64 KiB.
        for _ in 0..40 {
            r.push(LogStream::Stdout, 6, &[b'z'; 64 * 1024]);
        }
        r.push(
            LogStream::Stdout,
            7,
            "\u{fffd}".repeat(64 * 1024).as_bytes(),
        );
        assert!(r.allocated() <= cap && r.used() <= cap);
        assert_eq!(r.tail(Some(1))[0].line.len(), 3 * 64 * 1024);
    }

    /// What two rings are compared by: every line with its stream and time.
    fn key(tail: Vec<LogLine>) -> Vec<(LogStream, std::time::SystemTime, String)> {
        tail.into_iter().map(|l| (l.stream, l.ts, l.line)).collect()
    }

    /// The stream and millisecond of the `i`th read: stderr every
    /// `err_every`th read, one millisecond apart.
    fn read_at(i: usize, err_every: usize) -> (LogStream, u64) {
        let stream = if i.is_multiple_of(err_every) {
            LogStream::Stderr
        } else {
            LogStream::Stdout
        };
        (stream, 1_764_480_000_000 + i as u64)
    }

    fn push_each(r: &mut Ring, stream: LogStream, ts: u64, lines: &[String]) {
        for l in lines {
            r.push(stream, ts, l.as_bytes());
        }
    }

    fn push_as_batch(r: &mut Ring, stream: LogStream, ts: u64, lines: &[String]) {
        let text = lines.iter().map(String::len).sum();
        r.push_batch(
            stream,
            ts,
            lines.len(),
            text,
            lines.iter().map(|l| l.as_bytes()),
        );
    }

    /// A read pushed at once leaves the ring as the same lines pushed one
    /// by one would: records straddling the physical end, a batch over the
    /// whole budget, empty lines, a budget too small for one line.
    #[test]
    fn a_batch_is_the_same_as_its_lines_one_by_one() {
        for cap in [1, 40, 97, 300, 4096] {
            let mut one = Ring::new(Arc::from("a"), cap);
            let mut batch = Ring::new(Arc::from("a"), cap);
            for i in 0..400usize {
                let lines: Vec<String> = (0..i % 9)
                    .map(|j| "x".repeat((i * 7 + j * 13) % 31))
                    .collect();
                let (stream, ts) = read_at(i, 4);
                push_each(&mut one, stream, ts, &lines);
                push_as_batch(&mut batch, stream, ts, &lines);
                assert_eq!(batch.used(), one.used(), "cap {cap}, read {i}");
                assert!(batch.allocated() <= cap.max(HEADER + 31));
            }
            assert_eq!(key(batch.tail(None)), key(one.tail(None)), "cap {cap}");
        }
    }

    /// `<prefix><text>\n` lines as the sink's file buffer has them.
    fn block(stream: LogStream, ts_ms: u64, lines: &[String]) -> Block {
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend_from_slice(b"2026-12-01T03:04:05.678Z [out] ");
            bytes.extend_from_slice(l.as_bytes());
            bytes.push(b'\n');
        }
        Block {
            bytes: Arc::new(bytes),
            prefix: 31,
            stream,
            ts_ms,
            cost: Block::cost_of(lines.len(), lines.iter().map(String::len).sum()),
        }
    }

    /// Reads kept as blocks, mixed with reads copied in, leave the same
    /// tail as every line pushed one by one: blocks dropped whole, records
    /// dropped once blocks fill the budget, a tail taken in the middle.
    #[test]
    fn blocks_give_the_same_tail_as_lines() {
        for cap in [200, 301, 1000, 4096] {
            let mut one = Ring::new(Arc::from("a"), cap);
            let mut mixed = Ring::new(Arc::from("a"), cap);
            for i in 0..300usize {
                let lines: Vec<String> = (0..(i % 7) + 1)
                    .map(|j| format!("{i}-{j}{}", "é".repeat((i + j) % 11)))
                    .collect();
                let (stream, ts) = read_at(i, 5);
                push_each(&mut one, stream, ts, &lines);
                let b = block(stream, ts, &lines);
                if i % 4 != 0 && mixed.takes_block(b.cost) {
                    mixed.push_block(b, drop);
                } else {
                    push_as_batch(&mut mixed, stream, ts, &lines);
                }
                // Blocks the newer ones push out are dropped: at most the budget
                // and one block more are kept.
                assert!(mixed.block_cost <= 2 * cap);
                if i % 37 == 0 {
                    assert_eq!(
                        key(mixed.tail(Some(5))),
                        key(one.tail(Some(5))),
                        "cap {cap}, read {i}"
                    );
                }
            }
            assert_eq!(key(mixed.tail(None)), key(one.tail(None)), "cap {cap}");
            assert_eq!(mixed.used(), one.used());
        }
    }

    /// While blocks hold the budget the records' storage is given back.
    #[test]
    fn blocks_that_fill_the_budget_free_the_records() {
        let mut r = Ring::new(Arc::from("a"), 1000);
        push(&mut r, &["old"; 10]);
        assert!(r.allocated() > 0);
        let lines: Vec<String> = (0..24).map(|i| format!("{i:040}")).collect();
        r.push_block(block(LogStream::Stdout, 9, &lines[..12]), drop);
        assert!(r.allocated() > 0, "not full yet");
        r.push_block(block(LogStream::Stdout, 9, &lines[12..]), drop);
        assert_eq!(r.allocated(), 0);
        let got = all(&mut r);
        assert_eq!(got, lines[24 - 1000 / 48..]);
        assert!(r.used() <= 1000);
    }

    #[test]
    fn header_round_trip() {
        for (s, ts, len) in [
            (LogStream::Stdout, 0, 0),
            (LogStream::Stderr, 1_764_480_000_123, 65_536),
            (LogStream::Stdout, TS_MAX, MAX_LEN),
        ] {
            assert_eq!(unpack(pack(s, ts, len)), (s, ts, len));
        }
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_764_480_000_123_456_789);
        assert_eq!(ms_since_epoch(t), 1_764_480_000_123);
    }
}
