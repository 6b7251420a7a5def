//! `logs` and `logs_cancel`. `logs` replies `{subscription_id}` first (the
//! stream task waits for the reply to be queued), then writes `log`
//! notifications for the backlog and, when following, live lines, and ends
//! every stream with exactly one `log_end` (unless the client is gone).

use std::sync::Arc;

use jsonrpsee::types::Notification;
use jsonrpsee::{MethodResponseFuture, ResponsePayload, RpcModule};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};
use xy_actors::{LogEvent, LogLine, LogSubscription};
use xy_core::protocol::{
    LogEndNotification, LogEndReason, LogNotification, LogsCancelParams, LogsCancelResult,
    LogsParams, LogsResult, method,
};

use super::{DaemonCtx, conn, engine_error, no_empty_names, parse};
use crate::transport::{Conn, StreamKind};

pub(super) fn register(m: &mut RpcModule<DaemonCtx>) {
    m.register_async_method(method::LOGS, |params, ctx, ext| async move {
        let p: LogsParams = match parse(&params) {
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
        let tail = p.tail.map(|t| usize::try_from(t).unwrap_or(usize::MAX));
        let engine = match ctx.engine().await {
            Ok(e) => e,
            Err(e) => return ResponsePayload::error(e),
        };
        let sub = match engine
            .subscribe_logs(&p.requested_names(), tail, p.follow)
            .await
        {
            Ok(s) => s,
            Err(e) => return ResponsePayload::error(engine_error(&e)),
        };
        let id = ctx.next_subscription_id();
        let cancel = conn.add_stream(id, StreamKind::Logs);
        let (payload, written) = ResponsePayload::success(LogsResult {
            subscription_id: id,
        })
        .notify_on_completion();
        let stream = Stream {
            id,
            conn,
            follow: p.follow,
            shutdown: ctx.shutdown.subscribe(),
            closing: ctx.closing.clone(),
        };
        tokio::spawn(stream.run(sub, written, cancel));
        payload
    })
    .expect("method names are unique");

    m.register_async_method(method::LOGS_CANCEL, |params, _ctx, ext| async move {
        let p: LogsCancelParams = parse(&params)?;
        let conn = conn(&ext)?;
        // Only this connection's streams: another client's ids are unknown here.
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(LogsCancelResult {
            cancelled: conn.cancel_stream(p.subscription_id, StreamKind::Logs),
        })
    })
    .expect("method names are unique");
}

struct Stream {
    id: u64,
    conn: Arc<Conn>,
    follow: bool,
    shutdown: watch::Receiver<bool>,
    closing: watch::Receiver<bool>,
}

impl Stream {
    async fn run(
        mut self,
        mut sub: LogSubscription,
        written: MethodResponseFuture,
        mut cancel: oneshot::Receiver<()>,
    ) {
        // Not sent (a notification, or the client left): no stream.
        if written.await.is_err() {
            self.conn.remove_stream(self.id);
            return;
        }
        let end = self.pump(&mut sub, &mut cancel).await;
        self.conn.remove_stream(self.id);
        drop(sub);
        if end == Some(LogEndReason::Lagged) {
            // A dropped follower freed up to 4 MiB of lines allocated among
            // the ring's: give the pages back now, not at the next trim.
            crate::heap::trim();
        }
        if let Some(reason) = end {
            let end = LogEndNotification {
                subscription_id: self.id,
                reason: Some(reason),
            };
            self.conn.send(notification(method::LOG_END, &end)).await;
        }
    }

    /// Sends lines until the stream ends; `None` when the client is gone.
    async fn pump(
        &mut self,
        sub: &mut LogSubscription,
        cancel: &mut oneshot::Receiver<()>,
    ) -> Option<LogEndReason> {
        for line in std::mem::take(&mut sub.backlog) {
            if cancelled(cancel) {
                return Some(LogEndReason::Cancelled);
            }
            if !self.conn.send(self.line(line)).await {
                return None;
            }
        }
        if !self.follow {
            return Some(LogEndReason::Complete);
        }
        let mut closing = self.closing.clone();
        loop {
            tokio::select! {
                _ = &mut *cancel => return Some(LogEndReason::Cancelled),
                () = crate::flag::until_set(&mut closing) => return Some(LogEndReason::Shutdown),
                () = self.conn.closed() => return None,
                ev = sub.recv() => match ev {
                    Some(LogEvent::Line(line)) => {
                        if !self.conn.send(self.line(line)).await {
                            return None;
                        }
                    }
                    Some(LogEvent::Lagged) => {
                        tracing::warn!(subscription = self.id, "log follower fell behind and was dropped");
                        return Some(LogEndReason::Lagged);
                    }
                    // Sources end when the daemon stops every server, or when
                    // reload removed the followed servers.
                    None => return Some(self.sources_ended()),
                },
            }
        }
    }

    fn sources_ended(&self) -> LogEndReason {
        if *self.shutdown.borrow() {
            LogEndReason::Shutdown
        } else {
            LogEndReason::Removed
        }
    }

    fn line(&self, line: LogLine) -> Box<RawValue> {
        let n = LogNotification {
            subscription_id: self.id,
            name: line.name.to_string(),
            stream: line.stream,
            line: line.line,
            ts: xy_core::time::rfc3339_ms(line.ts),
        };
        notification(method::LOG, &n)
    }
}

fn cancelled(cancel: &mut oneshot::Receiver<()>) -> bool {
    !matches!(cancel.try_recv(), Err(oneshot::error::TryRecvError::Empty))
}

pub(super) fn notification<T: Serialize>(method: &'static str, params: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(&Notification::new(method.into(), params))
        .expect("notification params serialize")
}
