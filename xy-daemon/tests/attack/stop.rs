//! Stop means stop (SPEC §24): a server whose child daemonises — a double
//! fork whose middle process calls `setsid` — leaves no process behind after
//! `xyctl stop`, `restart`, a reload that removes it, a crash of its root,
//! `daemon stop`, or a `kill -9` of xyd followed by a new xyd. Before, the
//! process-group kill missed the daemon and it ran on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use xy_testbins::wait::{wait_for, wait_some};

use crate::helper::*;

/// How long a SIGTERM-ignoring daemon may take to go: the grace below, the
/// SIGKILL, the walk.
const GONE: Duration = Duration::from_secs(10);

/// Kills the daemons a failing test leaves (they are in no group a
/// harness kill reaches).
struct Leftovers(Vec<i32>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for p in &self.0 {
            if pid_alive(*p) {
                signal(*p, libc::SIGKILL);
            }
        }
    }
}

/// A server whose child daemonises a grandchild that writes its pid to
/// `pidfile` and ignores SIGTERM; `extra` adds arguments (`"--flag" "value"`).
fn daemonising(port: u16, pidfile: &Path, extra: &str) -> String {
    format!(
        "command \"{}\"\nargs \"--daemonise\" \"{}\"{extra}\nport {port}\nstop {{\n    grace \"300ms\"\n}}\n",
        testbin("xy-test-fork").display(),
        pidfile.display(),
    )
}

/// The daemon's pid once it wrote it (and, for a restart, once it is not
/// `not`).
fn daemon_pid(pidfile: &Path, not: Option<i32>) -> i32 {
    wait_some("the daemonised grandchild's pid", DEADLINE, || {
        let pid = std::fs::read_to_string(pidfile)
            .ok()?
            .trim()
            .parse::<i32>()
            .ok()?;
        (Some(pid) != not && pid_alive(pid)).then_some(pid)
    })
}

/// The daemon really escaped: another session than the root's, and not
/// the root's group.
fn assert_escaped(daemon: i32, root: i32) {
    let fields = |pid: i32| -> Vec<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .skip(2)
            .take(2)
            .map(|f| f.parse().unwrap())
            .collect()
    };
    let (d, r) = (fields(daemon), fields(root));
    assert_ne!(d[1], r[1], "the grandchild left the root's session");
    assert_ne!(d[0], root, "the grandchild left the root's group");
}

#[track_caller]
fn assert_gone(pid: i32, after: &str) {
    wait_for(
        &format!("the daemonised grandchild {pid} to be gone after {after}"),
        GONE,
        || !pid_alive(pid),
    );
}

fn setup(extra: &str) -> (TestDaemon, PathBuf) {
    let env = Env::new();
    let pidfile = env.root.path().join("daemon.pid");
    env.write_config("d", &daemonising(port(1), &pidfile, extra));
    (TestDaemon::start_in(env), pidfile)
}

#[test]
fn stop_ends_a_daemonised_grandchild() {
    let (d, pidfile) = setup("");
    let root = d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon]);
    assert_escaped(daemon, root);
    d.result("stop", Some(json!({"names": ["d"]})));
    assert_gone(daemon, "xyctl stop");
    assert!(!pid_alive(root));
    assert_eq!(d.entry("d")["state"], "stopped");
}

#[test]
fn restart_ends_the_previous_runs_daemon() {
    let (d, pidfile) = setup("");
    let root = d.running_pid("d");
    let first = daemon_pid(&pidfile, None);
    let mut left = Leftovers(vec![first]);
    d.result("restart", Some(json!({"names": ["d"]})));
    let second = daemon_pid(&pidfile, Some(first));
    left.0.push(second);
    assert_gone(first, "xyctl restart");
    assert!(!pid_alive(root));
    assert!(pid_alive(second), "the new run's daemon lives");
}

/// The root exits by itself (a crash): its daemon, adopted by xyd, goes
/// before the next run starts.
#[test]
fn a_root_that_exits_takes_its_daemon_along() {
    let (d, pidfile) = setup(" \"--parent-exit-ms\" \"300\"");
    let root = d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon]);
    wait_for("the root to exit", GONE, || !pid_alive(root));
    assert_gone(daemon, "its root exited");
}

#[test]
fn a_reload_that_removes_the_server_ends_its_daemon() {
    let (d, pidfile) = setup("");
    d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon]);
    d.env.remove_config("d");
    d.result("reload", None);
    assert_gone(daemon, "a reload that removed the server");
}

#[test]
fn daemon_stop_ends_a_daemonised_grandchild() {
    let (mut d, pidfile) = setup("");
    let root = d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon]);
    let status = d.terminate();
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    // xyd exits only after its children are gone: no polling needed.
    assert!(!pid_alive(daemon), "the daemon outlived xyd");
    assert!(!pid_alive(root));
}

#[test]
fn a_new_xyd_sweeps_the_daemon_a_killed_xyd_left() {
    let (mut d, pidfile) = setup("");
    let root = d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon, root]);
    signal(d.pid() as i32, libc::SIGKILL);
    d.wait_exit();
    assert!(pid_alive(daemon), "the daemon outlives a killed xyd");
    let env = d.take_env();
    let _ = std::fs::remove_file(&pidfile);
    let d2 = TestDaemon::start_in(env);
    d2.running_pid("d");
    let fresh = daemon_pid(&pidfile, Some(daemon));
    let _fresh = Leftovers(vec![fresh]);
    // The sweep runs before any server starts.
    assert!(
        !pid_alive(daemon),
        "the old daemon survived the sweep: {:?}\n{}",
        std::fs::read_to_string(format!("/proc/{daemon}/stat")),
        d2.env.daemon_log()
    );
    assert!(!pid_alive(root));
}

/// The root ends too after the crash (a stdio server ends at the EOF of its
/// stdin): the daemon, reparented to PID 1, is found through the record
/// that names it.
#[test]
fn a_new_xyd_sweeps_a_daemon_whose_root_ended_with_the_killed_xyd() {
    let (mut d, pidfile) = setup("");
    let root = d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let _left = Leftovers(vec![daemon, root]);
    let record = d.env.state_dir().join("run/d.json");
    wait_for("the record to name the daemon", DEADLINE, || {
        std::fs::read_to_string(&record).is_ok_and(|r| r.contains(&format!("[{daemon},")))
    });
    signal(d.pid() as i32, libc::SIGKILL);
    d.wait_exit();
    signal(root, libc::SIGKILL);
    wait_for("the root to end", DEADLINE, || !pid_alive(root));
    assert!(pid_alive(daemon), "the daemon outlives xyd and its root");
    let env = d.take_env();
    let _ = std::fs::remove_file(&pidfile);
    let d2 = TestDaemon::start_in(env);
    d2.running_pid("d");
    let fresh = daemon_pid(&pidfile, Some(daemon));
    let _fresh = Leftovers(vec![fresh]);
    assert!(
        !pid_alive(daemon),
        "the old daemon survived the sweep\n{}",
        d2.env.daemon_log()
    );
}

/// Forks under way during the stop: the daemon keeps forking sleepers
/// (each in a session of its own) while xy stops the tree. The freeze
/// before the SIGKILL leaves none of them running.
#[test]
fn a_tree_that_forks_during_the_stop_leaves_nothing() {
    let (d, pidfile) = setup(" \"--breed\" \"300\"");
    d.running_pid("d");
    let daemon = daemon_pid(&pidfile, None);
    let bred = pidfile.with_extension("breed");
    let listed = || -> Vec<i32> {
        std::fs::read_dir(&bred)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut left = Leftovers(vec![daemon]);
    wait_for("the daemon to be breeding", DEADLINE, || {
        listed().len() >= 20
    });
    d.result("stop", Some(json!({"names": ["d"]})));
    assert_gone(daemon, "xyctl stop");
    let pids = listed();
    left.0.extend(&pids);
    let alive: Vec<i32> = pids.iter().copied().filter(|p| pid_alive(*p)).collect();
    assert!(
        alive.is_empty(),
        "{} of {} bred processes survived the stop: {alive:?}",
        alive.len(),
        pids.len()
    );
    assert!(pids.len() < 300, "the stop came while it was breeding");
}
