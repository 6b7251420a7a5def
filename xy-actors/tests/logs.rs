//! The log path against a disk that stops moving: a server whose log file is
//! a FIFO that nobody reads (writes block, like a hung filesystem) must not
//! stall `list`, the other servers' logs, or its own child for good.

#[path = "engine/support.rs"]
mod support;

use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use support::{TestEngine, poll, server};
use xy_core::config::RestartPolicy;
use xy_testbins::wait::scaled;

/// Ticks of `name` in its log file.
fn disk_ticks(t: &TestEngine, name: &str) -> usize {
    std::fs::read_to_string(t.log_dir().join(format!("{name}.log")))
        .unwrap_or_default()
        .matches("[out] tick ")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_log_file_stalls_neither_list_nor_other_servers() {
    let mut servers: Vec<_> = (0..20)
        .map(|i| {
            server(
                &format!("s{i:02}"),
                "xy-test-sleep",
                &["--interval-ms", "20"],
            )
        })
        .collect();
    // 20 MB of output against a FIFO whose reader never reads: the first
    // 64 KiB fill the FIFO, then the writer blocks for good.
    let mut stuck = server(
        "stuck",
        "xy-test-flood",
        &["--lines", "200000", "--bytes", "100", "--then-sleep"],
    );
    stuck.restart.policy = RestartPolicy::Never;
    servers.push(stuck);
    let mut fifo = None;
    let t = TestEngine::start_with(servers, |o| {
        std::fs::create_dir_all(&o.log_dir).unwrap();
        let path = o.log_dir.join("stuck.log");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // A reader that never reads (non-blocking open: no writer yet).
        fifo = Some(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .unwrap(),
        );
    })
    .await;

    // While the stuck writer holds its thread, `list` keeps answering and
    // the other servers keep reaching their files; the stuck server's child
    // is not stopped: after the stall is declared its lines go to the ring.
    let start = Instant::now();
    let ticks_before = disk_ticks(&t, "s00");
    let mut slowest = Duration::ZERO;
    let mut calls = 0;
    loop {
        let call = Instant::now();
        let list = tokio::time::timeout(scaled(Duration::from_secs(5)), t.engine.list())
            .await
            .expect("list stalled")
            .unwrap();
        slowest = slowest.max(call.elapsed());
        calls += 1;
        assert_eq!(list.len(), 21);
        let sub = t
            .engine
            .subscribe_logs(&["stuck".into()], Some(4), false)
            .await
            .unwrap();
        let last = sub
            .backlog
            .iter()
            .any(|l| l.line.starts_with("line 0200000 "));
        // Its last line, not its stderr report: that one is read while up
        // to 1 MiB of stdout still waits in the pipe, which then pushes it
        // out of the ring. Among the last few lines, not the very last: when
        // the pump keeps up, the report is ingested after the last line.
        if last {
            break;
        }
        assert!(
            start.elapsed() < scaled(Duration::from_secs(60)),
            "the stuck server's child never finished its output"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The stall is declared after 5 s without progress.
    assert!(
        start.elapsed() >= Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    poll(
        "other servers still writing",
        Duration::from_secs(10),
        || async { (disk_ticks(&t, "s00") > ticks_before + 10).then_some(()) },
    )
    .await;
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{calls} list calls while stuck, slowest {slowest:?}");
    }
    // The reader goes away: the blocked write fails and the writer thread
    // is released (the runtime waits for it at the end of the test).
    drop(fifo);
    t.finish().await;
}
