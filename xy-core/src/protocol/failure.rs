//! The `data` of a `-32006 SpawnFailed` error (SPEC §6): one typed record
//! per server that could not be spawned, with the kind of failure kept as
//! data, so nobody re-parses OS error strings. The daemon sends these; the
//! client decodes them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a spawn failed, as data (`kind` on the wire, snake case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnErrorKind {
    /// The command does not exist (ENOENT, or not found on the PATH).
    NotFound,
    /// The command or a directory on its path is not executable (EACCES, EPERM).
    PermissionDenied,
    /// The file is not a program the OS can run (ENOEXEC: no `#!`, wrong
    /// architecture).
    ExecFormat,
    /// The configured `working-dir` is missing or unreadable.
    WorkingDir,
    /// A process xy does not own listens on the configured port.
    PortHeld,
    /// A secret could not be looked up (SPEC §16).
    Secret,
    /// The OS cannot enforce a rule of the `sandbox` block (SPEC §21);
    /// `error` names the rule. The child is never run unconfined instead.
    SandboxUnavailable,
    /// Anything else; `error` says what.
    #[default]
    #[serde(other)]
    Other,
}

impl SpawnErrorKind {
    /// The kind of an OS error returned by `exec` (or by the lookup that
    /// stands in for it).
    pub fn of_io(e: &std::io::Error) -> SpawnErrorKind {
        // ENOEXEC has no `io::ErrorKind` of its own; 8 on Linux and macOS.
        const ENOEXEC: i32 = 8;
        match e.kind() {
            std::io::ErrorKind::NotFound => SpawnErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => SpawnErrorKind::PermissionDenied,
            _ if e.raw_os_error() == Some(ENOEXEC) => SpawnErrorKind::ExecFormat,
            _ => SpawnErrorKind::Other,
        }
    }
}

/// A process (or at least a socket) listening on a port xy wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortHolder {
    /// The port.
    pub port: u16,
    /// The holder's pid, when visible (another user's fds are not).
    pub pid: Option<u32>,
    /// Its command line (shortened), when visible.
    pub command: Option<String>,
    /// The socket owner's uid, when known.
    pub uid: Option<u32>,
}

impl fmt::Display for PortHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pid, &self.command, self.uid) {
            (Some(pid), Some(cmd), _) => {
                write!(f, "port {} is held by pid {pid} ({cmd})", self.port)
            }
            (Some(pid), None, _) => write!(f, "port {} is held by pid {pid}", self.port),
            (None, _, Some(uid)) => write!(
                f,
                "port {} is held by another process (uid {uid}; its pid is not visible to xy)",
                self.port
            ),
            (None, _, None) => write!(f, "port {} is held by another process", self.port),
        }
    }
}

/// A failed secret lookup: the secret, its source and what went wrong —
/// never its value nor anything the lookup printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretFailure {
    /// The secret's name.
    pub name: String,
    /// `command`, `keychain` or `file`.
    pub kind: String,
    /// The source, described (`command \`op\``, the keychain item, the file).
    pub source: String,
    /// What went wrong (`exited with code 1`, `timed out after 10s`).
    pub reason: String,
    /// The command's exit code, when it exited.
    pub exit_code: Option<i32>,
}

/// One server that could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnFailure {
    /// Server name.
    pub name: String,
    /// The command path tried.
    pub path: String,
    /// The OS error, as text (or who holds the port, or the secret).
    pub error: String,
    /// The kind of failure (absent from older daemons: `other`).
    #[serde(default)]
    pub kind: SpawnErrorKind,
    /// The foreign process listening on the server's port, when that is
    /// why the start was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_holder: Option<PortHolder>,
    /// The secret whose lookup failed, when that is why (SPEC §16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Box<SecretFailure>>,
}

impl SpawnFailure {
    /// `name: path: error`, the path next to the error it caused; a port
    /// holder's or a secret's sentence stands alone (the command is not at
    /// fault).
    pub fn describe(&self) -> String {
        if self.port_holder.is_some() || self.secret.is_some() {
            format!("{}: {}", self.name, self.error)
        } else {
            format!("{}: {}: {}", self.name, self.path, self.error)
        }
    }
}

/// `data` of `-32006 SpawnFailed` from `start`/`restart`: every failure,
/// and what did start, so a partial `--all` is not misread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnFailedData {
    /// Every server that could not be spawned.
    pub failures: Vec<SpawnFailure>,
    /// Servers this call started.
    #[serde(default)]
    pub started: Vec<String>,
    /// Servers that were already running.
    #[serde(default)]
    pub already_running: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_keeps_the_old_fields_and_adds_kind() {
        let data = SpawnFailedData {
            failures: vec![SpawnFailure {
                name: "a".into(),
                path: "/x".into(),
                error: "port 1 is held by pid 2 (nc)".into(),
                kind: SpawnErrorKind::PortHeld,
                port_holder: Some(PortHolder {
                    port: 1,
                    pid: Some(2),
                    command: Some("nc".into()),
                    uid: None,
                }),
                secret: None,
            }],
            started: vec!["b".into()],
            already_running: vec![],
        };
        let v = serde_json::to_value(&data).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "failures": [{"name": "a", "path": "/x", "error": "port 1 is held by pid 2 (nc)",
                              "kind": "port_held",
                              "port_holder": {"port": 1, "pid": 2, "command": "nc", "uid": null}}],
                "started": ["b"], "already_running": []
            })
        );
        assert_eq!(serde_json::from_value::<SpawnFailedData>(v).unwrap(), data);
        // An older daemon's failure (no kind) and an unknown kind decode.
        let old: SpawnFailure = serde_json::from_value(
            serde_json::json!({"name": "a", "path": "/x", "error": "e", "kind": "from_the_future"}),
        )
        .unwrap();
        assert_eq!(old.kind, SpawnErrorKind::Other);
    }

    #[test]
    fn io_errors_keep_their_kind() {
        let k = |errno| SpawnErrorKind::of_io(&std::io::Error::from_raw_os_error(errno));
        assert_eq!(k(2), SpawnErrorKind::NotFound);
        assert_eq!(k(13), SpawnErrorKind::PermissionDenied);
        assert_eq!(k(1), SpawnErrorKind::PermissionDenied);
        assert_eq!(k(8), SpawnErrorKind::ExecFormat);
        assert_eq!(k(12), SpawnErrorKind::Other);
    }
}
