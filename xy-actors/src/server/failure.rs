//! The record of one server that could not be spawned: which command, the
//! OS error, and the foreign port holder when that was the reason.

use crate::os::ports::PortHolder;

/// One server that could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// Server name.
    pub name: String,
    /// The command path tried.
    pub path: String,
    /// The OS error, as text (or who holds the port).
    pub error: String,
    /// The foreign process listening on the server's port, when that is
    /// why the start was refused.
    pub port_holder: Option<PortHolder>,
    /// The secret whose lookup failed, when that is why (SPEC §16).
    pub secret: Option<Box<SecretFailure>>,
}

/// A failed secret lookup: the secret, its source and what went wrong —
/// never its value nor anything the lookup printed.
pub use crate::secrets::SecretError as SecretFailure;

impl SpawnFailure {
    /// `name: path: error`, the path next to the error it caused; a port
    /// holder's sentence stands alone (the command is not at fault).
    pub(crate) fn describe(&self) -> String {
        if self.port_holder.is_some() || self.secret.is_some() {
            format!("{}: {}", self.name, self.error)
        } else {
            format!("{}: {}: {}", self.name, self.path, self.error)
        }
    }
}
