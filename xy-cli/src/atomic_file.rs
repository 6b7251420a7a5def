//! The one way xyctl replaces a file it keeps (client configs, their
//! backups, server files): the bytes go to a temporary file in the
//! *target's* directory, are synced, and are renamed over the target; the
//! directory is synced after the rename, so neither a crash nor a power loss
//! leaves a half-written or vanished config.
//!
//! A path that is a symlink is followed to the file it ends at, and that file
//! is replaced: a client config that stow, chezmoi or home-manager linked
//! into place stays a link into the dotfiles tree. An existing file keeps its
//! permission bits; a new one gets the caller's.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Symlinks followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// Which permission bits the written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The existing file's, or these when there is no file yet.
    KeepOr(u32),
    /// Exactly these (a backup takes its original's).
    Exactly(u32),
}

/// Why a file was not written.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The target no longer held the bytes the caller read: someone saved it
    /// meanwhile. Nothing was written.
    Changed,
    /// The OS said no.
    Io(io::Error),
}

impl WriteError {
    /// As an `io::Error`, for callers that never pass `expect`.
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            WriteError::Changed => io::Error::other("the file changed while it was written"),
            WriteError::Io(e) => e,
        }
    }
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// The file a write to `path` lands on: `path` itself, or where its chain of
/// symlinks ends (which need not exist yet). Relative links resolve against
/// the link's own directory.
pub(crate) fn target(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINKS} symlinks from {}",
        path.display()
    )))
}

/// Replaces the content of the file `path` stands for with `bytes` (see the
/// module docs). With `expect`, the target is read once more just before the
/// rename and nothing is written unless it still holds exactly those bytes.
/// Returns the file actually written.
pub(crate) fn write(
    path: &Path,
    bytes: &[u8],
    mode: Mode,
    expect: Option<&[u8]>,
) -> Result<PathBuf, WriteError> {
    let target = target(path)?;
    let mode = match mode {
        Mode::Exactly(m) => m,
        Mode::KeepOr(default) => match fs::metadata(&target) {
            Ok(m) => m.permissions().mode() & 0o7777,
            Err(e) if e.kind() == io::ErrorKind::NotFound => default,
            Err(e) => return Err(e.into()),
        },
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(temp_name(&target));
    let res = fill(&tmp, bytes, mode)
        .map_err(WriteError::from)
        .and_then(|()| {
            if let Some(want) = expect {
                match fs::read(&target) {
                    Ok(now) if now == want => {}
                    Ok(_) => return Err(WriteError::Changed),
                    Err(e) => return Err(e.into()),
                }
            }
            fs::rename(&tmp, &target)?;
            Ok(())
        });
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable only once the directory entry is on disk.
    fs::File::open(&dir).and_then(|d| d.sync_all())?;
    Ok(target)
}

/// `.<name>.xy-tmp-<pid>`: hidden (the daemon's config loader skips dot
/// files) and unique per process.
fn temp_name(target: &Path) -> OsString {
    let mut name = OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(format!(".xy-tmp-{}", std::process::id()));
    name
}

fn fill(tmp: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(tmp)?;
    f.write_all(bytes)?;
    // `mode` above is masked by the umask; the file gets exactly `mode`.
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode_of(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_symlinked_file_stays_a_link_and_its_target_gets_the_bytes() {
        let d = tempfile::tempdir().unwrap();
        let dotfiles = d.path().join("dotfiles");
        fs::create_dir(&dotfiles).unwrap();
        let real = dotfiles.join("mcp.json");
        fs::write(&real, b"old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        // A relative link to a relative link, as stow makes them.
        let mid = d.path().join("mid.json");
        symlink("dotfiles/mcp.json", &mid).unwrap();
        let link = d.path().join("link.json");
        symlink("mid.json", &link).unwrap();

        let wrote = write(&link, b"new", Mode::KeepOr(0o600), Some(b"old")).unwrap();
        assert_eq!(wrote, d.path().join("dotfiles/mcp.json"));
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::symlink_metadata(&mid).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(mode_of(&real), 0o640, "mode kept");
        assert_eq!(fs::read_dir(&dotfiles).unwrap().count(), 1, "no temp left");
    }

    #[test]
    fn a_new_file_gets_the_default_mode_and_exactly_overrides() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.kdl");
        write(&f, b"x", Mode::KeepOr(0o600), None).unwrap();
        assert_eq!(mode_of(&f), 0o600);
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        write(&f, b"y", Mode::KeepOr(0o600), None).unwrap();
        assert_eq!(mode_of(&f), 0o644);
        write(&f, b"z", Mode::Exactly(0o600), None).unwrap();
        assert_eq!(mode_of(&f), 0o600);
        assert_eq!(fs::read(&f).unwrap(), b"z");
    }

    #[test]
    fn a_dangling_link_is_created_at_its_target_and_a_changed_file_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("link");
        symlink(d.path().join("absent"), &link).unwrap();
        write(&link, b"a", Mode::KeepOr(0o600), None).unwrap();
        assert_eq!(fs::read(d.path().join("absent")).unwrap(), b"a");
        let e = write(&link, b"b", Mode::KeepOr(0o600), Some(b"not a")).unwrap_err();
        assert!(matches!(e, WriteError::Changed));
        assert_eq!(fs::read(&link).unwrap(), b"a");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 2, "no temp left");
    }

    #[test]
    fn a_link_loop_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        symlink("b", &a).unwrap();
        symlink("a", d.path().join("b")).unwrap();
        assert!(matches!(
            write(&a, b"x", Mode::KeepOr(0o600), None),
            Err(WriteError::Io(_))
        ));
    }
}
