//! The log-writer threads every server's file shares: two dedicated threads
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
mod tests {
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    use super::*;
    use crate::log_router::disk::{DiskLog, DiskQueue};

    /// Generous: the machine is shared; a stall is forever, not slow.
    const DEADLINE: Duration = Duration::from_secs(30);

    fn queue(dir: &Path, name: &str, writers: &Arc<Writers>) -> Arc<DiskQueue> {
        let path = dir.join(format!("{name}.log"));
        DiskQueue::with_writers(DiskLog::open(name, path, u64::MAX), writers.clone())
    }

    fn lines(tag: &str, n: usize, width: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let line = format!("{tag} {i:07} ");
            out.extend_from_slice(line.as_bytes());
            out.resize(out.len() + width.saturating_sub(line.len() + 1), b'x');
            out.push(b'\n');
        }
        out
    }

    fn count_in(path: &Path, tag: &str) -> usize {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(tag))
            .count()
    }

    async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        xy_testbins::wait::poll(what, DEADLINE, || std::future::ready(done().then_some(()))).await;
    }

    /// With ONE writer: the file of `stuck` (a FIFO whose reader never
    /// reads) blocks that writer in a write for good; the writer is
    /// replaced, and another server's lines still reach its file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stuck_file_does_not_stop_another_servers_lines() {
        let dir = tempfile::tempdir().unwrap();
        let writers = Writers::new(1, Duration::from_millis(200));
        let fifo = dir.path().join("stuck.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let stuck = queue(dir.path(), "stuck", &writers);
        // 200 KiB against a pipe of 64 KiB: the write blocks.
        stuck.write(lines("stuck", 2000, 100));
        wait_until("the writer to be in the stuck write", || {
            !lock(&writers.state).busy.is_empty()
        })
        .await;

        let other = queue(dir.path(), "other", &writers);
        for round in 0..3 {
            other.write(lines(&format!("r{round}"), 10, 40));
            let path = dir.path().join("other.log");
            let tag = format!("r{round} ");
            wait_until("the other server's lines", || count_in(&path, &tag) == 10).await;
        }
        let (abandoned, spawned) = writers.counts();
        assert_eq!(abandoned, 1, "the stuck writer, once");
        assert_eq!(spawned, 2, "one writer and its replacement");
        // The stuck queue stayed with its stuck writer.
        stuck.write(lines("more", 1, 40));
        assert!(!stuck.idle());

        // The reader goes: the write fails (EPIPE), the writer comes back
        // and, the pool being full again, ends.
        drop(reader);
        wait_until("the stuck queue to be dealt with", || stuck.idle()).await;
        assert!(writers.flush(DEADLINE));
    }

    /// 200 servers logging at once (a boot) are written by two threads, not
    /// 200, and `flush` returns once every line is in its file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_servers_share_two_writers_and_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let writers = Writers::new(2, DEADLINE);
        let queues: Vec<_> = (0..200)
            .map(|i| queue(dir.path(), &format!("s{i:03}"), &writers))
            .collect();
        for round in 0..5 {
            for q in &queues {
                q.write(lines(&format!("n{round}"), 20, 60));
            }
        }
        assert!(writers.flush(DEADLINE), "flush timed out");
        for i in 0..200 {
            let text = std::fs::read_to_string(dir.path().join(format!("s{i:03}.log"))).unwrap();
            let got: Vec<&str> = text.lines().map(|l| &l[..11]).collect();
            let want: Vec<String> = (0..5)
                .flat_map(|r| (0..20).map(move |n| format!("n{r} {n:07} ")))
                .collect();
            assert_eq!(got, want, "s{i:03}: every line, in order");
        }
        assert_eq!(writers.counts(), (0, 2));
    }

    /// A flood is written a turn at a time: the queue comes back with more
    /// after [`TURN_BYTES`], and leaves the writers once empty.
    #[test]
    fn a_turn_ends_after_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let writers = Writers::new(1, DEADLINE);
        let q = queue(dir.path(), "flood", &writers);
        // No runtime: `write` would write at once; queue by hand instead.
        let batch = lines("f", 1000, 100);
        assert!(batch.len() < TURN_BYTES);
        q.enqueue_for_test(batch.clone());
        q.enqueue_for_test(batch.clone());
        q.enqueue_for_test(batch.clone());
        assert!(q.drain_turn(batch.len() + 1), "two batches, one left");
        assert!(!q.drain_turn(TURN_BYTES), "the last one");
        assert!(q.idle());
        assert_eq!(count_in(&dir.path().join("flood.log"), "f "), 3000);
    }
}
