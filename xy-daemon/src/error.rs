//! Why `xyd` could not boot or had to stop, and the exit code each reason
//! maps to (0 clean, 1 operational, 3 invalid config).

use std::path::PathBuf;

use xy_core::config::ConfigErrors;
use xy_core::paths::PathError;

/// A fatal daemon error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Paths could not be resolved, or the socket path is too long.
    #[error(transparent)]
    Paths(#[from] PathError),
    /// Another `xyd` holds the lock.
    #[error("xyd already running (pid {})", .pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()))]
    AlreadyRunning {
        /// The holder's pid, if it wrote one yet.
        pid: Option<u32>,
    },
    /// A file-system operation failed.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// What we tried.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Something answers on the socket although we hold the lock: a daemon
    /// with another state directory uses the same `XY_SOCKET`.
    #[error("socket {} is in use by another process (a daemon with another state directory?)", .0.display())]
    SocketInUse(PathBuf),
    /// The socket path exists and is not a socket; we do not delete it.
    #[error("{} exists and is not a socket; remove it or set XY_SOCKET", .0.display())]
    NotASocket(PathBuf),
    /// The config directory is invalid.
    #[error("config invalid: {}", errors_count(.0.diagnostics.len()))]
    Config(ConfigErrors),
    /// The engine failed to start or shut down.
    #[error("engine: {0}")]
    Engine(#[from] xy_actors::EngineError),
}

impl DaemonError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            DaemonError::Config(_) => 3,
            _ => 1,
        }
    }
}

/// "1 error", "2 errors": the count for the config-invalid messages.
pub(crate) fn errors_count(n: usize) -> String {
    format!("{n} error{}", if n == 1 { "" } else { "s" })
}
