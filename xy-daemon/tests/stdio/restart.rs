//! SPEC §18, "sessions outlive restarts" (issue 26), against the real `xyd`:
//! a 2025 session and `xyctl connect` under the Python SDK's stdio client
//! carry on across `xyctl restart`, `kill -9` of the child and a reload of a
//! changed server; after a `stop` and `start` (the sessions did end there)
//! `xyctl connect` opens a new session by itself.
//!
//! The child starts its MCP handshake a moment late (a shell `sleep` before
//! `exec`), so a request sent right after a restart surely arrives while the
//! new child is not ready yet: it must wait for it and succeed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use super::client::{Era, Mcp};
use super::{call, ms_progress, url};
use crate::helper::{
    DEADLINE, TestDaemon, free_port, pid_alive, signal, testbin, wait_for, wait_some,
};

/// The rmcp test server on stdio behind `sh -c 'sleep …; exec …'`, with
/// `extra` (an `env` block to change it for a reload).
fn slow_start_config(port: u16, extra: &str) -> String {
    let bin = testbin("xy-test-mcp");
    format!(
        "command \"/bin/sh\"\nargs \"-c\" \"sleep 0.3; exec \\\"$0\\\" \\\"$@\\\"\" {:?} \"--stdio\" \
         \"--tools\" \"echo,progress,touch\"\ntransport \"stdio\"\nport {port}\n\
         stop {{\n    grace \"2s\"\n}}\nrestart {{\n    backoff-initial \"100ms\"\n}}\n{extra}",
        bin.display().to_string()
    )
}

fn xyctl(d: &TestDaemon, args: &[&str]) -> std::process::Output {
    let out = Command::new(xy_testbins::locate::bin_of("xy-cli", "xyctl"))
        .arg("--no-spawn")
        .args(args)
        .env("XY_SOCKET", &d.env.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "xyctl {args:?}: {out:?}");
    out
}

/// Waits for `name` to run a child other than `old`; returns its pid.
fn new_child(d: &TestDaemon, name: &str, old: i32) -> i32 {
    wait_some("a new child", DEADLINE, || {
        let e = d.entry(name);
        let pid = e["pid"].as_i64().map(|p| p as i32);
        (e["state"] == "running" && pid.is_some_and(|p| p != old)).then(|| pid.unwrap())
    })
}

/// Sends `tools/list` over and over while `action` runs on a thread, and
/// once right after it returned (the new child is still handshaking then):
/// all succeed in the same session, none sees a 404. The one request that
/// may be in the child's hands when the restart begins may fail instead,
/// with `-32603` naming the restart (SPEC §18: requests in flight).
fn requests_throughout(a: &mut Mcp, action: impl FnOnce() + Send) {
    let session = a.session.clone();
    let mut lost = Vec::new();
    std::thread::scope(|s| {
        let h = s.spawn(action);
        while !h.is_finished() {
            let r = a.request("tools/list", json!({}));
            assert_eq!(r.status, 200, "during: {r:?}");
            let resp = r.response();
            if resp.get("result").is_none() {
                assert_eq!(resp["error"]["code"], -32603, "during: {r:?}");
                let m = resp["error"]["message"].as_str().unwrap_or_default();
                assert!(m.contains("restart"), "during: {r:?}");
                lost.push(resp.clone());
            }
        }
        h.join().unwrap();
    });
    assert!(
        lost.len() <= 1,
        "more than the one in flight failed: {lost:?}"
    );
    requests_after(a);
    assert_eq!(a.session, session);
}

/// Requests sent right after a restart began (the new child is not ready
/// yet): each waits for it and succeeds.
fn requests_after(a: &mut Mcp) {
    for _ in 0..3 {
        let r = a.request("tools/list", json!({}));
        assert_eq!(r.status, 200, "after: {r:?}");
        assert!(r.response().get("result").is_some(), "after: {r:?}");
    }
}

#[test]
fn a_2025_session_carries_on_across_restart_kill_9_and_a_reload() {
    let port = free_port();
    let d = TestDaemon::start(&[("rs", slow_start_config(port, ""))]);
    let pid = d.running_pid("rs");
    let mut a = Mcp::connected(&url(port), Era::V2025);
    let listen = a.listen();
    assert!(a.tool_names().contains(&"echo".to_owned()));

    // `xyctl restart`: the call in flight fails naming the restart; the
    // requests around it wait for the new child.
    let long = a.start(
        "tools/call",
        call("progress", ms_progress(true), Some(json!(1))),
    );
    long.expect("notifications/progress");
    requests_throughout(&mut a, || {
        xyctl(&d, &["restart", "rs"]);
    });
    let resp = long.response();
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("restart")),
        "{resp}"
    );
    let pid = new_child(&d, "rs", pid);
    assert_eq!(d.entry("rs")["restart_count"], 1);

    // `kill -9` of the child: what is sent after it died waits and
    // succeeds. (Sent right as `kill` returns, a request may still be read
    // by the dying child: that one is in flight, and gets -32603.)
    let session = a.session.clone();
    signal(pid, libc::SIGKILL);
    wait_for("the killed child is dead", DEADLINE, || !pid_alive(pid));
    requests_after(&mut a);
    assert_eq!(a.session, session);
    let pid = new_child(&d, "rs", pid);

    // A reload that changes the child's environment restarts it in place.
    d.env.write_config(
        "rs",
        &slow_start_config(port, "env {\n    CHANGED \"1\"\n}\n"),
    );
    requests_throughout(&mut a, || {
        let out = xyctl(&d, &["reload"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains("changed    rs"), "{text}");
    });
    let pid = new_child(&d, "rs", pid);
    // And one that changes its args.
    let args_changed = slow_start_config(port, "env {\n    CHANGED \"1\"\n}\n")
        .replace("echo,progress,touch", "echo,progress,touch,extra");
    d.env.write_config("rs", &args_changed);
    requests_throughout(&mut a, || {
        xyctl(&d, &["reload"]);
    });
    new_child(&d, "rs", pid);
    // A tool added after approval waits for the user (SPEC §20).
    wait_some("extra held back", DEADLINE, || {
        let r = d.result("tools", Some(json!({"name": "rs"})));
        r["current"]["tools"]
            .as_array()?
            .iter()
            .any(|t| t["name"] == "extra" && t["state"] == "pending")
            .then_some(())
    });
    assert!(!a.tool_names().contains(&"extra".to_owned()));
    d.result(
        "tools_approve",
        Some(json!({"name": "rs", "tools": ["extra"]})),
    );
    assert!(a.tool_names().contains(&"extra".to_owned()));

    // The session's GET stream stayed open throughout.
    listen.drain();
    a.result("tools/call", call("touch", json!({}), None));
    listen.expect("notifications/tools/list_changed");
    assert!(!pid_alive(pid));

    // Only a change of port or path ends the sessions: the old endpoint
    // is gone, and the new one does not know the session (404).
    let moved = free_port();
    d.env.write_config(
        "rs",
        &args_changed.replace(&format!("port {port}"), &format!("port {moved}")),
    );
    xyctl(&d, &["reload"]);
    listen.until_end();
    a.url = url(moved);
    let r = a.request("tools/list", json!({}));
    assert_eq!(r.status, 404, "{r:?}");
}

/// `xyctl connect` under the official Python SDK's stdio client.
struct SdkClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl SdkClient {
    fn start(sdk: &interop::PythonSdk, d: &TestDaemon, name: &str, mode: &str) -> SdkClient {
        let xyctl = xy_testbins::locate::bin_of("xy-cli", "xyctl")
            .display()
            .to_string();
        let (python, args) = sdk.steps_command(
            mode,
            &[xyctl, "--no-spawn".into(), "connect".into(), name.into()],
        );
        let mut child = Command::new(python)
            .args(args)
            .env("XY_SOCKET", &d.env.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = SdkClient {
            child,
            stdin,
            stdout,
        };
        let tools = c.line();
        assert!(
            tools["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|n| n == "echo")),
            "{tools}"
        );
        c
    }

    /// The next line the script prints; its stderr if it died instead.
    #[track_caller]
    fn line(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        if n == 0 {
            let out = self.child.wait_with_output_ref();
            panic!("the SDK client ended: {out}");
        }
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// One `echo` call through xyctl connect; it must succeed.
    #[track_caller]
    fn echo(&mut self, text: &str) {
        writeln!(self.stdin, "{}", json!(["echo", {"text": text}])).unwrap();
        self.stdin.flush().unwrap();
        let r = self.line();
        assert_eq!(r["is_error"], false, "{r}");
        assert!(r["text"].as_str().is_some_and(|t| t.contains(text)), "{r}");
    }
}

trait WaitRef {
    fn wait_with_output_ref(&mut self) -> String;
}

impl WaitRef for Child {
    fn wait_with_output_ref(&mut self) -> String {
        let status = self.wait().map(|s| s.to_string()).unwrap_or_default();
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        format!("{status}: {err}")
    }
}

impl Drop for SdkClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn xyctl_connect_under_the_python_sdk_carries_on_across_restarts_and_a_stop() {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => {
            return skip.announce(
                "xyctl_connect_under_the_python_sdk_carries_on_across_restarts_and_a_stop",
            );
        }
    };
    // `legacy`: the 2025 handshake and a session (what a stop ends);
    // `auto`: the SDK probes the 2026 era first.
    for mode in ["legacy", "auto"] {
        sdk_client_across_restarts(&sdk, mode);
    }
}

fn sdk_client_across_restarts(sdk: &interop::PythonSdk, mode: &str) {
    let port = free_port();
    let d = TestDaemon::start(&[("rs", slow_start_config(port, ""))]);
    let pid = d.running_pid("rs");
    let mut c = SdkClient::start(sdk, &d, "rs", mode);
    c.echo("first");

    xyctl(&d, &["restart", "rs"]);
    c.echo("after restart");
    let pid = new_child(&d, "rs", pid);

    signal(pid, libc::SIGKILL);
    c.echo("after kill -9");
    let pid = new_child(&d, "rs", pid);

    d.env.write_config(
        "rs",
        &slow_start_config(port, "env {\n    CHANGED \"1\"\n}\n"),
    );
    xyctl(&d, &["reload"]);
    c.echo("after reload");
    let pid = new_child(&d, "rs", pid);

    // A stop ends the sessions (404 afterwards): the relay opens a new one
    // by itself, and the SDK client never notices.
    xyctl(&d, &["stop", "rs"]);
    xyctl(&d, &["start", "rs"]);
    new_child(&d, "rs", pid);
    c.echo("after stop and start");
    c.echo("and again");
}
