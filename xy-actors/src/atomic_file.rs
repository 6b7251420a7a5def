//! The one way the engine replaces a state file (the tool ledger, child
//! records): the bytes go to a hidden temporary file in the same directory
//! (`.<name>.xy-tmp-<pid>`, which no reader of these directories takes for
//! a record or a ledger), and are renamed over the file, so a crash never
//! leaves half a file for the next boot to misread. New files are `0600`.
//!
//! These are files only xyd writes, in its own `0700` state directory: no
//! symlink is followed and no mode is carried over (xyctl's helper, for the
//! user's files, does both). Blocking: async callers run it on the blocking
//! pool when it syncs.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether the write must survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// fsync the file before the rename and the directory after it.
    Durable,
    /// Atomic only: what a crash of xyd (not of the machine) must not break.
    Atomic,
}

/// Replaces `path` by `bytes` (see the module docs).
pub(crate) fn write(path: &Path, bytes: &[u8], sync: Sync) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".xy-tmp-{}", std::process::id()));
    let tmp = dir.join(name);
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            if sync == Sync::Durable {
                f.sync_all()?;
            }
            Ok(())
        })
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if sync == Sync::Durable {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_atomically_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.json");
        write(&f, b"one", Sync::Durable).unwrap();
        write(&f, b"two", Sync::Atomic).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        let missing = d.path().join("no/such/dir/a.json");
        assert!(write(&missing, b"x", Sync::Atomic).is_err());
    }
}
