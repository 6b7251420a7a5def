//! What xy knows of a `tools/call` while it is in flight, and how
//! it ends up a call record (SPEC §20): the tool, the client, when it
//! arrived. The client is the `clientInfo` of the 2025 session's
//! `initialize`, or of a 2026 request's `_meta`, else the `User-Agent`
//! header, else unknown. Argument values are never read here.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use tokio::time::Instant;
use xy_core::protocol::mcp::CallOutcome;
use xy_core::protocol::mcp::wire::META_CLIENT_INFO;

use crate::calls::Calls;

/// One `tools/call` in flight.
#[derive(Debug)]
pub(crate) struct CallStart {
    pub(crate) tool: String,
    pub(crate) client: Option<Arc<str>>,
    /// When it arrived at xy (the record's time).
    pub(crate) at: SystemTime,
    /// The same moment on the monotonic clock (its duration).
    pub(crate) arrived: Instant,
}

/// Where one bridge records its calls.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    pub(crate) calls: Calls,
    pub(crate) server: Arc<str>,
}

impl Recorder {
    /// The call ended now, this way.
    pub(crate) fn finish(&self, call: &CallStart, outcome: CallOutcome) {
        self.calls.record_call(
            &self.server,
            call.at,
            call.client.as_deref(),
            &call.tool,
            call.arrived.elapsed(),
            outcome,
        );
    }
}

/// `name version` (or `name`) of a `clientInfo` object.
pub(crate) fn client_name(info: Option<&Value>) -> Option<Arc<str>> {
    let info = info?;
    let name = info.get("name").and_then(Value::as_str)?;
    let name = match info.get("version").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => format!("{name} {v}"),
        _ => name.to_owned(),
    };
    Some(name.into())
}

/// The client a 2026 request names in its `_meta`.
pub(crate) fn meta_client(msg: &Value) -> Option<Arc<str>> {
    client_name(
        msg.get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_CLIENT_INFO)),
    )
}

/// The tool a parsed `tools/call` names.
pub(crate) fn tool_of(msg: &Value) -> Option<&str> {
    msg.get("params")?.get("name")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_is_named_with_its_version() {
        assert_eq!(
            client_name(Some(&json!({"name": "claude-code", "version": "1.2.3"}))).as_deref(),
            Some("claude-code 1.2.3")
        );
        assert_eq!(
            client_name(Some(&json!({"name": "x"}))).as_deref(),
            Some("x")
        );
        assert_eq!(client_name(Some(&json!({"version": "1"}))), None);
        let m = json!({"params": {"name": "echo", "_meta": {META_CLIENT_INFO: {"name": "n", "version": "2"}}}});
        assert_eq!(meta_client(&m).as_deref(), Some("n 2"));
        assert_eq!(tool_of(&m), Some("echo"));
    }
}
