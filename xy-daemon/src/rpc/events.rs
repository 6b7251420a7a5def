//! `events` and `events_cancel` (SPEC §15). `events` replies
//! `{subscription_id}`, then writes one `event` notification per change the
//! engine's bus carries for the named servers, and ends every stream with
//! exactly one `event_end` (unless the client is gone). The stream is
//! [`follow`]'s; this file says where the events come from
//! and how one is written.
//!
//! A subscriber whose connection does not drain is dropped, not waited on:
//! at most [`QUEUE_LIMIT`] events wait for it, then its stream ends
//! `lagged`. The bus never waits on anyone.

use std::sync::Arc;

use jsonrpsee::{ResponsePayload, RpcModule};
use serde_json::value::RawValue;
use xy_actors::{EngineEvent, EventItem, EventSubscription};
use xy_core::protocol::{
    EventEndNotification, EventEndReason, EventNotification, EventsParams, EventsResult, method,
};

use super::follow::{self, End, Feed, notification};
use super::{DaemonCtx, conn, engine_error, no_empty_names, parse};
use crate::transport::StreamKind;

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
        follow::start(&ctx, conn, StreamKind::Events, Events(sub), |id| {
            EventsResult {
                subscription_id: id,
            }
        })
    })
    .expect("method names are unique");

    follow::register_cancel(m, method::EVENTS_CANCEL, StreamKind::Events);
}

/// One `events` stream's source: the engine's bus, already filtered to the
/// named servers.
struct Events(EventSubscription);

impl Feed for Events {
    type Item = Arc<EngineEvent>;

    const QUEUE_LIMIT: Option<usize> = Some(QUEUE_LIMIT);
    const LAGGED_WARNING: &'static str = "event subscriber fell behind and was dropped";

    async fn next(&mut self) -> Result<Arc<EngineEvent>, End> {
        match self.0.recv().await {
            Some(EventItem::Event(ev)) => Ok(ev),
            Some(EventItem::Lagged) => Err(EventEndReason::Lagged),
            None => Err(EventEndReason::Shutdown),
        }
    }

    /// The servers' last transitions (stopping → stopped), published before
    /// the daemon started closing.
    fn pending(&mut self) -> Vec<Arc<EngineEvent>> {
        let mut v = Vec::new();
        while let Some(EventItem::Event(ev)) = self.0.try_recv() {
            v.push(ev);
        }
        v
    }

    fn notification(id: u64, ev: Arc<EngineEvent>) -> Box<RawValue> {
        let n = EventNotification {
            subscription_id: id,
            name: ev.name.to_string(),
            kind: ev.kind,
            ts: ev.ts.clone(),
            from: ev.from.clone(),
            to: ev.to.clone(),
            reason: ev.reason.clone(),
        };
        notification(method::EVENT, &n)
    }

    fn end_notification(id: u64, reason: End) -> Box<RawValue> {
        let end = EventEndNotification {
            subscription_id: id,
            reason,
        };
        notification(method::EVENT_END, &end)
    }
}
