//! The ServerActor: owns one server's state (lifecycle, child, transitions,
//! last exit) and carries out what [`lifecycle::next`] decides. Nobody else
//! mutates that state; others ask by message.
//!
//! Supervised by the RootSupervisor. It never awaits inside a handler: a task
//! waits for the child and reports `ChildExited`/`GroupGone` by message,
//! grace and backoff are `send_after` timers, and stop callers are answered
//! later from state, so `list`/`status` answer at once while `stopping`. If it
//! panics, its state is dropped, and the [`ChildSlot`] guard SIGKILLs the
//! child's process group; the root respawns it with its desired state.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::watch;
use tokio::time::Instant;
use xy_core::config::{HealthConfig, ServerConfig};
use xy_core::protocol::{
    Health, HealthState, HealthTransition, LastExit, ListEntry, ListRow, ServerState,
    SpawnErrorKind, StatusResult, Transition, Transport, describe_exit,
};

use self::failure::SpawnFailure;
use crate::events::{EngineEvent, EventBus};
use crate::explain;
use crate::health::{ProbeReport, ProbeTask, Tracker};
use crate::log_router::redact::Redactor;
use crate::log_router::sink::SharedSink;
use crate::mcp_state::McpState;
use crate::os::ports::PortHolder;

pub(crate) mod failure;
pub(crate) mod lifecycle;
#[cfg(test)]
pub(crate) mod mock;
pub(crate) mod process;
mod stdio;

use lifecycle::{Action, Event, Lifecycle};
use process::{ChildHandle, ChildSpawner, ExitInfo};

/// Transitions kept per server (SPEC §4).
const MAX_TRANSITIONS: usize = 20;

/// What `list` shows of one server. The ServerActor is its only writer: it
/// publishes a new value into a `watch` channel whenever one of these
/// changes, and the root reads every server's latest value for `list`
/// without a message per server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerSnapshot {
    pub(crate) state: ServerState,
    pub(crate) pid: Option<u32>,
    pub(crate) port: u16,
    pub(crate) transport: Transport,
    /// `http://127.0.0.1:<port><path>`.
    pub(crate) url: String,
    /// Spawn time of the running child; uptime is computed when read.
    pub(crate) started: Option<Instant>,
    pub(crate) restart_count: u32,
    pub(crate) last_exit: Option<LastExit>,
    pub(crate) health: Health,
    pub(crate) tool_count: Option<u32>,
    pub(crate) agent_allow_restart: bool,
    /// The stop grace the engine's stop waits are bounded by.
    pub(crate) grace: Duration,
    /// This snapshot's `list` row, serialised once (D41): every new
    /// snapshot starts with an empty cache, so it cannot go stale.
    pub(crate) row: RowCache,
}

/// A [`ListRow`] built at most once per snapshot. Not part of a snapshot's
/// equality: it follows from the other fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowCache(OnceLock<Arc<ListRow>>);

impl PartialEq for RowCache {
    fn eq(&self, _: &RowCache) -> bool {
        true
    }
}

impl ServerSnapshot {
    /// A server not started yet.
    pub(crate) fn initial(config: &ServerConfig) -> ServerSnapshot {
        ServerSnapshot {
            state: ServerState::Stopped,
            pid: None,
            port: config.port,
            transport: config.transport,
            url: config.url(),
            started: None,
            restart_count: 0,
            last_exit: None,
            health: Health::default(),
            tool_count: None,
            agent_allow_restart: config.agent.allow_restart,
            grace: config.stop.grace,
            row: RowCache::default(),
        }
    }

    /// The `list` row of this snapshot without its per-call fields, built
    /// on first use.
    pub(crate) fn row(&self, name: &str) -> &Arc<ListRow> {
        self.row
            .0
            .get_or_init(|| Arc::new(ListRow::new(&self.entry(name))))
    }

    /// The `list` row, uptime as of now (resource figures are added by the
    /// engine).
    pub(crate) fn entry(&self, name: &str) -> ListEntry {
        ListEntry {
            name: name.to_owned(),
            state: self.state,
            pid: self.pid,
            port: self.port,
            transport: self.transport,
            url: self.url.clone(),
            uptime_secs: self.started.map(|t| t.elapsed().as_secs()),
            restart_count: self.restart_count,
            last_exit: self.last_exit.clone(),
            health: self.health.clone(),
            cpu_percent: None,
            rss_bytes: None,
            tool_count: self.tool_count,
            agent_allow_restart: self.agent_allow_restart,
        }
    }
}

/// How a `start` ended for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartOutcome {
    /// Spawned by this request.
    Started,
    /// Was already running, starting or restarting.
    AlreadyRunning,
    /// Spawning failed.
    Failed(SpawnFailure),
    /// A stop arrived before the pending start could run.
    Cancelled,
}

/// How a `stop` ended for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopOutcome {
    /// Stopped by this request; the process group is gone.
    Stopped,
    /// Was not running.
    NotRunning,
}

/// What the child's waiter task reports.
#[derive(Debug)]
pub(crate) enum ChildEvent {
    /// The group leader exited.
    Exited(ExitInfo),
    /// No live process of the group is left.
    GroupGone,
    /// The leader died within [`explain::IMMEDIATE`] of its spawn and a
    /// foreign process listens on the configured port (sent before `Exited`).
    PortHeld(PortHolder),
}

/// Messages of the ServerActor.
pub(crate) enum ServerMsg {
    /// Start (reply once spawned or failed); `None`: auto-start, no reply.
    Start(Option<RpcReplyPort<StartOutcome>>),
    /// Stop; the reply comes once the process group is gone.
    Stop(RpcReplyPort<StopOutcome>),
    /// A `restart` by hand is about to stop and start this server: count it.
    RestartRequested,
    /// From the bridge: a request reached an `idle` on-demand server.
    Demand,
    /// From the bridge: the on-demand child went unused for `idle-stop`.
    IdleStop,
    /// Current status, answered at once in every state.
    Snapshot(RpcReplyPort<StatusResult>),
    /// The tool ledger's newest snapshot against the one before.
    Tools(RpcReplyPort<xy_core::protocol::mcp::ToolsResult>),
    /// Replace the config (reload); takes effect at the next spawn.
    SetConfig(Box<ServerConfig>),
    /// The config this server runs with (to rebuild a failed ConfigActor).
    Config(RpcReplyPort<ServerConfig>),
    /// The log sink this server writes to (to rebuild a failed
    /// LogRouterActor).
    Sink(RpcReplyPort<SharedSink>),
    /// From the waiter task of spawn number `run`.
    Child {
        /// Spawn number, to ignore reports about an earlier child.
        run: u64,
        /// What happened.
        event: ChildEvent,
    },
    /// The grace period of the stop of spawn `run` ended.
    GraceExpired {
        /// Spawn number.
        run: u64,
    },
    /// The backoff after spawn `run` exited ended.
    BackoffElapsed {
        /// Spawn number.
        run: u64,
    },
    /// A health probe of spawn `run` finished.
    Health {
        /// Spawn number.
        run: u64,
        /// The result.
        report: ProbeReport,
    },
    /// The probe of spawn `run` has ended its MCP session: now SIGTERM.
    TermAfterProbe {
        /// Spawn number.
        run: u64,
    },
    /// The work before spawn attempt `attempt` ended, off the actor: the
    /// secrets lookup (SPEC §16), then the port check.
    Prepared {
        /// Which attempt; an older one's result is dropped.
        attempt: u64,
        /// The secret values and a foreign holder of the port, or why a
        /// secret could not be looked up.
        result: Result<
            (Vec<crate::secrets::Resolved>, Option<PortHolder>),
            crate::secrets::SecretError,
        >,
    },
    /// Fault injection: panic in the handler.
    InjectPanic,
}

/// Tells the actor's owner (the root) what to restore if the actor dies:
/// (the reporting actor, wanted running, its live process group). A
/// function, so that a server does not name its owner's messages.
pub(crate) type Reporter = Arc<dyn Fn(ractor::ActorId, bool, Option<i32>) + Send + Sync>;

/// Startup arguments.
pub(crate) struct ServerArgs {
    pub(crate) config: ServerConfig,
    pub(crate) sink: SharedSink,
    pub(crate) spawner: Arc<dyn ChildSpawner>,
    /// Where desired state and pgid are reported (none in unit tests).
    pub(crate) report: Option<Reporter>,
    /// Start as soon as the actor is up.
    pub(crate) autostart: bool,
    /// The group of a predecessor that panicked: killed and awaited first.
    pub(crate) prior_pgid: Option<i32>,
    /// Where the `list` view is published (the root holds the receiver).
    pub(crate) snapshot: watch::Sender<ServerSnapshot>,
    /// The tool ledger directory (`None`: in memory only, unit tests).
    pub(crate) tools_dir: Option<std::path::PathBuf>,
    /// Where transitions and health changes are announced (SPEC §15).
    pub(crate) events: EventBus,
}

/// The current child, armed while its group may be alive: dropping the
/// state (panic, kill) SIGKILLs the group so no process outlives its actor.
struct ChildSlot {
    handle: Option<Arc<dyn ChildHandle>>,
    armed: bool,
}

impl ChildSlot {
    fn signal(&self, sig: Signal) {
        if self.armed
            && let Some(h) = &self.handle
        {
            h.signal_group(sig);
        }
    }
}

impl Drop for ChildSlot {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// The ServerActor's own state.
pub(crate) struct ServerActorState {
    config: ServerConfig,
    sink: SharedSink,
    spawner: Arc<dyn ChildSpawner>,
    report: Option<Reporter>,
    lc: Lifecycle,
    /// Spawn counter; timers and waiter reports carry it.
    run: u64,
    child: ChildSlot,
    leader_alive: bool,
    last_exit: Option<LastExit>,
    last_spawn_error: Option<SpawnFailure>,
    transitions: VecDeque<Transition>,
    stop_waiters: Vec<RpcReplyPort<StopOutcome>>,
    start_waiters: Vec<RpcReplyPort<StartOutcome>>,
    /// Last (desired, pgid) sent to the root.
    reported: Option<(bool, Option<i32>)>,
    /// Why the last run ended, as far as forensics can tell (for `explain`).
    why: WhyState,
    /// The running child's probe task (only with a `health` block).
    probe: Option<ProbeTask>,
    /// The running child's verdict; `None` → `unknown`.
    tracker: Option<Tracker>,
    /// The last health changes (separate from lifecycle transitions).
    health_history: VecDeque<HealthTransition>,
    /// The published `list` view; see [`ServerSnapshot`].
    snapshot: watch::Sender<ServerSnapshot>,
    /// The tool ledger and what the `mcp` probe learned this spawn.
    mcp: McpState,
    /// Counts spawn preparations, so a stale one's result is ignored.
    spawn_attempt: u64,
    /// `hooks { }` / `notify`: when each event last fired.
    hooks: crate::hooks::Hooks,
    /// Entered `failed` and not running since (for `on-recovered`).
    down: bool,
    /// Every recorded transition and health change is published here too.
    events: EventBus,
    /// A stdio server's bridge (SPEC §13); `None` for HTTP servers.
    bridge: Option<stdio::BridgeLink>,
    /// Whether any start reached this actor (an on-demand server's first
    /// one only listens).
    started_once: bool,
}

/// What the explainer needs beyond the lifecycle: kept per run.
#[derive(Debug, Default)]
struct WhyState {
    /// A foreign listener on the port, found before a spawn or after an
    /// early exit.
    port_holder: Option<PortHolder>,
    /// How long the last run lasted.
    ran_for: Option<Duration>,
    /// Appended to the next exit transition's reason (the port holder).
    exit_note: Option<String>,
    /// When the scheduled restart is due.
    next_retry: Option<SystemTime>,
}

/// See the module docs.
pub(crate) struct ServerActor;

impl Actor for ServerActor {
    type Msg = ServerMsg;
    type State = ServerActorState;
    type Arguments = ServerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ServerMsg>,
        args: ServerArgs,
    ) -> Result<ServerActorState, ActorProcessingErr> {
        match (args.prior_pgid, args.autostart) {
            (Some(pgid), autostart) => {
                // The predecessor's group may still hold the port: kill it and
                // wait (off the handler) before starting again.
                let me = myself.clone();
                tokio::spawn(async move {
                    let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
                    let gone = tokio::time::timeout(
                        Duration::from_secs(5),
                        crate::os::group::wait_group_gone(pgid, None),
                    )
                    .await;
                    if gone.is_err() {
                        tracing::warn!(pgid, "previous process group still alive after SIGKILL");
                    }
                    if autostart {
                        let _ = me.cast(ServerMsg::Start(None));
                    }
                });
            }
            (None, true) => myself.cast(ServerMsg::Start(None))?,
            (None, false) => {}
        }
        let mcp = McpState::load(args.tools_dir, &args.config.name);
        let mut st = ServerActorState {
            config: args.config,
            sink: args.sink,
            spawner: args.spawner,
            report: args.report,
            lc: Lifecycle::default(),
            run: 0,
            child: ChildSlot {
                handle: None,
                armed: false,
            },
            leader_alive: false,
            last_exit: None,
            last_spawn_error: None,
            transitions: VecDeque::new(),
            stop_waiters: Vec::new(),
            start_waiters: Vec::new(),
            reported: None,
            why: WhyState::default(),
            probe: None,
            tracker: None,
            health_history: VecDeque::new(),
            mcp,
            snapshot: args.snapshot,
            spawn_attempt: 0,
            hooks: crate::hooks::Hooks::default(),
            down: false,
            events: args.events,
            bridge: None,
            started_once: false,
        };
        st.ensure_bridge(&myself).await;
        st.publish();
        Ok(st)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ServerMsg>,
        evt: ractor::SupervisionEvent,
        st: &mut ServerActorState,
    ) -> Result<(), ActorProcessingErr> {
        // ractor's default would stop this actor when its bridge fails.
        if let ractor::SupervisionEvent::ActorFailed(cell, err) = evt {
            st.bridge_failed(&myself, cell.get_id(), &err.to_string())
                .await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        st: &mut ServerActorState,
    ) -> Result<(), ActorProcessingErr> {
        use ServerState as S;
        match msg {
            // An on-demand server's first start (boot, auto-start) only
            // listens (SPEC §13); later starts spawn at once.
            ServerMsg::Start(reply) if st.on_demand() && !st.started_once => {
                st.started_once = true;
                st.listen_idle(&myself, reply);
            }
            ServerMsg::Demand => {
                if st.lc.phase == S::Idle {
                    st.apply(&myself, Event::StartRequested);
                }
            }
            ServerMsg::IdleStop => st.apply(&myself, Event::IdleStopRequested),
            ServerMsg::Start(reply) => match st.lc.phase {
                S::Running | S::Starting | S::Restarting => {
                    if let Some(reply) = reply
                        && !reply.is_closed()
                    {
                        let _ = reply.send(StartOutcome::AlreadyRunning);
                    }
                }
                S::Stopped | S::Failed | S::Stopping | S::Idle => {
                    st.started_once = true;
                    st.start_waiters.extend(reply);
                    st.apply(&myself, Event::StartRequested);
                }
            },
            ServerMsg::Stop(reply) => {
                st.close_bridge("stop requested");
                match st.lc.phase {
                    S::Stopped | S::Failed => {
                        st.apply(&myself, Event::StopRequested);
                        if !reply.is_closed() {
                            let _ = reply.send(StopOutcome::NotRunning);
                        }
                    }
                    _ => {
                        st.stop_waiters.push(reply);
                        st.apply(&myself, Event::StopRequested);
                    }
                }
            }
            ServerMsg::RestartRequested => st.apply(&myself, Event::RestartRequested),
            ServerMsg::Snapshot(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(st.status());
                }
            }
            ServerMsg::Tools(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(st.mcp.tools());
                }
            }
            ServerMsg::SetConfig(config) => {
                st.config = *config;
                st.ensure_bridge(&myself).await;
            }
            ServerMsg::Config(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(st.config.clone());
                }
            }
            ServerMsg::Sink(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(st.sink.clone());
                }
            }
            ServerMsg::Child { run, event } if run == st.run => match event {
                ChildEvent::PortHeld(holder) => {
                    tracing::warn!(server = %st.config.name, "{holder}");
                    st.why.exit_note = Some(holder.to_string());
                    st.why.port_holder = Some(holder);
                }
                ChildEvent::Exited(exit) => {
                    st.leader_alive = false;
                    st.why.ran_for = st.lc.run_started.map(|t| t.elapsed());
                    st.end_probe();
                    st.last_exit = Some(LastExit {
                        code: exit.code,
                        signal: exit.signal.map(lifecycle::signal_name),
                        ts: xy_core::time::now_rfc3339(),
                    });
                    tracing::info!(server = %st.config.name, "{}", describe_exit(exit.code, exit.signal.map(lifecycle::signal_name).as_deref()));
                    st.apply(
                        &myself,
                        Event::ChildExited {
                            code: exit.code,
                            signal: exit.signal,
                        },
                    );
                }
                ChildEvent::GroupGone => {
                    st.child.armed = false;
                    st.apply(&myself, Event::GroupGone);
                }
            },
            ServerMsg::GraceExpired { run } if run == st.run => {
                let health_kill = st.lc.phase == S::Running && st.lc.killed_for.is_some();
                if (st.lc.phase == S::Stopping && st.lc.group_alive) || health_kill {
                    tracing::warn!(server = %st.config.name, grace_ms = xy_core::time::as_millis_u64(st.config.stop.grace), "grace period over; sending SIGKILL to the process group");
                }
                st.apply(&myself, Event::GraceExpired);
            }
            ServerMsg::BackoffElapsed { run } if run == st.run => {
                st.apply(&myself, Event::BackoffElapsed)
            }
            ServerMsg::Health { run, report } if run == st.run => st.on_probe(&myself, &report),
            ServerMsg::TermAfterProbe { run } if run == st.run => {
                if st.lc.phase == S::Stopping {
                    st.child.signal(Signal::SIGTERM);
                }
            }
            // Reports about an earlier spawn.
            ServerMsg::Child { .. }
            | ServerMsg::GraceExpired { .. }
            | ServerMsg::BackoffElapsed { .. }
            | ServerMsg::Health { .. }
            | ServerMsg::TermAfterProbe { .. } => {}
            ServerMsg::Prepared { attempt, result }
                if attempt == st.spawn_attempt && st.lc.phase == S::Starting =>
            {
                let event = match result {
                    Ok((values, holder)) => st.spawn(&myself, &values, holder),
                    Err(e) => st.secret_failed(e),
                };
                st.apply(&myself, event);
            }
            // A preparation overtaken by a stop or a newer start.
            ServerMsg::Prepared { .. } => {}
            ServerMsg::InjectPanic => panic!("injected panic in ServerActor {}", st.config.name),
        }
        st.publish();
        Ok(())
    }
}

impl ServerActorState {
    /// Runs `first` and every event the resulting actions produce through
    /// the lifecycle, carries out the actions, then answers waiters.
    fn apply(&mut self, myself: &ActorRef<ServerMsg>, first: Event) {
        let mut queue = VecDeque::from([first]);
        while let Some(event) = queue.pop_front() {
            let (next, actions) = lifecycle::next(
                &self.lc,
                event,
                &self.config.restart,
                self.config.stop.grace,
                Instant::now(),
            );
            self.lc = next;
            for action in actions {
                match action {
                    Action::Transition { from, to, reason } => {
                        // The first transition after an exit carries the forensics.
                        let reason = match self.why.exit_note.take() {
                            Some(note) => format!("{reason}; {note}"),
                            None => reason,
                        };
                        self.record(from, to, reason);
                    }
                    Action::Spawn => queue.extend(self.begin_spawn(myself)),
                    Action::TermGroup => match self.probe.take() {
                        // Let an MCP probe end its session while the server
                        // still answers; SIGTERM follows (bounded by the
                        // probe timeout; the grace timer already runs).
                        Some(probe) => {
                            self.tracker = None;
                            let (me, run) = (myself.clone(), self.run);
                            tokio::spawn(async move {
                                probe.stop().await;
                                let _ = me.cast(ServerMsg::TermAfterProbe { run });
                            });
                        }
                        None => self.child.signal(Signal::SIGTERM),
                    },
                    Action::DropProbe => self.end_probe(),
                    Action::KillGroup => self.child.signal(Signal::SIGKILL),
                    Action::ScheduleGrace(d) => {
                        let run = self.run;
                        myself.send_after(d, move || ServerMsg::GraceExpired { run });
                    }
                    Action::ScheduleBackoff(d) => {
                        self.why.next_retry = Some(SystemTime::now() + d);
                        let run = self.run;
                        myself.send_after(d, move || ServerMsg::BackoffElapsed { run });
                    }
                }
            }
        }
        self.settle();
        self.report(myself);
    }

    /// Starts the work a spawn waits for off the actor — the secrets
    /// lookup (it may take seconds), then the port check (it may walk every
    /// process's fds) on the blocking pool — and spawns when `Prepared`
    /// comes back; the state stays `starting` meanwhile and a stop
    /// overtakes it.
    fn begin_spawn(&mut self, myself: &ActorRef<ServerMsg>) -> Option<Event> {
        self.spawn_attempt += 1;
        let (attempt, specs, me) = (
            self.spawn_attempt,
            self.config.secrets.clone(),
            myself.clone(),
        );
        let (spawner, port) = (self.spawner.clone(), self.config.port);
        tokio::spawn(async move {
            let secrets = if specs.is_empty() {
                Ok(Vec::new())
            } else {
                crate::secrets::resolve_all(specs, crate::secrets::TIMEOUT).await
            };
            let result = match secrets {
                Ok(values) => Ok((values, spawner.port_holder_off_thread(port, None).await)),
                Err(e) => Err(e),
            };
            let _ = me.cast(ServerMsg::Prepared { attempt, result });
        });
        None
    }

    /// A secret could not be looked up: the spawn fails, naming the secret
    /// and its source (never a value).
    fn secret_failed(&mut self, e: crate::secrets::SecretError) -> Event {
        let text = e.to_string();
        tracing::warn!(server = %self.config.name, secret = %e.name, source = %e.source, reason = %e.reason, "secret lookup failed; not spawning");
        self.last_spawn_error = Some(SpawnFailure {
            name: self.config.name.clone(),
            path: self.config.command.clone(),
            error: text.clone(),
            kind: SpawnErrorKind::Secret,
            port_holder: None,
            secret: Some(Box::new(e.to_failure())),
        });
        Event::SpawnFailed(text)
    }

    /// Spawns the child, unless `holder` (a foreign listener on the port,
    /// found off the actor) would make it die at bind: then fail now and
    /// name it, instead of entering a crash loop.
    fn spawn(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        secrets: &[crate::secrets::Resolved],
        holder: Option<PortHolder>,
    ) -> Event {
        self.run += 1;
        let run = self.run;
        self.why = WhyState::default();
        // A stdio server's port is xy's own: bind it (or name its holder).
        if self.config.transport == Transport::Stdio
            && let Err(failure) = self.ensure_listening()
        {
            let text = failure.error.clone();
            tracing::warn!(server = %self.config.name, "{text}");
            self.why.port_holder = failure.port_holder.clone();
            self.last_spawn_error = Some(*failure);
            return Event::SpawnFailed(text);
        }
        // A foreign listener on the port would make the child die at bind:
        // fail now and name it, instead of entering a crash loop.
        if self.config.transport == Transport::Http
            && let Some(holder) = holder
        {
            let text = holder.to_string();
            tracing::warn!(server = %self.config.name, "{text}");
            self.last_spawn_error = Some(SpawnFailure {
                name: self.config.name.clone(),
                path: self.config.command.clone(),
                error: text.clone(),
                kind: SpawnErrorKind::PortHeld,
                port_holder: Some(holder.clone()),
                secret: None,
            });
            self.why.port_holder = Some(holder);
            return Event::SpawnFailed(text);
        }
        // The values go only into the child's environment (secrets last,
        // over env files and the `env` block); the spawner builds the log
        // redactor of this child's pumps from them.
        let with_secrets;
        let config = if secrets.is_empty() {
            &self.config
        } else {
            let mut c = self.config.clone();
            c.env
                .extend(secrets.iter().map(|r| (r.name.clone(), r.value.clone())));
            with_secrets = c;
            &with_secrets
        };
        match self.spawner.spawn(config, &self.sink) {
            Ok(handle) => {
                tracing::info!(server = %self.config.name, pid = handle.pid(), "spawned");
                self.attach(run, handle.take_stdio());
                self.start_probe(myself, run, Redactor::for_spawn(config));
                self.child = ChildSlot {
                    handle: Some(handle.clone()),
                    armed: true,
                };
                self.leader_alive = true;
                self.last_spawn_error = None;
                let me = myself.clone();
                let (spawner, port, pgid) = (self.spawner.clone(), self.config.port, handle.pgid());
                // A stdio server's port is its bridge's, held by xyd itself:
                // naming xyd as the holder would explain nothing.
                let child_port = self.config.transport != Transport::Stdio;
                let spawned_at = Instant::now();
                tokio::spawn(async move {
                    let exit = handle.wait().await;
                    if child_port && spawned_at.elapsed() < explain::IMMEDIATE {
                        let held = spawner.port_holder_off_thread(port, Some(pgid)).await;
                        if let Some(holder) = held {
                            let _ = me.cast(ServerMsg::Child {
                                run,
                                event: ChildEvent::PortHeld(holder),
                            });
                        }
                    }
                    let _ = me.cast(ServerMsg::Child {
                        run,
                        event: ChildEvent::Exited(exit),
                    });
                    handle.wait_group_gone().await;
                    let _ = me.cast(ServerMsg::Child {
                        run,
                        event: ChildEvent::GroupGone,
                    });
                });
                Event::Spawned
            }
            Err(e) => {
                tracing::warn!(server = %self.config.name, path = %e.path, error = %e.error, "spawn failed");
                let text = format!("{}: {}", e.path, e.error);
                self.last_spawn_error = Some(SpawnFailure {
                    name: self.config.name.clone(),
                    path: e.path,
                    error: e.error,
                    kind: e.kind,
                    port_holder: None,
                    secret: None,
                });
                Event::SpawnFailed(text)
            }
        }
    }

    fn record(&mut self, from: ServerState, to: ServerState, reason: String) {
        tracing::debug!(server = %self.config.name, %from, %to, %reason, "transition");
        if self.transitions.len() == MAX_TRANSITIONS {
            self.transitions.pop_front();
        }
        let ts = xy_core::time::rfc3339_ms(SystemTime::now());
        self.events.publish(EngineEvent {
            name: self.config.name.as_str().into(),
            kind: xy_core::protocol::EventKind::State,
            ts: ts.clone(),
            from: Some(from.as_str().to_owned()),
            to: Some(to.as_str().to_owned()),
            reason: reason.clone(),
        });
        self.transitions.push_back(Transition {
            from,
            to,
            ts,
            reason: reason.clone(),
        });
        self.hook_on_transition(from, to, reason);
    }

    /// Fires `on-failed`, `on-restart` and `on-recovered` (running again
    /// after `failed`). Detached: it never delays the lifecycle.
    fn hook_on_transition(&mut self, from: ServerState, to: ServerState, reason: String) {
        use xy_core::config::HookEvent;
        let event = match (from, to) {
            (_, ServerState::Failed) => {
                self.down = true;
                HookEvent::Failed
            }
            (_, ServerState::Restarting) => HookEvent::Restart,
            (_, ServerState::Running) if self.down => {
                self.down = false;
                HookEvent::Recovered
            }
            (_, ServerState::Stopped) => {
                self.down = false;
                return;
            }
            _ => return,
        };
        // From `starting` nothing exited: the spawn itself failed.
        let exited = from != ServerState::Starting;
        self.fire_hook(event, reason, exited);
    }

    fn fire_hook(&mut self, event: xy_core::config::HookEvent, reason: String, exited: bool) {
        if self.config.hooks.is_empty() {
            return;
        }
        let ctx = crate::hooks::HookContext {
            server: self.config.name.clone(),
            event,
            reason,
            exit_code: self
                .last_exit
                .as_ref()
                .filter(|_| exited)
                .and_then(|e| e.code),
            url: xy_core::protocol::endpoint_url(self.config.port, &self.config.path),
        };
        self.hooks.fire(&self.config.hooks, ctx);
    }

    /// Answers the stop and start callers whose wait is over.
    fn settle(&mut self) {
        use ServerState as S;
        if self.lc.phase != S::Stopping {
            for reply in self.stop_waiters.drain(..) {
                if !reply.is_closed() {
                    let _ = reply.send(StopOutcome::Stopped);
                }
            }
        }
        let outcome = match self.lc.phase {
            _ if self.lc.pending_start => None,
            S::Running | S::Restarting => Some(StartOutcome::Started),
            S::Failed => Some(StartOutcome::Failed(
                self.last_spawn_error
                    .clone()
                    .unwrap_or_else(|| SpawnFailure {
                        name: self.config.name.clone(),
                        path: self.config.command.clone(),
                        error: "failed".to_owned(),
                        kind: SpawnErrorKind::Other,
                        port_holder: None,
                        secret: None,
                    }),
            )),
            S::Stopped | S::Idle => Some(StartOutcome::Cancelled),
            S::Starting | S::Stopping => None,
        };
        if let Some(outcome) = outcome {
            for reply in self.start_waiters.drain(..) {
                if !reply.is_closed() {
                    let _ = reply.send(outcome.clone());
                }
            }
        }
    }

    /// Tells the root what to restore if this actor dies.
    fn report(&mut self, myself: &ActorRef<ServerMsg>) {
        use ServerState as S;
        let desired = matches!(self.lc.phase, S::Starting | S::Running | S::Restarting)
            || self.lc.pending_start;
        let pgid = self
            .child
            .handle
            .as_ref()
            .filter(|_| self.child.armed)
            .map(|h| h.pgid());
        if self.reported == Some((desired, pgid)) {
            return;
        }
        self.reported = Some((desired, pgid));
        if let Some(report) = &self.report {
            report(myself.get_id(), desired, pgid);
        }
    }

    /// Publishes the `list` view if any part of it changed (receivers are
    /// woken only then).
    fn publish(&self) {
        let pid = self
            .child
            .handle
            .as_ref()
            .filter(|_| self.leader_alive)
            .map(|h| h.pid());
        let started = self
            .lc
            .run_started
            .filter(|_| self.lc.phase == ServerState::Running);
        let default_health = Health::default();
        let health = self
            .tracker
            .as_ref()
            .map_or(&default_health, |t| t.health());
        let url = self.config.url();
        self.snapshot.send_if_modified(|s| {
            let same = s.state == self.lc.phase
                && s.pid == pid
                && s.port == self.config.port
                && s.transport == self.config.transport
                && s.url == url
                && s.started == started
                && s.restart_count == self.lc.restart_count
                && s.last_exit == self.last_exit
                && s.health == *health
                && s.tool_count == self.mcp.tool_count()
                && s.agent_allow_restart == self.config.agent.allow_restart
                && s.grace == self.config.stop.grace;
            if !same {
                *s = ServerSnapshot {
                    state: self.lc.phase,
                    pid,
                    port: self.config.port,
                    transport: self.config.transport,
                    url,
                    started,
                    restart_count: self.lc.restart_count,
                    last_exit: self.last_exit.clone(),
                    health: health.clone(),
                    tool_count: self.mcp.tool_count(),
                    agent_allow_restart: self.config.agent.allow_restart,
                    grace: self.config.stop.grace,
                    row: RowCache::default(),
                };
                // Built here, once, rather than by the next `list`.
                s.row(&self.config.name);
            }
            !same
        });
    }

    fn status(&self) -> StatusResult {
        let c = &self.config;
        StatusResult {
            entry: self.snapshot.borrow().entry(&c.name),
            transitions: self.transitions.iter().cloned().collect(),
            command: c.command.clone(),
            args: c.args.clone(),
            working_dir: c.working_dir.as_ref().map(|d| d.display().to_string()),
            env_keys: c.env.keys().cloned().collect(),
            restart: c.restart_settings(),
            stop: c.stop_settings(),
            config_file: c.source.display().to_string(),
            explain: self.explain(),
            next_retry_at: self
                .why
                .next_retry
                .filter(|_| self.lc.phase == ServerState::Restarting)
                .map(xy_core::time::rfc3339_ms),
            health_config: c.health.as_ref().map(HealthConfig::settings),
            health_history: self.health_history.iter().cloned().collect(),
            mcp: self.mcp.status(),
            secrets: c
                .secrets
                .iter()
                .map(|s| xy_core::protocol::SecretInfo {
                    name: s.name.clone(),
                    source: s.source.kind().to_owned(),
                })
                .collect(),
        }
    }

    /// Starts the probe for spawn `run`, if the config has a `health` block.
    fn start_probe(&mut self, myself: &ActorRef<ServerMsg>, run: u64, r: Option<Arc<Redactor>>) {
        self.end_probe();
        // The era and the tools are learned again for every spawn.
        self.mcp.on_spawn();
        let Some(cfg) = self.config.health.clone() else {
            return;
        };
        self.tracker = Some(Tracker::new(&cfg, std::time::Instant::now()));
        let me = myself.clone();
        self.probe = Some(ProbeTask::spawn(cfg, self.config.port, r, move |report| {
            me.cast(ServerMsg::Health { run, report }).is_ok()
        }));
    }

    /// Stops the probe (it ends its session in the background); the
    /// verdict goes back to `unknown`.
    fn end_probe(&mut self) {
        if let Some(probe) = self.probe.take() {
            tokio::spawn(probe.stop());
        }
        self.tracker = None;
    }

    fn on_probe(&mut self, myself: &ActorRef<ServerMsg>, report: &ProbeReport) {
        if let Some(found) = &report.mcp
            && let Some(change) = self.mcp.observe(found, report.at)
        {
            self.events.publish(EngineEvent {
                name: self.config.name.as_str().into(),
                kind: xy_core::protocol::EventKind::Tools,
                ts: xy_core::time::rfc3339_ms(report.at),
                from: change.from.map(|n| n.to_string()),
                to: Some(change.to.to_string()),
                reason: change.reason,
            });
        }
        let Some(tracker) = self.tracker.as_mut() else {
            return;
        };
        let Some((from, to, reason)) = tracker.observe(report, std::time::Instant::now()) else {
            return;
        };
        let failures = tracker.consecutive();
        match to {
            HealthState::Unhealthy => {
                tracing::warn!(server = %self.config.name, %from, %to, %reason, "health changed")
            }
            _ => tracing::info!(server = %self.config.name, %from, %to, %reason, "health changed"),
        }
        if self.health_history.len() == MAX_TRANSITIONS {
            self.health_history.pop_front();
        }
        let ts = xy_core::time::rfc3339_ms(SystemTime::now());
        self.events.publish(EngineEvent {
            name: self.config.name.as_str().into(),
            kind: xy_core::protocol::EventKind::Health,
            ts: ts.clone(),
            from: Some(from.as_str().to_owned()),
            to: Some(to.as_str().to_owned()),
            reason: reason.clone(),
        });
        self.health_history.push_back(HealthTransition {
            from,
            to,
            ts,
            reason: reason.clone(),
        });
        match (from, to) {
            (_, HealthState::Unhealthy) => {
                self.fire_hook(xy_core::config::HookEvent::Unhealthy, reason.clone(), false);
            }
            (HealthState::Unhealthy, HealthState::Healthy) => {
                self.fire_hook(xy_core::config::HookEvent::Recovered, reason.clone(), false);
            }
            _ => {}
        }
        let restart_on_failure = self
            .config
            .health
            .as_ref()
            .is_some_and(|h| h.restart_on_failure);
        if to == HealthState::Unhealthy && restart_on_failure {
            let error = report.outcome.as_ref().err().cloned().unwrap_or_default();
            let s = if failures == 1 { "" } else { "s" };
            let why = format!("{failures} failed health check{s} ({error})");
            // The lifecycle decides whether this run is ended (only a
            // running child, once per run); its exit then goes through
            // the restart policy.
            let before = self.lc.killed_for.is_some();
            self.apply(myself, Event::HealthFailed(why));
            if !before && self.lc.killed_for.is_some() {
                tracing::warn!(server = %self.config.name, "restarting after failed health checks");
            }
        }
    }

    /// One line on why the server is `failed` or backing off.
    fn explain(&self) -> Option<String> {
        if !matches!(self.lc.phase, ServerState::Failed | ServerState::Restarting) {
            return None;
        }
        let stderr = self.stderr_tail();
        let holder = self.why.port_holder.as_ref().map(ToString::to_string);
        let input = explain::Input {
            spawn_error: self
                .last_spawn_error
                .as_ref()
                .map(|e| (e.kind, e.error.as_str(), e.path.as_str())),
            code: self.last_exit.as_ref().and_then(|e| e.code),
            signal: self.last_exit.as_ref().and_then(|e| e.signal.as_deref()),
            ran_for: self.why.ran_for,
            stderr: &stderr,
            port_holder: holder.as_deref(),
            killed_for: self.lc.killed_for.as_deref(),
            next_retry: self
                .why
                .next_retry
                .filter(|_| self.lc.phase == ServerState::Restarting),
        };
        Some(explain::explain(&input, SystemTime::now()))
    }

    /// The most recent stderr lines from the ring buffer.
    fn stderr_tail(&self) -> Vec<String> {
        let (recent, _) = crate::log_router::sink::lock(&self.sink).subscribe(Some(200), false);
        let mut lines: Vec<String> = recent
            .into_iter()
            .rev()
            .filter(|l| l.stream == xy_core::protocol::LogStream::Stderr)
            .take(explain::STDERR_TAIL)
            .map(|l| l.line)
            .collect();
        lines.reverse();
        lines
    }
}

#[cfg(test)]
mod tests;
