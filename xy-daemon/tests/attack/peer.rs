//! A confined server drives unconfined ones through xy (issue 38, SPEC
//! §24): a sandboxed server's process — and the orphan it leaves after a
//! `setsid` and a double fork — connects to the gateway, another server's
//! own port and a remote server's port, and must get no MCP answer in any
//! `network` mode; `reach "<server>"` opens exactly that server; the test
//! process itself, unconfined, is still served everywhere.
#![cfg(target_os = "linux")]

use serde_json::{Value, json};

use crate::helper::*;

/// The JSON lines `name` printed, once its child and its orphan are done.
fn results(d: &TestDaemon, name: &str) -> Vec<Value> {
    wait_some(&format!("{name}'s MCP probes"), DEADLINE, || {
        let lines: Vec<Value> = log_lines(d, name, json!({"tail": 200}))
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let done = |who: &str| lines.iter().any(|v| v["who"] == who && v["done"] == true);
        (done("child") && done("orphan")).then_some(lines)
    })
}

/// `url` → answered, for `who`.
fn answered(lines: &[Value], who: &str, url: &str) -> bool {
    let line = lines
        .iter()
        .find(|v| v["who"] == who && v["mcp"] == url)
        .unwrap_or_else(|| panic!("no {who} line for {url}: {lines:?}"));
    line["answered"] == true
}

/// An `initialize` from the test process itself: whether it is answered.
fn we_are_answered(url: &str) -> bool {
    let mut mcp = crate::stdio::client::Mcp::new(url, crate::stdio::client::Era::V2025);
    let r = mcp.initialize();
    r.status == 200 && r.response().get("result").is_some()
}

struct Scene {
    d: TestDaemon,
    _up: std::process::Child,
    gateway: u16,
    target_port: u16,
    remote_port: u16,
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = self._up.kill();
        let _ = self._up.wait();
    }
}

impl Scene {
    fn urls(&self) -> Vec<String> {
        urls(self.gateway, self.target_port, self.remote_port)
    }
}

/// Where the attackers knock: the gateway for each server, then `target`'s
/// and `far`'s own ports.
fn urls(gateway: u16, target_port: u16, remote_port: u16) -> Vec<String> {
    vec![
        format!("http://127.0.0.1:{gateway}/target/mcp"),
        format!("http://127.0.0.1:{gateway}/other/mcp"),
        format!("http://127.0.0.1:{gateway}/far/mcp"),
        format!("http://127.0.0.1:{target_port}/mcp"),
        format!("http://127.0.0.1:{remote_port}/mcp"),
    ]
}

/// A daemon with two stdio servers (`target`, `other`), a remote (`far`,
/// upstream run by the test) on the gateway and own ports, and one
/// `xy-test-exfil` per `(name, sandbox block)`; `ALLOW_XY` in a block
/// becomes `allow-host` lines for each of xy's ports the URLs name.
fn scene(attackers: &[(&str, &str)]) -> Scene {
    let env = Env::new();
    let (gateway, target_port, other_port, remote_port, up_port) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    env.write_settings(&format!("gateway {{\n    port {gateway}\n}}\n"));
    let up = std::process::Command::new(testbin("xy-test-mcp"))
        .args(["--port", &up_port.to_string(), "--tools", "echo"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting the upstream");
    wait_for("the upstream listens", DEADLINE, || port_answers(up_port));
    let stdio = |port: u16| {
        crate::stdio::stdio_config(
            &testbin("xy-test-mcp"),
            &[
                "--stdio".to_owned(),
                "--tools".to_owned(),
                "echo".to_owned(),
            ],
            port,
            "",
        )
    };
    env.write_config("target", &stdio(target_port));
    env.write_config("other", &stdio(other_port));
    env.write_config(
        "far",
        &format!("url \"http://127.0.0.1:{up_port}/mcp\"\nport {remote_port}\n"),
    );
    let urls = urls(gateway, target_port, remote_port);
    let allow_xy: String = [gateway, target_port, remote_port]
        .iter()
        .map(|p| format!("    allow-host \"127.0.0.1:{p}\"\n"))
        .collect();
    for (name, sandbox) in attackers {
        let sandbox = sandbox.replace("ALLOW_XY", &allow_xy);
        let args: String = urls.iter().map(|u| format!(" \"--mcp\" {u:?}")).collect();
        env.write_config(
            name,
            &format!(
                "command {:?}\nargs{args}\nport {}\n{sandbox}\n",
                testbin("xy-test-exfil").display().to_string(),
                free_port()
            ),
        );
    }
    let d = TestDaemon::start_in(env);
    for name in ["target", "other", "far"] {
        wait_for(&format!("{name} runs"), DEADLINE, || {
            d.entry(name)["state"] == "running"
        });
    }
    Scene {
        d,
        _up: up,
        gateway,
        target_port,
        remote_port,
    }
}

#[test]
fn a_confined_child_and_its_orphan_get_no_mcp_answer_in_any_network_mode() {
    let modes = [
        ("box-any", "sandbox {\n    network \"any\"\n}"),
        ("box-none", "sandbox {\n    network \"none\"\n}"),
        (
            "box-allow",
            "sandbox {\n    network \"allow\"\n    allow-host \"example.com:443\"\n}",
        ),
        // xy's own ports as allow-host lines: the egress proxy (xyd's own
        // connection) still relays nothing to them (D173).
        ("box-proxy", "sandbox {\n    network \"allow\"\nALLOW_XY}"),
    ];
    let s = scene(&modes);
    let urls = s.urls();
    // The owner's own, unconfined client is still served everywhere.
    for url in &urls {
        assert!(
            we_are_answered(url),
            "the test process was refused at {url}"
        );
    }
    for (name, _) in modes {
        let lines = results(&s.d, name);
        for who in ["child", "orphan"] {
            for url in &urls {
                assert!(
                    !answered(&lines, who, url),
                    "{name}'s {who} got an MCP answer from {url}: {lines:?}"
                );
            }
        }
        // With `network "any"` the kernel lets the connection through, and
        // the proxy relays what `allow-host` names: xy itself says no.
        if name == "box-any" || name == "box-proxy" {
            for v in lines.iter().filter(|v| v["mcp"].is_string()) {
                assert_eq!(v["status"], "403", "{v}");
            }
        }
        // The orphan really left: a session of its own, reparented to xyd.
        let orphan = lines
            .iter()
            .find(|v| v["who"] == "orphan" && v["ppid"].is_i64())
            .unwrap();
        assert_eq!(orphan["ppid"], i64::from(s.d.pid()), "{orphan}");
    }
}

#[test]
fn reach_opens_the_named_server_only() {
    let s = scene(&[(
        "box-reach",
        "sandbox {\n    network \"any\"\n    reach \"target\"\n}",
    )]);
    let lines = results(&s.d, "box-reach");
    let [gw_target, gw_other, gw_far, own_target, own_far] =
        <[String; 5]>::try_from(s.urls()).unwrap();
    for who in ["child", "orphan"] {
        // The orphan's server is unknown once its parents are gone: it
        // reaches nothing (fail closed, D171).
        let opened = who == "child";
        assert_eq!(answered(&lines, who, &gw_target), opened, "{who} {lines:?}");
        assert_eq!(
            answered(&lines, who, &own_target),
            opened,
            "{who} {lines:?}"
        );
        for url in [&gw_other, &gw_far, &own_far] {
            assert!(
                !answered(&lines, who, url),
                "{who} reached {url}: {lines:?}"
            );
        }
    }
}
