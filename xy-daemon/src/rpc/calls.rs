//! `calls` and `calls_cancel` (SPEC §20). `calls` answers the newest call
//! records from disk; with `follow` the answer also carries a
//! `subscription_id`, and `call` notifications for every new record follow
//! until exactly one `call_end` (unless the client is gone). The stream is
//! [`follow`]'s; this file says where the records come from,
//! which ones a follower gets, and how one is written.
//!
//! The feed is subscribed before the files are read, and the read says up
//! to which record it saw, so a follower gets every record exactly once.
//! A follower whose connection does not drain is dropped, not waited on
//! (as `events` subscribers are): at most [`QUEUE_LIMIT`] records wait for
//! it, then its stream ends `lagged`.

use std::collections::HashMap;
use std::sync::Arc;

use jsonrpsee::{ResponsePayload, RpcModule};
use serde_json::value::RawValue;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use xy_actors::LiveCall;
use xy_core::protocol::{
    CallEndNotification, CallEndReason, CallNotification, CallsParams, CallsResult, method,
};

use super::follow::{self, End, Feed, notification};
use super::{DaemonCtx, conn, engine_error, parse};
use crate::transport::StreamKind;

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
        let feed = Records {
            live,
            name: p.name,
            cutoff: read.cutoff,
        };
        follow::start(&ctx, conn, StreamKind::Calls, feed, |id| CallsResult {
            calls: read.calls,
            subscription_id: Some(id),
            totals,
        })
    })
    .expect("method names are unique");

    follow::register_cancel(m, method::CALLS_CANCEL, StreamKind::Calls);
}

/// One `calls` stream's source: the recorder's live feed, subscribed
/// before the answer's read.
struct Records {
    live: broadcast::Receiver<Arc<LiveCall>>,
    /// Only this server's records.
    name: Option<String>,
    /// Per server, the last record the answer's read saw.
    cutoff: HashMap<String, u64>,
}

impl Feed for Records {
    type Item = Arc<LiveCall>;

    const QUEUE_LIMIT: Option<usize> = Some(QUEUE_LIMIT);
    const LAGGED_WARNING: &'static str = "calls follower fell behind and was dropped";

    async fn next(&mut self) -> Result<Arc<LiveCall>, End> {
        match self.live.recv().await {
            Ok(c) => Ok(c),
            Err(RecvError::Lagged(_)) => Err(CallEndReason::Lagged),
            Err(RecvError::Closed) => Err(CallEndReason::Shutdown),
        }
    }

    /// A record of this follower's server that the answer's read did not
    /// already carry.
    fn wanted(&self, c: &Arc<LiveCall>) -> bool {
        let server = &c.record.server;
        self.name.as_ref().is_none_or(|n| n == server)
            && self.cutoff.get(server).is_none_or(|&seen| c.seq > seen)
    }

    fn notification(id: u64, c: Arc<LiveCall>) -> Box<RawValue> {
        notification(
            method::CALL,
            &CallNotification {
                subscription_id: id,
                call: c.record.clone(),
            },
        )
    }

    fn end_notification(id: u64, reason: End) -> Box<RawValue> {
        let end = CallEndNotification {
            subscription_id: id,
            reason,
        };
        notification(method::CALL_END, &end)
    }
}
