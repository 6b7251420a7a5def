//! `reload` (and SIGHUP): added / removed / changed / unchanged with real
//! pids, and the two rejections that keep the old config running.

use serde_json::json;

use crate::helper::*;

#[test]
fn reload_applies_the_difference_and_keeps_unchanged_pids() {
    let d = TestDaemon::start(&[
        ("keep", sleep_config(port(1), 500)),
        ("change", sleep_config(port(2), 500)),
        ("drop", sleep_config(port(3), 500)),
    ]);
    let keep = d.running_pid("keep");
    let change = d.running_pid("change");
    let dropped = d.running_pid("drop");

    // A comment-only edit is not a change.
    d.env.write_config(
        "keep",
        &format!("// edited\n{}", sleep_config(port(1), 500)),
    );
    d.env.write_config("change", &sleep_config(port(2), 400));
    d.env.remove_config("drop");
    d.env.write_config("new", &sleep_config(port(4), 500));

    let r = d.result("reload", None);
    assert_eq!(
        r,
        json!({"added": ["new"], "removed": ["drop"], "changed": ["change"], "unchanged": ["keep"]})
    );
    assert_eq!(d.running_pid("keep"), keep, "unchanged keeps its pid");
    let change2 = d.running_pid("change");
    assert_ne!(change2, change);
    wait_for("old pids gone", DEADLINE, || {
        !pid_alive(change) && !pid_alive(dropped)
    });
    d.running_pid("new");
    let names: Vec<String> = d
        .result("list", None)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["change", "keep", "new"]);
    assert_eq!(d.result("daemon_status", None)["servers"], 3);

    // Nothing changed: everything unchanged.
    let r = d.result("reload", None);
    assert_eq!(r["unchanged"], json!(["change", "keep", "new"]));
    assert_eq!(d.running_pid("keep"), keep);
}

#[test]
fn invalid_config_is_rejected_and_the_old_one_keeps_running() {
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 500))]);
    let a = d.running_pid("a");
    d.env
        .write_config("broken", "command \"/bin/true\"\nprot 8000\n");
    let mut c = d.client();
    let e = c.error("reload", None, -32003);
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("config invalid: ") && msg.ends_with(" errors"),
        "{msg}"
    );
    let diags = e["data"]["diagnostics"].to_string();
    assert!(diags.contains("broken.kdl"), "{e}");
    let rendered = e["data"]["rendered"].as_str().unwrap();
    assert!(
        rendered.contains("broken.kdl") && rendered.contains("prot"),
        "{rendered}"
    );
    assert_eq!(d.running_pid("a"), a, "old config still running");
    assert_eq!(d.result("daemon_status", None)["servers"], 1);

    // Only a duplicate port: -32002.
    d.env.remove_config("broken");
    d.env.write_config("twin", &sleep_config(port(1), 500));
    let e = c.error("reload", None, -32002);
    assert!(
        e["data"]["diagnostics"].to_string().contains("twin.kdl"),
        "{e}"
    );
    assert!(
        e["data"]["rendered"]
            .as_str()
            .unwrap()
            .contains(&port(1).to_string()),
        "{e}"
    );
    assert_eq!(d.running_pid("a"), a);
    assert_eq!(d.result("list", None).as_array().unwrap().len(), 1);
}

#[test]
fn sighup_reloads() {
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 500))]);
    d.env.write_config("b", &sleep_config(port(2), 500));
    signal(d.pid() as i32, libc::SIGHUP);
    wait_for("b added by SIGHUP", DEADLINE, || {
        d.result("list", None).as_array().unwrap().len() == 2
    });
    d.running_pid("b");
}

/// SIGTERM while a SIGHUP reload waits out a stubborn child's grace is
/// honoured at once: the reload is abandoned where it stands (it never
/// reports "config reloaded" nor starts the new config), the shutdown stops
/// every child, and nothing is left running.
#[test]
fn sigterm_during_a_slow_sighup_reload_stops_everything() {
    let stubborn = |grace: &str| {
        format!(
            "command \"{}\"\nport {}\nstop {{\n    grace \"{grace}\"\n}}\n",
            testbin("xy-test-ignore-term").display(),
            port(2)
        )
    };
    let mut d = TestDaemon::start(&[
        ("a", sleep_config(port(1), 500)),
        ("stubborn", stubborn("4s")),
    ]);
    let a = d.running_pid("a");
    let old = d.running_pid("stubborn");
    crate::boot::ignoring_sigterm(&d, "stubborn");
    // Changed: the reload stops the old child first, which takes its 4 s.
    d.env.write_config("stubborn", &stubborn("3s"));
    signal(d.pid() as i32, libc::SIGHUP);
    wait_for("the reload began", DEADLINE, || {
        d.env.daemon_log().contains("SIGHUP: reloading")
    });
    signal(d.pid() as i32, libc::SIGTERM);
    let status = d.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    let log = d.env.daemon_log();
    assert!(
        !log.contains("config reloaded"),
        "the reload ran on:\n{log}"
    );
    for p in [a, old] {
        assert!(!pid_alive(p), "process {p} survived the daemon");
    }
    let left: Vec<_> = std::fs::read_dir(d.env.state_dir().join("run"))
        .map(|dir| dir.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "child records left: {left:?}");
    assert!(!d.env.socket.exists());
}
