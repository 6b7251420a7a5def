//! What starting a process means to the OS: resolving the command as the
//! child will see it, and why a spawn failed (the path tried, the OS error
//! and its kind). Shared by the real spawner, the sandbox and the sandbox
//! test.

use std::ffi::OsString;
use std::path::PathBuf;

use xy_core::config::ServerConfig;
use xy_core::protocol::SpawnErrorKind;

/// Why a spawn failed: the path tried, the OS error and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpawnError {
    pub(crate) path: String,
    pub(crate) error: String,
    pub(crate) kind: SpawnErrorKind,
}

/// Resolves `command` as the child will see it: a bare name on the env
/// block's PATH if it sets one (else the daemon's), a relative path against
/// the working directory. The error carries the path tried and the reason.
pub(crate) fn resolve(config: &ServerConfig) -> Result<PathBuf, SpawnError> {
    let path_var: Option<OsString> = config.env.get("PATH").map(OsString::from);
    xy_core::config::resolve_command_in(
        &config.command,
        path_var.as_deref(),
        config.working_dir.as_deref(),
    )
    .map_err(|e| {
        // Reported as the OS error exec would have given, like other spawn errors.
        let (path, errno, kind) = match &e {
            xy_core::config::CommandLookupError::NotExecutable(p) => (
                p.display().to_string(),
                libc::EACCES,
                SpawnErrorKind::PermissionDenied,
            ),
            xy_core::config::CommandLookupError::NotFound(_) => (
                config.command.clone(),
                libc::ENOENT,
                SpawnErrorKind::NotFound,
            ),
        };
        SpawnError {
            path,
            error: std::io::Error::from_raw_os_error(errno).to_string(),
            kind,
        }
    })
}
