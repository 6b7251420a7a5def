//! Table tests: every (state, event) row of the lifecycle, policy × exit kind,
//! backoff growth and cap, and the retry window.

use super::*;
use ServerState as S;

const GRACE: Duration = Duration::from_millis(300);

fn cfg(policy: RestartPolicy) -> RestartConfig {
    RestartConfig {
        policy,
        backoff_initial: Duration::from_millis(100),
        backoff_max: Duration::from_millis(1000),
        max_retries_per_minute: 3,
    }
}

fn at(phase: ServerState) -> Lifecycle {
    Lifecycle {
        phase,
        group_alive: matches!(phase, S::Running | S::Stopping),
        ..Lifecycle::default()
    }
}

fn health(why: &str) -> Event {
    Event::HealthFailed(why.to_owned())
}

fn exit(code: Option<i32>, signal: Option<i32>) -> Event {
    Event::ChildExited { code, signal }
}

/// The non-transition actions, for compact assertions.
fn effects(actions: &[Action]) -> Vec<Action> {
    actions
        .iter()
        .filter(|a| !matches!(a, Action::Transition { .. }))
        .cloned()
        .collect()
}

fn step(
    state: &Lifecycle,
    ev: Event,
    policy: RestartPolicy,
    now: Instant,
) -> (Lifecycle, Vec<Action>) {
    next(state, ev, &cfg(policy), GRACE, now)
}

#[test]
fn every_row() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    // (from, event, expected phase, expected effects)
    let rows: Vec<(ServerState, Event, ServerState, Vec<Action>)> = vec![
        (
            S::Stopped,
            Event::StartRequested,
            S::Starting,
            vec![Action::Spawn],
        ),
        (
            S::Failed,
            Event::StartRequested,
            S::Starting,
            vec![Action::Spawn],
        ),
        (S::Running, Event::StartRequested, S::Running, vec![]),
        (S::Restarting, Event::StartRequested, S::Restarting, vec![]),
        (S::Stopping, Event::StartRequested, S::Stopping, vec![]),
        (S::Starting, Event::Spawned, S::Running, vec![]),
        (
            S::Starting,
            Event::SpawnFailed("ENOENT".into()),
            S::Failed,
            vec![],
        ),
        (S::Running, Event::Spawned, S::Running, vec![]),
        (
            S::Running,
            exit(Some(1), None),
            S::Restarting,
            // The backoff is armed first: it counts from the exit, while the
            // rest of the group is killed and reaped.
            vec![
                Action::ScheduleBackoff(Duration::from_millis(100)),
                Action::KillGroup,
            ],
        ),
        (
            S::Running,
            exit(Some(0), None),
            S::Stopped,
            vec![Action::KillGroup],
        ),
        (S::Stopping, exit(Some(0), None), S::Stopping, vec![]),
        (
            S::Running,
            Event::StopRequested,
            S::Stopping,
            vec![
                Action::CloseEndpoint,
                Action::TermGroup,
                Action::ScheduleGrace(GRACE),
            ],
        ),
        (
            S::Restarting,
            Event::StopRequested,
            S::Stopped,
            vec![Action::CloseEndpoint],
        ),
        (
            S::Stopping,
            Event::StopRequested,
            S::Stopping,
            vec![Action::CloseEndpoint],
        ),
        (
            S::Stopped,
            Event::StopRequested,
            S::Stopped,
            vec![Action::CloseEndpoint],
        ),
        (
            S::Failed,
            Event::StopRequested,
            S::Failed,
            vec![Action::CloseEndpoint],
        ),
        (
            S::Stopping,
            Event::GraceExpired,
            S::Stopping,
            vec![Action::KillGroup],
        ),
        (S::Running, Event::GraceExpired, S::Running, vec![]),
        (S::Stopped, Event::GraceExpired, S::Stopped, vec![]),
        (S::Stopping, Event::GroupGone, S::Stopped, vec![]),
        (S::Stopped, Event::GroupGone, S::Stopped, vec![]),
        (
            S::Restarting,
            Event::BackoffElapsed,
            S::Starting,
            vec![Action::Spawn],
        ),
        (S::Stopped, Event::BackoffElapsed, S::Stopped, vec![]),
        (S::Running, Event::BackoffElapsed, S::Running, vec![]),
        // Health-triggered restart: SIGTERM now (the probe is dropped, not
        // asked to end its session), SIGKILL after the grace; the exit
        // that follows goes through the policy.
        (
            S::Running,
            health("2 failed health checks (timed out)"),
            S::Running,
            vec![
                Action::HoldEndpoint,
                Action::DropProbe,
                Action::TermGroup,
                Action::ScheduleGrace(GRACE),
            ],
        ),
        (S::Starting, health("x"), S::Starting, vec![]),
        (S::Restarting, health("x"), S::Restarting, vec![]),
        (S::Stopping, health("x"), S::Stopping, vec![]),
        (S::Stopped, health("x"), S::Stopped, vec![]),
        (S::Failed, health("x"), S::Failed, vec![]),
    ];
    for (from, ev, to, want) in rows {
        let (s, actions) = step(&at(from), ev.clone(), p, now);
        assert_eq!(s.phase, to, "{from:?} + {ev:?}");
        assert_eq!(effects(&actions), want, "{from:?} + {ev:?}");
        let transitions = actions.len() - effects(&actions).len();
        assert_eq!(transitions, usize::from(from != to), "{from:?} + {ev:?}");
    }
}

#[test]
fn policy_times_exit_kind() {
    let now = Instant::now();
    use RestartPolicy::{Always, Never, OnFailure};
    let clean = (Some(0), None);
    let dirty = (Some(3), None);
    let signal = (None, Some(9));
    let rows = [
        (Always, clean, S::Restarting),
        (Always, dirty, S::Restarting),
        (Always, signal, S::Restarting),
        (OnFailure, clean, S::Stopped),
        (OnFailure, dirty, S::Restarting),
        (OnFailure, signal, S::Restarting),
        (Never, clean, S::Stopped),
        (Never, dirty, S::Failed),
        (Never, signal, S::Failed),
    ];
    for (policy, (code, sig), want) in rows {
        let (s, actions) = step(&at(S::Running), exit(code, sig), policy, now);
        assert_eq!(s.phase, want, "{policy:?} {code:?} {sig:?}");
        assert_eq!(
            actions.iter().filter(|a| **a == Action::KillGroup).count(),
            1
        );
        assert_eq!(s.restart_count, u32::from(want == S::Restarting));
    }
}

#[test]
fn backoff_math() {
    let i = Duration::from_millis(100);
    let m = Duration::from_millis(1000);
    let got: Vec<u128> = (1..=7).map(|n| backoff(i, m, n).as_millis()).collect();
    assert_eq!(got, [100, 200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(
        backoff(Duration::from_secs(1), Duration::from_secs(30), 100),
        Duration::from_secs(30)
    );
}

/// Drives exits and backoffs through the machine; returns the backoffs seen.
fn crash_loop(policy: RestartConfig, crashes: u32, gap: Duration) -> (Lifecycle, Vec<Duration>) {
    let mut now = Instant::now();
    let mut s = at(S::Stopped);
    let mut delays = Vec::new();
    (s, _) = next(&s, Event::StartRequested, &policy, GRACE, now);
    (s, _) = next(&s, Event::Spawned, &policy, GRACE, now);
    for _ in 0..crashes {
        now += gap;
        let actions;
        (s, actions) = next(&s, exit(Some(1), None), &policy, GRACE, now);
        (s, _) = next(&s, Event::GroupGone, &policy, GRACE, now);
        let Some(d) = actions.iter().find_map(|a| match a {
            Action::ScheduleBackoff(d) => Some(*d),
            _ => None,
        }) else {
            break;
        };
        delays.push(d);
        now += d;
        (s, _) = next(&s, Event::BackoffElapsed, &policy, GRACE, now);
        assert_eq!(s.phase, S::Starting);
        (s, _) = next(&s, Event::Spawned, &policy, GRACE, now);
    }
    (s, delays)
}

#[test]
fn backoff_grows_to_cap() {
    let mut c = cfg(RestartPolicy::Always);
    c.max_retries_per_minute = 100;
    let (s, delays) = crash_loop(c, 6, Duration::from_millis(1));
    let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
    assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
    assert_eq!(s.restart_count, 6);
}

#[test]
fn window_exceeded_fails_after_n_plus_one_spawns() {
    let c = cfg(RestartPolicy::OnFailure); // 3 per minute
    let (s, delays) = crash_loop(c, 10, Duration::from_millis(1));
    // 1 first spawn + 3 restarts = 4 spawns, the 4th exit fails it.
    assert_eq!(delays.len(), 3);
    assert_eq!(s.phase, S::Failed);
    assert_eq!(s.restart_count, 3);
}

#[test]
fn long_run_resets_backoff_and_window_slides() {
    let c = cfg(RestartPolicy::OnFailure);
    // Each run lasts 61 s: n resets and the window never fills.
    let (s, delays) = crash_loop(c, 8, Duration::from_secs(61));
    assert_eq!(delays.len(), 8);
    assert!(delays.iter().all(|d| *d == Duration::from_millis(100)));
    assert_eq!(s.phase, S::Running);
}

#[test]
fn start_leaves_failed_and_resets_counters() {
    let c = cfg(RestartPolicy::OnFailure);
    let (s, _) = crash_loop(c.clone(), 10, Duration::from_millis(1));
    assert_eq!(s.phase, S::Failed);
    let (s, actions) = next(&s, Event::StartRequested, &c, GRACE, Instant::now());
    assert_eq!(s.phase, S::Starting);
    assert!(actions.contains(&Action::Spawn));
    assert!(s.window.is_empty());
    assert_eq!(s.consecutive, 0);
}

#[test]
fn zero_retries_fails_at_once() {
    let mut c = cfg(RestartPolicy::Always);
    c.max_retries_per_minute = 0;
    let (s, delays) = crash_loop(c, 3, Duration::from_millis(1));
    assert!(delays.is_empty());
    assert_eq!(s.phase, S::Failed);
}

#[test]
fn backoff_waits_for_group_gone() {
    let c = cfg(RestartPolicy::Always);
    let now = Instant::now();
    let (s, _) = next(&at(S::Running), exit(Some(1), None), &c, GRACE, now);
    assert!(s.group_alive);
    let (s, actions) = next(&s, Event::BackoffElapsed, &c, GRACE, now);
    assert_eq!(s.phase, S::Restarting);
    assert!(actions.is_empty());
    assert!(s.backoff_due);
    let (s, actions) = next(&s, Event::GroupGone, &c, GRACE, now);
    assert_eq!(s.phase, S::Starting);
    assert_eq!(effects(&actions), vec![Action::Spawn]);
}

#[test]
fn stop_while_restarting_with_group_alive_kills() {
    let c = cfg(RestartPolicy::Always);
    let now = Instant::now();
    let (s, _) = next(&at(S::Running), exit(Some(1), None), &c, GRACE, now);
    let (s, actions) = next(&s, Event::StopRequested, &c, GRACE, now);
    assert_eq!(s.phase, S::Stopping);
    assert_eq!(
        effects(&actions),
        vec![Action::CloseEndpoint, Action::KillGroup]
    );
    let (s, _) = next(&s, Event::BackoffElapsed, &c, GRACE, now);
    assert_eq!(s.phase, S::Stopping);
    let (s, _) = next(&s, Event::GroupGone, &c, GRACE, now);
    assert_eq!(s.phase, S::Stopped);
}

#[test]
fn start_during_stop_starts_after_group_gone() {
    let c = cfg(RestartPolicy::OnFailure);
    let now = Instant::now();
    let (s, _) = next(&at(S::Running), Event::StopRequested, &c, GRACE, now);
    let (s, _) = next(&s, Event::StartRequested, &c, GRACE, now);
    assert!(s.pending_start);
    let (s, _) = next(&s, exit(Some(0), None), &c, GRACE, now);
    assert_eq!(s.phase, S::Stopping);
    let (s, actions) = next(&s, Event::GroupGone, &c, GRACE, now);
    assert_eq!(s.phase, S::Starting);
    assert_eq!(effects(&actions), vec![Action::Spawn]);
    let kinds: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Transition { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [S::Stopped, S::Starting]);
}

#[test]
fn start_after_failure_waits_for_old_group() {
    let c = cfg(RestartPolicy::Never);
    let now = Instant::now();
    let (s, _) = next(&at(S::Running), exit(Some(1), None), &c, GRACE, now);
    assert_eq!(s.phase, S::Failed);
    assert!(s.group_alive);
    let (s, actions) = next(&s, Event::StartRequested, &c, GRACE, now);
    assert_eq!(s.phase, S::Failed);
    assert!(actions.is_empty());
    let (s, actions) = next(&s, Event::GroupGone, &c, GRACE, now);
    assert_eq!(s.phase, S::Starting);
    assert_eq!(effects(&actions), vec![Action::Spawn]);
}

#[test]
fn reasons_name_the_exit() {
    let c = cfg(RestartPolicy::Never);
    let (_, actions) = next(
        &at(S::Running),
        exit(None, Some(9)),
        &c,
        GRACE,
        Instant::now(),
    );
    let Some(Action::Transition { reason, to, .. }) = actions
        .first()
        .filter(|a| matches!(a, Action::Transition { .. }))
        .or(actions.get(1))
    else {
        panic!("no transition in {actions:?}");
    };
    assert_eq!(*to, S::Failed);
    assert!(reason.contains("SIGKILL"), "{reason}");
    assert_eq!(signal_name(15), "SIGTERM");
}

#[test]
fn a_restart_by_hand_counts_a_reload_restart_does_not_and_neither_fills_the_window() {
    let now = Instant::now();
    for (cause, counted) in [(RestartCause::ByHand, 1), (RestartCause::Reload, 0)] {
        for phase in [S::Running, S::Stopped, S::Failed, S::Restarting, S::Idle] {
            let mut before = at(phase);
            before.window.push_back(now);
            let (after, _) = step(
                &before,
                Event::RestartRequested(cause),
                RestartPolicy::OnFailure,
                now,
            );
            assert_eq!(after.restart_count, counted, "{cause:?} {phase:?}");
            // Like a start by hand: a fresh beginning, not a crash.
            assert!(after.window.is_empty(), "{cause:?} {phase:?}");
        }
    }
}

/// SPEC §18: a restart holds the endpoint (never closes it) and ends in a
/// spawn, through a stop when a child runs.
#[test]
fn a_restart_is_a_stop_then_a_start_that_holds_the_endpoint() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    let (s, actions) = step(
        &at(S::Running),
        Event::RestartRequested(RestartCause::ByHand),
        p,
        now,
    );
    assert_eq!(s.phase, S::Stopping);
    assert!(s.pending_start && s.child_coming(), "{s:?}");
    assert_eq!(
        effects(&actions),
        vec![
            Action::HoldEndpoint,
            Action::TermGroup,
            Action::ScheduleGrace(GRACE)
        ]
    );
    let (s, actions) = step(&s, exit(Some(0), None), p, now);
    assert_eq!(s.phase, S::Stopping);
    assert!(s.child_coming(), "the leader's exit is expected");
    assert!(!actions.contains(&Action::CloseEndpoint), "{actions:?}");
    let (s, actions) = step(&s, Event::GroupGone, p, now);
    assert_eq!(s.phase, S::Starting);
    assert_eq!(effects(&actions), vec![Action::Spawn]);
    let (s, _) = step(&s, Event::Spawned, p, now);
    assert_eq!(s.phase, S::Running);

    // From stopped, failed, idle or a backoff wait: straight to a spawn.
    for phase in [S::Stopped, S::Failed, S::Idle] {
        let (s, actions) = step(
            &at(phase),
            Event::RestartRequested(RestartCause::Reload),
            p,
            now,
        );
        assert_eq!(s.phase, S::Starting, "{phase:?}");
        assert_eq!(effects(&actions), vec![Action::Spawn], "{phase:?}");
    }
    let mut backing_off = at(S::Restarting);
    backing_off.group_alive = true;
    let (s, actions) = step(
        &backing_off,
        Event::RestartRequested(RestartCause::ByHand),
        p,
        now,
    );
    assert_eq!(s.phase, S::Stopping);
    assert!(s.pending_start);
    assert_eq!(effects(&actions), vec![Action::KillGroup]);
}

/// Only a real stop ends a stdio server's sessions; a crash, a health
/// restart and an idle stop never do.
#[test]
fn only_a_stop_closes_the_endpoint() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    for phase in [
        S::Running,
        S::Starting,
        S::Restarting,
        S::Stopping,
        S::Stopped,
        S::Failed,
        S::Idle,
    ] {
        let (s, actions) = step(&at(phase), Event::StopRequested, p, now);
        assert!(
            actions.contains(&Action::CloseEndpoint),
            "{phase:?}: {actions:?}"
        );
        assert!(!s.pending_start && !s.to_idle, "{phase:?}");
    }
    // A stop overtaking a restart cancels its start and ends the sessions.
    let (restarting, _) = step(
        &at(S::Running),
        Event::RestartRequested(RestartCause::ByHand),
        p,
        now,
    );
    let (s, actions) = step(&restarting, Event::StopRequested, p, now);
    assert!(actions.contains(&Action::CloseEndpoint));
    assert!(!s.pending_start && !s.child_coming());

    let quiet = [
        exit(Some(1), None),
        exit(None, Some(9)),
        health("2 failed health checks (timed out)"),
        Event::IdleStopRequested,
        Event::GraceExpired,
        Event::GroupGone,
        Event::BackoffElapsed,
    ];
    for ev in quiet {
        for phase in [S::Running, S::Restarting, S::Idle] {
            let (_, actions) = step(&at(phase), ev.clone(), p, now);
            assert!(
                !actions.contains(&Action::CloseEndpoint),
                "{phase:?} {ev:?}: {actions:?}"
            );
        }
    }
    // An idle stop keeps listening: a request wakes the server.
    let (s, _) = step(&at(S::Running), Event::IdleStopRequested, p, now);
    assert!(s.child_coming());
    let (s, _) = step(&s, Event::GroupGone, p, now);
    assert_eq!(s.phase, S::Idle);
}

/// A health restart lets go of the wedged child at once: its requests
/// fail naming the restart, new ones wait for the next child.
#[test]
fn a_health_restart_holds_the_endpoint() {
    let (_, actions) = step(
        &at(S::Running),
        health("2 failed health checks (timed out)"),
        RestartPolicy::OnFailure,
        Instant::now(),
    );
    assert_eq!(actions.first(), Some(&Action::HoldEndpoint), "{actions:?}");
}

/// A panicked bridge: the child is killed by the lifecycle (its exit goes
/// through the policy) and the new bridge listens wherever the endpoint
/// was open, an idle on-demand server's included.
#[test]
fn a_failed_bridge_kills_the_child_and_listens_again() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    let (s, actions) = step(&at(S::Running), Event::BridgeFailed, p, now);
    assert_eq!(
        effects(&actions),
        vec![Action::OpenEndpoint, Action::KillGroup]
    );
    assert!(
        s.killed_for
            .as_deref()
            .is_some_and(|w| w.contains("bridge"))
    );
    let (s, _) = step(&s, exit(None, Some(9)), p, now);
    assert_eq!(s.phase, S::Restarting);

    let (s, actions) = step(&at(S::Idle), Event::BridgeFailed, p, now);
    assert_eq!(s.phase, S::Idle);
    assert_eq!(effects(&actions), vec![Action::OpenEndpoint]);
    for phase in [S::Stopped, S::Failed] {
        let (_, actions) = step(&at(phase), Event::BridgeFailed, p, now);
        assert!(actions.is_empty(), "{phase:?}: {actions:?}");
    }
    // During a stop the endpoint stays closed; the child is killed.
    let (stopping, _) = step(&at(S::Running), Event::StopRequested, p, now);
    let (s, actions) = step(&stopping, Event::BridgeFailed, p, now);
    assert_eq!(effects(&actions), vec![Action::KillGroup]);
    assert!(s.killed_for.is_none());
}

/// The state after a health restart was decided for a running child.
fn health_killed(policy: RestartPolicy) -> Lifecycle {
    let (s, _) = step(
        &at(S::Running),
        health("2 failed health checks (timed out)"),
        policy,
        Instant::now(),
    );
    assert_eq!(
        s.killed_for.as_deref(),
        Some("2 failed health checks (timed out)")
    );
    s
}

fn only_transition(actions: &[Action]) -> (ServerState, String) {
    let t: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Transition { to, reason, .. } => Some((*to, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(t.len(), 1, "{actions:?}");
    t[0].clone()
}

#[test]
fn health_restart_happens_once_per_run_and_kills_after_grace() {
    let s = health_killed(RestartPolicy::OnFailure);
    // A second unhealthy verdict of the same run sends nothing more.
    let (s, actions) = step(
        &s,
        health("3 failed health checks"),
        RestartPolicy::OnFailure,
        Instant::now(),
    );
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(
        s.killed_for.as_deref(),
        Some("2 failed health checks (timed out)")
    );
    // The grace ran out and the leader still runs: SIGKILL.
    let (s, actions) = step(
        &s,
        Event::GraceExpired,
        RestartPolicy::OnFailure,
        Instant::now(),
    );
    assert_eq!(actions, vec![Action::KillGroup]);
    assert_eq!(s.phase, S::Running);
}

/// (policy, exit code, exit signal, state after, words the reason holds)
type ForcedExitRow = (
    RestartPolicy,
    Option<i32>,
    Option<i32>,
    ServerState,
    &'static [&'static str],
);

/// The forced exit: what the child's exit means once xy has ended the run
/// for its health. Rows: (policy, exit code, exit signal, state after,
/// words the reason must hold).
#[test]
fn forced_exit_rows() {
    let rows: Vec<ForcedExitRow> = vec![
        // A clean exit on SIGTERM is still a failure: on-failure restarts.
        (
            RestartPolicy::OnFailure,
            Some(0),
            None,
            S::Restarting,
            &[
                "killed by SIGTERM",
                "restart in",
                "stopped by xy: 2 failed health checks (timed out)",
            ],
        ),
        (
            RestartPolicy::Always,
            Some(0),
            None,
            S::Restarting,
            &["killed by SIGTERM", "stopped by xy"],
        ),
        // `policy "never"` ends `failed`, not `stopped`.
        (
            RestartPolicy::Never,
            Some(0),
            None,
            S::Failed,
            &["killed by SIGTERM", "policy never", "stopped by xy"],
        ),
        // A non-zero code or a signal is kept as it was.
        (
            RestartPolicy::OnFailure,
            Some(3),
            None,
            S::Restarting,
            &["exited with code 3", "stopped by xy"],
        ),
        (
            RestartPolicy::Never,
            None,
            Some(9),
            S::Failed,
            &["SIGKILL", "stopped by xy"],
        ),
    ];
    for (policy, code, signal, to, words) in rows {
        let s = health_killed(policy);
        let (after, actions) = step(&s, exit(code, signal), policy, Instant::now());
        assert_eq!(after.phase, to, "{policy:?} {code:?} {signal:?}");
        let (t, reason) = only_transition(&actions);
        assert_eq!(t, to);
        for w in words {
            assert!(
                reason.contains(w),
                "{policy:?} {code:?}: {reason:?} lacks {w:?}"
            );
        }
        // Kept for `explain` until the next spawn.
        assert!(after.killed_for.is_some());
    }
    // Without a health restart a clean exit under on-failure just stops.
    let (after, actions) = step(
        &at(S::Running),
        exit(Some(0), None),
        RestartPolicy::OnFailure,
        Instant::now(),
    );
    assert_eq!(after.phase, S::Stopped);
    assert!(!only_transition(&actions).1.contains("stopped by xy"));
}

#[test]
fn the_next_spawn_forgets_the_health_kill() {
    let p = RestartPolicy::OnFailure;
    let now = Instant::now();
    let s = health_killed(p);
    let (s, _) = step(&s, exit(Some(0), None), p, now);
    let (s, _) = step(&s, Event::GroupGone, p, now);
    let (s, actions) = step(&s, Event::BackoffElapsed, p, now);
    assert_eq!(effects(&actions), vec![Action::Spawn]);
    assert_eq!(s.killed_for, None);
    let (s, _) = step(&s, Event::Spawned, p, now);
    // The new run's clean exit is a clean exit again, and a grace timer
    // in `running` does nothing.
    let (_, actions) = step(&s, Event::GraceExpired, p, now);
    assert!(actions.is_empty());
    let (after, _) = step(&s, exit(Some(0), None), p, now);
    assert_eq!(after.phase, S::Stopped);
}

#[test]
fn a_stop_during_a_health_restart_is_an_ordinary_stop() {
    let p = RestartPolicy::Always;
    let now = Instant::now();
    let s = health_killed(p);
    let (s, actions) = step(&s, Event::StopRequested, p, now);
    assert_eq!(s.phase, S::Stopping);
    assert_eq!(
        effects(&actions),
        vec![
            Action::CloseEndpoint,
            Action::TermGroup,
            Action::ScheduleGrace(GRACE)
        ]
    );
    // The leader exits 0: expected while stopping, no restart.
    let (s, actions) = step(&s, exit(Some(0), None), p, now);
    assert!(actions.is_empty());
    let (s, _) = step(&s, Event::GroupGone, p, now);
    assert_eq!(s.phase, S::Stopped);
}

/// SPEC §23: a remote server (no process group) is `running` from its
/// upstream's first answer; a stop is instant; a restart and a health
/// restart connect again.
#[test]
fn a_remote_connects_then_runs_at_the_first_answer() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    let (s, a) = step(&Lifecycle::default(), Event::StartRequested, p, now);
    assert_eq!((s.phase, effects(&a)), (S::Starting, vec![Action::Spawn]));
    // An answer before the connect is not one of this run's.
    let (early, a) = step(&s, Event::Reached, p, now);
    assert_eq!((early.phase, a), (S::Starting, vec![]));
    let (s, a) = step(&s, Event::Connected, p, now);
    assert!(s.reaching && a.is_empty());
    let (s, a) = step(&s, Event::Reached, p, now);
    assert_eq!(s.phase, S::Running);
    assert!(!s.group_alive && !s.reaching && s.run_started == Some(now));
    assert!(matches!(
        &a[..],
        [Action::Transition { to: S::Running, .. }]
    ));
    // A second answer changes nothing.
    let (same, a) = step(&s, Event::Reached, p, now);
    assert_eq!((same.phase, a), (S::Running, vec![]));
    // A restart connects again.
    let (r, a) = step(&s, Event::RestartRequested(RestartCause::Reload), p, now);
    assert_eq!((r.phase, effects(&a)), (S::Starting, vec![Action::Spawn]));
    // A failed health verdict (restart-on-failure) too.
    let (h, a) = step(&s, health("2 failed health checks"), p, now);
    assert_eq!((h.phase, effects(&a)), (S::Starting, vec![Action::Spawn]));
    // A stop is instant, connected or still reaching.
    let (st, a) = step(&s, Event::StopRequested, p, now);
    assert_eq!(
        (st.phase, effects(&a)),
        (S::Stopped, vec![Action::CloseEndpoint])
    );
    let (reaching, _) = step(
        &step(&Lifecycle::default(), Event::StartRequested, p, now).0,
        Event::Connected,
        p,
        now,
    );
    let (st, _) = step(&reaching, Event::StopRequested, p, now);
    assert_eq!(st.phase, S::Stopped);
    assert!(!st.reaching);
}

/// SPEC §23: the broker's word on a remote's grant changes its verdict, not
/// its state — `unhealthy` at once when the grant ends, a probe at once
/// after a login — and only while it is connected this run.
#[test]
fn a_remotes_grant_marks_it_unhealthy_and_a_login_probes_at_once() {
    let now = Instant::now();
    let p = RestartPolicy::OnFailure;
    let why = "login needed: xyctl auth login far";
    let needed = || Event::LoginNeeded(why.to_owned());
    let (starting, _) = step(&Lifecycle::default(), Event::StartRequested, p, now);
    let (reaching, _) = step(&starting, Event::Connected, p, now);
    let (running, _) = step(&reaching, Event::Reached, p, now);
    assert_eq!(running.phase, S::Running);
    for s in [&running, &reaching] {
        let (after, a) = step(s, needed(), p, now);
        assert_eq!(after, *s, "the state stays");
        assert_eq!(a, vec![Action::MarkUnhealthy(why.to_owned())]);
        let (after, a) = step(s, Event::LoggedIn, p, now);
        assert_eq!(after, *s);
        assert_eq!(a, vec![Action::ProbeNow]);
    }
    // Not connected (yet, or any more), or a process server: nothing to do.
    let mut process = at(S::Running);
    process.run_started = Some(now);
    for s in [
        starting.clone(),
        at(S::Stopped),
        at(S::Failed),
        at(S::Idle),
        at(S::Stopping),
        at(S::Restarting),
        process,
    ] {
        for ev in [needed(), Event::LoggedIn] {
            let (after, a) = step(&s, ev.clone(), p, now);
            assert_eq!((&after, a), (&s, vec![]), "{:?} on {ev:?}", s.phase);
        }
    }
}
