//! The engine's public handle: every operation the RPC layer needs, each a
//! message to the actor tree with a bounded wait. CONTRACT with `xy-daemon`:
//! keep these signatures stable (bodies are being written).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use xy_core::config::ConfigSet;
use xy_core::protocol::{
    ListEntry, LogStream, ReloadResult, RestartResult, RpcError, StartResult, StatusResult,
    StopResult, TargetParams,
};

/// Where the engine writes.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// `<name>.log` files go here.
    pub log_dir: PathBuf,
    /// Child records for the orphan sweep go here.
    pub run_dir: PathBuf,
}

/// One captured output line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Server that printed it.
    pub name: Arc<str>,
    /// stdout or stderr.
    pub stream: LogStream,
    /// The line without newline (lossy UTF-8, at most 64 KiB).
    pub line: String,
    /// Capture time.
    pub ts: SystemTime,
}

/// What a live log subscription yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    /// A new line.
    Line(LogLine),
    /// The follower fell behind and has been dropped; nothing follows.
    Lagged,
}

/// A log stream: the buffered tail, then (when following) live lines.
#[derive(Debug)]
pub struct LogSubscription {
    /// Buffered lines, oldest first, merged across servers by time.
    pub backlog: Vec<LogLine>,
}

impl LogSubscription {
    /// The next live event; `None` when not following or every source ended.
    pub async fn recv(&mut self) -> Option<LogEvent> {
        unimplemented!("being written")
    }
}

/// One server that could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// Server name.
    pub name: String,
    /// The command path tried.
    pub path: String,
    /// The OS error, as text.
    pub error: String,
}

/// Why an engine operation failed. Maps to a JSON-RPC error in one place.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// Names that are not configured.
    #[error("no such server: {}", .0.join(", "))]
    ServerNotFound(Vec<String>),
    /// At least one spawn failed; the rest of the outcome is kept.
    #[error("could not start {}", .failures.iter().map(|f| format!("{}: {} ({})", f.name, f.error, f.path)).collect::<Vec<_>>().join("; "))]
    SpawnFailed {
        /// Every failed spawn.
        failures: Vec<SpawnFailure>,
        /// What did start.
        started: Vec<String>,
        /// What was already running.
        already_running: Vec<String>,
    },
    /// An actor did not answer in time or is gone (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<&EngineError> for RpcError {
    fn from(e: &EngineError) -> RpcError {
        let _ = e;
        unimplemented!("being written")
    }
}

/// Cloneable handle over the running actor tree.
#[derive(Debug, Clone)]
pub struct Engine {}

impl Engine {
    /// Spawns the tree and asks every server to start (does not wait for them).
    pub async fn start(configs: ConfigSet, opts: EngineOptions) -> Result<Engine, EngineError> {
        let _ = (configs, opts);
        unimplemented!("being written")
    }

    /// Every configured server, sorted by name.
    pub async fn list(&self) -> Result<Vec<ListEntry>, EngineError> {
        unimplemented!("being written")
    }

    /// One server in detail.
    pub async fn status(&self, name: &str) -> Result<StatusResult, EngineError> {
        let _ = name;
        unimplemented!("being written")
    }

    /// Starts servers; returns once each is spawned or failed to spawn.
    pub async fn start_servers(&self, target: &TargetParams) -> Result<StartResult, EngineError> {
        let _ = target;
        unimplemented!("being written")
    }

    /// Stops servers; returns once each process group is gone.
    pub async fn stop_servers(&self, target: &TargetParams) -> Result<StopResult, EngineError> {
        let _ = target;
        unimplemented!("being written")
    }

    /// Stop then start; starts stopped or failed servers too.
    pub async fn restart_servers(&self, target: &TargetParams) -> Result<RestartResult, EngineError> {
        let _ = target;
        unimplemented!("being written")
    }

    /// Applies a freshly loaded config set: start added, stop removed,
    /// restart changed (by content hash), leave unchanged alone.
    pub async fn reload(&self, configs: ConfigSet) -> Result<ReloadResult, EngineError> {
        let _ = configs;
        unimplemented!("being written")
    }

    /// Number of configured servers.
    pub async fn server_count(&self) -> Result<usize, EngineError> {
        unimplemented!("being written")
    }

    /// Subscribes to log lines of `names` (empty: every server). `tail`:
    /// buffered lines per server to include (`None`: all buffered).
    pub async fn subscribe_logs(
        &self,
        names: &[String],
        tail: Option<usize>,
        follow: bool,
    ) -> Result<LogSubscription, EngineError> {
        let _ = (names, tail, follow);
        unimplemented!("being written")
    }

    /// Stops every server in parallel (deadline `2 × max(grace)`), then the tree.
    pub async fn shutdown(&self) -> Result<(), EngineError> {
        unimplemented!("being written")
    }

    /// Fault injection for tests: makes the named ServerActor panic. The daemon
    /// exposes it only in debug builds.
    #[doc(hidden)]
    pub async fn inject_panic(&self, name: &str) -> Result<(), EngineError> {
        let _ = name;
        unimplemented!("being written")
    }
}
