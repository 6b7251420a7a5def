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
    /// `restart` by hand (RPC, `xyctl restart`, `top`'s `r`): counted in
    /// `restart_count` like a policy restart, but not in the retry window
    /// (a person restarting a server is not a crash loop). The stop and
    /// start it consists of arrive as their own events.
    RestartRequested,
    /// An on-demand server listens without a child (boot, auto-start).
    IdleRequested,
    /// An on-demand server's child went unused for `idle-stop`.
    IdleStopRequested,
    /// The health verdict turned `unhealthy` and the config asks for a
    /// restart on failure; the text says why (`2 failed health checks (…)`).
    HealthFailed(String),
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
            if s.group_alive {
                go(&mut s, S::Stopping, "stop requested".into(), &mut actions);
                actions.push(Action::TermGroup);
                actions.push(Action::ScheduleGrace(grace));
            } else {
                go(&mut s, S::Stopped, "stop requested".into(), &mut actions);
            }
        }
        (S::Restarting, Event::StopRequested) => {
            s.backoff_due = false;
            if s.group_alive {
                go(&mut s, S::Stopping, "stop requested".into(), &mut actions);
                actions.push(Action::KillGroup);
            } else {
                go(&mut s, S::Stopped, "stop requested".into(), &mut actions);
            }
        }
        (S::Stopping, Event::StopRequested) => {
            s.pending_start = false;
            s.to_idle = false;
        }
        (S::Stopped | S::Failed, Event::StopRequested) => s.pending_start = false,
        // An on-demand server with no child: `stop` stops listening too.
        (S::Idle, Event::StopRequested) => {
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

        (_, Event::RestartRequested) => s.restart_count = s.restart_count.saturating_add(1),

        // Only a running child is restarted for its health, and only once
        // per run: the SIGTERM (SIGKILL after `stop.grace`) ends it, and its
        // exit goes through the restart policy like any failure.
        (S::Running, Event::HealthFailed(why)) if s.killed_for.is_none() => {
            s.killed_for = Some(why);
            actions.push(Action::DropProbe);
            actions.push(Action::TermGroup);
            actions.push(Action::ScheduleGrace(grace));
        }
        (_, ev @ Event::HealthFailed(_)) => ignored(from, &ev),
    }
    if actions.contains(&Action::Spawn) {
        // A new run: why xy ended the previous one no longer applies.
        s.killed_for = None;
    }
    (s, actions)
}

#[cfg(test)]
mod tests;
