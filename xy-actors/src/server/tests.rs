//! ServerActor against the mock child, on a paused clock: policy × exit kind,
//! backoff growth and cap, the retry window, grace → SIGKILL, and answers
//! while stopping.

use std::time::Duration;

use nix::sys::signal::Signal;
use ractor::{Actor, ActorRef};
use tokio::time::Instant;
use xy_core::config::{RestartConfig, RestartPolicy, ServerConfig, StopConfig};
use xy_core::protocol::{ServerState, StatusResult};

use super::mock::MockSpawner;
use super::*;
use crate::log_router::sink::LogSink;

const GRACE: Duration = Duration::from_millis(300);

fn cfg(policy: RestartPolicy, retries: u32) -> ServerConfig {
    ServerConfig {
        name: "mock".into(),
        source: "mock.kdl".into(),
        command: "/mock/server".into(),
        args: vec![],
        port: 1,
        transport: Default::default(),
        remote: None,
        path: "/mcp".into(),
        on_demand: None,
        env: Default::default(),
        working_dir: None,
        restart: RestartConfig {
            policy,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(400),
            max_retries_per_minute: retries,
        },
        stop: StopConfig { grace: GRACE },
        health: None,
        env_files: Vec::new(),
        secrets: Vec::new(),
        hooks: Default::default(),
        agent: Default::default(),
        firewall: None,
        sandbox: None,
        package: None,
        autostart: true,
    }
}

struct Fixture {
    actor: ActorRef<ServerMsg>,
    spawner: Arc<MockSpawner>,
    /// What the root would read for `list`.
    snapshot: watch::Receiver<ServerSnapshot>,
    /// Everything the actor announced on the event bus.
    events: crate::events::EventSubscription,
    _dir: tempfile::TempDir,
}

async fn fixture(config: ServerConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let spawner = MockSpawner::new();
    let sink = LogSink::new(
        "mock",
        &crate::log_router::sink::SinkSettings {
            log_dir: dir.path().to_path_buf(),
            rotate_bytes: 1 << 20,
            ring_bytes: 1 << 20,
            follow_buffer: 16,
        },
    )
    .shared();
    let (tx, snapshot) = watch::channel(ServerSnapshot::initial(&config));
    let bus = EventBus::new(64);
    let events = bus.subscribe(Vec::new());
    let args = ServerArgs {
        config,
        sink,
        spawner: spawner.clone(),
        report: None,
        autostart: false,
        prior: None,
        snapshot: tx,
        tools_dir: None,
        events: bus,
        calls: crate::calls::Calls::new(None),
        directory: crate::mcp::verdicts::Directory::default(),
        proxy: crate::gateway::proxy::Proxy::new(None),
        credentials_for: crate::remote::no_broker(),
    };
    let (actor, _) = Actor::spawn(None, ServerActor, args).await.unwrap();
    Fixture {
        actor,
        spawner,
        snapshot,
        events,
        _dir: dir,
    }
}

async fn status(a: &ActorRef<ServerMsg>) -> StatusResult {
    ractor::call_t!(a, ServerMsg::Snapshot, 5_000).unwrap()
}

async fn start(a: &ActorRef<ServerMsg>) -> StartOutcome {
    a.call(
        |tx| ServerMsg::Start(Some(tx)),
        Some(Duration::from_secs(30)),
    )
    .await
    .unwrap()
    .success_or(ractor::RactorErr::<()>::Timeout)
    .unwrap_or_else(|_| panic!("no start reply"))
}

async fn stop(a: &ActorRef<ServerMsg>) -> StopOutcome {
    ractor::call_t!(a, ServerMsg::Stop, 30_000).unwrap()
}

async fn wait_state(a: &ActorRef<ServerMsg>, want: ServerState) -> StatusResult {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = status(a).await;
        if s.entry.state == want {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "still {:?}, wanted {want:?}",
            s.entry.state
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn policy_times_exit_kind() {
    use RestartPolicy::{Always, Never, OnFailure};
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Clean,
        Dirty,
        Signal,
    }
    let rows = [
        (Always, Kind::Clean, true, ServerState::Running),
        (Always, Kind::Dirty, true, ServerState::Running),
        (Always, Kind::Signal, true, ServerState::Running),
        (OnFailure, Kind::Clean, false, ServerState::Stopped),
        (OnFailure, Kind::Dirty, true, ServerState::Running),
        (OnFailure, Kind::Signal, true, ServerState::Running),
        (Never, Kind::Clean, false, ServerState::Stopped),
        (Never, Kind::Dirty, false, ServerState::Failed),
        (Never, Kind::Signal, false, ServerState::Failed),
    ];
    for (policy, kind, restarts, want) in rows {
        let f = fixture(cfg(policy, 5)).await;
        assert_eq!(start(&f.actor).await, StartOutcome::Started);
        let first = f.spawner.last();
        match kind {
            Kind::Clean => first.exit(0),
            Kind::Dirty => first.exit(2),
            Kind::Signal => first.kill_by(Signal::SIGSEGV),
        }
        if restarts {
            // restarting, then a second spawn after the backoff
            let deadline = Instant::now() + Duration::from_secs(10);
            while f.spawner.spawns() < 2 {
                assert!(Instant::now() < deadline, "{policy:?} {kind:?}: no restart");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let s = wait_state(&f.actor, want).await;
        assert_eq!(
            s.entry.restart_count,
            u32::from(restarts),
            "{policy:?} {kind:?}"
        );
        let last = s.entry.last_exit.expect("last_exit");
        match kind {
            Kind::Clean => assert_eq!(last.code, Some(0)),
            Kind::Dirty => assert_eq!(last.code, Some(2)),
            Kind::Signal => assert_eq!(last.signal.as_deref(), Some("SIGSEGV")),
        }
        // The exit SIGKILLs the rest of the group before anything else.
        assert_eq!(first.signals(), [Signal::SIGKILL], "{policy:?} {kind:?}");
        f.actor.stop(None);
    }
}

#[tokio::test(start_paused = true)]
async fn backoff_grows_to_the_cap() {
    let f = fixture(cfg(RestartPolicy::Always, 100)).await;
    f.spawner.exit_on_spawn(Some(1));
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let deadline = Instant::now() + Duration::from_secs(30);
    while f.spawner.spawns() < 6 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let times = f.spawner.spawn_times();
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    let want = [100, 200, 400, 400, 400];
    for (gap, want) in gaps.iter().zip(want) {
        assert!(*gap >= want && *gap < want + 50, "gaps {gaps:?}");
    }
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn window_exceeded_fails_and_start_leaves_failed() {
    let f = fixture(cfg(RestartPolicy::OnFailure, 3)).await;
    f.spawner.exit_on_spawn(Some(1));
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let s = wait_state(&f.actor, ServerState::Failed).await;
    assert_eq!(f.spawner.spawns(), 4, "N+1 spawns");
    assert_eq!(s.entry.restart_count, 3);
    assert!(
        s.transitions
            .last()
            .unwrap()
            .reason
            .contains("restart limit"),
        "{:?}",
        s.transitions
    );

    f.spawner.exit_on_spawn(None);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let s = wait_state(&f.actor, ServerState::Running).await;
    assert!(s.entry.pid.is_some());
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn grace_expiry_escalates_to_sigkill() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    f.spawner.ignore_term(true);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let t0 = Instant::now();
    assert_eq!(stop(&f.actor).await, StopOutcome::Stopped);
    let took = t0.elapsed();
    assert!(
        took >= GRACE && took < GRACE + Duration::from_millis(100),
        "{took:?}"
    );
    assert_eq!(
        f.spawner.last().signals(),
        [Signal::SIGTERM, Signal::SIGKILL]
    );
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Stopped);
    assert_eq!(
        s.entry.last_exit.unwrap().signal.as_deref(),
        Some("SIGKILL")
    );
    assert_eq!(f.spawner.spawns(), 1, "a stop never restarts");
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn well_behaved_child_stops_without_sigkill() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let t0 = Instant::now();
    assert_eq!(stop(&f.actor).await, StopOutcome::Stopped);
    assert!(t0.elapsed() < GRACE);
    assert_eq!(f.spawner.last().signals(), [Signal::SIGTERM]);
    assert_eq!(stop(&f.actor).await, StopOutcome::NotRunning);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    assert_eq!(start(&f.actor).await, StartOutcome::AlreadyRunning);
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn status_answers_at_once_while_stopping() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    f.spawner.ignore_term(true);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let a = f.actor.clone();
    let stopping = tokio::spawn(async move { stop(&a).await });
    let s = wait_state(&f.actor, ServerState::Stopping).await;
    assert!(s.entry.pid.is_some());
    assert!(!stopping.is_finished());
    assert_eq!(stopping.await.unwrap(), StopOutcome::Stopped);
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn spawn_failure_reports_path_and_error() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    f.spawner.fail_next(1);
    let StartOutcome::Failed(failure) = start(&f.actor).await else {
        panic!("expected a failure");
    };
    assert_eq!(failure.name, "mock");
    assert_eq!(failure.path, "/mock/server");
    assert!(failure.error.contains("os error 2"));
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Failed);
    assert!(
        s.transitions
            .last()
            .unwrap()
            .reason
            .contains("spawn failed")
    );
    f.actor.stop(None);
}

#[tokio::test(start_paused = true)]
async fn panic_kills_the_group_through_the_dropped_state() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let child = f.spawner.last();
    f.actor.cast(ServerMsg::InjectPanic).unwrap();
    f.actor.wait(Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(child.signals(), [Signal::SIGKILL]);
}

#[tokio::test(start_paused = true)]
async fn transitions_are_capped_at_twenty() {
    let f = fixture(cfg(RestartPolicy::Always, 1000)).await;
    f.spawner.exit_on_spawn(Some(1));
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let deadline = Instant::now() + Duration::from_secs(600);
    while f.spawner.spawns() < 15 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = status(&f.actor).await;
    assert_eq!(s.transitions.len(), 20);
    f.actor.stop(None);
}

/// The `list` view the actor publishes matches its `status` at every step:
/// spawn, crash and restart, stop.
#[tokio::test(start_paused = true)]
async fn published_snapshot_tracks_status() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    let same = |s: &StatusResult| {
        assert_eq!(f.snapshot.borrow().entry("mock"), s.entry);
    };
    same(&status(&f.actor).await);
    assert_eq!(f.snapshot.borrow().state, ServerState::Stopped);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Running);
    assert!(s.entry.pid.is_some());
    same(&s);
    f.spawner.last().exit(3);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.spawner.spawns() < 2 {
        assert!(Instant::now() < deadline, "no restart");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = wait_state(&f.actor, ServerState::Running).await;
    assert_eq!(s.entry.restart_count, 1);
    assert_eq!(s.entry.last_exit.as_ref().and_then(|e| e.code), Some(3));
    same(&s);
    assert_eq!(stop(&f.actor).await, StopOutcome::Stopped);
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Stopped);
    assert_eq!(s.entry.pid, None);
    assert_eq!(s.entry.uptime_secs, None);
    same(&s);
}

/// Every recorded transition is announced on the bus, with the same `ts`
/// as `status` shows (SPEC §15).
#[tokio::test(start_paused = true)]
async fn transitions_are_published_as_events() {
    let mut f = fixture(cfg(RestartPolicy::Always, 5)).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    f.spawner.last().exit(1);
    wait_state(&f.actor, ServerState::Restarting).await;
    let st = wait_state(&f.actor, ServerState::Running).await;
    let mut got = Vec::new();
    for _ in 0..st.transitions.len() {
        match f.events.recv().await {
            Some(crate::events::EventItem::Event(e)) => got.push(e),
            other => panic!("{other:?}"),
        }
    }
    for (e, t) in got.iter().zip(&st.transitions) {
        assert_eq!(&*e.name, "mock");
        assert_eq!(e.kind, xy_core::protocol::EventKind::State);
        assert_eq!(e.from.as_deref(), Some(t.from.as_str()));
        assert_eq!(e.to.as_deref(), Some(t.to.as_str()));
        assert_eq!((&e.ts, &e.reason), (&t.ts, &t.reason));
    }
    let path: Vec<_> = got.iter().map(|e| e.to.clone().unwrap()).collect();
    assert_eq!(
        path,
        ["starting", "running", "restarting", "starting", "running"]
    );
}

async fn restart(a: &ActorRef<ServerMsg>) -> StartOutcome {
    a.call(
        |reply| ServerMsg::Restart {
            cause: RestartCause::ByHand,
            reply,
        },
        Some(Duration::from_secs(30)),
    )
    .await
    .unwrap()
    .success_or(ractor::RactorErr::<()>::Timeout)
    .unwrap_or_else(|_| panic!("no restart reply"))
}

/// A restart is one operation: it answers once the new child runs, and is
/// counted once.
#[tokio::test(start_paused = true)]
async fn a_restart_answers_once_the_new_child_runs() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let first = f.spawner.last();
    assert_eq!(restart(&f.actor).await, StartOutcome::Started);
    assert_eq!(first.signals(), [Signal::SIGTERM]);
    assert_eq!(f.spawner.spawns(), 2);
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Running);
    assert_eq!(s.entry.restart_count, 1);
    f.actor.stop(None);
}

/// Issue 26: a start that a stop overtakes says so (`Cancelled`, which
/// the engine reports in `StartResult.cancelled`) rather than nothing.
#[tokio::test(start_paused = true)]
async fn a_start_overtaken_by_a_stop_is_cancelled() {
    let f = fixture(cfg(RestartPolicy::Always, 5)).await;
    f.spawner.ignore_term(true);
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let a = f.actor.clone();
    let stopping = tokio::spawn(async move { stop(&a).await });
    wait_state(&f.actor, ServerState::Stopping).await;
    // Waits for the stop in progress…
    let a = f.actor.clone();
    let starting = tokio::spawn(async move { start(&a).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // …and a second stop cancels it.
    let a = f.actor.clone();
    let second = tokio::spawn(async move { stop(&a).await });
    assert_eq!(starting.await.unwrap(), StartOutcome::Cancelled);
    assert_eq!(stopping.await.unwrap(), StopOutcome::Stopped);
    assert_eq!(second.await.unwrap(), StopOutcome::Stopped);
    assert_eq!(status(&f.actor).await.entry.state, ServerState::Stopped);
    f.actor.stop(None);
}

/// Issue 26: after its bridge panicked, an idle on-demand server listens
/// again (it stayed `idle` and deaf), and a request still wakes it.
#[tokio::test]
async fn an_idle_on_demand_server_listens_again_after_its_bridge_panicked() {
    let port = xy_testbins::locate::free_port();
    let mut config = cfg(RestartPolicy::Always, 5);
    config.transport = xy_core::protocol::Transport::Stdio;
    config.port = port;
    config.on_demand = Some(xy_core::config::OnDemandConfig::default());
    let f = fixture(config).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    assert_eq!(f.snapshot.borrow().state, ServerState::Idle);
    let connects = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    assert!(connects(), "idle: listening");

    f.actor.cast(ServerMsg::InjectBridgePanic).unwrap();
    // A request reaches the new bridge and wakes the server (the old
    // listener may answer, or refuse, for a moment: try until it spawns).
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    // Each poke stays open: the edge refuses a connection whose socket no
    // process holds any more (SPEC §24, D171).
    let mut pokes = Vec::new();
    while f.spawner.spawns() == 0 {
        assert!(
            Instant::now() < deadline,
            "deaf after the bridge panic (state {:?})",
            status(&f.actor).await.entry.state
        );
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = std::io::Write::write_all(&mut s, req.as_bytes());
            pokes.push(s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(connects());
    f.actor.stop(None);
}

/// A child whose port never answers MCP (here: every connection closed at
/// once) is asked a bounded number of times while it runs: xy backs off,
/// gives up within a minute and `status` says why; nothing asks after.
#[tokio::test(start_paused = true)]
async fn a_port_that_never_answers_mcp_is_asked_a_few_times_then_left_alone() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut c = cfg(RestartPolicy::Never, 5);
    c.port = listener.local_addr().unwrap().port();
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(s);
        }
    });
    let f = fixture(c).await;
    assert_eq!(start(&f.actor).await, StartOutcome::Started);
    let asked = || accepted.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let by_30s = asked();
    assert!(by_30s >= 3, "xy did ask: {by_30s}");
    tokio::time::sleep(Duration::from_secs(90)).await;
    let by_2min = asked();
    // Doubling from 50 ms to a 10 s cap: 13 attempts in the first minute.
    assert!(by_2min <= 14, "{by_2min} attempts in two minutes");
    let s = status(&f.actor).await;
    assert_eq!(s.entry.state, ServerState::Running);
    let why = s.explain.expect("status says why xy stopped asking");
    assert!(
        why.starts_with("xy could not list its tools: it did not answer MCP within 1m"),
        "{why}"
    );
    // Then nothing: an hour later not one more connection.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(asked(), by_2min);
    f.actor.stop(None);
}
