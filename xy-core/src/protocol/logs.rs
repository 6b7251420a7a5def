//! `logs` and `logs_cancel` (SPEC §6): the params, the `log` and `log_end`
//! notifications of a followed stream, and the cancel request that
//! `events` and `calls` reuse.

use serde::{Deserialize, Serialize};

use super::requested_names;

/// Params of `logs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    /// One server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Several servers; with neither `name` nor `names`, every server. An
    /// empty list is refused (`-32602`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// How many buffered lines to send first (per server); absent: all buffered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<u32>,
    /// Keep streaming new lines until cancelled or disconnected.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow: bool,
}

impl LogsParams {
    /// The explicit names asked for; empty means every server.
    pub fn requested_names(&self) -> Vec<String> {
        requested_names(self.name.as_ref(), self.names.as_deref())
    }
}

/// Result of `logs`; the stream follows as notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogsResult {
    /// Identifies this stream in `log`, `log_end` and `logs_cancel`.
    pub subscription_id: u64,
}

/// Which stream of the child a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    /// The child's stdout (`[out]` in the log file).
    Stdout,
    /// The child's stderr (`[err]` in the log file).
    Stderr,
}

impl LogStream {
    /// The tag used in log files: `out` / `err`.
    pub const fn tag(self) -> &'static str {
        match self {
            LogStream::Stdout => "out",
            LogStream::Stderr => "err",
        }
    }
}

/// Params of the `log` notification: one captured line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogNotification {
    /// The stream this line belongs to.
    pub subscription_id: u64,
    /// Server that printed it.
    pub name: String,
    /// stdout or stderr.
    pub stream: LogStream,
    /// The line, without its newline (lossy UTF-8).
    pub line: String,
    /// When it was captured (RFC 3339 UTC, ms).
    pub ts: String,
}

/// Why a log stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogEndReason {
    /// Non-follow stream: the buffered tail has been sent.
    Complete,
    /// `logs_cancel` was called.
    Cancelled,
    /// The follower fell too far behind and was dropped.
    Lagged,
    /// The daemon is shutting down.
    Shutdown,
    /// The followed server(s) were removed by `reload`.
    Removed,
}

/// Params of the `log_end` notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEndNotification {
    /// The stream that ended.
    pub subscription_id: u64,
    /// Why; absent only for a plain end of a non-follow tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<LogEndReason>,
}

/// Params of `logs_cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsCancelParams {
    /// The stream to end.
    pub subscription_id: u64,
}

/// Result of `logs_cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogsCancelResult {
    /// False for an unknown or already finished subscription.
    pub cancelled: bool,
}
