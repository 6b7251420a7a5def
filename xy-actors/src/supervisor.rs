//! The RootSupervisor: spawned unnamed by [`crate::Engine::start`], linked to
//! the ConfigActor, the LogRouterActor and one ServerActor per server. It is
//! a registry of actor refs (plus what only it can know: each server's
//! reported desired state and pgid, and its `list` snapshot receiver) and it
//! restores a failed child by asking the surviving owners (`restore.rs`).
//!
//! It never waits on a server inside a handler beyond a short bound.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::watch;
use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::{ListEntry, ListRow};

use crate::config_actor::{ConfigActor, ConfigMsg};
use crate::events::EventBus;
use crate::log_router::sink::{SharedSink, SinkSettings};
use crate::log_router::{LogRouterActor, LogRouterArgs, LogRouterMsg};
use crate::server::process::ChildSpawner;
use crate::server::{Reporter, ServerActor, ServerArgs, ServerMsg, ServerSnapshot};

mod restore;

/// Bound on the root's own short calls to its children (sink creation, the
/// questions asked when restoring a failed child).
const CHILD_CALL: Duration = Duration::from_secs(5);

/// One server as the root knows it: its actor and the supervision facts only
/// the root can keep across that actor's death. Its config is the
/// ConfigActor's, its sink the LogRouterActor's (and the ServerActor's).
struct Entry {
    actor: ActorRef<ServerMsg>,
    /// Reported by the ServerActor: restore "running" after a panic.
    desired: bool,
    /// Reported by the ServerActor: the live process group, if any.
    pgid: Option<i32>,
    /// The actor's published `list` view. A respawned actor gets a new
    /// channel (its counters start afresh); a removed server takes its
    /// receiver with it.
    snapshot: watch::Receiver<ServerSnapshot>,
}

/// One server's `list` row as its snapshot caches it, and what the row's
/// per-call fields are computed from.
pub(crate) struct Listed {
    pub(crate) row: Arc<ListRow>,
    pub(crate) pid: Option<u32>,
    /// Spawn time of the running child (for `uptime_secs`).
    pub(crate) started: Option<tokio::time::Instant>,
}

/// A server's actor and the settings the engine's waits depend on.
#[derive(Clone)]
pub(crate) struct ServerRef {
    pub(crate) name: String,
    pub(crate) actor: ActorRef<ServerMsg>,
    pub(crate) grace: Duration,
}

/// The ConfigActor and every server, for the engine's operations on all
/// of them (reload, shutdown, `--all`).
#[derive(Clone)]
pub(crate) struct Refs {
    pub(crate) config: ActorRef<ConfigMsg>,
    /// Sorted by name.
    pub(crate) servers: Vec<ServerRef>,
}

/// The ConfigActor and the LogRouterActor, current.
#[derive(Clone)]
pub(crate) struct Owners {
    pub(crate) config: ActorRef<ConfigMsg>,
    pub(crate) router: ActorRef<LogRouterMsg>,
}

/// Messages of the RootSupervisor.
pub(crate) enum RootMsg {
    /// Current actor refs, every server's.
    Refs(RpcReplyPort<Refs>),
    /// The ConfigActor and LogRouterActor only.
    Owners(RpcReplyPort<Owners>),
    /// The refs of the named servers, in the order asked;
    /// `Err(unknown names)` if any is not configured.
    Lookup(
        Vec<String>,
        RpcReplyPort<Result<Vec<ServerRef>, Vec<String>>>,
    ),
    /// Every server's `list` row, sorted by name, read from the snapshots
    /// the ServerActors publish (no message to them).
    List(RpcReplyPort<Vec<ListEntry>>),
    /// The same rows, as each snapshot's cached JSON (D41).
    Rows(RpcReplyPort<Vec<Listed>>),
    /// Adds a server (not started); replies with its actor. The ConfigActor
    /// learns the config in the same step.
    AddServer(Box<ServerConfig>, RpcReplyPort<ActorRef<ServerMsg>>),
    /// Stops a server's actor, closes its log sink and forgets it (the
    /// ConfigActor too). The engine stops its process first.
    RemoveServer(String, RpcReplyPort<()>),
    /// Replaces a server's config: forwarded to its actor and the
    /// ConfigActor, so a restore in mid-reload finds the config in place.
    UpdateConfig(Box<ServerConfig>, RpcReplyPort<()>),
    /// From a ServerActor: what to restore if it dies.
    Report {
        /// The reporting actor (stale reports are ignored).
        id: ActorId,
        /// Wanted running.
        desired: bool,
        /// Its live process group.
        pgid: Option<i32>,
    },
    /// Shutdown fallback: SIGKILL every known live group; replies with them.
    KillAllGroups(RpcReplyPort<Vec<i32>>),
}

/// Startup arguments.
pub(crate) struct RootArgs {
    pub(crate) configs: ConfigSet,
    pub(crate) sinks: SinkSettings,
    pub(crate) spawner: Arc<dyn ChildSpawner>,
    /// Where each server's tool ledger lives (SPEC §12).
    pub(crate) tools_dir: Option<PathBuf>,
    pub(crate) events: EventBus,
    /// Where every server's calls are recorded (SPEC §20).
    pub(crate) calls: crate::calls::Calls,
    /// Where the gateway learns which servers exist.
    pub(crate) routes: watch::Sender<crate::gateway::Routes>,
    /// The gateway's proxy, shared with remote servers' own ports.
    pub(crate) proxy: crate::gateway::proxy::Proxy,
    /// Who supplies remote servers' OAuth credentials (SPEC §23).
    pub(crate) credentials_for: crate::credentials::CredentialsFor,
}

/// The root's state.
pub(crate) struct RootState {
    config: ActorRef<ConfigMsg>,
    router: ActorRef<LogRouterMsg>,
    servers: BTreeMap<String, Entry>,
    /// The config directory, for a rebuilt ConfigActor's set.
    dir: PathBuf,
    tools_dir: Option<PathBuf>,
    /// The LogRouterActor's spawn arguments (its sinks are asked for).
    sink_settings: SinkSettings,
    spawner: Arc<dyn ChildSpawner>,
    /// Handed to every ServerActor (and its successors after a panic).
    events: EventBus,
    /// Likewise.
    calls: crate::calls::Calls,
    /// The gateway's view of `servers` ([`RootState::publish_routes`]).
    routes: watch::Sender<crate::gateway::Routes>,
    /// Every server's offered tool names, for shadowing (D80): created
    /// here, each ServerActor writes its own entry.
    directory: crate::mcp::verdicts::Directory,
    /// Handed to every ServerActor.
    proxy: crate::gateway::proxy::Proxy,
    /// Likewise.
    credentials_for: crate::credentials::CredentialsFor,
}

/// See the module docs.
pub(crate) struct RootSupervisor;

impl Actor for RootSupervisor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RootMsg>,
        args: RootArgs,
    ) -> Result<RootState, ActorProcessingErr> {
        let RootArgs {
            configs,
            sinks,
            spawner,
            tools_dir,
            events,
            calls,
            routes,
            proxy,
            credentials_for,
        } = args;
        let servers: Vec<ServerConfig> = configs.servers.values().cloned().collect();
        let dir = configs.dir.clone();
        let (config, _) =
            Actor::spawn_linked(None, ConfigActor, configs, myself.get_cell()).await?;
        let (router, _) = Actor::spawn_linked(
            None,
            LogRouterActor,
            LogRouterArgs {
                settings: sinks.clone(),
                sinks: BTreeMap::new(),
            },
            myself.get_cell(),
        )
        .await?;
        let mut state = RootState {
            config,
            router,
            servers: BTreeMap::new(),
            dir,
            sink_settings: sinks,
            spawner,
            tools_dir,
            events,
            calls,
            routes,
            directory: crate::mcp::verdicts::Directory::default(),
            proxy,
            credentials_for,
        };
        // Not auto-started here: `Engine::start` starts them all and waits
        // for every first spawn, so the daemon serves only once they ran.
        for cfg in servers {
            let sink = state.create_sink(&cfg.name).await?;
            state.spawn_server(&myself, cfg, sink, false, None).await?;
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<RootMsg>,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        // Normally the engine stopped every server already; this is the net.
        for e in state.servers.values() {
            if let Some(pgid) = e.pgid {
                let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<RootMsg>,
        msg: RootMsg,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Refs(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(state.refs());
                }
            }
            RootMsg::Owners(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(Owners {
                        config: state.config.clone(),
                        router: state.router.clone(),
                    });
                }
            }
            RootMsg::Lookup(names, reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(state.lookup(&names));
                }
            }
            RootMsg::List(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(state.list());
                }
            }
            RootMsg::Rows(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(state.rows());
                }
            }
            RootMsg::AddServer(cfg, reply) => {
                let name = cfg.name.clone();
                let _ = state.config.cast(ConfigMsg::Put(cfg.clone()));
                match state.servers.get(&name) {
                    // Known to the tree but not to the ConfigActor (a restore
                    // that could not ask this server): the new config is it.
                    Some(e) => {
                        let _ = e.actor.cast(ServerMsg::SetConfig(cfg));
                    }
                    None => {
                        let sink = state.create_sink(&name).await?;
                        state.spawn_server(&myself, *cfg, sink, false, None).await?;
                    }
                }
                if let Some(e) = state.servers.get(&name)
                    && !reply.is_closed()
                {
                    let _ = reply.send(e.actor.clone());
                }
            }
            RootMsg::RemoveServer(name, reply) => {
                if let Some(e) = state.servers.remove(&name) {
                    e.actor.stop(Some("removed".into()));
                }
                state.publish_routes();
                let _ = state.config.cast(ConfigMsg::Remove(name.clone()));
                let _ = state.router.cast(LogRouterMsg::RemoveSink(name));
                if !reply.is_closed() {
                    let _ = reply.send(());
                }
            }
            RootMsg::UpdateConfig(cfg, reply) => {
                if let Some(e) = state.servers.get(&cfg.name) {
                    let _ = state.config.cast(ConfigMsg::Put(cfg.clone()));
                    let _ = e.actor.cast(ServerMsg::SetConfig(cfg));
                }
                if !reply.is_closed() {
                    let _ = reply.send(());
                }
            }
            RootMsg::Report { id, desired, pgid } => {
                if let Some(e) = state.servers.values_mut().find(|e| e.actor.get_id() == id) {
                    e.desired = desired;
                    e.pgid = pgid;
                }
            }
            RootMsg::KillAllGroups(reply) => {
                let mut killed = Vec::new();
                for e in state.servers.values() {
                    if let Some(pgid) = e.pgid {
                        let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
                        killed.push(pgid);
                    }
                }
                if !reply.is_closed() {
                    let _ = reply.send(killed);
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        evt: SupervisionEvent,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorFailed(cell, err) => {
                let id = cell.get_id();
                if id == state.config.get_id() {
                    tracing::error!(error = %err, "ConfigActor failed; restoring it from the servers");
                    state.restore_config(&myself).await?;
                } else if id == state.router.get_id() {
                    tracing::error!(error = %err, "LogRouterActor failed; restoring it from the servers");
                    state.restore_router(&myself).await?;
                } else if let Some(name) = state
                    .servers
                    .iter()
                    .find(|(_, e)| e.actor.get_id() == id)
                    .map(|(n, _)| n.clone())
                {
                    state
                        .restore_server(&myself, &name, &err.to_string())
                        .await?;
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::debug!(actor = %cell.get_id(), ?reason, "child actor stopped");
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

impl RootState {
    fn server_ref(name: &str, e: &Entry) -> ServerRef {
        ServerRef {
            name: name.to_owned(),
            actor: e.actor.clone(),
            grace: e.snapshot.borrow().grace,
        }
    }

    fn refs(&self) -> Refs {
        Refs {
            config: self.config.clone(),
            servers: self
                .servers
                .iter()
                .map(|(n, e)| RootState::server_ref(n, e))
                .collect(),
        }
    }

    fn lookup(&self, names: &[String]) -> Result<Vec<ServerRef>, Vec<String>> {
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| !self.servers.contains_key(*n))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(unknown);
        }
        Ok(names
            .iter()
            .filter_map(|n| self.servers.get(n).map(|e| RootState::server_ref(n, e)))
            .collect())
    }

    fn list(&self) -> Vec<ListEntry> {
        self.servers
            .iter()
            .map(|(n, e)| e.snapshot.borrow().entry(n))
            .collect()
    }

    fn rows(&self) -> Vec<Listed> {
        self.servers
            .iter()
            .map(|(n, e)| {
                let snap = e.snapshot.borrow();
                Listed {
                    row: Arc::clone(snap.row(n)),
                    pid: snap.pid,
                    started: snap.started,
                }
            })
            .collect()
    }

    /// The sink of `name` from the LogRouterActor (created if new).
    async fn create_sink(&self, name: &str) -> Result<SharedSink, ActorProcessingErr> {
        Ok(ractor::call_t!(
            self.router,
            LogRouterMsg::CreateSink,
            xy_core::time::as_millis_u64(CHILD_CALL),
            name.to_owned()
        )?)
    }

    /// Spawns a ServerActor for `cfg` writing to `sink`, and registers it.
    async fn spawn_server(
        &mut self,
        myself: &ActorRef<RootMsg>,
        cfg: ServerConfig,
        sink: SharedSink,
        autostart: bool,
        prior: Option<crate::server::Prior>,
    ) -> Result<(), ActorProcessingErr> {
        let name = cfg.name.clone();
        let (snapshot, snapshot_rx) = watch::channel(ServerSnapshot::initial(&cfg));
        let args = ServerArgs {
            config: cfg,
            sink,
            spawner: self.spawner.clone(),
            report: Some(reporter(myself)),
            autostart,
            prior,
            snapshot,
            tools_dir: self.tools_dir.clone(),
            events: self.events.clone(),
            calls: self.calls.clone(),
            directory: self.directory.clone(),
            proxy: self.proxy.clone(),
            credentials_for: self.credentials_for.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, ServerActor, args, myself.get_cell()).await?;
        self.servers.insert(
            name,
            Entry {
                actor,
                desired: autostart,
                pgid: prior.and_then(|p| p.pgid),
                snapshot: snapshot_rx,
            },
        );
        self.publish_routes();
        Ok(())
    }

    /// Tells the gateway the servers as they are now (after every insert
    /// and removal): their names and the snapshots their actors publish.
    pub(super) fn publish_routes(&self) {
        let routes: BTreeMap<String, watch::Receiver<ServerSnapshot>> = self
            .servers
            .iter()
            .map(|(n, e)| (n.clone(), e.snapshot.clone()))
            .collect();
        self.routes.send_replace(Arc::new(routes));
    }
}

/// How a ServerActor's reports reach the root.
fn reporter(root: &ActorRef<RootMsg>) -> Reporter {
    let root = root.clone();
    Arc::new(move |id, desired, pgid| {
        let _ = root.cast(RootMsg::Report { id, desired, pgid });
    })
}
