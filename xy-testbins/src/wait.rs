//! Test deadlines, for the tests of every crate: polling a condition until
//! it holds ([`wait_for`], [`wait_some`], and [`poll`] inside a tokio
//! test), and [`scaled`] for any other test timeout (a read timeout, a
//! `recv_timeout`, an upper bound on how long something took).
//!
//! Every deadline is written as the time the step may take on a loaded
//! developer machine and stretched by `XY_TEST_TIMEOUT_FACTOR` (a float,
//! default 1): a slower machine (an emulator, a sanitizer build, a CI box
//! shared with other jobs) sets it instead of having each test edited.
//! Product timeouts (a grace period, a backoff, a probe interval in a test
//! config) are not deadlines and are not scaled: they are what is tested.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that stretches every test deadline.
pub const FACTOR_VAR: &str = "XY_TEST_TIMEOUT_FACTOR";

/// How often a condition is polled: often enough that a test does not wait
/// long after the state arrives, seldom enough not to load the machine.
const EVERY: Duration = Duration::from_millis(20);

/// `XY_TEST_TIMEOUT_FACTOR`, read once; 1 when unset. A value that is not
/// a positive number fails the test that reads it, rather than silently
/// meaning 1.
pub fn factor() -> f64 {
    static FACTOR: OnceLock<f64> = OnceLock::new();
    *FACTOR.get_or_init(|| match std::env::var(FACTOR_VAR) {
        Err(_) => 1.0,
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => f,
            _ => panic!("{FACTOR_VAR}={text:?}: expected a positive number, such as 1 or 2.5"),
        },
    })
}

/// `base` stretched by [`factor`]: the deadline a test waits for.
pub fn scaled(base: Duration) -> Duration {
    base.mul_f64(factor())
}

/// The instant `base` (scaled) from now.
pub fn deadline(base: Duration) -> Instant {
    Instant::now() + scaled(base)
}

/// Polls `f` until it yields a value; panics naming `what` once `timeout`
/// (scaled) has passed. `f` runs at least once, and once more after the
/// deadline, so a state reached during the last pause still counts.
#[track_caller]
pub fn wait_some<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let limit = scaled(timeout);
    let until = Instant::now() + limit;
    loop {
        let late = Instant::now() >= until;
        if let Some(v) = f() {
            return v;
        }
        assert!(!late, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(EVERY.min(until.saturating_duration_since(Instant::now())));
    }
}

/// Polls `cond` until it holds; panics naming `what` once `timeout`
/// (scaled) has passed.
#[track_caller]
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    wait_some(what, timeout, || cond().then_some(()));
}

/// [`wait_some`] for async tests: polls the future `f` makes until it
/// yields a value, pausing with tokio's clock (so a test on a paused clock
/// does not spin); panics naming `what` once `timeout` (scaled) has passed.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let limit = scaled(timeout);
    let until = tokio::time::Instant::now() + limit;
    loop {
        let late = tokio::time::Instant::now() >= until;
        if let Some(v) = f().await {
            return v;
        }
        assert!(!late, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(EVERY.min(until.saturating_duration_since(tokio::time::Instant::now())))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_holds_returns_its_value() {
        let mut n = 0;
        let v = wait_some("the third try", Duration::from_secs(5), || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(v, 3);
    }

    #[test]
    #[should_panic(expected = "waiting for never")]
    fn a_condition_that_never_holds_names_itself() {
        wait_for("never", Duration::from_millis(30), || false);
    }

    #[test]
    fn the_last_try_comes_after_the_deadline() {
        // Only a look taken at the deadline or later sees the state.
        let from = Instant::now() + Duration::from_millis(30);
        wait_for(
            "a look after the deadline",
            Duration::from_millis(30),
            || Instant::now() >= from,
        );
    }
}
