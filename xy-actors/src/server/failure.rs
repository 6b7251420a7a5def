//! The record of one server that could not be spawned is the wire type of
//! `-32006`'s data (`xy_core::protocol::SpawnFailure`): the engine fills it
//! with typed causes and the daemon's rpc layer sends it as is.

pub use xy_core::protocol::{SecretFailure, SpawnFailure};

impl crate::secrets::SecretError {
    /// The wire record of a failed lookup (never the value).
    pub(crate) fn to_failure(&self) -> SecretFailure {
        SecretFailure {
            name: self.name.clone(),
            kind: self.kind.to_owned(),
            source: self.source.clone(),
            reason: self.reason.clone(),
            exit_code: self.exit_code,
        }
    }
}
