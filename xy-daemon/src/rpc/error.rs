//! The one mapping of engine errors to JSON-RPC errors (SPEC §6 codes):
//! the engine says what failed as typed data, this file picks the code,
//! the message and the `data` shape from `xy_core::protocol`.

use xy_actors::EngineError;
use xy_core::protocol::{ErrorCode, RpcError, SpawnFailedData};

/// The wire error for an engine failure.
pub(crate) fn engine_rpc_error(e: &EngineError) -> RpcError {
    match e {
        EngineError::ServerNotFound(names) => {
            RpcError::new(ErrorCode::ServerNotFound, e.to_string())
                .with_data(serde_json::json!({ "names": names }))
        }
        EngineError::SpawnFailed {
            failures,
            started,
            already_running,
        } => {
            let data = SpawnFailedData {
                failures: failures.clone(),
                started: started.clone(),
                already_running: already_running.clone(),
            };
            let rpc = RpcError::new(ErrorCode::SpawnFailed, e.to_string());
            match serde_json::to_value(&data) {
                Ok(data) => rpc.with_data(data),
                Err(_) => rpc,
            }
        }
        EngineError::ReloadIncomplete { applied, error } => {
            RpcError::new(ErrorCode::InternalError, e.to_string()).with_data(serde_json::json!({
                "applied": applied,
                "error": error.to_string(),
            }))
        }
        EngineError::UnknownTools { server, names } => {
            RpcError::new(ErrorCode::InvalidParams, e.to_string())
                .with_data(serde_json::json!({ "server": server, "unknown": names }))
        }
        EngineError::DigestChanged { server, changed } => {
            let data = xy_core::protocol::mcp::DigestChangedData {
                server: server.clone(),
                changed: changed.clone(),
            };
            let rpc = RpcError::new(ErrorCode::DigestChanged, e.to_string());
            match serde_json::to_value(&data) {
                Ok(data) => rpc.with_data(data),
                Err(_) => rpc,
            }
        }
        EngineError::Internal(_) => RpcError::new(ErrorCode::InternalError, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_actors::{SecretFailure, SpawnFailure};
    use xy_core::protocol::{PortHolder, SpawnErrorKind};

    fn failure(name: &str, kind: SpawnErrorKind, error: &str) -> SpawnFailure {
        SpawnFailure {
            name: name.into(),
            path: "/nonexistent/xy-server".into(),
            error: error.into(),
            kind,
            port_holder: None,
            secret: None,
        }
    }

    #[test]
    fn not_found_lists_the_names() {
        let rpc = engine_rpc_error(&EngineError::ServerNotFound(vec!["nope".into()]));
        assert_eq!(rpc.code, ErrorCode::ServerNotFound.code());
        assert_eq!(rpc.data.unwrap()["names"][0], "nope");
    }

    #[test]
    fn spawn_failed_keeps_every_field() {
        let mut held = failure(
            "mcp",
            SpawnErrorKind::PortHeld,
            "port 9 is held by pid 7 (nc -l 9)",
        );
        held.port_holder = Some(PortHolder {
            port: 9,
            pid: Some(7),
            command: Some("nc -l 9".into()),
            uid: Some(1000),
        });
        let mut secret = failure(
            "s",
            SpawnErrorKind::Secret,
            "secret `API_KEY` (command `op`): exited with code 7",
        );
        secret.secret = Some(Box::new(SecretFailure {
            name: "API_KEY".into(),
            kind: "command".into(),
            source: "command `op`".into(),
            reason: "exited with code 7".into(),
            exit_code: Some(7),
        }));
        let err = EngineError::SpawnFailed {
            failures: vec![
                failure(
                    "missing",
                    SpawnErrorKind::NotFound,
                    "No such file or directory (os error 2)",
                ),
                held,
                secret,
            ],
            started: vec![],
            already_running: vec!["ok".into()],
        };
        let rpc = engine_rpc_error(&err);
        assert_eq!(rpc.code, -32006);
        // The path sits next to the error it caused; a port holder's
        // sentence stands alone.
        assert!(
            rpc.message.starts_with(
                "could not start missing: /nonexistent/xy-server: No such file or directory (os error 2); \
                 mcp: port 9 is held by pid 7 (nc -l 9)"
            ),
            "{}",
            rpc.message
        );
        let data = rpc.data.unwrap();
        let f = &data["failures"];
        assert_eq!(f[0]["path"], "/nonexistent/xy-server");
        assert_eq!(f[0]["kind"], "not_found");
        assert!(f[0].get("port_holder").is_none() && f[0].get("secret").is_none());
        assert_eq!(
            f[1]["port_holder"],
            serde_json::json!({"port": 9, "pid": 7, "command": "nc -l 9", "uid": 1000})
        );
        assert_eq!(f[1]["kind"], "port_held");
        assert_eq!(
            f[2]["secret"],
            serde_json::json!({"name": "API_KEY", "kind": "command", "source": "command `op`",
                               "reason": "exited with code 7", "exit_code": 7})
        );
        assert_eq!(data["already_running"][0], "ok");
        assert_eq!(data["started"], serde_json::json!([]));
        // What the client decodes is what was sent.
        let back: SpawnFailedData = serde_json::from_value(data).unwrap();
        let EngineError::SpawnFailed { failures, .. } = &err else {
            unreachable!()
        };
        assert_eq!(&back.failures, failures);
    }

    #[test]
    fn internal_is_32603() {
        let rpc = engine_rpc_error(&EngineError::Internal("x".into()));
        assert_eq!(rpc.code, -32603);
    }
}
