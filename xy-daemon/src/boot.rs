//! Boot steps before serving: path checks, state directories (`0700`), the
//! lock, the descriptor limit, loading the config directory, and binding the
//! socket (`0600`, replacing a stale socket file).

use std::fs::DirBuilder;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use xy_core::config::ConfigSet;
use xy_core::paths::Paths;

use crate::error::DaemonError;
use crate::lock::PidLock;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (SPEC §18) and logs
/// what it did: a flood of connections then meets the listeners' caps
/// before it meets `EMFILE`.
pub(crate) fn raise_fd_limit() {
    match xy_actors::raise_nofile_limit() {
        Ok(l) if l.after > l.before => {
            tracing::info!(
                from = l.before,
                to = l.after,
                hard = l.hard,
                "raised the descriptor limit"
            );
        }
        Ok(l) => tracing::debug!(
            soft = l.after,
            hard = l.hard,
            "descriptor limit already at its ceiling"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the descriptor limit"),
    }
}

/// A daemon that holds its lock and has its directories, ready for
/// [`crate::run`].
#[derive(Debug)]
pub struct Prepared {
    pub(crate) paths: Paths,
    pub(crate) lock: PidLock,
}

impl Prepared {
    /// The resolved paths.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }
}

/// First boot steps, in the order SPEC §7 needs them: the socket path fits,
/// the state directories exist (`0700`), and the lock is ours.
pub fn prepare(paths: Paths) -> Result<Prepared, DaemonError> {
    paths.check_socket()?;
    for dir in [&paths.state_dir, &paths.log_dir, &paths.run_dir] {
        create_private_dir(dir)?;
    }
    let lock = PidLock::acquire(&paths.pidfile)?;
    Ok(Prepared { paths, lock })
}

/// First run (SPEC §14): the default config directory is created `0700`
/// when it does not exist, so a new user's daemon boots with no servers.
/// An existing directory is left as it is.
pub fn create_default_config_dir(dir: &Path) -> Result<(), DaemonError> {
    if dir.exists() {
        return Ok(());
    }
    create_private_dir(dir)
}

fn create_private_dir(dir: &Path) -> Result<(), DaemonError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| DaemonError::Io {
            action: "create directory",
            path: dir.to_path_buf(),
            source,
        })
}

/// Loads the config directory and the settings file (`xy.kdl`) off the
/// async threads (it reads files).
pub(crate) async fn load_configs(paths: &Paths) -> Result<ConfigSet, DaemonError> {
    let dir = paths.config_dir.clone();
    let settings = paths.settings_file.clone();
    let loaded = tokio::task::spawn_blocking(move || xy_core::config::load(&dir, &settings))
        .await
        .map_err(|e| DaemonError::Io {
            action: "load configs (loader panicked)",
            path: std::path::PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?;
    loaded.map_err(DaemonError::Config)
}

/// The socket file we bound. Dropping it removes the file, unless it is no
/// longer ours (someone replaced it: its device and inode differ).
#[derive(Debug)]
pub(crate) struct SocketFile {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl SocketFile {
    fn claim(path: &Path) -> SocketFile {
        SocketFile {
            path: path.to_path_buf(),
            id: identity(path),
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.id.is_some()
            && identity(&self.path) == self.id
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(socket = %self.path.display(), error = %e, "could not remove the socket");
        }
    }
}

/// (device, inode) of a path, not following symlinks.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds the socket: a leftover socket file nobody answers on is replaced,
/// one that answers belongs to someone else. Mode `0600`. The guard removes
/// the file again when dropped.
pub(crate) fn bind_socket(path: &Path) -> Result<(UnixListener, SocketFile), DaemonError> {
    let io = |action: &'static str| {
        let path = path.to_path_buf();
        move |source| DaemonError::Io {
            action,
            path,
            source,
        }
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(DaemonError::SocketInUse(path.to_path_buf()));
            }
            tracing::info!(socket = %path.display(), "replacing stale socket file");
            std::fs::remove_file(path).map_err(io("remove stale socket"))?;
        }
        Ok(_) => return Err(DaemonError::NotASocket(path.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io("inspect socket")(e)),
    }
    if let Some(parent) = path.parent() {
        create_private_dir(parent)?;
    }
    let listener = UnixListener::bind(path).map_err(io("bind socket"))?;
    let file = SocketFile::claim(path);
    // Between bind and chmod the socket has umask permissions; the peer uid
    // check on every connection covers that window.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("chmod socket"))?;
    Ok((listener, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_socket_is_replaced_and_live_one_refused() {
        let dir = tempfile::Builder::new()
            .prefix("xyb")
            .tempdir_in("/tmp")
            .unwrap();
        let path = dir.path().join("s.sock");
        // A socket file whose listener is gone.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let (live, guard) = bind_socket(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        match bind_socket(&path) {
            Err(DaemonError::SocketInUse(p)) => assert_eq!(p, path),
            other => panic!("expected SocketInUse, got {other:?}"),
        }
        drop(live);
        drop(guard);
        assert!(!path.exists(), "the guard removes the socket it bound");
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            bind_socket(&file),
            Err(DaemonError::NotASocket(_))
        ));
        assert!(file.exists());
    }
}
