//! xy's own listing of a server (SPEC §20, §27), whoever made it (the
//! stdio bridge, an HTTP server's listing task, the `mcp` probe) and
//! whoever decides on it (the ServerActor's firewall) or answers from it
//! (the ledger, SPEC §26): the pages as listed, and the bounds every
//! lister keeps.

use serde_json::Value;
use xy_core::firewall::Kind;

/// Pages followed per list at most.
pub(crate) const MAX_PAGES: usize = 100;
/// Items kept per list at most.
pub(crate) const MAX_ITEMS: usize = 10_000;

/// xy's own listing of a child (SPEC §20, §27): every page of
/// `tools/list`; of `prompts/list` when the child has prompts; of
/// `resources/list` and `resources/templates/list` when it has resources;
/// of `skills/list` when it declares the skills extension (SEP-2640).
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
    /// `resources/list`'s items; `None`: the child has no resources
    /// capability (or listing them failed).
    pub(crate) resources: Option<Vec<Value>>,
    /// `resources/templates/list`'s items; `None` as for `resources`, or
    /// the child does not serve templates.
    pub(crate) resource_templates: Option<Vec<Value>>,
    /// `skills/list`'s skill entries (SEP-2640); `None`: the child does not
    /// declare the skills extension (or listing them failed).
    pub(crate) skills: Option<Vec<Value>>,
    /// The `resources/read` answers (result or error) of the resources the
    /// firewall pins ([`super::pinned::uris`]), by URI, read at listing time.
    pub(crate) reads: Vec<(String, Value)>,
    /// Their pinned objects ([`super::pinned::items`]), made by the
    /// ServerActor from `reads` when it takes the listing.
    pub(crate) pinned: Vec<Value>,
    /// The child's answer to xy's handshake, kept in the ledger to answer
    /// for the server while it does not run (SPEC §26); `None` where the
    /// lister has none (an HTTP server's probe session).
    pub(crate) handshake: Option<Box<Handshake>>,
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

/// Whether a capabilities object declares the skills extension.
pub(crate) fn offers_skills(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(xy_core::protocol::mcp::SKILLS_EXTENSION))
        .is_some_and(|v| !v.is_null())
}

/// Whether a capabilities object offers `what` (`tools`, `prompts`,
/// `resources`).
pub(crate) fn offers(capabilities: Option<&Value>, what: &str) -> bool {
    capabilities
        .and_then(|c| c.get(what))
        .is_some_and(|v| !v.is_null())
}
