//! `calls` and `calls_cancel` (SPEC §20). `calls` answers the newest call
//! records from disk; with `follow` the answer also carries a
//! `subscription_id`, and `call` notifications for every new record follow
//! until exactly one `call_end` (unless the client is gone).
//!
//! The feed is subscribed before the files are read, and the read says up
//! to which record it saw, so a follower gets every record exactly once.
//! A follower whose connection does not drain is dropped, not waited on
//! (as `events` subscribers are): at most [`QUEUE_LIMIT`] records wait for
//! it, then its stream ends `lagged`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use jsonrpsee::{MethodResponseFuture, ResponsePayload, RpcModule};
use serde_json::value::RawValue;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, oneshot, watch};
use xy_actors::LiveCall;
use xy_core::protocol::{
    CallEndNotification, CallEndReason, CallNotification, CallsCancelParams, CallsCancelResult,
    CallsParams, CallsResult, method,
};

use super::logs::notification;
use super::{DaemonCtx, conn, engine_error, parse};
use crate::transport::{Conn, StreamKind};

/// Records held for one follower while its connection has no room.
const QUEUE_LIMIT: usize = 1024;

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::CALLS, |params, ctx, ext| async move {
        let p: CallsParams = match parse(&params) {
            Ok(p) => p,
            Err(e) => return ResponsePayload::error(e),
        };
        let engine = match ctx.engine().await {
            Ok(e) => e,
            Err(e) => return ResponsePayload::error(e),
        };
        let names = match engine.call_servers(p.name.as_deref()).await {
            Ok(n) => n,
            Err(e) => return ResponsePayload::error(engine_error(&e)),
        };
        let conn = if p.follow {
            match conn(&ext) {
                Ok(c) => Some(c),
                Err(e) => return ResponsePayload::error(e),
            }
        } else {
            None
        };
        let calls = engine.calls().clone();
        let totals = names.iter().map(|n| (n.clone(), calls.total(n))).collect();
        // Subscribed first: nothing recorded while the files are read is missed.
        let live = p.follow.then(|| calls.subscribe());
        let limit = p.limit();
        // `limit: 0` (top's totals) reads no file.
        let read = match tokio::task::spawn_blocking(move || calls.read(&names, limit)).await {
            Ok(r) => r,
            Err(e) => {
                return ResponsePayload::error(super::to_error_object(
                    xy_core::protocol::RpcError::new(
                        xy_core::protocol::ErrorCode::InternalError,
                        format!("reading the call records failed: {e}"),
                    ),
                ));
            }
        };
        let (Some(conn), Some(live)) = (conn, live) else {
            return ResponsePayload::success(CallsResult {
                calls: read.calls,
                subscription_id: None,
                totals,
            });
        };
        let id = ctx.next_subscription_id();
        let cancel = conn.add_stream(id, StreamKind::Calls);
        let (payload, written) = ResponsePayload::success(CallsResult {
            calls: read.calls,
            subscription_id: Some(id),
            totals,
        })
        .notify_on_completion();
        let stream = Stream {
            id,
            conn,
            name: p.name,
            cutoff: read.cutoff,
            closing: ctx.closing.clone(),
        };
        tokio::spawn(stream.run(live, written, cancel));
        payload
    })
    .expect("method names are unique");

    m.register_async_method(method::CALLS_CANCEL, |params, _ctx, ext| async move {
        let p: CallsCancelParams = parse(&params)?;
        let conn = conn(&ext)?;
        // Only this connection's streams: another client's ids are unknown here.
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(CallsCancelResult {
            cancelled: conn.cancel_stream(p.subscription_id, StreamKind::Calls),
        })
    })
    .expect("method names are unique");
}

struct Stream {
    id: u64,
    conn: Arc<Conn>,
    /// Only this server's records.
    name: Option<String>,
    /// Per server, the last record the answer's read saw.
    cutoff: HashMap<String, u64>,
    closing: watch::Receiver<bool>,
}

impl Stream {
    async fn run(
        self,
        live: broadcast::Receiver<Arc<LiveCall>>,
        written: MethodResponseFuture,
        mut cancel: oneshot::Receiver<()>,
    ) {
        // Not sent (a notification, or the client left): no stream.
        if written.await.is_err() {
            self.conn.remove_stream(self.id);
            return;
        }
        let end = self.pump(live, &mut cancel).await;
        self.conn.remove_stream(self.id);
        if let Some(reason) = end {
            if reason == CallEndReason::Lagged {
                tracing::warn!(
                    subscription = self.id,
                    "calls follower fell behind and was dropped"
                );
            }
            let end = CallEndNotification {
                subscription_id: self.id,
                reason,
            };
            self.conn.send(notification(method::CALL_END, &end)).await;
        }
    }

    /// Whether a live record goes to this follower.
    fn wanted(&self, c: &LiveCall) -> bool {
        let server = &c.record.server;
        self.name.as_ref().is_none_or(|n| n == server)
            && self.cutoff.get(server).is_none_or(|&seen| c.seq > seen)
    }

    /// Forwards records until the stream ends; `None` when the client is gone.
    async fn pump(
        &self,
        mut live: broadcast::Receiver<Arc<LiveCall>>,
        cancel: &mut oneshot::Receiver<()>,
    ) -> Option<CallEndReason> {
        let mut queue: VecDeque<Box<RawValue>> = VecDeque::new();
        let mut closing = self.closing.clone();
        loop {
            tokio::select! {
                biased;
                _ = &mut *cancel => return Some(CallEndReason::Cancelled),
                () = self.conn.closed() => return None,
                () = crate::flag::until_set(&mut closing) => {
                    for line in queue.drain(..) {
                        if !self.conn.send(line).await {
                            return None;
                        }
                    }
                    return Some(CallEndReason::Shutdown);
                }
                permit = self.conn.reserve(), if !queue.is_empty() => match permit {
                    Some(p) => {
                        if let Some(line) = queue.pop_front() {
                            p.send(line.into());
                        }
                    }
                    None => return None,
                },
                item = live.recv() => match item {
                    Ok(c) => {
                        if self.wanted(&c) {
                            queue.push_back(notification(method::CALL, &CallNotification {
                                subscription_id: self.id,
                                call: c.record.clone(),
                            }));
                            if queue.len() > QUEUE_LIMIT {
                                return Some(CallEndReason::Lagged);
                            }
                        }
                    }
                    Err(RecvError::Lagged(_)) => return Some(CallEndReason::Lagged),
                    Err(RecvError::Closed) => return Some(CallEndReason::Shutdown),
                },
            }
        }
    }
}
