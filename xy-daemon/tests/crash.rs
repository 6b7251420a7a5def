//! Crash safety (issue 6, SPEC §7): a SIGKILLed daemon's children are swept
//! at the next boot before any server starts, and a record whose pid now
//! belongs to an unrelated process never gets that process signalled.
// The figures and skips are reported on stderr (`--no-capture`).
#![allow(clippy::print_stderr)]

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::helper::*;

#[test]
fn killed_daemon_orphans_holding_a_port_are_swept_before_new_children_bind() {
    let p = free_port();
    let mut d = TestDaemon::start(&[("web", mcp_config(p)), ("tick", sleep_config(port(1), 200))]);
    let old_web = d.running_pid("web");
    let old_tick = d.running_pid("tick");
    wait_for("the first child listens", DEADLINE, || port_answers(p));
    let record = d.env.state_dir().join("run/web.json");
    assert!(record.exists(), "a run record is written at spawn");

    // The crash: no shutdown path runs, the children keep their port.
    signal(d.pid() as i32, libc::SIGKILL);
    d.wait_exit();
    assert!(pid_alive(old_web) && pid_alive(old_tick));
    assert!(port_answers(p), "the orphan still holds the port");

    let env = d.take_env();
    let d2 = TestDaemon::start_in(env);
    assert!(!pid_alive(old_web), "orphan {old_web} survived the sweep");
    assert!(!pid_alive(old_tick), "orphan {old_tick} survived the sweep");
    let new_web = d2.running_pid("web");
    assert_ne!(new_web, old_web);
    assert_ne!(d2.running_pid("tick"), old_tick);
    wait_for("the new child listens on the same port", DEADLINE, || {
        port_answers(p)
    });
    // Had the orphan still held the port, the new child would have failed
    // to bind (exit 1) and been restarted at least once.
    let e = d2.entry("web");
    assert_eq!(e["restart_count"], 0, "new child never failed to bind: {e}");
    assert_eq!(e["pid"], new_web);
    let mut c = d2.client();
    let id = c.request("logs", Some(json!({"name": "web"})));
    let mut saw_bind = false;
    loop {
        let v = c.recv();
        if v["id"] == id {
            continue;
        }
        if v["method"] == "log_end" {
            break;
        }
        saw_bind |= v["params"]["line"]
            .as_str()
            .is_some_and(|l| l.contains(&format!("listening on 127.0.0.1:{p}")));
    }
    assert!(saw_bind, "the new child bound port {p}");
    let log = d2.env.daemon_log();
    let sweep_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("orphan") && l.contains(&old_web.to_string()))
        .collect();
    assert!(!sweep_lines.is_empty(), "sweep of {old_web} logged: {log}");
    eprintln!("sweep logged: {}", sweep_lines[0]);
}

/// Start time (field 22 of `/proc/<pid>/stat`) of a live process.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit(')').next().unwrap();
    // Fields after `comm` start at field 3 (state); 22 is the 20th of these.
    after.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn a_record_whose_pid_was_reused_is_dropped_without_a_signal() {
    let env = Env::new();
    env.write_config("a", &sleep_config(port(1), 500));
    // An unrelated live process in its own group, standing in for a
    // process that got a dead child's pid after a reboot or pid wrap.
    let mut bystander = Command::new("sleep")
        .arg("60")
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sleep");
    let pid = bystander.id();
    let real = start_time(pid);
    let run = env.state_dir().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let records = [
        (
            "reused",
            json!({"pid": pid, "pgid": pid, "start_time": real + 4242, "command": "/usr/bin/sleep"}),
        ),
        (
            "unknown-start",
            json!({"pid": pid, "pgid": pid, "start_time": null, "command": "/usr/bin/sleep"}),
        ),
        ("garbage", json!({"pid": "x"})),
    ];
    for (name, rec) in &records {
        std::fs::write(run.join(format!("{name}.json")), rec.to_string()).unwrap();
    }
    std::fs::write(run.join("torn.json"), "{\"pid\": 12").unwrap();

    let d = TestDaemon::start_in(env);
    d.running_pid("a");
    let still_there = bystander.try_wait().unwrap().is_none() && pid_alive(pid as i32);
    for (name, _) in &records {
        assert!(
            !run.join(format!("{name}.json")).exists(),
            "stale record {name} removed"
        );
    }
    assert!(!run.join("torn.json").exists(), "torn record removed");
    let log = d.env.daemon_log();
    let _ = bystander.kill();
    let status = bystander.wait().unwrap();
    assert!(
        still_there,
        "the unrelated process {pid} was signalled: {status}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains("orphan") && l.contains(&pid.to_string())),
        "no sweep of {pid} logged: {log}"
    );
}
