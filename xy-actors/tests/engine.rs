//! The engine against real children from `xy-testbins`: lifecycle, policies,
//! backoff, stop escalation, process-group hygiene, logs, supervision of a
//! panicking ServerActor, reload and shutdown. Timings are tens of ms; waits
//! poll with deadlines.

#[path = "engine/support.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{TestEngine, alive, bin, poll, read_pidfile, server, ts, wait_dead};
use xy_actors::{EngineError, LogEvent};
use xy_core::config::RestartPolicy;
use xy_core::protocol::{ServerState, SpawnErrorKind, TargetParams};
use xy_testbins::wait::scaled;

fn sleep_server(name: &str) -> xy_core::config::ServerConfig {
    server(name, "xy-test-sleep", &["--interval-ms", "50"])
}

#[tokio::test]
async fn auto_start_runs_every_server() {
    let t = TestEngine::start(vec![sleep_server("a"), sleep_server("b")]).await;
    let pa = t.wait_running("a").await;
    let pb = t.wait_running("b").await;
    assert_ne!(pa, pb);
    assert!(alive(pa) && alive(pb));
    let list = t.engine.list().await.unwrap();
    assert_eq!(
        list.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(t.engine.server_count().await.unwrap(), 2);
    // The child record is written at spawn.
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.run_dir().join("a.json")).unwrap())
            .unwrap();
    assert_eq!(rec["pid"], pa);
    assert_eq!(rec["pgid"], pa);
    let run_dir = t.run_dir();
    t.engine.shutdown().await.unwrap();
    assert!(!alive(pa) && !alive(pb));
    assert_eq!(
        std::fs::read_dir(&run_dir).unwrap().count(),
        0,
        "records removed"
    );
}

#[tokio::test]
async fn clean_exit_on_failure_is_stopped_dirty_never_is_failed() {
    let mut clean = server("clean", "xy-test-exit", &["--code", "0"]);
    clean.restart.policy = RestartPolicy::OnFailure;
    let mut dirty = server("dirty", "xy-test-exit", &["--code", "3"]);
    dirty.restart.policy = RestartPolicy::Never;
    let mut always = server("always", "xy-test-exit", &["--code", "0"]);
    always.restart.policy = RestartPolicy::Always;
    always.restart.max_retries_per_minute = 100;
    let t = TestEngine::start(vec![clean, dirty, always]).await;

    let e = t.wait_state("clean", ServerState::Stopped).await;
    assert_eq!(e.last_exit.as_ref().unwrap().code, Some(0));
    assert_eq!(e.restart_count, 0);

    let e = t.wait_state("dirty", ServerState::Failed).await;
    assert_eq!(e.last_exit.as_ref().unwrap().code, Some(3));
    assert_eq!(e.restart_count, 0);

    poll("always to restart", Duration::from_secs(10), || async {
        (t.entry("always").await.restart_count >= 3).then_some(())
    })
    .await;
    t.finish().await;
}

#[tokio::test]
async fn on_failure_restarts_a_signal_death() {
    let mut s = server("sig", "xy-test-exit", &["--signal", "SIGKILL"]);
    s.restart.max_retries_per_minute = 2;
    let t = TestEngine::start(vec![s]).await;
    let e = t.wait_state("sig", ServerState::Failed).await;
    assert_eq!(e.restart_count, 2);
    assert_eq!(e.last_exit.unwrap().signal.as_deref(), Some("SIGKILL"));
    t.finish().await;
}

#[tokio::test]
async fn backoff_intervals_grow_to_the_cap() {
    let mut s = server("crash", "xy-test-exit", &["--code", "1"]);
    s.restart.policy = RestartPolicy::Always;
    s.restart.backoff_initial = Duration::from_millis(40);
    s.restart.backoff_max = Duration::from_millis(160);
    s.restart.max_retries_per_minute = 6;
    let t = TestEngine::start(vec![s]).await;
    let st = poll("crash to fail", Duration::from_secs(20), || async {
        let st = t.engine.status("crash").await.unwrap();
        (st.entry.state == ServerState::Failed).then_some(st)
    })
    .await;
    assert_eq!(st.entry.restart_count, 6);
    // Each backoff is the gap from `→ restarting` to the next `restarting → starting`.
    let mut gaps = Vec::new();
    let mut since = None;
    for tr in &st.transitions {
        match (tr.from, tr.to) {
            (_, ServerState::Restarting) => since = Some(ts(&tr.ts)),
            (ServerState::Restarting, ServerState::Starting) => {
                let gap = ts(&tr.ts).duration_since(since.take().unwrap()).unwrap();
                gaps.push(gap.as_millis());
            }
            _ => {}
        }
    }
    assert_eq!(gaps.len(), 6, "{:?}", st.transitions);
    for (gap, want) in gaps.iter().zip([40, 80, 160, 160, 160, 160]) {
        assert!(*gap >= want, "gaps {gaps:?}");
    }
    // The spec says the (capped) backoff: never much more than the cap.
    assert!(gaps.iter().all(|g| *g < 160 + 2000), "gaps {gaps:?}");
    assert!(
        st.transitions
            .last()
            .unwrap()
            .reason
            .contains("restart limit")
    );
    t.finish().await;
}

#[tokio::test]
async fn failed_after_window_and_start_leaves_it() {
    let mut s = server("crash", "xy-test-exit", &["--code", "1"]);
    s.restart.max_retries_per_minute = 2;
    let t = TestEngine::start(vec![s]).await;
    let e = t.wait_state("crash", ServerState::Failed).await;
    assert_eq!(e.restart_count, 2);
    let r = t
        .engine
        .start_servers(&TargetParams::one("crash"))
        .await
        .unwrap();
    assert_eq!(r.started, ["crash"]);
    let st = t.engine.status("crash").await.unwrap();
    assert!(
        st.transitions
            .iter()
            .any(|tr| tr.from == ServerState::Failed && tr.to == ServerState::Starting),
        "{:?}",
        st.transitions
    );
    t.finish().await;
}

#[tokio::test]
async fn stop_escalates_to_sigkill_after_grace() {
    let t = TestEngine::start(vec![server("stubborn", "xy-test-ignore-term", &[])]).await;
    let pid = t.wait_running("stubborn").await;
    // Its banner comes after SIG_IGN is in place.
    t.wait_line("stubborn", "ignoring SIGTERM").await;
    let t0 = Instant::now();
    let r = t
        .engine
        .stop_servers(&TargetParams::one("stubborn"))
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(r.stopped, ["stubborn"]);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(
        took < Duration::from_millis(300) + scaled(Duration::from_secs(5)),
        "{took:?}"
    );
    assert!(!alive(pid));
    let e = t.entry("stubborn").await;
    assert_eq!(e.state, ServerState::Stopped);
    assert_eq!(e.last_exit.unwrap().signal.as_deref(), Some("SIGKILL"));
    // Record removed once the group is reaped.
    assert!(!t.run_dir().join("stubborn.json").exists());
    t.finish().await;
}

#[tokio::test]
async fn list_answers_while_stopping() {
    let mut s = server("stubborn", "xy-test-ignore-term", &[]);
    s.stop.grace = Duration::from_secs(3);
    let t = TestEngine::start(vec![s]).await;
    t.wait_running("stubborn").await;
    t.wait_line("stubborn", "ignoring SIGTERM").await;
    let engine = t.engine.clone();
    let stop =
        tokio::spawn(async move { engine.stop_servers(&TargetParams::one("stubborn")).await });
    let e = t.wait_state("stubborn", ServerState::Stopping).await;
    let t0 = Instant::now();
    let list = t.engine.list().await.unwrap();
    assert!(t0.elapsed() < scaled(Duration::from_secs(1)));
    assert_eq!(list[0].state, ServerState::Stopping);
    assert!(e.pid.is_some());
    assert!(!stop.is_finished());
    assert_eq!(stop.await.unwrap().unwrap().stopped, ["stubborn"]);
    t.finish().await;
}

#[tokio::test]
async fn stop_kills_a_term_ignoring_grandchild() {
    let keep = tempfile::tempdir().unwrap();
    let pidfile = keep.path().join("gc.pid");
    let t = TestEngine::start(vec![server(
        "fork",
        "xy-test-fork",
        &["--pidfile", pidfile.to_str().unwrap()],
    )])
    .await;
    let leader = t.wait_running("fork").await;
    let grandchild = read_pidfile(&pidfile).await;
    assert!(alive(grandchild));
    let r = t
        .engine
        .stop_servers(&TargetParams::one("fork"))
        .await
        .unwrap();
    assert_eq!(r.stopped, ["fork"]);
    assert!(!alive(leader));
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} survived the stop"
    );
    t.finish().await;
}

#[tokio::test]
async fn unexpected_exit_kills_the_rest_of_the_group() {
    let keep = tempfile::tempdir().unwrap();
    let pidfile = keep.path().join("gc.pid");
    let mut s = server(
        "fork",
        "xy-test-fork",
        &[
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--parent-exit-ms",
            "100",
        ],
    );
    s.restart.policy = RestartPolicy::Never;
    let t = TestEngine::start(vec![s]).await;
    let grandchild = read_pidfile(&pidfile).await;
    let e = t.wait_state("fork", ServerState::Stopped).await;
    assert_eq!(e.last_exit.unwrap().code, Some(0));
    wait_dead(grandchild).await;
    poll("record removal", Duration::from_secs(5), || async {
        (!t.run_dir().join("fork.json").exists()).then_some(())
    })
    .await;
    t.finish().await;
}

#[tokio::test]
async fn env_args_and_working_dir_are_honoured() {
    let cwd = tempfile::tempdir().unwrap();
    let mut s = server(
        "env",
        "xy-test-sleep",
        &[
            "--interval-ms",
            "1000",
            "--print-env",
            "XY_TEST_VAR",
            "--print-env",
            "HOME",
            "--print-cwd",
            "--print-args",
        ],
    );
    s.env.insert("XY_TEST_VAR".into(), "from kdl".into());
    s.working_dir = Some(cwd.path().to_path_buf());
    let t = TestEngine::start(vec![s]).await;
    let lines = poll("printed env", Duration::from_secs(10), || async {
        let sub = t
            .engine
            .subscribe_logs(&["env".into()], None, false)
            .await
            .unwrap();
        let lines: Vec<String> = sub.backlog.iter().map(|l| l.line.clone()).collect();
        lines
            .iter()
            .any(|l| l.starts_with("args="))
            .then_some(lines)
    })
    .await;
    assert!(
        lines.contains(&"XY_TEST_VAR=from kdl".to_owned()),
        "{lines:?}"
    );
    // Merged onto the daemon's env: inherited variables are still there.
    let home = std::env::var("HOME").unwrap();
    assert!(lines.contains(&format!("HOME={home}")), "{lines:?}");
    let canon = cwd.path().canonicalize().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l == &format!("cwd={}", canon.display())
                || l == &format!("cwd={}", cwd.path().display())),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("--print-cwd")), "{lines:?}");
    // And the disk file has the tagged, timestamped lines (written off the
    // pump, so possibly a moment after the ring has them).
    let file = t.log_dir().join("env.log");
    poll("tagged lines on disk", Duration::from_secs(10), || async {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        (text
            .lines()
            .any(|l| l.ends_with(" [out] XY_TEST_VAR=from kdl"))
            && text
                .lines()
                .any(|l| l.contains(" [err] sleep server started")))
        .then_some(())
    })
    .await;
    t.finish().await;
}

#[tokio::test]
async fn rotation_keeps_at_most_six_files() {
    let mut s = server(
        "flood",
        "xy-test-flood",
        &["--lines", "20000", "--bytes", "100"],
    );
    s.restart.policy = RestartPolicy::Never;
    let t = TestEngine::start_with(vec![s], |o| o.rotate_bytes = 64 * 1024).await;
    t.wait_state("flood", ServerState::Stopped).await;
    // The pumps finish after the exit is seen: wait for the last line. (Not
    // for the stderr report: it is read as soon as it is written, while up
    // to 1 MiB of stdout still waits in its pipe and then pushes it out of
    // the ring.) Among the last few lines, not the very last: when the pump
    // keeps up with the child (a loaded machine slows the child too), the
    // report is ingested after the last line.
    poll("last line", Duration::from_secs(30), || async {
        let sub = t
            .engine
            .subscribe_logs(&["flood".into()], Some(4), false)
            .await
            .unwrap();
        sub.backlog
            .iter()
            .any(|l| l.line.starts_with("line 0020000 "))
            .then_some(())
    })
    .await;
    // The files are written off the pump: wait for the last line there too,
    // in whichever file holds it (the stderr report written after it may
    // have rotated the live file).
    poll("last line on disk", Duration::from_secs(30), || async {
        std::fs::read_dir(t.log_dir())
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("[out] line 0020000 ")
            })
            .then_some(())
    })
    .await;
    let files: Vec<_> = std::fs::read_dir(t.log_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() <= 6, "{files:?}");
    assert!(files.len() >= 5, "2 MB at 64 KiB must rotate: {files:?}");
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len <= 64 * 1024, "{} is {len} bytes", f.display());
    }
    // The ring keeps ~1 MiB of recent lines, the newest last.
    let sub = t
        .engine
        .subscribe_logs(&["flood".into()], None, false)
        .await
        .unwrap();
    let out: Vec<_> = sub
        .backlog
        .iter()
        .filter(|l| l.stream == xy_core::protocol::LogStream::Stdout)
        .collect();
    assert!(out.last().unwrap().line.starts_with("line 0020000"));
    let bytes: usize = sub.backlog.iter().map(|l| l.line.len()).sum();
    assert!(bytes <= 1024 * 1024 && bytes > 900 * 1024, "{bytes}");
    t.finish().await;
}

#[tokio::test]
async fn lagging_follower_is_dropped_while_another_keeps_up() {
    // ~1000 lines/s; a follower may have 16 KiB of lines waiting.
    let ticker = server("ticker", "xy-test-sleep", &["--interval-ms", "1"]);
    let t = TestEngine::start_with(vec![ticker], |o| o.follow_bytes = 16 * 1024).await;
    let pid = t.wait_running("ticker").await;
    let mut slow = t
        .engine
        .subscribe_logs(&["ticker".into()], Some(0), true)
        .await
        .unwrap();
    let mut fast = t
        .engine
        .subscribe_logs(&["ticker".into()], Some(0), true)
        .await
        .unwrap();
    let mut n = 0;
    while n < 1000 {
        match tokio::time::timeout(scaled(Duration::from_secs(10)), fast.recv())
            .await
            .unwrap()
        {
            Some(LogEvent::Line(l)) if l.line.starts_with("tick ") => n += 1,
            Some(LogEvent::Line(_)) => {}
            other => panic!("fast follower got {other:?} after {n} lines"),
        }
    }
    // The slow one never read: buffered lines, then Lagged, then the end.
    let mut lagged = false;
    while let Some(ev) = slow.recv().await {
        lagged |= ev == LogEvent::Lagged;
    }
    assert!(lagged);
    assert!(slow.recv().await.is_none());
    // The fast one still streams; the child was neither slowed nor restarted.
    assert!(matches!(fast.recv().await, Some(LogEvent::Line(_))));
    assert_eq!(t.entry("ticker").await.pid, Some(pid));
    t.finish().await;
}

#[tokio::test]
async fn a_flood_with_a_stalled_follower_does_not_block_the_child() {
    let mut s = server(
        "flood",
        "xy-test-flood",
        &["--lines", "40000", "--bytes", "100", "--then-sleep"],
    );
    s.restart.policy = RestartPolicy::Never;
    let t = TestEngine::start(vec![s]).await;
    t.engine
        .stop_servers(&TargetParams::one("flood"))
        .await
        .unwrap();
    let mut stalled = t
        .engine
        .subscribe_logs(&["flood".into()], Some(0), true)
        .await
        .unwrap();
    t.engine
        .start_servers(&TargetParams::one("flood"))
        .await
        .unwrap();
    poll("the flood to finish", Duration::from_secs(20), || async {
        let sub = t
            .engine
            .subscribe_logs(&["flood".into()], Some(1), false)
            .await
            .unwrap();
        sub.backlog
            .iter()
            .any(|l| l.line.starts_with("line 0040000 "))
            .then_some(())
    })
    .await;
    let mut lagged = false;
    while let Some(ev) = stalled.recv().await {
        lagged |= ev == LogEvent::Lagged;
    }
    assert!(lagged);
    t.finish().await;
}

#[tokio::test]
async fn logs_merge_servers_and_end_when_a_server_is_removed() {
    let t = TestEngine::start(vec![sleep_server("a"), sleep_server("b")]).await;
    t.wait_running("a").await;
    t.wait_running("b").await;
    let mut sub = poll("ticks of both", Duration::from_secs(10), || async {
        let sub = t.engine.subscribe_logs(&[], Some(2), true).await.unwrap();
        let both = ["a", "b"].iter().all(|n| {
            sub.backlog
                .iter()
                .any(|l| &*l.name == *n && l.line.starts_with("tick"))
        });
        both.then_some(sub)
    })
    .await;
    assert!(sub.backlog.windows(2).all(|w| w[0].ts <= w[1].ts));
    assert!(sub.backlog.len() <= 4);
    let err = t
        .engine
        .subscribe_logs(&["a".into(), "nope".into()], None, false)
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::ServerNotFound(ref n) if n == &["nope"]));
    // Removing both servers by reload ends the live stream.
    t.engine.reload(support::set(vec![])).await.unwrap();
    let ended = tokio::time::timeout(scaled(Duration::from_secs(10)), async {
        while sub.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "live stream did not end");
    t.finish().await;
}

#[tokio::test]
async fn panicking_server_actor_is_restarted_with_its_server() {
    let t = TestEngine::start(vec![sleep_server("a"), sleep_server("b")]).await;
    let pa = t.wait_running("a").await;
    let pb = t.wait_running("b").await;
    t.engine.inject_panic("a").await.unwrap();
    let new_pa = t.wait_respawned("a", pa).await;
    assert_ne!(new_pa, pa);
    // `list` reads the new actor's published snapshot, not the dead one's.
    let listed = t.engine.list().await.unwrap();
    let a = listed.iter().find(|e| e.name == "a").unwrap();
    assert_eq!((a.state, a.pid), (ServerState::Running, Some(new_pa)));
    wait_dead(pa).await;
    assert_eq!(t.entry("b").await.pid, Some(pb), "b undisturbed");
    assert!(alive(pb));
    // A stopped server stays stopped across a panic.
    t.engine
        .stop_servers(&TargetParams::one("b"))
        .await
        .unwrap();
    t.engine.inject_panic("b").await.unwrap();
    poll(
        "b's actor to be replaced",
        Duration::from_secs(10),
        || async {
            t.engine
                .status("b")
                .await
                .ok()
                .filter(|s| s.transitions.is_empty())
                .map(|_| ())
        },
    )
    .await;
    assert_eq!(t.entry("b").await.state, ServerState::Stopped);
    let listed = t.engine.list().await.unwrap();
    let b = listed.iter().find(|e| e.name == "b").unwrap();
    assert_eq!((b.state, b.pid), (ServerState::Stopped, None));
    t.finish().await;
    assert!(!alive(new_pa));
}

#[tokio::test]
async fn reload_applies_the_diff_with_real_pids() {
    let t = TestEngine::start(vec![
        sleep_server("same"),
        sleep_server("changed"),
        sleep_server("gone"),
    ])
    .await;
    let p_same = t.wait_running("same").await;
    let p_changed = t.wait_running("changed").await;
    let p_gone = t.wait_running("gone").await;

    let mut changed = server("changed", "xy-test-sleep", &["--interval-ms", "70"]);
    changed.stop.grace = Duration::from_millis(200);
    let new = support::set(vec![sleep_server("same"), changed, sleep_server("added")]);
    let r = t.engine.reload(new).await.unwrap();
    assert_eq!(r.added, ["added"]);
    assert_eq!(r.removed, ["gone"]);
    assert_eq!(r.changed, ["changed"]);
    assert_eq!(r.unchanged, ["same"]);

    assert_eq!(t.entry("same").await.pid, Some(p_same));
    let p_changed2 = t.wait_running("changed").await;
    assert_ne!(p_changed2, p_changed);
    assert!(!alive(p_changed));
    let st = t.engine.status("changed").await.unwrap();
    assert_eq!(st.args, ["--interval-ms", "70"]);
    assert_eq!(st.stop.grace_ms, 200);
    assert!(!alive(p_gone));
    t.wait_running("added").await;
    let listed = t.engine.list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["added", "changed", "same"]);
    // Rows come from the current actors' snapshots.
    assert_eq!(listed[1].pid, Some(p_changed2));
    assert_eq!(listed[2].pid, Some(p_same));
    assert_eq!(t.engine.server_count().await.unwrap(), 3);
    assert!(matches!(
        t.engine.status("gone").await,
        Err(EngineError::ServerNotFound(_))
    ));
    t.finish().await;
}

#[tokio::test]
async fn targets_outcomes_and_unknown_names() {
    let t = TestEngine::start(vec![sleep_server("a"), sleep_server("b")]).await;
    let pa = t.wait_running("a").await;
    t.wait_running("b").await;

    // Unknown names fail before anything is done.
    let err = t
        .engine
        .stop_servers(&TargetParams::many(vec!["a".into(), "nope".into()]))
        .await
        .unwrap_err();
    // (Its wire form, -32001 with `data.names`, is checked by the daemon's
    // rpc layer, which does the mapping: xy-daemon/src/rpc/error.rs.)
    assert!(matches!(&err, EngineError::ServerNotFound(n) if n == &["nope"]));
    assert_eq!(t.entry("a").await.pid, Some(pa));

    let r = t.engine.start_servers(&TargetParams::all()).await.unwrap();
    assert_eq!(r.already_running, ["a", "b"]);
    let r = t
        .engine
        .stop_servers(&TargetParams::one("a"))
        .await
        .unwrap();
    assert_eq!(r.stopped, ["a"]);
    let r = t.engine.stop_servers(&TargetParams::all()).await.unwrap();
    assert_eq!(
        (r.stopped, r.not_running),
        (vec!["b".to_owned()], vec!["a".to_owned()])
    );
    // restart starts stopped servers and replaces running ones.
    let r = t
        .engine
        .restart_servers(&TargetParams::one("a"))
        .await
        .unwrap();
    assert_eq!(r.restarted, ["a"]);
    let pa2 = t.wait_running("a").await;
    let r = t
        .engine
        .restart_servers(&TargetParams::one("a"))
        .await
        .unwrap();
    assert_eq!(r.restarted, ["a"]);
    let pa3 = t.wait_running("a").await;
    assert_ne!(pa2, pa3);
    assert!(!alive(pa2));
    let st = t.engine.status("a").await.unwrap();
    assert_eq!(st.command, bin("xy-test-sleep").display().to_string());
    assert!(st.transitions.len() <= 20);
    t.finish().await;
}

#[tokio::test]
async fn spawn_failure_names_server_path_and_os_error() {
    let mut s = server("missing", "xy-test-sleep", &[]);
    s.command = "/nonexistent/xy-server".into();
    let t = TestEngine::start(vec![s, sleep_server("ok")]).await;
    t.wait_state("missing", ServerState::Failed).await;
    let err = t
        .engine
        .start_servers(&TargetParams::all())
        .await
        .unwrap_err();
    let EngineError::SpawnFailed {
        failures,
        already_running,
        started,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(failures[0].name, "missing");
    assert_eq!(failures[0].path, "/nonexistent/xy-server");
    assert!(
        failures[0].error.contains("os error 2"),
        "{}",
        failures[0].error
    );
    assert_eq!(already_running, &["ok"]);
    // The kind is data, not a string to re-parse.
    assert_eq!(failures[0].kind, SpawnErrorKind::NotFound);
    // The path sits next to the error it caused (this is the `-32006`
    // message; its code and data are checked in xy-daemon's rpc layer).
    let message = err.to_string();
    assert!(
        message.starts_with(
            "could not start missing: /nonexistent/xy-server: No such file or directory (os error 2)"
        ),
        "{message}"
    );
    assert!(started.is_empty());
    t.finish().await;
}

#[tokio::test]
async fn shutdown_leaves_no_process_behind() {
    let keep = tempfile::tempdir().unwrap();
    let pidfile = keep.path().join("gc.pid");
    let mut stubborn = server("stubborn", "xy-test-ignore-term", &[]);
    stubborn.stop.grace = Duration::from_millis(200);
    let t = TestEngine::start(vec![
        sleep_server("a"),
        stubborn,
        server(
            "fork",
            "xy-test-fork",
            &["--pidfile", pidfile.to_str().unwrap()],
        ),
    ])
    .await;
    let mut pids = vec![
        t.wait_running("a").await,
        t.wait_running("stubborn").await,
        t.wait_running("fork").await,
    ];
    pids.push(read_pidfile(&pidfile).await);
    t.wait_line("stubborn", "ignoring SIGTERM").await;
    let run_dir = t.run_dir();
    t.engine.shutdown().await.unwrap();
    for pid in &pids {
        assert!(!alive(*pid), "pid {pid} survived shutdown");
    }
    assert_eq!(
        std::fs::read_dir(&run_dir).unwrap().count(),
        0,
        "child records left"
    );
    // Idempotent, and the handle reports the tree gone.
    t.engine.shutdown().await.unwrap();
    assert!(matches!(
        t.engine.list().await,
        Err(EngineError::Internal(_))
    ));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn sweep_orphans_stops_recorded_groups_only() {
    use std::os::unix::process::CommandExt;
    xy_actors::become_subreaper().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(bin("xy-test-ignore-term"))
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Its banner comes after SIG_IGN is in place.
    let mut banner = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut banner,
    )
    .unwrap();
    assert!(banner.contains("ignoring SIGTERM"), "{banner}");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let rec = serde_json::json!({"pid": pid, "pgid": pid, "start_time": start, "command": "x"});
    std::fs::write(dir.path().join("orphan.json"), rec.to_string()).unwrap();
    // A record whose pid is ours but with another start time: PID reuse.
    let me = std::process::id();
    let stale = serde_json::json!({"pid": me, "pgid": me, "start_time": 1, "command": "y"});
    std::fs::write(dir.path().join("reused.json"), stale.to_string()).unwrap();

    let swept = tokio::task::spawn_blocking({
        let d = dir.path().to_path_buf();
        move || xy_actors::sweep_orphans(&d, Duration::from_millis(200))
    })
    .await
    .unwrap();
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0].name, "orphan");
    assert!(swept[0].killed, "ignores SIGTERM, so SIGKILL was needed");
    let _ = child.wait();
    assert!(!alive(pid));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `list_rows` (the cached JSON `list` replies with, D41) reads back as
/// `list`'s entries after every kind of change: a spawn, an exit with its
/// `last_exit`, a stop. Only the per-call fields may differ between the two
/// calls (a second may tick, a resource scan may land in between).
#[tokio::test]
async fn cached_list_rows_follow_every_change() {
    let mut dirty = server("dirty \"quoted\" ☃", "xy-test-exit", &["--code", "3"]);
    dirty.restart.policy = RestartPolicy::Never;
    let t = TestEngine::start(vec![sleep_server("a"), dirty]).await;
    let same = |t: &TestEngine| {
        let engine = t.engine.clone();
        async move {
            let rows = engine.list_rows().await.unwrap();
            let mut out = Vec::new();
            rows.write(&mut out);
            let mut cached: Vec<xy_core::protocol::ListEntry> =
                serde_json::from_slice(&out).unwrap();
            let mut typed = engine.list().await.unwrap();
            for e in cached.iter_mut().chain(typed.iter_mut()) {
                assert_eq!(e.uptime_secs.is_some(), e.state == ServerState::Running);
                e.uptime_secs = None;
                e.cpu_percent = None;
                e.rss_bytes = None;
            }
            assert_eq!(cached, typed);
            typed
        }
    };
    t.wait_running("a").await;
    t.wait_state("dirty \"quoted\" ☃", ServerState::Failed)
        .await;
    let list = same(&t).await;
    assert_eq!(list[1].last_exit.as_ref().and_then(|x| x.code), Some(3));
    t.engine
        .stop_servers(&TargetParams::one("a"))
        .await
        .unwrap();
    let list = same(&t).await;
    assert_eq!(list[0].state, ServerState::Stopped);
    assert_eq!(list[0].pid, None);
    t.finish().await;
}
