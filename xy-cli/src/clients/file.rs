//! Replacing a client's config file safely: a byte-for-byte backup next to
//! it (`<file>.xy-backup-<stamp>`), the write through [`atomic_file`]
//! (symlinks followed, mode kept, synced), and a refusal when the file
//! changed after it was read (the client or the user saved it meanwhile).
//! `undo` keeps the current file, then restores the newest backup the same
//! way.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::atomic_file::{self, Mode, WriteError};

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

fn written(file: &Path) -> impl FnOnce(WriteError) -> FileError {
    let file = file.to_path_buf();
    move |e| match e {
        WriteError::Changed => FileError::Changed(file),
        WriteError::Io(source) => FileError::Io {
            action: "write",
            path: file,
            source,
        },
    }
}

fn mode_of(file: &Path) -> Result<u32, FileError> {
    Ok(fs::metadata(file)
        .map_err(io("read", file))?
        .permissions()
        .mode()
        & 0o7777)
}

/// Replaces `file` (whose content was `original` when read) by `new`:
/// backup first, then, through [`atomic_file::write`], a check that the file
/// still holds `original` and the rename. A symlinked `file` stays a link
/// and its target is replaced; the backup lies beside the path the user
/// knows (`file`), not in the link's target directory. Returns the backup's
/// path.
pub(crate) fn replace(
    file: &Path,
    original: &[u8],
    new: &[u8],
    stamp: &str,
) -> Result<PathBuf, FileError> {
    let mode = mode_of(file)?;
    let backup = backup_path(file, stamp);
    atomic_file::write(&backup, original, Mode::Exactly(mode), None).map_err(written(&backup))?;
    if let Err(e) = atomic_file::write(file, new, Mode::KeepOr(mode), Some(original)) {
        let _ = fs::remove_file(&backup);
        return Err(written(file)(e));
    }
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

/// Where `undo` keeps the file it is about to overwrite:
/// `<file>.xy-before-undo-<stamp>`, a name [`newest_backup`] never picks, so
/// a second `undo` restores the same backup again instead of the edit.
pub(crate) fn before_undo_path(file: &Path, stamp: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".xy-before-undo-{stamp}"));
    file.with_file_name(name)
}

/// What `undo` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Undone {
    /// The backup restored (it is kept).
    pub(crate) restored: PathBuf,
    /// Where the file as it was before `undo` went, when it differed from
    /// the backup (edited after `apply`).
    pub(crate) saved: Option<PathBuf>,
}

/// Restores the newest backup of `file`, byte for byte and atomically. The
/// current file is first copied to [`before_undo_path`] when it differs from
/// that backup, so edits made after `apply` are never lost.
pub(crate) fn undo(file: &Path, stamp: &str) -> Result<Undone, FileError> {
    let backup = newest_backup(file).ok_or_else(|| FileError::NoBackup(file.to_path_buf()))?;
    let bytes = fs::read(&backup).map_err(io("read", &backup))?;
    let mode = mode_of(&backup)?;
    let current = match fs::read(file) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("read", file)(e)),
    };
    let saved = match &current {
        Some(now) if *now != bytes => {
            let to = before_undo_path(file, stamp);
            atomic_file::write(&to, now, Mode::Exactly(mode_of(file)?), None)
                .map_err(written(&to))?;
            Some(to)
        }
        _ => None,
    };
    atomic_file::write(file, &bytes, Mode::Exactly(mode), current.as_deref())
        .map_err(written(file))?;
    Ok(Undone {
        restored: backup,
        saved,
    })
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
            undo(&f, "u").unwrap(),
            Undone {
                restored: dir.path().join("mcp.json.xy-backup-20261130T000001.000Z"),
                saved: Some(dir.path().join("mcp.json.xy-before-undo-u")),
            }
        );
        assert_eq!(fs::read(&f).unwrap(), b"new");
        let names = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 4, "two backups, the file before undo, no temp");
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
        assert!(matches!(undo(&f, "u"), Err(FileError::NoBackup(_))));
    }

    // Issue 26: `undo` used to overwrite edits made after `apply`.
    #[test]
    fn undo_after_a_hand_edit_keeps_the_edit_and_a_second_undo_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mcp.json");
        fs::write(&f, b"mine").unwrap();
        replace(&f, b"mine", b"xy's", "20261130T000000.000Z").unwrap();
        fs::write(&f, b"xy's plus a hand edit").unwrap();
        let u = undo(&f, "20261130T000005.000Z").unwrap();
        let saved = dir
            .path()
            .join("mcp.json.xy-before-undo-20261130T000005.000Z");
        assert_eq!(u.saved.as_deref(), Some(saved.as_path()));
        assert_eq!(fs::read(&saved).unwrap(), b"xy's plus a hand edit");
        assert_eq!(fs::read(&f).unwrap(), b"mine");
        // The same backup again: the file already holds it, nothing to keep.
        let again = undo(&f, "20261130T000006.000Z").unwrap();
        assert_eq!(again.restored, u.restored);
        assert_eq!(again.saved, None);
        assert_eq!(fs::read(&f).unwrap(), b"mine");
    }

    // Issue 26: a stow/chezmoi/home-manager link was replaced by a file.
    #[test]
    fn a_symlinked_config_stays_a_link_through_replace_and_undo() {
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles");
        fs::create_dir(&dotfiles).unwrap();
        let real = dotfiles.join("claude.json");
        fs::write(&real, b"old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join(".claude.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let b = replace(&link, b"old", b"new", "20261130T000000.000Z").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(b.parent(), Some(dir.path()), "backup beside the link");
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o600
        );
        undo(&link, "u").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"old");
        assert_eq!(fs::read_dir(&dotfiles).unwrap().count(), 1);
    }
}
