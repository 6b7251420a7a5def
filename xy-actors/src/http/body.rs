//! The body of an HTTP exchange as every wing sees it: the boxed body type
//! the gateway, a remote's upstream and a server's own port pass around,
//! the size a body may have, the MCP header names, and a response read
//! whole (a probe's, a remote's answer to one request).

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::header::{HeaderMap, HeaderName};

/// The error a boxed body may end with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A streamed request or response body (the gateway's, a remote's).
pub(crate) type HttpBody = UnsyncBoxBody<Bytes, BoxError>;

/// Largest JSON-RPC message body xy reads or forwards (a request, a child
/// line, a probe's answer).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// `Mcp-Session-Id` (2025 sessions).
pub(crate) static SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub(crate) static PROTOCOL: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method` (2026 requests).
pub(crate) static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name` (2026 requests that name a tool, prompt or resource).
pub(crate) static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// A response: status, headers and the body read.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive), if it is text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}
