//! SPEC §19 against the real `xyd`: tasks pass through the bridge, an
//! open task keeps an on-demand child from idling out, and a task lost
//! with its child's process is reported failed, with the reason. The
//! child is `xy-test-stdio-raw` (its `task` tool, `tasks/get`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Era, Mcp};
use super::{stdio_config, url};
use crate::helper::{DEADLINE, TestDaemon, free_port, signal, testbin, wait_for, wait_some};

fn on_demand(port: u16, idle_stop: &str) -> String {
    let extra = format!("on-demand {{\n    idle-stop \"{idle_stop}\"\n}}\n");
    stdio_config(&testbin("xy-test-stdio-raw"), &[], port, &extra)
}

fn task_id(created: &Value) -> String {
    created["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

/// The child stays while its task is open, past `idle-stop`, and idles
/// out once the task is seen to end.
#[test]
fn an_open_task_keeps_an_on_demand_child() {
    let port = free_port();
    let d = TestDaemon::start(&[("tk", on_demand(port, "1s"))]);
    let mut c = Mcp::connected(&url(port), Era::V2025);
    let created = c.result(
        "tools/call",
        json!({"name": "task", "arguments": {"ms": 3000}}),
    );
    let id = task_id(&created);
    let pid = d.running_pid("tk");
    // Three idle-stops with nothing in flight but the task: still running.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let e = d.entry("tk");
        assert_eq!(e["state"], "running", "idled out with a task open: {e}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The task completes; once a client sees it, the child may idle out.
    wait_for("the task completed", DEADLINE, || {
        c.result("tasks/get", json!({"taskId": id}))["status"] == "completed"
    });
    wait_some("tk idle", DEADLINE, || {
        (d.entry("tk")["state"] == "idle").then_some(())
    });
    assert!(d.entry("tk")["pid"].is_null(), "pid {pid} stopped");
}

/// A task open when the child is killed is reported failed, naming the
/// restart, to `tasks/get` and to the session's GET stream; the new child
/// serves new tasks.
#[test]
fn a_task_lost_with_its_child_is_reported_failed_with_the_reason() {
    let port = free_port();
    let d = TestDaemon::start(&[("tl", on_demand(port, "10m"))]);
    let mut c = Mcp::connected(&url(port), Era::V2025);
    let listen = c.listen();
    let created = c.result(
        "tools/call",
        json!({"name": "task", "arguments": {"ms": 600000}}),
    );
    let id = task_id(&created);
    assert_eq!(
        c.result("tasks/get", json!({"taskId": id}))["status"],
        "working"
    );
    let pid = d.running_pid("tl");
    signal(pid, libc::SIGKILL);
    let news = listen.expect("notifications/tasks/status");
    assert_eq!(news["params"]["taskId"], json!(id), "{news}");
    assert_eq!(news["params"]["status"], "failed", "{news}");
    wait_some("a new child", DEADLINE, || {
        let e = d.entry("tl");
        (e["state"] == "running" && e["pid"].as_i64() != Some(i64::from(pid))).then_some(())
    });
    let got = c.result("tasks/get", json!({"taskId": id}));
    assert_eq!(got["status"], "failed", "{got}");
    let why = got["statusMessage"].as_str().unwrap_or("");
    assert!(why.contains("restarted") && why.contains("lost"), "{got}");
    assert_eq!(got["error"]["code"], -32603, "{got}");
    // A 2026 client asking gets the same, as a 2026 task result.
    let mut n = Mcp::connected(&url(port), Era::V2026);
    let got = n.result("tasks/get", json!({"taskId": id}));
    assert_eq!(got["status"], "failed", "{got}");
    assert_eq!(got["resultType"], "task", "{got}");
    // The new child's own tasks pass through.
    let created = c.result(
        "tools/call",
        json!({"name": "task", "arguments": {"ms": 600000}}),
    );
    let fresh = task_id(&created);
    let got = c.result("tasks/cancel", json!({"taskId": fresh}));
    assert_eq!(got["status"], "cancelled", "{got}");
}
