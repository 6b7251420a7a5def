//! `cargo bench -p xy-daemon --bench rpc`: boots the real (release) `xyd`
//! with N `xy-test-sleep` servers and measures `list` round trips over the
//! socket, idle RSS, RSS growth after 1,000 calls, and idle CPU ticks.
//! Targets: p50 < 200 µs at N=200; RSS ≤ 8 MiB (N=10) / ≤ 16 MiB (N=200) /
//! ≤ 64 MiB (N=1000); growth ≤ 0.5 MiB; 0 ticks over 10 s idle with 50
//! servers. `XY_BENCH_N=10,200,1000` picks the sizes (default `10,200`);
//! `XY_BENCH_ROUNDS=3` boots, measures and shuts down each size that many
//! times (each boot must bring every server up: no false "port held").
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn sleep_bin() -> PathBuf {
    xy_testbins::locate::testbin("xy-test-sleep")
}

struct Daemon {
    _dir: tempfile::TempDir,
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(n: usize) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("xyb")
            .tempdir_in("/tmp")
            .unwrap();
        let servers = dir.path().join("c/xy/servers");
        std::fs::create_dir_all(&servers).unwrap();
        let bin = sleep_bin();
        for i in 0..n {
            let kdl = format!(
                "command \"{}\"\nargs \"--interval-ms\" \"3600000\"\nport {}\nstop {{\n    grace \"2s\"\n}}\n",
                bin.display(),
                20000 + i
            );
            std::fs::write(servers.join(format!("s{i:03}.kdl")), kdl).unwrap();
        }
        let socket = dir.path().join("x.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_xyd"))
            .env("XDG_CONFIG_HOME", dir.path().join("c"))
            .env("XDG_STATE_HOME", dir.path().join("s"))
            .env("XY_SOCKET", &socket)
            .env("XY_LOG", "warn")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon {
            _dir: dir,
            child,
            socket,
        };
        let start = Instant::now();
        loop {
            // The socket answers during the boot; `list` would wait for it.
            if let Ok(mut c) = Client::connect(&d.socket)
                && !c.call("daemon_status").contains("\"boot\"")
            {
                let list = c.call("list");
                let running = list.matches("\"state\":\"running\"").count();
                if running == n {
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60 + n as u64 / 5),
                "daemon with {n} servers not ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after = stat.rsplit(')').next().unwrap();
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of stat; `after` starts at field 3.
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }

    fn stop(mut self) {
        if let Ok(mut c) = Client::connect(&self.socket) {
            c.call("shutdown");
        }
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "xyd did not shut down cleanly: {status}");
    }
}

/// The project's one line client, asking for raw results.
struct Client(xy_core::client::Client);

impl Client {
    fn connect(p: &Path) -> Result<Client, xy_core::client::ClientError> {
        xy_core::client::Client::connect(p, Duration::from_secs(30)).map(Client)
    }

    /// One timed round trip: the request line out, the reply line in, and
    /// no JSON parsing on this side (a large fleet's reply is tens of KB; scanning
    /// and copying it here would be the load generator's cost, not xyd's).
    /// Only checks that the line is a result, not an error.
    fn round_trip(&mut self, line: &[u8]) -> usize {
        self.0.send_raw(line).unwrap();
        let reply = self
            .0
            .read_line(Some(Instant::now() + Duration::from_secs(30)))
            .unwrap()
            .expect("a reply");
        assert!(
            reply.starts_with(br#"{"jsonrpc":"2.0","id":1,"result":"#),
            "{}",
            String::from_utf8_lossy(&reply[..reply.len().min(200)])
        );
        reply.len()
    }

    fn call(&mut self, method: &str) -> String {
        self.0
            .call_raw::<()>(method, None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{method}: {e}"))
            .get()
            .to_owned()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    println!("{:<44} {:>14} {:>14}", "measure", "value", "target");
    let sizes: Vec<usize> = std::env::var("XY_BENCH_N")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 200]);
    let rounds: usize = std::env::var("XY_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for n in sizes
        .into_iter()
        .flat_map(|n| std::iter::repeat_n(n, rounds))
    {
        let boot = Instant::now();
        let d = Daemon::start(n);
        println!(
            "{:<44} {:>11} ms {:>14}",
            format!("boot until all running, N={n}"),
            boot.elapsed().as_millis(),
            ""
        );
        // Let boot-time allocations settle before the idle figure.
        std::thread::sleep(Duration::from_millis(500));
        let idle = d.rss_kib();
        let mut c = Client::connect(&d.socket).unwrap();
        for _ in 0..100 {
            c.call("list");
        }
        let list_line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"list\"}\n";
        let status_line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon_status\"}\n";
        let mut times = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let t = Instant::now();
            c.round_trip(list_line);
            times.push(t.elapsed());
        }
        times.sort_unstable();
        // `daemon_status` asks the engine one question instead of N: the
        // difference to `list` is the engine's per-server cost.
        let mut status_times = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let t = Instant::now();
            c.round_trip(status_line);
            status_times.push(t.elapsed());
        }
        status_times.sort_unstable();
        let before = d.rss_kib();
        for _ in 0..1000 {
            c.call("list");
        }
        let after = d.rss_kib();
        let rss_target = match n {
            0..=10 => "<= 8192 KiB",
            11..=200 => "<= 16384 KiB",
            _ => "<= 65536 KiB",
        };
        let p50_target = if n == 200 { "< 200 µs" } else { "" };
        println!(
            "{:<44} {:>11} µs {:>14}",
            format!("list p50, N={n}"),
            percentile(&times, 0.5).as_micros(),
            p50_target
        );
        println!(
            "{:<44} {:>11} µs {:>14}",
            format!("list p99, N={n}"),
            percentile(&times, 0.99).as_micros(),
            ""
        );
        println!(
            "{:<44} {:>11} µs {:>14}",
            format!("daemon_status p50, N={n}"),
            percentile(&status_times, 0.5).as_micros(),
            ""
        );
        println!(
            "{:<44} {:>10} KiB {:>14}",
            format!("RSS idle, N={n}"),
            idle,
            rss_target
        );
        println!(
            "{:<44} {:>10} KiB {:>14}",
            format!("RSS growth over 1,000 list, N={n}"),
            after as i64 - before as i64,
            "<= 512 KiB"
        );
        drop(c);
        let stop = Instant::now();
        d.stop();
        println!(
            "{:<44} {:>11} ms {:>14}",
            format!("shutdown, N={n}"),
            stop.elapsed().as_millis(),
            ""
        );
    }
    let d = Daemon::start(50);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = d.cpu_ticks();
    std::thread::sleep(Duration::from_secs(10));
    let t1 = d.cpu_ticks();
    println!(
        "{:<44} {:>10} tck {:>14}",
        "CPU ticks (utime+stime), 10 s idle, N=50",
        t1 - t0,
        "0"
    );
    d.stop();
}
