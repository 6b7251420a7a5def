//! The in-memory tail of one server's output: the most recent lines up to a
//! byte budget (not a line count), so `logs --tail` needs no disk read.
//! Stored as the pumps' read batches (one allocation per batch, not per
//! line); eviction drops single lines from the oldest batch.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::SystemTime;

use xy_core::protocol::LogStream;

use super::pump::Lines;
use crate::logs::LogLine;

/// SPEC §5's budget: about 1 MiB of line bytes per server.
pub(crate) const DEFAULT_RING_BYTES: usize = 1024 * 1024;

#[derive(Debug)]
struct Chunk {
    stream: LogStream,
    ts: SystemTime,
    lines: Lines,
    /// Lines already evicted from the front of this chunk.
    first: usize,
}

/// Newest lines, oldest evicted first once `bytes > cap`.
#[derive(Debug)]
pub(crate) struct Ring {
    name: Arc<str>,
    chunks: VecDeque<Chunk>,
    bytes: usize,
    lines: usize,
    cap: usize,
}

impl Ring {
    pub(crate) fn new(name: Arc<str>, cap: usize) -> Ring {
        Ring {
            name,
            chunks: VecDeque::new(),
            bytes: 0,
            lines: 0,
            cap,
        }
    }

    pub(crate) fn push(&mut self, stream: LogStream, ts: SystemTime, lines: Lines) {
        if lines.is_empty() {
            return;
        }
        self.bytes += lines.text_len();
        self.lines += lines.len();
        self.chunks.push_back(Chunk {
            stream,
            ts,
            lines,
            first: 0,
        });
        while self.bytes > self.cap && self.lines > 1 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            self.bytes -= front.lines.get(front.first).len();
            self.lines -= 1;
            front.first += 1;
            if front.first == front.lines.len() {
                self.chunks.pop_front();
            }
        }
    }

    /// The last `n` lines (all with `None`), oldest first.
    pub(crate) fn tail(&self, n: Option<usize>) -> Vec<LogLine> {
        let want = n.unwrap_or(usize::MAX).min(self.lines);
        let mut out = Vec::with_capacity(want);
        'outer: for c in self.chunks.iter().rev() {
            for i in (c.first..c.lines.len()).rev() {
                if out.len() == want {
                    break 'outer;
                }
                out.push(LogLine {
                    name: self.name.clone(),
                    stream: c.stream,
                    line: c.lines.get(i).to_owned(),
                    ts: c.ts,
                });
            }
        }
        out.reverse();
        out
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(r: &mut Ring, v: &[&str]) {
        let mut l = Lines::default();
        for s in v {
            l.push(s.as_bytes());
        }
        r.push(LogStream::Stdout, SystemTime::now(), l);
    }

    fn all(r: &Ring) -> Vec<String> {
        r.tail(None).into_iter().map(|l| l.line).collect()
    }

    #[test]
    fn evicts_by_bytes() {
        let mut r = Ring::new(Arc::from("a"), 10);
        push(&mut r, &["aaaa", "bbbb"]);
        push(&mut r, &["cccc", "dd"]);
        assert_eq!(all(&r), ["bbbb", "cccc", "dd"]);
        assert_eq!(r.bytes(), 10);
        push(&mut r, &["e"]);
        assert_eq!(all(&r), ["cccc", "dd", "e"]);
        assert_eq!(r.bytes(), 7);
        let last: Vec<String> = r.tail(Some(2)).into_iter().map(|l| l.line).collect();
        assert_eq!(last, ["dd", "e"]);
        assert_eq!(r.tail(Some(0)).len(), 0);
        // A single line over budget is still kept (the newest).
        push(&mut r, &["0123456789abc"]);
        assert_eq!(all(&r), ["0123456789abc"]);
    }
}
