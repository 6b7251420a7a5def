//! Wire-shape pins for every method, notification and error code: each type
//! is serialised and compared with literal JSON taken from SPEC §6 and the
//! seed's table, then parsed back.

use super::*;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Serialises `v`, compares with `want`, and parses `want` back into `v`.
fn pin<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T, want: Value) {
    let got = serde_json::to_value(v).unwrap();
    assert_eq!(got, want, "serialised shape");
    let back: T = serde_json::from_value(want).unwrap();
    assert_eq!(&back, v, "round trip");
}

fn entry() -> ListEntry {
    ListEntry {
        name: "insikt".into(),
        state: ServerState::Running,
        pid: Some(4242),
        port: 8421,
        transport: Transport::Http,
        url: "http://127.0.0.1:8421/mcp".into(),
        uptime_secs: Some(125),
        restart_count: 1,
        last_exit: Some(LastExit {
            code: None,
            signal: Some("SIGKILL".into()),
            ts: "2026-11-30T05:04:54.123Z".into(),
        }),
        health: Health {
            state: HealthState::Healthy,
            latency_ms: Some(3),
            error: None,
            checked_at: Some("2026-11-30T05:06:59.001Z".into()),
        },
        cpu_percent: Some(0.5),
        rss_bytes: Some(12_582_912),
        tool_count: Some(3),
        tools_held: 0,
        agent_allow_restart: false,
        remote_url: None,
        gateway_url: None,
    }
}

#[test]
fn method_names() {
    assert_eq!(
        method::ALL,
        [
            "list",
            "status",
            "start",
            "stop",
            "restart",
            "reload",
            "logs",
            "logs_cancel",
            "events",
            "events_cancel",
            "daemon_status",
            "shutdown",
            "tools",
            "calls",
            "calls_cancel",
            "tools_approve",
            "tools_deny",
            "sandbox_test",
            "auth_login",
            "auth_login_wait",
            "auth_status",
            "auth_logout",
            "console_code",
            "tools_search",
            "clients"
        ]
    );
    assert_eq!(method::LOG, "log");
    assert_eq!(method::LOG_END, "log_end");
}

#[test]
fn error_codes() {
    let want = [
        (ErrorCode::ParseError, -32700),
        (ErrorCode::InvalidRequest, -32600),
        (ErrorCode::MethodNotFound, -32601),
        (ErrorCode::InvalidParams, -32602),
        (ErrorCode::InternalError, -32603),
        (ErrorCode::ServerNotFound, -32001),
        (ErrorCode::PortConflict, -32002),
        (ErrorCode::ConfigInvalid, -32003),
        (ErrorCode::AlreadyRunning, -32004),
        (ErrorCode::NotRunning, -32005),
        (ErrorCode::SpawnFailed, -32006),
        (ErrorCode::AuthFailed, -32007),
        (ErrorCode::DigestChanged, -32008),
    ];
    for (c, n) in want {
        assert_eq!(c.code(), n);
        assert_eq!(ErrorCode::from_code(n), Some(c));
    }
    assert_eq!(ErrorCode::from_code(-1), None);
    pin(
        &RpcError::new(ErrorCode::ServerNotFound, "no such server: nope")
            .with_data(json!({"names": ["nope"]})),
        json!({"code": -32001, "message": "no such server: nope", "data": {"names": ["nope"]}}),
    );
    pin(
        &RpcError::new(ErrorCode::MethodNotFound, "Method not found"),
        json!({"code": -32601, "message": "Method not found"}),
    );
    assert_eq!(
        RpcError::new(ErrorCode::SpawnFailed, "x").kind(),
        Some(ErrorCode::SpawnFailed)
    );
}

#[test]
fn states() {
    for (s, w) in [
        (ServerState::Stopped, "stopped"),
        (ServerState::Starting, "starting"),
        (ServerState::Running, "running"),
        (ServerState::Restarting, "restarting"),
        (ServerState::Failed, "failed"),
        (ServerState::Stopping, "stopping"),
        (ServerState::Idle, "idle"),
    ] {
        pin(&s, json!(w));
        assert_eq!(s.to_string(), w);
    }
}

#[test]
fn list_entry_keys_always_present() {
    pin(
        &entry(),
        json!({
            "name": "insikt", "state": "running", "pid": 4242, "port": 8421,
            "transport": "http", "url": "http://127.0.0.1:8421/mcp",
            "uptime_secs": 125, "restart_count": 1,
            "last_exit": {"code": null, "signal": "SIGKILL", "ts": "2026-11-30T05:04:54.123Z"},
            "health": {"state": "healthy", "latency_ms": 3, "error": null,
                       "checked_at": "2026-11-30T05:06:59.001Z"},
            "cpu_percent": 0.5, "rss_bytes": 12_582_912, "tool_count": 3, "tools_held": 0, "agent_allow_restart": false, "remote_url": null,
            "gateway_url": null
        }),
    );
    let stopped = ListEntry {
        state: ServerState::Stopped,
        pid: None,
        uptime_secs: None,
        restart_count: 0,
        last_exit: None,
        health: Health::default(),
        cpu_percent: None,
        rss_bytes: None,
        tool_count: None,
        tools_held: 0,
        agent_allow_restart: false,
        remote_url: None,
        gateway_url: None,
        ..entry()
    };
    pin(
        &stopped,
        json!({
            "name": "insikt", "state": "stopped", "pid": null, "port": 8421,
            "transport": "http", "url": "http://127.0.0.1:8421/mcp",
            "uptime_secs": null, "restart_count": 0, "last_exit": null,
            "health": {"state": "unknown", "latency_ms": null, "error": null, "checked_at": null},
            "cpu_percent": null, "rss_bytes": null, "tool_count": null, "tools_held": 0, "agent_allow_restart": false, "remote_url": null,
            "gateway_url": null
        }),
    );
    for (s, w) in [
        (HealthState::Healthy, "healthy"),
        (HealthState::Unhealthy, "unhealthy"),
        (HealthState::Starting, "starting"),
        (HealthState::Unknown, "unknown"),
    ] {
        pin(&s, json!(w));
        assert_eq!(s.to_string(), w);
    }
}

#[test]
fn status_result() {
    let s = StatusResult {
        entry: entry(),
        transitions: vec![Transition {
            from: ServerState::Starting,
            to: ServerState::Running,
            ts: "2026-11-30T05:04:54.123Z".into(),
            reason: "spawned pid 4242".into(),
        }],
        command: "/usr/bin/insikt-mcp".into(),
        args: vec!["--http".into()],
        working_dir: None,
        env_keys: vec!["RUST_LOG".into()],
        restart: RestartSettings {
            policy: "on-failure".into(),
            backoff_initial_ms: 1000,
            backoff_max_ms: 30000,
            max_retries_per_minute: 5,
        },
        stop: StopSettings { grace_ms: 10000 },
        config_file: "/h/.config/xy/servers/insikt.kdl".into(),
        explain: Some("exited immediately with code 1; last stderr: boom".into()),
        next_retry_at: None,
        health_config: Some(HealthSettings {
            probe: "mcp".into(),
            path: Some("/mcp".into()),
            interval_ms: 10_000,
            timeout_ms: 2000,
            failures: 3,
            start_period_ms: 30_000,
            restart_on_failure: true,
        }),
        health_history: vec![HealthTransition {
            from: HealthState::Starting,
            to: HealthState::Healthy,
            ts: "2026-11-30T05:04:55.001Z".into(),
            reason: "ping answered in 3 ms".into(),
        }],
        mcp: Some(mcp::McpStatus {
            protocol_version: "2026-07-28".into(),
            era: mcp::McpEra::V2026,
            server_name: Some("insikt".into()),
            server_version: Some("0.4.1".into()),
            tool_count: Some(3),
            tools_added: vec!["search".into()],
            tools_removed: vec![],
            tools_changed: vec![],
            listed_at: Some("2026-11-30T05:04:55.002Z".into()),
        }),
        secrets: Vec::new(),
        sandbox: None,
        package: None,
        remote: None,
        dropped_notifications: 0,
    };
    pin(
        &s,
        json!({
            "name": "insikt", "state": "running", "pid": 4242, "port": 8421,
            "transport": "http", "url": "http://127.0.0.1:8421/mcp",
            "uptime_secs": 125, "restart_count": 1,
            "last_exit": {"code": null, "signal": "SIGKILL", "ts": "2026-11-30T05:04:54.123Z"},
            "health": {"state": "healthy", "latency_ms": 3, "error": null,
                       "checked_at": "2026-11-30T05:06:59.001Z"},
            "cpu_percent": 0.5, "rss_bytes": 12_582_912, "tool_count": 3, "tools_held": 0, "agent_allow_restart": false, "remote_url": null, "gateway_url": null,
            "transitions": [{"from": "starting", "to": "running",
                             "ts": "2026-11-30T05:04:54.123Z", "reason": "spawned pid 4242"}],
            "command": "/usr/bin/insikt-mcp", "args": ["--http"], "working_dir": null,
            "env_keys": ["RUST_LOG"],
            "restart": {"policy": "on-failure", "backoff_initial_ms": 1000,
                        "backoff_max_ms": 30000, "max_retries_per_minute": 5},
            "stop": {"grace_ms": 10000},
            "config_file": "/h/.config/xy/servers/insikt.kdl",
            "explain": "exited immediately with code 1; last stderr: boom",
            "next_retry_at": null,
            "health_config": {"probe": "mcp", "path": "/mcp", "interval_ms": 10000,
                              "timeout_ms": 2000, "failures": 3, "start_period_ms": 30000,
                              "restart_on_failure": true},
            "health_history": [{"from": "starting", "to": "healthy",
                                "ts": "2026-11-30T05:04:55.001Z",
                                "reason": "ping answered in 3 ms"}],
            "mcp": {"protocol_version": "2026-07-28", "era": "2026", "server_name": "insikt",
                    "server_version": "0.4.1", "tool_count": 3, "tools_added": ["search"],
                    "tools_removed": [], "tools_changed": [],
                    "listed_at": "2026-11-30T05:04:55.002Z"},
            "secrets": [],
            "sandbox": null,
            "package": null,
            "remote": null,
            "dropped_notifications": 0
        }),
    );
}

#[test]
fn target_params() {
    pin(&NameParams { name: "a".into() }, json!({"name": "a"}));
    pin(&TargetParams::one("a"), json!({"name": "a"}));
    pin(&TargetParams::all(), json!({"all": true}));
    pin(
        &TargetParams::many(vec!["a".into(), "b".into()]),
        json!({"names": ["a", "b"]}),
    );
    let p: TargetParams =
        serde_json::from_value(json!({"name": "a", "names": ["b", "a"]})).unwrap();
    assert_eq!(p.requested_names(), ["a", "b"]);
    assert!(
        serde_json::from_value::<TargetParams>(json!({}))
            .unwrap()
            .is_empty()
    );
    assert!(!TargetParams::all().is_empty());
    assert!(serde_json::from_value::<TargetParams>(json!({"nmae": "a"})).is_err());
    assert!(serde_json::from_value::<TargetParams>(json!({"name": 3})).is_err());
}

#[test]
fn control_results() {
    pin(
        &StartResult {
            started: vec!["a".into()],
            already_running: vec![],
            cancelled: vec![],
        },
        json!({"started": ["a"], "already_running": []}),
    );
    pin(
        &StartResult {
            started: vec![],
            already_running: vec![],
            cancelled: vec!["a".into()],
        },
        json!({"started": [], "already_running": [], "cancelled": ["a"]}),
    );
    pin(
        &StopResult {
            stopped: vec![],
            not_running: vec!["b".into()],
        },
        json!({"stopped": [], "not_running": ["b"]}),
    );
    pin(
        &RestartResult {
            restarted: vec!["a".into()],
            cancelled: vec![],
        },
        json!({"restarted": ["a"]}),
    );
    pin(
        &ReloadResult {
            added: vec!["n".into()],
            removed: vec![],
            changed: vec!["c".into()],
            unchanged: vec!["u".into()],
        },
        json!({"added": ["n"], "removed": [], "changed": ["c"], "unchanged": ["u"]}),
    );
    pin(&ShutdownResult {}, json!({}));
}

#[test]
fn logs_params_and_notifications() {
    pin(
        &LogsParams {
            name: Some("a".into()),
            tail: Some(10),
            follow: true,
            ..LogsParams::default()
        },
        json!({"name": "a", "tail": 10, "follow": true}),
    );
    let all: LogsParams = serde_json::from_value(json!({})).unwrap();
    assert!(all.requested_names().is_empty());
    assert!(!all.follow);
    let many: LogsParams = serde_json::from_value(json!({"names": ["a", "b"]})).unwrap();
    assert_eq!(many.requested_names(), ["a", "b"]);
    pin(
        &LogsResult { subscription_id: 7 },
        json!({"subscription_id": 7}),
    );
    pin(
        &LogNotification {
            subscription_id: 7,
            name: "a".into(),
            stream: LogStream::Stderr,
            line: "boom".into(),
            ts: "2026-11-30T05:04:54.123Z".into(),
        },
        json!({"subscription_id": 7, "name": "a", "stream": "stderr", "line": "boom",
               "ts": "2026-11-30T05:04:54.123Z"}),
    );
    pin(
        &LogEndNotification {
            subscription_id: 7,
            reason: Some(LogEndReason::Lagged),
        },
        json!({"subscription_id": 7, "reason": "lagged"}),
    );
    for (r, w) in [
        (LogEndReason::Complete, "complete"),
        (LogEndReason::Cancelled, "cancelled"),
        (LogEndReason::Lagged, "lagged"),
        (LogEndReason::Shutdown, "shutdown"),
        (LogEndReason::Removed, "removed"),
    ] {
        pin(&r, json!(w));
    }
    pin(
        &LogsCancelParams { subscription_id: 7 },
        json!({"subscription_id": 7}),
    );
    pin(
        &LogsCancelResult { cancelled: false },
        json!({"cancelled": false}),
    );
    assert_eq!(LogStream::Stdout.tag(), "out");
    assert_eq!(LogStream::Stderr.tag(), "err");
}

#[test]
fn daemon_status() {
    pin(
        &DaemonStatus {
            version: "0.1.0".into(),
            protocol: PROTOCOL_VERSION,
            pid: 10,
            started_at: "2026-11-30T05:04:54.123Z".into(),
            uptime_secs: 3,
            socket: "/run/user/1000/xy.sock".into(),
            config_dir: "/h/.config/xy/servers".into(),
            log_dir: "/h/.local/state/xy/logs".into(),
            servers: 2,
            boot: None,
            gateway: Some(GatewayStatus {
                url: "http://127.0.0.1:8399/".into(),
                error: None,
            }),
        },
        json!({"version": "0.1.0", "protocol": 1, "pid": 10,
               "started_at": "2026-11-30T05:04:54.123Z", "uptime_secs": 3,
               "socket": "/run/user/1000/xy.sock", "config_dir": "/h/.config/xy/servers",
               "log_dir": "/h/.local/state/xy/logs", "servers": 2,
               "gateway": {"url": "http://127.0.0.1:8399/", "error": null}}),
    );
}

#[test]
fn daemon_status_while_booting() {
    let v = json!({"version": "0.1.0", "protocol": 1, "pid": 10,
           "started_at": "2026-11-30T05:04:54.123Z", "uptime_secs": 3,
           "socket": "/s", "config_dir": "/c", "log_dir": "/l", "servers": 2,
           "boot": {"phase": "sweeping_orphans", "orphans": 20, "orphans_left": 7,
                    "grace_secs": 10}});
    let d: DaemonStatus = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(
        d.boot,
        Some(BootProgress {
            phase: BootPhase::SweepingOrphans,
            orphans: 20,
            orphans_left: 7,
            grace_secs: 10,
        })
    );
    pin(&d, v);
}

#[test]
fn envelopes() {
    pin(
        &Request::new(1, method::LIST, None::<Value>),
        json!({"jsonrpc": "2.0", "id": 1, "method": "list"}),
    );
    pin(
        &Request::new(2, method::STATUS, Some(NameParams { name: "a".into() })),
        json!({"jsonrpc": "2.0", "id": 2, "method": "status", "params": {"name": "a"}}),
    );
    let note: Incoming = serde_json::from_value(json!({
        "jsonrpc": "2.0", "method": "log_end", "params": {"subscription_id": 1, "reason": "complete"}
    }))
    .unwrap();
    assert_eq!(note.method.as_deref(), Some("log_end"));
    assert!(note.id.is_none());
    let err: Incoming = serde_json::from_value(json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}
    }))
    .unwrap();
    assert_eq!(err.error.unwrap().kind(), Some(ErrorCode::ParseError));
}

#[test]
fn tools_result_keys_always_present() {
    use crate::protocol::mcp::{ToolSummary, ToolsResult};
    // SPEC §6: every key of a result is present, `reasons: []` on a tool
    // held back for nothing.
    let tool = ToolSummary {
        name: "echo".into(),
        ..ToolSummary::default()
    };
    pin(
        &tool,
        json!({"name": "echo", "title": null, "description": null, "digest": null,
               "state": null, "reasons": [], "warnings": [], "input_schema": null, "approved": null,
               "calls": null}),
    );
    pin(
        &ToolsResult {
            name: "a".into(),
            current: None,
            previous: None,
            added: vec![],
            removed: vec![],
            changed: vec![],
            mode: None,
            prompts: vec![],
            resources: vec![],
        },
        json!({"name": "a", "current": null, "previous": null, "added": [], "removed": [],
               "changed": [], "mode": null, "prompts": [], "resources": []}),
    );
    pin(
        &CallsResult::default(),
        json!({"calls": [], "subscription_id": null, "totals": {}}),
    );
}
