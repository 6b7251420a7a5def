//! Denials recognised in a confined child's own error lines (SPEC §21):
//! where the kernel reports nothing to xy (Landlock's audit records go to
//! the audit log, Seatbelt's to the unified log), the child's `EACCES`
//! message names the path or address.

use std::path::PathBuf;

use super::Denied;

/// The denial a child's stderr `line` reports, if it reports one:
/// Node's `EACCES: permission denied, open '/x'`, Python's
/// `PermissionError: [Errno 13] Permission denied: '/x'`, `connect EACCES
/// 127.0.0.1:9`. Whether it was a read or a write is not always said; an
/// open of an unknown mode counts as a read.
pub fn denial_in_line(line: &str) -> Option<Denied> {
    let lower = line.to_ascii_lowercase();
    if !(lower.contains("eacces") || lower.contains("permission denied") || lower.contains("eperm"))
    {
        return None;
    }
    if let Some(i) = lower.find("connect eacces ") {
        let addr = line[i + "connect eacces ".len()..]
            .split_whitespace()
            .next()?;
        return Some(Denied::Connect(addr.to_owned()));
    }
    let quoted = line
        .split(['\'', '"'])
        .nth(1)
        .filter(|s| s.starts_with('/'))?;
    let path = PathBuf::from(quoted);
    let write = [
        "mkdir", "write", "unlink", "rename", "rmdir", "copyfile", "symlink",
    ]
    .iter()
    .any(|op| lower.contains(&format!(", {op} ")) || lower.contains(&format!("{op}(")));
    Some(if write {
        Denied::Write(path)
    } else {
        Denied::Read(path)
    })
}
