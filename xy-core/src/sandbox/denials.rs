//! Denials recognised in a confined child's own error lines (SPEC §21):
//! where the kernel reports nothing to xy (Landlock's audit records go to
//! the audit log, Seatbelt's to the unified log), the child's `EACCES` /
//! `EPERM` message names the path or address.
//!
//! The formats recognised are the runtimes' own, taken from real runs
//! (as an unprivileged user against `chmod 000` files, a read-only
//! directory, a socket in a private directory and a port below 1024; the
//! tests quote those lines) and, for Go, from its error types' `Error()`
//! methods (`os.PathError`: `op path: err`; `net.OpError`: `dial tcp
//! addr: connect: err`):
//!
//! - Node: `Error: EACCES: permission denied, open '/x'` (also `mkdir`,
//!   `scandir`, `unlink`, `rename '/a' -> '/b'`, …), `connect EACCES
//!   127.0.0.1:9 - Local (…)`, `connect EACCES /run/x.sock`, `listen
//!   EACCES: permission denied 0.0.0.0:80`.
//! - Python: `PermissionError: [Errno 13] Permission denied: '/x'`,
//!   `[Errno 1] Operation not permitted`.
//! - Shells and coreutils: `bash: /x: Permission denied`, `touch: cannot
//!   touch '/x': Permission denied`, `mkdir: cannot create directory ‘/x’:
//!   Permission denied`, `cp: cannot open '/x' for reading: …`.
//! - Go: `open /x: permission denied`, `dial tcp 1.2.3.4:443: connect:
//!   permission denied`, `listen tcp :80: bind: permission denied`.
//! - Rust: `cannot read /x: Permission denied (os error 13)`.
//!
//! Read or write: the operation word decides where the line has one
//! (`mkdir`, `unlink`, `rename`, `cannot create`, `for writing`, …); an
//! `open` of unknown mode, and a Python error (which never says), count
//! as reads. An operation on two paths (rename, copy, link) is reported on
//! the second, the one being created. [`denial_in_line_under`] also takes
//! the rules: such a guessed read of a path the rules let the child read
//! but not write was a write.

use std::path::PathBuf;

use super::{Denied, Rules};

/// Operation words that mean the child was creating, changing or
/// removing the path (looked for before the path, lowercase).
const WRITE_WORDS: &[&str] = &[
    "mkdir",
    "mkdtemp",
    "unlink",
    "rmdir",
    "rename",
    "copyfile",
    "symlink",
    "link",
    "chmod",
    "chown",
    "utime",
    "truncate",
    "remove",
    "write",
    "cannot touch",
    "cannot create",
    "cannot move",
    "cannot overwrite",
    "failed to create",
];

/// Signs that a line without a path or address is an OS error rather than
/// an application's own "permission denied" message.
const OS_ERROR_SIGNS: &[&str] = &[
    "errno",
    "os error",
    "eacces",
    "eperm",
    "permissionerror",
    "permissiondenied",
];

/// The longest child text quoted in a [`Denied::Other`].
const QUOTE_MAX: usize = 120;

/// The denial a child's stderr `line` reports, if it reports one (the
/// formats are listed in the module docs). `None` for every other line,
/// including an application's own "permission denied" that is not an OS
/// error.
pub fn denial_in_line(line: &str) -> Option<Denied> {
    recognise(line).map(|(d, _)| d)
}

/// [`denial_in_line`], sharpened by the rules the child ran under: a
/// denial whose line does not say read or write (Node's `open`, any
/// Python `PermissionError`, `bash: /x: …`) on a path the rules do not let
/// it write can only have been a write when the rules let it read the path,
/// or when the path does not exist (`exists`): reading a missing file fails
/// with `ENOENT` before any sandbox rule is asked, so a refusal there was a
/// create (SPEC §25: "`write` for a failed create"). It is reported as a
/// write. The daemon calls this one; [`denial_in_line`] is for callers
/// without the rules.
pub fn denial_in_line_under(
    line: &str,
    rules: &Rules,
    exists: &dyn Fn(&std::path::Path) -> bool,
) -> Option<Denied> {
    match recognise(line)? {
        (Denied::Read(p), true) if !rules.can_write(&p) && (rules.can_read(&p) || !exists(&p)) => {
            Some(Denied::Write(p))
        }
        (d, _) => Some(d),
    }
}

/// The denial and whether its read/write direction was a guess.
fn recognise(line: &str) -> Option<(Denied, bool)> {
    let lower = line.to_ascii_lowercase();
    let denied = [
        "eacces",
        "eperm",
        "permission denied",
        "operation not permitted",
    ]
    .iter()
    .any(|m| lower.contains(m));
    if !denied {
        return None;
    }
    if let Some(d) = network(line, &lower) {
        return Some((d, false));
    }
    if let Some(d) = file(line, &lower) {
        return Some(d);
    }
    // Chromium's `socket() failed: Permission denied (13)`: a refused
    // system call that names no path (SPEC §25).
    if let Some(i) = lower.find("socket()") {
        return Some((
            Denied::Other(format!(
                "creating a socket (the child said {:?})",
                clip(line[i..].trim())
            )),
            false,
        ));
    }
    let os_error = OS_ERROR_SIGNS.iter().any(|s| lower.contains(s));
    let spoken = lower.contains("permission denied") || lower.contains("operation not permitted");
    (os_error && spoken).then(|| {
        (
            Denied::Other(format!(
                "an operation (the child said {:?})",
                clip(line.trim())
            )),
            false,
        )
    })
}

/// `line` cut to [`QUOTE_MAX`] characters.
fn clip(line: &str) -> String {
    match line.char_indices().nth(QUOTE_MAX) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

/// Node's `connect EACCES <addr>` and `listen EACCES: … <addr>`, Go's
/// `dial tcp <addr>: connect: …` and `listen tcp <addr>: bind: …`.
fn network(line: &str, lower: &str) -> Option<Denied> {
    // `lower` is ASCII-lowercased, so its byte offsets are the line's.
    let find = |needle: &str| lower.find(needle);
    for code in ["connect eacces ", "connect eperm "] {
        if let Some(i) = find(code) {
            let addr = line[i + code.len()..].split_whitespace().next()?;
            return Some(Denied::Connect(addr.to_owned()));
        }
    }
    for code in ["listen eacces", "listen eperm", "bind eacces", "bind eperm"] {
        if let Some(i) = find(code) {
            let port = line[i..].split_whitespace().rev().find_map(port_of)?;
            return Some(Denied::Bind(port));
        }
    }
    if let (Some(d), Some(c)) = (find("dial "), find(": connect: "))
        && d < c
    {
        let addr = line[d + "dial ".len()..c].split_whitespace().last()?;
        return Some(Denied::Connect(addr.to_owned()));
    }
    if let (Some(l), Some(b)) = (find("listen "), find(": bind: "))
        && l < b
    {
        let addr = line[l + "listen ".len()..b].split_whitespace().last()?;
        return port_of(addr).map(Denied::Bind);
    }
    None
}

/// The port of `host:port`, `[v6]:port` or `:port`.
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':')?.1.parse().ok()
}

/// Operation words, before the path, that say the child was reading (so
/// a read is not a guess; `for reading` counts anywhere in the line).
const READ_WORDS: &[&str] = &[
    "scandir",
    "opendir",
    "readdir",
    "readlink",
    "realpath",
    "stat",
    "access",
    "cannot open directory",
    "cannot access",
    "cannot read",
    "cat:",
];

/// A path the line names, read or write by the operation word before it,
/// and whether that was a guess (no word said either).
fn file(line: &str, lower: &str) -> Option<(Denied, bool)> {
    let paths = quoted_paths(line);
    let (paths, before) = if paths.is_empty() {
        bare_paths(line)?
    } else {
        paths_and_prefix(line, paths)
    };
    let before = before.to_ascii_lowercase();
    let write = paths.len() > 1
        || WRITE_WORDS.iter().any(|w| before.contains(w))
        || lower.contains("for writing");
    let path = PathBuf::from(paths.last()?);
    Some(if write {
        (Denied::Write(path), false)
    } else {
        let said = READ_WORDS.iter().any(|w| before.contains(w)) || lower.contains("for reading");
        (Denied::Read(path), !said)
    })
}

/// Quoted absolute paths (`'…'`, `"…"`, `‘…’`, `` `…' ``) with the byte
/// offset of each opening quote.
fn quoted_paths(line: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    let mut base = 0;
    while let Some(open) = rest.find(['\'', '"', '‘', '`']) {
        let q = rest[open..].chars().next().expect("found a quote");
        let close_q = match q {
            '‘' => '’',
            '`' => '\'',
            c => c,
        };
        let body_start = open + q.len_utf8();
        let Some(len) = rest[body_start..].find(close_q) else {
            break;
        };
        let body = &rest[body_start..body_start + len];
        if body.starts_with('/') {
            out.push((base + open, body.to_owned()));
        }
        let next = body_start + len + close_q.len_utf8();
        base += next;
        rest = &rest[next..];
    }
    out
}

/// The paths and the text before the first one.
fn paths_and_prefix(line: &str, paths: Vec<(usize, String)>) -> (Vec<String>, &str) {
    let first = paths.first().map_or(0, |(i, _)| *i);
    (paths.into_iter().map(|(_, p)| p).collect(), &line[..first])
}

/// Unquoted paths, as shells and Go print them: `cat: /x: Permission
/// denied`, `/bin/sh: 1: cannot create /x: …`, `open /x: permission
/// denied`, `rename /a /b: …`. The paths are in the last `: `-separated
/// field before the denial words that holds one, from its first `/` that
/// starts a word; several are split at ` /`.
fn bare_paths(line: &str) -> Option<(Vec<String>, &str)> {
    let lower = line.to_ascii_lowercase();
    let end = ["permission denied", "operation not permitted"]
        .iter()
        .filter_map(|m| lower.find(m))
        .min()?;
    let head = line[..end].trim_end();
    let head = head.strip_suffix(':')?.trim_end();
    // Byte offset of each field in `head`.
    let mut fields = Vec::new();
    let mut at = 0;
    for f in head.split(": ") {
        fields.push((at, f));
        at += f.len() + 2;
    }
    let (offset, field, start) = fields.into_iter().rev().find_map(|(at, f)| {
        let start = if f.starts_with('/') {
            Some(0)
        } else {
            f.find(" /").map(|i| i + 1)
        }?;
        Some((at, f, start))
    })?;
    let paths: Vec<String> = field[start..]
        .split(" /")
        .enumerate()
        .map(|(i, p)| {
            if i == 0 {
                p.to_owned()
            } else {
                format!("/{p}")
            }
        })
        .filter(|p| p.len() > 1)
        .collect();
    (!paths.is_empty()).then_some((paths, &line[..offset + start]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &str) -> Option<Denied> {
        Some(Denied::Read(p.into()))
    }

    fn write(p: &str) -> Option<Denied> {
        Some(Denied::Write(p.into()))
    }

    /// Lines printed by Node 20 run as `nobody` (see the module docs).
    #[test]
    fn node_lines() {
        for (line, want) in [
            (
                "Error: EACCES: permission denied, open '/tmp/dn/secret'",
                read("/tmp/dn/secret"),
            ),
            (
                "Error: EACCES: permission denied, scandir '/root'",
                read("/root"),
            ),
            (
                "Error: EACCES: permission denied, mkdir '/tmp/dn/ro/d'",
                write("/tmp/dn/ro/d"),
            ),
            (
                "Error: EACCES: permission denied, unlink '/tmp/dn/secret'",
                write("/tmp/dn/secret"),
            ),
            (
                "Error: EACCES: permission denied, rmdir '/tmp/dn/ro'",
                write("/tmp/dn/ro"),
            ),
            (
                "Error: EACCES: permission denied, rename '/tmp/dn/secret' -> '/tmp/dn/ro/y'",
                write("/tmp/dn/ro/y"),
            ),
            (
                "Error: EACCES: permission denied, copyfile '/etc/hostname' -> '/tmp/dn/ro/z'",
                write("/tmp/dn/ro/z"),
            ),
            (
                "[Error: EPERM: operation not permitted, open '/home/me/.ssh/id_rsa']",
                read("/home/me/.ssh/id_rsa"),
            ),
            (
                "Error: connect EACCES 127.0.0.1:9 - Local (0.0.0.0:0)",
                Some(Denied::Connect("127.0.0.1:9".into())),
            ),
            (
                "Error: connect EPERM 140.82.112.3:443",
                Some(Denied::Connect("140.82.112.3:443".into())),
            ),
            (
                "Error: connect EACCES /tmp/dn/priv/s.sock",
                Some(Denied::Connect("/tmp/dn/priv/s.sock".into())),
            ),
            (
                "Error: listen EACCES: permission denied 0.0.0.0:80",
                Some(Denied::Bind(80)),
            ),
            (
                "Error: listen EACCES: permission denied 127.0.0.1:80",
                Some(Denied::Bind(80)),
            ),
            ("Error: bind EACCES 0.0.0.0:53", Some(Denied::Bind(53))),
            // util.inspect's continuation lines are not a second denial.
            ("  code: 'EACCES',", None),
            ("  path: '/tmp/dn/secret'", None),
            ("  errno: -13,", None),
        ] {
            assert_eq!(denial_in_line(line), want, "{line}");
        }
    }

    /// Lines printed by Python 3.11 run as `nobody`.
    #[test]
    fn python_lines() {
        for (line, want) in [
            (
                "PermissionError: [Errno 13] Permission denied: '/tmp/dn/secret'",
                read("/tmp/dn/secret"),
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/root'",
                read("/root"),
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/tmp/dn/secret' -> '/tmp/dn/ro/y'",
                write("/tmp/dn/ro/y"),
            ),
            (
                "PermissionError: [Errno 1] Operation not permitted: '/home/me/.bashrc'",
                read("/home/me/.bashrc"),
            ),
        ] {
            assert_eq!(denial_in_line(line), want, "{line}");
        }
        // A refused socket (connect, bind) names nothing.
        for line in [
            "PermissionError: [Errno 13] Permission denied",
            "PermissionError: [Errno 1] Operation not permitted",
        ] {
            let Some(Denied::Other(what)) = denial_in_line(line) else {
                panic!("{line}: {:?}", denial_in_line(line))
            };
            assert!(what.contains(line), "{what}");
        }
    }

    /// Lines printed by dash, bash and coreutils run as `nobody`.
    #[test]
    fn shell_lines() {
        for (line, want) in [
            (
                "cat: /tmp/dn/secret: Permission denied",
                read("/tmp/dn/secret"),
            ),
            (
                "touch: cannot touch '/tmp/dn/ro/x': Permission denied",
                write("/tmp/dn/ro/x"),
            ),
            (
                "mkdir: cannot create directory ‘/tmp/dn/ro/d’: Permission denied",
                write("/tmp/dn/ro/d"),
            ),
            (
                "ls: cannot open directory '/root': Permission denied",
                read("/root"),
            ),
            (
                "sh: 5: cannot create /tmp/dn/ro/f: Permission denied",
                write("/tmp/dn/ro/f"),
            ),
            // dash run by path, as xyd runs `/bin/sh -c …` (a real line
            // from a confined child).
            (
                "/bin/sh: 1: cannot create /tmp/xr/you/.bashrc: Permission denied",
                write("/tmp/xr/you/.bashrc"),
            ),
            (
                "/usr/bin/cat: /home/me/.ssh/id_rsa: Permission denied",
                read("/home/me/.ssh/id_rsa"),
            ),
            (
                "rm: cannot remove '/tmp/dn/secret': Permission denied",
                write("/tmp/dn/secret"),
            ),
            (
                "cp: cannot open '/tmp/dn/secret' for reading: Permission denied",
                read("/tmp/dn/secret"),
            ),
            (
                "sh: 5: /tmp/dn/secret: Permission denied",
                read("/tmp/dn/secret"),
            ),
            (
                "bash: line 1: /tmp/dn/ro/g: Permission denied",
                read("/tmp/dn/ro/g"),
            ),
            (
                "bash: /home/me/.bashrc: Permission denied",
                read("/home/me/.bashrc"),
            ),
            (
                "ln: failed to create symbolic link '/tmp/dn/ro/l': Permission denied",
                write("/tmp/dn/ro/l"),
            ),
            (
                "mv: cannot move '/tmp/dn/secret' to '/tmp/dn/ro/secret': Permission denied",
                write("/tmp/dn/ro/secret"),
            ),
            (
                "cat: '/home/me/my notes/a.md': Permission denied",
                read("/home/me/my notes/a.md"),
            ),
            ("bash: line 1: /tmp/dn/ro: Is a directory", None),
        ] {
            assert_eq!(denial_in_line(line), want, "{line}");
        }
    }

    /// Go's formats (from `os.PathError` / `net.OpError`), and Rust's as
    /// printed by a program run as `nobody`.
    #[test]
    fn go_and_rust_lines() {
        for (line, want) in [
            (
                "open /home/me/.ssh/id_rsa: permission denied",
                read("/home/me/.ssh/id_rsa"),
            ),
            (
                "mkdir /home/me/.config/x: permission denied",
                write("/home/me/.config/x"),
            ),
            (
                "remove /home/me/.bashrc: operation not permitted",
                write("/home/me/.bashrc"),
            ),
            (
                "rename /a/b /home/me/c: permission denied",
                write("/home/me/c"),
            ),
            (
                "error: dial tcp 140.82.112.3:443: connect: permission denied",
                Some(Denied::Connect("140.82.112.3:443".into())),
            ),
            (
                "dial unix /run/user/1000/xy.sock: connect: operation not permitted",
                Some(Denied::Connect("/run/user/1000/xy.sock".into())),
            ),
            (
                "listen tcp 127.0.0.1:80: bind: permission denied",
                Some(Denied::Bind(80)),
            ),
            (
                "listen tcp :8080: bind: permission denied",
                Some(Denied::Bind(8080)),
            ),
            (
                "error: cannot read /tmp/dn/secret: Permission denied (os error 13)",
                read("/tmp/dn/secret"),
            ),
            (
                "failed to write /home/me/.bashrc: Permission denied (os error 13)",
                write("/home/me/.bashrc"),
            ),
        ] {
            assert_eq!(denial_in_line(line), want, "{line}");
        }
        for line in [
            "Permission denied (os error 13)",
            "Error: Os { code: 13, kind: PermissionDenied, message: \"Permission denied\" }",
        ] {
            assert!(
                matches!(denial_in_line(line), Some(Denied::Other(_))),
                "{line}"
            );
        }
    }

    #[test]
    fn the_rules_turn_an_unsaid_open_of_a_read_only_path_into_a_write() {
        use crate::sandbox::{Os, SandboxConfig, SpawnFacts, effective};
        let rules = effective(
            &SandboxConfig {
                read: vec!["~/notes".into()],
                ..SandboxConfig::default()
            },
            &SpawnFacts {
                home: std::path::Path::new("/home/me"),
                script: None,
                program: std::path::Path::new("/usr/bin/node"),
                interpreter: None,
                working_dir: std::path::Path::new("/home/me/work"),
                temp_dir: std::path::Path::new("/tmp/xy"),
                venv: None,
                data_dir: None,
                listen_port: None,
                os: Os::Linux,
            },
        );
        let under = |l: &str| denial_in_line_under(l, &rules, &|_| true);
        // Readable, not writable, mode unsaid: it was a write.
        assert_eq!(
            under("Error: EACCES: permission denied, open '/home/me/notes/a.md'"),
            write("/home/me/notes/a.md")
        );
        assert_eq!(
            under("PermissionError: [Errno 13] Permission denied: '/home/me/notes/a.md'"),
            write("/home/me/notes/a.md")
        );
        // A path that merely contains a read word is still a guess.
        assert_eq!(
            under("Error: EACCES: permission denied, open '/home/me/notes/stats.json'"),
            write("/home/me/notes/stats.json")
        );
        // Not readable: a read, as the line alone says.
        assert_eq!(
            under("Error: EACCES: permission denied, open '/home/me/.ssh/id_rsa'"),
            read("/home/me/.ssh/id_rsa")
        );
        // The line said read: kept.
        assert_eq!(
            under("Error: EACCES: permission denied, scandir '/home/me/notes'"),
            read("/home/me/notes")
        );
        assert_eq!(
            under("cp: cannot open '/home/me/notes/a.md' for reading: Permission denied"),
            read("/home/me/notes/a.md")
        );
        assert_eq!(
            under("Error: connect EACCES 127.0.0.1:9"),
            Some(Denied::Connect("127.0.0.1:9".into()))
        );
        // A refused open of a path that does not exist was a create (a read
        // of a missing file is ENOENT): a write, whatever the rules read.
        let missing = |p: &std::path::Path| p != std::path::Path::new("/home/me/.ssh/id_rsa");
        assert_eq!(
            denial_in_line_under(
                "Error: EACCES: permission denied, open '/home/me/data/db.json'",
                &rules,
                &|p| !missing(p)
            ),
            write("/home/me/data/db.json")
        );
        assert_eq!(
            denial_in_line_under(
                "Error: EACCES: permission denied, open '/home/me/.ssh/id_rsa'",
                &rules,
                &|p| !missing(p)
            ),
            read("/home/me/.ssh/id_rsa")
        );
    }

    /// Chromium under `@playwright/mcp` (issue 39), and the line the bridge
    /// writes for a tool result that reported a denial.
    #[test]
    fn a_refused_socket_and_a_tool_result_line() {
        let Some(Denied::Other(what)) = denial_in_line(
            "[1204/101010.123456:ERROR:socket_posix.cc(93)] socket() failed: Permission denied (13)",
        ) else {
            panic!()
        };
        assert!(
            what.starts_with(
                "creating a socket (the child said \"socket() failed: Permission denied"
            ),
            "{what}"
        );
        assert_eq!(
            denial_in_line(
                "xy: a tool result said: EACCES: permission denied, open '/opt/pkg/dist/memory.jsonl'"
            ),
            read("/opt/pkg/dist/memory.jsonl")
        );
    }

    #[test]
    fn ordinary_lines_are_not_denials() {
        for line in [
            "listening on 127.0.0.1:8421",
            "tool call refused: permission denied by the user",
            "GET /files/secret 403 permission denied",
            "warning: EACCES handling is enabled",
            "",
        ] {
            assert_eq!(denial_in_line(line), None, "{line}");
        }
        let long = format!(
            "PermissionError: [Errno 13] Permission denied {}",
            "x".repeat(500)
        );
        let Some(Denied::Other(what)) = denial_in_line(&long) else {
            panic!()
        };
        assert!(what.chars().count() < 200, "{what}");
    }
}
