//! One owner per fact (issue 12): a failed child of the root is restored by
//! asking the surviving owners. A panicked ServerActor comes back with its
//! post-reload config and its old sink; a panicked ConfigActor comes back
//! with the applied set; a panicked LogRouterActor comes back with every
//! server's sink, buffered lines and followers included.

#[path = "engine/support.rs"]
mod support;

use std::time::Duration;

use support::{TestEngine, poll, server};
use xy_actors::LogEvent;
use xy_core::config::ServerConfig;
use xy_testbins::wait::scaled;

/// A child that prints `MARK=<mark>` once at start, then ticks.
fn marked(name: &str, mark: &str) -> ServerConfig {
    let mut c = server(
        name,
        "xy-test-sleep",
        &["--interval-ms", "50", "--print-env", "MARK"],
    );
    c.env.insert("MARK".into(), mark.into());
    c
}

/// Whether a live `tick` line reaches `sub` within 10 s.
async fn next_tick(sub: &mut xy_actors::LogSubscription) -> bool {
    let tick = async {
        loop {
            match sub.recv().await {
                Some(LogEvent::Line(l)) if l.line.starts_with("tick ") => break true,
                Some(_) => {}
                None => break false,
            }
        }
    };
    tokio::time::timeout(scaled(Duration::from_secs(10)), tick)
        .await
        .unwrap_or(false)
}

/// Buffered lines of `name` (from its ring) equal to `line`.
async fn ring_count(t: &TestEngine, name: &str, line: &str) -> usize {
    t.engine
        .subscribe_logs(&[name.to_owned()], None, false)
        .await
        .map(|s| s.backlog.iter().filter(|l| l.line == line).count())
        .unwrap_or(0)
}

/// Lines of `name`'s log file ending in `line`.
fn disk_count(t: &TestEngine, name: &str, line: &str) -> usize {
    std::fs::read_to_string(t.log_dir().join(format!("{name}.log")))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.ends_with(&format!("[out] {line}")))
        .count()
}

#[tokio::test]
async fn a_panicked_server_actor_comes_back_with_its_reloaded_config_and_sink() {
    let t = TestEngine::start(vec![marked("a", "v1"), marked("b", "v1")]).await;
    t.wait_running("a").await;
    let pb = t.wait_running("b").await;
    // Reload: a now runs with MARK=v2 (a new child), b unchanged.
    let r = t
        .engine
        .reload(support::set(vec![marked("a", "v2"), marked("b", "v1")]))
        .await
        .unwrap();
    assert_eq!(r.changed, ["a"]);
    let pa = t.wait_running("a").await;
    poll("a's v2 line", Duration::from_secs(10), || async {
        (ring_count(&t, "a", "MARK=v2").await == 1).then_some(())
    })
    .await;

    t.engine.inject_panic("a").await.unwrap();
    let new_pa = t.wait_respawned("a", pa).await;
    assert_ne!(new_pa, pa);
    // The successor runs the reloaded config (from the ConfigActor) and writes to the same sink (from the LogRouterActor): the ring and
    // the file hold the v2 line of both children, and no v1 line of a new one.
    poll(
        "the new child's v2 line in the same ring and file",
        Duration::from_secs(10),
        || async {
            (ring_count(&t, "a", "MARK=v2").await == 2 && disk_count(&t, "a", "MARK=v2") == 2)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        ring_count(&t, "a", "MARK=v1").await,
        1,
        "only the first child's"
    );
    assert_eq!(t.entry("b").await.pid, Some(pb), "b undisturbed");
    // The ConfigActor still agrees with the tree: the same set is a no-op.
    let r = t
        .engine
        .reload(support::set(vec![marked("a", "v2"), marked("b", "v1")]))
        .await
        .unwrap();
    assert!(r.changed.is_empty() && r.added.is_empty() && r.removed.is_empty());
    assert_eq!(r.unchanged, ["a", "b"]);
    t.finish().await;
}

#[tokio::test]
async fn a_panicked_config_actor_comes_back_with_the_applied_set() {
    let t = TestEngine::start(vec![
        marked("a", "v1"),
        marked("b", "v1"),
        marked("c", "v1"),
    ])
    .await;
    for n in ["a", "b", "c"] {
        t.wait_running(n).await;
    }
    // Applied: a changed to v2, c removed.
    let r = t
        .engine
        .reload(support::set(vec![marked("a", "v2"), marked("b", "v1")]))
        .await
        .unwrap();
    assert_eq!(
        (r.changed.as_slice(), r.removed.as_slice()),
        (&["a".to_owned()][..], &["c".to_owned()][..])
    );
    let pa = t.wait_running("a").await;
    let pb = t.wait_running("b").await;

    t.engine.inject_config_panic().await.unwrap();
    // Answers again once the root has rebuilt it from the ServerActors.
    poll("the ConfigActor back", Duration::from_secs(10), || async {
        t.engine.server_count().await.ok().filter(|n| *n == 2)
    })
    .await;

    // The rebuilt set is what was applied: the applied set again changes
    // nothing (a set rebuilt empty would add both; the boot set would call
    // a changed and c removed).
    let r = t
        .engine
        .reload(support::set(vec![marked("a", "v2"), marked("b", "v1")]))
        .await
        .unwrap();
    assert_eq!(r.unchanged, ["a", "b"]);
    assert!(r.changed.is_empty() && r.added.is_empty() && r.removed.is_empty());
    assert_eq!(t.entry("a").await.pid, Some(pa));
    // And a real change after it still diffs correctly.
    let r = t
        .engine
        .reload(support::set(vec![
            marked("a", "v2"),
            marked("b", "v3"),
            marked("d", "v1"),
        ]))
        .await
        .unwrap();
    assert_eq!(r.changed, ["b"]);
    assert_eq!(r.added, ["d"]);
    assert_eq!(r.unchanged, ["a"]);
    let pb2 = t.wait_running("b").await;
    assert_ne!(pb2, pb);
    t.wait_running("d").await;
    assert_eq!(t.engine.server_count().await.unwrap(), 3);
    t.finish().await;
}

#[tokio::test]
async fn a_panicked_log_router_comes_back_with_every_sink() {
    let t = TestEngine::start(vec![marked("a", "v1"), marked("b", "v1")]).await;
    t.wait_running("a").await;
    t.wait_running("b").await;
    t.wait_line("a", "MARK=v1").await;
    t.wait_line("b", "MARK=v1").await;
    let mut follower = t
        .engine
        .subscribe_logs(&["a".to_owned()], Some(0), true)
        .await
        .unwrap();

    t.engine.inject_log_router_panic().await.unwrap();
    // `logs` of every server works again, from the same rings: the lines
    // printed before the panic are still buffered.
    for name in ["a", "b"] {
        poll(
            &format!("{name}'s buffered lines after the restore"),
            Duration::from_secs(10),
            || async { (ring_count(&t, name, "MARK=v1").await == 1).then_some(()) },
        )
        .await;
    }
    let all = t.engine.subscribe_logs(&[], Some(5), false).await.unwrap();
    assert!(all.backlog.iter().any(|l| &*l.name == "a"));
    assert!(all.backlog.iter().any(|l| &*l.name == "b"));
    // A follower from before the panic still gets new lines.
    assert!(
        next_tick(&mut follower).await,
        "the old follower kept streaming"
    );
    // A new follower gets lines too (they reach the same sink).
    let mut fresh = t
        .engine
        .subscribe_logs(&["b".to_owned()], Some(0), true)
        .await
        .unwrap();
    assert!(next_tick(&mut fresh).await, "a new follower streams");
    t.finish().await;
}

/// An idle on-demand stdio server whose ServerActor panics comes back idle
/// and listening (it is wanted running: a request must still wake it), not
/// `stopped` and deaf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_server_actor_of_an_idle_on_demand_server_comes_back_idle() {
    let port = support::free_port();
    let mut c = server("od", "xy-test-mcp", &["--stdio", "--era", "2025"]);
    c.transport = xy_core::protocol::Transport::Stdio;
    c.port = port;
    c.on_demand = Some(xy_core::config::OnDemandConfig::default());
    let t = TestEngine::start(vec![c]).await;
    poll("od idle", Duration::from_secs(10), || async {
        (t.entry("od").await.state == xy_core::protocol::ServerState::Idle).then_some(())
    })
    .await;
    let before = t.engine.status("od").await.unwrap().transitions;

    t.engine.inject_panic("od").await.unwrap();
    // The successor's history starts afresh: wait for it, then for idle.
    poll("the successor", Duration::from_secs(10), || async {
        let s = t.engine.status("od").await.ok()?;
        (s.transitions != before && s.entry.state == xy_core::protocol::ServerState::Idle)
            .then_some(())
    })
    .await;
    poll("od listening again", Duration::from_secs(10), || async {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()
            .then_some(())
    })
    .await;
    t.finish().await;
}
