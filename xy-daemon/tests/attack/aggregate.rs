//! The aggregate reaches every server, so a confined server must not
//! reach it (SPEC §24, §26, D243): a sandboxed server's process — even one
//! whose `reach` names a server the aggregate offers — gets `403` and no
//! MCP answer at `/mcp` and at a profile's `/p/<profile>/mcp`, while the
//! server its `reach` names still answers it at `/<name>/mcp`.
#![cfg(target_os = "linux")]

use serde_json::{Value, json};

use crate::helper::*;

#[test]
fn a_confined_process_gets_no_answer_from_the_aggregate() {
    let env = Env::new();
    let gateway = free_port();
    env.write_settings(&format!(
        "gateway {{\n    port {gateway}\n}}\nprofile \"all\" {{ }}\n"
    ));
    let args = [
        "--stdio".to_owned(),
        "--tools".to_owned(),
        "echo".to_owned(),
    ];
    env.write_config(
        "target",
        &crate::stdio::stdio_config(&testbin("xy-test-mcp"), &args, free_port(), ""),
    );
    let urls = [
        format!("http://127.0.0.1:{gateway}/target/mcp"),
        format!("http://127.0.0.1:{gateway}/mcp"),
        format!("http://127.0.0.1:{gateway}/p/all/mcp"),
    ];
    let knocks: String = urls.iter().map(|u| format!(" \"--mcp\" {u:?}")).collect();
    env.write_config(
        "box",
        &format!(
            "command {:?}\nargs{knocks}\nport {}\nsandbox {{\n    network \"any\"\n    \
             reach \"target\"\n}}\n",
            testbin("xy-test-exfil").display().to_string(),
            free_port()
        ),
    );
    let d = TestDaemon::start_in(env);
    wait_for("target runs", DEADLINE, || {
        d.entry("target")["state"] == "running"
    });
    let lines: Vec<Value> = wait_some("box's MCP probes", DEADLINE, || {
        let lines: Vec<Value> = log_lines(&d, "box", json!({"tail": 200}))
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let done = |who: &str| lines.iter().any(|v| v["who"] == who && v["done"] == true);
        (done("child") && done("orphan")).then_some(lines)
    });
    let line = |who: &str, url: &str| {
        lines
            .iter()
            .find(|v| v["who"] == who && v["mcp"] == url)
            .cloned()
            .unwrap_or_else(|| panic!("no {who} line for {url}: {lines:?}"))
    };
    for who in ["child", "orphan"] {
        // The control: its `reach` holds where it should.
        assert_eq!(line(who, &urls[0])["answered"], true, "{lines:?}");
        for url in &urls[1..] {
            let v = line(who, url);
            assert_eq!(v["answered"], false, "{who} got an answer at {url}: {v}");
            assert_eq!(v["status"], "403", "{v}");
        }
    }
    // The owner's own client is served at both.
    for url in &urls[1..] {
        let mut c = crate::stdio::client::Mcp::new(url, crate::stdio::client::Era::V2025);
        let r = c.initialize();
        assert_eq!(r.status, 200, "{url}: {r:?}");
    }
}
