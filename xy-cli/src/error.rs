//! Exit codes (SPEC §8) and the one type every command fails with: a
//! sentence, optional detail (diagnostics, spawn error), and the exit code.
//! The mapping from daemon errors to exit codes lives here and nowhere else.

use std::fmt;

use serde::Deserialize;
use xy_core::config::ConfigErrors;
use xy_core::protocol::{ConfigInvalidData, ErrorCode, RpcError, SpawnFailedData};

use xy_core::client::ClientError;

/// The process exit status, a contract for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: done.
    Success = 0,
    /// 1: operational error (unknown server, spawn failure, port conflict,
    /// usage error).
    Operational = 1,
    /// 2: the daemon is not running, cannot be started, or does not answer.
    Unreachable = 2,
    /// 3: a config is invalid (`config check`, `reload`, a daemon that could
    /// not boot because of its config).
    ConfigInvalid = 3,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// Why a command failed.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code to leave with.
    pub(crate) exit: Exit,
    /// One clear sentence.
    pub(crate) message: String,
    /// Detail printed below it (diagnostics, the OS error, a log tail).
    pub(crate) detail: Option<String>,
}

impl Failure {
    /// The failure for an invalid directory: count in the sentence, the
    /// miette-style diagnostics as detail.
    pub(crate) fn config_invalid(
        dir: &std::path::Path,
        errs: &ConfigErrors,
        color: bool,
    ) -> Failure {
        let n = errs.diagnostics.len();
        Failure::new(
            Exit::ConfigInvalid,
            format!(
                "config invalid: {n} {} in {}",
                if n == 1 { "error" } else { "errors" },
                dir.display()
            ),
        )
        .with_detail(errs.render(color))
    }

    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            detail: None,
        }
    }

    pub(crate) fn with_detail(mut self, detail: impl Into<String>) -> Failure {
        let d = detail.into();
        if !d.trim().is_empty() {
            self.detail = Some(d);
        }
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The exit code for a JSON-RPC error from the daemon.
pub(crate) fn exit_for_rpc(code: i32) -> Exit {
    match ErrorCode::from_code(code) {
        Some(ErrorCode::ConfigInvalid) => Exit::ConfigInvalid,
        _ => Exit::Operational,
    }
}

impl From<RpcError> for Failure {
    fn from(e: RpcError) -> Failure {
        let exit = exit_for_rpc(e.code);
        let message = match e.kind() {
            Some(ErrorCode::ConfigInvalid | ErrorCode::PortConflict) => format!(
                "{} (xyd keeps running the previous config)",
                e.message.trim_end_matches('.')
            ),
            _ => e.message.clone(),
        };
        // `ServerNotFound`'s data only repeats the names the message gives.
        let detail = match (e.kind(), &e.data) {
            (Some(ErrorCode::ServerNotFound), _) => String::new(),
            (Some(ErrorCode::SpawnFailed), Some(data)) => {
                match SpawnFailedData::deserialize(data) {
                    Ok(failed) => render_spawn_failures(&failed),
                    Err(_) => render_data(data),
                }
            }
            (Some(ErrorCode::ConfigInvalid | ErrorCode::PortConflict), Some(data)) => {
                match ConfigInvalidData::deserialize(data) {
                    Ok(invalid) => invalid.rendered,
                    Err(_) => render_data(data),
                }
            }
            _ => e.data.as_ref().map(render_data).unwrap_or_default(),
        };
        Failure::new(exit, message).with_detail(detail)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        match e {
            ClientError::Rpc(rpc) => rpc.into(),
            ClientError::Protocol(_) => Failure::new(Exit::Operational, e.to_string()),
            ClientError::Connect { .. }
            | ClientError::Timeout { .. }
            | ClientError::Closed
            | ClientError::Io(_) => Failure::new(Exit::Unreachable, e.to_string()),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::new(Exit::Operational, e.to_string())
    }
}

/// The human form of an error's `data`: rendered diagnostics when the daemon
/// sent them, else one `key: value` line per field.
pub(crate) fn render_data(data: &serde_json::Value) -> String {
    use serde_json::Value;
    match data {
        Value::String(s) => s.clone(),
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("rendered") {
                return r.clone();
            }
            if let Some(Value::Array(d)) = map.get("diagnostics") {
                return render_diagnostics(d);
            }
            map.iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}: {s}"),
                    Value::Array(items) if items.iter().all(Value::is_string) => format!(
                        "{k}: {}",
                        items
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    other => format!("{k}: {other}"),
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Value::Array(items) => render_diagnostics(items),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A `-32006` from start/restart: one line per failed server (path and OS
/// error, or the port holder / secret), then what did start, so a partial
/// `--all` is not misread.
fn render_spawn_failures(data: &SpawnFailedData) -> String {
    let mut lines: Vec<String> = data
        .failures
        .iter()
        .map(|f| format!("  {}", f.describe()))
        .collect();
    for (names, label) in [
        (&data.started, "started"),
        (&data.already_running, "already running"),
    ] {
        if !names.is_empty() {
            lines.push(format!("{label}: {}", names.join(", ")));
        }
    }
    lines.join("\n")
}

/// `file:line:col: message (help)` for `ConfigErrors::to_json` entries.
fn render_diagnostics(items: &[serde_json::Value]) -> String {
    items
        .iter()
        .map(|d| {
            let s = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
            let n = |k: &str| d.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
            let mut line = format!(
                "{}:{}:{}: {}",
                s("file"),
                n("line"),
                n("column"),
                s("message")
            );
            if let Some(h) = d.get("help").and_then(|v| v.as_str()) {
                line.push_str(&format!(" ({h})"));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    #[test]
    fn rpc_codes_to_exit() {
        assert_eq!(exit_for_rpc(-32001), Exit::Operational);
        assert_eq!(exit_for_rpc(-32002), Exit::Operational);
        assert_eq!(exit_for_rpc(-32003), Exit::ConfigInvalid);
        assert_eq!(exit_for_rpc(-32006), Exit::Operational);
        assert_eq!(exit_for_rpc(-32602), Exit::Operational);
        assert_eq!(exit_for_rpc(-1), Exit::Operational);
    }

    #[test]
    fn client_errors_to_exit() {
        let connect = ClientError::Connect {
            socket: PathBuf::from("/x"),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert_eq!(Failure::from(connect).exit, Exit::Unreachable);
        let timeout = ClientError::Timeout {
            method: "list".into(),
            after: std::time::Duration::from_secs(5),
        };
        assert_eq!(Failure::from(timeout).exit, Exit::Unreachable);
        assert_eq!(Failure::from(ClientError::Closed).exit, Exit::Unreachable);
        assert_eq!(
            Failure::from(ClientError::Protocol("x".into())).exit,
            Exit::Operational
        );
    }

    #[test]
    fn config_invalid_prints_rendered_diagnostics() {
        let e = RpcError::new(ErrorCode::ConfigInvalid, "config invalid: 1 error")
            .with_data(json!({"rendered": "  × unknown node `working_dir`\n", "diagnostics": []}));
        let f = Failure::from(ClientError::Rpc(e));
        assert_eq!(f.exit, Exit::ConfigInvalid);
        assert_eq!(
            f.message,
            "config invalid: 1 error (xyd keeps running the previous config)"
        );
        assert_eq!(
            f.detail.as_deref(),
            Some("  × unknown node `working_dir`\n")
        );
    }

    #[test]
    fn spawn_failures_name_path_and_error() {
        let e = RpcError::new(ErrorCode::SpawnFailed, "could not start bad").with_data(json!({
            "failures": [{"name": "bad", "path": "/nonexistent/bin", "error": "No such file or directory (os error 2)"}],
            "started": ["a"], "already_running": []
        }));
        let f = Failure::from(e);
        assert_eq!(f.exit, Exit::Operational);
        assert_eq!(
            f.detail.as_deref(),
            Some("  bad: /nonexistent/bin: No such file or directory (os error 2)\nstarted: a")
        );
    }

    #[test]
    fn data_forms() {
        assert_eq!(
            render_data(
                &json!({"path": "/bin/nope", "error": "No such file or directory (os error 2)"})
            ),
            "error: No such file or directory (os error 2)\npath: /bin/nope"
        );
        assert_eq!(
            render_data(
                &json!([{"file": "/c/a.kdl", "line": 3, "column": 1, "message": "unknown node `working_dir`", "help": "did you mean `working-dir`?"}])
            ),
            "/c/a.kdl:3:1: unknown node `working_dir` (did you mean `working-dir`?)"
        );
        assert_eq!(render_data(&json!({"names": ["a", "b"]})), "names: a, b");
        assert_eq!(render_data(&json!(null)), "");
        let f = Failure::new(Exit::Operational, "x").with_detail("  \n");
        assert!(f.detail.is_none());
    }
}
