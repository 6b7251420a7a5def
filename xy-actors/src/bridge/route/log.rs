//! Which of the child's log messages reach a request's client (SEP-2577).

use serde_json::Value;

/// Which log messages (`notifications/message`) sent during a request
/// reach its client, on the request's own stream (2026-07-28, SEP-2577:
/// a 2026 client opts in per request with `_meta`'s `logLevel`; a 2025
/// client set its level with `logging/setLevel`, which the child applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Log {
    /// A 2025 client: every message the child sends.
    #[default]
    Session,
    /// A 2026 client that did not opt in: none.
    Off,
    /// A 2026 client: those at this severity (RFC 5424 rank) or above.
    AtLeast(u8),
}

impl Log {
    /// A 2026 request's opt-in, from its `_meta`.
    pub(crate) fn of_2026(meta: Option<&Value>) -> Log {
        meta.and_then(|m| m.get("io.modelcontextprotocol/logLevel"))
            .and_then(Value::as_str)
            .and_then(severity)
            .map_or(Log::Off, Log::AtLeast)
    }

    pub(super) fn passes(self, level: Option<&str>) -> bool {
        match self {
            Log::Session => true,
            Log::Off => false,
            Log::AtLeast(n) => level.and_then(severity).is_some_and(|l| l >= n),
        }
    }
}

/// An MCP logging level's rank, `debug` lowest.
fn severity(level: &str) -> Option<u8> {
    const LEVELS: [&str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    LEVELS.iter().position(|l| *l == level).map(|n| n as u8)
}
