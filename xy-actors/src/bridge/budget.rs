//! The stdin budget of one child (SPEC §18, D63): the copies of
//! forwarded requests kept for resending to a successor, and the check a
//! message passes before it is queued toward the child. Pure data: the
//! BridgeActor says what the pipe took and the child read.

use std::collections::BTreeMap;

use bytes::Bytes;

/// Bytes of messages one child may have waiting in xyd at most, for each
/// of: queued toward its stdin, kept for resending, waiting for it to
/// start. Four requests of the 4 MiB body limit fit.
pub(crate) const STDIN_BUDGET: u64 = 16 * 1024 * 1024;
/// What a message may grow by on its way to the child (xy's id and
/// progress token in place of the client's).
const REWRITE_SLACK: u64 = 256;

/// Forwarded requests in flight to the current child of which it may not
/// have read a byte yet, by child-side id: the offset of their line in its
/// stdin stream, and the line (shared with the stdin queue).
#[derive(Debug, Default)]
pub(crate) struct Kept {
    lines: BTreeMap<u64, (u64, Bytes)>,
    bytes: u64,
}

impl Kept {
    pub(crate) fn insert(&mut self, id: u64, start: u64, line: Bytes) {
        self.bytes += line.len() as u64;
        if let Some((_, old)) = self.lines.insert(id, (start, line)) {
            self.bytes -= old.len() as u64;
        }
    }

    /// Keeps the lines for which `keep(id, start)` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, u64) -> bool) {
        let bytes = &mut self.bytes;
        self.lines.retain(|id, (start, line)| {
            let k = keep(*id, *start);
            if !k {
                *bytes -= line.len() as u64;
            }
            k
        });
    }

    /// Every line, by id, with its offset; none is kept.
    pub(crate) fn take(&mut self) -> BTreeMap<u64, (u64, Bytes)> {
        self.bytes = 0;
        std::mem::take(&mut self.lines)
    }

    pub(crate) fn clear(&mut self) {
        self.take();
    }

    /// Whether a message of `size` bytes fits: `queued` bytes wait for the
    /// pipe, and the copies with it. `forget` may drop copies that can no
    /// longer be resent; it is asked only when they would not fit.
    pub(crate) fn fits(
        &mut self,
        queued: u64,
        size: usize,
        forget: impl FnOnce(&mut Kept),
    ) -> bool {
        let size = size as u64 + REWRITE_SLACK;
        if queued + size > STDIN_BUDGET {
            return false;
        }
        if self.bytes + size > STDIN_BUDGET {
            forget(self);
        }
        self.bytes + size <= STDIN_BUDGET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn line(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n])
    }

    #[test]
    fn four_body_limit_requests_fit_and_a_fifth_does_not() {
        let mut k = Kept::default();
        let mut sent = 0u64;
        for id in 1..=3 {
            assert!(k.fits(sent, 4 * MIB, |_| {}), "request {id}");
            k.insert(id, sent, line(4 * MIB));
            sent += 4 * MIB as u64;
        }
        // Nothing reached the pipe: 12 MiB queued, room for one smaller.
        assert!(!k.fits(sent, 4 * MIB, |_| {}), "queued bytes count");
        assert!(k.fits(sent, 3 * MIB, |_| {}));
    }

    #[test]
    fn copies_count_until_the_child_begins_to_read_them() {
        let mut k = Kept::default();
        for id in 0..4u64 {
            k.insert(id, id * 4 * MIB as u64, line(4 * MIB - 1024));
        }
        // All in the pipe (nothing queued), but every copy is still kept.
        assert!(!k.fits(0, MIB, |_| {}), "copies count");
        // The child began the first two: those are never resent.
        let read = 4 * MIB as u64 + 1;
        assert!(k.fits(0, MIB, |k| k.retain(|_, start| start >= read)));
        assert_eq!(k.take().keys().copied().collect::<Vec<_>>(), [2, 3]);
        assert!(k.fits(0, 15 * MIB, |_| panic!("nothing to forget")));
    }

    #[test]
    fn a_replaced_line_is_not_counted_twice() {
        let mut k = Kept::default();
        k.insert(1, 0, line(10 * MIB));
        k.insert(1, 0, line(MIB));
        assert!(k.fits(0, 14 * MIB, |_| {}));
        k.retain(|_, _| false);
        assert!(k.fits(0, 15 * MIB, |_| {}));
    }
}
