//! A slow pre-spawn port check (a hung `/proc`, a process with 10,000 fds)
//! must stall nobody: not `list`, not other servers' starts, not the
//! `status` of the server being checked. Run on a runtime with ONE worker
//! thread, so a check on an actor's handler or an async worker would stop
//! everything and the deadlines below would fire.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xy_core::config::{ConfigSet, RestartConfig, RestartPolicy, ServerConfig, StopConfig};
use xy_core::protocol::{ServerState, TargetParams};

use super::{Engine, EngineOptions};
use crate::log_router::sink::SharedSink;
use crate::os::ports::PortHolder;
use crate::os::spawn::SpawnError;
use crate::server::mock::MockSpawner;
use crate::server::process::{ChildHandle, ChildSpawner};

/// The mock spawner, except that the pre-spawn port check of `slow_port`
/// blocks its thread until the test releases it.
struct GatedPortCheck {
    inner: Arc<MockSpawner>,
    slow_port: u16,
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
    /// Set when a blocked check returns (released, or given up after
    /// [`DEADLINE`] so a stalled runtime ends the test instead of hanging).
    returned: AtomicBool,
}

impl ChildSpawner for GatedPortCheck {
    fn spawn(
        &self,
        config: &ServerConfig,
        sink: &SharedSink,
    ) -> Result<Arc<dyn ChildHandle>, SpawnError> {
        self.inner.spawn(config, sink)
    }

    fn port_holder(&self, port: u16, own_pgid: Option<i32>) -> Option<PortHolder> {
        // Only the pre-spawn check (the one after an early exit names the
        // group it exempts).
        if port == self.slow_port && own_pgid.is_none() {
            let _ = self.entered.lock().unwrap().send(());
            // Blocks like a read of a hung filesystem would.
            let _ = self.release.lock().unwrap().recv_timeout(DEADLINE);
            self.returned.store(true, Ordering::SeqCst);
        }
        None
    }
}

pub(super) fn config(name: &str, port: u16) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        source: format!("{name}.kdl").into(),
        command: "/mock/server".into(),
        args: vec![],
        port,
        transport: Default::default(),
        remote: None,
        path: "/mcp".into(),
        on_demand: None,
        env: Default::default(),
        working_dir: None,
        restart: RestartConfig {
            policy: RestartPolicy::OnFailure,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(400),
            max_retries_per_minute: 5,
        },
        stop: StopConfig {
            grace: Duration::from_secs(1),
        },
        health: None,
        env_files: Vec::new(),
        secrets: Vec::new(),
        hooks: Default::default(),
        agent: Default::default(),
        firewall: None,
        sandbox: None,
        package: None,
        autostart: true,
    }
}

/// Generous: the machine is shared; a stall is forever, not slow.
const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_slow_port_check_stalls_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let spawner = Arc::new(GatedPortCheck {
        inner: MockSpawner::new(),
        slow_port: 9050,
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
        returned: AtomicBool::new(false),
    });
    let mut servers = std::collections::BTreeMap::new();
    for i in 0..49u16 {
        let name = format!("s{i:02}");
        servers.insert(name.clone(), config(&name, 9000 + i));
    }
    servers.insert("slow".to_owned(), config("slow", 9050));
    let set = ConfigSet {
        dir: dir.path().to_owned(),
        servers,
        warnings: Vec::new(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
    };
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    // The boot's check of `slow` passes at once.
    release_tx.send(()).unwrap();
    let engine = Engine::start_with(set, opts, spawner.clone())
        .await
        .unwrap();
    entered_rx.recv_timeout(DEADLINE).unwrap();
    spawner.returned.store(false, Ordering::SeqCst);
    assert_eq!(engine.list().await.unwrap().len(), 50);

    // Restart every server: `slow`'s next check blocks until released.
    let restart = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.restart_servers(&TargetParams::all()).await })
    };
    tokio::task::spawn_blocking(move || entered_rx.recv_timeout(DEADLINE))
        .await
        .unwrap()
        .expect("the slow port check began");

    // Every other server comes up, and `list` answers, meanwhile.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let list = loop {
        let list = tokio::time::timeout(DEADLINE, engine.list())
            .await
            .expect("list answered while a port check blocks")
            .unwrap();
        let running = list
            .iter()
            .filter(|e| e.state == ServerState::Running)
            .count();
        if running == 49 {
            break list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {running} of 49 running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // All of that happened while the check was still blocked (a stalled
    // runtime would answer only once the check gave up).
    assert!(
        !spawner.returned.load(Ordering::SeqCst),
        "list waited for the port check"
    );
    let slow = list.iter().find(|e| e.name == "slow").unwrap();
    assert_eq!(slow.state, ServerState::Starting);
    // The server being checked answers too: its actor is not blocked.
    let st = tokio::time::timeout(DEADLINE, engine.status("slow"))
        .await
        .expect("status answered while its own port check blocks")
        .unwrap();
    assert_eq!(st.entry.state, ServerState::Starting);
    assert!(
        !spawner.returned.load(Ordering::SeqCst),
        "status waited for the port check"
    );

    // Released, it spawns, and the restart call reports all 50.
    release_tx.send(()).unwrap();
    let restarted = restart.await.unwrap().unwrap();
    assert_eq!(restarted.restarted.len(), 50);
    assert_eq!(
        engine.status("slow").await.unwrap().entry.state,
        ServerState::Running
    );
    engine.shutdown().await.unwrap();
}
