//! Replacing a client's config file safely: a byte-for-byte backup next to
//! it (`<file>.xy-backup-<stamp>`), an atomic rename of a temporary file in
//! the same directory, and a refusal when the file changed after it was
//! read (the client or the user saved it meanwhile). `undo` restores the
//! newest backup the same way.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a client file was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// Someone wrote the file after we read it.
    #[error("{} changed while xyctl was editing it; nothing was written (run the command again)", .0.display())]
    Changed(PathBuf),
    /// `undo` found no backup.
    #[error("no backup of {} (files named {}.xy-backup-*)", .0.display(), .0.display())]
    NoBackup(PathBuf),
    /// The OS said no.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
    let path = path.to_path_buf();
    move |source| FileError::Io {
        action,
        path,
        source,
    }
}

/// The backup path for `file` at `stamp`.
pub(crate) fn backup_path(file: &Path, stamp: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".xy-backup-{stamp}"));
    file.with_file_name(name)
}

/// Writes `bytes` to a fresh temporary file beside `target` with `mode`,
/// synced, and returns its path.
fn temp_beside(target: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, FileError> {
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(format!(".xy-tmp-{}", std::process::id()));
    let tmp = target.with_file_name(name);
    let res = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            // `mode` above is masked by the umask; the backup and the new
            // file keep exactly the original's permissions.
            f.set_permissions(fs::Permissions::from_mode(mode))?;
            f.sync_all()
        });
    match res {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(io("write", &tmp)(e))
        }
    }
}

/// Replaces `file` (whose content was `original` when read) by `new`:
/// backup first, then a check that the file still holds `original`, then
/// the atomic rename. Returns the backup's path.
pub(crate) fn replace(
    file: &Path,
    original: &[u8],
    new: &[u8],
    stamp: &str,
) -> Result<PathBuf, FileError> {
    let mode = fs::metadata(file)
        .map_err(io("read", file))?
        .permissions()
        .mode()
        & 0o7777;
    let backup = backup_path(file, stamp);
    let tmp_backup = temp_beside(&backup, original, mode)?;
    fs::rename(&tmp_backup, &backup).map_err(|e| {
        let _ = fs::remove_file(&tmp_backup);
        io("write", &backup)(e)
    })?;
    let tmp = temp_beside(file, new, mode)?;
    let now = fs::read(file).map_err(io("read", file));
    if now.as_deref().ok() != Some(original) {
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&backup);
        now?;
        return Err(FileError::Changed(file.to_path_buf()));
    }
    fs::rename(&tmp, file).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io("replace", file)(e)
    })?;
    Ok(backup)
}

/// The newest `<file>.xy-backup-*` (stamps sort by time).
pub(crate) fn newest_backup(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    let mut prefix = file.file_name()?.to_os_string();
    prefix.push(".xy-backup-");
    let prefix = prefix.to_string_lossy().into_owned();
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&prefix).then(|| e.path())
        })
        .max()
}

/// Restores the newest backup of `file`, byte for byte and atomically, and
/// returns the backup used (which is kept).
pub(crate) fn undo(file: &Path) -> Result<PathBuf, FileError> {
    let backup = newest_backup(file).ok_or_else(|| FileError::NoBackup(file.to_path_buf()))?;
    let bytes = fs::read(&backup).map_err(io("read", &backup))?;
    let mode = fs::metadata(&backup)
        .map_err(io("read", &backup))?
        .permissions()
        .mode()
        & 0o7777;
    let tmp = temp_beside(file, &bytes, mode)?;
    fs::rename(&tmp, file).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io("replace", file)(e)
    })?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_backs_up_and_undo_restores() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mcp.json");
        fs::write(&f, b"old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        let b = replace(&f, b"old", b"new", "20261130T000000.000Z").unwrap();
        assert_eq!(
            b,
            dir.path().join("mcp.json.xy-backup-20261130T000000.000Z")
        );
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(fs::read(&b).unwrap(), b"old");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(
            fs::metadata(&b).unwrap().permissions().mode() & 0o777,
            0o640
        );
        replace(&f, b"new", b"newer", "20261130T000001.000Z").unwrap();
        assert_eq!(
            undo(&f).unwrap(),
            dir.path().join("mcp.json.xy-backup-20261130T000001.000Z")
        );
        assert_eq!(fs::read(&f).unwrap(), b"new");
        let names = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 3, "no temporary files left");
    }

    #[test]
    fn a_file_changed_after_reading_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        fs::write(&f, b"edited by someone else").unwrap();
        let e = replace(&f, b"what we read", b"ours", "s").unwrap_err();
        assert!(matches!(e, FileError::Changed(_)), "{e}");
        assert_eq!(fs::read(&f).unwrap(), b"edited by someone else");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no backup or temp left"
        );
        assert!(matches!(undo(&f), Err(FileError::NoBackup(_))));
    }
}
