//! The disk-writer threads every log file and the call records share: two dedicated threads
//! take the per-server queues of `disk.rs` in turn, instead of a tokio
//! blocking-pool thread per server. A writer stuck in one write (a hung
//! filesystem, a FIFO nobody reads) is abandoned and replaced.
//!
//! Why not `spawn_blocking`: 200 servers logging at boot made up to 200 pool
//! threads, kept alive by the trickle of later lines (idle RSS that grows
//! with the fleet), and capping the pool would let hung log files starve the port
//! checks that share it. Here the thread count is bounded by
//! [`MAX_WRITERS`] plus one per file that is stuck right now, and the port
//! checks keep the blocking pool to themselves.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// A queue the writers drain in turns (one server's file). A trait so that
/// the writers do not depend on `disk.rs`, which feeds them.
pub(crate) trait Drain: Send + Sync {
    /// Writes until the queue is empty (`false`: it leaves the writers) or
    /// `budget` bytes are written with more queued (`true`: another turn).
    fn drain_turn(&self, budget: usize) -> bool;
}

/// Writers that take work (a stuck one stops counting).
const MAX_WRITERS: usize = 2;
/// A writer in one turn for this long is stuck: another takes over the
/// queue of every other server (the stuck server's own queue stays with it,
/// so its pumps' STALL rule still applies).
const STUCK: Duration = Duration::from_secs(1);
/// Bytes a writer writes from one queue before it lets the next one have a
/// turn: a flooding server does not hold a writer for good.
pub(crate) const TURN_BYTES: usize = 256 * 1024;
/// A writer only writes, formats nothing and opens a file now and then.
const STACK: usize = 256 * 1024;

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The writer threads and the queues waiting for one; see the module docs.
pub(crate) struct Writers {
    state: Mutex<State>,
    /// Idle writers wait here for [`State::wakeups`].
    work: Condvar,
    /// The watcher waits here for a stuck writer's deadline; [`flush`]
    /// callers for the pool to be quiet.
    ///
    /// [`flush`]: Writers::flush
    watch: Condvar,
    max_writers: usize,
    stuck: Duration,
}

impl std::fmt::Debug for Writers {
    // Not the state: its queues point back here.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writers")
            .field("max_writers", &self.max_writers)
            .field("stuck", &self.stuck)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// Queues with batches to write, each at most once (its `draining`).
    ready: VecDeque<Arc<dyn Drain>>,
    /// Writers waiting for work and not yet woken.
    idle: usize,
    /// Wakeups sent and not yet taken by an idle writer.
    wakeups: usize,
    /// Writers not abandoned (idle, woken or in a turn).
    live: usize,
    /// Writers in a turn, by id, and when it began. An abandoned writer is
    /// removed from here: it finds out when its write returns.
    busy: HashMap<u64, Instant>,
    next_id: u64,
    /// A watcher thread is running.
    watching: bool,
    /// Callers of `flush` waiting on `watch`.
    flushers: usize,
    /// Writers declared stuck so far, for the tests.
    abandoned: usize,
}

impl State {
    fn quiet(&self) -> bool {
        self.ready.is_empty() && self.busy.is_empty()
    }
}

/// The writers of the daemon's log files.
pub(crate) fn shared() -> &'static Arc<Writers> {
    static WRITERS: OnceLock<Arc<Writers>> = OnceLock::new();
    WRITERS.get_or_init(|| Writers::new(MAX_WRITERS, STUCK))
}

impl Writers {
    pub(crate) fn new(max_writers: usize, stuck: Duration) -> Arc<Writers> {
        Arc::new(Writers {
            state: Mutex::default(),
            work: Condvar::new(),
            watch: Condvar::new(),
            max_writers: max_writers.max(1),
            stuck,
        })
    }

    /// Queues `queue` (which has batches and was not queued) for a writer.
    pub(crate) fn submit(self: &Arc<Self>, queue: Arc<dyn Drain>) {
        let mut s = lock(&self.state);
        s.ready.push_back(queue);
        self.dispatch(&mut s);
    }

    /// Gets a writer going for the ready queues: an idle one, a new one, or
    /// (all busy) a watcher that replaces whichever of them gets stuck.
    fn dispatch(self: &Arc<Self>, s: &mut State) {
        if s.ready.is_empty() || s.wakeups >= s.ready.len() {
            return;
        }
        if s.idle > 0 {
            s.idle -= 1;
            s.wakeups += 1;
            self.work.notify_one();
            return;
        }
        self.reap(s);
        if s.live < self.max_writers {
            self.spawn_writer(s);
        } else {
            self.spawn_watcher(s);
        }
    }

    /// Abandons the writers stuck in a turn for [`STUCK`] or longer.
    fn reap(&self, s: &mut State) {
        let now = Instant::now();
        let stuck: Vec<u64> = s
            .busy
            .iter()
            .filter(|&(_, &since)| now.duration_since(since) >= self.stuck)
            .map(|(&id, _)| id)
            .collect();
        for id in stuck {
            s.busy.remove(&id);
            s.live -= 1;
            s.abandoned += 1;
            tracing::debug!(
                "a log writer has been in one write for {:?}; another takes over the other servers' logs",
                self.stuck
            );
        }
    }

    fn spawn_writer(self: &Arc<Self>, s: &mut State) {
        let id = s.next_id;
        s.next_id += 1;
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("xyd-log".into())
            .stack_size(STACK)
            .spawn(move || me.writer(id));
        match spawned {
            Ok(_) => s.live += 1,
            Err(e) => {
                // Out of threads: the queues wait; the watcher tries again.
                tracing::warn!(error = %e, "cannot start a log writer thread");
                self.spawn_watcher(s);
            }
        }
    }

    fn spawn_watcher(self: &Arc<Self>, s: &mut State) {
        if s.watching {
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("xyd-log-watch".into())
            .stack_size(STACK)
            .spawn(move || me.watcher());
        match spawned {
            Ok(_) => s.watching = true,
            Err(e) => tracing::warn!(error = %e, "cannot start the log writer watcher"),
        }
    }

    /// One writer: takes a ready queue, writes a turn of it, requeues it if
    /// it has more; waits while nothing is ready.
    fn writer(self: Arc<Self>, id: u64) {
        let mut s = lock(&self.state);
        loop {
            let Some(queue) = s.ready.pop_front() else {
                s.idle += 1;
                while s.wakeups == 0 {
                    s = self.work.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.wakeups -= 1;
                continue;
            };
            s.busy.insert(id, Instant::now());
            drop(s);
            let more = queue.drain_turn(TURN_BYTES);
            s = lock(&self.state);
            let abandoned = s.busy.remove(&id).is_none();
            if more {
                s.ready.push_back(queue);
            }
            if abandoned {
                if s.live >= self.max_writers {
                    // Replaced meanwhile: the others (or a new one) go on.
                    self.dispatch(&mut s);
                    self.wake_flushers(&s);
                    return;
                }
                s.live += 1;
            }
            self.wake_flushers(&s);
        }
    }

    /// Runs while queues wait and every writer is busy: at the deadline of
    /// the oldest turn it abandons the stuck writers and starts new ones.
    fn watcher(self: Arc<Self>) {
        let mut s = lock(&self.state);
        loop {
            self.reap(&mut s);
            while !s.ready.is_empty() && s.wakeups < s.ready.len() && s.live < self.max_writers {
                let live = s.live;
                self.spawn_writer(&mut s);
                if s.live == live {
                    break;
                }
            }
            let waiting = !s.ready.is_empty() && s.wakeups < s.ready.len() && s.idle == 0;
            let Some(oldest) = s.busy.values().min().copied().filter(|_| waiting) else {
                s.watching = false;
                return;
            };
            let wait = (oldest + self.stuck)
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10));
            s = self
                .watch
                .wait_timeout(s, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn wake_flushers(&self, s: &State) {
        if s.flushers > 0 && s.quiet() {
            self.watch.notify_all();
        }
    }

    /// Waits until every queued batch is written (stuck writers aside), at
    /// most `timeout`; whether it was.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = lock(&self.state);
        s.flushers += 1;
        let done = loop {
            if s.quiet() {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            s = self
                .watch
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        s.flushers -= 1;
        done
    }

    /// Writers declared stuck so far, and threads started (writers and
    /// watchers aside: writers only).
    #[cfg(test)]
    fn counts(&self) -> (usize, u64) {
        let s = lock(&self.state);
        (s.abandoned, s.next_id)
    }
}

#[cfg(test)]
mod tests;
