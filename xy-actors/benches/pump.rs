//! Log-pump throughput (not a timed test): `xy-test-flood --lines 1000000
//! --bytes 100` (a) under xy's log pump into a temp log dir, and (b) piped
//! into `sh -c 'cat > file'`. Reports lines/s and the child's own reported
//! write time for both, and their ratio (target ≤ 1.3×).
//!
//! Run: `cargo bench -p xy-actors --bench pump` (release).
#![allow(clippy::print_stdout)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xy_actors::{Engine, EngineOptions};
use xy_core::config::{ConfigSet, RestartConfig, RestartPolicy, ServerConfig, StopConfig};
use xy_core::protocol::{LogStream, ServerState};

const LINES: u64 = 1_000_000;
const BYTES: usize = 100;
const RUNS: usize = 3;

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

struct Run {
    wall: Duration,
    child_ms: f64,
}

async fn under_pump(flood: &Path) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        name: "flood".into(),
        source: "flood.kdl".into(),
        command: flood.display().to_string(),
        args: vec![
            "--lines".into(),
            LINES.to_string(),
            "--bytes".into(),
            BYTES.to_string(),
        ],
        port: 1,
        transport: Default::default(),
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
        content_hash: 0,
    };
    let set = ConfigSet {
        servers: [("flood".to_owned(), cfg)].into(),
        ..ConfigSet::default()
    };
    let t0 = Instant::now();
    let mut opts = EngineOptions::new(dir.path().join("logs"), dir.path().join("run"));
    // One file, so the report line is easy to find (rotation is a rename per 10 MB).
    opts.rotate_bytes = 1 << 30;
    let engine = Engine::start(set, opts).await.unwrap();
    let last = format!("line {LINES:07} ");
    let deadline = Instant::now() + Duration::from_secs(300);
    // Done when the child has exited and the pump has delivered its last line.
    loop {
        assert!(
            Instant::now() < deadline,
            "flood under the pump did not finish"
        );
        let stopped = engine.status("flood").await.unwrap().entry.state == ServerState::Stopped;
        if stopped {
            let sub = engine
                .subscribe_logs(&["flood".into()], Some(50), false)
                .await
                .unwrap();
            if sub
                .backlog
                .iter()
                .any(|l| l.stream == LogStream::Stdout && l.line.starts_with(&last))
            {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = t0.elapsed();
    engine.shutdown().await.unwrap();
    // The stderr report can leave the 1 MiB ring before the stdout flood
    // does; the (unrotated) log file has it.
    let log = std::fs::read_to_string(dir.path().join("logs/flood.log")).unwrap();
    assert!(
        log.len() as u64 > LINES * BYTES as u64,
        "not everything reached the disk"
    );
    let child_ms = log
        .lines()
        .filter_map(|l| l.split_once(" [err] "))
        .find_map(|(_, l)| reported_ms(l))
        .expect("flood report");
    Run { wall, child_ms }
}

fn into_cat(flood: &Path) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.log");
    let t0 = Instant::now();
    let mut child = Command::new(flood)
        .args(["--lines", &LINES.to_string(), "--bytes", &BYTES.to_string()])
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
    Run { wall, child_ms }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let flood = bin("xy-test-flood");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut pump = Vec::new();
    let mut cat = Vec::new();
    for _ in 0..RUNS {
        pump.push(rt.block_on(under_pump(&flood)));
        cat.push(into_cat(&flood));
    }
    let lps = |runs: &[Run]| {
        median(
            runs.iter()
                .map(|r| LINES as f64 / r.wall.as_secs_f64())
                .collect(),
        )
    };
    let ms = |runs: &[Run]| median(runs.iter().map(|r| r.child_ms).collect());
    let (pump_ms, cat_ms) = (ms(&pump), ms(&cat));
    println!("xy-test-flood --lines {LINES} --bytes {BYTES}, median of {RUNS} runs");
    println!(
        "  (a) xy log pump : {:>12.0} lines/s end to end, child write time {pump_ms:>8.1} ms",
        lps(&pump)
    );
    println!(
        "  (b) cat > file  : {:>12.0} lines/s end to end, child write time {cat_ms:>8.1} ms",
        lps(&cat)
    );
    println!(
        "  child write time ratio (a)/(b): {:.2}x (target <= 1.3x)",
        pump_ms / cat_ms
    );
}
