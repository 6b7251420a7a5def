//! End-to-end tests of the real `xyctl` against the real `xyd` (built from
//! `xy-daemon`, found next to this test's target dir) on temporary XDG dirs,
//! with `xy-testbins` children. Every wait polls with a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::{Home, Run, XYCTL, wait_for};

/// The test child `xy-test-sleep`.
fn sleeper() -> PathBuf {
    xy_testbins::locate::testbin("xy-test-sleep")
}

/// A [`Home`] with its own XDG dirs, a port counter for its servers, and a
/// drop that signals every process carrying its state dir (the daemon and
/// each child), not only the daemon it can reach.
struct World {
    h: Home,
    next_port: AtomicU32,
}

impl std::ops::Deref for World {
    type Target = Home;
    fn deref(&self) -> &Home {
        &self.h
    }
}

impl World {
    fn new() -> World {
        static N: AtomicU32 = AtomicU32::new(0);
        let h = Home::with_xdg("xyc");
        let base =
            20_000 + (std::process::id() % 1000) * 20 + N.fetch_add(1, Ordering::SeqCst) * 400;
        World {
            h,
            next_port: AtomicU32::new(base),
        }
    }

    fn pidfile(&self) -> PathBuf {
        self.state_home().join("xy/xy.pid")
    }

    /// A sleeper server printing `tick N` every `interval_ms`.
    fn add_sleeper(&self, name: &str, interval_ms: u32) {
        let port = self.next_port.fetch_add(1, Ordering::SeqCst);
        let cmd = sleeper();
        self.write_config(
            name,
            &format!(
                "command \"{}\"\nargs \"--interval-ms\" \"{interval_ms}\"\nport {port}\n\
                 env {{\n    TOKEN \"hunter2\"\n}}\nstop {{\n    grace \"2s\"\n}}\n",
                cmd.display()
            ),
        );
    }

    /// Live (non-zombie) processes whose environment names our state dir:
    /// the daemon and every child it spawned.
    fn our_processes(&self) -> Vec<(u32, String)> {
        let needle = format!("XDG_STATE_HOME={}", self.state_home().display());
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if !env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .unwrap_or("Z");
            if state == "Z" {
                continue;
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_owned()));
        }
        out
    }

    fn daemons(&self) -> Vec<u32> {
        self.our_processes()
            .into_iter()
            .filter(|(_, c)| c == "xyd")
            .map(|(p, _)| p)
            .collect()
    }

    /// Waits until `list --json` shows every server running.
    fn wait_all_running(&self, n: usize) {
        wait_for("servers running", Duration::from_secs(15), || {
            let v = self.call("list", None);
            let arr = v.as_array().cloned().unwrap_or_default();
            arr.len() == n && arr.iter().all(|e| e["state"] == "running")
        });
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let term = |pids: &[u32], sig: &str| {
            for p in pids {
                let _ = Command::new("kill").args([sig, &p.to_string()]).status();
            }
        };
        term(&self.daemons(), "-TERM");
        let deadline = xy_testbins::wait::deadline(Duration::from_secs(10));
        while !self.daemons().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(25));
        }
        let left: Vec<u32> = self.our_processes().into_iter().map(|(p, _)| p).collect();
        term(&left, "-KILL");
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Replaces every `uptime_secs` value (it ticks between two calls).
fn mask_uptime(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                if k == "uptime_secs" {
                    *val = Value::Null;
                } else {
                    mask_uptime(val);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask_uptime),
        _ => {}
    }
}

fn has_ansi(s: &str) -> bool {
    s.contains('\x1b')
}

#[test]
fn list_spawns_daemon_and_renders_table() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.add_sleeper("beta", 150);
    let r = w.run(&["list"]);
    let out = r.ok();
    assert!(r.stderr().contains("started xyd (pid"), "{}", r.stderr());
    assert!(
        out.starts_with("NAME   STATE"),
        "header first, aligned:\n{out}"
    );
    assert!(out.contains("RESTARTS  LAST EXIT\n"), "{out}");
    assert!(out.contains("\nalpha  "), "{out}");
    assert!(out.contains("\nbeta   "), "{out}");
    assert!(!has_ansi(&out), "piped output has no colour: {out:?}");
    assert_eq!(w.daemons().len(), 1);

    // The second call finds the daemon and says nothing on stderr.
    w.wait_all_running(2);
    let r = w.run(&["list"]);
    let out = r.ok();
    assert_eq!(r.stderr(), "");
    assert_eq!(out.matches(" running ").count(), 2, "{out}");
}

#[test]
fn json_is_the_raw_rpc_result() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(1);

    for (args, method, params) in [
        (vec!["list", "--json"], "list", None),
        (
            vec!["status", "alpha", "--json"],
            "status",
            Some(serde_json::json!({"name": "alpha"})),
        ),
        (vec!["daemon", "status", "--json"], "daemon_status", None),
    ] {
        let out = w.run(&args).ok();
        assert_eq!(out.lines().count(), 1, "one compact line: {out}");
        let mut mine: Value = serde_json::from_str(&out).unwrap();
        let mut raw = w.call(method, params);
        mask_uptime(&mut mine);
        mask_uptime(&mut raw);
        assert_eq!(mine, raw, "{args:?}");
    }
    // `status` never shows env values.
    let out = w.run(&["status", "alpha"]).ok();
    assert!(out.contains("TOKEN (values hidden)"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    assert!(out.contains("Transitions\n"), "{out}");
    assert!(out.contains("stopped -> starting"), "{out}");
    assert!(out.contains("Recent log\n"), "{out}");
}

#[test]
fn control_commands_and_exit_codes() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.add_sleeper("beta", 100);
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(2);

    assert_eq!(w.run(&["stop", "alpha"]).ok(), "alpha: stopped\n");
    assert_eq!(w.run(&["stop", "alpha"]).ok(), "alpha: not running\n");
    assert_eq!(
        w.run(&["start", "alpha", "beta", "--wait", "0"]).ok(),
        "alpha: started\nbeta: already running\n"
    );
    let out = w.run(&["restart", "--all", "--wait", "0"]).ok();
    assert_eq!(out, "alpha: restarted\nbeta: restarted\n");
    let out = w.run(&["stop", "--all"]).ok();
    assert_eq!(out, "alpha: stopped\nbeta: stopped\n");
    let out = w.run(&["list"]).ok();
    assert_eq!(out.matches(" stopped ").count(), 2, "{out}");

    let err = w.run(&["start", "nope"]).fails(1);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("nope"), "{err}");
    let err = w.run(&["status", "nope"]).fails(1);
    assert!(err.contains("nope"), "{err}");
    // Usage errors are 1, never 2 (which means "daemon unreachable").
    w.run(&["start"]).fails(1);
}

#[test]
fn reload_reports_and_rejects_invalid_config() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(1);

    w.add_sleeper("gamma", 100);
    assert_eq!(
        w.run(&["reload"]).ok(),
        "added      gamma\nremoved    -\nchanged    -\nunchanged  alpha\n"
    );
    let json: Value = serde_json::from_str(&w.run(&["reload", "--json"]).ok()).unwrap();
    assert_eq!(json["unchanged"], serde_json::json!(["alpha", "gamma"]));

    w.write_config(
        "bad",
        "command \"/bin/true\"\nport 1\nworking_dir \"/tmp\"\n",
    );
    let err = w.run(&["reload"]).fails(3);
    assert!(err.contains("did you mean working-dir"), "{err}");
    assert!(err.contains("bad.kdl:3:1"), "{err}");
    assert!(err.contains("keeps running the previous config"), "{err}");
    std::fs::remove_file(w.config_dir().join("bad.kdl")).unwrap();

    // A port clash is an operational error (1), not an invalid config.
    let alpha = std::fs::read_to_string(w.config_dir().join("alpha.kdl")).unwrap();
    w.write_config("clash", &alpha);
    let err = w.run(&["reload"]).fails(1);
    assert!(err.contains("port"), "{err}");
    // The daemon kept the old set.
    assert_eq!(w.call("list", None).as_array().unwrap().len(), 2);
}

#[test]
fn logs_tail_single_and_prefixed() {
    let w = World::new();
    w.add_sleeper("alpha", 50);
    w.add_sleeper("beta-long", 50);
    w.run(&["daemon", "start"]).ok();
    wait_for("ticks", Duration::from_secs(15), || {
        w.run(&["logs", "alpha", "-n", "3"]).ok().lines().count() == 3
    });

    let out = w.run(&["logs", "alpha", "--tail", "3"]).ok();
    for line in out.lines() {
        // `HH:MM:SS.mmm tick N` (or the [err] start line).
        assert_eq!(line.as_bytes()[2], b':', "{line}");
        assert_eq!(line.as_bytes()[8], b'.', "{line}");
        assert!(
            line[13..].starts_with("tick ") || line[13..].starts_with("[err] "),
            "{line}"
        );
    }
    wait_for("beta ticks", Duration::from_secs(15), || {
        w.run(&["logs", "beta-long", "-n", "2"])
            .ok()
            .lines()
            .count()
            == 2
    });
    let out = w.run(&["logs", "-n", "2"]).ok();
    assert_eq!(out.lines().count(), 4, "{out}");
    assert_eq!(
        out.matches("alpha     | ").count(),
        2,
        "padded prefix: {out}"
    );
    assert_eq!(out.matches("beta-long | ").count(), 2, "{out}");
    let out = w.run(&["logs", "alpha", "beta-long", "-n", "1"]).ok();
    assert_eq!(out.lines().count(), 2, "{out}");
    w.run(&["logs", "nope"]).fails(1);
}

#[test]
fn logs_follow_interleaves_and_stops_on_sigint() {
    let w = World::new();
    w.add_sleeper("alpha", 50);
    w.add_sleeper("beta", 50);
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(2);

    let mut child: Child = w
        .cmd(&["logs", "-f", "-n", "0", "--color", "never"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let (mut a, mut b) = (0, 0);
    let deadline = xy_testbins::wait::deadline(Duration::from_secs(15));
    while a < 3 || b < 3 {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("followed lines");
        if line.starts_with("alpha | ") {
            a += 1;
        } else if line.starts_with("beta  | ") {
            b += 1;
        } else {
            panic!("unprefixed line: {line:?}");
        }
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let deadline = xy_testbins::wait::deadline(Duration::from_secs(10));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "logs -f did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(25));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {err}");
}

#[test]
fn colour_rules() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(1);
    assert!(!has_ansi(&w.run(&["list"]).ok()));
    assert!(has_ansi(&w.run(&["list", "--color", "always"]).ok()));
    assert!(!has_ansi(
        &w.run(&["status", "alpha", "--color", "never"]).ok()
    ));
    let r = Run(w
        .cmd(&["list", "--color", "auto"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap());
    assert!(!has_ansi(&r.ok()));
    // JSON is never coloured.
    assert!(!has_ansi(
        &w.run(&["list", "--json", "--color", "always"]).ok()
    ));

    // On a terminal (util-linux `script` gives us a pty), `auto` colours
    // unless NO_COLOR is set.
    if cfg!(target_os = "linux") && Path::new("/usr/bin/script").exists() {
        let on_tty = |no_color: bool| {
            let base = w.cmd(&[]);
            let mut s = Command::new("/usr/bin/script");
            s.args(["-q", "-e", "-c", &format!("{XYCTL} list"), "/dev/null"])
                .env_clear()
                .envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
                .stdin(Stdio::null());
            if no_color {
                s.env("NO_COLOR", "1");
            }
            Run(s.output().unwrap()).ok()
        };
        let out = on_tty(false);
        assert!(
            // SGR green, the code `status` and `logs` use too (D36).
            out.contains("\x1b[32mrunning"),
            "running in green on a tty: {out:?}"
        );
        assert!(!has_ansi(&on_tty(true)));
    }
}

#[test]
fn daemon_status_stop_leave_nothing_behind() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    w.add_sleeper("beta", 100);
    let err = w.run(&["daemon", "status"]).fails(2);
    assert!(err.contains("xyd is not running"), "{err}");
    assert!(w.daemons().is_empty(), "daemon status must not spawn");

    let out = w.run(&["daemon", "start"]).ok();
    assert!(out.starts_with("xyd started (pid "), "{out}");
    let out = w.run(&["daemon", "start"]).ok();
    assert!(out.starts_with("xyd is already running (pid "), "{out}");
    w.wait_all_running(2);
    let out = w.run(&["daemon", "status"]).ok();
    assert!(
        out.starts_with(&format!("xyd {} running (pid ", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(
        out.contains(&format!("socket      {}\n", w.socket.display())),
        "{out}"
    );
    assert!(out.contains("servers     2\n"), "{out}");
    assert!(w.our_processes().len() >= 3, "daemon + two children");

    let out = w.run(&["daemon", "restart"]).ok();
    assert!(out.starts_with("xyd restarted (pid "), "{out}");
    // Until its children have exec'd, a freshly forked child still shows
    // `comm == xyd`: count daemons only once the servers run.
    w.wait_all_running(2);
    assert_eq!(w.daemons().len(), 1);

    let out = w.run(&["daemon", "stop"]).ok();
    assert!(out.starts_with("xyd stopped (pid "), "{out}");
    assert_eq!(w.our_processes(), vec![], "daemon stop leaves no process");
    assert_eq!(w.run(&["daemon", "stop"]).ok(), "xyd is not running\n");
    w.run(&["daemon", "status"]).fails(2);

    // Restart with nothing running starts one, and says so.
    let out = w.run(&["daemon", "restart"]).ok();
    assert!(
        out.starts_with("xyd was not running; started it (pid "),
        "{out}"
    );
    w.wait_all_running(2);
    w.run(&["daemon", "stop"]).ok();
    assert_eq!(w.our_processes(), vec![], "daemon stop leaves no process");
}

#[test]
fn concurrent_clients_end_with_one_daemon() {
    let w = World::new();
    w.add_sleeper("alpha", 200);
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let mut c = w.cmd(&["list"]);
            std::thread::spawn(move || c.output().unwrap())
        })
        .collect();
    let mut notes = 0;
    for h in handles {
        let r = Run(h.join().unwrap());
        let out = r.ok();
        assert!(out.contains("alpha"), "{out}");
        notes += r.stderr().matches("xyctl: started xyd (pid ").count();
    }
    // Only the client whose xyd won the lock says it started one.
    assert_eq!(notes, 1);
    wait_for("losers to exit", Duration::from_secs(10), || {
        w.daemons().len() == 1
    });
    let pid: u32 = std::fs::read_to_string(w.pidfile())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(w.daemons(), vec![pid]);
}

#[test]
fn spawn_with_invalid_config_exits_3_with_diagnostics() {
    let w = World::new();
    w.write_config(
        "bad",
        "command \"/bin/true\"\nport 1\nworking_dir \"/tmp\"\n",
    );
    let err = w.run(&["list"]).fails(3);
    assert!(err.contains("xyd could not start"), "{err}");
    assert!(err.contains("did you mean working-dir"), "{err}");
    assert!(err.contains("bad.kdl:3:1"), "{err}");
    wait_for("no daemon", Duration::from_secs(5), || {
        w.daemons().is_empty()
    });
}

/// A spawned xyd that fails at boot for a reason of its own (here: the
/// socket path is a regular file) is reported once, not spawned again.
#[test]
fn a_boot_failure_is_reported_once_without_respawning() {
    let w = World::new();
    std::fs::write(&w.socket, "not a socket").unwrap();
    let err = w.run(&["list"]).fails(2);
    assert!(err.contains("exited during boot"), "{err}");
    assert_eq!(
        err.matches("exists and is not a socket").count(),
        1,
        "one attempt, one log line: {err}"
    );
    assert!(w.daemons().is_empty());
    std::fs::remove_file(&w.socket).unwrap();
}

#[test]
fn no_spawn_exits_2() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    let err = w.run(&["list", "--no-spawn"]).fails(2);
    assert_eq!(
        err,
        format!(
            "error: xyd is not running (socket {}); start it with `xyctl daemon start`\n",
            w.socket.display()
        )
    );
    let r = Run(w.cmd(&["list"]).env("XY_NO_SPAWN", "1").output().unwrap());
    r.fails(2);
    assert!(w.daemons().is_empty());
}

#[test]
fn config_check_examples_and_typo() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/servers");
    let w = World::new();
    let out = w.run(&["config", "check", examples.to_str().unwrap()]).ok();
    assert!(out.contains(" OK ("), "{out}");

    // A copy of the examples plus a typo'd field.
    let dir = w.home().join("typo");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&examples).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    std::fs::write(
        dir.join("typo.kdl"),
        "command \"/bin/true\"\nport 1\nworking_dir \"/tmp\"\n",
    )
    .unwrap();
    let err = w.run(&["config", "check", dir.to_str().unwrap()]).fails(3);
    assert!(err.contains("did you mean working-dir"), "{err}");
    assert!(err.contains("typo.kdl:3:1"), "{err}");
    assert!(
        err.starts_with("error: config invalid: 1 error in "),
        "{err}"
    );

    // Default directory: from XDG_CONFIG_HOME, no daemon involved.
    w.add_sleeper("alpha", 100);
    assert_eq!(
        w.run(&["config", "check"]).ok(),
        format!(
            "1 server OK ({})\nsettings OK ({})\n",
            w.config_dir().display(),
            w.config_dir().parent().unwrap().join("xy.kdl").display()
        )
    );
    let v: Value = serde_json::from_str(&w.run(&["config", "check", "--json"]).ok()).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["servers"], serde_json::json!(["alpha"]));
    assert!(w.daemons().is_empty());
}

#[test]
fn config_check_covers_the_daemon_settings_file() {
    let w = World::new();
    w.add_sleeper("alpha", 100);
    let settings = w.config_dir().parent().unwrap().join("xy.kdl");
    std::fs::write(
        &settings,
        "gateway {\n    prot 9000\n}\nfirewall {\n    mode \"pinn\"\n}\n",
    )
    .unwrap();
    let err = w.run(&["config", "check"]).fails(3);
    assert!(err.contains("xy.kdl:2:5"), "{err}");
    assert!(err.contains("did you mean port?"), "{err}");
    assert!(err.contains("xy.kdl:5:10"), "{err}");
    assert!(err.contains("did you mean \"pin\"?"), "{err}");
    assert!(err.starts_with("error: config invalid: 2 errors"), "{err}");
    let v: Value = serde_json::from_str(&w.run(&["config", "check", "--json"]).stdout()).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["line"], 2, "{v}");

    std::fs::write(&settings, "gateway {\n    port 9000\n}\n").unwrap();
    let out = w.run(&["config", "check"]).ok();
    assert!(
        out.ends_with(&format!("settings OK ({})\n", settings.display())),
        "{out}"
    );
    assert!(w.daemons().is_empty());
}

/// A fake daemon on the socket that answers every request with `answer`.
fn fake_daemon(socket: &Path, answer: impl Fn(&Value) -> Option<Value> + Send + 'static) {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            let mut w = conn.try_clone().unwrap();
            for line in BufReader::new(conn).lines() {
                let Ok(line) = line else { break };
                let req: Value = serde_json::from_str(&line).unwrap();
                if let Some(result) = answer(&req) {
                    let reply =
                        serde_json::json!({"jsonrpc": "2.0", "id": req["id"], "result": result});
                    if writeln!(w, "{reply}").is_err() {
                        break;
                    }
                }
            }
        }
    });
}

#[test]
fn version_skew_warns_and_never_kills() {
    let w = World::new();
    let socket = w.socket.display().to_string();
    fake_daemon(&w.socket, move |req| match req["method"].as_str() {
        Some("daemon_status") => Some(serde_json::json!({
            "version": "0.0.1-old", "protocol": 1, "pid": std::process::id(),
            "started_at": "2026-11-30T05:00:00.000Z", "uptime_secs": 5,
            "socket": socket, "config_dir": "/c", "log_dir": "/l", "servers": 0
        })),
        Some("list") => Some(serde_json::json!([])),
        _ => None,
    });
    let r = w.run(&["list"]);
    assert!(
        r.ok().starts_with("No servers yet. Add one:\n"),
        "{}",
        r.stdout()
    );
    assert_eq!(
        r.stderr(),
        format!(
            "warning: xyd is version 0.0.1-old, xyctl is {}; run `xyctl daemon restart`\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn wedged_daemon_is_reported_and_not_killed_unless_xyd() {
    let w = World::new();
    // Accepts connections, never answers.
    fake_daemon(&w.socket, |_| None);
    std::fs::create_dir_all(w.pidfile().parent().unwrap()).unwrap();
    std::fs::write(w.pidfile(), format!("{}\n", std::process::id())).unwrap();

    let err = w.run(&["list"]).fails(2);
    assert!(
        err.starts_with(&format!(
            "error: xyd (pid {}) holds the lock but has not answered for 5s\n",
            std::process::id()
        )),
        "{err}"
    );
    assert!(err.contains("xyctl daemon restart --force"), "{err}");
    // The pid is this test process, not an xyd: --force must refuse.
    let err = w.run(&["daemon", "restart", "--force"]).fails(1);
    assert!(err.contains("is not an xyd; refusing to kill it"), "{err}");
}

/// A daemon of this state directory that listens on another socket (started
/// with another `XY_SOCKET`) is healthy: it is named with its socket at once,
/// not waited on for 5 s and called wedged, and `--force` never kills it.
#[test]
fn a_daemon_on_another_socket_is_named_not_called_wedged() {
    let w = World::new();
    w.run(&["daemon", "start"]).ok();
    let [pid] = w.daemons()[..] else {
        panic!("one daemon expected: {:?}", w.daemons())
    };
    let other = PathBuf::from(format!("{}.other", w.socket.display()));
    for args in [
        &["list"][..],
        &["daemon", "status"],
        &["daemon", "start"],
        &["daemon", "restart", "--force"],
    ] {
        let r = Run(w.cmd(args).env("XY_SOCKET", &other).output().unwrap());
        let err = r.fails(2);
        assert!(
            err.starts_with(&format!(
                "error: xyd (pid {pid}) runs for this state directory ({}) but listens on {}, not on {}\n",
                w.state_home().join("xy").display(),
                w.socket.display(),
                other.display()
            )),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("--socket {}", w.socket.display())),
            "{args:?}: {err}"
        );
    }
    assert_eq!(w.daemons(), [pid], "still the one daemon, untouched");
    assert!(!other.exists());
    w.run(&["list"]).ok();
}

/// `config check` loads the directory as xyd would: a default directory that
/// does not exist yet is a first run (xyd creates it and boots with no
/// servers), so it is valid; a directory named explicitly must exist.
#[test]
fn config_check_of_a_first_run_is_valid_and_of_a_named_missing_dir_is_not() {
    let h = support::Home::new("xyc");
    assert!(!h.config_dir().exists());
    let out = h.run(&["config", "check"]).ok();
    assert!(out.starts_with("0 servers OK ("), "{out}");
    let v: Value = serde_json::from_str(&h.run(&["config", "check", "--json"]).ok()).unwrap();
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["servers"], serde_json::json!([]), "{v}");
    assert!(!h.config_dir().exists(), "a check creates nothing");
    let missing = h.home().join("nope");
    let err = h
        .run(&["config", "check", missing.to_str().unwrap()])
        .fails(3);
    assert!(err.contains("cannot read config directory"), "{err}");
}

#[test]
fn completions_print_a_script() {
    let w = World::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = w.run(&["completions", shell]).ok();
        assert!(out.contains("xyctl"), "{shell}");
        assert!(out.contains("daemon"), "{shell}");
    }
}

#[test]
fn broken_pipe_exits_quietly() {
    let w = World::new();
    // `completions` writes a long script; close the read end at once.
    let mut child = w
        .cmd(&["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn restart_force_kills_a_wedged_xyd() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let w = World::new();
    w.run(&["daemon", "start"]).ok();
    let [old] = w.daemons()[..] else {
        panic!("one daemon expected: {:?}", w.daemons())
    };
    // A stopped process still gets connections queued by the kernel but
    // never answers: a wedged daemon.
    kill(Pid::from_raw(i32::try_from(old).unwrap()), Signal::SIGSTOP).unwrap();

    let err = w.run(&["list"]).fails(2);
    assert!(
        err.starts_with(&format!(
            "error: xyd (pid {old}) holds the lock but has not answered for 5s"
        )),
        "{err}"
    );
    let out = w.run(&["daemon", "restart", "--force"]).ok();
    assert!(out.starts_with("xyd restarted (pid "), "{out}");
    assert!(!out.contains(&format!("(pid {old})")), "{out}");
    let new = w.daemons();
    assert_eq!(new.len(), 1, "{new:?}");
    assert_ne!(new[0], old);
    assert!(
        w.run(&["list"])
            .ok()
            .starts_with("No servers yet. Add one:\n")
    );
}

/// A daemon booting with 20 orphan groups that ignore SIGTERM (left by a
/// SIGKILLed daemon) answers `daemon_status` with its boot phase while it
/// sweeps them, all at once (one grace period, not twenty); a concurrent
/// `xyctl list` waits on that progress instead of calling the daemon wedged,
/// and succeeds once the new servers run. Sequentially the sweep alone would
/// take 20 × 3 s.
#[test]
fn booting_daemon_with_stubborn_orphans_is_never_wedged() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let w = World::new();
    let stubborn = xy_testbins::locate::testbin("xy-test-ignore-term");
    let names: Vec<String> = (0..20).map(|i| format!("s{i:02}")).collect();
    for name in &names {
        let port = w.next_port.fetch_add(1, Ordering::SeqCst);
        w.write_config(
            name,
            &format!(
                "command \"{}\"\nport {port}\nstop {{\n    grace \"3s\"\n}}\n",
                stubborn.display()
            ),
        );
    }
    w.run(&["daemon", "start"]).ok();
    w.wait_all_running(names.len());
    let old_children: Vec<i32> = w
        .call("list", None)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| i32::try_from(e["pid"].as_i64().unwrap()).unwrap())
        .collect();
    let [old] = w.daemons()[..] else {
        panic!("one daemon expected: {:?}", w.daemons())
    };
    kill(Pid::from_raw(i32::try_from(old).unwrap()), Signal::SIGKILL).unwrap();
    wait_for("the old daemon gone", Duration::from_secs(10), || {
        w.daemons().is_empty()
    });
    // Live and not a zombie (stopped orphans are reparented to init, which
    // may reap them later than we look).
    let alive = |p: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|s| s != "Z")
    };
    assert!(old_children.iter().all(|p| alive(*p)), "orphans outlive it");

    // `list` spawns the new daemon and must wait out its sweep.
    let began = Instant::now();
    let lister = w
        .cmd(&["list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Meanwhile the socket answers with the boot phase.
    let boot = {
        let deadline = xy_testbins::wait::deadline(Duration::from_secs(30));
        loop {
            assert!(Instant::now() < deadline, "never saw the boot phase");
            let status = xy_core::client::Client::connect(
                &w.socket,
                xy_testbins::wait::scaled(Duration::from_secs(5)),
            )
            .and_then(|mut c| {
                c.call::<(), Value>(
                    "daemon_status",
                    None,
                    xy_testbins::wait::scaled(Duration::from_secs(5)),
                )
            });
            if let Ok(s) = status
                && s["boot"]["orphans"] == 20
            {
                break s["boot"].clone();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(boot["phase"], "sweeping_orphans", "{boot}");
    assert_eq!(boot["grace_secs"], 3, "{boot}");

    let out = Run(lister.wait_with_output().unwrap());
    let table = out.ok();
    let took = began.elapsed();
    for name in &names {
        assert!(table.contains(&format!("\n{name} ")), "{name} in:\n{table}");
    }
    let err = out.stderr();
    assert!(!err.contains("has not answered"), "{err}");
    assert!(err.contains("orphaned server process group"), "{err}");
    assert!(
        old_children.iter().all(|p| !alive(*p)),
        "every orphan stopped"
    );
    assert!(
        took < Duration::from_secs(45),
        "the sweep stops the groups in parallel (took {took:?})"
    );
    // No server started before the sweep was over.
    let status = w.call("daemon_status", None);
    assert!(status.get("boot").is_none(), "{status}");
    let log = std::fs::read_to_string(w.state_home().join("xy/logs/daemon.log")).unwrap();
    let last_swept = log.rfind("stopped an orphaned server").unwrap();
    let ready = log.rfind("xyd ready").unwrap();
    assert!(last_swept < ready, "sweep before the servers start:\n{log}");
}
