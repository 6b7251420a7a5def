//! SPEC §20's gateway against the real `xyd`: one port from `xy.kdl`
//! serving every server at `/<name>/mcp`; a stdio server through its bridge
//! and an HTTP server through the reverse proxy, each in both MCP eras
//! (2025 sessions with SSE and GET streams, 2026 stateless requests); the
//! errors for unknown and stopped servers; a taken port that leaves the
//! daemon up and is bound once freed; reload moving and turning off the
//! port; another uid refused by the same edge as the bridges' ports.

mod firewall;

use std::io::Write;
use std::net::{TcpListener, TcpStream};

use serde_json::{Value, json};

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, testbin, wait_for, wait_some};
use crate::stdio::client::{Era, Mcp};

/// `xy.kdl` with the gateway on `port`.
fn settings(port: u16) -> String {
    format!("gateway {{\n    port {port}\n}}\n")
}

/// The rmcp test server on stdio, both eras.
fn stdio_config(port: u16) -> String {
    format!(
        "command {:?}\nargs \"--stdio\" \"--tools\" \"echo,progress,touch\"\ntransport \"stdio\"\nport {port}\n\
         stop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-mcp").display().to_string()
    )
}

/// The rmcp test server over HTTP on its own `port`: both eras, 2025
/// sessions answered as SSE.
fn http_config(port: u16) -> String {
    format!(
        "command {:?}\nargs \"--port\" \"{port}\" \"--tools\" \"echo,progress,touch\"\nport {port}\n\
         stop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-mcp").display().to_string()
    )
}

fn gateway_url(gw: u16, name: &str) -> String {
    format!("http://127.0.0.1:{gw}/{name}/mcp")
}

/// A daemon whose gateway is on `gw`, serving `servers`.
fn start(gw: u16, servers: &[(&str, String)]) -> TestDaemon {
    let env = Env::new();
    env.write_settings(&settings(gw));
    for (name, kdl) in servers {
        env.write_config(name, kdl);
    }
    TestDaemon::start_in(env)
}

/// Waits until `url` answers a 2026 `tools/list` (the gateway bound, the
/// child up).
fn wait_served(url: &str) {
    wait_for("the gateway serves the server", DEADLINE, || {
        let mut c = Mcp::new(url, Era::V2026);
        // A fresh connection each time: a refused connect must not panic.
        TcpStream::connect(url.trim_start_matches("http://").split('/').next().unwrap()).is_ok()
            && c.request("tools/list", json!({})).status == 200
    });
}

/// The status of a 2025 `tools/list` POST with `headers` (the body, which
/// may not be JSON, unread).
fn raw_status(url: &str, headers: &[(&'static str, String)]) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    req.send(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}"#)
        .expect("POST")
        .status()
        .as_u16()
}

fn names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Both eras against one server URL: listing, a call, a streamed call with
/// its progress, a 2025 session's GET stream and its end.
fn both_eras(url: &str) {
    // 2025: a session, SSE answers, the GET stream.
    let mut old = Mcp::connected(url, Era::V2025);
    assert!(
        old.session.is_some(),
        "no Mcp-Session-Id through the gateway"
    );
    let tools = old.result("tools/list", json!({}));
    assert_eq!(names(&tools), ["echo", "progress", "touch"]);
    let echoed = old.result(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi 2025"}}),
    );
    assert_eq!(echoed["content"][0]["text"], "hi 2025", "{echoed}");
    let progress = old.start(
        "tools/call",
        json!({"name": "progress", "arguments": {"ms": 10}, "_meta": {"progressToken": "p1"}}),
    );
    assert_eq!(progress.status, 200);
    progress.expect("notifications/progress");
    assert!(progress.response()["result"].is_object());
    let stream = old.listen();
    old.result("tools/call", json!({"name": "touch", "arguments": {}}));
    stream.expect("notifications/tools/list_changed");
    // xy's bridge answers `200`, rmcp's HTTP server `202`.
    let deleted = old.delete();
    assert!(
        (200..300).contains(&deleted),
        "DELETE of the session: {deleted}"
    );
    let after = raw_status(url, &old.session_headers());
    assert_eq!(after, 404, "the ended session still answered");

    // 2026: stateless, the same tools, a streamed call.
    let mut new = Mcp::new(url, Era::V2026);
    let tools = new.result("tools/list", json!({}));
    assert_eq!(names(&tools), ["echo", "progress", "touch"]);
    let echoed = new.result(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi 2026"}}),
    );
    assert_eq!(echoed["content"][0]["text"], "hi 2026", "{echoed}");
    let progress = new.start(
        "tools/call",
        json!({"name": "progress", "arguments": {"ms": 10}, "_meta": {"progressToken": "p2"}}),
    );
    progress.expect("notifications/progress");
    assert!(progress.response()["result"].is_object());
}

#[test]
fn a_stdio_server_through_the_gateway_in_both_eras() {
    let gw = free_port();
    let own = free_port();
    let d = start(gw, &[("bridged", stdio_config(own))]);
    let url = gateway_url(gw, "bridged");
    wait_served(&url);
    both_eras(&url);

    // Its own port keeps working beside the gateway.
    let mut direct = Mcp::new(&format!("http://127.0.0.1:{own}/mcp"), Era::V2026);
    assert_eq!(names(&direct.result("tools/list", json!({}))).len(), 3);

    let entry = d.entry("bridged");
    assert_eq!(entry["gateway_url"], url.as_str(), "{entry}");
    let status = d.result("status", Some(json!({"name": "bridged"})));
    assert_eq!(status["gateway_url"], url.as_str(), "{status}");
    let daemon = d.result("daemon_status", None);
    assert_eq!(
        daemon["gateway"],
        json!({"url": format!("http://127.0.0.1:{gw}/"), "error": null})
    );
}

#[test]
fn an_idle_on_demand_server_is_woken_by_a_gateway_request() {
    let gw = free_port();
    let own = free_port();
    let config = format!(
        "{}on-demand {{\n    idle-stop \"10m\"\n}}\n",
        stdio_config(own)
    );
    let d = start(gw, &[("lazy", config)]);
    wait_for("the server idles", DEADLINE, || {
        d.entry("lazy")["state"] == "idle"
    });
    wait_for("the gateway listens", DEADLINE, || {
        TcpStream::connect(("127.0.0.1", gw)).is_ok()
    });
    let mut c = Mcp::new(&gateway_url(gw, "lazy"), Era::V2026);
    assert_eq!(names(&c.result("tools/list", json!({}))).len(), 3);
    assert_eq!(d.entry("lazy")["state"], "running");
}

#[test]
fn an_http_server_through_the_proxy_in_both_eras() {
    let gw = free_port();
    let own = free_port();
    let d = start(gw, &[("web", http_config(own))]);
    let url = gateway_url(gw, "web");
    wait_served(&url);
    // xy listed the child itself (it speaks 2026: `server/discover`), no
    // health block: the firewall approved what it found first.
    crate::helper::wait_some("xy's listing of the HTTP child", DEADLINE, || {
        let r = d.result("tools", Some(json!({"name": "web"})));
        let tools = r["current"]["tools"].as_array()?.clone();
        (tools.len() == 3 && tools.iter().all(|t| t["state"] == "approved")).then_some(())
    });
    both_eras(&url);

    // The child saw the requests at its own path, GET stream and DELETE
    // included (it logs each HTTP request on stdout).
    let log = d.env.state_dir().join("logs/web.log");
    wait_for("the child's request log", DEADLINE, || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        [
            "POST /mcp initialize",
            "POST /mcp tools/call",
            "GET /mcp",
            "DELETE /mcp",
        ]
        .iter()
        .all(|l| text.contains(l))
    });
    let entry = d.entry("web");
    assert_eq!(entry["gateway_url"], url.as_str(), "{entry}");
    assert_eq!(entry["url"], format!("http://127.0.0.1:{own}/mcp"));
}

#[test]
fn an_unknown_name_is_404_and_a_stopped_server_503_naming_it() {
    let gw = free_port();
    let own = free_port();
    let bridged = free_port();
    let d = start(
        gw,
        &[
            ("web", http_config(own)),
            ("bridged", stdio_config(bridged)),
        ],
    );
    wait_served(&gateway_url(gw, "web"));
    wait_served(&gateway_url(gw, "bridged"));

    let mut nobody = Mcp::new(&gateway_url(gw, "nobody"), Era::V2026);
    let r = nobody.request("tools/list", json!({}));
    assert_eq!(r.status, 404, "{r:?}");
    let message = r.messages[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("no server named nobody"), "{message}");

    let mut odd = Mcp::new(&format!("http://127.0.0.1:{gw}/web/other"), Era::V2026);
    let r = odd.request("tools/list", json!({}));
    assert_eq!(r.status, 404, "{r:?}");

    for name in ["web", "bridged"] {
        d.result("stop", Some(json!({"names": [name]})));
        let mut c = Mcp::new(&gateway_url(gw, name), Era::V2026);
        let r = c.request("tools/list", json!({}));
        assert_eq!(r.status, 503, "{name}: {r:?}");
        let e = &r.messages[0]["error"];
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("server {name} is stopped")),
            "{message}"
        );
        assert_eq!(e["data"], json!({"server": name, "state": "stopped"}));
        d.result("start", Some(json!({"names": [name]})));
        wait_served(&gateway_url(gw, name));
    }
}

#[test]
fn an_http_server_that_does_not_answer_is_502_naming_it() {
    let gw = free_port();
    let own = free_port();
    // Running, but binding only after a long delay: nothing listens yet.
    let config = format!(
        "command {:?}\nargs \"--port\" \"{own}\" \"--bind-delay-ms\" \"60000\"\nport {own}\n\
         stop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-mcp").display().to_string()
    );
    let d = start(gw, &[("late", config)]);
    wait_for("the daemon reports the server", DEADLINE, || {
        d.entry("late")["state"] == "running"
    });
    let url = gateway_url(gw, "late");
    let r = wait_some("the gateway answers", DEADLINE, || {
        TcpStream::connect(("127.0.0.1", gw)).ok()?;
        Some(Mcp::new(&url, Era::V2026).request("tools/list", json!({})))
    });
    assert_eq!(r.status, 502, "{r:?}");
    let e = &r.messages[0]["error"];
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("server late is running"), "{message}");
    assert!(message.contains("cannot be reached"), "{message}");
    assert_eq!(e["data"]["server"], "late");
}

#[test]
fn a_taken_gateway_port_leaves_the_daemon_up_and_is_bound_once_freed() {
    let gw = free_port();
    let holder = TcpListener::bind(("127.0.0.1", gw)).unwrap();
    let own = free_port();
    let d = start(gw, &[("bridged", stdio_config(own))]);

    let status = d.result("daemon_status", None);
    assert_eq!(status["gateway"]["url"], format!("http://127.0.0.1:{gw}/"));
    let error = status["gateway"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(&format!("127.0.0.1:{gw}")), "{status}");
    // Everything else is served: the server on its own port.
    wait_served(&format!("http://127.0.0.1:{own}/mcp"));
    assert!(
        d.env.daemon_log().contains("gateway: cannot listen"),
        "the taken port is not in daemon.log"
    );

    drop(holder);
    wait_for("the gateway binds its freed port", DEADLINE, || {
        d.result("daemon_status", None)["gateway"]["error"].is_null()
    });
    wait_served(&gateway_url(gw, "bridged"));
}

#[test]
fn reload_moves_the_gateway_and_port_0_turns_it_off() {
    let first = free_port();
    let own = free_port();
    let d = start(first, &[("bridged", stdio_config(own))]);
    wait_served(&gateway_url(first, "bridged"));

    let second = free_port();
    d.env.write_settings(&settings(second));
    d.result("reload", None);
    wait_served(&gateway_url(second, "bridged"));
    wait_for("the old gateway port closes", DEADLINE, || {
        TcpStream::connect(("127.0.0.1", first)).is_err()
    });
    assert_eq!(
        d.entry("bridged")["gateway_url"],
        gateway_url(second, "bridged")
    );

    d.env.write_settings("gateway {\n    port 0\n}\n");
    d.result("reload", None);
    wait_for("the gateway closes", DEADLINE, || {
        TcpStream::connect(("127.0.0.1", second)).is_err()
    });
    assert!(d.entry("bridged")["gateway_url"].is_null());
    let status = d.result("daemon_status", None);
    assert!(status.get("gateway").is_none(), "{status}");

    // A mistake in xy.kdl is a rejected reload, with file, line and column.
    d.env
        .write_settings("gateway {\n    port 8399\n}\nfirewall {\n    mode \"strict\"\n}\n");
    let e = d.client().error("reload", None, -32003);
    let diag = &e["data"]["diagnostics"][0];
    assert!(diag["file"].as_str().unwrap().ends_with("xy/xy.kdl"), "{e}");
    assert_eq!(
        (diag["line"].as_u64(), diag["column"].as_u64()),
        (Some(5), Some(10)),
        "{e}"
    );
    assert!(diag["message"].as_str().unwrap().contains("strict"), "{e}");
}

#[test]
fn a_bad_xy_kdl_stops_the_boot_with_exit_3_naming_its_place() {
    let env = Env::new();
    env.write_settings("gateway {\n    prot 9000\n}\n");
    let (status, stderr) = env.run_to_exit(&mut env.command());
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("xy.kdl"), "{stderr}");
    assert!(stderr.contains("did you mean port?"), "{stderr}");
}

#[test]
#[allow(clippy::print_stderr)] // a skip says so
fn another_uid_is_refused_by_the_gateway() {
    if !nix::unistd::getuid().is_root() {
        eprintln!(
            "SKIP another_uid_is_refused_by_the_gateway: needs root to run a client as uid 65534"
        );
        return;
    }
    let gw = free_port();
    let own = free_port();
    let _d = start(gw, &[("bridged", stdio_config(own))]);
    let url = gateway_url(gw, "bridged");
    wait_served(&url);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let request = format!(
        "POST /bridged/mcp HTTP/1.1\r\nHost: 127.0.0.1:{gw}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/list\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let owner = post_as(None, gw, &request);
    assert!(owner.starts_with("HTTP/1.1 200 "), "{owner}");
    let other = post_as(Some(65534), gw, &request);
    assert!(other.starts_with("HTTP/1.1 403 "), "{other}");
    assert!(
        !other.contains("\"tools\""),
        "a tool list reached another uid: {other}"
    );
}

/// What `xy-test-post` (run as `uid`, or as this process) got back.
fn post_as(uid: Option<u32>, port: u16, request: &str) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(testbin("xy-test-post"));
    cmd.args(["--port", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let mut child = cmd.spawn().expect("spawn xy-test-post");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "xy-test-post failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The gateway's route to a bridged stdio server is the bridge's own HTTP
/// handling: a 2026-form request is validated there too (SPEC §19), and
/// the 2025 forms still work through it.
#[test]
fn the_gateway_route_to_a_bridged_server_validates_2026_requests() {
    let gw = free_port();
    let own = free_port();
    let _d = start(gw, &[("bridged", stdio_config(own))]);
    let url = gateway_url(gw, "bridged");
    wait_served(&url);
    let c = Mcp::new(&url, Era::V2026);
    let heads = |method: &str| {
        vec![
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", method.to_owned()),
        ]
    };
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}});
    let r = c.post(&body, &heads("tools/list"));
    assert_eq!(
        (r.status, r.response()["error"]["code"].clone()),
        (400, json!(-32602)),
        "{r:?}"
    );
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body =
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": meta}});
    let r = c.post(&body, &heads("prompts/list"));
    assert_eq!(
        (r.status, r.response()["error"]["code"].clone()),
        (400, json!(-32020)),
        "{r:?}"
    );
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"_meta": meta}});
    let r = c.post(&body, &heads("ping"));
    assert_eq!(
        (r.status, r.response()["error"]["code"].clone()),
        (404, json!(-32601)),
        "{r:?}"
    );
    let mut old = Mcp::connected(&url, Era::V2025);
    assert!(old.tool_names().contains(&"echo".to_owned()));
}
