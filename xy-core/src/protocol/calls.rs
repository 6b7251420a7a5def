//! The `calls` method (SPEC §20): the last call records of one server or
//! of all, and with `follow` a stream of `call` notifications ending with
//! one `call_end`, shaped like `events`.

use serde::{Deserialize, Serialize};

use super::mcp::CallRecord;
use super::{LogEndReason, LogsCancelParams, LogsCancelResult};

/// Records returned without a `limit`.
pub const CALLS_DEFAULT_LIMIT: u32 = 100;
/// Records returned at most (a larger `limit` is taken as this).
pub const CALLS_MAX_LIMIT: u32 = 10_000;

/// Params of `calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallsParams {
    /// Only this server; absent means every server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The newest this many records ([`CALLS_DEFAULT_LIMIT`] if absent, at
    /// most [`CALLS_MAX_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Then stream new records as `call` notifications.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow: bool,
}

impl CallsParams {
    /// The number of records asked for, bounded.
    pub fn limit(&self) -> usize {
        self.limit
            .unwrap_or(CALLS_DEFAULT_LIMIT)
            .min(CALLS_MAX_LIMIT) as usize
    }
}

/// Result of `calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallsResult {
    /// Records, oldest first (by arrival).
    pub calls: Vec<CallRecord>,
    /// With `follow`: the stream's id (`call` notifications follow, and
    /// `calls_cancel` takes it); `null` without.
    #[serde(default)]
    pub subscription_id: Option<u64>,
    /// Per server asked for: calls recorded since the daemon started
    /// (`xyctl top`'s CALLS column; `limit: 0` asks for these alone).
    #[serde(default)]
    pub totals: std::collections::BTreeMap<String, u64>,
}

/// Params of `calls_cancel`: `{subscription_id}`.
pub type CallsCancelParams = LogsCancelParams;

/// Result of `calls_cancel`: `{cancelled}`.
pub type CallsCancelResult = LogsCancelResult;

/// Params of the `call` notification: one new record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallNotification {
    /// The stream it belongs to.
    pub subscription_id: u64,
    /// The record.
    pub call: CallRecord,
}

/// Why a calls stream ended: `cancelled`, `lagged` (a follower that fell
/// behind is dropped) or `shutdown`.
pub type CallEndReason = LogEndReason;

/// Params of the `call_end` notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEndNotification {
    /// The stream that ended.
    pub subscription_id: u64,
    /// Why.
    pub reason: CallEndReason,
}
