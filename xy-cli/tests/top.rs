//! `xyctl events` and `xyctl top` against a real `xyd` (SPEC §15). `top` runs
//! in a real terminal: an 80×24 tmux pane on a private tmux server, read with
//! `capture-pane`, driven with `send-keys`. Every wait polls with a deadline.
// Skips and figures are reported on stderr.
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::{Home, XYCTL};

/// Generous: the machine running the tests is shared and loaded.
const DEADLINE: Duration = Duration::from_secs(30);

#[track_caller]
fn wait_some<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    support::wait_some(what, DEADLINE, f)
}

/// A [`Home`] with its own XDG dirs and the daemon already running the
/// named sleepers (restarted always).
struct World(Home);

impl std::ops::Deref for World {
    type Target = Home;
    fn deref(&self) -> &Home {
        &self.0
    }
}

impl World {
    fn new(servers: &[&str]) -> World {
        static N: AtomicU32 = AtomicU32::new(0);
        let h = Home::with_xdg("xyt");
        let sleeper = xy_testbins::locate::testbin("xy-test-sleep");
        let n = N.fetch_add(1, Ordering::SeqCst);
        let base = 30_000 + (std::process::id() % 500) * 20 + n * 10;
        for (i, name) in servers.iter().enumerate() {
            let text = format!(
                "command \"{}\"\nargs \"--interval-ms\" \"300\"\nport {}\nrestart {{\n    policy \"always\"\n    backoff-initial \"100ms\"\n}}\nstop {{\n    grace \"2s\"\n}}\n",
                sleeper.display(),
                base + u32::try_from(i).unwrap()
            );
            h.write_config(name, &text);
        }
        h.run(&["daemon", "start"]).ok();
        World(h)
    }

    /// `list --json` through `xyctl` itself.
    fn list(&self) -> Vec<Value> {
        let out = self.run(&["list", "--json"]).ok();
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn entry(&self, name: &str) -> Value {
        self.list()
            .into_iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no server {name}"))
    }
}

fn signal(pid: u32, sig: i32) {
    // The `kill` utility: no unsafe code, no extra dev-dependency.
    let rc = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(rc.success());
}

#[test]
fn events_prints_one_line_per_change_and_exits_0_on_ctrl_c() {
    let w = World::new(&["alpha", "beta"]);
    for json in [true, false] {
        let mut args = vec!["events"];
        if json {
            args.push("--json");
        } else {
            args.push("beta");
        }
        let mut child = w.cmd(&args).stdout(Stdio::piped()).spawn().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        // Nothing is replayed and the subscription is made after the
        // process starts: restart until the stream shows a restart.
        let start = Instant::now();
        let mut got = Vec::new();
        'outer: loop {
            assert!(
                start.elapsed() < xy_testbins::wait::scaled(DEADLINE),
                "no events: {got:#?}"
            );
            let restart = w.cmd(&["restart", "beta", "--wait", "0"]).output().unwrap();
            assert!(restart.status.success(), "{restart:?}");
            while let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
                got.push(line.clone());
                let done = if json {
                    let v: Value = serde_json::from_str(&line).unwrap();
                    for k in [
                        "subscription_id",
                        "name",
                        "kind",
                        "ts",
                        "from",
                        "to",
                        "reason",
                    ] {
                        assert!(v.get(k).is_some(), "{k} missing: {line}");
                    }
                    v["name"] == "beta"
                        && v["to"] == "running"
                        && got.iter().any(|l| l.contains("\"to\":\"stopping\""))
                } else {
                    assert!(line.contains("beta") && line.contains("state"), "{line}");
                    // A whole restart: the subscription may begin mid-way.
                    line.contains("starting → running")
                        && got
                            .iter()
                            .any(|l| l.contains("running → stopping (restart requested)"))
                };
                if done {
                    break 'outer;
                }
            }
        }
        if !json {
            assert!(
                got.iter()
                    .any(|l| l.contains("running → stopping (restart requested)")),
                "{got:#?}"
            );
        }
        signal(child.id(), 2);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "Ctrl-C ends events with 0");
    }
    // An unknown name is an operational error.
    let out = w.cmd(&["events", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

/// A private tmux server with one 80×24 pane running `sh`.
struct Tmux {
    sock: String,
}

impl Tmux {
    /// `None` (after a loud note) only when tmux cannot be run at all.
    fn start(env: &[(String, String)]) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!(
                "\n!!!!!! SKIPPED: tmux is not installed, so `xyctl top` was NOT tested in a\n!!!!!! real terminal. `.ci/run` installs it (apt-get install tmux).\n"
            );
            return None;
        }
        let t = Tmux {
            sock: format!("xytop-{}-{}", std::process::id(), rand_suffix()),
        };
        let mut cmd = Command::new("tmux");
        cmd.args([
            "-L",
            &t.sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
        ])
        .args(["-x", "80", "-y", "24", "--", "env", "-i"]);
        for (k, v) in env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.args(["TERM=xterm-256color", "PS1=xy-prompt$ ", "sh"]);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "tmux new-session: {out:?}");
        Some(t)
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.sock])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "top"])
    }

    fn screen_with_styles(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "top"])
    }

    #[track_caller]
    fn wait_screen(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if cond(&s) {
                return s;
            }
            assert!(
                start.elapsed() < xy_testbins::wait::scaled(DEADLINE),
                "timed out waiting for {what}; the pane shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .output();
    }
}

fn rand_suffix() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// The table row of `name`: its whitespace-separated columns.
fn row<'a>(screen: &'a str, name: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(|l| l.split_whitespace().collect())
}

fn prompt_back(s: &str) -> bool {
    let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    last.trim_end() == "xy-prompt$" && !s.contains("xy top ·")
}

#[test]
fn top_in_a_real_80x24_terminal() {
    let w = World::new(&["alpha", "beta", "gamma"]);
    let Some(t) = Tmux::start(&w.env()) else {
        return;
    };
    t.wait_screen("the shell prompt", |s| s.contains("xy-prompt$"));
    t.keys(&[&format!("{XYCTL} top"), "Enter"]);
    let s = t.wait_screen("three running rows", |s| {
        ["alpha", "beta", "gamma"]
            .iter()
            .all(|n| row(s, n).is_some_and(|r| r.get(1) == Some(&"running")))
    });
    eprintln!("[top] first screen:\n{s}");
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].contains("xy top · 3 servers · 3 running"), "{s}");
    assert!(lines[1].starts_with("NAME"), "{s}");
    for col in [
        "STATE", "HEALTH", "PID", "PORT", "CPU%", "RSS", "RST", "UPTIME", "TOOLS",
    ] {
        assert!(lines[1].contains(col), "{col} missing: {}", lines[1]);
    }
    assert_eq!(lines.len(), 24, "fills the 24-line pane: {s}");
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{s}");
    for name in ["alpha", "beta", "gamma"] {
        let r = row(&s, name).unwrap();
        let e = w.entry(name);
        assert_eq!(r[3], e["pid"].to_string(), "{name} pid: {r:?}");
        assert_eq!(r[4], e["port"].to_string(), "{name} port: {r:?}");
        assert_eq!(r[7], "0", "{name} restarts: {r:?}");
    }
    // The log pane follows the selected (first) server.
    t.wait_screen("alpha's log lines", |s| {
        s.contains(" logs: alpha") && s.contains("tick")
    });

    // `r` restarts the selected server: a new pid and restart count 1 in its row.
    let old_pid = w.entry("alpha")["pid"].as_u64().unwrap();
    t.keys(&["r"]);
    let s = t.wait_screen("alpha restarted", |s| {
        row(s, "alpha").is_some_and(|r| {
            r[1] == "running" && r[3] != "-" && r[3] != old_pid.to_string() && r[7] == "1"
        })
    });
    assert_ne!(w.entry("alpha")["pid"].as_u64().unwrap(), old_pid, "{s}");
    assert_eq!(w.entry("alpha")["restart_count"], 1, "{s}");

    // A crash of `beta` (restart policy): its restart count goes 0 → 1.
    let beta_pid = w.entry("beta")["pid"].as_u64().unwrap();
    signal(u32::try_from(beta_pid).unwrap(), 9);
    let s = t.wait_screen("beta's restart count", |s| {
        row(s, "beta").is_some_and(|r| r[1] == "running" && r[7] == "1")
    });
    assert_eq!(w.entry("beta")["restart_count"], 1, "{s}");

    // `x` stops the selected server after moving down to `gamma`.
    t.keys(&["j", "j"]);
    t.wait_screen("gamma selected", |s| s.contains(" logs: gamma"));
    t.keys(&["x"]);
    t.wait_screen("gamma stopped", |s| {
        row(s, "gamma").is_some_and(|r| r[1] == "stopped" && r[3] == "-")
    });
    t.keys(&["s"]);
    t.wait_screen("gamma started", |s| {
        row(s, "gamma").is_some_and(|r| r[1] == "running")
    });

    // Help, then any key closes it.
    t.keys(&["?"]);
    t.wait_screen("help", |s| s.contains("xy top: keys"));
    t.keys(&["Escape"]);
    t.wait_screen("help closed", |s| !s.contains("xy top: keys"));

    // Filter.
    t.keys(&["/", "b", "e"]);
    t.wait_screen("filtered to beta", |s| {
        row(s, "beta").is_some() && row(s, "alpha").is_none() && s.contains("filter: be")
    });
    t.keys(&["Escape"]);
    t.wait_screen("filter cleared", |s| row(s, "alpha").is_some());

    // Colour on a terminal.
    let styled = t.screen_with_styles();
    assert!(
        styled.contains("\x1b[38;5;2mrunning") || styled.contains("\x1b[32mrunning"),
        "running is green:\n{styled:?}"
    );

    // A resize redraws at the new size.
    t.tmux(&["resize-window", "-t", "top", "-x", "100", "-y", "30"]);
    let s = t.wait_screen("the 100x30 layout", |s| {
        s.lines()
            .any(|l| l.starts_with(" logs:") && l.chars().count() == 100)
    });
    assert!(row(&s, "gamma").is_some(), "{s}");
    t.tmux(&["resize-window", "-t", "top", "-x", "80", "-y", "24"]);

    // `q`: the shell prompt is back, the terminal restored.
    t.keys(&["q"]);
    t.wait_screen("the prompt back after q", prompt_back);

    // NO_COLOR: the same dashboard without colours; Ctrl-C quits too.
    t.keys(&[&format!("NO_COLOR=1 {XYCTL} top"), "Enter"]);
    t.wait_screen("top again", |s| row(s, "gamma").is_some());
    let styled = t.screen_with_styles();
    for fg in [
        "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[90m", "38;5",
    ] {
        assert!(!styled.contains(fg), "NO_COLOR but {fg:?} in:\n{styled:?}");
    }
    t.keys(&["C-c"]);
    t.wait_screen("the prompt back after Ctrl-C", prompt_back);
    // The shell still echoes (raw mode is off): typed text shows up.
    t.keys(&["echo restored", "Enter"]);
    t.wait_screen("the shell echoes", |s| s.contains("\nrestored"));

    // SIGTERM from outside restores the terminal as well.
    t.keys(&[&format!("{XYCTL} top"), "Enter"]);
    t.wait_screen("top a third time", |s| row(s, "gamma").is_some());
    // This pane's own top: the child of the pane's shell (another test may
    // run a top of its own at the same time).
    let shell = t.tmux(&["display-message", "-p", "#{pane_pid}"]);
    let shell = shell.trim().to_owned();
    let pid = wait_some("the top process", || {
        let out = Command::new("pgrep")
            .args(["-P", &shell, "-f", &format!("^{XYCTL} top$")])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .parse::<u32>()
            .ok()
    });
    signal(pid, 15);
    t.wait_screen("the prompt back after SIGTERM", prompt_back);
}

/// The last column of `name`'s row: CALLS.
fn calls_cell(screen: &str, name: &str) -> Option<String> {
    row(screen, name).and_then(|r| r.last().map(|c| (*c).to_owned()))
}

/// SPEC §20: top's CALLS column counts the tool calls through xy since the
/// daemon started, updated by the once-a-second sample.
#[test]
fn tops_calls_column_counts_calls_through_xy() {
    let h = Home::with_xdg("xyk");
    let port = xy_testbins::locate::free_port();
    let raw = xy_testbins::locate::testbin("xy-test-stdio-raw");
    h.write_config(
        "bridged",
        &format!(
            "command \"{}\"\ntransport \"stdio\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
            raw.display()
        ),
    );
    h.run(&["daemon", "start"]).ok();
    support::wait_for("bridged running", DEADLINE, || {
        h.state_of("bridged").as_deref() == Some("running")
    });
    let Some(t) = Tmux::start(&h.env()) else {
        return;
    };
    t.wait_screen("the shell prompt", |s| s.contains("xy-prompt$"));
    t.keys(&[&format!("{XYCTL} top"), "Enter"]);
    let s = t.wait_screen("the CALLS column at 0", |s| {
        calls_cell(s, "bridged").as_deref() == Some("0")
    });
    let header = s.lines().nth(1).unwrap_or_default();
    assert!(header.trim_end().ends_with("CALLS"), "{s}");
    // `xy-mcp-load` makes 50 warm-up calls and then the 5 it times.
    let out = Command::new(xy_testbins::locate::testbin("xy-mcp-load"))
        .args(["http", &port.to_string(), "/mcp", "latency", "5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "xy-mcp-load: {out:?}");
    t.wait_screen("55 calls", |s| {
        calls_cell(s, "bridged").as_deref() == Some("55")
    });
    t.keys(&["q"]);
    t.wait_screen("the prompt back after q", prompt_back);
}
