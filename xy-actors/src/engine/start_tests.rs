//! `start` outcomes through the engine, on a paused clock with the mock
//! child.

use std::time::Duration;

use xy_core::config::ConfigSet;
use xy_core::protocol::{ServerState, TargetParams};

use super::stall_tests::config;
use super::{Engine, EngineOptions};
use crate::server::mock::MockSpawner;

/// Issue 26: a start that a stop overtakes (it waited for a stop in
/// progress, then a second stop came) is reported in `cancelled`; it used
/// to be dropped, and `xyctl start` printed nothing and exited 0.
#[tokio::test(start_paused = true)]
async fn a_start_overtaken_by_a_stop_is_reported_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    let spawner = MockSpawner::new();
    // The stop then waits out the whole grace.
    spawner.ignore_term(true);
    let set = ConfigSet {
        dir: dir.path().to_owned(),
        servers: [("x".to_owned(), config("x", 9301))].into(),
        warnings: Vec::new(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
    };
    let engine = Engine::start_with(set, opts, spawner).await.unwrap();
    let x = || TargetParams::one("x");
    let e = engine.clone();
    let first = tokio::spawn(async move { e.stop_servers(&x()).await });
    while engine.status("x").await.unwrap().entry.state != ServerState::Stopping {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = engine.clone();
    let start = tokio::spawn(async move { e.start_servers(&x()).await });
    // The clock is paused: it moves only once every task is idle, so the
    // start has reached the ServerActor (and waits there) when this ends,
    // well inside the stop's grace.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!start.is_finished());
    let second = engine.stop_servers(&x()).await.unwrap();
    assert_eq!(second.stopped, ["x"]);
    let started = start.await.unwrap().unwrap();
    assert_eq!(started.cancelled, ["x"], "{started:?}");
    assert!(started.started.is_empty() && started.already_running.is_empty());
    first.await.unwrap().unwrap();
    assert_eq!(
        engine.status("x").await.unwrap().entry.state,
        ServerState::Stopped
    );
    engine.shutdown().await.unwrap();
}

/// An engine with plain servers (some probed over MCP, none remote) and no
/// login builds no outbound HTTP client: the TLS stacks (rustls, the
/// platform's roots, reqwest) are set up on first use, which here is the
/// first remote grant.
#[tokio::test(start_paused = true)]
async fn plain_servers_build_no_outbound_http_client() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    let servers = (0..10u16)
        .map(|i| {
            let name = format!("s{i}");
            let mut c = config(&name, 9400 + i);
            if i % 2 == 0 {
                c.health = Some(xy_core::config::HealthConfig::new(
                    xy_core::config::ProbeKind::Mcp("/mcp".into()),
                ));
            }
            (name, c)
        })
        .collect();
    let set = ConfigSet {
        dir: dir.path().to_owned(),
        servers,
        warnings: Vec::new(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
    };
    let engine = Engine::start_with(set, opts, MockSpawner::new())
        .await
        .unwrap();
    for i in 0..10 {
        let name = format!("s{i}");
        while engine.status(&name).await.unwrap().entry.state != ServerState::Running {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // Past every probe's first rounds and every listing's last attempt.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(!engine.oauth().http_built());
    // The first remote grant builds it.
    let auth = xy_core::config::OAuthConfig::default();
    let _ = engine
        .oauth()
        .credentials("r", "https://mcp.example.invalid/mcp", &auth);
    assert!(engine.oauth().http_built());
    engine.shutdown().await.unwrap();
}
