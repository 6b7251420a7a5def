//! xy's own listing of an HTTP or remote server (SPEC §20), as the spawn's
//! probe task carries it out: after the spawn it asks until the child
//! answers MCP (backing off, then giving up with a reason the ServerActor
//! shows in `status`), lists its tools and prompts whole, and hands the
//! [`Listing`] over; then it waits to be woken for a new listing (the
//! gateway saw the child list an item xy's listing does not have; wake-ups
//! meanwhile coalesce into one). With an `mcp` probe of the same endpoint
//! the listing uses the probe's session: one `initialize` (2025) and one
//! `tools/list` per spawn; a probe that succeeds while the listing still
//! waits, or after it gave up, makes it list at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::mcp::McpClient;
use crate::mcp::listing::Listing;

/// How long a new child has to start answering MCP before xy stops asking
/// for this spawn (its traffic is then decided by the policy).
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(60);
/// Bound on one attempt to reach the child (a connect and a handshake),
/// and on ending a session.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on a whole listing, every page of tools and prompts.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// First wait between attempts on a child not answering yet; doubles up
/// to [`RETRY_MAX`]: a child that never listens costs a handful of
/// connects, not one every few seconds for a minute.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// Shortest time between two listings of one spawn: a child whose answers
/// never match xy's listing (an item without a name, say) would otherwise
/// be listed again at every client's `tools/list`.
const RELIST_GAP: Duration = Duration::from_secs(1);

/// What the probe task needs to list the spawn.
pub(crate) struct Duty {
    /// The server's MCP path (the `mcp` probe's client is shared when its
    /// path is this one).
    pub(crate) path: String,
    /// Woken by the gateway when the child lists what xy's listing lacks.
    pub(crate) relist: Arc<Notify>,
    /// Gets each listing, or why there is none; false once nobody listens.
    pub(crate) send: Box<dyn Fn(Result<Listing, String>) -> bool + Send + Sync>,
}

impl std::fmt::Debug for Duty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Duty")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// When the next attempt on a child that has not answered is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retry {
    next: Instant,
    wait: Duration,
    give_up: Instant,
}

impl Retry {
    /// A first attempt at `at`; xy asks until [`ANSWER_WITHIN`] later.
    pub(crate) fn starting(at: Instant) -> Retry {
        Retry {
            next: at,
            wait: RETRY_FIRST,
            give_up: at + ANSWER_WITHIN,
        }
    }

    /// After a failed attempt at `now`: the next one, or `None` when it
    /// would come after the deadline.
    pub(crate) fn after_failure(self, now: Instant) -> Option<Retry> {
        let next = now + self.wait;
        (next <= self.give_up).then_some(Retry {
            next,
            wait: (self.wait * 2).min(RETRY_MAX),
            give_up: self.give_up,
        })
    }
}

/// Where the spawn's listing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Waiting for the child to answer.
    Due(Retry),
    /// Listed (or the listing failed) at this instant; waiting to be woken.
    Listed(Instant),
    /// The child never answered within [`ANSWER_WITHIN`]; xy stopped asking.
    GaveUp,
}

impl State {
    /// When the next attempt is due, if one is.
    pub(crate) fn due(self) -> Option<Instant> {
        match self {
            State::Due(r) => Some(r.next),
            _ => None,
        }
    }

    /// Woken for a new listing at `now`.
    pub(crate) fn woken(self, now: Instant) -> State {
        match self {
            State::Listed(at) => State::Due(Retry::starting(now.max(at + RELIST_GAP))),
            State::GaveUp => State::Due(Retry::starting(now)),
            due @ State::Due(_) => due,
        }
    }

    /// A probe of the shared session succeeded at `now`: list now unless
    /// listed already.
    pub(crate) fn answered(self, now: Instant) -> State {
        match self {
            State::Due(_) | State::GaveUp => State::Due(Retry::starting(now)),
            listed @ State::Listed(_) => listed,
        }
    }
}

/// What one attempt came to.
enum Attempt {
    /// The child answered; the listing, or why it failed.
    Listed(Result<Box<Listing>, String>),
    /// The child did not answer MCP.
    NoAnswer(String),
}

/// The attempt due in `state` with `client` (`own`: the listing's own, not
/// the probe's session, which is ended once it has listed or given up, so
/// the server is not left with one per spawn); what it found goes to the
/// duty's `send`. The next state, or `None` when the task should end (a
/// stop, or nobody listens).
pub(crate) async fn step(
    client: &mut McpClient,
    own: bool,
    state: State,
    duty: &Duty,
    stop: &mut tokio::sync::oneshot::Receiver<()>,
) -> Option<State> {
    let State::Due(retry) = state else {
        return Some(state);
    };
    let (next, result) = match attempt(client, stop).await? {
        Attempt::Listed(l) => (State::Listed(Instant::now()), l.map(|l| *l)),
        Attempt::NoAnswer(why) => match retry.after_failure(Instant::now()) {
            Some(r) => return Some(State::Due(r)),
            None => (State::GaveUp, Err(gave_up(&why, !own))),
        },
    };
    if own && let Ok(Err(e)) = tokio::time::timeout(ATTEMPT_TIMEOUT, client.close()).await {
        // Only the HTTP status or a transport error: no server text.
        tracing::debug!(error = %e, "ending the listing's MCP session failed");
    }
    (duty.send)(result).then_some(next)
}

/// Readies `client` (the child answers MCP), then lists, each bounded;
/// `None` when `stop` cut it short (the session, if one was learned, is
/// ended on the way out).
async fn attempt(
    client: &mut McpClient,
    stop: &mut tokio::sync::oneshot::Receiver<()>,
) -> Option<Attempt> {
    let work = async {
        let ready = match tokio::time::timeout(ATTEMPT_TIMEOUT, client.ready()).await {
            Ok(r) => r,
            Err(_) => Err("no answer".to_owned()),
        };
        if let Err(why) = ready {
            return Attempt::NoAnswer(why);
        }
        let listed = tokio::time::timeout(LIST_TIMEOUT, client.list_items()).await;
        Attempt::Listed(listed.map_or_else(
            |_| {
                Err(format!(
                    "no complete listing within {}",
                    humantime::format_duration(LIST_TIMEOUT)
                ))
            },
            |l| l.map(Box::new),
        ))
    };
    tokio::select! {
        _ = stop => None,
        // Boxed: the exchange's state lives only while it runs.
        a = Box::pin(work) => Some(a),
    }
}

/// Why xy stopped asking, for `status`.
fn gave_up(why: &str, probed: bool) -> String {
    let then = if probed {
        "the mcp probe lists it once it answers"
    } else {
        "xy asks again at its next start"
    };
    format!(
        "it did not answer MCP within {} ({why}); xy stopped asking for its tools; {then}",
        humantime::format_duration(ANSWER_WITHIN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that never answers is asked a bounded number of times, at
    /// growing intervals, then not at all.
    #[test]
    fn attempts_back_off_then_stop() {
        let t0 = Instant::now();
        let mut r = Retry::starting(t0);
        let mut at = vec![r.next - t0];
        while let Some(next) = r.after_failure(r.next) {
            r = next;
            at.push(r.next - t0);
        }
        assert!(at.len() <= 14, "{at:?}");
        assert!(*at.last().unwrap() <= ANSWER_WITHIN, "{at:?}");
        let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
        assert_eq!(*gaps.last().unwrap(), RETRY_MAX);
        // No more than one attempt in any 10 s after the first 10 s.
        let late: Vec<_> = at
            .iter()
            .filter(|d| **d >= Duration::from_secs(10))
            .collect();
        assert!(
            late.windows(2).all(|w| *w[1] - *w[0] >= RETRY_MAX),
            "{late:?}"
        );
    }

    #[test]
    fn a_wake_up_or_an_answer_lists_again() {
        let t0 = Instant::now();
        let listed = State::Listed(t0);
        assert_eq!(listed.due(), None);
        // Woken at once: not before the gap.
        assert_eq!(listed.woken(t0).due(), Some(t0 + RELIST_GAP));
        let later = t0 + Duration::from_secs(5);
        assert_eq!(listed.woken(later).due(), Some(later));
        assert_eq!(State::GaveUp.woken(later).due(), Some(later));
        // A probe's success: list now, unless listed.
        assert_eq!(State::GaveUp.answered(later).due(), Some(later));
        let waiting = State::Due(Retry::starting(t0));
        assert_eq!(waiting.answered(later).due(), Some(later));
        assert_eq!(listed.answered(later), listed);
    }
}
