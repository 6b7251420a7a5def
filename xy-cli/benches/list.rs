//! Wall-clock cost of a whole `xyctl list` process (exec to exit) against a
//! release `xyd` supervising 10 and 200 idle servers, with `true` as the
//! floor of spawning any process. Run: `cargo bench -p xy-cli --bench list`.
//! Targets: median ≤ 4 ms (10 servers) and ≤ 6 ms (200 servers).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 200;

fn main() {
    let xyctl = PathBuf::from(env!("CARGO_BIN_EXE_xyctl"));
    let dir = xyctl.parent().unwrap().to_path_buf();
    // A current release xyd next to this xyctl, and the children it runs.
    let xyd = xy_testbins::locate::xyd();
    xy_testbins::locate::testbin("xy-test-sleep");
    assert_eq!(xyd.parent(), Some(dir.as_path()), "xyd beside xyctl");

    println!("xyctl list, whole process, {RUNS} runs each (ms)");
    report("true (floor)", &time(RUNS, || Command::new("true")));
    for n in [10, 200] {
        let w = World::new(&dir, n);
        w.xyctl(&["daemon", "start"]).status().unwrap();
        w.wait_running(n);
        let samples = time(RUNS, || w.xyctl(&["list"]));
        report(&format!("xyctl list, {n} servers"), &samples);
        let samples = time(RUNS, || w.xyctl(&["list", "--json"]));
        report(&format!("xyctl list --json, {n} servers"), &samples);
        let _ = w.xyctl(&["daemon", "stop"]).status();
    }
}

struct World {
    root: tempfile::TempDir,
    socket: PathBuf,
    xyctl: PathBuf,
}

impl World {
    fn new(bin: &Path, n: usize) -> World {
        let root = tempfile::Builder::new()
            .prefix("xybench-")
            .tempdir()
            .unwrap();
        let servers = root.path().join("config/xy/servers");
        std::fs::create_dir_all(&servers).unwrap();
        for i in 0..n {
            std::fs::write(
                servers.join(format!("server-{i:03}.kdl")),
                format!(
                    "command \"{}\"\nargs \"--interval-ms\" \"600000\"\nport {}\nstop {{\n    grace \"2s\"\n}}\n",
                    bin.join("xy-test-sleep").display(),
                    30_000 + i
                ),
            )
            .unwrap();
        }
        World {
            socket: PathBuf::from(format!("/tmp/xyb-{}-{n}.sock", std::process::id())),
            xyctl: bin.join("xyctl"),
            root,
        }
    }

    fn xyctl(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.xyctl);
        c.args(args)
            .env("XDG_CONFIG_HOME", self.root.path().join("config"))
            .env("XDG_STATE_HOME", self.root.path().join("state"))
            .env("XY_SOCKET", &self.socket)
            .env("HOME", self.root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn wait_running(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self
                .xyctl(&["list", "--json"])
                .stdout(Stdio::piped())
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let running = v
                .as_array()
                .map_or(0, |a| a.iter().filter(|e| e["state"] == "running").count());
            if running == n {
                return;
            }
            assert!(Instant::now() < deadline, "only {running}/{n} running");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn time(runs: usize, mut make: impl FnMut() -> Command) -> Vec<Duration> {
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut cmd = make();
        let start = Instant::now();
        let status = cmd.status().unwrap();
        out.push(start.elapsed());
        assert!(status.success());
    }
    out.sort();
    out
}

fn report(label: &str, sorted: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<32} median {:>6.2}  min {:>6.2}  max {:>6.2}",
        ms(sorted[sorted.len() / 2]),
        ms(sorted[0]),
        ms(sorted[sorted.len() - 1])
    );
}
