//! Log-path benchmark (not a timed test), three parts:
//!
//! 1. Throughput: `xy-test-flood --constant` (one constant 100-byte line,
//!    1,000,000 times through a 64 KiB stdio buffer: a child faster than any
//!    pump) (a) under xy's log pump into a temp log dir and (b) piped into
//!    `sh -c 'cat > file'`, interleaved, same child, same run. The figure is
//!    the child's own write time; target (a)/(b) ≤ 1.3×.
//! 2. Loss: the numbered `xy-test-flood` under the pump; every line number
//!    must be on disk, in order, once (target 0 lost), and its ratio too.
//! 3. Fairness: ten constant floods at once plus one server printing a
//!    timestamped line every 50 ms, followed live: how late that line
//!    arrives, and `Engine::list` latency, against the same with no flood.
//!
//! Run: `cargo bench -p xy-actors --bench pump` (release). Options after
//! `--`: `--runs N` (default 7), `--only throughput|loss|fairness`,
//! `--drop-caches` (root: drop the clean page cache before the throughput
//! series), `XY_BENCH_DIR` (where both sides write; default the temp dir),
//! `--profile` (one pump run of the constant child and nothing else, for
//! `valgrind --tool=callgrind`).
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use xy_actors::{Engine, EngineOptions, LogEvent};
use xy_core::config::{ConfigSet, RestartConfig, RestartPolicy, ServerConfig, StopConfig};
use xy_core::protocol::ServerState;

const LINES: u64 = 1_000_000;
const BYTES: usize = 100;

/// A test binary from `xy-testbins`, built for this profile if missing.
fn bin(name: &str) -> PathBuf {
    xy_testbins::locate::testbin(name)
}

/// `wrote N lines in X ms` → X.
fn reported_ms(line: &str) -> Option<f64> {
    line.strip_prefix("wrote ")?
        .split(" in ")
        .nth(1)?
        .strip_suffix(" ms")?
        .parse()
        .ok()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn server(name: &str, command: &Path, args: &[String]) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        source: format!("{name}.kdl").into(),
        command: command.display().to_string(),
        args: args.to_vec(),
        port: 1,
        transport: Default::default(),
        remote: None,
        path: "/mcp".into(),
        on_demand: None,
        env: Default::default(),
        working_dir: None,
        restart: RestartConfig {
            policy: RestartPolicy::Never,
            ..RestartConfig::default()
        },
        stop: StopConfig::default(),
        health: None,
        env_files: Vec::new(),
        secrets: bench_secrets(),
        hooks: Default::default(),
        agent: Default::default(),
        firewall: None,
        sandbox: None,
        package: None,
        autostart: true,
    }
}

/// `XY_BENCH_SECRETS=N`: N command secrets, redacted in every read (their
/// values never occur in the flood: one scan per read, the common case).
fn bench_secrets() -> Vec<xy_core::config::SecretSpec> {
    let n: usize = std::env::var("XY_BENCH_SECRETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (0..n)
        .map(|i| xy_core::config::SecretSpec {
            name: format!("SECRET_{i}"),
            source: xy_core::config::SecretSource::Command {
                program: "/bin/echo".into(),
                args: vec![format!("bench-secret-{i}-Qx7vT2pL9mZ")],
            },
        })
        .collect()
}

fn set(servers: Vec<ServerConfig>) -> ConfigSet {
    ConfigSet {
        servers: servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
        settings: xy_core::config::DaemonSettings::without_gateway(),
        ..ConfigSet::default()
    }
}

fn flood_args(constant: bool) -> Vec<String> {
    let mut a = vec![
        "--lines".into(),
        LINES.to_string(),
        "--bytes".into(),
        BYTES.to_string(),
    ];
    if constant {
        a.push("--constant".into());
    }
    a
}

/// CPU time (ms) of this process's threads so far, summed by thread name
/// (`/proc/self/task/*/schedstat`, ns on a CPU): where the pump's side of a
/// run spends its time — the runtime's thread (the pumps) and the log writers.
fn thread_cpu() -> BTreeMap<String, f64> {
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let path = task.path();
        // The main thread runs the current-thread runtime (the pumps).
        let main = task.file_name().to_str() == Some(&std::process::id().to_string());
        let name = if main {
            "tokio (main thread)".to_owned()
        } else {
            std::fs::read_to_string(path.join("comm")).unwrap_or_default()
        };
        let ns: f64 = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        *by_name.entry(name.trim().to_owned()).or_insert(0.0) += ns / 1e6;
    }
    by_name
}

/// CPU ms of the pumps (the runtime thread and any tokio workers) and the log writers between two
/// [`thread_cpu`] snapshots (a thread that ended in between is not counted).
fn cpu_since(before: &BTreeMap<String, f64>) -> (f64, f64) {
    let mut pumps = 0.0;
    let mut writers = 0.0;
    for (name, ms) in thread_cpu() {
        let d = ms - before.get(&name).copied().unwrap_or(0.0);
        if name.starts_with("tokio") {
            pumps += d;
        } else if name.starts_with("xyd-log") {
            writers += d;
        }
    }
    (pumps, writers)
}

struct Run {
    child_ms: f64,
    /// CPU ms of the runtime thread (the pumps) and the log writers.
    cpu: (f64, f64),
    /// From engine start until every line was in the log file.
    wall: Duration,
    /// The log file (kept for the loss check).
    log: String,
}

/// Where both sides write: one directory (one filesystem) for the pump's
/// log dir and `cat`'s file; `XY_BENCH_DIR`, or the system temp dir.
fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("XY_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

async fn under_pump(flood: &Path, constant: bool, keep_log: bool) -> Run {
    let dir = bench_dir();
    let mut opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    // One file, so every line is easy to check (rotation is a rename per 10 MB).
    opts.rotate_bytes = 1 << 30;
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let engine = Engine::start(
        set(vec![server("flood", flood, &flood_args(constant))]),
        opts,
    )
    .await
    .unwrap();
    // Done when the file holds every line and the stderr report (which need
    // not come last: stderr is read while stdout's pipe still holds up to
    // 1 MiB). Watched by the file's size, a `stat` every 2 ms: asking the
    // engine (`status` reads /proc on the blocking pool) that often took
    // CPU from the child and the pump during the timed run, which `cat`'s
    // side never pays.
    let deadline = Instant::now() + Duration::from_secs(300);
    let path = dir.path().join("logs/flood.log");
    let want = LINES * (BYTES as u64 + 31) + 40;
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < want {
        assert!(Instant::now() < deadline, "not everything reached the disk");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = t0.elapsed();
    let cpu = cpu_since(&cpu0);
    while engine.status("flood").await.unwrap().entry.state != ServerState::Stopped {
        assert!(
            Instant::now() < deadline,
            "flood under the pump did not finish"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    engine.shutdown().await.unwrap();
    let log = std::fs::read_to_string(&path).unwrap();
    let child_ms = log
        .lines()
        .filter_map(|l| l.split_once(" [err] "))
        .find_map(|(_, l)| reported_ms(l))
        .expect("flood report");
    let log = if keep_log { log } else { String::new() };
    Run {
        child_ms,
        cpu,
        wall,
        log,
    }
}

fn into_cat(flood: &Path, constant: bool) -> Run {
    let dir = bench_dir();
    let out = dir.path().join("out.log");
    let t0 = Instant::now();
    let mut child = Command::new(flood)
        .args(flood_args(constant))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cat = Command::new("sh")
        .arg("-c")
        .arg(format!("cat > '{}'", out.display()))
        .stdin(child.stdout.take().unwrap())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(cat.wait().unwrap().success());
    let wall = t0.elapsed();
    let child_ms = err.lines().find_map(reported_ms).expect("flood report");
    assert_eq!(std::fs::metadata(&out).unwrap().len(), LINES * BYTES as u64);
    Run {
        child_ms,
        cpu: (0.0, 0.0),
        wall,
        log: String::new(),
    }
}

/// Before each timed run: the previous run's file is already deleted (its
/// temp dir is gone), then `sync` and a wait until the kernel reports no
/// page under writeback, so neither side pays for another run's (or another
/// process's) writeback.
fn settle() {
    let _ = Command::new("sync").status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while meminfo_kb("Writeback:").unwrap_or(0) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A `/proc/meminfo` figure in KiB.
fn meminfo_kb(key: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `--drop-caches`: the clean page cache dropped before a series (root
/// only), so page allocations for both sides' files come from free memory
/// instead of reclaim; says whether it was done.
fn drop_caches() -> String {
    let _ = Command::new("sync").status();
    match std::fs::write("/proc/sys/vm/drop_caches", "1") {
        Ok(()) => "page cache dropped before the series".into(),
        Err(e) => format!("page cache NOT dropped ({e})"),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> String {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    format!(
        "{:.1} ms (min {:.1}, max {:.1}, n={})",
        median(v.to_vec()),
        s[0],
        s[s.len() - 1],
        s.len()
    )
}

/// Line numbers on disk: 1..=LINES, each once, in order.
fn lost_lines(log: &str) -> u64 {
    let mut next = 1u64;
    let mut lost = 0u64;
    for l in log.lines() {
        let Some((_, text)) = l.split_once(" [out] ") else {
            continue;
        };
        let n: u64 = text
            .strip_prefix("line ")
            .and_then(|t| t.get(..7))
            .and_then(|t| t.parse().ok())
            .expect("numbered line");
        assert!(
            n >= next,
            "line {n} out of order or twice (expected {next})"
        );
        lost += n - next;
        next = n + 1;
    }
    lost + (LINES + 1 - next)
}

fn throughput(rt: &tokio::runtime::Runtime, flood: &Path, runs: usize, constant: bool, drop: bool) {
    let what = if constant {
        "constant line (--constant)"
    } else {
        "numbered lines"
    };
    let dropped = if drop {
        drop_caches()
    } else {
        "page cache not dropped (--drop-caches to)".into()
    };
    println!(
        "== throughput: xy-test-flood --lines {LINES} --bytes {BYTES}, {what}; load {} at start; {dropped}; MemFree {} MiB; files in {}",
        load(),
        meminfo_kb("MemFree:").unwrap_or(0) / 1024,
        bench_dir().path().parent().unwrap().display()
    );
    let (mut pump, mut cat, mut lost) = (Vec::new(), Vec::new(), 0);
    let mut wall = Vec::new();
    let (mut pumps, mut writers) = (Vec::new(), Vec::new());
    let mut pairs = Vec::new();
    for i in 0..runs {
        // Interleaved, and which side goes first alternates: a drift in
        // the machine's state (page cache, another process) hits both.
        let pump_run = || {
            settle();
            rt.block_on(under_pump(flood, constant, !constant))
        };
        let cat_run = || {
            settle();
            into_cat(flood, constant).child_ms
        };
        let (r, c) = if i % 2 == 0 {
            let r = pump_run();
            (r, cat_run())
        } else {
            let c = cat_run();
            (pump_run(), c)
        };
        if !constant {
            lost = lost.max(lost_lines(&r.log));
        }
        pump.push(r.child_ms);
        wall.push(r.wall.as_secs_f64() * 1000.0);
        pumps.push(r.cpu.0);
        writers.push(r.cpu.1);
        cat.push(c);
        pairs.push(r.child_ms / c);
    }
    println!("  (a) under xy's pump : child write time {}", spread(&pump));
    println!("      every line in the log file after {}", spread(&wall));
    println!("      CPU of the runtime thread (pumps) {}", spread(&pumps));
    println!(
        "      CPU of the log writer threads    {}",
        spread(&writers)
    );
    println!("  (b) | cat > file    : child write time {}", spread(&cat));
    let mut sorted = pairs.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "  ratio (a)/(b) of medians: {:.2}x (target <= 1.3x); per-pair ratios median {:.2}x (min {:.2}, max {:.2}); load {} at end",
        median(pump) / median(cat),
        median(pairs),
        sorted[0],
        sorted[sorted.len() - 1],
        load()
    );
    if !constant {
        println!("  lines lost: {lost} (max over {runs} runs; target 0)");
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// (delays of the quiet server's lines in ms, `list` latencies in µs)
async fn fairness_window(floods: usize, window: Duration) -> (Vec<f64>, Vec<f64>) {
    let dir = tempfile::tempdir().unwrap();
    let flood = bin("xy-test-flood");
    let mut servers = vec![server(
        "quiet",
        &flood,
        &[
            "--lines".into(),
            "100000".into(),
            "--bytes".into(),
            "40".into(),
            "--rate".into(),
            "20".into(),
            "--stamp".into(),
        ],
    )];
    for i in 0..floods {
        let mut args = flood_args(true);
        args[1] = "1000000000".into();
        servers.push(server(&format!("flood{i:02}"), &flood, &args));
    }
    let opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    let engine = Engine::start(set(servers), opts).await.unwrap();
    let mut sub = engine
        .subscribe_logs(&["quiet".into()], Some(0), true)
        .await
        .unwrap();
    let lister = engine.clone();
    let until = Instant::now() + window;
    let lists = tokio::spawn(async move {
        let mut lat = Vec::new();
        while Instant::now() < until {
            let t = Instant::now();
            let rows = lister.list().await.unwrap();
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(rows.len(), floods + 1);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lat
    });
    let mut delays = Vec::new();
    // The first second: children start, pipes and buffers grow.
    let warm = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        let ev = tokio::time::timeout(Duration::from_secs(2), sub.recv()).await;
        let Ok(Some(LogEvent::Line(line))) = ev else {
            break;
        };
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_micros() as f64;
        let Some(stamp) = line
            .line
            .strip_prefix("t=")
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse::<f64>().ok())
        else {
            continue;
        };
        if Instant::now() > warm {
            delays.push((now - stamp) / 1000.0);
        }
    }
    let lat = lists.await.unwrap();
    engine.shutdown().await.unwrap();
    (delays, lat)
}

fn fairness(rt: &tokio::runtime::Runtime) {
    const FLOODS: usize = 10;
    let window = Duration::from_secs(6);
    println!(
        "== fairness: {FLOODS} servers flooding constant lines, one printing a stamped line every 50 ms (followed), list every 10 ms; {}s windows",
        window.as_secs()
    );
    let mut results = BTreeMap::new();
    for floods in [0, FLOODS] {
        let before = load();
        let (mut d, mut l) = rt.block_on(fairness_window(floods, window));
        assert!(!d.is_empty(), "the quiet server's lines never arrived");
        let row = format!(
            "  {floods:>2} floods: quiet line delay p50 {:.2} / p99 {:.2} / max {:.2} ms (n={}); list p50 {:.0} / p99 {:.0} µs (n={}); load {before} → {}",
            percentile(&mut d, 0.5),
            percentile(&mut d, 0.99),
            percentile(&mut d, 1.0),
            d.len(),
            percentile(&mut l, 0.5),
            percentile(&mut l, 0.99),
            l.len(),
            load()
        );
        println!("{row}");
        results.insert(floods, row);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: usize = value("--runs").and_then(|v| v.parse().ok()).unwrap_or(7);
    let drop = flag("--drop-caches");
    let only = value("--only");
    let want = |part: &str| only.as_deref().is_none_or(|o| o == part);
    let flood = bin("xy-test-flood");
    // The runtime xyd itself runs on (D45): one async thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if flag("--profile") {
        let r = rt.block_on(under_pump(&flood, true, false));
        println!(
            "profile run: child write time {:.1} ms; CPU: pumps {:.1} ms, log writers {:.1} ms",
            r.child_ms, r.cpu.0, r.cpu.1
        );
        return;
    }
    if want("throughput") {
        throughput(&rt, &flood, runs, true, drop);
    }
    if want("loss") {
        throughput(&rt, &flood, runs.min(3), false, false);
    }
    if want("fairness") {
        fairness(&rt);
    }
}
