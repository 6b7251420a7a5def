//! What a server said about itself over MCP, as the `mcp` probe reports it
//! to the ServerActor (its era, version, name and capabilities; its tools
//! are xy's own listing's, D155).

use serde_json::Value;
use xy_core::protocol::mcp::McpEra;

/// What the server said about itself on the last successful probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpInfo {
    pub(crate) era: McpEra,
    pub(crate) protocol_version: String,
    pub(crate) server_name: Option<String>,
    pub(crate) server_version: Option<String>,
    /// The server's `capabilities` (xy's own listing asks for prompts only
    /// when they are offered).
    pub(crate) capabilities: Option<Value>,
}

/// What a successful `mcp` probe learned (its tools come from xy's own
/// listing, not from the probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpReport {
    /// The server's era, protocol version, name and version.
    pub(crate) info: McpInfo,
}
