//! Test support: the `xy-testbins` children (built once if missing), config
//! builders with fast timings, an engine in a tempdir, and waits built on
//! `xy_testbins::wait::poll`.
#![allow(unreachable_pub, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use xy_actors::{Engine, EngineOptions};
use xy_core::config::{ConfigSet, RestartConfig, RestartPolicy, ServerConfig, StopConfig};
use xy_core::protocol::{ListEntry, ServerState};

/// A test binary from `xy-testbins` (built once if missing).
pub fn bin(name: &str) -> PathBuf {
    xy_testbins::locate::testbin(name)
}

/// A port nothing listens on right now (the kernel's pick, released), never
/// one handed out before in this test process.
pub fn free_port() -> u16 {
    xy_testbins::locate::free_port()
}

/// A server running testbin `bin_name` with fast test timings.
pub fn server(name: &str, bin_name: &str, args: &[&str]) -> ServerConfig {
    let command = bin(bin_name).display().to_string();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    ServerConfig {
        name: name.to_owned(),
        source: PathBuf::from(format!("/configs/{name}.kdl")),
        command,
        args,
        port: 0,
        transport: Default::default(),
        remote: None,
        path: "/mcp".into(),
        on_demand: None,
        env: BTreeMap::new(),
        working_dir: None,
        restart: RestartConfig {
            policy: RestartPolicy::OnFailure,
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(100),
            max_retries_per_minute: 5,
        },
        stop: StopConfig {
            grace: Duration::from_millis(300),
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

pub fn set(servers: Vec<ServerConfig>) -> ConfigSet {
    ConfigSet {
        dir: PathBuf::from("/configs"),
        servers: servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
        warnings: Vec::new(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
    }
}

/// An engine over a tempdir; shut down on `finish` (and best effort on drop).
pub struct TestEngine {
    pub engine: Engine,
    pub dir: tempfile::TempDir,
}

impl TestEngine {
    pub async fn start(servers: Vec<ServerConfig>) -> TestEngine {
        TestEngine::start_with(servers, |_| {}).await
    }

    pub async fn start_with(
        servers: Vec<ServerConfig>,
        tweak: impl FnOnce(&mut EngineOptions),
    ) -> TestEngine {
        // Reparented grandchildren come to us and are reaped, as in xyd.
        xy_actors::become_subreaper().expect("subreaper");
        let dir = tempfile::tempdir().unwrap();
        let mut opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
        tweak(&mut opts);
        let engine = Engine::start(set(servers), opts)
            .await
            .expect("engine start");
        TestEngine { engine, dir }
    }

    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    pub async fn entry(&self, name: &str) -> ListEntry {
        self.engine.status(name).await.expect("status").entry
    }

    /// Waits until `name` is in `state`; returns its entry.
    pub async fn wait_state(&self, name: &str, state: ServerState) -> ListEntry {
        poll(
            &format!("{name} to be {state}"),
            Duration::from_secs(20),
            || async {
                let e = self.entry(name).await;
                (e.state == state).then_some(e)
            },
        )
        .await
    }

    /// Waits until `name` is running with a pid; returns the pid.
    pub async fn wait_running(&self, name: &str) -> u32 {
        let e = self.wait_state(name, ServerState::Running).await;
        e.pid.expect("running without pid")
    }

    /// Waits until `name` runs again with a pid other than `old` (its actor
    /// replaced after a panic); returns the new pid.
    pub async fn wait_respawned(&self, name: &str, old: u32) -> u32 {
        poll(
            &format!("{name} to come back"),
            Duration::from_secs(10),
            || async {
                let e = self.engine.status(name).await.ok()?.entry;
                (e.state == ServerState::Running && e.pid.is_some_and(|p| p != old))
                    .then(|| e.pid.unwrap())
            },
        )
        .await
    }

    /// Waits until a buffered line of `name` starts with `prefix`.
    pub async fn wait_line(&self, name: &str, prefix: &str) {
        poll(
            &format!("{name} to print {prefix:?}"),
            Duration::from_secs(10),
            || async {
                let sub = self
                    .engine
                    .subscribe_logs(&[name.to_owned()], None, false)
                    .await
                    .unwrap();
                sub.backlog
                    .iter()
                    .any(|l| l.line.starts_with(prefix))
                    .then_some(())
            },
        )
        .await;
    }

    pub async fn finish(self) {
        self.engine.shutdown().await.expect("shutdown");
    }
}

/// Polls an async condition with a deadline (scaled by
/// `XY_TEST_TIMEOUT_FACTOR`).
pub use xy_testbins::wait::poll;

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat[stat.rfind(')').unwrap() + 1..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_owned();
                state != "Z" && state != "X"
            }
            Err(_) => false,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
    }
}

/// Waits until `pid` is dead or a zombie.
pub async fn wait_dead(pid: u32) {
    poll(
        &format!("pid {pid} to die"),
        Duration::from_secs(10),
        || async { (!alive(pid)).then_some(()) },
    )
    .await;
}

/// Reads a pid written by `xy-test-fork --pidfile`.
pub async fn read_pidfile(path: &Path) -> u32 {
    poll("pidfile", Duration::from_secs(10), || async {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
    .await
}

/// Parses an RFC 3339 transition timestamp.
pub fn ts(s: &str) -> std::time::SystemTime {
    humantime::parse_rfc3339(s).expect("rfc3339")
}
