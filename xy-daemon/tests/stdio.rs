//! SPEC §13 against the real `xyd`: stdio servers served over streamable
//! HTTP by xy's bridge, with HTTP clients of both eras at once. The child is
//! the rmcp test server in stdio form, then the Python SDK's FastMCP server
//! and `@modelcontextprotocol/server-everything` in stdio mode (installed
//! by `xy_testbins::interop`; skipped loudly only without a registry).

mod apps_sdk;
mod audit;
mod bounds;
mod calls;
pub(crate) mod client;
mod era;
mod firewall;
mod ledger;
mod mrtr;
mod restart;
mod sandboxed;
mod skills;
mod tasks;

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use crate::helper::{
    DEADLINE, TestDaemon, free_port, pid_alive, port_answers, scaled, signal, testbin, wait_for,
    wait_some,
};
use client::{Era, Mcp, Stream};

/// A stdio server's config: `program args…` bridged on `port`.
pub(crate) fn stdio_config(program: &Path, args: &[String], port: u16, extra: &str) -> String {
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "command {:?}\nargs {args}\ntransport \"stdio\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n\
         restart {{\n    backoff-initial \"100ms\"\n}}\n{extra}",
        program.display().to_string()
    )
}

/// The rmcp test server on stdio with the tools these tests use.
fn rmcp_config(port: u16, era: &str, extra: &str) -> String {
    let args: Vec<String> = ["--stdio", "--era", era, "--tools", "echo,progress,touch"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    stdio_config(&testbin("xy-test-mcp"), &args, port, extra)
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// What a test needs to know about one kind of child.
struct Kind {
    /// Tools `tools/list` must show.
    tools: &'static [&'static str],
    /// The tool that reports progress.
    progress: &'static str,
    /// Its arguments: a short run of `steps` notifications, or a long one
    /// whose first notification comes at once and whose answer takes minutes.
    progress_args: fn(long: bool) -> Value,
    steps: usize,
    /// A tool that makes the child send `notifications/tools/list_changed`;
    /// `None` when the child sends one by itself after each handshake.
    touch: Option<&'static str>,
}

const RMCP: Kind = Kind {
    tools: &["echo", "progress", "touch"],
    progress: "progress",
    progress_args: ms_progress,
    steps: 3,
    touch: Some("touch"),
};

const FASTMCP: Kind = Kind {
    tools: &["add", "shout", "progress", "touch"],
    progress: "progress",
    progress_args: ms_progress,
    steps: 3,
    touch: Some("touch"),
};

/// server-everything registers its client-dependent tools after each
/// `notifications/initialized` and announces them with list_changed.
const EVERYTHING: Kind = Kind {
    tools: &["echo", "get-sum", "trigger-long-running-operation"],
    progress: "trigger-long-running-operation",
    progress_args: |long| {
        if long {
            json!({"duration": 300, "steps": 300})
        } else {
            json!({"duration": 0.6, "steps": 3})
        }
    },
    steps: 3,
    touch: None,
};

fn ms_progress(long: bool) -> Value {
    json!({"ms": if long { 300_000 } else { 150 }})
}

fn call(tool: &str, args: Value, token: Option<Value>) -> Value {
    let mut p = json!({"name": tool, "arguments": args});
    if let Some(t) = token {
        p["_meta"] = json!({"progressToken": t});
    }
    p
}

/// Two clients, one per era, with their broadcast streams open.
struct Clients {
    a: Mcp,
    b: Mcp,
    la: Stream,
    lb: Stream,
}

/// Both clients list tools and call the progress tool at the same time;
/// each sees its own progress only (its token restored), and a
/// list_changed reaches both streams.
fn two_clients(url: &str, kind: &Kind) -> Clients {
    let mut a = Mcp::connected(url, Era::V2025);
    let mut b = Mcp::connected(url, Era::V2026);
    let la = a.listen();
    let lb = b.listen();
    for c in [&mut a, &mut b] {
        let names = c.tool_names();
        for t in kind.tools {
            assert!(
                names.iter().any(|n| n == t),
                "{:?} client: {t} missing from {names:?}",
                c.era
            );
        }
    }
    let args = (kind.progress_args)(false);
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| {
            a.request(
                "tools/call",
                call(kind.progress, args.clone(), Some(json!("token-a"))),
            )
        });
        let hb = s.spawn(|| {
            b.request(
                "tools/call",
                call(kind.progress, args.clone(), Some(json!(2026))),
            )
        });
        (ha.join().unwrap(), hb.join().unwrap())
    });
    for (r, token) in [(&ra, json!("token-a")), (&rb, json!(2026))] {
        assert!(r.response().get("result").is_some(), "{r:?}");
        let progress = r.notifications("notifications/progress");
        assert_eq!(progress.len(), kind.steps, "{r:?}");
        for p in progress {
            assert_eq!(p["params"]["progressToken"], token, "{r:?}");
        }
    }
    if let Some(touch) = kind.touch {
        a.result("tools/call", call(touch, json!({}), None));
        la.expect("notifications/tools/list_changed");
        let n = lb.expect("notifications/tools/list_changed");
        // The 2026 stream's notifications name the listen request.
        assert!(
            !n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_null(),
            "{n}"
        );
    }
    Clients { a, b, la, lb }
}

/// `kill -9` of the child: the request in flight fails with -32603 naming
/// the restart; both clients' next requests succeed in their sessions, and
/// the streams stay open (a list_changed still reaches both).
fn survives_kill_9(d: &TestDaemon, name: &str, kind: &Kind, c: &mut Clients) {
    let pid = d.running_pid(name);
    let session = c.a.session.clone();
    // Whatever the first child announced is not what this test waits for.
    c.la.drain();
    c.lb.drain();
    let long = c.a.start(
        "tools/call",
        call(
            kind.progress,
            (kind.progress_args)(true),
            Some(json!("long")),
        ),
    );
    long.expect("notifications/progress");
    signal(pid, libc::SIGKILL);
    let resp = long.response();
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("restart"), "{message}");
    wait_some("a new child", DEADLINE, || {
        let e = d.entry(name);
        (e["state"] == "running" && e["pid"].as_i64().is_some_and(|p| p != i64::from(pid)))
            .then_some(())
    });
    assert!(!pid_alive(pid));
    for m in [&mut c.a, &mut c.b] {
        let names = m.tool_names();
        assert!(names.iter().any(|n| n == kind.progress), "{names:?}");
    }
    assert_eq!(c.a.session, session, "the 2025 session is the same");
    if let Some(touch) = kind.touch {
        c.b.result("tools/call", call(touch, json!({}), None));
    }
    c.la.expect("notifications/tools/list_changed");
    c.lb.expect("notifications/tools/list_changed");
}

#[test]
fn rmcp_stdio_server_two_clients_of_both_eras_and_kill_9() {
    let port = free_port();
    let d = TestDaemon::start(&[("rm", rmcp_config(port, "both", ""))]);
    let e = d.entry("rm");
    assert_eq!(
        (e["transport"].clone(), e["url"].clone()),
        (json!("stdio"), json!(url(port)))
    );
    d.running_pid("rm");
    let mut c = two_clients(&url(port), &RMCP);
    survives_kill_9(&d, "rm", &RMCP, &mut c);
    // A repeated initialize is answered from the child's handshake, with a
    // new session; DELETE ends one.
    let mut again = Mcp::new(&url(port), Era::V2025);
    let r = again.initialize();
    assert_eq!(r.response()["result"]["serverInfo"]["name"], "xy-test-mcp");
    assert_ne!(again.session, c.a.session);
    assert_eq!(again.delete(), 200);
    let r = again.request("tools/list", json!({}));
    assert_eq!(r.status, 404, "an ended session: {r:?}");
    // The protocol on stdout is not logged; stderr is.
    let log = std::fs::read_to_string(d.env.state_dir().join("logs/rm.log")).unwrap();
    assert!(log.contains("[err] xy-test-mcp serving on stdio"), "{log}");
    assert!(
        !log.contains("jsonrpc"),
        "protocol traffic in the log: {log}"
    );
}

#[test]
fn stop_leaves_no_process_and_closes_every_stream() {
    let port = free_port();
    let d = TestDaemon::start(&[("rm", rmcp_config(port, "both", ""))]);
    let pid = d.running_pid("rm");
    let mut a = Mcp::connected(&url(port), Era::V2025);
    let mut b = Mcp::connected(&url(port), Era::V2026);
    let la = a.listen();
    let lb = b.listen();
    let long = a.start(
        "tools/call",
        call("progress", ms_progress(true), Some(json!(1))),
    );
    long.expect("notifications/progress");
    let xyctl = xy_testbins::locate::bin_of("xy-cli", "xyctl");
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "stop", "rm"])
        .env("XY_SOCKET", &d.env.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let resp = long.response();
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    long.until_end();
    la.until_end();
    let last = lb.until_end();
    // The 2026 listen stream ends with its request's result.
    assert!(
        last.last().is_some_and(|m| m.get("result").is_some()),
        "{last:?}"
    );
    assert!(!pid_alive(pid));
    assert_eq!(d.entry("rm")["state"], "stopped");
    assert!(!port_answers(port), "the endpoint still listens after stop");
}

#[test]
fn on_demand_server_is_idle_until_the_first_request_and_after_idle_stop() {
    let port = free_port();
    let d = TestDaemon::start(&[(
        "od",
        rmcp_config(port, "both", "on-demand {\n    idle-stop \"1s\"\n}\n"),
    )]);
    let e = wait_some("od idle", DEADLINE, || {
        let e = d.entry("od");
        (e["state"] == "idle").then_some(e)
    });
    assert!(e["pid"].is_null(), "{e}");
    assert!(port_answers(port), "an idle server listens");
    assert!(d.entry("od")["pid"].is_null(), "no child before a request");
    // The first request waits for the child it starts.
    let mut b = Mcp::connected(&url(port), Era::V2026);
    assert!(b.tool_names().contains(&"echo".to_owned()));
    let e = d.entry("od");
    assert_eq!(e["state"], "running", "{e}");
    let pid = e["pid"].as_i64().unwrap() as i32;
    // No request for idle-stop: the child stops, the endpoint stays.
    wait_some("od idle again", DEADLINE, || {
        let e = d.entry("od");
        (e["state"] == "idle").then_some(())
    });
    assert!(d.entry("od")["pid"].is_null());
    wait_for("the child gone", DEADLINE, || !pid_alive(pid));
    assert!(port_answers(port));
    // A 2025 client's session start is answered from the ledger (SPEC
    // §26); its first call brings the child back.
    let mut a = Mcp::connected(&url(port), Era::V2025);
    assert!(a.tool_names().contains(&"progress".to_owned()));
    assert_eq!(d.entry("od")["state"], "idle");
    let r = a.result(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(r["content"][0]["text"], "hi", "{r}");
    assert_eq!(d.entry("od")["state"], "running");
    // `stop` stops listening too.
    d.result("stop", Some(json!({"name": "od"})));
    assert_eq!(d.entry("od")["state"], "stopped");
    assert!(!port_answers(port));
}

#[test]
fn the_mcp_probe_works_against_the_bridged_endpoint() {
    let port = free_port();
    let health = "health {\n    mcp \"/mcp\"\n    interval \"100ms\"\n    timeout \"2s\"\n    failures 2\n    start-period \"0s\"\n}\n";
    let d = TestDaemon::start(&[("pr", rmcp_config(port, "both", health))]);
    let s = wait_some("pr healthy and listed", DEADLINE, || {
        let s = d.result("status", Some(json!({"name": "pr"})));
        (s["health"]["state"] == "healthy" && !s["mcp"]["listed_at"].is_null()).then_some(s)
    });
    assert_eq!(s["mcp"]["server_name"], "xy-test-mcp", "{s}");
    assert_eq!(s["mcp"]["tool_count"], 3, "{s}");
    // A probe that keeps probing does not keep restarting the child.
    let pid = d.running_pid("pr");
    let first = s["health"].clone();
    wait_some("more probes", DEADLINE, || {
        let s = d.result("status", Some(json!({"name": "pr"})));
        (s["health"] != first && s["health"]["state"] == "healthy").then_some(())
    });
    assert_eq!(d.running_pid("pr"), pid);
}

/// A wedged stdio child (stopped with SIGSTOP: alive, its pipes open, never
/// answering) is found by the `mcp` probe through the bridge and, with
/// `restart-on-failure`, replaced; clients then reach the new child.
#[test]
fn a_wedged_stdio_child_is_found_by_the_probe_and_restarted() {
    let port = free_port();
    let health = "health {\n    mcp \"/mcp\"\n    interval \"200ms\"\n    timeout \"500ms\"\n    failures 2\n    start-period \"0s\"\n    restart-on-failure #true\n}\n";
    let d = TestDaemon::start(&[("w", rmcp_config(port, "both", health))]);
    wait_some("w healthy", DEADLINE, || {
        let s = d.result("status", Some(json!({"name": "w"})));
        (s["health"]["state"] == "healthy").then_some(())
    });
    let pid = d.running_pid("w");
    // A session opened before the wedge outlives the health restart (SPEC
    // §18), and a request sent to the wedged child (it never reads it)
    // goes to the new child and succeeds.
    let mut before = Mcp::connected(&url(port), Era::V2025);
    signal(pid, libc::SIGSTOP);
    // `kill` returns before every thread has stopped: until then a thread
    // of the child may still read the request below, and a request the
    // child read is lost with it rather than sent again (`Link::detach`).
    wait_for("every thread of the child stopped", DEADLINE, || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .all(|t| {
                std::fs::read_to_string(t.path().join("stat")).is_ok_and(|st| {
                    st.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
                })
            })
    });
    let waiting = std::thread::spawn(move || {
        let names = before.tool_names();
        (before, names)
    });
    let new = wait_some("a new child after the wedge", DEADLINE, || {
        let e = d.entry("w");
        (e["state"] == "running" && e["pid"].as_i64().is_some_and(|p| p != i64::from(pid)))
            .then(|| e["pid"].as_i64().unwrap())
    });
    assert!(!pid_alive(pid), "the wedged child {pid} is still there");
    let log = std::fs::read_to_string(d.env.state_dir().join("logs/daemon.log")).unwrap();
    assert!(log.contains("unhealthy"), "{log}");
    let mut c = Mcp::connected(&url(port), Era::V2025);
    assert!(c.tool_names().contains(&"echo".to_owned()));
    let (mut before, names) = waiting.join().unwrap();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(before.tool_names().contains(&"echo".to_owned()));
    assert_eq!(d.entry("w")["pid"].as_i64(), Some(new));
}

/// A 2026-only child (the rmcp test server in its `2026` mode, which
/// refuses `initialize`) serves 2025 clients too: xy discovers it without
/// ever sending `initialize` (no first-start restart), answers a 2025
/// `initialize` from its `server/discover`, and translates each request of
/// the session (list, call with progress, list_changed on the GET stream,
/// `ping`); a `kill -9` costs neither era its session or stream.
#[test]
fn a_2026_only_child_serves_2025_clients_and_both_survive_kill_9() {
    let port = free_port();
    let d = TestDaemon::start(&[("n", rmcp_config(port, "2026", ""))]);
    d.running_pid("n");
    let mut a = Mcp::new(&url(port), Era::V2025);
    let r = a.initialize();
    let init = &r.response()["result"];
    assert_eq!(init["protocolVersion"], client::V2025, "{r:?}");
    assert_eq!(init["serverInfo"]["name"], "xy-test-mcp", "{r:?}");
    assert!(init["capabilities"]["tools"].is_object(), "{r:?}");
    assert_eq!(a.result("ping", json!({})), json!({}));
    assert_eq!(
        a.result("logging/setLevel", json!({"level": "info"})),
        json!({})
    );
    let mut c = two_clients(&url(port), &RMCP);
    assert_eq!(d.entry("n")["restart_count"], 0, "no first-start restart");
    survives_kill_9(&d, "n", &RMCP, &mut c);
    assert_eq!(d.entry("n")["restart_count"], 1, "only the kill");
}

/// One raw HTTP/1.1 request; returns the status code.
fn raw_status(port: u16, head: &str, body: &[u8]) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(scaled(DEADLINE))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before reading the whole body.
    let _ = s.write_all(body);
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !text.windows(2).any(|w| w == b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&text);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {line:?}"))
}

#[test]
fn host_origin_and_size_checks() {
    let port = free_port();
    let d = TestDaemon::start(&[("hc", rmcp_config(port, "both", ""))]);
    d.running_pid("hc");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let head = |host: &str, origin: Option<&str>, len: usize| {
        let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/list\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    };
    let ok = format!("127.0.0.1:{port}");
    let b = body.as_bytes();
    assert_eq!(raw_status(port, &head(&ok, None, b.len()), b), 200);
    assert_eq!(
        raw_status(
            port,
            &head(
                &format!("localhost:{port}"),
                Some("http://localhost:3000"),
                b.len()
            ),
            b
        ),
        200
    );
    assert_eq!(
        raw_status(
            port,
            &head(&format!("evil.example:{port}"), None, b.len()),
            b
        ),
        403,
        "DNS rebinding: a foreign Host"
    );
    assert_eq!(
        raw_status(port, &head(&ok, Some("http://evil.example"), b.len()), b),
        403,
        "a foreign Origin"
    );
    let big = vec![b' '; 4 * 1024 * 1024 + 1];
    assert_eq!(raw_status(port, &head(&ok, None, big.len()), &big), 413);
    // Just under the cap goes through to the child and back.
    let text = "x".repeat(3 * 1024 * 1024);
    let mut c = Mcp::connected(&url(port), Era::V2026);
    let r = c.result("tools/call", call("echo", json!({"text": text}), None));
    assert_eq!(
        r["content"][0]["text"].as_str().map(str::len),
        Some(text.len())
    );
}

#[test]
fn python_sdk_fastmcp_stdio_server_two_clients_and_kill_9() {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => {
            return skip.announce("python_sdk_fastmcp_stdio_server_two_clients_and_kill_9");
        }
    };
    let (python, args) = sdk.fastmcp_stdio_command();
    let port = free_port();
    let d = TestDaemon::start(&[("py", stdio_config(&python, &args, port, ""))]);
    d.running_pid("py");
    let mut c = two_clients(&url(port), &FASTMCP);
    survives_kill_9(&d, "py", &FASTMCP, &mut c);
}

#[test]
fn server_everything_stdio_two_clients_and_kill_9() {
    let se = match interop::server_everything() {
        Interop::Ready(se) => se,
        Interop::Skip(skip) => {
            return skip.announce("server_everything_stdio_two_clients_and_kill_9");
        }
    };
    let (node, args) = se.stdio_command();
    let port = free_port();
    let d = TestDaemon::start(&[("ev", stdio_config(&node, &args, port, ""))]);
    d.running_pid("ev");
    let mut c = two_clients(&url(port), &EVERYTHING);
    survives_kill_9(&d, "ev", &EVERYTHING, &mut c);
}
