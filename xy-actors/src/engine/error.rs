//! Why an engine operation failed, as typed data; the daemon's rpc layer
//! maps it to a JSON-RPC error (`xy-daemon/src/rpc/error.rs`).

use crate::server::failure::SpawnFailure;

/// Why an engine operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// Names that are not configured.
    #[error("no such server: {}", .0.join(", "))]
    ServerNotFound(Vec<String>),
    /// At least one spawn failed; the rest of the outcome is kept.
    #[error("could not start {}", .failures.iter().map(SpawnFailure::describe).collect::<Vec<_>>().join("; "))]
    SpawnFailed {
        /// Every failed spawn.
        failures: Vec<SpawnFailure>,
        /// What did start.
        started: Vec<String>,
        /// What was already running.
        already_running: Vec<String>,
    },
    /// A reload failed partway. What it applied before the failure is in
    /// effect (and in the ConfigActor); the rest is not.
    #[error(
        "reload stopped partway ({error}); applied: {}",
        describe_applied(applied)
    )]
    ReloadIncomplete {
        /// The steps that were applied (`unchanged`: checked and left alone).
        applied: xy_core::protocol::ReloadResult,
        /// The failure that stopped it.
        error: Box<EngineError>,
    },
    /// `tools_approve`/`tools_deny` named tools the server does not list.
    #[error("server {server} lists no tool or prompt named {}", .names.join(", "))]
    UnknownTools {
        /// The server.
        server: String,
        /// The names it does not list.
        names: Vec<String>,
    },
    /// `tools_approve {expect}`: items not listed as the caller showed
    /// them; nothing was approved (SPEC §28).
    #[error(
        "{server}: {} changed since shown; nothing was approved: review again",
        .changed.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    )]
    DigestChanged {
        /// The server.
        server: String,
        /// Each item with the digest shown and the digests listed now.
        changed: Vec<xy_core::protocol::mcp::ChangedItem>,
    },
    /// An actor did not answer in time or is gone (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

pub(crate) fn internal(what: &str, err: impl std::fmt::Display) -> EngineError {
    EngineError::Internal(format!("{what}: {err}"))
}

fn describe_applied(r: &xy_core::protocol::ReloadResult) -> String {
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &r.added),
        ("removed", &r.removed),
        ("changed", &r.changed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join("; ")
    }
}
