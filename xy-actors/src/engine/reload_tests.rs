//! A reload that fails partway (an injected failure on its third server)
//! leaves the actor tree and the ConfigActor agreeing on what was applied,
//! and the next reload applies exactly the rest.

use std::time::Duration;

use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::ServerState;

use super::super::stall_tests::config;
use super::super::{Engine, EngineError, EngineOptions};
use crate::server::mock::MockSpawner;

fn set(dir: &std::path::Path, cfgs: Vec<ServerConfig>) -> ConfigSet {
    ConfigSet {
        dir: dir.to_owned(),
        servers: cfgs.into_iter().map(|c| (c.name.clone(), c)).collect(),
        warnings: Vec::new(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
    }
}

async fn names_running(engine: &Engine) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = engine.list().await.unwrap();
        if list.iter().all(|e| e.state == ServerState::Running) {
            return list.into_iter().map(|e| e.name).collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all running: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_reload_failing_on_its_third_server_leaves_a_consistent_state() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    let old = set(dir.path(), vec![config("a", 9101), config("b", 9102)]);
    let engine = Engine::start_with(old, opts, MockSpawner::new())
        .await
        .unwrap();
    assert_eq!(names_running(&engine).await, ["a", "b"]);

    let mut a2 = config("a", 9101);
    a2.args = vec!["--v2".into()];
    let new = set(
        dir.path(),
        vec![
            a2,
            config("b", 9102),
            config("c", 9103),
            config("d", 9104),
            config("e", 9105),
        ],
    );
    // The steps run in this order: a (changed), then c, d, e (added). The
    // third, d, fails.
    *engine.inner.reload_fault.lock().unwrap() = Some("d".into());
    let err = engine.reload(new.clone()).await.unwrap_err();
    let EngineError::ReloadIncomplete { applied, error } = &err else {
        panic!("expected ReloadIncomplete, got {err:?}");
    };
    assert_eq!(applied.changed, ["a"], "{err}");
    assert_eq!(applied.added, ["c"], "{err}");
    assert!(applied.removed.is_empty(), "{err}");
    assert!(error.to_string().contains("applying d"), "{err}");
    assert!(
        err.to_string().contains("applied: added c; changed a"),
        "{err}"
    );

    // The consistent state: a (with its new config), b and c, all running,
    // in the actor tree and in the ConfigActor alike; d and e nowhere.
    assert_eq!(names_running(&engine).await, ["a", "b", "c"]);
    assert_eq!(engine.server_count().await.unwrap(), 3);
    assert_eq!(engine.status("a").await.unwrap().args, ["--v2"]);
    assert!(matches!(
        engine.status("d").await,
        Err(EngineError::ServerNotFound(_))
    ));

    // Reloading the same directory again applies exactly the rest: had the
    // ConfigActor kept the old set, a and c would count as changed/added.
    *engine.inner.reload_fault.lock().unwrap() = None;
    let r = engine.reload(new).await.unwrap();
    assert_eq!(r.added, ["d", "e"]);
    assert!(r.changed.is_empty() && r.removed.is_empty(), "{r:?}");
    assert_eq!(r.unchanged, ["a", "b", "c"]);
    assert_eq!(names_running(&engine).await, ["a", "b", "c", "d", "e"]);
    assert_eq!(engine.server_count().await.unwrap(), 5);
    engine.shutdown().await.unwrap();
}

async fn state_of(engine: &Engine, name: &str) -> ServerState {
    engine.status(name).await.unwrap().entry.state
}

/// SPEC §18: `autostart #false` servers stay `stopped` at boot and at every
/// reload (added or changed while stopped); a changed one that runs is
/// restarted; `start` starts them.
#[tokio::test]
async fn autostart_false_servers_are_left_stopped_by_boot_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    let mut quiet = config("quiet", 9201);
    quiet.autostart = false;
    let engine = Engine::start_with(
        set(dir.path(), vec![config("a", 9200), quiet.clone()]),
        opts,
        MockSpawner::new(),
    )
    .await
    .unwrap();
    assert_eq!(state_of(&engine, "a").await, ServerState::Running);
    assert_eq!(state_of(&engine, "quiet").await, ServerState::Stopped);

    // Added stopped; changed while stopped: still stopped.
    let mut later = config("later", 9202);
    later.autostart = false;
    let mut quiet2 = quiet.clone();
    quiet2.args = vec!["--v2".into()];
    let r = engine
        .reload(set(
            dir.path(),
            vec![config("a", 9200), quiet2.clone(), later.clone()],
        ))
        .await
        .unwrap();
    assert_eq!(
        (r.added, r.changed),
        (vec!["later".into()], vec!["quiet".into()])
    );
    assert_eq!(state_of(&engine, "quiet").await, ServerState::Stopped);
    assert_eq!(state_of(&engine, "later").await, ServerState::Stopped);

    // `start` starts it; a change while it runs restarts it.
    let started = engine
        .start_servers(&xy_core::protocol::TargetParams::one("quiet"))
        .await
        .unwrap();
    assert_eq!(started.started, ["quiet"]);
    let pid = engine.status("quiet").await.unwrap().entry.pid;
    let mut quiet3 = quiet2.clone();
    quiet3.args = vec!["--v3".into()];
    engine
        .reload(set(dir.path(), vec![config("a", 9200), quiet3, later]))
        .await
        .unwrap();
    let st = engine.status("quiet").await.unwrap();
    assert_eq!(st.entry.state, ServerState::Running);
    assert_ne!(st.entry.pid, pid);
    assert_eq!(st.args, ["--v3"]);
    engine.shutdown().await.unwrap();
}
