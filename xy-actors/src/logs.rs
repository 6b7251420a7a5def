//! What a log consumer sees: one captured line, the events of a live
//! subscription, and the subscription itself (the buffered tail, then live
//! lines forwarded from each server's broadcast). Leaf types: the log router
//! produces them, the engine hands them to the daemon.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use xy_core::protocol::LogStream;

/// One captured output line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Server that printed it.
    pub name: Arc<str>,
    /// stdout or stderr.
    pub stream: LogStream,
    /// The line without newline (lossy UTF-8, at most 64 KiB).
    pub line: String,
    /// Capture time.
    pub ts: SystemTime,
}

/// What a live log subscription yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    /// A new line.
    Line(LogLine),
    /// The follower fell behind and has been dropped; nothing follows.
    Lagged,
}

/// A log stream: the buffered tail, then (when following) live lines.
#[derive(Debug)]
pub struct LogSubscription {
    /// Buffered lines, oldest first, merged across servers by time.
    pub backlog: Vec<LogLine>,
    live: Option<mpsc::UnboundedReceiver<LogEvent>>,
    /// Bytes of the lines in `live` (see [`FOLLOW_BEHIND`]).
    behind: Arc<AtomicUsize>,
    forwarders: Vec<JoinHandle<()>>,
}

impl LogSubscription {
    /// The next live event; `None` when not following or every source ended.
    /// After [`LogEvent::Lagged`] it yields `None`.
    pub async fn recv(&mut self) -> Option<LogEvent> {
        let rx = self.live.as_mut()?;
        match rx.recv().await {
            Some(LogEvent::Line(line)) => {
                self.behind.fetch_sub(cost(&line), Ordering::AcqRel);
                Some(LogEvent::Line(line))
            }
            Some(LogEvent::Lagged) => {
                self.end();
                Some(LogEvent::Lagged)
            }
            None => {
                self.end();
                None
            }
        }
    }

    fn end(&mut self) {
        self.live = None;
        for f in self.forwarders.drain(..) {
            f.abort();
        }
    }
}

impl Drop for LogSubscription {
    fn drop(&mut self) {
        self.end();
    }
}

impl LogSubscription {
    /// The backlog, and when following, one forwarder per server's
    /// broadcast into a channel of its own.
    pub(crate) fn new(
        backlog: Vec<LogLine>,
        receivers: Option<Vec<broadcast::Receiver<LogLine>>>,
        bound: usize,
    ) -> LogSubscription {
        let behind = Arc::new(AtomicUsize::new(0));
        let (live, forwarders) = match receivers {
            Some(receivers) => {
                let (tx, rx) = mpsc::unbounded_channel();
                let forwarders = receivers
                    .into_iter()
                    .map(|r| tokio::spawn(forward(r, tx.clone(), Arc::clone(&behind), bound)))
                    .collect();
                (Some(rx), forwarders)
            }
            None => (None, Vec::new()),
        };
        LogSubscription {
            backlog,
            live,
            behind,
            forwarders,
        }
    }
}

/// Bytes of live lines a follower may have waiting for it by default (received from
/// the servers' broadcasts, not yet taken by its `recv`); one more and it
/// is dropped as lagged (SPEC §18: bytes, not lines).
pub(crate) const FOLLOW_BEHIND: usize = 4 * 1024 * 1024;

/// What a line costs a follower's budget: its text and its record.
fn cost(line: &LogLine) -> usize {
    line.line.len() + std::mem::size_of::<LogLine>()
}

/// Moves one server's broadcast into the subscription's channel. It never
/// waits on its subscriber, so the broadcast is drained as fast as it is
/// filled; a subscriber that has more than `bound` bytes waiting
/// is dropped as lagged, without slowing the pumps or other followers.
async fn forward(
    mut rx: broadcast::Receiver<LogLine>,
    tx: mpsc::UnboundedSender<LogEvent>,
    behind: Arc<AtomicUsize>,
    bound: usize,
) {
    let pass = |line: LogLine| {
        let n = cost(&line);
        if behind.fetch_add(n, Ordering::AcqRel) + n > bound {
            let _ = tx.send(LogEvent::Lagged);
            return false;
        }
        tx.send(LogEvent::Line(line)).is_ok()
    };
    loop {
        match rx.recv().await {
            Ok(line) => {
                if !pass(line) {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let _ = tx.send(LogEvent::Lagged);
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
        // What else is there, at once: `recv` spends the task's coop
        // budget per line, and a pump's read can carry thousands.
        loop {
            match rx.try_recv() {
                Ok(line) => {
                    if !pass(line) {
                        return;
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    let _ = tx.send(LogEvent::Lagged);
                    return;
                }
                Err(broadcast::error::TryRecvError::Closed) => return,
                Err(broadcast::error::TryRecvError::Empty) => break,
            }
        }
    }
}
