//! Backoff between failed `accept(2)` calls (SPEC §18). `EMFILE`, `ENFILE`,
//! `ENOBUFS` and `ENOMEM` leave the pending connection in the backlog, so the
//! listener stays readable and an accept loop that simply retried would spin
//! a core until descriptors free up. Shared by every listener xyd runs (the
//! HTTP edge and the Unix control socket).

use std::time::Duration;

/// Doubling waits between failed accepts, reset by the first success. It
/// also says which error opens a burst and how many the burst held, so the
/// caller logs once per burst rather than once per error.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    next: Option<Duration>,
    errors: u64,
}

impl AcceptBackoff {
    /// The wait after the first failure of a burst.
    pub const FIRST: Duration = Duration::from_millis(10);
    /// The longest wait: a freed descriptor is picked up within this.
    pub const MAX: Duration = Duration::from_secs(1);

    /// A backoff with no failure recorded.
    #[must_use]
    pub fn new() -> AcceptBackoff {
        AcceptBackoff::default()
    }

    /// Records a failed accept: how long to wait before the next one, and
    /// whether this failure opened a burst (the one to log).
    pub fn failed(&mut self) -> (Duration, bool) {
        let wait = self.next.unwrap_or(Self::FIRST);
        self.next = Some((wait * 2).min(Self::MAX));
        self.errors += 1;
        (wait, self.errors == 1)
    }

    /// Records a successful accept; returns how many failures the burst it
    /// ends held (0 when there was none).
    pub fn succeeded(&mut self) -> u64 {
        self.next = None;
        std::mem::take(&mut self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = AcceptBackoff::new();
        let waits: Vec<(Duration, bool)> = (0..10).map(|_| b.failed()).collect();
        assert_eq!(waits[0], (Duration::from_millis(10), true));
        assert_eq!(waits[1], (Duration::from_millis(20), false));
        assert_eq!(waits[6].0, Duration::from_millis(640));
        assert!(waits[7..].iter().all(|w| *w == (AcceptBackoff::MAX, false)));
        assert_eq!(b.succeeded(), 10);
        assert_eq!(b.succeeded(), 0);
        assert_eq!(b.failed(), (AcceptBackoff::FIRST, true));
    }
}
