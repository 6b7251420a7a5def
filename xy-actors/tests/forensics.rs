//! SPEC §10 forensics against real children: a port held by a foreign
//! process fails the start with the holder named (no crash loop), an early
//! exit is explained with the holder, and `status.explain` classifies a
//! missing command and an immediate exit; CPU and RSS figures of a child
//! that holds a known amount of memory.

#[path = "engine/support.rs"]
mod support;

use std::time::Duration;

use support::{TestEngine, free_port, poll, server};
use xy_actors::EngineError;
use xy_core::protocol::{ServerState, SpawnErrorKind, TargetParams};

#[tokio::test]
async fn a_foreign_port_holder_is_named_and_the_start_fails() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let mut s = server("mcp", "xy-test-mcp", &["--port", &port.to_string()]);
    s.port = port;
    let t = TestEngine::start(vec![s]).await;
    // The auto-start already failed: straight to `failed`, no restarts.
    let e = t.wait_state("mcp", ServerState::Failed).await;
    assert_eq!(e.restart_count, 0);
    assert_eq!(e.pid, None);

    let err = t
        .engine
        .start_servers(&TargetParams::one("mcp"))
        .await
        .unwrap_err();
    let EngineError::SpawnFailed { failures, .. } = &err else {
        panic!("{err:?}");
    };
    let me = std::process::id();
    let want = format!("port {port} is held by pid {me} (");
    assert!(err.to_string().contains(&want), "{err}");
    let f = &failures[0];
    assert!(f.error.contains(&want), "{f:?}");
    assert_eq!(f.kind, SpawnErrorKind::PortHeld);
    let holder = f.port_holder.as_ref().expect("the holder, as data");
    assert_eq!(holder.pid, Some(me));
    assert_eq!(holder.port, port);
    assert!(
        holder.command.as_deref().unwrap().contains("forensics"),
        "the test binary's own command line: {f:?}"
    );

    let st = t.engine.status("mcp").await.unwrap();
    assert_eq!(st.entry.restart_count, 0);
    let explain = st.explain.expect("explain while failed");
    assert!(explain.starts_with("port in use: "), "{explain}");
    assert!(explain.contains(&want), "{explain}");
    let last = st.transitions.last().unwrap();
    assert_eq!(last.to, ServerState::Failed);
    assert!(last.reason.contains(&want), "{}", last.reason);

    // Once the port is free, start works.
    drop(held);
    t.engine
        .start_servers(&TargetParams::one("mcp"))
        .await
        .unwrap();
    t.wait_running("mcp").await;
    assert_eq!(t.engine.status("mcp").await.unwrap().explain, None);
    t.finish().await;
}

#[tokio::test]
async fn an_early_exit_names_the_holder_then_the_retry_fails_cleanly() {
    let port = free_port();
    let mut s = server(
        "late",
        "xy-test-mcp",
        &["--port", &port.to_string(), "--bind-delay-ms", "600"],
    );
    s.port = port;
    s.restart.backoff_initial = Duration::from_millis(200);
    s.restart.backoff_max = Duration::from_millis(200);
    let t = TestEngine::start(vec![s]).await;
    t.wait_running("late").await;
    // The child is up but not yet bound: take its port from under it.
    let _held = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let me = std::process::id();
    let want = format!("port {port} is held by pid {me}");
    let st = poll("the retry to fail", Duration::from_secs(20), || async {
        let st = t.engine.status("late").await.unwrap();
        (st.entry.state == ServerState::Failed).then_some(st)
    })
    .await;
    // First the exit (with the holder), then the refused respawn.
    let reasons: Vec<&str> = st.transitions.iter().map(|t| t.reason.as_str()).collect();
    let exit = st
        .transitions
        .iter()
        .find(|t| t.from == ServerState::Running)
        .expect("an exit transition");
    assert!(
        exit.reason.contains("exited with code 1") && exit.reason.contains(&want),
        "{reasons:?}"
    );
    assert_eq!(st.entry.restart_count, 1, "{reasons:?}");
    let explain = st.explain.unwrap();
    assert!(explain.contains(&want), "{explain}");
    t.finish().await;
}

#[tokio::test]
async fn explain_classifies_a_missing_command_and_an_immediate_exit() {
    let mut missing = server("missing", "xy-test-sleep", &[]);
    missing.command = "/nonexistent/bin/insikt-mcp".into();
    let mut dies = server("dies", "xy-test-exit", &["--code", "3"]);
    dies.restart.backoff_initial = Duration::from_secs(30);
    dies.restart.backoff_max = Duration::from_secs(30);
    let t = TestEngine::start(vec![missing, dies]).await;
    t.wait_state("missing", ServerState::Failed).await;
    let st = t.engine.status("missing").await.unwrap();
    assert_eq!(
        st.explain.as_deref(),
        Some("command not found: /nonexistent/bin/insikt-mcp")
    );

    let st = poll("dies to back off", Duration::from_secs(10), || async {
        let st = t.engine.status("dies").await.unwrap();
        let ready = st.entry.state == ServerState::Restarting
            && st
                .explain
                .as_deref()
                .is_some_and(|e| e.contains("exiting with code 3"));
        ready.then_some(st)
    })
    .await;
    let explain = st.explain.unwrap();
    assert!(
        explain.starts_with("exited immediately with code 3; last stderr: "),
        "{explain}"
    );
    assert!(explain.contains("exiting with code 3"), "{explain}");
    assert!(explain.contains("; next retry at "), "{explain}");
    // Running servers have nothing to explain.
    assert_eq!(t.engine.list().await.unwrap().len(), 2);
    t.finish().await;
}

#[tokio::test]
async fn resource_figures_cover_the_group_and_are_null_when_stopped() {
    let t = TestEngine::start(vec![
        server("big", "xy-test-sleep", &["--allocate-mb", "64"]),
        server("idle", "xy-test-sleep", &["--interval-ms", "1000"]),
    ])
    .await;
    t.wait_running("big").await;
    t.wait_line("big", "allocated 64 MiB").await;
    let list = t.engine.list().await.unwrap();
    let big = &list[0];
    let rss = big.rss_bytes.expect("rss while running");
    assert!(rss >= 64 << 20, "rss {rss} of a child holding 64 MiB");
    assert!(rss < 1 << 30, "rss {rss} implausibly large");
    let cpu = big.cpu_percent.expect("cpu while running");
    assert!((0.0..=400.0).contains(&cpu), "cpu {cpu}");
    let idle = &list[1];
    assert!(idle.rss_bytes.unwrap() < 64 << 20, "{idle:?}");
    // A later sample is a delta: an idle sleeper uses next to no CPU.
    let again = poll("an idle delta", Duration::from_secs(10), || async {
        let st = t.engine.status("idle").await.unwrap();
        st.entry.cpu_percent.filter(|c| *c < 50.0)
    })
    .await;
    assert!(again >= 0.0);

    t.engine
        .stop_servers(&TargetParams::one("big"))
        .await
        .unwrap();
    let st = t.engine.status("big").await.unwrap();
    assert_eq!((st.entry.cpu_percent, st.entry.rss_bytes), (None, None));
    t.finish().await;
}
