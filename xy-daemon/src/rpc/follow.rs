//! The one scaffold behind every stream the daemon writes (`logs`, `events`,
//! `calls`): the subscription id, the stream registered on its connection
//! so `*_cancel` can end it, the wait for the reply to be queued, the
//! backlog then live items, the bounded buffer a follower gets while its
//! connection has no room, the drop of a follower that falls behind (with a
//! warning), and exactly one end notification (unless the client is gone).
//! Each stream supplies a [`Feed`]: its item type, how an item is encoded as
//! a notification, its filter and its end condition.
//!
//! A follower is dropped, not waited on: the stream task keeps reading its
//! feed, holds at most [`Feed::QUEUE_LIMIT`] items the socket has no room
//! for, and past that ends `lagged`. A feed that bounds itself (the log
//! router's per-follower budget) sets no limit: its stream waits for room
//! for every item, and the feed reports the lag.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use jsonrpsee::types::Notification;
use jsonrpsee::{MethodResponseFuture, ResponsePayload, RpcModule};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};
use xy_core::protocol::{LogEndReason, LogsCancelParams, LogsCancelResult};

use super::{DaemonCtx, conn, parse};
use crate::transport::{Conn, StreamKind};

/// Why a stream ended; the same reasons for every kind (`log_end`,
/// `event_end`, `call_end`).
pub(super) type End = LogEndReason;

/// What one kind of stream supplies to the scaffold.
pub(super) trait Feed: Send + 'static {
    /// One item the feed yields, before it is encoded.
    type Item: Send;

    /// Items held for a follower while its connection has no room; past that
    /// it is dropped (`lagged`). `None`: the feed is bounded at its source,
    /// and the stream waits for room for every item.
    const QUEUE_LIMIT: Option<usize>;

    /// The warning logged when a follower is dropped for falling behind.
    const LAGGED_WARNING: &'static str;

    /// Items sent before live ones (each waits for room; a cancel is seen
    /// between them).
    fn backlog(&mut self) -> Vec<Self::Item> {
        Vec::new()
    }

    /// `Some` when the stream ends once the backlog is sent (no live items).
    fn after_backlog(&self) -> Option<End> {
        None
    }

    /// The next live item, or why the feed ended. Must be cancel-safe: the
    /// stream waits on it and on its connection at once.
    fn next(&mut self) -> impl Future<Output = Result<Self::Item, End>> + Send;

    /// Items already waiting when the daemon starts closing, delivered
    /// before the stream ends `shutdown`.
    fn pending(&mut self) -> Vec<Self::Item> {
        Vec::new()
    }

    /// Whether an item goes to this follower.
    fn wanted(&self, _item: &Self::Item) -> bool {
        true
    }

    /// The item as the notification the client reads.
    fn notification(id: u64, item: Self::Item) -> Box<RawValue>;

    /// The stream's last notification.
    fn end_notification(id: u64, reason: End) -> Box<RawValue>;

    /// Runs once the feed is dropped, before the end notification is sent.
    fn dropped(_end: Option<End>) {}
}

/// Starts a stream on `conn`: allocates its subscription id, registers it
/// for `*_cancel`, and answers with `reply(id)`; once that answer is queued
/// the feed's items follow.
pub(super) fn start<F, R>(
    ctx: &DaemonCtx,
    conn: Arc<Conn>,
    kind: StreamKind,
    feed: F,
    reply: impl FnOnce(u64) -> R,
) -> ResponsePayload<'static, R>
where
    F: Feed,
    R: Serialize + Clone,
{
    let id = ctx.next_subscription_id();
    let cancel = conn.add_stream(id, kind);
    let (payload, written) = ResponsePayload::success(reply(id)).notify_on_completion();
    let stream = Stream {
        id,
        conn,
        closing: ctx.closing.clone(),
    };
    tokio::spawn(stream.run(feed, written, cancel));
    payload
}

/// Registers `<kind>_cancel`: ends one of the calling connection's streams
/// of `kind`.
pub(super) fn register_cancel(
    m: &mut RpcModule<DaemonCtx>,
    method: &'static str,
    kind: StreamKind,
) {
    m.register_async_method(method, move |params, _ctx, ext| async move {
        let p: LogsCancelParams = parse(&params)?;
        let conn = conn(&ext)?;
        // Only this connection's streams: another client's ids are unknown here.
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(LogsCancelResult {
            cancelled: conn.cancel_stream(p.subscription_id, kind),
        })
    })
    .expect("method names are unique");
}

/// A JSON-RPC notification, serialized once.
pub(super) fn notification<T: Serialize>(method: &'static str, params: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(&Notification::new(method.into(), params))
        .expect("notification params serialize")
}

struct Stream {
    id: u64,
    conn: Arc<Conn>,
    closing: watch::Receiver<bool>,
}

impl Stream {
    async fn run<F: Feed>(
        self,
        feed: F,
        written: MethodResponseFuture,
        mut cancel: oneshot::Receiver<()>,
    ) {
        // Not sent (a notification, or the client left): no stream.
        if written.await.is_err() {
            self.conn.remove_stream(self.id);
            return;
        }
        // The feed and the queue are dropped here, before the last line
        // waits for room: a stuck client holds nothing but that line.
        let end = self.pump(feed, &mut cancel).await;
        self.conn.remove_stream(self.id);
        if end == Some(End::Lagged) {
            tracing::warn!(subscription = self.id, "{}", F::LAGGED_WARNING);
        }
        F::dropped(end);
        if let Some(reason) = end {
            self.conn.send(F::end_notification(self.id, reason)).await;
        }
    }

    /// Sends items until the stream ends; `None` when the client is gone.
    async fn pump<F: Feed>(&self, mut feed: F, cancel: &mut oneshot::Receiver<()>) -> Option<End> {
        for item in feed.backlog() {
            if cancelled(cancel) {
                return Some(End::Cancelled);
            }
            if feed.wanted(&item) && !self.conn.send(F::notification(self.id, item)).await {
                return None;
            }
        }
        if let Some(end) = feed.after_backlog() {
            return Some(end);
        }
        let mut queue: VecDeque<Box<RawValue>> = VecDeque::new();
        let mut closing = self.closing.clone();
        loop {
            tokio::select! {
                biased;
                _ = &mut *cancel => return Some(End::Cancelled),
                () = self.conn.closed() => return None,
                () = crate::flag::until_set(&mut closing) => {
                    // What the feed published before `closing` (the servers'
                    // last transitions) is delivered first.
                    for item in feed.pending() {
                        if feed.wanted(&item) {
                            queue.push_back(F::notification(self.id, item));
                        }
                    }
                    for line in queue.drain(..) {
                        if !self.conn.send(line).await {
                            return None;
                        }
                    }
                    return Some(End::Shutdown);
                }
                permit = self.conn.reserve(), if !queue.is_empty() => match permit {
                    Some(p) => {
                        if let Some(line) = queue.pop_front() {
                            p.send(line.into());
                        }
                    }
                    None => return None,
                },
                item = feed.next() => match item {
                    Ok(item) if feed.wanted(&item) => {
                        let line = F::notification(self.id, item);
                        match F::QUEUE_LIMIT {
                            None => {
                                if !self.conn.send(line).await {
                                    return None;
                                }
                            }
                            Some(limit) => {
                                queue.push_back(line);
                                if queue.len() > limit {
                                    return Some(End::Lagged);
                                }
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(end) => return Some(end),
                },
            }
        }
    }
}

fn cancelled(cancel: &mut oneshot::Receiver<()>) -> bool {
    !matches!(cancel.try_recv(), Err(oneshot::error::TryRecvError::Empty))
}
