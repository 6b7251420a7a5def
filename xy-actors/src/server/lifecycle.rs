//! The server lifecycle as a pure function: `(state, event) -> (state,
//! actions)` over SPEC §4's states, with the restart policy, exponential
//! backoff and the sliding 60-second retry window. No I/O (an ignored event is
//! only logged at debug level), no clock reads: the caller passes `now`, so
//! every row is table-testable.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;
use xy_core::config::{RestartConfig, RestartPolicy};
use xy_core::protocol::{ServerState, describe_exit};

/// The sliding window for `max-retries-per-minute`; a run that stays up
/// longer than this also resets the backoff exponent.
pub(crate) const RETRY_WINDOW: Duration = Duration::from_secs(60);

/// Everything the lifecycle decides on. Owned by one ServerActor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lifecycle {
    /// Current state as `list` shows it.
    pub(crate) phase: ServerState,
    /// Some process of the current child's group may still be alive.
    pub(crate) group_alive: bool,
    /// The backoff elapsed while the old group was still being killed:
    /// spawn as soon as it is gone.
    pub(crate) backoff_due: bool,
    /// A start arrived while stopping: start once the group is gone.
    pub(crate) pending_start: bool,
    /// `n` of the next backoff: consecutive restarts so far.
    pub(crate) consecutive: u32,
    /// Times of the restarts inside the retry window.
    pub(crate) window: VecDeque<Instant>,
    /// Restarts done by policy since the daemon started this server.
    pub(crate) restart_count: u32,
    /// When the current run was spawned.
    pub(crate) run_started: Option<Instant>,
    /// The stop in progress is an on-demand idle stop: end `idle`.
    pub(crate) to_idle: bool,
    /// Why xy itself is ending the current run (failed health checks):
    /// its exit is a failure for the policy even if the child exits 0 on
    /// SIGTERM. Kept until the next spawn so `explain` can say it.
    pub(crate) killed_for: Option<String>,
    /// A remote server (SPEC §23) is connected (its upstream set up, its
    /// port listening) and waits for the upstream's first answer to be
    /// `running`: a `start` is answered already.
    pub(crate) reaching: bool,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            phase: ServerState::Stopped,
            group_alive: false,
            backoff_due: false,
            pending_start: false,
            consecutive: 0,
            window: VecDeque::new(),
            restart_count: 0,
            run_started: None,
            to_idle: false,
            killed_for: None,
            reaching: false,
        }
    }
}

impl Lifecycle {
    /// Whether a child is running or on its way: a stdio server's requests
    /// then wait for it instead of failing (a stop in progress that a start
    /// or restart will follow counts).
    pub(crate) fn child_coming(&self) -> bool {
        use ServerState as S;
        match self.phase {
            S::Starting | S::Running | S::Restarting | S::Idle => true,
            S::Stopping => self.pending_start || self.to_idle,
            S::Stopped | S::Failed => false,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// `start` (or auto-start, reload, restart).
    StartRequested,
    /// The child was spawned.
    Spawned,
    /// Spawning failed (command missing, not executable, bad cwd, …).
    SpawnFailed(String),
    /// The group leader exited: exit code, or the signal number that killed it.
    ChildExited {
        /// Exit code on a normal exit.
        code: Option<i32>,
        /// Signal number when killed by a signal.
        signal: Option<i32>,
    },
    /// `stop` (or shutdown, reload, restart).
    StopRequested,
    /// The stop grace period ran out.
    GraceExpired,
    /// No (non-zombie) process of the group is left.
    GroupGone,
    /// The restart backoff ran out.
    BackoffElapsed,
    /// Stop then start as one operation: the endpoint of a stdio server
    /// stays open and its sessions valid throughout (SPEC §18); requests
    /// arriving meanwhile wait for the next child. A restart by hand is
    /// counted in `restart_count` like a policy restart, but not in the
    /// retry window (a person restarting a server is not a crash loop).
    RestartRequested(RestartCause),
    /// The stdio bridge panicked; its successor listens again, and the
    /// child, which lost its pipes with the old bridge, is killed (its exit
    /// then goes through the restart policy).
    BridgeFailed,
    /// An on-demand server listens without a child (boot, auto-start).
    IdleRequested,
    /// An on-demand server's child went unused for `idle-stop`.
    IdleStopRequested,
    /// The health verdict turned `unhealthy` and the config asks for a
    /// restart on failure; the text says why (`2 failed health checks (…)`).
    HealthFailed(String),
    /// A remote server's upstream is set up and its port listens (its
    /// "spawn"): no process, so nothing to wait for but an answer.
    Connected,
    /// A remote server's upstream answered for the first time this run.
    Reached,
    /// The OAuth grant of a remote server stopped working (a refused
    /// refresh, a logout, more scopes needed; SPEC §23): the text is the
    /// why `status` shows, with the `xyctl auth login` hint.
    LoginNeeded(String),
    /// A login for a remote server completed: it may answer again.
    LoggedIn,
}

/// Who asked for a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestartCause {
    /// `xyctl restart`, the RPC, `top`'s `r`: counted in `restart_count`.
    ByHand,
    /// A reload changed the server's command, args or environment (not its
    /// port or path): not counted.
    Reload,
}

/// What the ServerActor must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Record a state change.
    Transition {
        /// Before.
        from: ServerState,
        /// After.
        to: ServerState,
        /// Why.
        reason: String,
    },
    /// Spawn the child now and report `Spawned` / `SpawnFailed`.
    Spawn,
    /// SIGTERM to the process group (after the health probe has ended its
    /// MCP session, if one runs).
    TermGroup,
    /// End the health probe at once, without waiting for it to close its
    /// session (the server is not answering it anyway).
    DropProbe,
    /// SIGKILL to the process group.
    KillGroup,
    /// Send `GraceExpired` after this long.
    ScheduleGrace(Duration),
    /// Send `BackoffElapsed` after this long.
    ScheduleBackoff(Duration),
    /// A stdio server's endpoint stops listening and its sessions end
    /// (`404` from then on): only a real stop asks for it, never a restart,
    /// a crash or an idle stop.
    CloseEndpoint,
    /// The child is being restarted by xy: a stdio server's new requests
    /// wait for the next child (those in flight fail with `-32603` naming
    /// the restart unless the child answers them before it exits); sessions
    /// and the listener stay.
    HoldEndpoint,
    /// A stdio server's endpoint must listen now (a new bridge after a
    /// panic), not only before the next spawn.
    OpenEndpoint,
    /// The health verdict is `unhealthy` now, for this why, without
    /// waiting for probes to count (the `on-unhealthy` hook and `notify`
    /// follow as for any turn to `unhealthy`).
    MarkUnhealthy(String),
    /// Probe now rather than at the next interval, so a recovery shows
    /// at once.
    ProbeNow,
}

/// How a child ended, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitKind {
    /// Code 0.
    Clean,
    /// Non-zero code.
    Dirty,
    /// Killed by a signal.
    Signal,
}

impl ExitKind {
    fn of(code: Option<i32>, signal: Option<i32>) -> ExitKind {
        match (code, signal) {
            (Some(0), _) => ExitKind::Clean,
            (Some(_), _) => ExitKind::Dirty,
            (None, _) => ExitKind::Signal,
        }
    }
}

/// Whether `policy` restarts after an exit of `kind`.
pub(crate) fn should_restart(policy: RestartPolicy, kind: ExitKind) -> bool {
    match policy {
        RestartPolicy::Always => true,
        RestartPolicy::OnFailure => kind != ExitKind::Clean,
        RestartPolicy::Never => false,
    }
}

/// Backoff before the `n`-th consecutive restart (`n >= 1`):
/// `min(initial × 2^(n-1), max)`.
pub(crate) fn backoff(initial: Duration, max: Duration, n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(31);
    initial.saturating_mul(1u32 << exp).min(max)
}

/// `SIGKILL` for 9, `SIG<n>` for numbers the platform does not name: the
/// signal's name in `last_exit` and in [`describe_exit`]'s sentence.
pub(crate) fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("SIG{sig}"))
}

/// An event this state does not act on (a late timer, a report about a
/// run that ended, a request the state makes moot): said at debug level, so
/// a trace shows why nothing happened.
fn ignored(state: ServerState, event: &Event) {
    tracing::debug!(%state, ?event, "lifecycle: event ignored in this state");
}

/// A restart, as a stop and a start in one (SPEC §4: `restart` is stop
/// then start; a stopped or failed server just starts). Like a start by
/// hand it forgets earlier failures. The endpoint is held, never closed.
fn begin_restart(
    s: &mut Lifecycle,
    cause: RestartCause,
    grace: Duration,
    actions: &mut Vec<Action>,
) {
    use ServerState as S;
    let why = match cause {
        RestartCause::ByHand => "restart requested",
        RestartCause::Reload => "config changed; restarting",
    };
    s.consecutive = 0;
    s.window.clear();
    s.backoff_due = false;
    match s.phase {
        S::Running | S::Starting if s.group_alive => {
            s.pending_start = true;
            go(s, S::Stopping, why.into(), actions);
            actions.push(Action::HoldEndpoint);
            actions.push(Action::TermGroup);
            actions.push(Action::ScheduleGrace(grace));
        }
        // A remote server has no process: connect again.
        S::Running => {
            s.pending_start = false;
            go(s, S::Starting, why.into(), actions);
            actions.push(Action::Spawn);
        }
        // The spawn being prepared reads the config in place when it runs
        // (a remote's connect too).
        S::Starting => {}
        // Backing off: the old group is being killed already.
        S::Restarting if s.group_alive => {
            s.pending_start = true;
            go(s, S::Stopping, why.into(), actions);
            actions.push(Action::KillGroup);
        }
        // A stop in progress (by hand, idle, or an earlier restart) is
        // followed by a start.
        S::Stopping => {
            s.pending_start = true;
            s.to_idle = false;
        }
        S::Restarting | S::Stopped | S::Failed | S::Idle => {
            s.pending_start = false;
            go(s, S::Starting, why.into(), actions);
            actions.push(Action::Spawn);
        }
    }
}

fn go(s: &mut Lifecycle, to: ServerState, reason: String, actions: &mut Vec<Action>) {
    if s.phase != to {
        actions.push(Action::Transition {
            from: s.phase,
            to,
            reason,
        });
        s.phase = to;
    }
}

/// One step of the state machine.
pub(crate) fn next(
    state: &Lifecycle,
    event: Event,
    restart: &RestartConfig,
    grace: Duration,
    now: Instant,
) -> (Lifecycle, Vec<Action>) {
    let mut s = state.clone();
    let mut actions = Vec::new();
    let from = state.phase;

    use ServerState as S;
    match (from, event) {
        (S::Stopped | S::Failed | S::Idle, Event::StartRequested) => {
            // A start by hand is a fresh beginning: forget earlier failures.
            s.consecutive = 0;
            s.window.clear();
            s.backoff_due = false;
            if s.group_alive {
                // The previous group is still being killed: it could hold the port.
                s.pending_start = true;
            } else {
                go(&mut s, S::Starting, "start requested".into(), &mut actions);
                actions.push(Action::Spawn);
            }
        }
        (S::Stopping, Event::StartRequested) => s.pending_start = true,
        (S::Running | S::Starting | S::Restarting, ev @ Event::StartRequested) => {
            ignored(from, &ev)
        }

        (S::Starting, Event::Spawned) => {
            s.group_alive = true;
            s.run_started = Some(now);
            go(&mut s, S::Running, "spawned".into(), &mut actions);
        }
        (S::Starting, Event::Connected) => s.reaching = true,
        (S::Starting, Event::Reached) if s.reaching => {
            s.reaching = false;
            s.run_started = Some(now);
            go(
                &mut s,
                S::Running,
                "the remote answered".into(),
                &mut actions,
            );
        }
        (_, ev @ (Event::Connected | Event::Reached)) => ignored(from, &ev),

        (S::Starting, Event::SpawnFailed(err)) => {
            s.run_started = None;
            go(
                &mut s,
                S::Failed,
                format!("spawn failed: {err}"),
                &mut actions,
            );
        }
        (_, ev @ (Event::Spawned | Event::SpawnFailed(_))) => ignored(from, &ev),

        (S::Running | S::Starting, Event::ChildExited { code, signal }) => {
            // xy ended this run for failing health checks: a failure for the
            // policy even when the child exits 0 on SIGTERM.
            let forced = s
                .killed_for
                .as_ref()
                .map(|why| format!("; stopped by xy: {why}"));
            let (code, signal) = match (&forced, code) {
                (Some(_), Some(0)) => (None, Some(nix::sys::signal::Signal::SIGTERM as i32)),
                _ => (code, signal),
            };
            let forced = forced.unwrap_or_default();
            let kind = ExitKind::of(code, signal);
            let what = describe_exit(code, signal.map(signal_name).as_deref());
            // A leftover grandchild must not hold the port for the next run.
            actions.push(Action::KillGroup);
            let ran_long = s
                .run_started
                .is_some_and(|t| now.saturating_duration_since(t) > RETRY_WINDOW);
            s.run_started = None;
            if ran_long {
                s.consecutive = 0;
            }
            while s
                .window
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) >= RETRY_WINDOW)
            {
                s.window.pop_front();
            }
            if !should_restart(restart.policy, kind) {
                let to = if kind == ExitKind::Clean {
                    S::Stopped
                } else {
                    S::Failed
                };
                go(
                    &mut s,
                    to,
                    format!("{what}; policy {}{forced}", restart.policy.as_str()),
                    &mut actions,
                );
            } else if s.window.len() >= restart.max_retries_per_minute as usize {
                go(
                    &mut s,
                    S::Failed,
                    format!(
                        "{what}; restart limit reached ({} per minute){forced}",
                        restart.max_retries_per_minute
                    ),
                    &mut actions,
                );
            } else {
                s.consecutive += 1;
                s.window.push_back(now);
                s.restart_count += 1;
                s.backoff_due = false;
                let delay = backoff(restart.backoff_initial, restart.backoff_max, s.consecutive);
                go(
                    &mut s,
                    S::Restarting,
                    format!(
                        "{what}; restart in {}{forced}",
                        humantime::format_duration(delay)
                    ),
                    &mut actions,
                );
                // The delay counts from the exit: arm it before anything
                // else; the killing and reaping of the group run meanwhile
                // (the spawn still waits for `GroupGone`).
                actions.insert(0, Action::ScheduleBackoff(delay));
            }
        }
        // While stopping the leader's exit is expected; the group may linger.
        (_, Event::ChildExited { .. }) => s.run_started = None,

        (S::Running | S::Starting, Event::StopRequested) => {
            s.reaching = false;
            actions.push(Action::CloseEndpoint);
            if s.group_alive {
                go(&mut s, S::Stopping, "stop requested".into(), &mut actions);
                actions.push(Action::TermGroup);
                actions.push(Action::ScheduleGrace(grace));
            } else {
                go(&mut s, S::Stopped, "stop requested".into(), &mut actions);
            }
        }
        (S::Restarting, Event::StopRequested) => {
            actions.push(Action::CloseEndpoint);
            s.backoff_due = false;
            if s.group_alive {
                go(&mut s, S::Stopping, "stop requested".into(), &mut actions);
                actions.push(Action::KillGroup);
            } else {
                go(&mut s, S::Stopped, "stop requested".into(), &mut actions);
            }
        }
        // A stop overtaking a restart or an idle stop ends the sessions too.
        (S::Stopping, Event::StopRequested) => {
            actions.push(Action::CloseEndpoint);
            s.pending_start = false;
            s.to_idle = false;
        }
        // A failed stdio server may still listen (its sessions wait for a
        // start): `stop` ends that.
        (S::Stopped | S::Failed, Event::StopRequested) => {
            actions.push(Action::CloseEndpoint);
            s.pending_start = false;
        }
        // An on-demand server with no child: `stop` stops listening too.
        (S::Idle, Event::StopRequested) => {
            actions.push(Action::CloseEndpoint);
            s.pending_start = false;
            go(&mut s, S::Stopped, "stop requested".into(), &mut actions);
        }

        (S::Stopped | S::Failed, Event::IdleRequested) => {
            s.consecutive = 0;
            s.window.clear();
            if s.group_alive {
                s.pending_start = false;
            }
            go(&mut s, S::Idle, "listening on demand".into(), &mut actions);
        }
        (_, ev @ Event::IdleRequested) => ignored(from, &ev),
        (S::Running | S::Starting, Event::IdleStopRequested) => {
            if s.group_alive {
                s.to_idle = true;
                go(
                    &mut s,
                    S::Stopping,
                    "idle: no request for idle-stop".into(),
                    &mut actions,
                );
                actions.push(Action::TermGroup);
                actions.push(Action::ScheduleGrace(grace));
            } else {
                go(
                    &mut s,
                    S::Idle,
                    "idle: no request for idle-stop".into(),
                    &mut actions,
                );
            }
        }
        (_, ev @ Event::IdleStopRequested) => ignored(from, &ev),

        (S::Stopping, Event::GraceExpired) => {
            if s.group_alive {
                actions.push(Action::KillGroup);
            }
        }
        // The grace of a health restart: the leader still runs.
        (S::Running, Event::GraceExpired) if s.killed_for.is_some() => {
            actions.push(Action::KillGroup);
        }
        (_, ev @ Event::GraceExpired) => ignored(from, &ev),

        (_, Event::GroupGone) => {
            s.group_alive = false;
            if from == S::Stopping {
                let to = if s.to_idle { S::Idle } else { S::Stopped };
                s.to_idle = false;
                go(&mut s, to, "process group gone".into(), &mut actions);
            }
            if s.pending_start && matches!(s.phase, S::Stopped | S::Failed | S::Idle) {
                s.pending_start = false;
                s.consecutive = 0;
                s.window.clear();
                go(&mut s, S::Starting, "start requested".into(), &mut actions);
                actions.push(Action::Spawn);
            } else if s.phase == S::Restarting && s.backoff_due {
                s.backoff_due = false;
                go(&mut s, S::Starting, "backoff elapsed".into(), &mut actions);
                actions.push(Action::Spawn);
            }
        }

        (S::Restarting, Event::BackoffElapsed) => {
            if s.group_alive {
                s.backoff_due = true;
            } else {
                go(&mut s, S::Starting, "backoff elapsed".into(), &mut actions);
                actions.push(Action::Spawn);
            }
        }
        (_, ev @ Event::BackoffElapsed) => ignored(from, &ev),

        (_, Event::RestartRequested(cause)) => {
            if cause == RestartCause::ByHand {
                s.restart_count = s.restart_count.saturating_add(1);
            }
            begin_restart(&mut s, cause, grace, &mut actions);
        }

        (_, Event::BridgeFailed) => {
            // Listen again wherever the endpoint was open (never after a
            // stop, which closed it).
            if s.child_coming() {
                actions.push(Action::OpenEndpoint);
            }
            if s.group_alive && matches!(from, S::Running | S::Starting | S::Stopping) {
                // A stop in progress stays an ordinary stop.
                if s.killed_for.is_none() && from != S::Stopping {
                    s.killed_for = Some("its stdio bridge failed".to_owned());
                }
                actions.push(Action::KillGroup);
            }
        }

        // Only a running child is restarted for its health, and only once
        // per run: the SIGTERM (SIGKILL after `stop.grace`) ends it, and its
        // exit goes through the restart policy like any failure.
        // A remote server (no process) reconnects.
        (S::Running, Event::HealthFailed(why)) if !s.group_alive => {
            go(
                &mut s,
                S::Starting,
                format!("reconnecting: {why}"),
                &mut actions,
            );
            actions.push(Action::Spawn);
        }
        (S::Running, Event::HealthFailed(why)) if s.killed_for.is_none() => {
            s.killed_for = Some(why);
            actions.push(Action::HoldEndpoint);
            actions.push(Action::DropProbe);
            actions.push(Action::TermGroup);
            actions.push(Action::ScheduleGrace(grace));
        }
        (_, ev @ Event::HealthFailed(_)) => ignored(from, &ev),

        // A remote (no process) connected this run: its grant decides
        // whether it can answer. A stopped, failed or idle server has no
        // verdict to change, and a reconnect in progress probes anew.
        (S::Running, Event::LoginNeeded(why)) if !s.group_alive => {
            actions.push(Action::MarkUnhealthy(why));
        }
        (S::Starting, Event::LoginNeeded(why)) if s.reaching => {
            actions.push(Action::MarkUnhealthy(why));
        }
        (S::Running, Event::LoggedIn) if !s.group_alive => actions.push(Action::ProbeNow),
        (S::Starting, Event::LoggedIn) if s.reaching => actions.push(Action::ProbeNow),
        (_, ev @ (Event::LoginNeeded(_) | Event::LoggedIn)) => ignored(from, &ev),
    }
    if actions.contains(&Action::Spawn) {
        // A new run: why xy ended the previous one no longer applies.
        s.killed_for = None;
        s.reaching = false;
    }
    (s, actions)
}

#[cfg(test)]
mod tests;
