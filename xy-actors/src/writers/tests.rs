//! The writer threads against real per-server disk queues.
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::*;
use crate::log_router::disk::{DiskLog, DiskQueue};

/// Generous: the machine is shared; a stall is forever, not slow.
const DEADLINE: Duration = Duration::from_secs(30);

fn queue(dir: &Path, name: &str, writers: &Arc<Writers>) -> Arc<DiskQueue> {
    let path = dir.join(format!("{name}.log"));
    DiskQueue::with_writers(DiskLog::open(name, path, u64::MAX), writers.clone())
}

fn lines(tag: &str, n: usize, width: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let line = format!("{tag} {i:07} ");
        out.extend_from_slice(line.as_bytes());
        out.resize(out.len() + width.saturating_sub(line.len() + 1), b'x');
        out.push(b'\n');
    }
    out
}

fn count_in(path: &Path, tag: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(tag))
        .count()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    xy_testbins::wait::poll(what, DEADLINE, || std::future::ready(done().then_some(()))).await;
}

/// With ONE writer: the file of `stuck` (a FIFO whose reader never
/// reads) blocks that writer in a write for good; the writer is
/// replaced, and another server's lines still reach its file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_file_does_not_stop_another_servers_lines() {
    let dir = tempfile::tempdir().unwrap();
    let writers = Writers::new(1, Duration::from_millis(200));
    let fifo = dir.path().join("stuck.log");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let stuck = queue(dir.path(), "stuck", &writers);
    // 200 KiB against a pipe of 64 KiB: the write blocks.
    stuck.write(lines("stuck", 2000, 100));
    wait_until("the writer to be in the stuck write", || {
        !lock(&writers.state).busy.is_empty()
    })
    .await;

    let other = queue(dir.path(), "other", &writers);
    for round in 0..3 {
        other.write(lines(&format!("r{round}"), 10, 40));
        let path = dir.path().join("other.log");
        let tag = format!("r{round} ");
        wait_until("the other server's lines", || count_in(&path, &tag) == 10).await;
    }
    let (abandoned, spawned) = writers.counts();
    assert_eq!(abandoned, 1, "the stuck writer, once");
    assert_eq!(spawned, 2, "one writer and its replacement");
    // The stuck queue stayed with its stuck writer.
    stuck.write(lines("more", 1, 40));
    assert!(!stuck.idle());

    // The reader goes: the write fails (EPIPE), the writer comes back
    // and, the pool being full again, ends.
    drop(reader);
    wait_until("the stuck queue to be dealt with", || stuck.idle()).await;
    assert!(writers.flush(DEADLINE));
}

/// 200 servers logging at once (a boot) are written by two threads, not
/// 200, and `flush` returns once every line is in its file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_servers_share_two_writers_and_flush_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let writers = Writers::new(2, DEADLINE);
    let queues: Vec<_> = (0..200)
        .map(|i| queue(dir.path(), &format!("s{i:03}"), &writers))
        .collect();
    for round in 0..5 {
        for q in &queues {
            q.write(lines(&format!("n{round}"), 20, 60));
        }
    }
    assert!(writers.flush(DEADLINE), "flush timed out");
    for i in 0..200 {
        let text = std::fs::read_to_string(dir.path().join(format!("s{i:03}.log"))).unwrap();
        let got: Vec<&str> = text.lines().map(|l| &l[..11]).collect();
        let want: Vec<String> = (0..5)
            .flat_map(|r| (0..20).map(move |n| format!("n{r} {n:07} ")))
            .collect();
        assert_eq!(got, want, "s{i:03}: every line, in order");
    }
    assert_eq!(writers.counts(), (0, 2));
}

/// A flood is written a turn at a time: the queue comes back with more
/// after [`TURN_BYTES`], and leaves the writers once empty.
#[test]
fn a_turn_ends_after_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let writers = Writers::new(1, DEADLINE);
    let q = queue(dir.path(), "flood", &writers);
    // No runtime: `write` would write at once; queue by hand instead.
    let batch = lines("f", 1000, 100);
    assert!(batch.len() < TURN_BYTES);
    q.enqueue_for_test(batch.clone());
    q.enqueue_for_test(batch.clone());
    q.enqueue_for_test(batch.clone());
    assert!(q.drain_turn(batch.len() + 1), "two batches, one left");
    assert!(!q.drain_turn(TURN_BYTES), "the last one");
    assert!(q.idle());
    assert_eq!(count_in(&dir.path().join("flood.log"), "f "), 3000);
}
