//! What a log consumer sees: one captured line, the events of a live
//! subscription, and the subscription itself (the buffered tail, then live
//! lines forwarded from each server's broadcast). Leaf types: the log router
//! produces them, the engine hands them to the daemon.

use std::sync::Arc;
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
    live: Option<mpsc::Receiver<LogEvent>>,
    forwarders: Vec<JoinHandle<()>>,
}

impl LogSubscription {
    /// The next live event; `None` when not following or every source ended.
    /// After [`LogEvent::Lagged`] it yields `None`.
    pub async fn recv(&mut self) -> Option<LogEvent> {
        let rx = self.live.as_mut()?;
        match rx.recv().await {
            Some(LogEvent::Lagged) => {
                self.end();
                Some(LogEvent::Lagged)
            }
            Some(ev) => Some(ev),
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
    ) -> LogSubscription {
        let (live, forwarders) = match receivers {
            Some(receivers) => {
                let (tx, rx) = mpsc::channel(SUBSCRIPTION_BUFFER);
                let forwarders = receivers
                    .into_iter()
                    .map(|r| tokio::spawn(forward(r, tx.clone())))
                    .collect();
                (Some(rx), forwarders)
            }
            None => (None, Vec::new()),
        };
        LogSubscription {
            backlog,
            live,
            forwarders,
        }
    }
}

/// Live lines buffered per subscription between the forwarders and `recv`.
const SUBSCRIPTION_BUFFER: usize = 256;

/// Moves one server's broadcast into the subscription's channel. It only ever
/// waits on its own subscriber, so a slow one lags (and is dropped) without
/// slowing the pumps or other followers.
async fn forward(mut rx: broadcast::Receiver<LogLine>, tx: mpsc::Sender<LogEvent>) {
    loop {
        match rx.recv().await {
            Ok(line) => {
                if tx.send(LogEvent::Line(line)).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let _ = tx.send(LogEvent::Lagged).await;
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
