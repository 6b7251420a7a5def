//! `events` and `events_cancel` (SPEC §15). `events` replies
//! `{subscription_id}`, then writes one `event` notification per change the
//! engine's bus carries for the named servers, and ends every stream with
//! exactly one `event_end` (unless the client is gone).
//!
//! A subscriber whose connection does not drain is dropped, not waited on:
//! its stream task always keeps reading the bus, holds at most
//! [`QUEUE_LIMIT`] events the socket has no room for, and past that ends
//! with `event_end {reason: "lagged"}`. The bus never waits on anyone.

use std::collections::VecDeque;
use std::sync::Arc;

use jsonrpsee::{MethodResponseFuture, ResponsePayload, RpcModule};
use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};
use xy_actors::{EngineEvent, EventItem, EventSubscription};
use xy_core::protocol::{
    EventEndNotification, EventEndReason, EventNotification, EventsCancelParams,
    EventsCancelResult, EventsParams, EventsResult, method,
};

use super::logs::notification;
use super::{DaemonCtx, conn, engine_error, no_empty_names, parse};
use crate::transport::{Conn, StreamKind};

/// Events held for one subscriber while its connection has no room. Events
/// are rare (a few per server per restart), so a subscriber this far behind
/// is not reading.
const QUEUE_LIMIT: usize = 256;

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::EVENTS, |params, ctx, ext| async move {
        let p: EventsParams = match parse(&params) {
            Ok(p) => p,
            Err(e) => return ResponsePayload::error(e),
        };
        if let Err(e) = no_empty_names(p.names.as_deref()) {
            return ResponsePayload::error(e);
        }
        let conn = match conn(&ext) {
            Ok(c) => c,
            Err(e) => return ResponsePayload::error(e),
        };
        let engine = match ctx.engine().await {
            Ok(e) => e,
            Err(e) => return ResponsePayload::error(e),
        };
        let sub = match engine.subscribe_events(&p.requested_names()).await {
            Ok(s) => s,
            Err(e) => return ResponsePayload::error(engine_error(&e)),
        };
        let id = ctx.next_subscription_id();
        let cancel = conn.add_stream(id, StreamKind::Events);
        let (payload, written) = ResponsePayload::success(EventsResult {
            subscription_id: id,
        })
        .notify_on_completion();
        let stream = Stream {
            id,
            conn,
            closing: ctx.closing.clone(),
        };
        tokio::spawn(stream.run(sub, written, cancel));
        payload
    })
    .expect("method names are unique");

    m.register_async_method(method::EVENTS_CANCEL, |params, _ctx, ext| async move {
        let p: EventsCancelParams = parse(&params)?;
        let conn = conn(&ext)?;
        // Only this connection's streams: another client's ids are unknown here.
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(EventsCancelResult {
            cancelled: conn.cancel_stream(p.subscription_id, StreamKind::Events),
        })
    })
    .expect("method names are unique");
}

struct Stream {
    id: u64,
    conn: Arc<Conn>,
    closing: watch::Receiver<bool>,
}

impl Stream {
    async fn run(
        self,
        sub: EventSubscription,
        written: MethodResponseFuture,
        mut cancel: oneshot::Receiver<()>,
    ) {
        // Not sent (a notification, or the client left): no stream.
        if written.await.is_err() {
            self.conn.remove_stream(self.id);
            return;
        }
        // The subscription and the queue are dropped here, before the last
        // line waits for room: a stuck client holds nothing but that line.
        let end = self.pump(sub, &mut cancel).await;
        self.conn.remove_stream(self.id);
        if let Some(reason) = end {
            if reason == EventEndReason::Lagged {
                tracing::warn!(
                    subscription = self.id,
                    "event subscriber fell behind and was dropped"
                );
            }
            let end = EventEndNotification {
                subscription_id: self.id,
                reason,
            };
            self.conn.send(notification(method::EVENT_END, &end)).await;
        }
    }

    /// Forwards events until the stream ends; `None` when the client is gone.
    async fn pump(
        &self,
        mut sub: EventSubscription,
        cancel: &mut oneshot::Receiver<()>,
    ) -> Option<EventEndReason> {
        let mut queue: VecDeque<Box<RawValue>> = VecDeque::new();
        let mut closing = self.closing.clone();
        loop {
            tokio::select! {
                biased;
                _ = &mut *cancel => return Some(EventEndReason::Cancelled),
                () = self.conn.closed() => return None,
                () = crate::flag::until_set(&mut closing) => {
                    // The servers' last transitions (stopping → stopped) were
                    // published before `closing`: deliver them first.
                    while let Some(EventItem::Event(ev)) = sub.try_recv() {
                        queue.push_back(self.event(&ev));
                    }
                    for line in queue.drain(..) {
                        if !self.conn.send(line).await {
                            return None;
                        }
                    }
                    return Some(EventEndReason::Shutdown);
                }
                permit = self.conn.reserve(), if !queue.is_empty() => match permit {
                    Some(p) => {
                        if let Some(line) = queue.pop_front() {
                            p.send(line.into());
                        }
                    }
                    None => return None,
                },
                item = sub.recv() => match item {
                    Some(EventItem::Event(ev)) => {
                        queue.push_back(self.event(&ev));
                        if queue.len() > QUEUE_LIMIT {
                            return Some(EventEndReason::Lagged);
                        }
                    }
                    Some(EventItem::Lagged) => return Some(EventEndReason::Lagged),
                    None => return Some(EventEndReason::Shutdown),
                },
            }
        }
    }

    fn event(&self, ev: &EngineEvent) -> Box<RawValue> {
        let n = EventNotification {
            subscription_id: self.id,
            name: ev.name.to_string(),
            kind: ev.kind,
            ts: ev.ts.clone(),
            from: ev.from.clone(),
            to: ev.to.clone(),
            reason: ev.reason.clone(),
        };
        notification(method::EVENT, &n)
    }
}
