//! The engine's public handle: every operation the RPC layer needs, each a
//! message to the actor tree with a bounded wait. Reload, shutdown and the
//! resource figures live in submodules; the errors in `error`.

mod auth_events;
mod call;
mod error;
mod listing;
mod options;
mod reload;
mod resources;
mod sandbox_test;
mod shutdown;
#[cfg(test)]
mod stall_tests;
#[cfg(test)]
mod start_tests;

use std::sync::Arc;

use ractor::{Actor, ActorRef};
use tokio::task::JoinHandle;
use xy_core::config::ConfigSet;
use xy_core::protocol::{
    ListEntry, RestartResult, StartResult, StatusResult, StopResult, TargetParams,
};

pub use error::EngineError;
pub use options::EngineOptions;

use self::call::{QUERY_TIMEOUT, ask, for_each, restart_one, start_one, stop_one};
use self::error::internal;
use crate::config_actor::ConfigMsg;
use crate::log_router::LogRouterMsg;
use crate::log_router::sink::SinkSettings;
use crate::logs::LogSubscription;
use crate::os::resources::Sampler;
use crate::server::process::{ChildSpawner, RealSpawner};
use crate::server::{RestartCause, ServerMsg, StartOutcome, StopOutcome};
use crate::supervisor::{Owners, Refs, RootArgs, RootMsg, RootSupervisor, ServerRef};

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
    sampler: std::sync::Mutex<Sampler>,
    /// Held across a scan, so concurrent callers with stale figures wait
    /// for one scan instead of each running their own.
    scanning: tokio::sync::Mutex<()>,
    /// The event bus every ServerActor publishes to (SPEC §15).
    events: crate::events::EventBus,
    /// Bytes a log follower may have waiting before it lags.
    follow_bytes: usize,
    /// Every server's call records (SPEC §20).
    calls: crate::calls::Calls,
    /// The gateway (SPEC §20): its listener, bind and status.
    gateway: ActorRef<crate::gateway::GatewayMsg>,
    /// The gateway's configured port (`0`: off), for `gateway_url` in
    /// `list` and `status`. A setting, not actor state: written by boot and
    /// reload, read by listings.
    gateway_port: std::sync::atomic::AtomicU16,
    /// The daemon's settings (`xy.kdl`) in effect; the firewall reads its
    /// default mode here.
    settings: tokio::sync::watch::Sender<xy_core::config::DaemonSettings>,
    /// The aggregate endpoint (SPEC §26), for `tools_search`.
    aggregate: Arc<crate::gateway::aggregate::Aggregate>,
    /// Where sandbox temp dirs live (`sandbox_test` spawns its probe there).
    sandbox_env: crate::os::sandbox::SandboxEnv,
    /// The OAuth broker: one grant per remote server (SPEC §23).
    oauth: crate::oauth::OAuthBroker,
    /// A server whose reload step fails on purpose (unit tests).
    #[cfg(test)]
    reload_fault: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("root", &self.inner.root.get_id())
            .finish()
    }
}

impl Engine {
    /// Spawns the tree and starts every server, returning once each first
    /// spawn happened or failed (a failure leaves that server `failed`).
    pub async fn start(configs: ConfigSet, opts: EngineOptions) -> Result<Engine, EngineError> {
        let spawner = Arc::new(RealSpawner {
            run_dir: opts.run_dir.clone(),
            sandbox: crate::os::sandbox::SandboxEnv::new(
                opts.sandbox_dir.clone(),
                opts.server_data_dir.clone(),
            ),
        });
        Engine::start_with(configs, opts, spawner).await
    }

    /// [`Engine::start`] with any child spawner (unit tests use a mock).
    pub(crate) async fn start_with(
        configs: ConfigSet,
        opts: EngineOptions,
        spawner: Arc<dyn ChildSpawner>,
    ) -> Result<Engine, EngineError> {
        let sandbox_env = crate::os::sandbox::SandboxEnv::new(
            opts.sandbox_dir.clone(),
            opts.server_data_dir.clone(),
        );
        for dir in [&opts.log_dir, &opts.run_dir] {
            if let Err(e) = std::fs::create_dir_all(dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot create directory");
            }
        }
        let events = crate::events::EventBus::new(opts.event_buffer);
        let calls = crate::calls::Calls::new(opts.calls_dir.clone());
        // `autostart #false` servers stay `stopped` until started by hand.
        let boot: Vec<String> = configs
            .servers
            .values()
            .filter(|c| c.autostart)
            .map(|c| c.name.clone())
            .collect();
        let follow_bytes = opts.follow_bytes;
        let oauth = crate::oauth::OAuthBroker::new(opts.oauth.clone());
        let settings = configs.settings.clone();
        let (routes, routes_rx) = tokio::sync::watch::channel(crate::gateway::Routes::default());
        let proxy = crate::gateway::proxy::Proxy::new(Some(calls.clone()));
        let (settings_tx, settings_rx) = tokio::sync::watch::channel(settings.clone());
        let aggregate = crate::gateway::aggregate::Aggregate::new(
            routes_rx.clone(),
            settings_rx,
            proxy.clone(),
            Some(calls.clone()),
        );
        let (gateway, _) = Actor::spawn(
            None,
            crate::gateway::GatewayActor,
            crate::gateway::Shared {
                routes: routes_rx,
                proxy: proxy.clone(),
                aggregate: Arc::clone(&aggregate),
            },
        )
        .await
        .map_err(|e| internal("starting the gateway", e))?;
        let args = RootArgs {
            routes,
            events: events.clone(),
            calls: calls.clone(),
            configs,
            sinks: SinkSettings {
                log_dir: opts.log_dir,
                rotate_bytes: opts.rotate_bytes,
                ring_bytes: opts.ring_bytes,
                follow_buffer: opts.follow_buffer,
            },
            spawner,
            tools_dir: opts.tools_dir,
            proxy,
            // One grant per server for every client (SPEC §23): the broker.
            credentials_for: {
                let broker = oauth.clone();
                std::sync::Arc::new(move |cfg: &xy_core::config::ServerConfig| {
                    let (url, auth) = crate::oauth::oauth_target(cfg)?;
                    broker.credentials(&cfg.name, &url, &auth).ok()
                })
            },
        };
        // Unnamed: several engines may live in one process (tests).
        let (root, task) = match Actor::spawn(None, RootSupervisor, args).await {
            Ok(r) => r,
            Err(e) => {
                gateway.stop(None);
                return Err(internal("starting the actor tree", e));
            }
        };
        let engine = Engine {
            inner: Arc::new(Inner {
                root,
                root_task: std::sync::Mutex::new(Some(task)),
                ops: tokio::sync::Mutex::new(()),
                sampler: std::sync::Mutex::default(),
                scanning: tokio::sync::Mutex::const_new(()),
                events,
                follow_bytes,
                calls,
                gateway,
                gateway_port: std::sync::atomic::AtomicU16::new(0),
                settings: settings_tx,
                aggregate,
                sandbox_env,
                oauth,
                #[cfg(test)]
                reload_fault: std::sync::Mutex::default(),
            }),
        };
        engine.apply_settings(&settings);
        auth_events::spawn(
            engine.inner.oauth.subscribe(),
            Arc::downgrade(&engine.inner),
        );
        // Auto-start, waiting for every first spawn: the first `list` after
        // boot (often from the `xyctl list` that spawned the daemon) then shows
        // the servers running rather than not yet started. A spawn failure is
        // the server's state (`failed`), not the engine's.
        match engine.start_servers(&TargetParams::many(boot)).await {
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

    /// The ConfigActor and LogRouterActor, current.
    async fn owners(&self) -> Result<Owners, EngineError> {
        ask(
            &self.inner.root,
            "root supervisor",
            QUERY_TIMEOUT,
            RootMsg::Owners,
        )
        .await
    }

    /// The servers `target` names, or every server; unknown names fail
    /// before anything is done. Only the named refs are fetched.
    async fn select(&self, target: &TargetParams) -> Result<Vec<ServerRef>, EngineError> {
        if target.all {
            return Ok(self.refs().await?.servers);
        }
        let names = target.requested_names();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        ask(&self.inner.root, "server lookup", QUERY_TIMEOUT, |tx| {
            RootMsg::Lookup(names, tx)
        })
        .await?
        .map_err(EngineError::ServerNotFound)
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

    /// Every configured server, sorted by name. One message to the root,
    /// which reads the snapshots the ServerActors publish (see
    /// `docs/architecture.md`, "list"). CPU/RSS figures are at most 1 s old;
    /// CPU % is averaged since the group's previous sample (since the child
    /// started, for the first).
    pub async fn list(&self) -> Result<Vec<ListEntry>, EngineError> {
        let mut entries = ask(&self.inner.root, "list", QUERY_TIMEOUT, RootMsg::List).await?;
        self.add_resources(&mut entries).await;
        for e in &mut entries {
            e.gateway_url = self.gateway_url(&e.name);
        }
        Ok(entries)
    }

    /// The gateway's port, `None` when `xy.kdl` turns it off.
    pub(crate) fn gateway_port(&self) -> Option<u16> {
        let port = self
            .inner
            .gateway_port
            .load(std::sync::atomic::Ordering::Relaxed);
        (port != 0).then_some(port)
    }

    fn gateway_url(&self, name: &str) -> Option<String> {
        self.gateway_port()
            .map(|p| xy_core::config::gateway_url(p, name))
    }

    /// Puts the daemon's settings in effect (boot and reload): the gateway
    /// listens on its port (rebinding when it changed, retrying when its
    /// bind failed), and the firewall's default mode is published.
    pub(crate) fn apply_settings(&self, settings: &xy_core::config::DaemonSettings) {
        let port = settings.gateway.port();
        self.inner
            .gateway_port
            .store(port.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
        let _ = self
            .inner
            .gateway
            .cast(crate::gateway::GatewayMsg::Configure(port));
        self.inner.settings.send_if_modified(|s| {
            let changed = s != settings;
            if changed {
                *s = settings.clone();
            }
            changed
        });
    }

    /// `tools_search`: what `find_tools` answers at `/mcp` (or a
    /// profile's endpoint) for this query.
    pub async fn tools_search(
        &self,
        p: &xy_core::protocol::aggregate::ToolsSearchParams,
    ) -> Result<xy_core::protocol::aggregate::ToolsSearchResult, String> {
        self.inner.aggregate.search(p).await
    }

    /// The daemon's settings in effect, updated at each reload.
    pub fn settings(&self) -> tokio::sync::watch::Receiver<xy_core::config::DaemonSettings> {
        self.inner.settings.subscribe()
    }

    /// `daemon_status.gateway`: where it listens and, while its port cannot
    /// be bound, why; `None` when it is off. Never an error: `daemon_status`
    /// is how clients tell a live daemon, so a gateway that does not answer
    /// is reported in `error` instead.
    pub async fn gateway_status(&self) -> Option<xy_core::protocol::GatewayStatus> {
        let asked = ask(
            &self.inner.gateway,
            "gateway",
            QUERY_TIMEOUT,
            crate::gateway::GatewayMsg::Status,
        )
        .await;
        match asked {
            Ok(status) => status,
            Err(e) => self
                .gateway_port()
                .map(|port| xy_core::protocol::GatewayStatus {
                    url: format!("http://127.0.0.1:{port}/"),
                    error: Some(format!("the gateway does not answer: {e}")),
                }),
        }
    }

    /// One server in detail.
    pub async fn status(&self, name: &str) -> Result<StatusResult, EngineError> {
        let target = self.select(&TargetParams::one(name)).await?;
        let mut status = self
            .snapshots(target)
            .await?
            .pop()
            .ok_or_else(|| EngineError::ServerNotFound(vec![name.to_owned()]))?;
        self.add_resources(std::slice::from_mut(&mut status.entry))
            .await;
        status.entry.gateway_url = self.gateway_url(&status.entry.name);
        Ok(status)
    }

    /// `sandbox_test` (SPEC §21): the exfiltration probes run in a child
    /// confined as `name`'s next spawn would be (unconfined without a
    /// block). `socket`: xyd's control socket, one of the probes' targets.
    pub async fn sandbox_test(
        &self,
        name: &str,
        socket: &std::path::Path,
    ) -> Result<xy_core::protocol::SandboxTestResult, EngineError> {
        let config = self.server_config(name).await?;
        crate::engine::sandbox_test::run(&config, &self.inner.sandbox_env, socket).await
    }

    /// One server's config as loaded (`-32001` for an unknown name).
    pub async fn server_config(
        &self,
        name: &str,
    ) -> Result<xy_core::config::ServerConfig, EngineError> {
        let owners = self.owners().await?;
        ask(&owners.config, "config lookup", QUERY_TIMEOUT, |r| {
            ConfigMsg::Get(name.to_owned(), r)
        })
        .await?
        .ok_or_else(|| EngineError::ServerNotFound(vec![name.to_owned()]))
    }

    /// Every configured server's config, sorted by name.
    pub async fn server_configs(&self) -> Result<Vec<xy_core::config::ServerConfig>, EngineError> {
        let mut names: Vec<String> = self
            .refs()
            .await?
            .servers
            .into_iter()
            .map(|s| s.name)
            .collect();
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            // A server removed meanwhile is skipped, not an error.
            if let Ok(c) = self.server_config(&n).await {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The OAuth broker (SPEC §23): logins, grants, and their events.
    pub fn oauth(&self) -> &crate::oauth::OAuthBroker {
        &self.inner.oauth
    }

    /// The tool ledger of one server (SPEC §12 `tools`).
    pub async fn tools(
        &self,
        name: &str,
    ) -> Result<xy_core::protocol::mcp::ToolsResult, EngineError> {
        let target = self.select(&TargetParams::one(name)).await?;
        let all = for_each(target, |s| async move {
            ask(
                &s.actor,
                &format!("tools of {}", s.name),
                QUERY_TIMEOUT,
                ServerMsg::Tools,
            )
            .await
        })
        .await?;
        let mut tools = all
            .into_iter()
            .next()
            .map(|(_, v)| v)
            .ok_or_else(|| EngineError::ServerNotFound(vec![name.to_owned()]))?;
        self.add_call_figures(&mut tools);
        Ok(tools)
    }

    /// Fills each current tool's call figures (SPEC §20).
    fn add_call_figures(&self, tools: &mut xy_core::protocol::mcp::ToolsResult) {
        if let Some(current) = &mut tools.current {
            self.inner.calls.fill(&tools.name, &mut current.tools);
        }
    }

    /// The servers whose calls `calls {name?}` reads: `name` (an unknown
    /// one fails as for `status`), or every configured server.
    pub async fn call_servers(&self, name: Option<&str>) -> Result<Vec<String>, EngineError> {
        let target = match name {
            Some(n) => TargetParams::one(n),
            None => TargetParams::all(),
        };
        Ok(self
            .select(&target)
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect())
    }

    /// Every server's call records (SPEC §20): the `calls` RPC reads them,
    /// the gateway and the firewall record through it.
    pub fn calls(&self) -> &crate::calls::Calls {
        &self.inner.calls
    }

    /// `tools_approve` (SPEC §20): approves the named tools and prompts as
    /// the server lists them now, or with `all` every held-back one, or
    /// (SPEC §28) exactly the items `expect` names if each is still listed
    /// with its digest, checked in the same step as applied. The ledger is
    /// saved and the bridge lets them through at once.
    pub async fn tools_approve(
        &self,
        name: &str,
        tools: Vec<String>,
        all: bool,
        expect: Vec<xy_core::protocol::mcp::ExpectedDigest>,
    ) -> Result<Vec<String>, EngineError> {
        let ask = crate::server::mcp_state::Approval {
            names: tools,
            all,
            expect,
        };
        self.firewall_op(name, move |reply| ServerMsg::ToolsApprove { ask, reply })
            .await
    }

    /// `tools_deny` (SPEC §20): the named tools and prompts are held back
    /// until approved.
    pub async fn tools_deny(
        &self,
        name: &str,
        tools: Vec<String>,
    ) -> Result<Vec<String>, EngineError> {
        self.firewall_op(name, move |reply| ServerMsg::ToolsDeny {
            names: tools,
            reply,
        })
        .await
    }

    async fn firewall_op(
        &self,
        name: &str,
        msg: impl FnOnce(
            ractor::RpcReplyPort<Result<Vec<String>, crate::server::mcp_state::Refused>>,
        ) -> ServerMsg
        + Send
        + 'static,
    ) -> Result<Vec<String>, EngineError> {
        let target = self.select(&TargetParams::one(name)).await?;
        let server = target
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::ServerNotFound(vec![name.to_owned()]))?;
        let r = ask(
            &server.actor,
            &format!("firewall of {name}"),
            QUERY_TIMEOUT,
            msg,
        )
        .await?;
        let server = name.to_owned();
        r.map_err(|why| match why {
            crate::server::mcp_state::Refused::Unknown(names) => {
                EngineError::UnknownTools { server, names }
            }
            crate::server::mcp_state::Refused::Changed(changed) => {
                EngineError::DigestChanged { server, changed }
            }
        })
    }

    /// Starts servers; returns once each is spawned or failed to spawn.
    pub async fn start_servers(&self, target: &TargetParams) -> Result<StartResult, EngineError> {
        let targets = self.select(target).await?;
        let outcomes = for_each(targets, |s| async move { start_one(&s).await }).await?;
        let mut result = StartResult::default();
        let mut failures = Vec::new();
        for (name, outcome) in outcomes {
            match outcome {
                StartOutcome::Started => result.started.push(name),
                StartOutcome::AlreadyRunning => result.already_running.push(name),
                StartOutcome::Failed(f) => failures.push(f),
                // Said, not dropped: the caller asked for it to run.
                StartOutcome::Cancelled => result.cancelled.push(name),
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
        let targets = self.select(target).await?;
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

    /// Stop then start, as one lifecycle operation per server (a stdio
    /// server keeps its endpoint and sessions); starts stopped or failed
    /// servers too.
    pub async fn restart_servers(
        &self,
        target: &TargetParams,
    ) -> Result<RestartResult, EngineError> {
        let targets = self.select(target).await?;
        let outcomes = for_each(targets, |s| async move {
            restart_one(&s, RestartCause::ByHand).await
        })
        .await?;
        let mut result = RestartResult::default();
        let mut failures = Vec::new();
        for (name, outcome) in outcomes {
            match outcome {
                StartOutcome::Started | StartOutcome::AlreadyRunning => result.restarted.push(name),
                StartOutcome::Failed(f) => failures.push(f),
                StartOutcome::Cancelled => result.cancelled.push(name),
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

    /// Number of configured servers.
    pub async fn server_count(&self) -> Result<usize, EngineError> {
        let owners = self.owners().await?;
        ask(
            &owners.config,
            "config count",
            QUERY_TIMEOUT,
            ConfigMsg::Count,
        )
        .await
    }

    /// Subscribes to state, health, tools and config changes of `names`
    /// (empty: every server, including ones a later reload adds). Unknown
    /// names fail as for logs.
    pub async fn subscribe_events(
        &self,
        names: &[String],
    ) -> Result<crate::events::EventSubscription, EngineError> {
        let wanted: Vec<String> = self
            .select(&TargetParams::many(names.to_vec()))
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect();
        Ok(self.inner.events.subscribe(wanted))
    }

    /// Subscribes to log lines of `names` (empty: every server). `tail`:
    /// buffered lines per server to include (`None`: all buffered).
    pub async fn subscribe_logs(
        &self,
        names: &[String],
        tail: Option<usize>,
        follow: bool,
    ) -> Result<LogSubscription, EngineError> {
        let wanted: Vec<String> = self
            .select(&TargetParams::many(names.to_vec()))
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect();
        let owners = self.owners().await?;
        let (backlog, receivers) = ask(&owners.router, "log subscribe", QUERY_TIMEOUT, |reply| {
            LogRouterMsg::Subscribe {
                names: wanted,
                tail,
                follow,
                reply,
            }
        })
        .await?
        .map_err(EngineError::ServerNotFound)?;
        let receivers = follow.then_some(receivers);
        Ok(LogSubscription::new(
            backlog,
            receivers,
            self.inner.follow_bytes,
        ))
    }

    /// Fault injection for tests: makes the named ServerActor panic. The daemon
    /// exposes it only in debug builds.
    #[doc(hidden)]
    pub async fn inject_panic(&self, name: &str) -> Result<(), EngineError> {
        let target = self.select(&TargetParams::one(name)).await?;
        for s in target {
            s.actor
                .cast(ServerMsg::InjectPanic)
                .map_err(|e| internal("inject panic", e))?;
        }
        Ok(())
    }

    /// Fault injection for tests: makes the ConfigActor panic.
    #[doc(hidden)]
    pub async fn inject_config_panic(&self) -> Result<(), EngineError> {
        let owners = self.owners().await?;
        owners
            .config
            .cast(ConfigMsg::InjectPanic)
            .map_err(|e| internal("inject panic", e))
    }

    /// Fault injection for tests: makes the LogRouterActor panic.
    #[doc(hidden)]
    pub async fn inject_log_router_panic(&self) -> Result<(), EngineError> {
        let owners = self.owners().await?;
        owners
            .router
            .cast(LogRouterMsg::InjectPanic)
            .map_err(|e| internal("inject panic", e))
    }
}
