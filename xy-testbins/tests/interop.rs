//! The interop installer end to end: the pinned Python SDK's server answers
//! `server/discover` (2026) and server-everything answers `initialize`
//! (2025) over streamable HTTP. Skips loudly when the registry is unreachable.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use crate::helper::Proc;

use xy_testbins::locate::free_port;

/// POSTs `body` with curl-free std HTTP until the server answers (it may
/// still be importing), returning the JSON-RPC answer.
fn post_until_up(port: u16, headers: &[(&str, &str)], body: &Value) -> Value {
    use std::io::{Read, Write};
    let deadline = xy_testbins::wait::deadline(Duration::from_secs(60));
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(xy_testbins::wait::scaled(Duration::from_secs(20))))
                .unwrap();
            let text = body.to_string();
            let mut req = format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
                text.len()
            );
            for (k, v) in headers {
                req.push_str(&format!("{k}: {v}\r\n"));
            }
            req.push_str("\r\n");
            req.push_str(&text);
            s.write_all(req.as_bytes()).unwrap();
            let mut raw = String::new();
            let _ = s.read_to_string(&mut raw);
            // JSON body, or the data line of an SSE event.
            if let Some(v) = raw
                .lines()
                .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v.get("jsonrpc").is_some())
            {
                return v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "server on port {port} never answered"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn python_sdk_server_speaks_2026() {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return skip.announce("python_sdk_server_speaks_2026"),
    };
    let port = free_port();
    let (python, args) = sdk.fastmcp_command(port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _server = Proc::spawn(python.to_str().unwrap(), &args, |_| {});
    let answer = post_until_up(
        port,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}}}),
    );
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "xy-interop-python",
        "{answer}"
    );
}

#[test]
fn server_everything_speaks_2025() {
    let se = match interop::server_everything() {
        Interop::Ready(se) => se,
        Interop::Skip(skip) => return skip.announce("server_everything_speaks_2025"),
    };
    let port = free_port();
    let (node, args, env) = se.streamable_http_command(port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _server = Proc::spawn(node.to_str().unwrap(), &args, |cmd: &mut Command| {
        cmd.envs(env);
    });
    let answer = post_until_up(
        port,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert!(
        answer["result"]["protocolVersion"]
            .as_str()
            .unwrap()
            .starts_with("2025-"),
        "{answer}"
    );
}
