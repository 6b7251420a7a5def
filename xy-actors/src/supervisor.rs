//! The RootSupervisor: spawned unnamed by [`crate::Engine::start`], linked to
//! the ConfigActor, the LogRouterActor and one ServerActor per server. It is
//! the registry the engine asks for current actor refs, and it restarts a
//! failed child: a panicked ServerActor comes back with its desired state
//! (its old process group SIGKILLed first), other servers undisturbed.
//!
//! It never waits on a server inside a handler; the engine does the waiting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use nix::sys::signal::Signal;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::watch;
use xy_core::config::{ConfigSet, ServerConfig};
use xy_core::protocol::ListEntry;

use crate::config_actor::{ConfigActor, ConfigMsg};
use crate::events::EventBus;
use crate::log_router::sink::{SharedSink, SinkSettings};
use crate::log_router::{LogRouterActor, LogRouterArgs, LogRouterMsg};
use crate::server::process::ChildSpawner;
use crate::server::{Reporter, ServerActor, ServerArgs, ServerMsg, ServerSnapshot};

/// Bound on the root's own short calls to its children (sink creation).
const CHILD_CALL_MS: u64 = 5_000;

/// One server as the root knows it.
struct Entry {
    actor: ActorRef<ServerMsg>,
    config: ServerConfig,
    sink: SharedSink,
    /// Reported by the ServerActor: restore "running" after a panic.
    desired: bool,
    /// Reported by the ServerActor: the live process group, if any.
    pgid: Option<i32>,
    /// The actor's published `list` view. A respawned actor gets a new
    /// channel (its counters start afresh); a removed server takes its
    /// receiver with it.
    snapshot: watch::Receiver<ServerSnapshot>,
}

/// A server's actor and the settings the engine's waits depend on.
#[derive(Clone)]
pub(crate) struct ServerRef {
    pub(crate) name: String,
    pub(crate) actor: ActorRef<ServerMsg>,
    pub(crate) grace: std::time::Duration,
}

/// The current children, for the engine.
#[derive(Clone)]
pub(crate) struct Refs {
    pub(crate) config: ActorRef<ConfigMsg>,
    pub(crate) router: ActorRef<LogRouterMsg>,
    /// Sorted by name.
    pub(crate) servers: Vec<ServerRef>,
}

/// Messages of the RootSupervisor.
pub(crate) enum RootMsg {
    /// Current actor refs.
    Refs(RpcReplyPort<Refs>),
    /// Every server's `list` row, sorted by name, read from the snapshots
    /// the ServerActors publish (no message to them).
    List(RpcReplyPort<Vec<ListEntry>>),
    /// Adds a server (not started); replies with its actor.
    AddServer(Box<ServerConfig>, RpcReplyPort<ActorRef<ServerMsg>>),
    /// Stops a server's actor, closes its log sink and forgets it. The
    /// engine stops its process first.
    RemoveServer(String, RpcReplyPort<()>),
    /// Replaces a server's config (forwarded to its actor).
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
}

/// The root's state.
pub(crate) struct RootState {
    config: ActorRef<ConfigMsg>,
    router: ActorRef<LogRouterMsg>,
    servers: BTreeMap<String, Entry>,
    dir: PathBuf,
    tools_dir: Option<PathBuf>,
    sink_settings: SinkSettings,
    spawner: Arc<dyn ChildSpawner>,
    /// Handed to every ServerActor (and its successors after a panic).
    events: EventBus,
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
        let (config, _) =
            Actor::spawn_linked(None, ConfigActor, args.configs.clone(), myself.get_cell()).await?;
        let (router, _) = Actor::spawn_linked(
            None,
            LogRouterActor,
            LogRouterArgs {
                settings: args.sinks.clone(),
                sinks: BTreeMap::new(),
            },
            myself.get_cell(),
        )
        .await?;
        let mut state = RootState {
            config,
            router,
            servers: BTreeMap::new(),
            dir: args.configs.dir.clone(),
            sink_settings: args.sinks,
            spawner: args.spawner,
            tools_dir: args.tools_dir,
            events: args.events,
        };
        // Not auto-started here: `Engine::start` starts them all and waits
        // for every first spawn, so the daemon serves only once they ran.
        for cfg in args.configs.servers.into_values() {
            state.add_server(&myself, cfg, false).await?;
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
            RootMsg::List(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(state.list());
                }
            }
            RootMsg::AddServer(cfg, reply) => {
                let name = cfg.name.clone();
                if !state.servers.contains_key(&name) {
                    state.add_server(&myself, *cfg, false).await?;
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
                    let _ = state.router.cast(LogRouterMsg::RemoveSink(name));
                }
                if !reply.is_closed() {
                    let _ = reply.send(());
                }
            }
            RootMsg::UpdateConfig(cfg, reply) => {
                if let Some(e) = state.servers.get_mut(&cfg.name) {
                    e.config = (*cfg).clone();
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
                    tracing::error!(error = %err, "ConfigActor failed; restarting it");
                    let set = state.config_set();
                    state.config = Actor::spawn_linked(None, ConfigActor, set, myself.get_cell())
                        .await?
                        .0;
                } else if id == state.router.get_id() {
                    tracing::error!(error = %err, "LogRouterActor failed; restarting it");
                    let args = LogRouterArgs {
                        settings: state.sink_settings.clone(),
                        sinks: state
                            .servers
                            .iter()
                            .map(|(n, e)| (n.clone(), e.sink.clone()))
                            .collect(),
                    };
                    state.router =
                        Actor::spawn_linked(None, LogRouterActor, args, myself.get_cell())
                            .await?
                            .0;
                } else if let Some(name) = state
                    .servers
                    .iter()
                    .find(|(_, e)| e.actor.get_id() == id)
                    .map(|(n, _)| n.clone())
                {
                    state
                        .respawn_server(&myself, &name, &err.to_string())
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
    fn refs(&self) -> Refs {
        Refs {
            config: self.config.clone(),
            router: self.router.clone(),
            servers: self
                .servers
                .iter()
                .map(|(n, e)| ServerRef {
                    name: n.clone(),
                    actor: e.actor.clone(),
                    grace: e.config.stop.grace,
                })
                .collect(),
        }
    }

    fn list(&self) -> Vec<ListEntry> {
        self.servers
            .iter()
            .map(|(n, e)| e.snapshot.borrow().entry(n))
            .collect()
    }

    fn config_set(&self) -> ConfigSet {
        ConfigSet {
            dir: self.dir.clone(),
            servers: self
                .servers
                .iter()
                .map(|(n, e)| (n.clone(), e.config.clone()))
                .collect(),
            warnings: Vec::new(),
        }
    }

    async fn add_server(
        &mut self,
        myself: &ActorRef<RootMsg>,
        cfg: ServerConfig,
        autostart: bool,
    ) -> Result<(), ActorProcessingErr> {
        let sink = ractor::call_t!(
            self.router,
            LogRouterMsg::CreateSink,
            CHILD_CALL_MS,
            cfg.name.clone()
        )?;
        let (snapshot, snapshot_rx) = watch::channel(ServerSnapshot::initial(&cfg));
        let args = ServerArgs {
            config: cfg.clone(),
            sink: sink.clone(),
            spawner: self.spawner.clone(),
            report: Some(reporter(myself)),
            autostart,
            prior_pgid: None,
            snapshot,
            tools_dir: self.tools_dir.clone(),
            events: self.events.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, ServerActor, args, myself.get_cell()).await?;
        self.servers.insert(
            cfg.name.clone(),
            Entry {
                actor,
                config: cfg,
                sink,
                desired: autostart,
                pgid: None,
                snapshot: snapshot_rx,
            },
        );
        Ok(())
    }

    async fn respawn_server(
        &mut self,
        myself: &ActorRef<RootMsg>,
        name: &str,
        err: &str,
    ) -> Result<(), ActorProcessingErr> {
        let Some(e) = self.servers.get(name) else {
            return Ok(());
        };
        tracing::error!(server = %name, error = %err, desired = e.desired, "ServerActor failed; restarting it");
        if let Some(pgid) = e.pgid {
            // Its state's guard already did this on drop; a second SIGKILL is harmless.
            let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
        }
        let (snapshot, snapshot_rx) = watch::channel(ServerSnapshot::initial(&e.config));
        let args = ServerArgs {
            config: e.config.clone(),
            sink: e.sink.clone(),
            spawner: self.spawner.clone(),
            report: Some(reporter(myself)),
            autostart: e.desired,
            prior_pgid: e.pgid,
            snapshot,
            tools_dir: self.tools_dir.clone(),
            events: self.events.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, ServerActor, args, myself.get_cell()).await?;
        if let Some(e) = self.servers.get_mut(name) {
            e.actor = actor;
            e.snapshot = snapshot_rx;
        }
        Ok(())
    }
}

/// How a ServerActor's reports reach the root.
fn reporter(root: &ActorRef<RootMsg>) -> Reporter {
    let root = root.clone();
    Arc::new(move |id, desired, pgid| {
        let _ = root.cast(RootMsg::Report { id, desired, pgid });
    })
}
