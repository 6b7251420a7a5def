//! The engine's public handle: every operation the RPC layer needs, each a
//! message to the actor tree with a bounded wait. CONTRACT with `xy-daemon`:
//! keep these signatures stable (bodies are being written).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ractor::{Actor, ActorRef, RpcReplyPort};
use tokio::sync::{broadcast, mpsc};
use tokio::task::{JoinHandle, JoinSet};
use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::{
    ErrorCode, ListEntry, LogStream, ReloadResult, RestartResult, RpcError, ServerState,
    StartResult, StatusResult, StopResult, TargetParams,
};

use crate::config_actor::ConfigMsg;
use crate::log_router::LogRouterMsg;
use crate::log_router::ring::DEFAULT_RING_BYTES;
use crate::log_router::rotating::RotatingWriter;
use crate::log_router::sink::{DEFAULT_FOLLOW_BUFFER, SinkSettings};
use crate::server::process::{ChildSpawner, RealSpawner};
use crate::server::{ServerMsg, StartOutcome, StopOutcome};
use crate::supervisor::{Refs, RootArgs, RootMsg, RootSupervisor, ServerRef};

/// Where the engine writes, and the log sizes.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// `<name>.log` files go here.
    pub log_dir: PathBuf,
    /// Child records for the orphan sweep go here.
    pub run_dir: PathBuf,
    /// Size at which `<name>.log` rotates (SPEC §5: 10 MB); tests lower it.
    pub rotate_bytes: u64,
    /// Bytes of line text kept in each server's ring buffer (~1 MiB).
    pub ring_bytes: usize,
    /// Lines a live follower may fall behind before it is dropped (`Lagged`).
    pub follow_buffer: usize,
}

impl EngineOptions {
    /// The given directories with the SPEC's default sizes.
    pub fn new(log_dir: impl Into<PathBuf>, run_dir: impl Into<PathBuf>) -> EngineOptions {
        EngineOptions {
            log_dir: log_dir.into(),
            run_dir: run_dir.into(),
            ..EngineOptions::default()
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            log_dir: PathBuf::new(),
            run_dir: PathBuf::new(),
            rotate_bytes: RotatingWriter::DEFAULT_MAX_BYTES,
            ring_bytes: DEFAULT_RING_BYTES,
            follow_buffer: DEFAULT_FOLLOW_BUFFER,
        }
    }
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
    live: Option<mpsc::Receiver<LogEvent>>,
    forwarders: Vec<JoinHandle<()>>,
}

impl LogSubscription {
    /// The next live event; `None` when not following or every source ended.
    /// After [`LogEvent::Lagged`] it yields `None`.
    pub async fn recv(&mut self) -> Option<LogEvent> {
        let rx = self.live.as_mut()?;
        match rx.recv().await {
            Some(LogEvent::Lagged) => {
                self.end();
                Some(LogEvent::Lagged)
            }
            Some(ev) => Some(ev),
            None => {
                self.end();
                None
            }
        }
    }

    fn end(&mut self) {
        self.live = None;
        for f in self.forwarders.drain(..) {
            f.abort();
        }
    }
}

impl Drop for LogSubscription {
    fn drop(&mut self) {
        self.end();
    }
}

/// Live lines buffered per subscription between the forwarders and `recv`.
const SUBSCRIPTION_BUFFER: usize = 256;

/// Moves one server's broadcast into the subscription's channel. It only ever
/// waits on its own subscriber, so a slow one lags (and is dropped) without
/// slowing the pumps or other followers.
async fn forward(mut rx: broadcast::Receiver<LogLine>, tx: mpsc::Sender<LogEvent>) {
    loop {
        match rx.recv().await {
            Ok(line) => {
                if tx.send(LogEvent::Line(line)).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let _ = tx.send(LogEvent::Lagged).await;
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// One server that could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// Server name.
    pub name: String,
    /// The command path tried.
    pub path: String,
    /// The OS error, as text (or who holds the port).
    pub error: String,
    /// The foreign process listening on the server's port, when that is
    /// why the start was refused.
    pub port_holder: Option<crate::ports::PortHolder>,
}

impl SpawnFailure {
    /// `name: path: error`, the path next to the error it caused; a port
    /// holder's sentence stands alone (the command is not at fault).
    fn describe(&self) -> String {
        if self.port_holder.is_some() {
            format!("{}: {}", self.name, self.error)
        } else {
            format!("{}: {}: {}", self.name, self.path, self.error)
        }
    }
}

/// Why an engine operation failed. Maps to a JSON-RPC error in one place.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// Names that are not configured.
    #[error("no such server: {}", .0.join(", "))]
    ServerNotFound(Vec<String>),
    /// At least one spawn failed; the rest of the outcome is kept.
    #[error("could not start {}", .failures.iter().map(SpawnFailure::describe).collect::<Vec<_>>().join("; "))]
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
        match e {
            EngineError::ServerNotFound(names) => {
                RpcError::new(ErrorCode::ServerNotFound, e.to_string()).with_data(serde_json::json!({ "names": names }))
            }
            EngineError::SpawnFailed {
                failures,
                started,
                already_running,
            } => RpcError::new(ErrorCode::SpawnFailed, e.to_string()).with_data(serde_json::json!({
                "failures": failures
                    .iter()
                    .map(|f| {
                        let mut v = serde_json::json!({ "name": f.name, "path": f.path, "error": f.error });
                        if let Some(h) = &f.port_holder {
                            v["port_holder"] = serde_json::json!({
                                "port": h.port, "pid": h.pid, "command": h.command, "uid": h.uid,
                            });
                        }
                        v
                    })
                    .collect::<Vec<_>>(),
                "started": started,
                "already_running": already_running,
            })),
            EngineError::Internal(_) => RpcError::new(ErrorCode::InternalError, e.to_string()),
        }
    }
}

/// Bound on queries that never wait on a child (refs, status, diff).
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Added to a server's grace for calls that wait on its stop: SIGKILL and
/// the group's disappearance take milliseconds, this is the safety margin.
const STOP_MARGIN: Duration = Duration::from_secs(5);
/// Bound on waiting for SIGKILLed groups to vanish at shutdown.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Cloneable handle over the running actor tree.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    root: ActorRef<RootMsg>,
    root_task: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Serialises reload and shutdown, which each span many actor calls.
    ops: tokio::sync::Mutex<()>,
    /// The latest resource scan per group. Not actor state: only `list`
    /// and `status` touch it, briefly and never across an `.await`.
    sampler: std::sync::Mutex<crate::resources::Sampler>,
    /// Held across a scan, so concurrent callers with stale figures wait
    /// for one scan instead of each running their own.
    scanning: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("root", &self.inner.root.get_id())
            .finish()
    }
}

fn internal(what: &str, err: impl std::fmt::Display) -> EngineError {
    EngineError::Internal(format!("{what}: {err}"))
}

/// One request/reply to an actor with a bounded wait.
async fn ask<M, T>(
    actor: &ActorRef<M>,
    what: &str,
    timeout: Duration,
    build: impl FnOnce(RpcReplyPort<T>) -> M,
) -> Result<T, EngineError>
where
    M: ractor::Message,
    T: Send + 'static,
{
    match actor.call(build, Some(timeout)).await {
        Ok(ractor::rpc::CallResult::Success(v)) => Ok(v),
        Ok(ractor::rpc::CallResult::Timeout) => Err(internal(
            what,
            format!("no answer within {}", humantime::format_duration(timeout)),
        )),
        Ok(ractor::rpc::CallResult::SenderError) => {
            Err(internal(what, "the actor dropped the request"))
        }
        Err(_) => Err(internal(what, "the actor is not running")),
    }
}

async fn start_one(s: &ServerRef) -> Result<StartOutcome, EngineError> {
    // A start may first wait for a stop in progress.
    ask(
        &s.actor,
        &format!("start {}", s.name),
        s.grace + STOP_MARGIN * 2,
        |tx| ServerMsg::Start(Some(tx)),
    )
    .await
}

async fn stop_one(s: &ServerRef) -> Result<StopOutcome, EngineError> {
    ask(
        &s.actor,
        &format!("stop {}", s.name),
        s.grace + STOP_MARGIN,
        ServerMsg::Stop,
    )
    .await
}

/// Runs `f` for every target concurrently; results in target order.
async fn for_each<T, F, Fut>(targets: Vec<ServerRef>, f: F) -> Result<Vec<(String, T)>, EngineError>
where
    T: Send + 'static,
    F: Fn(ServerRef) -> Fut,
    Fut: std::future::Future<Output = Result<T, EngineError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    for (i, s) in targets.into_iter().enumerate() {
        let name = s.name.clone();
        let fut = f(s);
        set.spawn(async move { (i, name, fut.await) });
    }
    let mut out = Vec::new();
    let mut first_err = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, name, Ok(v))) => out.push((i, name, v)),
            Ok((_, _, Err(e))) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(internal("engine task", e));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    out.sort_by_key(|(i, _, _)| *i);
    Ok(out.into_iter().map(|(_, n, v)| (n, v)).collect())
}

impl Engine {
    /// Spawns the tree and starts every server, returning once each first
    /// spawn happened or failed (a failure leaves that server `failed`).
    pub async fn start(configs: ConfigSet, opts: EngineOptions) -> Result<Engine, EngineError> {
        let spawner = Arc::new(RealSpawner {
            run_dir: opts.run_dir.clone(),
        });
        Engine::start_with(configs, opts, spawner).await
    }

    /// [`Engine::start`] with any child spawner (unit tests use a mock).
    pub(crate) async fn start_with(
        configs: ConfigSet,
        opts: EngineOptions,
        spawner: Arc<dyn ChildSpawner>,
    ) -> Result<Engine, EngineError> {
        for dir in [&opts.log_dir, &opts.run_dir] {
            if let Err(e) = std::fs::create_dir_all(dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot create directory");
            }
        }
        let args = RootArgs {
            configs,
            sinks: SinkSettings {
                log_dir: opts.log_dir,
                rotate_bytes: opts.rotate_bytes,
                ring_bytes: opts.ring_bytes,
                follow_buffer: opts.follow_buffer,
            },
            spawner,
        };
        // Unnamed: several engines may live in one process (tests).
        let (root, task) = Actor::spawn(None, RootSupervisor, args)
            .await
            .map_err(|e| internal("starting the actor tree", e))?;
        let engine = Engine {
            inner: Arc::new(Inner {
                root,
                root_task: std::sync::Mutex::new(Some(task)),
                ops: tokio::sync::Mutex::new(()),
                sampler: std::sync::Mutex::default(),
                scanning: tokio::sync::Mutex::const_new(()),
            }),
        };
        // Auto-start, waiting for every first spawn: the first `list` after
        // boot (often from the `xyctl list` that spawned the daemon) then shows
        // the servers running rather than not yet started. A spawn failure is
        // the server's state (`failed`), not the engine's.
        match engine.start_servers(&TargetParams::all()).await {
            Ok(_) => {}
            Err(EngineError::SpawnFailed { failures, .. }) => {
                for f in failures {
                    tracing::warn!(server = %f.name, path = %f.path, error = %f.error, "could not start at boot");
                }
            }
            Err(e) => return Err(e),
        }
        Ok(engine)
    }

    async fn refs(&self) -> Result<Refs, EngineError> {
        ask(
            &self.inner.root,
            "root supervisor",
            QUERY_TIMEOUT,
            RootMsg::Refs,
        )
        .await
    }

    /// The servers `target` names, or every server; unknown names fail
    /// before anything is done.
    fn select(refs: &Refs, target: &TargetParams) -> Result<Vec<ServerRef>, EngineError> {
        if target.all {
            return Ok(refs.servers.clone());
        }
        let names = target.requested_names();
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| !refs.servers.iter().any(|s| &s.name == *n))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(EngineError::ServerNotFound(unknown));
        }
        Ok(names
            .iter()
            .filter_map(|n| refs.servers.iter().find(|s| &s.name == n).cloned())
            .collect())
    }

    async fn snapshots(&self, targets: Vec<ServerRef>) -> Result<Vec<StatusResult>, EngineError> {
        let all = for_each(targets, |s| async move {
            ask(
                &s.actor,
                &format!("status of {}", s.name),
                QUERY_TIMEOUT,
                ServerMsg::Snapshot,
            )
            .await
        })
        .await?;
        Ok(all.into_iter().map(|(_, v)| v).collect())
    }

    /// Fills CPU % and RSS of the running entries. Figures younger than
    /// [`crate::resources::MAX_AGE`] are reused; otherwise one process-table
    /// scan for all of them runs off the async threads (never in an actor).
    async fn add_resources(&self, entries: &mut [ListEntry]) {
        let pgids: Vec<i32> = entries
            .iter()
            .filter_map(|e| e.pid.and_then(|p| i32::try_from(p).ok()))
            .collect();
        if self.fill_if_fresh(entries, &pgids) {
            return;
        }
        let _scan = self.inner.scanning.lock().await;
        // Another caller may have scanned while this one waited.
        if self.fill_if_fresh(entries, &pgids) {
            return;
        }
        let uptimes: std::collections::HashMap<i32, std::time::Duration> = entries
            .iter()
            .filter_map(|e| {
                let pgid = i32::try_from(e.pid?).ok()?;
                Some((pgid, std::time::Duration::from_secs(e.uptime_secs?)))
            })
            .collect();
        let scan = pgids.clone();
        let usage = tokio::task::spawn_blocking(move || crate::resources::sample(&scan))
            .await
            .unwrap_or_default();
        let mut sampler = self.sampler();
        sampler.record(&pgids, &usage, std::time::Instant::now(), |g| {
            uptimes.get(&g).copied()
        });
        sampler.fill(entries);
    }

    fn fill_if_fresh(&self, entries: &mut [ListEntry], pgids: &[i32]) -> bool {
        let sampler = self.sampler();
        let fresh = sampler.is_fresh(pgids, std::time::Instant::now());
        if fresh {
            sampler.fill(entries);
        }
        fresh
    }

    fn sampler(&self) -> std::sync::MutexGuard<'_, crate::resources::Sampler> {
        self.inner
            .sampler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every configured server, sorted by name. One message to the root,
    /// which reads the snapshots the ServerActors publish (see
    /// `docs/architecture.md`, "list"). CPU/RSS figures are at most 1 s old;
    /// CPU % is averaged since the group's previous sample (since the child
    /// started, for the first).
    pub async fn list(&self) -> Result<Vec<ListEntry>, EngineError> {
        let mut entries = ask(&self.inner.root, "list", QUERY_TIMEOUT, RootMsg::List).await?;
        self.add_resources(&mut entries).await;
        Ok(entries)
    }

    /// One server in detail.
    pub async fn status(&self, name: &str) -> Result<StatusResult, EngineError> {
        let refs = self.refs().await?;
        let target = Engine::select(&refs, &TargetParams::one(name))?;
        let mut status = self
            .snapshots(target)
            .await?
            .pop()
            .ok_or_else(|| EngineError::ServerNotFound(vec![name.to_owned()]))?;
        self.add_resources(std::slice::from_mut(&mut status.entry))
            .await;
        Ok(status)
    }

    /// Starts servers; returns once each is spawned or failed to spawn.
    pub async fn start_servers(&self, target: &TargetParams) -> Result<StartResult, EngineError> {
        let refs = self.refs().await?;
        let targets = Engine::select(&refs, target)?;
        let outcomes = for_each(targets, |s| async move { start_one(&s).await }).await?;
        let mut result = StartResult::default();
        let mut failures = Vec::new();
        for (name, outcome) in outcomes {
            match outcome {
                StartOutcome::Started => result.started.push(name),
                StartOutcome::AlreadyRunning => result.already_running.push(name),
                StartOutcome::Failed(f) => failures.push(f),
                StartOutcome::Cancelled => {}
            }
        }
        if failures.is_empty() {
            Ok(result)
        } else {
            Err(EngineError::SpawnFailed {
                failures,
                started: result.started,
                already_running: result.already_running,
            })
        }
    }

    /// Stops servers; returns once each process group is gone.
    pub async fn stop_servers(&self, target: &TargetParams) -> Result<StopResult, EngineError> {
        let refs = self.refs().await?;
        let targets = Engine::select(&refs, target)?;
        let outcomes = for_each(targets, |s| async move { stop_one(&s).await }).await?;
        let mut result = StopResult::default();
        for (name, outcome) in outcomes {
            match outcome {
                StopOutcome::Stopped => result.stopped.push(name),
                StopOutcome::NotRunning => result.not_running.push(name),
            }
        }
        Ok(result)
    }

    /// Stop then start; starts stopped or failed servers too.
    pub async fn restart_servers(
        &self,
        target: &TargetParams,
    ) -> Result<RestartResult, EngineError> {
        let refs = self.refs().await?;
        let targets = Engine::select(&refs, target)?;
        let outcomes = for_each(targets, |s| async move {
            stop_one(&s).await?;
            start_one(&s).await
        })
        .await?;
        let mut result = RestartResult::default();
        let mut failures = Vec::new();
        for (name, outcome) in outcomes {
            match outcome {
                StartOutcome::Started | StartOutcome::AlreadyRunning => result.restarted.push(name),
                StartOutcome::Failed(f) => failures.push(f),
                StartOutcome::Cancelled => {}
            }
        }
        if failures.is_empty() {
            Ok(result)
        } else {
            Err(EngineError::SpawnFailed {
                failures,
                started: result.restarted,
                already_running: Vec::new(),
            })
        }
    }

    /// Applies a freshly loaded config set: start added, stop removed,
    /// restart changed (by content hash), leave unchanged alone.
    ///
    /// Every stop (removed, changed) completes before any start (added,
    /// changed), so a port handed from one server to another is free.
    /// Spawn failures do not fail the reload: those servers show `failed`.
    /// An unchanged server that had `failed` is started again.
    pub async fn reload(&self, configs: ConfigSet) -> Result<ReloadResult, EngineError> {
        let _ops = self.inner.ops.lock().await;
        let refs = self.refs().await?;
        let diff = ask(&refs.config, "config diff", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Diff(Box::new(configs.clone()), tx)
        })
        .await?;
        let by_name = |n: &str| refs.servers.iter().find(|s| s.name == n).cloned();

        // Phase 1: stop removed and changed servers.
        let to_stop: Vec<ServerRef> = diff
            .removed
            .iter()
            .map(String::as_str)
            .chain(diff.changed.iter().map(|c| c.name.as_str()))
            .filter_map(by_name)
            .collect();
        for_each(to_stop, |s| async move { stop_one(&s).await }).await?;
        let root = &self.inner.root;
        for name in &diff.removed {
            ask(root, "remove server", QUERY_TIMEOUT, |tx| {
                RootMsg::RemoveServer(name.clone(), tx)
            })
            .await?;
        }

        // Phase 2: new configs in place, then start added and changed ones.
        let mut to_start: Vec<ServerRef> = Vec::new();
        for cfg in &diff.changed {
            ask(root, "update config", QUERY_TIMEOUT, |tx| {
                RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
            })
            .await?;
            to_start.extend(by_name(&cfg.name).map(|s| ServerRef {
                grace: cfg.stop.grace,
                ..s
            }));
        }
        for cfg in &diff.added {
            let actor = ask(root, "add server", QUERY_TIMEOUT, |tx| {
                RootMsg::AddServer(Box::new(cfg.clone()), tx)
            })
            .await?;
            to_start.push(ServerRef {
                name: cfg.name.clone(),
                actor,
                grace: cfg.stop.grace,
            });
        }
        let unchanged: Vec<ServerRef> = diff.unchanged.iter().filter_map(|n| by_name(n)).collect();
        for s in &unchanged {
            if let Some(cfg) = configs.servers.get(&s.name) {
                // Same settings; refresh the rest (source path) for `status`.
                ask(root, "update config", QUERY_TIMEOUT, |tx| {
                    RootMsg::UpdateConfig(Box::new(cfg.clone()), tx)
                })
                .await?;
            }
        }
        for st in self.snapshots(unchanged.clone()).await? {
            if st.entry.state == ServerState::Failed {
                to_start.extend(unchanged.iter().find(|s| s.name == st.entry.name).cloned());
            }
        }
        let started = for_each(to_start, |s| async move { start_one(&s).await }).await?;
        for (name, outcome) in started {
            if let StartOutcome::Failed(f) = outcome {
                tracing::warn!(server = %name, path = %f.path, error = %f.error, "reload: spawn failed");
            }
        }
        ask(&refs.config, "config replace", QUERY_TIMEOUT, |tx| {
            ConfigMsg::Replace(Box::new(configs), tx)
        })
        .await?;

        let names = |v: &[ServerConfig]| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        Ok(ReloadResult {
            added: names(&diff.added),
            removed: diff.removed,
            changed: names(&diff.changed),
            unchanged: diff.unchanged,
        })
    }

    /// Number of configured servers.
    pub async fn server_count(&self) -> Result<usize, EngineError> {
        let refs = self.refs().await?;
        ask(
            &refs.config,
            "config count",
            QUERY_TIMEOUT,
            ConfigMsg::Count,
        )
        .await
    }

    /// Subscribes to log lines of `names` (empty: every server). `tail`:
    /// buffered lines per server to include (`None`: all buffered).
    pub async fn subscribe_logs(
        &self,
        names: &[String],
        tail: Option<usize>,
        follow: bool,
    ) -> Result<LogSubscription, EngineError> {
        let refs = self.refs().await?;
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| !refs.servers.iter().any(|s| &s.name == *n))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(EngineError::ServerNotFound(unknown));
        }
        let mut wanted: Vec<String> = Vec::new();
        for n in names {
            if !wanted.contains(n) {
                wanted.push(n.clone());
            }
        }
        let (backlog, receivers) = ask(&refs.router, "log subscribe", QUERY_TIMEOUT, |reply| {
            LogRouterMsg::Subscribe {
                names: wanted,
                tail,
                follow,
                reply,
            }
        })
        .await?
        .map_err(EngineError::ServerNotFound)?;
        let (live, forwarders) = if follow {
            let (tx, rx) = mpsc::channel(SUBSCRIPTION_BUFFER);
            let forwarders = receivers
                .into_iter()
                .map(|r| tokio::spawn(forward(r, tx.clone())))
                .collect();
            (Some(rx), forwarders)
        } else {
            (None, Vec::new())
        };
        Ok(LogSubscription {
            backlog,
            live,
            forwarders,
        })
    }

    /// Stops every server in parallel (deadline `2 × max(grace)`), then the tree.
    /// A group still alive at the deadline is SIGKILLed. Calling it again is a no-op.
    pub async fn shutdown(&self) -> Result<(), EngineError> {
        let _ops = self.inner.ops.lock().await;
        let root = &self.inner.root;
        if root.get_status() != ractor::ActorStatus::Running {
            return Ok(());
        }
        let refs = self.refs().await?;
        let max_grace = refs
            .servers
            .iter()
            .map(|s| s.grace)
            .max()
            .unwrap_or_default();
        let deadline = (max_grace * 2).max(Duration::from_secs(1));
        let stops = for_each(refs.servers.clone(), |s| async move { stop_one(&s).await });
        match tokio::time::timeout(deadline, stops).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "shutdown: a stop failed; killing what is left")
            }
            Err(_) => tracing::warn!(
                deadline_ms = xy_core::time::as_millis_u64(deadline),
                "shutdown: stop deadline passed; killing what is left"
            ),
        }
        let pgids = ask(root, "kill groups", QUERY_TIMEOUT, RootMsg::KillAllGroups)
            .await
            .unwrap_or_default();
        for pgid in pgids {
            if tokio::time::timeout(KILL_WAIT, crate::group::wait_group_gone(pgid, None))
                .await
                .is_err()
            {
                tracing::error!(pgid, "process group survived SIGKILL");
            }
        }
        root.stop_children_and_wait(Some("shutdown".into()), Some(QUERY_TIMEOUT))
            .await;
        let _ = root
            .stop_and_wait(Some("shutdown".into()), Some(QUERY_TIMEOUT))
            .await;
        let task = self
            .inner
            .root_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(QUERY_TIMEOUT, task).await;
        }
        Ok(())
    }

    /// Fault injection for tests: makes the named ServerActor panic. The daemon
    /// exposes it only in debug builds.
    #[doc(hidden)]
    pub async fn inject_panic(&self, name: &str) -> Result<(), EngineError> {
        let refs = self.refs().await?;
        let target = Engine::select(&refs, &TargetParams::one(name))?;
        for s in target {
            s.actor
                .cast(ServerMsg::InjectPanic)
                .map_err(|e| internal("inject panic", e))?;
        }
        Ok(())
    }
}
