//! A log pump: reads one child stream in large chunks, splits lines (lossy
//! UTF-8, at most 64 KiB each, a final unterminated line kept) and hands each
//! chunk's lines to the server's sink in one locked batch.

use tokio::io::{AsyncRead, AsyncReadExt};
use xy_core::protocol::LogStream;

use super::sink::{SharedSink, lock};

/// Longest line kept whole; longer ones are split.
pub(crate) const MAX_LINE: usize = 64 * 1024;
/// First read size: enough for a quiet server's lines, and what an idle
/// pump keeps allocated.
const MIN_CHUNK: usize = 8 * 1024;
/// Largest read, reached while reads keep filling the buffer (a flood):
/// fewer wakeups per byte (the pipe is enlarged to match on Linux).
const READ_CHUNK: usize = 256 * 1024;

/// Runs until EOF or a read error (the child and its group closed the pipe).
pub(crate) async fn pump<R: AsyncRead + Unpin>(mut reader: R, stream: LogStream, sink: SharedSink) {
    let mut buf = vec![0u8; MIN_CHUNK];
    let mut splitter = Splitter::default();
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let lines = splitter.feed(&buf[..n]);
        lock(&sink).push_batch(stream, lines);
        if n == buf.len() && buf.len() < READ_CHUNK {
            // The pipe had more than we took: read bigger.
            buf = vec![0u8; (buf.len() * 4).min(READ_CHUNK)];
        } else if n <= MIN_CHUNK / 2 && buf.len() > MIN_CHUNK {
            // The flood is over: give the big buffer back.
            buf = vec![0u8; MIN_CHUNK];
        }
    }
    if let Some(last) = splitter.finish() {
        lock(&sink).push_batch(stream, last);
    }
}

/// A batch of lines in one string: one allocation per read, not per line.
#[derive(Debug, Default, Clone)]
pub(crate) struct Lines {
    /// The lines, possibly with their separators between the spans.
    text: String,
    /// `(start, end)` byte ranges into `text`.
    spans: Vec<(u32, u32)>,
    /// Bytes of line text (sum of the spans).
    bytes: usize,
}

impl Lines {
    fn with_capacity(bytes: usize) -> Lines {
        Lines {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(bytes / 64),
            bytes: 0,
        }
    }

    /// Appends one line, lossily decoded.
    pub(crate) fn push(&mut self, line: &[u8]) {
        let start = self.text.len();
        match std::str::from_utf8(line) {
            Ok(s) => self.text.push_str(s),
            Err(_) => self.text.push_str(&String::from_utf8_lossy(line)),
        }
        self.bytes += self.text.len() - start;
        self.spans.push((offset(start), offset(self.text.len())));
    }

    /// Appends `block`, whole `\n`-terminated lines: validated and copied
    /// once for the block; line by line (lossy) only if it is not UTF-8.
    fn push_block(&mut self, block: &[u8]) {
        let Ok(text) = std::str::from_utf8(block) else {
            for line in block.split_inclusive(|&b| b == b'\n') {
                push_line(self, line.strip_suffix(b"\n").unwrap_or(line));
            }
            return;
        };
        let base = self.text.len();
        self.text.push_str(text);
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', block) {
            let mut end = nl;
            if end > start && block[end - 1] == b'\r' {
                end -= 1;
            }
            while end - start > MAX_LINE {
                let cut = start + char_boundary(&block[start..end], MAX_LINE);
                self.span(base + start, base + cut);
                start = cut;
            }
            self.span(base + start, base + end);
            start = nl + 1;
        }
    }

    fn span(&mut self, start: usize, end: usize) {
        self.bytes += end - start;
        self.spans.push((offset(start), offset(end)));
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Line `i`.
    pub(crate) fn get(&self, i: usize) -> &str {
        let (a, b) = self.spans[i];
        &self.text[a as usize..b as usize]
    }

    /// Bytes of line text (no separators).
    pub(crate) fn text_len(&self) -> usize {
        self.bytes
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.spans
            .iter()
            .map(|&(a, b)| &self.text[a as usize..b as usize])
    }
}

/// Batches stay far below 4 GiB (a read is 64 KiB, a line at most 64 KiB).
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Line splitting across reads.
#[derive(Debug, Default)]
pub(crate) struct Splitter {
    pending: Vec<u8>,
}

impl Splitter {
    /// The complete lines in `chunk` (with what was pending before it).
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Lines {
        let mut out = Lines::with_capacity(chunk.len() + self.pending.len());
        let mut rest = chunk;
        if let Some(last) = memchr::memrchr(b'\n', chunk) {
            let (mut whole, tail) = chunk.split_at(last + 1);
            if !self.pending.is_empty() {
                // The first line began in an earlier read.
                let pos = memchr::memchr(b'\n', whole).unwrap_or(last);
                self.pending.extend_from_slice(&whole[..pos]);
                let first = std::mem::take(&mut self.pending);
                push_line(&mut out, &first);
                whole = &whole[pos + 1..];
            }
            out.push_block(whole);
            rest = tail;
        }
        self.pending.extend_from_slice(rest);
        while self.pending.len() >= MAX_LINE {
            let cut = char_boundary(&self.pending, MAX_LINE);
            out.push(&self.pending[..cut]);
            self.pending.drain(..cut);
        }
        out
    }

    /// The unterminated last line, if any.
    pub(crate) fn finish(&mut self) -> Option<Lines> {
        if self.pending.is_empty() {
            return None;
        }
        let mut out = Lines::default();
        push_line(&mut out, &std::mem::take(&mut self.pending));
        Some(out)
    }
}

/// Pushes `line` (without `\r`), split into ≤ 64 KiB pieces.
fn push_line(out: &mut Lines, mut line: &[u8]) {
    if let [head @ .., b'\r'] = line {
        line = head;
    }
    while line.len() > MAX_LINE {
        let cut = char_boundary(line, MAX_LINE);
        out.push(&line[..cut]);
        line = &line[cut..];
    }
    out.push(line);
}

/// The largest cut `<= max` that does not split a UTF-8 sequence (falls back
/// to `max` for bytes that are not UTF-8 anyway).
fn char_boundary(bytes: &[u8], max: usize) -> usize {
    let mut cut = max.min(bytes.len());
    for _ in 0..3 {
        if cut == 0 || cut >= bytes.len() || (bytes[cut] & 0xC0) != 0x80 {
            break;
        }
        cut -= 1;
    }
    if cut == 0 { max.min(bytes.len()) } else { cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(l: Lines) -> Vec<String> {
        l.iter().map(str::to_owned).collect()
    }

    #[test]
    fn splits_across_chunks() {
        let mut s = Splitter::default();
        assert_eq!(v(s.feed(b"a\nb")), ["a"]);
        assert_eq!(v(s.feed(b"c\r\nd\n\n")), ["bc", "d", ""]);
        assert_eq!(v(s.feed(b"tail")), Vec::<String>::new());
        assert_eq!(v(s.finish().unwrap()), ["tail"]);
        assert!(s.finish().is_none());
    }

    #[test]
    fn lossy_utf8() {
        let mut s = Splitter::default();
        assert_eq!(v(s.feed(b"ok \xff\xfe!\n")), ["ok \u{fffd}\u{fffd}!"]);
    }

    #[test]
    fn long_lines_are_split_at_64k() {
        let mut s = Splitter::default();
        let mut input = vec![b'x'; MAX_LINE * 2 + 10];
        input.push(b'\n');
        let mut got = Vec::new();
        for chunk in input.chunks(1000) {
            got.extend(v(s.feed(chunk)));
        }
        let lens: Vec<usize> = got.iter().map(String::len).collect();
        assert_eq!(lens, [MAX_LINE, MAX_LINE, 10]);
        // One line in one chunk.
        let got = v(Splitter::default().feed(&input));
        assert_eq!(
            got.iter().map(String::len).collect::<Vec<_>>(),
            [MAX_LINE, MAX_LINE, 10]
        );
    }

    #[test]
    fn split_respects_utf8_boundaries() {
        let mut line = vec![b'a'; MAX_LINE - 1];
        line.extend_from_slice("é".as_bytes()); // 2 bytes straddling the cut
        line.push(b'\n');
        let got = v(Splitter::default().feed(&line));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE - 1);
        assert_eq!(got[1], "é");
    }

    #[test]
    fn a_bad_line_in_a_batch_is_lossy_alone() {
        let got = Splitter::default().feed(b"one\r\nt\xffo\nthree\n");
        assert_eq!(
            got.text_len(),
            "one".len() + "t\u{fffd}o".len() + "three".len()
        );
        assert_eq!(v(got), ["one", "t\u{fffd}o", "three"]);
    }
}
