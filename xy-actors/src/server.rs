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
//!
//! This file is the actor and its decisions (messages, spawn, carrying out
//! the lifecycle's actions, answering waiters). Beside it: [`lifecycle`]
//! (the pure state machine), `process` (spawning), `snapshot` (the `list`
//! view it publishes), `status` (`status` and `explain` assembly), `health`
//! (probe glue), `transitions` (history, events and hooks of each state
//! change), `stdio` (the bridge of a stdio server) and `failure`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::watch;
use tokio::time::Instant;
use xy_core::config::ServerConfig;
use xy_core::protocol::{
    HealthTransition, LastExit, ServerState, SpawnErrorKind, StatusResult, Transition, Transport,
    describe_exit,
};

use self::failure::SpawnFailure;
use crate::events::EventBus;
use crate::explain;
use crate::health::{ProbeReport, ProbeTask, Tracker};
use crate::log_router::redact::Redactor;
use crate::log_router::sink::SharedSink;
use crate::os::ports::PortHolder;
use crate::server::mcp_state::McpState;

pub(crate) mod failure;
mod firewall;
mod health;
pub(crate) mod lifecycle;
/// Whether loopback `port` can be bound within `deadline`, polled.
async fn port_comes_free(port: u16, deadline: Duration) -> bool {
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) mod mcp_state;
#[cfg(test)]
pub(crate) mod mock;
mod probe;
pub(crate) mod process;
mod publish;
mod remote;
mod status;
mod stdio;
mod transitions;

pub(crate) use crate::snapshot::ServerSnapshot;

pub(crate) use lifecycle::RestartCause;
use lifecycle::{Action, Event, Lifecycle};
use process::{ChildHandle, ChildSpawner, ExitInfo};

/// Transitions kept per server (SPEC §4).
const MAX_TRANSITIONS: usize = 20;

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
    /// Stop then start as one lifecycle operation (SPEC §4, §18): a stdio
    /// server's endpoint and sessions stay. Replied like `Start`, once the
    /// new child is spawned or failed to spawn.
    Restart {
        /// By hand (counted) or by a reload.
        cause: RestartCause,
        /// Where the outcome goes.
        reply: RpcReplyPort<StartOutcome>,
    },
    /// From the bridge: a request reached an `idle` on-demand server.
    Demand,
    /// From the bridge: the on-demand child went unused for `idle-stop`.
    IdleStop,
    /// Current status, answered at once in every state.
    Snapshot(RpcReplyPort<StatusResult>),
    /// The tool ledger's newest snapshot against the one before.
    Tools(RpcReplyPort<xy_core::protocol::mcp::ToolsResult>),
    /// From the bridge: xy's own listing of the current child (SPEC §20).
    Listed(Box<crate::mcp::listing::Listing>),
    /// From the bridge: xy listed a 2025-era child with these tools; its
    /// gates go to the bridge, learnt by probes when new (D210), kept by
    /// the listing's key (D280).
    ProbeGates { key: String, tools: Vec<String> },
    /// The probes of a listing (its key) are done.
    Gated {
        key: String,
        gates: Box<crate::mcp::gates::Gates>,
    },
    /// xy's own listing of spawn `run` of an HTTP or remote server (SPEC
    /// §20), or why there is none.
    HttpListed {
        run: u64,
        listing: Result<Box<crate::mcp::listing::Listing>, String>,
    },
    /// `tools_approve`: the named items (or with `all` every held-back
    /// one) are approved as listed now, or those with the digests shown.
    ToolsApprove {
        /// What to approve.
        ask: crate::server::mcp_state::Approval,
        /// The names approved, or why none were.
        reply: RpcReplyPort<Result<Vec<String>, crate::server::mcp_state::Refused>>,
    },
    /// A parked `tools_approve` waited long enough for a new listing.
    ApproveTimeout(u64),
    /// `tools_deny`: the named items are held back until approved.
    ToolsDeny {
        /// Tool or prompt names.
        names: Vec<String>,
        /// The names denied, or the names the server does not list.
        reply: RpcReplyPort<Result<Vec<String>, crate::server::mcp_state::Refused>>,
    },
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
    /// From the upstream of a remote server's run `run` (SPEC §23).
    Upstream {
        /// Connect number.
        run: u64,
        /// What it learned.
        event: crate::remote::UpstreamEvent,
    },
    /// The OAuth broker's word on this server's grant (SPEC §23).
    Auth(crate::oauth::AuthEvent),
    /// Fault injection: panic in the handler.
    InjectPanic,
    /// Fault injection (unit tests): make the stdio bridge panic.
    #[cfg(test)]
    InjectBridgePanic,
    /// Try again to listen (an `OpenEndpoint` whose bind failed: the
    /// panicked bridge's listener may not be closed yet).
    Relisten {
        /// Tries so far.
        attempt: u32,
    },
}

/// Tells the actor's owner (the root) what to restore if the actor dies:
/// (the reporting actor, wanted running, its live process group). A
/// function, so that a server does not name its owner's messages.
pub(crate) type Reporter = Arc<dyn Fn(ractor::ActorId, bool, Option<i32>) + Send + Sync>;

/// What a failed ServerActor may have left behind for its successor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prior {
    /// Its last reported live process group: killed and awaited.
    pub(crate) pgid: Option<i32>,
}

/// Startup arguments.
pub(crate) struct ServerArgs {
    pub(crate) config: ServerConfig,
    pub(crate) sink: SharedSink,
    pub(crate) spawner: Arc<dyn ChildSpawner>,
    /// Where desired state and pgid are reported (none in unit tests).
    pub(crate) report: Option<Reporter>,
    /// Start as soon as the actor is up.
    pub(crate) autostart: bool,
    /// This actor succeeds one that failed: what it left behind is waited
    /// out before the first start.
    pub(crate) prior: Option<Prior>,
    /// Where the `list` view is published (the root holds the receiver).
    pub(crate) snapshot: watch::Sender<ServerSnapshot>,
    /// The tool ledger directory (`None`: in memory only, unit tests).
    pub(crate) tools_dir: Option<std::path::PathBuf>,
    /// Where transitions and health changes are announced (SPEC §15).
    pub(crate) events: EventBus,
    /// Where its bridge records calls (SPEC §20).
    pub(crate) calls: crate::calls::Calls,
    /// Every server's offered tool names (shadowing).
    pub(crate) directory: crate::mcp::verdicts::Directory,
    /// The gateway's proxy: a remote server's own port serves with it.
    pub(crate) proxy: crate::gateway::proxy::Proxy,
    /// Who supplies a remote server's `auth { oauth }` credentials.
    pub(crate) credentials_for: crate::credentials::CredentialsFor,
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
    /// The sandbox of the current (or last) spawn, for `status.sandbox`.
    sandbox: Option<Arc<crate::os::sandbox::SandboxRun>>,
    transitions: VecDeque<Transition>,
    stop_waiters: Vec<RpcReplyPort<StopOutcome>>,
    start_waiters: Vec<RpcReplyPort<StartOutcome>>,
    /// Last (desired, pgid) sent to the root.
    reported: Option<(bool, Option<i32>)>,
    /// Why the last run ended, as far as forensics can tell (for `explain`).
    why: WhyState,
    /// The running child's probe task: its `health` block's probes and
    /// xy's own listing of an HTTP or remote server.
    probe: Option<ProbeTask>,
    /// The running child's verdict; `None` → `unknown`.
    tracker: Option<Tracker>,
    /// Woken by the gateway when an HTTP child lists what xy's listing
    /// does not have: the probe task lists again.
    relist: Arc<tokio::sync::Notify>,
    /// The last health changes (separate from lifecycle transitions).
    health_history: VecDeque<HealthTransition>,
    /// The published `list` view; see [`ServerSnapshot`].
    snapshot: watch::Sender<ServerSnapshot>,
    /// The tool ledger and what the `mcp` probe learned this spawn.
    mcp: McpState,
    /// Counts spawn preparations, so a stale one's result is ignored.
    spawn_attempt: u64,
    /// The firewall mode when the config sets none.
    /// `hooks { }` / `notify`: when each event last fired.
    hooks: crate::hooks::Hooks,
    /// Entered `failed` and not running since (for `on-recovered`).
    down: bool,
    /// Every recorded transition and health change is published here too.
    events: EventBus,
    /// Handed to its bridge.
    calls: crate::calls::Calls,
    /// A stdio server's bridge (SPEC §13); `None` for HTTP servers.
    bridge: Option<stdio::BridgeLink>,
    /// Whether any start reached this actor (an on-demand server's first
    /// one only listens).
    started_once: bool,
    /// See [`ServerArgs::proxy`].
    proxy: crate::gateway::proxy::Proxy,
    /// See [`ServerArgs::credentials_for`].
    credentials_for: crate::credentials::CredentialsFor,
    /// A remote server's upstream of the current run (SPEC §23).
    upstream: Option<Arc<crate::remote::Upstream>>,
    /// A remote server's own port, while connected.
    remote_port: Option<remote::RemotePort>,
    /// Why the grant needs a login (the broker said so), until a login:
    /// a probe the grant still covers (a step-up asked for scopes only a
    /// `tools/call` needs) does not make the server `healthy` meanwhile.
    auth_hold: Option<String>,
    /// Approvals waiting for the listing they asked for.
    parked: firewall::Parked,
    /// What xy's listing probes learnt, and the one running (D210).
    probes: probe::Probes,
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
        match (args.prior, args.autostart) {
            (Some(prior), autostart) => {
                // The predecessor's group may still hold the port, and a
                // stdio server's dead bridge may not have closed its
                // listener yet: wait for both (off the handler) before
                // starting again, or the start would find the port taken
                // (an idle on-demand server would then spawn its child).
                let me = myself.clone();
                let port = matches!(
                    args.config.transport,
                    xy_core::protocol::Transport::Stdio | xy_core::protocol::Transport::Remote
                )
                .then_some(args.config.port);
                tokio::spawn(async move {
                    if let Some(pgid) = prior.pgid {
                        let _ = crate::os::group::signal_group(pgid, Signal::SIGKILL);
                        let gone = tokio::time::timeout(
                            Duration::from_secs(5),
                            crate::os::group::wait_group_gone(pgid, None),
                        )
                        .await;
                        if gone.is_err() {
                            tracing::warn!(
                                pgid,
                                "previous process group still alive after SIGKILL"
                            );
                        }
                    }
                    if let Some(port) = port
                        && !port_comes_free(port, Duration::from_secs(5)).await
                    {
                        tracing::warn!(
                            port,
                            "the predecessor's port is still taken; starting anyway"
                        );
                    }
                    if autostart {
                        let _ = me.cast(ServerMsg::Start(None));
                    }
                });
            }
            (None, true) => myself.cast(ServerMsg::Start(None))?,
            (None, false) => {}
        }
        let mcp = McpState::load(
            args.tools_dir,
            &args.config.name,
            args.config.firewall.unwrap_or_default(),
            args.directory,
        );
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
            sandbox: None,
            transitions: VecDeque::new(),
            stop_waiters: Vec::new(),
            start_waiters: Vec::new(),
            reported: None,
            why: WhyState::default(),
            probe: None,
            tracker: None,
            relist: Arc::new(tokio::sync::Notify::new()),
            health_history: VecDeque::new(),
            mcp,
            snapshot: args.snapshot,
            spawn_attempt: 0,
            hooks: crate::hooks::Hooks::default(),
            down: false,
            events: args.events,
            calls: args.calls,
            bridge: None,
            started_once: false,
            proxy: args.proxy,
            credentials_for: args.credentials_for,
            upstream: None,
            remote_port: None,
            auth_hold: None,
            parked: firewall::Parked::default(),
            probes: probe::Probes::default(),
        };
        st.probes.kept(st.mcp.kept_gates());
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
            st.publish();
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
            ServerMsg::Stop(reply) => match st.lc.phase {
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
            },
            ServerMsg::Restart { cause, reply } => {
                st.started_once = true;
                st.start_waiters.push(reply);
                st.apply(&myself, Event::RestartRequested(cause));
            }
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
            ServerMsg::Listed(listing) => st.on_listed(*listing),
            ServerMsg::ProbeGates { key, tools } => st.probe_gates(&myself, key, tools),
            ServerMsg::Gated { key, gates } => st.gated(key, *gates),
            ServerMsg::ToolsApprove { ask, reply } => st.tools_approve(&myself, ask, reply),
            ServerMsg::ApproveTimeout(id) => st.approve_timeout(id),
            ServerMsg::ToolsDeny { names, reply } => {
                let r = st.mcp.deny(&names, SystemTime::now());
                st.firewall_changed(Vec::new());
                if !reply.is_closed() {
                    let _ = reply.send(r);
                }
            }
            ServerMsg::SetConfig(config) => {
                st.config = *config;
                st.ensure_bridge(&myself).await;
                let mode = st.config.firewall.unwrap_or_default();
                if mode != st.mcp.mode() {
                    let held = st.mcp.set_mode(mode, SystemTime::now());
                    st.firewall_changed(held);
                }
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
                    st.stop_probes();
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
            ServerMsg::HttpListed { run, listing } if run == st.run => match listing {
                Ok(listing) => st.on_listed(*listing),
                Err(why) => st.not_listed(why),
            },
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
            | ServerMsg::HttpListed { .. }
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
            ServerMsg::Upstream { run, event } if run == st.run && st.upstream.is_some() => {
                st.on_upstream(&myself, event);
            }
            // From an upstream dropped since.
            ServerMsg::Upstream { .. } => {}
            ServerMsg::Auth(event) => st.on_auth(&myself, event),
            ServerMsg::InjectPanic => panic!("injected panic in ServerActor {}", st.config.name),
            #[cfg(test)]
            ServerMsg::InjectBridgePanic => {
                if let Some(b) = &st.bridge {
                    let _ = b.actor.cast(crate::bridge::BridgeMsg::InjectPanic);
                }
            }
            ServerMsg::Relisten { attempt } => {
                if st.lc.child_coming() {
                    st.open_endpoint(&myself, attempt);
                }
            }
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
                    Action::TermGroup => {
                        if let Some(probe) = self.probe.take() {
                            // Let the probe task end its MCP session while
                            // the server still answers; SIGTERM follows
                            // (bounded by the probe timeout; the grace
                            // timer already runs).
                            self.tracker = None;
                            let (me, run) = (myself.clone(), self.run);
                            tokio::spawn(async move {
                                probe.stop().await;
                                let _ = me.cast(ServerMsg::TermAfterProbe { run });
                            });
                        } else {
                            self.child.signal(Signal::SIGTERM);
                        }
                    }
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
                    Action::CloseEndpoint => {
                        self.close_bridge("stop requested");
                        self.disconnect();
                    }
                    Action::HoldEndpoint => self.hold_bridge(),
                    Action::OpenEndpoint => self.open_endpoint(myself, 0),
                    Action::MarkUnhealthy(why) => {
                        self.auth_hold = Some(why.clone());
                        self.credentials_failed(myself, &why);
                    }
                    Action::ProbeNow => {
                        if let Some(p) = &self.probe {
                            p.probe_now();
                        }
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
        // A stdio server's bridge listening on the port holds it for the
        // child: nobody else can, and looking would walk every process's
        // fds on the way to an on-demand wake-up (SPEC §26).
        let listening = self.bridge.as_ref().is_some_and(|b| b.listening);
        let port = if listening { 0 } else { self.config.port };
        let spawner = self.spawner.clone();
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
        if self.config.transport == Transport::Remote {
            return self.connect(myself, run, secrets, holder);
        }
        // A stdio server's port is xy's own: bind it (or name its holder).
        if self.config.transport == Transport::Stdio
            && let Err(failure) = self.ensure_listening(holder.clone())
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
                self.probes.spawned = Some(Arc::new(config.clone()));
                self.attach(run, handle.take_stdio());
                self.start_probe(myself, run, Redactor::for_spawn(config));
                self.child = ChildSlot {
                    handle: Some(handle.clone()),
                    armed: true,
                };
                self.leader_alive = true;
                self.last_spawn_error = None;
                self.sandbox = handle.sandbox();
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
                self.sandbox = None;
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
            // A remote server, connected: its first answer may take long.
            S::Starting if self.lc.reaching => Some(StartOutcome::Started),
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
        // Wanted served: a child running or on its way, or an idle
        // on-demand server listening for the request that wakes it.
        let desired = self.lc.child_coming() || self.lc.pending_start;
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
}

#[cfg(test)]
mod tests;
