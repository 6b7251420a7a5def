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
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;
use xy_core::config::ServerConfig;
use xy_core::protocol::{LastExit, ListEntry, ServerState, StatusResult, Transition};

use crate::engine::SpawnFailure;
use crate::log_router::sink::SharedSink;
use crate::supervisor::RootMsg;

pub(crate) mod lifecycle;
#[cfg(test)]
pub(crate) mod mock;
pub(crate) mod process;

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
}

/// Messages of the ServerActor.
pub(crate) enum ServerMsg {
    /// Start (reply once spawned or failed); `None`: auto-start, no reply.
    Start(Option<RpcReplyPort<StartOutcome>>),
    /// Stop; the reply comes once the process group is gone.
    Stop(RpcReplyPort<StopOutcome>),
    /// Current status, answered at once in every state.
    Snapshot(RpcReplyPort<StatusResult>),
    /// Replace the config (reload); takes effect at the next spawn.
    SetConfig(Box<ServerConfig>),
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
    /// Fault injection: panic in the handler.
    InjectPanic,
}

/// Startup arguments.
pub(crate) struct ServerArgs {
    pub(crate) config: ServerConfig,
    pub(crate) sink: SharedSink,
    pub(crate) spawner: Arc<dyn ChildSpawner>,
    /// Where desired state and pgid are reported (none in unit tests).
    pub(crate) root: Option<ActorRef<RootMsg>>,
    /// Start as soon as the actor is up.
    pub(crate) autostart: bool,
    /// The group of a predecessor that panicked: killed and awaited first.
    pub(crate) prior_pgid: Option<i32>,
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
    root: Option<ActorRef<RootMsg>>,
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
                    let _ = crate::group::signal_group(pgid, Signal::SIGKILL);
                    let gone = tokio::time::timeout(
                        Duration::from_secs(5),
                        crate::group::wait_group_gone(pgid, None),
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
        Ok(ServerActorState {
            config: args.config,
            sink: args.sink,
            spawner: args.spawner,
            root: args.root,
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
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        st: &mut ServerActorState,
    ) -> Result<(), ActorProcessingErr> {
        use ServerState as S;
        match msg {
            ServerMsg::Start(reply) => match st.lc.phase {
                S::Running | S::Starting | S::Restarting => {
                    if let Some(reply) = reply
                        && !reply.is_closed()
                    {
                        let _ = reply.send(StartOutcome::AlreadyRunning);
                    }
                }
                S::Stopped | S::Failed | S::Stopping => {
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
            ServerMsg::Snapshot(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(st.status());
                }
            }
            ServerMsg::SetConfig(config) => st.config = *config,
            ServerMsg::Child { run, event } if run == st.run => match event {
                ChildEvent::Exited(exit) => {
                    st.leader_alive = false;
                    st.last_exit = Some(LastExit {
                        code: exit.code,
                        signal: exit.signal.map(lifecycle::signal_name),
                        ts: xy_core::time::now_rfc3339(),
                    });
                    tracing::info!(server = %st.config.name, "{}", lifecycle::describe_exit(exit.code, exit.signal));
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
                if st.lc.phase == S::Stopping && st.lc.group_alive {
                    tracing::warn!(server = %st.config.name, grace_ms = xy_core::time::as_millis_u64(st.config.stop.grace), "grace period over; sending SIGKILL to the process group");
                }
                st.apply(&myself, Event::GraceExpired);
            }
            ServerMsg::BackoffElapsed { run } if run == st.run => {
                st.apply(&myself, Event::BackoffElapsed)
            }
            // Reports about an earlier spawn.
            ServerMsg::Child { .. }
            | ServerMsg::GraceExpired { .. }
            | ServerMsg::BackoffElapsed { .. } => {}
            ServerMsg::InjectPanic => panic!("injected panic in ServerActor {}", st.config.name),
        }
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
                    Action::Transition { from, to, reason } => self.record(from, to, reason),
                    Action::Spawn => queue.push_back(self.spawn(myself)),
                    Action::TermGroup => self.child.signal(Signal::SIGTERM),
                    Action::KillGroup => self.child.signal(Signal::SIGKILL),
                    Action::ScheduleGrace(d) => {
                        let run = self.run;
                        myself.send_after(d, move || ServerMsg::GraceExpired { run });
                    }
                    Action::ScheduleBackoff(d) => {
                        let run = self.run;
                        myself.send_after(d, move || ServerMsg::BackoffElapsed { run });
                    }
                }
            }
        }
        self.settle();
        self.report(myself);
    }

    fn spawn(&mut self, myself: &ActorRef<ServerMsg>) -> Event {
        self.run += 1;
        let run = self.run;
        match self.spawner.spawn(&self.config, &self.sink) {
            Ok(handle) => {
                tracing::info!(server = %self.config.name, pid = handle.pid(), "spawned");
                self.child = ChildSlot {
                    handle: Some(handle.clone()),
                    armed: true,
                };
                self.leader_alive = true;
                self.last_spawn_error = None;
                let me = myself.clone();
                tokio::spawn(async move {
                    let exit = handle.wait().await;
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
        self.transitions.push_back(Transition {
            from,
            to,
            ts: xy_core::time::rfc3339_ms(SystemTime::now()),
            reason,
        });
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
                    }),
            )),
            S::Stopped => Some(StartOutcome::Cancelled),
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
        if let Some(root) = &self.root {
            let _ = root.cast(RootMsg::Report {
                id: myself.get_id(),
                desired,
                pgid,
            });
        }
    }

    fn status(&self) -> StatusResult {
        let c = &self.config;
        let running = self.lc.phase == ServerState::Running;
        StatusResult {
            entry: ListEntry {
                name: c.name.clone(),
                state: self.lc.phase,
                pid: self
                    .child
                    .handle
                    .as_ref()
                    .filter(|_| self.leader_alive)
                    .map(|h| h.pid()),
                port: c.port,
                uptime_secs: self
                    .lc
                    .run_started
                    .filter(|_| running)
                    .map(|t| t.elapsed().as_secs()),
                restart_count: self.lc.restart_count,
                last_exit: self.last_exit.clone(),
            },
            transitions: self.transitions.iter().cloned().collect(),
            command: c.command.clone(),
            args: c.args.clone(),
            working_dir: c.working_dir.as_ref().map(|d| d.display().to_string()),
            env_keys: c.env.keys().cloned().collect(),
            restart: c.restart_settings(),
            stop: c.stop_settings(),
            config_file: c.source.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
