//! The file operations a service install needs: a private directory, an
//! atomic write the service manager never sees half-done, a removal that
//! tolerates absence, and the tail of a log.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use super::error::{ServiceError, io_err};
use crate::atomic_file::{self, Mode};

pub(super) fn create_private_dir(dir: &Path) -> Result<(), ServiceError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))
}

/// Writes through [`atomic_file`] (a temporary sibling and a rename), so the
/// service manager never reads a half-written file.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ServiceError> {
    let dir = path.parent().ok_or_else(|| ServiceError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"),
    })?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    atomic_file::write(path, bytes, Mode::KeepOr(0o644), None)
        .map(drop)
        .map_err(|e| io_err(path)(e.into_io()))
}

pub(super) fn remove_if_exists(path: &Path) -> Result<(), ServiceError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// The last `n` lines of a file (reading at most its last 64 KiB); empty
/// when it cannot be read.
pub(crate) fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    const WINDOW: u64 = 64 * 1024;
    let Ok(mut f) = fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // cut mid-line
    }
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|s| (*s).to_owned()).collect()
}
