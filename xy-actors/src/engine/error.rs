//! Why an engine operation failed, and its one mapping to a JSON-RPC error.

use xy_core::protocol::{ErrorCode, RpcError};

use crate::server::failure::SpawnFailure;

/// Why an engine operation failed. Maps to a JSON-RPC error in one place.
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
    /// An actor did not answer in time or is gone (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<&EngineError> for RpcError {
    fn from(e: &EngineError) -> RpcError {
        match e {
            EngineError::ServerNotFound(names) => {
                RpcError::new(ErrorCode::ServerNotFound, e.to_string()).with_data(serde_json::json!({ "names": names }))
            }
            EngineError::SpawnFailed {
                failures,
                started,
                already_running,
            } => RpcError::new(ErrorCode::SpawnFailed, e.to_string()).with_data(serde_json::json!({
                "failures": failures
                    .iter()
                    .map(|f| {
                        let mut v = serde_json::json!({ "name": f.name, "path": f.path, "error": f.error });
                        if let Some(s) = &f.secret {
                            v["secret"] = serde_json::json!({
                                "name": s.name, "kind": s.kind, "source": s.source,
                                "reason": s.reason, "exit_code": s.exit_code,
                            });
                        }
                        if let Some(h) = &f.port_holder {
                            v["port_holder"] = serde_json::json!({
                                "port": h.port, "pid": h.pid, "command": h.command, "uid": h.uid,
                            });
                        }
                        v
                    })
                    .collect::<Vec<_>>(),
                "started": started,
                "already_running": already_running,
            })),
            EngineError::Internal(_) => RpcError::new(ErrorCode::InternalError, e.to_string()),
        }
    }
}

pub(crate) fn internal(what: &str, err: impl std::fmt::Display) -> EngineError {
    EngineError::Internal(format!("{what}: {err}"))
}
