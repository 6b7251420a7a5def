//! Clients shown tools they cannot call (issue 38, SPEC §19, §24, D210): a
//! 2025-era child is initialised once, with every capability declared
//! (D112), so a server that registers tools only for capable clients listed
//! them all through xy — to a client that declared nothing too, which then
//! called them. Each client now sees what the child would show it, and a
//! call of a tool it was not shown is refused (`-32021`, naming what it
//! needs) without reaching the child. Against `xy-test-tools`' `gated`
//! tools, and against `@modelcontextprotocol/server-everything` when the
//! interop cache has it (17 tools through xy to a bare client, 13 directly).
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use crate::helper::{TestDaemon, free_port, testbin};
use crate::stdio::client::{Era, Mcp};
use crate::stdio::stdio_config;

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn call(tool: &str) -> Value {
    json!({"name": tool, "arguments": {}})
}

/// Every capability a client can declare.
fn everything() -> Value {
    json!({"roots": {}, "sampling": {}, "elicitation": {"form": {}, "url": {}}})
}

/// A call xy refused for want of `needs`, never forwarded.
#[track_caller]
fn refused(c: &mut Mcp, tool: &str, needs: &Value) {
    let r = c.request("tools/call", call(tool));
    let e = &r.response()["error"];
    assert_eq!(e["code"], -32021, "{tool} via {:?}: {r:?}", c.era);
    assert_eq!(&e["data"]["requiredCapabilities"], needs, "{e}");
    assert!(
        e["message"].as_str().unwrap_or("").contains(tool),
        "the refusal names the tool: {e}"
    );
    if c.era == Era::V2026 {
        assert_eq!(r.status, 400, "{r:?}");
    }
}

#[test]
fn a_client_sees_and_calls_only_the_tools_its_capabilities_get() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lists.json");
    let tool = |n: &str| json!({"name": n, "description": n, "inputSchema": {"type": "object"}});
    let lists = json!({
        "tools": [tool("echo")],
        "gated": [
            {"needs": "/sampling", "tool": tool("sample")},
            {"needs": "/roots", "tool": tool("roots")},
            {"needs": "/elicitation/url", "tool": tool("url")},
        ],
    });
    std::fs::write(&file, lists.to_string()).unwrap();
    let args = vec!["--file".to_owned(), file.display().to_string()];
    let port = free_port();
    let d = TestDaemon::start(&[(
        "gated",
        stdio_config(&testbin("xy-test-tools"), &args, port, ""),
    )]);
    d.running_pid("gated");
    let u = url(port);

    for era in [Era::V2025, Era::V2026] {
        let mut bare = Mcp::declaring(&u, era, json!({}));
        assert_eq!(bare.tool_names(), vec!["echo"], "{era:?}, nothing declared");
        refused(&mut bare, "sample", &json!({"sampling": {}}));
        refused(&mut bare, "roots", &json!({"roots": {}}));
        refused(&mut bare, "url", &json!({"elicitation": {"url": {}}}));
        let echo = bare.result("tools/call", call("echo"));
        assert_eq!(echo["content"][0]["text"], "called echo");

        let mut sampler = Mcp::declaring(&u, era, json!({"sampling": {}}));
        assert_eq!(sorted(sampler.tool_names()), vec!["echo", "sample"]);
        let r = sampler.result("tools/call", call("sample"));
        assert_eq!(r["content"][0]["text"], "called sample", "{era:?}");

        // `elicitation: {}` is form mode: not enough for url mode.
        let mut form = Mcp::declaring(&u, era, json!({"elicitation": {}}));
        assert_eq!(form.tool_names(), vec!["echo"]);
        refused(&mut form, "url", &json!({"elicitation": {"url": {}}}));

        let mut all = Mcp::declaring(&u, era, everything());
        assert_eq!(
            sorted(all.tool_names()),
            vec!["echo", "roots", "sample", "url"]
        );
        let r = all.result("tools/call", call("url"));
        assert_eq!(r["content"][0]["text"], "called url");
    }
}

/// What `node entry stdio` lists to a client that declares `caps`, asked
/// directly, without xy.
fn direct_listing(node: &Path, args: &[String], caps: &Value) -> Vec<String> {
    let mut child = Command::new(node)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |m: Value| writeln!(stdin, "{m}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": caps,
        "clientInfo": {"name": "direct", "version": "1"}}}),
    );
    let mut answer = |id: u64| loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "node exited");
        if let Ok(v) = serde_json::from_str::<Value>(&line)
            && v["id"] == json!(id)
            && v.get("method").is_none()
        {
            return v;
        }
    };
    answer(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    let r = answer(2);
    let _ = child.kill();
    let _ = child.wait();
    sorted(
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect(),
    )
}

#[test]
fn server_everything_shows_a_bare_client_what_it_shows_it_directly() {
    let se = match interop::server_everything() {
        Interop::Ready(se) => se,
        Interop::Skip(skip) => {
            return skip
                .announce("server_everything_shows_a_bare_client_what_it_shows_it_directly");
        }
    };
    let (node, args) = se.stdio_command();
    let port = free_port();
    let d = TestDaemon::start(&[("ev", stdio_config(&node, &args, port, ""))]);
    d.running_pid("ev");
    let u = url(port);
    for caps in [
        json!({}),
        json!({"sampling": {}}),
        json!({"elicitation": {}}),
        json!({"roots": {}, "elicitation": {"url": {}}}),
    ] {
        let direct = direct_listing(&node, &args, &caps);
        for era in [Era::V2025, Era::V2026] {
            let mut c = Mcp::declaring(&u, era, caps.clone());
            assert_eq!(
                sorted(c.tool_names()),
                direct,
                "{era:?} declaring {caps}: through xy as directly"
            );
        }
    }
    let mut bare = Mcp::declaring(&u, Era::V2025, json!({}));
    eprintln!(
        "server-everything: {} tools to a bare client through xy, {} directly, {} to a client of every capability",
        bare.tool_names().len(),
        direct_listing(&node, &args, &json!({})).len(),
        Mcp::declaring(&u, Era::V2025, everything())
            .tool_names()
            .len()
    );
    refused(
        &mut bare,
        "trigger-sampling-request",
        &json!({"sampling": {}}),
    );
    refused(&mut bare, "get-roots-list", &json!({"roots": {}}));
}
