//! SPEC §10 health probes against real children: the bundled MCP server is
//! healthy over a reused session that is DELETEd on stop, one session lists
//! each spawn once with the probe and the firewall both on, a server that
//! accepts and never answers turns unhealthy and is restarted through the
//! restart policy, HTTP and TCP probes, and no probe without `health`.

#[path = "engine/support.rs"]
mod support;

use std::time::Duration;

use support::{TestEngine, free_port, poll, server};
use xy_core::config::{HealthConfig, ProbeKind, ServerConfig};
use xy_core::protocol::{HealthState, ServerState, StatusResult, TargetParams};

fn mcp_server(name: &str, extra: &[&str], probe: ProbeKind) -> ServerConfig {
    let port = free_port();
    let port_s = port.to_string();
    let mut args = vec!["--port", port_s.as_str()];
    args.extend_from_slice(extra);
    let mut s = server(name, "xy-test-mcp", &args);
    s.port = port;
    s.health = Some(HealthConfig {
        interval: Duration::from_millis(100),
        timeout: Duration::from_millis(500),
        failures: 2,
        start_period: Duration::from_secs(5),
        ..HealthConfig::new(probe)
    });
    s
}

async fn wait_health(t: &TestEngine, name: &str, want: HealthState) -> StatusResult {
    poll(
        &format!("{name} to be {want}"),
        Duration::from_secs(20),
        || async {
            let st = t.engine.status(name).await.unwrap();
            (st.entry.health.state == want).then_some(st)
        },
    )
    .await
}

fn log_text(t: &TestEngine, name: &str) -> String {
    std::fs::read_to_string(t.log_dir().join(format!("{name}.log"))).unwrap_or_default()
}

#[tokio::test]
async fn the_bundled_mcp_server_is_healthy_and_its_session_is_deleted_on_stop() {
    // 2025-only: the session path (initialize, ping, DELETE) is what this checks.
    let t = TestEngine::start(vec![mcp_server(
        "mcp",
        &["--era", "2025"],
        ProbeKind::Mcp("/mcp".into()),
    )])
    .await;
    let st = wait_health(&t, "mcp", HealthState::Healthy).await;
    let h = &st.entry.health;
    assert!(h.latency_ms.is_some() && h.checked_at.is_some(), "{h:?}");
    assert_eq!(h.error, None);
    let first = &st.health_history[0];
    assert_eq!(
        (first.from, first.to),
        (HealthState::Starting, HealthState::Healthy)
    );
    assert!(
        first.reason.contains("initialize and ping answered"),
        "{first:?}"
    );
    let cfg = st.health_config.unwrap();
    assert_eq!(
        (cfg.probe.as_str(), cfg.path.as_deref()),
        ("mcp", Some("/mcp"))
    );
    assert_eq!(
        t.engine.list().await.unwrap()[0].health.state,
        HealthState::Healthy
    );

    // Several probes share one session: one initialize, many pings.
    t.wait_line("mcp", "POST /mcp ping 200").await;
    poll("a third ping", Duration::from_secs(10), || async {
        (log_text(&t, "mcp").matches("POST /mcp ping 200").count() >= 3).then_some(())
    })
    .await;

    t.engine
        .stop_servers(&TargetParams::one("mcp"))
        .await
        .unwrap();
    let log = log_text(&t, "mcp");
    // One handshake: the probe and xy's own listing of the spawn (SPEC
    // §20) share one session, ended on stop.
    assert_eq!(log.matches("POST /mcp initialize 200").count(), 1, "{log}");
    assert_eq!(
        log.matches("POST /mcp notifications/initialized 202")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("DELETE /mcp 202").count(), 1, "{log}");
    // The probe's session ended before the server got SIGTERM.
    let delete = log
        .rfind("DELETE /mcp 202")
        .expect("session deleted on stop");
    let term = log.find("got SIGTERM").expect("SIGTERM logged");
    assert!(delete < term, "{log}");
    let st = t.engine.status("mcp").await.unwrap();
    assert_eq!(st.entry.health.state, HealthState::Unknown);
    t.finish().await;
}

/// xy lists a server's tools once per spawn, shared by the `mcp` probe and
/// the firewall: over many probes each child sees one `tools/list` and
/// (2025) one `initialize`; a session the server forgot (404) costs one
/// more `initialize` and no listing. A 2026 child and a stdio child (whose
/// bridge lists it, the probe reaching it through the bridge) likewise.
#[tokio::test]
async fn one_listing_per_spawn_feeds_the_probe_and_the_firewall() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let sessions_arg = sessions.display().to_string();
    let s25 = mcp_server(
        "s25",
        &["--era", "2025", "--sessions-file", &sessions_arg],
        ProbeKind::Mcp("/mcp".into()),
    );
    let port25 = s25.port;
    let s26 = mcp_server("s26", &["--era", "2026"], ProbeKind::Mcp("/mcp".into()));
    let mut stdio = mcp_server("stdio", &[], ProbeKind::Mcp("/mcp".into()));
    // The port is the bridge's: the child speaks on stdio.
    stdio.args = ["--stdio", "--era", "2025", "--log-methods"]
        .map(String::from)
        .to_vec();
    stdio.transport = xy_core::protocol::Transport::Stdio;
    let t = TestEngine::start(vec![s25, s26, stdio]).await;
    let count = |name: &str, what: &str| log_text(&t, name).matches(what).count();
    for name in ["s25", "s26", "stdio"] {
        poll(
            &format!("{name} listed"),
            Duration::from_secs(20),
            || async {
                let st = t.engine.status(name).await.unwrap();
                let listed = st.mcp.as_ref().is_some_and(|m| m.tool_count == Some(1));
                (listed && st.entry.health.state == HealthState::Healthy).then_some(())
            },
        )
        .await;
        // The firewall decided on that listing.
        assert_eq!(
            t.engine.tools(name).await.unwrap().mode,
            Some(xy_core::firewall::FirewallMode::Pin)
        );
    }
    // A window of probes: ten more of each.
    let (pings25, discovers26, pings_stdio) = (
        count("s25", "POST /mcp ping 200"),
        count("s26", "POST /mcp server/discover 200"),
        count("stdio", "got ping"),
    );
    poll(
        "ten more probes of each",
        Duration::from_secs(20),
        || async {
            (count("s25", "POST /mcp ping 200") >= pings25 + 10
                && count("s26", "POST /mcp server/discover 200") >= discovers26 + 10
                && count("stdio", "got ping") >= pings_stdio + 10)
                .then_some(())
        },
    )
    .await;
    let log = log_text(&t, "s25");
    assert_eq!(count("s25", "POST /mcp initialize 200"), 1, "{log}");
    assert_eq!(count("s25", "POST /mcp tools/list 200"), 1, "{log}");
    let log = log_text(&t, "s26");
    assert_eq!(count("s26", "initialize"), 0, "{log}");
    assert_eq!(count("s26", "POST /mcp tools/list 200"), 1, "{log}");
    // The server's child, and the listing probe of D210 (the same command
    // without client capabilities, writing to the same log): one listing
    // each.
    let log = log_text(&t, "stdio");
    let processes = count("stdio", "serving on stdio");
    assert!((1..=2).contains(&processes), "{log}");
    assert_eq!(count("stdio", "got initialize"), processes, "{log}");
    assert_eq!(count("stdio", "got tools/list"), processes, "{log}");

    // The server forgets the probe's session: the next ping gets 404.
    let id = std::fs::read_to_string(&sessions)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("open ").map(str::to_owned))
        .expect("a session was opened");
    delete_session(port25, &id);
    let pings = count("s25", "POST /mcp ping 200");
    poll("the session renewed", Duration::from_secs(20), || async {
        (count("s25", "POST /mcp ping 404") >= 1 && count("s25", "POST /mcp ping 200") >= pings + 5)
            .then_some(())
    })
    .await;
    let log = log_text(&t, "s25");
    assert_eq!(count("s25", "POST /mcp ping 404"), 1, "{log}");
    assert_eq!(count("s25", "POST /mcp initialize 200"), 2, "{log}");
    assert_eq!(count("s25", "POST /mcp tools/list 200"), 1, "{log}");
    t.finish().await;
}

/// `DELETE` of a 2025 session, as a client ending it would send.
fn delete_session(port: u16, id: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: {id}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 2"), "{answer}");
}

#[tokio::test]
async fn a_hanging_server_turns_unhealthy_and_is_restarted() {
    let mut s = mcp_server("hang", &["--hang"], ProbeKind::Mcp("/mcp".into()));
    let h = s.health.as_mut().unwrap();
    h.timeout = Duration::from_millis(200);
    h.start_period = Duration::ZERO;
    h.restart_on_failure = true;
    let t = TestEngine::start(vec![s]).await;
    let pid = t.wait_running("hang").await;
    let st = poll("a health restart", Duration::from_secs(20), || async {
        let st = t.engine.status("hang").await.unwrap();
        (st.entry.restart_count >= 1 && st.entry.state == ServerState::Running).then_some(st)
    })
    .await;
    assert_ne!(st.entry.pid, Some(pid));
    let unhealthy = st
        .health_history
        .iter()
        .find(|h| h.to == HealthState::Unhealthy)
        .expect("an unhealthy verdict was recorded");
    assert!(
        unhealthy
            .reason
            .contains("2 failed probes: no answer within 200ms"),
        "{unhealthy:?}"
    );
    let exit = st
        .transitions
        .iter()
        .find(|t| t.from == ServerState::Running && t.to == ServerState::Restarting)
        .expect("the restart went through the policy");
    assert!(
        exit.reason
            .contains("stopped by xy: 2 failed health checks"),
        "{exit:?}"
    );
    t.finish().await;
}

#[tokio::test]
async fn http_and_tcp_probes() {
    let mut ok = mcp_server("ok", &[], ProbeKind::Http("/health".into()));
    let mut missing = mcp_server("missing", &[], ProbeKind::Http("/nope".into()));
    missing.health.as_mut().unwrap().start_period = Duration::ZERO;
    let tcp = mcp_server("tcp", &[], ProbeKind::Tcp);
    let mut plain = mcp_server("plain", &[], ProbeKind::Tcp);
    plain.health = None;
    ok.health.as_mut().unwrap().restart_on_failure = true;
    let t = TestEngine::start(vec![ok, missing, tcp, plain]).await;
    wait_health(&t, "ok", HealthState::Healthy).await;
    wait_health(&t, "tcp", HealthState::Healthy).await;
    let st = wait_health(&t, "missing", HealthState::Unhealthy).await;
    assert_eq!(
        st.entry.health.error.as_deref(),
        Some("GET /nope answered HTTP 404")
    );
    // Without restart-on-failure it keeps running.
    assert_eq!(st.entry.restart_count, 0);
    assert_eq!(st.entry.state, ServerState::Running);
    let st = t.engine.status("plain").await.unwrap();
    assert_eq!(st.entry.health.state, HealthState::Unknown);
    assert!(st.health_config.is_none() && st.health_history.is_empty());
    // No probe ever reached the server without `health`.
    assert!(!log_text(&t, "plain").contains("GET "));
    t.finish().await;
}

/// The MCP probe against a real third-party server: the reference
/// `@modelcontextprotocol/server-everything` in its streamable HTTP mode.
/// Skips loudly without node/npm or an unreachable registry.
#[tokio::test]
async fn the_probe_speaks_mcp_with_server_everything() {
    let se = match tokio::task::spawn_blocking(xy_testbins::interop::server_everything)
        .await
        .unwrap()
    {
        xy_testbins::interop::Interop::Ready(se) => se,
        xy_testbins::interop::Interop::Skip(skip) => {
            return skip.announce("the_probe_speaks_mcp_with_server_everything");
        }
    };
    let port = free_port();
    let mut s = server("everything", "xy-test-sleep", &[]);
    let (node, args, env) = se.streamable_http_command(port);
    s.command = node.display().to_string();
    s.args = args;
    s.env.extend(env);
    s.env.insert(
        "PATH".into(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    );
    s.port = port;
    s.stop.grace = Duration::from_secs(5);
    s.health = Some(HealthConfig {
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(2),
        failures: 3,
        start_period: Duration::from_secs(30),
        ..HealthConfig::new(ProbeKind::Mcp("/mcp".into()))
    });
    let t = TestEngine::start(vec![s]).await;
    let st = wait_health(&t, "everything", HealthState::Healthy).await;
    assert!(
        st.health_history
            .iter()
            .any(|h| h.reason.contains("initialize and ping answered")),
        "{:?}",
        st.health_history
    );
    // The TypeScript SDK's server speaks 2025 only.
    let st = poll("its tools listed", Duration::from_secs(20), || async {
        let st = t.engine.status("everything").await.unwrap();
        st.mcp
            .as_ref()
            .is_some_and(|m| m.tool_count.is_some())
            .then_some(st)
    })
    .await;
    let m = st.mcp.clone().unwrap();
    assert_eq!(m.era, xy_core::protocol::mcp::McpEra::V2025, "{m:?}");
    assert!(
        m.protocol_version.starts_with("2025-") && m.tool_count > Some(0),
        "{m:?}"
    );
    // A few more probes on the same session stay healthy.
    let checked = st.entry.health.checked_at.clone();
    let st = poll("a later probe", Duration::from_secs(10), || async {
        let st = t.engine.status("everything").await.unwrap();
        (st.entry.health.checked_at != checked).then_some(st)
    })
    .await;
    assert_eq!(
        st.entry.health.state,
        HealthState::Healthy,
        "{:?}",
        st.entry.health
    );
    t.engine
        .stop_servers(&TargetParams::one("everything"))
        .await
        .unwrap();
    let log = log_text(&t, "everything");
    assert!(
        log.contains("Received session termination request"),
        "the probe's session was ended with DELETE:\n{log}"
    );
    t.finish().await;
}

/// The MCP probe against the official Python SDK's server (mcp 2.x,
/// streamable HTTP): a dual-era server, so it is probed the 2026 way.
#[tokio::test]
async fn the_probe_speaks_2026_with_the_python_sdk() {
    let sdk = match tokio::task::spawn_blocking(xy_testbins::interop::python_sdk)
        .await
        .unwrap()
    {
        xy_testbins::interop::Interop::Ready(sdk) => sdk,
        xy_testbins::interop::Interop::Skip(skip) => {
            return skip.announce("the_probe_speaks_2026_with_the_python_sdk");
        }
    };
    let port = free_port();
    let mut s = server("python", "xy-test-sleep", &[]);
    let (python, args) = sdk.fastmcp_command(port);
    s.command = python.display().to_string();
    s.args = args;
    s.port = port;
    s.stop.grace = Duration::from_secs(5);
    s.health = Some(HealthConfig {
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(2),
        failures: 3,
        start_period: Duration::from_secs(60),
        ..HealthConfig::new(ProbeKind::Mcp("/mcp".into()))
    });
    let t = TestEngine::start(vec![s]).await;
    let st = poll("python tools listed", Duration::from_secs(60), || async {
        let st = t.engine.status("python").await.unwrap();
        st.mcp
            .as_ref()
            .is_some_and(|m| m.tool_count.is_some())
            .then_some(st)
    })
    .await;
    assert_eq!(st.entry.health.state, HealthState::Healthy);
    let m = st.mcp.unwrap();
    assert_eq!(m.era, xy_core::protocol::mcp::McpEra::V2026, "{m:?}");
    assert_eq!(m.protocol_version, "2026-07-28");
    assert_eq!(m.server_name.as_deref(), Some("xy-interop-python"));
    assert_eq!(m.tool_count, Some(2));
    let tools = t.engine.tools("python").await.unwrap();
    let names: Vec<_> = tools
        .current
        .unwrap()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["add", "shout"]);
    t.finish().await;
}
