//! xy's own listing of a server (SPEC §20), whoever made it (the stdio
//! bridge, an HTTP server's listing task, the `mcp` probe) and whoever
//! decides on it (the ServerActor's firewall): the pages as listed, and
//! the bounds every lister keeps.

use serde_json::Value;
use xy_core::firewall::Kind;

/// Pages followed per list at most.
pub(crate) const MAX_PAGES: usize = 100;
/// Items kept per list at most.
pub(crate) const MAX_ITEMS: usize = 10_000;

/// xy's own listing of a child (SPEC §20): every page of `tools/list`, and
/// of `prompts/list` when the child has prompts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    pub(crate) tools: Vec<Value>,
    /// `None`: the child has no prompts capability (or listing them failed).
    pub(crate) prompts: Option<Vec<Value>>,
    pub(crate) protocol_version: String,
    pub(crate) server_name: Option<String>,
    pub(crate) server_version: Option<String>,
    /// Each tool's JSON text as the child wrote it (aligned with `tools`;
    /// empty where unknown).
    pub(crate) raw_tools: Vec<Box<str>>,
    /// Likewise for `prompts`.
    pub(crate) raw_prompts: Vec<Box<str>>,
    /// Each answer page as the child wrote it, and where its id is.
    pub(crate) pages: Vec<(Kind, Box<[u8]>, std::ops::Range<usize>)>,
    /// The child's answer to xy's handshake, kept in the ledger to answer
    /// for the server while it does not run (SPEC §26); `None` where the
    /// lister has none (an HTTP server's probe session).
    pub(crate) handshake: Option<Handshake>,
}

/// What a child answered xy's handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handshake {
    /// Its `initialize` result (a 2025-era child).
    pub(crate) init: Option<Value>,
    /// Its `server/discover` result (a 2026-only child).
    pub(crate) discover: Option<Value>,
    /// Every version it said it supports.
    pub(crate) versions: Vec<String>,
}

/// Whether a capabilities object offers `what` (`tools`, `prompts`).
pub(crate) fn offers(capabilities: Option<&Value>, what: &str) -> bool {
    capabilities
        .and_then(|c| c.get(what))
        .is_some_and(|v| !v.is_null())
}
