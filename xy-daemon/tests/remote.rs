//! SPEC §23's remote servers against the real `xyd`: a `url` server (here
//! `xy-test-mcp` on loopback, a process the test runs, not xy) served at
//! its own port and the gateway in both eras, with SSE; a static bearer
//! from a §16 secret that reaches the upstream while the client's own
//! `Authorization` and `Cookie` do not, and whose value appears in no file
//! under the state dir and no RPC output; an upstream that goes away and
//! comes back; `auth { oauth }` with no grant answered at once with the
//! login hint; the firewall holding back a remote's new tool; the proxy
//! environment sending one remote through a proxy and another, in
//! `NO_PROXY`, direct (D146).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, testbin, wait_for};

/// The proxy variables xyd's environment could bring in from the test's.
const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
];
use crate::stdio::client::{Era, Mcp};

/// The upstream: `xy-test-mcp` on `port` with `args`, killed on drop.
struct Upstream {
    child: Child,
    port: u16,
}

impl Upstream {
    fn start(port: u16, args: &[&str]) -> Upstream {
        let child = Command::new(testbin("xy-test-mcp"))
            .args(["--port", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting xy-test-mcp");
        wait_for("the upstream listens", DEADLINE, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Upstream { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A remote server's config: `url`, own `port`, fast probes, `extra`.
fn remote_config(url: &str, port: u16, extra: &str) -> String {
    format!(
        "url {url:?}\nport {port}\nhealth {{\n    mcp\n    interval \"200ms\"\n    timeout \"1s\"\n    \
         failures 1\n    start-period \"0s\"\n}}\n{extra}"
    )
}

fn names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn start(gw: u16, servers: &[(&str, String)]) -> TestDaemon {
    let env = Env::new();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    for (name, kdl) in servers {
        env.write_config(name, kdl);
    }
    TestDaemon::start_in(env)
}

fn wait_running(d: &TestDaemon, name: &str) {
    wait_for("the remote server runs", DEADLINE, || {
        d.entry(name)["state"] == "running"
    });
}

#[test]
fn a_remote_is_served_at_its_port_and_the_gateway_in_both_eras() {
    let up = Upstream::start(free_port(), &["--tools", "echo,progress", "--sse"]);
    let (gw, own) = (free_port(), free_port());
    let d = start(gw, &[("far", remote_config(&up.url(), own, ""))]);
    wait_running(&d, "far");
    for url in [
        format!("http://127.0.0.1:{own}/mcp"),
        format!("http://127.0.0.1:{gw}/far/mcp"),
    ] {
        // 2025: a session minted by the upstream passes through, SSE answers.
        let mut old = Mcp::connected(&url, Era::V2025);
        assert!(old.session.is_some(), "no Mcp-Session-Id through {url}");
        assert_eq!(
            names(&old.result("tools/list", json!({}))),
            ["echo", "progress"]
        );
        let echoed = old.result(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "far 2025"}}),
        );
        assert_eq!(echoed["content"][0]["text"], "far 2025", "{echoed}");
        let progress = old.start(
            "tools/call",
            json!({"name": "progress", "arguments": {"ms": 10}, "_meta": {"progressToken": "p"}}),
        );
        progress.expect("notifications/progress");
        assert!(progress.response()["result"].is_object());
        // 2026: stateless.
        let mut new = Mcp::new(&url, Era::V2026);
        let echoed = new.result(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "far 2026"}}),
        );
        assert_eq!(echoed["content"][0]["text"], "far 2026", "{echoed}");
    }
    let entry = d.entry("far");
    assert_eq!(entry["transport"], "remote", "{entry}");
    assert_eq!(entry["pid"], Value::Null, "{entry}");
    let status = d.result("status", Some(json!({"name": "far"})));
    assert_eq!(status["remote"]["url"], up.url().as_str(), "{status}");
    assert_eq!(status["remote"]["auth"], "none", "{status}");
    assert_eq!(status["tool_count"], 2, "{status}");
    assert_eq!(status["remote_url"], up.url().as_str(), "{status}");
    // A stop is instant and closes the port.
    let stopped = d.result("stop", Some(json!({"name": "far"})));
    assert_eq!(d.entry("far")["state"], "stopped", "{stopped}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", own)).is_err());
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_static_bearer_from_a_secret_reaches_the_upstream_and_nothing_else() {
    let token = "Bearer s3cr3t-r3m0te-t0ken";
    let seen = tempfile::NamedTempFile::new().unwrap();
    let seen_path = seen.path().to_str().unwrap().to_owned();
    let up = Upstream::start(
        free_port(),
        &["--require-auth", token, "--headers-file", &seen_path],
    );
    let env = Env::new();
    let secret = env.config_dir().join("far.token");
    std::fs::write(&secret, format!("{token}\n")).unwrap();
    let (gw, own) = (free_port(), free_port());
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    env.write_config(
        "far",
        &remote_config(
            &up.url(),
            own,
            &format!(
                "secrets {{\n    TOKEN file={:?}\n}}\nheaders {{\n    Authorization secret=\"TOKEN\"\n}}\n",
                secret.display().to_string()
            ),
        ),
    );
    let d = TestDaemon::start_in(env);
    wait_running(&d, "far");
    wait_for("healthy", DEADLINE, || {
        d.entry("far")["health"]["state"] == "healthy"
    });
    // Events of a reconnect carry no value either.
    let mut ev = d.client();
    ev.result("events", Some(json!({"names": ["far"]})));
    d.result("restart", Some(json!({"name": "far"})));
    let mut events = Vec::new();
    while !events
        .iter()
        .any(|e: &Value| e["params"]["kind"] == "health" && e["params"]["to"] == "healthy")
    {
        events.push(ev.recv());
    }
    // A client's own credentials stay with xy.
    let c = Mcp::new(&format!("http://127.0.0.1:{gw}/far/mcp"), Era::V2026);
    let r = c.post(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "x"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}}),
        &[
            ("Authorization", "Bearer client-own".to_owned()),
            ("Cookie", "session=client-cookie".to_owned()),
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", "tools/call".to_owned()),
            ("Mcp-Name", "echo".to_owned()),
        ],
    );
    assert_eq!(r.response()["result"]["content"][0]["text"], "x", "{r:?}");
    let lines = std::fs::read_to_string(seen.path()).unwrap();
    assert!(!lines.is_empty());
    for line in lines.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["authorization"], token, "{line}");
        assert_eq!(v["cookie"], Value::Null, "{line}");
        assert_eq!(v["host"], format!("127.0.0.1:{}", up.port), "{line}");
    }
    // The value is nowhere: RPC output, files under the state dir.
    let secret_part = "s3cr3t-r3m0te-t0ken";
    let status = d.result("status", Some(json!({"name": "far"})));
    assert_eq!(
        status["remote"]["headers"],
        json!([{"name": "Authorization", "secret": "TOKEN"}]),
        "{status}"
    );
    for out in [
        serde_json::to_string(&events).unwrap(),
        status.to_string(),
        d.result("list", None).to_string(),
        d.result("daemon_status", None).to_string(),
        d.result("tools", Some(json!({"name": "far"}))).to_string(),
    ] {
        assert!(!out.contains(secret_part), "{out}");
    }
    let state = d.env.state_dir();
    for f in files(&state) {
        if let Ok(bytes) = std::fs::read(&f) {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(secret_part),
                "{} holds the token",
                f.display()
            );
        }
    }
}

#[test]
fn an_upstream_that_goes_away_makes_it_unhealthy_until_it_returns() {
    let port = free_port();
    let up = Upstream::start(port, &[]);
    let (gw, own) = (free_port(), free_port());
    let d = start(gw, &[("far", remote_config(&up.url(), own, ""))]);
    wait_for("healthy", DEADLINE, || {
        d.entry("far")["health"]["state"] == "healthy"
    });
    drop(up);
    wait_for("unhealthy", DEADLINE, || {
        d.entry("far")["health"]["state"] == "unhealthy"
    });
    // A client meanwhile gets an answer, not a hang.
    let c = Mcp::new(&format!("http://127.0.0.1:{own}/mcp"), Era::V2026);
    let r = c.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        &[],
    );
    assert_eq!(r.status().as_u16(), 502);
    let _up = Upstream::start(port, &[]);
    wait_for("healthy again", DEADLINE, || {
        let e = d.entry("far");
        e["health"]["state"] == "healthy" && e["state"] == "running"
    });
}

#[test]
fn oauth_without_a_grant_answers_at_once_with_the_login_hint() {
    let up = Upstream::start(free_port(), &["--require-auth", "Bearer never"]);
    let (gw, own) = (free_port(), free_port());
    let d = start(
        gw,
        &[(
            "far",
            remote_config(&up.url(), own, "auth {\n    oauth\n}\n"),
        )],
    );
    wait_for("unhealthy with the login hint", DEADLINE, || {
        let e = d.entry("far");
        e["health"]["state"] == "unhealthy"
            && e["health"]["error"]
                .as_str()
                .is_some_and(|w| w.contains("xyctl auth login far"))
    });
    let status = d.result("status", Some(json!({"name": "far"})));
    assert_eq!(status["remote"]["auth"], "oauth", "{status}");
    let url = format!("http://127.0.0.1:{gw}/far/mcp");
    let c = Mcp::new(&url, Era::V2026);
    let started = std::time::Instant::now();
    let call = c.post(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "x"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}}),
        &[
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", "tools/call".to_owned()),
            ("Mcp-Name", "echo".to_owned()),
        ],
    );
    assert!(started.elapsed() < xy_testbins::wait::scaled(std::time::Duration::from_secs(5)));
    let result = &call.response()["result"];
    assert_eq!(result["isError"], true, "{call:?}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("login needed: xyctl auth login far"),
        "{call:?}"
    );
    let list = c.post(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}}),
        &[
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", "tools/list".to_owned()),
        ],
    );
    assert_eq!(list.response()["error"]["code"], -32603, "{list:?}");
}

#[test]
fn the_firewall_holds_back_a_remotes_new_tool() {
    let port = free_port();
    let up = Upstream::start(port, &["--tools", "echo"]);
    let (gw, own) = (free_port(), free_port());
    let d = start(gw, &[("far", remote_config(&up.url(), own, ""))]);
    wait_for("xy listed the remote", DEADLINE, || {
        let t = d.result("tools", Some(json!({"name": "far"})));
        t["current"]["tools"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    });
    // The remote changes behind xy's back.
    drop(up);
    let _up = Upstream::start(port, &["--tools", "echo,touch"]);
    let url = format!("http://127.0.0.1:{gw}/far/mcp");
    wait_for("the new tool is held back", DEADLINE, || {
        let mut c = Mcp::new(&url, Era::V2026);
        c.request("tools/list", json!({})).status == 200
            && c.tool_names() == ["echo"]
            && d.result("tools", Some(json!({"name": "far"})))["current"]["tools"]
                .as_array()
                .is_some_and(|a| {
                    a.iter()
                        .any(|t| t["name"] == "touch" && t["state"] == "pending")
                })
    });
    // Through the server's own port too.
    let mut c = Mcp::new(&format!("http://127.0.0.1:{own}/mcp"), Era::V2026);
    assert_eq!(c.tool_names(), ["echo"]);
}

/// A remote whose URL nothing answers (a typo, a server that is down) says
/// so: `status` carries the probe xy runs for it (no `health { }` needed)
/// and the probe's error while it is still `starting`.
#[test]
fn a_remote_nobody_answers_says_why_while_starting() {
    let nobody = free_port();
    let port = free_port();
    let url = format!("http://127.0.0.1:{nobody}/mcp");
    let d = start(
        free_port(),
        &[("far", format!("url {url:?}\nport {port}\n"))],
    );
    wait_for("the probe's error in status", DEADLINE, || {
        d.entry("far")["health"]["error"].as_str().is_some()
    });
    let status = d.result("status", Some(json!({"name": "far"})));
    assert_eq!(status["state"], "starting", "{status}");
    assert_eq!(status["health_config"]["probe"], "mcp", "{status}");
    let error = status["health"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&nobody.to_string()) || error.to_lowercase().contains("refused"),
        "the error names what failed: {error}"
    );
}

/// `restart-on-failure` does not reconnect a remote for a login it needs:
/// a reconnect cannot log in, and it would fail again at every probe.
#[test]
fn restart_on_failure_leaves_a_remote_that_needs_a_login_alone() {
    let up = Upstream::start(free_port(), &["--require-auth", "Bearer never"]);
    let (gw, own) = (free_port(), free_port());
    let kdl = remote_config(&up.url(), own, "auth {\n    oauth\n}\n").replace(
        "start-period \"0s\"\n",
        "start-period \"0s\"\n    restart-on-failure #true\n",
    );
    assert!(kdl.contains("restart-on-failure"), "{kdl}");
    let d = start(gw, &[("far", kdl)]);
    wait_for("unhealthy with the login hint", DEADLINE, || {
        d.entry("far")["health"]["error"]
            .as_str()
            .is_some_and(|w| w.contains("xyctl auth login far"))
    });
    // Ten more probes (every 200 ms), each of which a health restart
    // would have acted on.
    let checked = |d: &TestDaemon| d.entry("far")["health"]["checked_at"].clone();
    let mut seen = vec![checked(&d)];
    wait_for("ten more probes", DEADLINE, || {
        let c = checked(&d);
        if seen.last() != Some(&c) {
            seen.push(c);
        }
        seen.len() > 10
    });
    let status = d.result("status", Some(json!({"name": "far"})));
    let starts = status["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .filter(|t| t["to"] == "starting")
        .count();
    assert_eq!(starts, 1, "connected once, never again: {status}");
    assert_eq!(status["health"]["state"], "unhealthy", "{status}");
}

#[test]
fn the_proxy_environment_sends_a_remote_through_the_proxy_and_no_proxy_hosts_direct() {
    // The "proxy" is an xy-test-mcp: a forward proxy gets the full URL as
    // the request target and xy-test-mcp answers for its path, so a remote
    // at a port where nothing listens is reachable only through it.
    let proxy = Upstream::start(free_port(), &["--tools", "echo"]);
    let near = Upstream::start(free_port(), &["--tools", "echo,progress"]);
    let nothing = free_port();
    let (gw, via_port, near_port) = (free_port(), free_port(), free_port());
    let env = Env::new();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    let off = "firewall {\n    mode \"off\"\n}\n";
    env.write_config(
        "via",
        &remote_config(&format!("http://localhost:{nothing}/mcp"), via_port, off),
    );
    env.write_config("near", &remote_config(&near.url(), near_port, off));
    let d = TestDaemon::start_in_adjusted(env, |cmd| {
        for v in PROXY_VARS {
            cmd.env_remove(v);
        }
        cmd.env("HTTP_PROXY", format!("http://127.0.0.1:{}", proxy.port))
            .env("NO_PROXY", "127.0.0.1");
    });
    wait_running(&d, "via");
    wait_running(&d, "near");
    let list = |port: u16| {
        let mut c = Mcp::new(&format!("http://127.0.0.1:{port}/mcp"), Era::V2026);
        names(&c.result("tools/list", json!({})))
    };
    assert_eq!(list(via_port), ["echo"], "through the proxy");
    assert_eq!(list(near_port), ["echo", "progress"], "NO_PROXY: direct");
}
