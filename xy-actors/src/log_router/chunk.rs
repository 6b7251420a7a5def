//! The lines of one read: a read buffer cut in place into spans (one pass
//! for newlines, a bit mask per 64 bytes; UTF-8 checked once per read, lossy
//! per line only where that fails; at most 64 KiB a line), as the pump hands
//! them to the sink.

/// Longest line kept whole; longer ones are split.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Where a line's text is: in the read buffer, or rewritten in
/// [`Chunk::fixed`] (lossy UTF-8).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
    fixed: bool,
}

/// The complete lines of one read, as ranges of the read buffer (the
/// buffer itself is passed beside it). Reused from read to read.
#[derive(Debug, Default)]
pub(crate) struct Chunk {
    spans: Vec<Span>,
    /// Text of lines that were not UTF-8, decoded lossily.
    fixed: Vec<u8>,
    /// Bytes of line text (sum of the spans).
    text: usize,
}

impl Chunk {
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of line text, without separators.
    pub(crate) fn text_len(&self) -> usize {
        self.text
    }

    /// The lines (valid UTF-8 each), given the read buffer they came from.
    pub(crate) fn lines<'a>(&'a self, data: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.spans.iter().map(move |s| {
            let from = if s.fixed { &self.fixed[..] } else { data };
            &from[s.start as usize..s.end as usize]
        })
    }

    /// The lines as [`Chunk::lines`], each with its `\n` when the read
    /// buffer has it right after the text (`true`): the file's copy of a
    /// line is then one copy of `text\n`, not two.
    pub(crate) fn lines_nl<'a>(
        &'a self,
        data: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], bool)> + 'a {
        self.spans.iter().map(move |s| {
            let (start, end) = (s.start as usize, s.end as usize);
            // Only the last piece of a line ends at its `\n`: a `\r` or a
            // 64 KiB cut follows the others, and a rewritten line is in
            // `fixed`.
            if !s.fixed && data.get(end) == Some(&b'\n') {
                (&data[start..=end], true)
            } else {
                let from = if s.fixed { &self.fixed[..] } else { data };
                (&from[start..end], false)
            }
        })
    }

    /// Rewrites every line that holds a secret into `fixed`, redacted
    /// (SPEC §16). One scan of the read in the common case of no match.
    pub(crate) fn redact(&mut self, data: &[u8], r: &super::redact::Redactor) {
        if !r.is_match(data) && !r.is_match(&self.fixed) {
            return;
        }
        for i in 0..self.spans.len() {
            let s = self.spans[i];
            let from = if s.fixed { &self.fixed[..] } else { data };
            let Some(text) = r.redact_bytes(&from[s.start as usize..s.end as usize]) else {
                continue;
            };
            let start = self.fixed.len();
            self.fixed.extend_from_slice(&text);
            self.text = self.text - (s.end - s.start) as usize + text.len();
            self.spans[i] = Span {
                start: u32::try_from(start).unwrap_or(u32::MAX),
                end: u32::try_from(self.fixed.len()).unwrap_or(u32::MAX),
                fixed: true,
            };
        }
    }

    /// Cuts `data` into lines; returns how many bytes were used. An
    /// unterminated rest is left for the next read unless `last` (EOF) or it
    /// has reached [`MAX_LINE`] (then whole 64 KiB pieces are taken).
    pub(crate) fn cut(&mut self, data: &[u8], last: bool) -> usize {
        self.spans.clear();
        self.fixed.clear();
        self.text = 0;
        let whole = memchr::memrchr(b'\n', data).map_or(0, |p| p + 1);
        let block = &data[..whole];
        // ASCII (the common case) is checked fastest; UTF-8 next; only a
        // block that is neither is decoded line by line.
        let valid = block.is_ascii() || std::str::from_utf8(block).is_ok();
        let mut start = 0;
        for_each_newline(block, |nl| {
            // The common line (valid, short, no `\r`) is pushed right here:
            // this runs once per line of a flood.
            if valid && nl - start <= MAX_LINE && (nl == start || data[nl - 1] != b'\r') {
                self.text += nl - start;
                self.spans.push(Span {
                    start: offset(start),
                    end: offset(nl),
                    fixed: false,
                });
            } else {
                self.line(data, start, nl, valid);
            }
            start = nl + 1;
        });
        let mut rest = &data[whole..];
        while rest.len() >= MAX_LINE {
            let cut = char_boundary(rest, MAX_LINE);
            let at = data.len() - rest.len();
            self.piece(data, at, at + cut, false);
            rest = &rest[cut..];
        }
        if last && !rest.is_empty() {
            let at = data.len() - rest.len();
            self.line(data, at, data.len(), false);
            return data.len();
        }
        data.len() - rest.len()
    }

    /// One line `data[start..end]` (without its `\n`): `\r` stripped, split
    /// into ≤ 64 KiB pieces. `valid`: already known to be UTF-8.
    fn line(&mut self, data: &[u8], start: usize, mut end: usize, valid: bool) {
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        let mut at = start;
        while end - at > MAX_LINE {
            let cut = at + char_boundary(&data[at..end], MAX_LINE);
            self.piece(data, at, cut, valid);
            at = cut;
        }
        self.piece(data, at, end, valid);
    }

    fn piece(&mut self, data: &[u8], start: usize, end: usize, valid: bool) {
        let bytes = &data[start..end];
        if valid || std::str::from_utf8(bytes).is_ok() {
            self.text += bytes.len();
            self.spans.push(Span {
                start: offset(start),
                end: offset(end),
                fixed: false,
            });
            return;
        }
        let from = self.fixed.len();
        self.fixed
            .extend_from_slice(String::from_utf8_lossy(bytes).as_bytes());
        self.text += self.fixed.len() - from;
        self.spans.push(Span {
            start: offset(from),
            end: offset(self.fixed.len()),
            fixed: true,
        });
    }
}

/// Calls `f` with the index of every `\n` in `hay`, in order: one pass.
/// On x86_64, 64 bytes at a time into a bit mask (SSE2): `memchr_iter`
/// restarts a search per match, which for 100-byte lines cost about twice
/// the instructions. Elsewhere, and for the tail, it is `memchr_iter`.
fn for_each_newline(hay: &[u8], mut f: impl FnMut(usize)) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let base = {
        let mut base = 0;
        for block in hay.chunks_exact(64) {
            #[allow(unsafe_code)]
            // SAFETY: `newline_mask` only needs SSE2, which this build
            // enables (the cfg above; it is part of the x86_64 baseline).
            let mut mask = unsafe { newline_mask(block) };
            while mask != 0 {
                f(base + mask.trailing_zeros() as usize);
                mask &= mask - 1;
            }
            base += 64;
        }
        base
    };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let base = 0;
    for nl in memchr::memchr_iter(b'\n', &hay[base..]) {
        f(base + nl);
    }
}

/// Bit `i` set where `block[i]` (of 64 bytes) is `\n`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn newline_mask(block: &[u8]) -> u64 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set_epi64x, _mm_set1_epi8};
    let nl = _mm_set1_epi8(b'\n' as i8);
    let mut mask = 0u64;
    for (k, q) in block.chunks_exact(16).enumerate() {
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&q[at..at + 8]);
            i64::from_le_bytes(w)
        };
        let v = _mm_set_epi64x(word(8), word(0));
        let m = _mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) as u32;
        mask |= u64::from(m & 0xffff) << (16 * k);
    }
    mask
}

/// Offsets stay far below 4 GiB (a buffer is at most 256 KiB).
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
pub(crate) mod tests {
    use super::*;

    /// Feeds `reads` through a chunk as the pump does; returns the lines of
    /// each read (and of EOF, last).
    pub(crate) fn cut_all(reads: &[&[u8]]) -> Vec<Vec<String>> {
        let mut buf = Vec::new();
        let mut chunk = Chunk::default();
        let mut out = Vec::new();
        let text = |chunk: &Chunk, buf: &[u8]| -> Vec<String> {
            let v: Vec<String> = chunk
                .lines(buf)
                .map(|l| String::from_utf8(l.to_vec()).expect("lines are UTF-8"))
                .collect();
            assert_eq!(chunk.text_len(), v.iter().map(String::len).sum::<usize>());
            v
        };
        for r in reads {
            buf.extend_from_slice(r);
            let used = chunk.cut(&buf, false);
            out.push(text(&chunk, &buf));
            buf.drain(..used);
        }
        chunk.cut(&buf, true);
        out.push(text(&chunk, &buf));
        out
    }

    fn flat(reads: &[&[u8]]) -> Vec<String> {
        cut_all(reads).into_iter().flatten().collect()
    }

    #[test]
    fn splits_across_reads() {
        let got = cut_all(&[b"a\nb", b"c\r\nd\n\n", b"tail"]);
        assert_eq!(got, [vec!["a"], vec!["bc", "d", ""], vec![], vec!["tail"]]);
        assert_eq!(flat(&[b"x\r"]), ["x"], "a final \\r is not text");
        assert!(flat(&[]).is_empty());
    }

    #[test]
    fn lossy_utf8() {
        assert_eq!(flat(&[b"ok \xff\xfe!\n"]), ["ok \u{fffd}\u{fffd}!"]);
        assert_eq!(flat(&[b"end \xc3"]), ["end \u{fffd}"]);
    }

    #[test]
    fn a_character_split_across_reads_is_kept() {
        let e = "é".as_bytes();
        assert_eq!(flat(&[&[b'a', e[0]], &[e[1], b'\n']]), ["aé"]);
    }

    #[test]
    fn long_lines_are_split_at_64k() {
        let mut input = vec![b'x'; MAX_LINE * 2 + 10];
        input.push(b'\n');
        let lens = |v: Vec<String>| v.iter().map(String::len).collect::<Vec<_>>();
        assert_eq!(
            lens(flat(&input.chunks(1000).collect::<Vec<_>>())),
            [MAX_LINE, MAX_LINE, 10]
        );
        assert_eq!(lens(flat(&[&input])), [MAX_LINE, MAX_LINE, 10]);
        // Unterminated at EOF too.
        assert_eq!(lens(flat(&[&input[..MAX_LINE + 5]])), [MAX_LINE, 5]);
    }

    #[test]
    fn split_respects_utf8_boundaries() {
        let mut line = vec![b'a'; MAX_LINE - 1];
        line.extend_from_slice("é".as_bytes()); // 2 bytes straddling the cut
        line.push(b'\n');
        let got = flat(&[&line]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE - 1);
        assert_eq!(got[1], "é");
        // The same line arriving in small reads.
        assert_eq!(flat(&line.chunks(777).collect::<Vec<_>>()), got);
    }

    /// The file's copy: `text\n` straight from the read where the read has
    /// it, the text alone (the caller adds `\n`) for a `\r\n` line, a
    /// 64 KiB piece, a lossy line and an unterminated last line.
    #[test]
    fn lines_with_their_newline() {
        let mut data = b"plain\n\ncr\r\nbad \xff\n".to_vec();
        data.extend_from_slice(&vec![b'x'; MAX_LINE + 3]);
        data.extend_from_slice(b"\nend");
        let mut chunk = Chunk::default();
        assert_eq!(chunk.cut(&data, true), data.len());
        let got: Vec<(String, bool)> = chunk
            .lines_nl(&data)
            .map(|(l, nl)| (String::from_utf8(l.to_vec()).unwrap(), nl))
            .collect();
        let x = |n| "x".repeat(n);
        let want = [
            ("plain\n".to_owned(), true),
            ("\n".to_owned(), true),
            ("cr".to_owned(), false),
            ("bad \u{fffd}".to_owned(), false),
            (x(MAX_LINE), false),
            (x(3) + "\n", true),
            ("end".to_owned(), false),
        ];
        assert_eq!(got, want);
        // The same text as `lines`, but for the newline.
        let plain: Vec<&[u8]> = chunk.lines(&data).collect();
        for ((l, nl), p) in chunk.lines_nl(&data).zip(plain) {
            assert_eq!(if nl { &l[..l.len() - 1] } else { l }, p);
        }
    }

    /// Every newline, at every position in and across the 64-byte blocks.
    #[test]
    fn newlines_found_everywhere() {
        for len in [0, 1, 15, 16, 63, 64, 65, 127, 128, 200] {
            for step in 1..9 {
                let mut hay = vec![b'a'; len];
                for i in (0..len).step_by(step) {
                    hay[i] = b'\n';
                }
                let want: Vec<usize> = memchr::memchr_iter(b'\n', &hay).collect();
                let mut got = Vec::new();
                for_each_newline(&hay, |i| got.push(i));
                assert_eq!(got, want, "len {len}, step {step}");
            }
        }
    }

    /// A read that is all valid UTF-8 (not ASCII) takes the fast path; a
    /// read with one bad line decodes only that line.
    #[test]
    fn valid_and_invalid_reads() {
        assert_eq!(flat(&["é\nü\r\n".as_bytes()]), ["é", "ü"]);
        assert_eq!(
            flat(&[b"\xc3\xa9\n\xc3\n\xc3\xa9\n"]),
            ["é", "\u{fffd}", "é"]
        );
    }

    #[test]
    fn a_bad_line_in_a_read_is_lossy_alone() {
        assert_eq!(
            flat(&[b"one\r\nt\xffo\nthree\n"]),
            ["one", "t\u{fffd}o", "three"]
        );
    }
}
