//! How a server is reached (SPEC §13): the `transport` of `list`/`status`
//! entries and of the config, and the endpoint URL every entry carries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The endpoint path when a config gives none.
pub const DEFAULT_MCP_PATH: &str = "/mcp";

/// How the child speaks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The child serves streamable HTTP on `port` itself.
    #[default]
    Http,
    /// The child speaks MCP on stdin/stdout; xy serves it over HTTP on `port`.
    Stdio,
    /// No process: a `url "https://…"` server (SPEC §23) that xy serves on
    /// `port` and the gateway by forwarding to its URL.
    Remote,
}

impl Transport {
    /// The KDL and wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
            Transport::Remote => "remote",
        }
    }

    /// Parses the KDL spelling.
    pub fn from_name(s: &str) -> Option<Transport> {
        match s {
            "http" => Some(Transport::Http),
            "stdio" => Some(Transport::Stdio),
            "remote" => Some(Transport::Remote),
            _ => None,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The endpoint URL of a server: `http://127.0.0.1:<port><path>`.
pub fn endpoint_url(port: u16, path: &str) -> String {
    format!("http://127.0.0.1:{port}{path}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::{Health, ListEntry, ServerState};

    #[test]
    fn transport_spelling() {
        for (t, w) in [
            (Transport::Http, "http"),
            (Transport::Stdio, "stdio"),
            (Transport::Remote, "remote"),
        ] {
            assert_eq!(serde_json::to_value(t).unwrap(), json!(w));
            assert_eq!(serde_json::from_value::<Transport>(json!(w)).unwrap(), t);
            assert_eq!(Transport::from_name(w), Some(t));
            assert_eq!(t.to_string(), w);
        }
        assert_eq!(Transport::from_name("sse"), None);
    }

    #[test]
    fn idle_stdio_entry_shape() {
        let e = ListEntry {
            name: "fs".into(),
            state: ServerState::Idle,
            pid: None,
            port: 8430,
            transport: Transport::Stdio,
            url: endpoint_url(8430, "/mcp"),
            uptime_secs: None,
            restart_count: 0,
            last_exit: None,
            health: Health::default(),
            cpu_percent: None,
            rss_bytes: None,
            tool_count: None,
            tools_held: 0,
            agent_allow_restart: false,
            remote_url: None,
            gateway_url: None,
        };
        let want = json!({
            "name": "fs", "state": "idle", "pid": null, "port": 8430,
            "transport": "stdio", "url": "http://127.0.0.1:8430/mcp",
            "uptime_secs": null, "restart_count": 0, "last_exit": null,
            "health": {"state": "unknown", "latency_ms": null, "error": null, "checked_at": null},
            "cpu_percent": null, "rss_bytes": null, "tool_count": null, "tools_held": 0, "agent_allow_restart": false, "remote_url": null,
            "gateway_url": null
        });
        assert_eq!(serde_json::to_value(&e).unwrap(), want);
        assert_eq!(serde_json::from_value::<ListEntry>(want).unwrap(), e);
    }

    #[test]
    fn entry_from_an_older_daemon_defaults_to_http() {
        let old = json!({
            "name": "a", "state": "stopped", "pid": null, "port": 1,
            "uptime_secs": null, "restart_count": 0, "last_exit": null
        });
        let e: ListEntry = serde_json::from_value(old).unwrap();
        assert_eq!(e.transport, Transport::Http);
    }
}
