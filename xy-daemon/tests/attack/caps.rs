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

use crate::helper::{TestDaemon, children_of, free_port, testbin};
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

/// The lines `xy-test-tools --starts` wrote: one per `initialize`, the
/// child's and every listing probe's.
fn starts(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The gates the ledger file `ledger` keeps, once they name `tool`.
fn kept_gates(ledger: &Path, tool: &str) -> Value {
    crate::helper::wait_some("the gates kept", crate::helper::DEADLINE, || {
        let l: Value = serde_json::from_str(&std::fs::read_to_string(ledger).ok()?).ok()?;
        l["gates"]["needs"]
            .get(tool)
            .is_some()
            .then(|| l["gates"].clone())
    })
}

/// D238's window, closed (D280): after a daemon restart an idle on-demand
/// 2025 server is answered from the ledger, and a client that declared
/// nothing was shown every approved tool, those it may not call too. The
/// gates now live in the ledger beside the listing: the ledger's answer
/// is the client's subset, nothing is spawned for it, the first wake runs
/// the child alone (no listing probe), and a listing that changed is
/// probed again.
#[test]
fn after_a_restart_the_ledger_shows_a_bare_client_only_what_it_may_call() {
    let env = crate::helper::Env::new();
    let dir = env.state_dir().join("lists");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lists.json");
    let started = dir.join("starts");
    let tool = |n: &str| json!({"name": n, "description": n, "inputSchema": {"type": "object"}});
    let mut lists = json!({
        "tools": [tool("echo")],
        "gated": [
            {"needs": "/sampling", "tool": tool("sample")},
            {"needs": "/elicitation/url", "tool": tool("url")},
        ],
        "notify": true,
    });
    std::fs::write(&file, lists.to_string()).unwrap();
    let args = vec![
        "--file".to_owned(),
        file.display().to_string(),
        "--starts".to_owned(),
        started.display().to_string(),
    ];
    let port = free_port();
    let on_demand = "on-demand {\n    idle-stop \"10m\"\n}\n";
    env.write_config(
        "gated",
        &stdio_config(&testbin("xy-test-tools"), &args, port, on_demand),
    );
    let ledger = env.state_dir().join("tools/gated.json");
    let mut d = TestDaemon::start_in(env);
    d.result("start", Some(json!({"name": "gated"})));
    let g = kept_gates(&ledger, "url");
    assert_eq!(g["needs"]["sample"], json!(["sampling"]), "{g}");
    assert_eq!(g["needs"]["url"], json!(["elicitation", "elicitation.url"]));
    d.terminate();
    let env = d.take_env();
    let probed = starts(&started).len();
    assert!(probed >= 2, "the child and its probes: {probed}");

    let d = TestDaemon::start_in(env);
    crate::helper::wait_some("gated idle", crate::helper::DEADLINE, || {
        (d.entry("gated")["state"] == "idle").then_some(())
    });
    let u = url(port);
    for era in [Era::V2025, Era::V2026] {
        let mut bare = Mcp::declaring(&u, era, json!({}));
        let list = bare.result("tools/list", json!({}));
        assert!(list["_meta"]["xy/ledger"].is_object(), "{list}");
        let names: Vec<&str> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, ["echo"], "{era:?}, nothing declared: {list}");
        let mut sampler = Mcp::declaring(&u, era, json!({"sampling": {}}));
        assert_eq!(sorted(sampler.tool_names()), ["echo", "sample"]);
        let mut all = Mcp::declaring(&u, era, everything());
        assert_eq!(sorted(all.tool_names()), ["echo", "sample", "url"]);
    }
    assert_eq!(children_of(d.pid()), Vec::<u32>::new(), "nothing spawned");
    assert_eq!(starts(&started).len(), probed, "no process started");

    // The first call wakes the child, and only it: the kept gates decide.
    let mut bare = Mcp::declaring(&u, Era::V2025, json!({}));
    refused(&mut bare, "sample", &json!({"sampling": {}}));
    let r = bare.result("tools/call", call("echo"));
    assert_eq!(r["content"][0]["text"], "called echo", "{r}");
    assert_eq!(children_of(d.pid()).len(), 1, "one child");
    let after = starts(&started);
    assert_eq!(
        after.len(),
        probed + 1,
        "the child alone, no probe: {after:?}"
    );
    assert!(after[probed]["sampling"].is_object(), "the child's own");
    refused(&mut bare, "url", &json!({"elicitation": {"url": {}}}));

    // A listing that changed is probed again, and its gates kept.
    lists["gated"]
        .as_array_mut()
        .unwrap()
        .push(json!({"needs": "/roots", "tool": tool("roots")}));
    std::fs::write(&file, lists.to_string()).unwrap();
    let g = kept_gates(&ledger, "roots");
    assert_eq!(g["needs"]["roots"], json!(["roots"]), "{g}");
    assert!(starts(&started).len() > probed + 2, "probed again");
}
