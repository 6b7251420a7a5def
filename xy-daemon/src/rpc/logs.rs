//! `logs` and `logs_cancel`. `logs` replies `{subscription_id}` first, then
//! writes `log` notifications for the backlog and, when following, live
//! lines, and ends every stream with exactly one `log_end` (unless the
//! client is gone). The stream is [`follow`]'s; this file
//! says where the lines come from and how one is written.
//!
//! The log router bounds each follower itself (it reports `lagged`), so the
//! stream keeps no queue of its own: it waits for room for every line.

use jsonrpsee::{ResponsePayload, RpcModule};
use serde_json::value::RawValue;
use tokio::sync::watch;
use xy_actors::{LogEvent, LogLine, LogSubscription};
use xy_core::protocol::{
    LogEndNotification, LogEndReason, LogNotification, LogsParams, LogsResult, method,
};

use super::follow::{self, End, Feed, notification};
use super::{DaemonCtx, conn, engine_error, no_empty_names, parse};
use crate::transport::StreamKind;

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
        let feed = Lines {
            sub,
            follow: p.follow,
            shutdown: ctx.shutdown.subscribe(),
        };
        follow::start(&ctx, conn, StreamKind::Logs, feed, |id| LogsResult {
            subscription_id: id,
        })
    })
    .expect("method names are unique");

    follow::register_cancel(m, method::LOGS_CANCEL, StreamKind::Logs);
}

/// One `logs` stream's source: the router's backlog, then its live lines.
struct Lines {
    sub: LogSubscription,
    follow: bool,
    shutdown: watch::Receiver<bool>,
}

impl Feed for Lines {
    type Item = LogLine;

    const QUEUE_LIMIT: Option<usize> = None;
    const LAGGED_WARNING: &'static str = "log follower fell behind and was dropped";

    fn backlog(&mut self) -> Vec<LogLine> {
        std::mem::take(&mut self.sub.backlog)
    }

    fn after_backlog(&self) -> Option<End> {
        (!self.follow).then_some(LogEndReason::Complete)
    }

    async fn next(&mut self) -> Result<LogLine, End> {
        match self.sub.recv().await {
            Some(LogEvent::Line(line)) => Ok(line),
            Some(LogEvent::Lagged) => Err(LogEndReason::Lagged),
            // Sources end when the daemon stops every server, or when
            // reload removed the followed servers.
            None if *self.shutdown.borrow() => Err(LogEndReason::Shutdown),
            None => Err(LogEndReason::Removed),
        }
    }

    fn notification(id: u64, line: LogLine) -> Box<RawValue> {
        let n = LogNotification {
            subscription_id: id,
            name: line.name.to_string(),
            stream: line.stream,
            line: line.line,
            ts: xy_core::time::rfc3339_ms(line.ts),
        };
        notification(method::LOG, &n)
    }

    fn end_notification(id: u64, reason: End) -> Box<RawValue> {
        let end = LogEndNotification {
            subscription_id: id,
            reason: Some(reason),
        };
        notification(method::LOG_END, &end)
    }

    fn dropped(end: Option<End>) {
        if end == Some(LogEndReason::Lagged) {
            // A dropped follower freed up to 4 MiB of lines allocated among
            // the ring's: give the pages back now, not at the next trim.
            crate::heap::trim();
        }
    }
}
