//! `xyctl calls` against a real `xyd` (SPEC §20): the table of recorded
//! tool calls, `--limit`, `--json`, an unknown server, and `-f` printing
//! rows for new calls until Ctrl-C (exit 0). The calls are real: the
//! `xy-mcp-load` client's `tools/call echo` through a stdio server's bridge.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

mod support;

use support::Home;

const DEADLINE: Duration = Duration::from_secs(30);

/// A world with one stdio server, `raw`, running; returns it and its port.
fn world() -> (Home, u16) {
    let h = Home::with_xdg("xyc");
    let port = xy_testbins::locate::free_port();
    let raw = xy_testbins::locate::testbin("xy-test-stdio-raw");
    h.write_config(
        "raw",
        &format!(
            "command \"{}\"\ntransport \"stdio\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
            raw.display()
        ),
    );
    h.run(&["daemon", "start"]).ok();
    support::wait_for("raw running", DEADLINE, || {
        h.state_of("raw").as_deref() == Some("running")
    });
    (h, port)
}

/// `n` + the load generator's warm-up `tools/call echo` calls.
fn load(port: u16, n: usize) {
    let out = Command::new(xy_testbins::locate::testbin("xy-mcp-load"))
        .args(["http", &port.to_string(), "/mcp", "latency", &n.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "xy-mcp-load: {out:?}");
}

/// Warm-up calls `xy-mcp-load` makes before its timed ones.
const WARMUP: usize = 50;

#[test]
fn calls_prints_a_table_json_and_follows_until_ctrl_c() {
    let (h, port) = world();
    let empty = h.run(&["calls", "raw"]).ok();
    assert_eq!(empty, "no calls recorded yet\n");
    load(port, 1);
    let out = h.run(&["calls", "raw", "--limit", "3"]).ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["TIME", "SERVER", "CLIENT", "TOOL", "DURATION", "OUTCOME"],
        "{out}"
    );
    for l in &lines[1..] {
        let cols: Vec<&str> = l.split_whitespace().collect();
        // date, time, server, client name, client version, tool, duration, outcome
        assert_eq!(cols.len(), 8, "{l}");
        assert_eq!(
            (cols[2], cols[3], cols[4], cols[5], cols[7]),
            ("raw", "xy-mcp-load", "1", "echo", "ok"),
            "{l}"
        );
        assert!(cols[6].ends_with('s'), "a duration: {l}");
    }
    // Every server's, as JSON: the daemon's result on one line.
    let json = h.run(&["calls", "--json"]).ok();
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["calls"].as_array().unwrap().len(), WARMUP + 1, "{json}");
    assert_eq!(v["totals"]["raw"], WARMUP + 1);
    // An unknown server.
    let err = h.run(&["calls", "nope"]).fails(1);
    assert!(err.contains("nope"), "{err}");

    // `-f`: the header (no backlog with --limit 0), then a row per new call.
    let mut child: Child = h
        .cmd(&["calls", "raw", "-f", "--limit", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let header = rx
        .recv_timeout(xy_testbins::wait::scaled(DEADLINE))
        .expect("the header");
    assert!(header.starts_with("TIME"), "{header}");
    load(port, 1);
    for i in 0..=WARMUP {
        let row = rx
            .recv_timeout(xy_testbins::wait::scaled(DEADLINE))
            .unwrap_or_else(|_| panic!("row {i} of the followed calls"));
        assert!(row.contains(" echo ") && row.ends_with("ok"), "{row}");
    }
    let pid = child.id();
    let rc = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let status = support::wait_some("calls -f to exit", DEADLINE, || child.try_wait().unwrap());
    assert_eq!(status.code(), Some(0), "Ctrl-C ends `calls -f` with 0");
}
