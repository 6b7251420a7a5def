//! SPEC §26's aggregate against the real `xyd`: the gateway's `/mcp` as
//! one MCP server of every server's tools (both eras, prefixed names,
//! calls routed and recorded with the aggregate named), `list_changed` on
//! a 2025 session's stream when a server stops, a held-back tool neither
//! listed nor callable, profiles at `/p/<profile>/mcp` and mode `search`
//! (`find_tools`, `call_tool`, a first listing under 6,000 bytes with 30
//! servers), and `tools_search` on the control socket.

use serde_json::{Value, json};

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, testbin, wait_for, wait_some};
use crate::stdio::client::{Era, Mcp};

/// The rmcp test server on stdio; `extra` lines appended.
fn server(extra: &str) -> String {
    let args: Vec<String> = ["--stdio", "--tools", "echo,progress,touch"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    crate::stdio::stdio_config(&testbin("xy-test-mcp"), &args, free_port(), extra)
}

/// A daemon with the gateway on a free port, `settings` after it in
/// `xy.kdl`, and `servers`; returns it and the gateway port once every
/// autostarted server runs.
fn start(settings: &str, servers: &[(&str, String)]) -> (TestDaemon, u16) {
    let gw = free_port();
    let env = Env::new();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n{settings}"));
    for (name, kdl) in servers {
        env.write_config(name, kdl);
    }
    let d = TestDaemon::start_in(env);
    for (name, kdl) in servers {
        if kdl.contains("on-demand") {
            continue;
        }
        wait_for(&format!("{name} runs"), DEADLINE, || {
            d.entry(name)["state"] == "running"
        });
    }
    wait_for("the gateway listens", DEADLINE, || {
        std::net::TcpStream::connect(("127.0.0.1", gw)).is_ok()
    });
    (d, gw)
}

fn names(result: &Value) -> Vec<String> {
    let mut n: Vec<String> = result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    n.sort();
    n
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn every_server_in_both_eras_with_calls_routed_and_recorded() {
    let (d, gw) = start(
        "",
        &[
            ("alpha", server("")),
            ("beta", server("")),
            ("held", server("firewall {\n    mode \"review\"\n}\n")),
        ],
    );
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let want = [
        "alpha__echo",
        "alpha__progress",
        "alpha__touch",
        "beta__echo",
        "beta__progress",
        "beta__touch",
    ];
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&url, era);
        if era == Era::V2025 {
            assert!(c.session.is_some(), "no session from the aggregate");
        }
        // `held`'s tools wait for approval: absent.
        let tools = c.result("tools/list", json!({}));
        assert_eq!(names(&tools), want, "{era:?}");
        if era == Era::V2026 {
            assert_eq!(tools["resultType"], "complete");
        }
        let r = c.result(
            "tools/call",
            json!({"name": "beta__echo", "arguments": {"text": format!("hi {era:?}")}}),
        );
        assert_eq!(text(&r), format!("hi {era:?}"), "{r}");
        // Held back: not callable by its would-be name either.
        let r = c.result("tools/call", json!({"name": "held__echo", "arguments": {}}));
        assert_eq!(r["isError"], true, "{r}");
        assert!(text(&r).contains("xyctl tools approve held"), "{r}");
        let r = c.request("tools/call", json!({"name": "nope__echo", "arguments": {}}));
        assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    }
    // Recorded by the server's endpoint, under the tool's own name, the
    // aggregate named as the way in.
    let calls = wait_some("beta's calls recorded", DEADLINE, || {
        let r = d.result("calls", Some(json!({"name": "beta"})));
        let calls = r["calls"].as_array().cloned().unwrap_or_default();
        (calls.len() >= 2).then_some(calls)
    });
    for c in &calls {
        assert_eq!(c["server"], "beta");
        assert_eq!(c["tool"], "echo");
        assert!(
            c["client"].as_str().unwrap_or("").ends_with("via /mcp"),
            "{c}"
        );
    }
    let held = d.result("calls", Some(json!({"name": "held"})));
    assert!(
        held["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["outcome"] == "held_back" && c["tool"] == "echo"),
        "{held}"
    );
}

#[test]
fn a_stopped_server_leaves_with_list_changed() {
    let (d, gw) = start("", &[("alpha", server("")), ("beta", server(""))]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let mut c = Mcp::connected(&url, Era::V2025);
    assert_eq!(names(&c.result("tools/list", json!({}))).len(), 6);
    let stream = c.listen();
    // A 2026 client's `subscriptions/listen` gets the same (SPEC §26).
    let mut c26 = Mcp::connected(&url, Era::V2026);
    let stream26 = c26.listen();
    d.result("stop", Some(json!({"name": "beta"})));
    stream.expect("notifications/tools/list_changed");
    let note = stream26.expect("notifications/tools/list_changed");
    assert!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
        "{note}"
    );
    assert_eq!(
        names(&c26.result("tools/list", json!({}))),
        ["alpha__echo", "alpha__progress", "alpha__touch"]
    );
    let after = names(&c.result("tools/list", json!({})));
    assert_eq!(after, ["alpha__echo", "alpha__progress", "alpha__touch"]);
    // Back on start.
    d.result("start", Some(json!({"name": "beta"})));
    wait_for("beta's tools come back", DEADLINE, || {
        names(&c.result("tools/list", json!({}))).len() == 6
    });
    let r = c.result(
        "tools/call",
        json!({"name": "beta__echo", "arguments": {"text": "again"}}),
    );
    assert_eq!(text(&r), "again", "{r}");
}

#[test]
fn profiles_and_search_mode() {
    let profiles = "profile \"one\" {\n    servers \"alpha\"\n    mode \"search\"\n}\n\
                    profile \"all\" { }\n";
    let (d, gw) = start(profiles, &[("alpha", server("")), ("beta", server(""))]);
    let one = format!("http://127.0.0.1:{gw}/p/one/mcp");
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&one, era);
        let list = c.result("tools/list", json!({}));
        assert_eq!(names(&list), ["call_tool", "find_tools"]);
        let found = c.result(
            "tools/call",
            json!({"name": "find_tools", "arguments": {"query": "echo text back"}}),
        );
        let tools = found["structuredContent"]["tools"].as_array().unwrap();
        assert_eq!(tools[0]["name"], "alpha__echo", "{found}");
        assert!(tools[0]["inputSchema"].is_object(), "{found}");
        assert!(
            tools
                .iter()
                .all(|t| t["name"].as_str().unwrap().starts_with("alpha__")),
            "beta is not in the profile: {found}"
        );
        let r = c.result(
            "tools/call",
            json!({"name": "call_tool", "arguments": {"name": "alpha__echo",
                "arguments": {"text": "via call_tool"}}}),
        );
        assert_eq!(text(&r), "via call_tool", "{r}");
        let r = c.result(
            "tools/call",
            json!({"name": "call_tool", "arguments": {"name": "beta__echo", "arguments": {}}}),
        );
        assert_eq!(r["isError"], true, "{r}");
        assert!(text(&r).contains("no tool named"), "{r}");
    }
    let mut all = Mcp::connected(&format!("http://127.0.0.1:{gw}/p/all/mcp"), Era::V2025);
    assert_eq!(names(&all.result("tools/list", json!({}))).len(), 6);
    // An unknown profile: 404 with a JSON-RPC error naming what exists.
    let mut none = Mcp::new(&format!("http://127.0.0.1:{gw}/p/nope/mcp"), Era::V2025);
    let r = none.initialize();
    assert_eq!(r.status, 404, "{r:?}");
    let msg = r.response()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(msg.contains("nope") && msg.contains("all, one"), "{msg}");
    // `tools_search` answers what `find_tools` would.
    let r = d.result(
        "tools_search",
        Some(json!({"query": "echo", "profile": "one", "limit": 1})),
    );
    assert_eq!(r["tools"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["tools"][0]["name"], "alpha__echo");
    assert_eq!(r["tools"][0]["server"], "alpha");
    assert_eq!(r["tools"][0]["tool"], "echo");
}

#[test]
fn search_mode_lists_little_however_many_servers() {
    let mut servers = Vec::new();
    for i in 0..30 {
        servers.push((
            format!("server-number-{i:02}"),
            server("on-demand {\n    idle-stop \"60s\"\n}\n"),
        ));
    }
    let refs: Vec<(&str, String)> = servers
        .iter()
        .map(|(n, k)| (n.as_str(), k.clone()))
        .collect();
    let (d, gw) = start("aggregate {\n    mode \"search\"\n}\n", &refs);
    wait_for("every server is idle", DEADLINE, || {
        servers.iter().all(|(n, _)| d.entry(n)["state"] == "idle")
    });
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), Era::V2025);
    let r = c.request("tools/list", json!({}));
    let body = serde_json::to_vec(r.response()).unwrap();
    assert!(body.len() <= 6000, "{} bytes", body.len());
    assert_eq!(names(&r.response()["result"]), ["call_tool", "find_tools"]);
    // Listing search mode's two tools wakes nobody.
    assert!(servers.iter().all(|(n, _)| d.entry(n)["state"] == "idle"));
}

/// The JSON lines an SDK client script printed, once it succeeded.
fn sdk_lines(out: &std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "the SDK client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The official Python SDK's client (from the interop cache) through the
/// aggregate in each of its ways to pick an era: it lists, and calls a
/// prefixed tool, as it would any server.
#[test]
fn the_python_sdk_uses_the_aggregate_in_both_eras() {
    let test = "the_python_sdk_uses_the_aggregate_in_both_eras";
    let sdk = match xy_testbins::interop::python_sdk() {
        xy_testbins::interop::Interop::Ready(sdk) => sdk,
        xy_testbins::interop::Interop::Skip(skip) => return skip.announce(test),
    };
    let (_d, gw) = start("", &[("alpha", server("")), ("beta", server(""))]);
    let script = tempfile::NamedTempFile::with_suffix(".py").unwrap();
    std::fs::write(
        script.path(),
        r#"
import asyncio, json, sys
from mcp import Client

async def main(url):
    for mode in ["legacy", "2026-07-28", "auto"]:
        async with Client(url, mode=mode, raise_exceptions=True, cache=None) as c:
            tools = sorted(t.name for t in (await c.list_tools()).tools)
            r = await c.call_tool("beta__echo", {"text": "py " + mode})
            text = [x.text for x in r.content if getattr(x, "type", None) == "text"]
            print(json.dumps({"mode": mode, "version": c.protocol_version,
                              "tools": tools, "text": text}))

asyncio.run(main(sys.argv[1]))
"#,
    )
    .unwrap();
    let out = std::process::Command::new(&sdk.python)
        .arg(script.path())
        .arg(format!("http://127.0.0.1:{gw}/mcp"))
        .output()
        .expect("python runs");
    let lines = sdk_lines(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        assert_eq!(l["tools"].as_array().unwrap().len(), 6, "{l}");
        assert_eq!(
            l["text"][0],
            format!("py {}", l["mode"].as_str().unwrap()),
            "{l}"
        );
    }
    assert!(
        lines[0]["version"].as_str().unwrap().starts_with("2025"),
        "{lines:?}"
    );
    assert_eq!(lines[1]["version"], "2026-07-28", "{lines:?}");
    assert_eq!(lines[2]["version"], "2026-07-28", "{lines:?}");
}

/// The official TypeScript client SDK (v2) through the aggregate in each
/// of its era modes: the 2025 handshake, `server/discover` first, and a
/// pin of 2026-07-28 all list every prefixed tool and call one.
#[test]
fn the_typescript_sdk_uses_the_aggregate_in_both_eras() {
    let test = "the_typescript_sdk_uses_the_aggregate_in_both_eras";
    let ts = match xy_testbins::interop::ts_client() {
        xy_testbins::interop::Interop::Ready(ts) => ts,
        xy_testbins::interop::Interop::Skip(skip) => return skip.announce(test),
    };
    let (_d, gw) = start("", &[("alpha", server("")), ("beta", server(""))]);
    let out = ts
        .command(&format!("http://127.0.0.1:{gw}/mcp"), "beta__echo")
        .output()
        .expect("node runs");
    let lines = sdk_lines(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        assert_eq!(
            l["tools"],
            json!([
                "alpha__echo",
                "alpha__progress",
                "alpha__touch",
                "beta__echo",
                "beta__progress",
                "beta__touch"
            ]),
            "{l}"
        );
        assert_eq!(
            l["text"][0],
            format!("ts {}", l["mode"].as_str().unwrap()),
            "{l}"
        );
    }
    assert_eq!(lines[0]["era"], "legacy", "{lines:?}");
    assert!(
        lines[0]["version"].as_str().unwrap().starts_with("2025"),
        "{lines:?}"
    );
    for l in &lines[1..] {
        assert_eq!(l["era"], "modern", "{l}");
        assert_eq!(l["version"], "2026-07-28", "{l}");
    }
}

#[test]
fn an_approval_reaches_the_aggregate_as_list_changed() {
    let (d, gw) = start(
        "profile \"search\" {\n    mode \"search\"\n}\n",
        &[("held", server("firewall {\n    mode \"review\"\n}\n"))],
    );
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let mut c = Mcp::connected(&url, Era::V2025);
    let mut s = Mcp::connected(&format!("http://127.0.0.1:{gw}/p/search/mcp"), Era::V2025);
    let find = |s: &mut Mcp| {
        let r = s.result(
            "tools/call",
            json!({"name": "find_tools", "arguments": {"query": "echo text"}}),
        );
        names(&r["structuredContent"])
    };
    wait_for("held is listed by xy", DEADLINE, || {
        d.result("tools", Some(json!({"name": "held"})))["current"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    });
    assert!(names(&c.result("tools/list", json!({}))).is_empty());
    // Searched before the approval: what the view offers and its index
    // are kept from here on, and must not outlive the approval.
    assert!(find(&mut s).is_empty());
    let stream = c.listen();
    d.result(
        "tools_approve",
        Some(json!({"name": "held", "tools": ["echo"]})),
    );
    stream.expect("notifications/tools/list_changed");
    assert_eq!(names(&c.result("tools/list", json!({}))), ["held__echo"]);
    let r = c.result(
        "tools/call",
        json!({"name": "held__echo", "arguments": {"text": "approved"}}),
    );
    assert_eq!(text(&r), "approved", "{r}");
    assert_eq!(find(&mut s), ["held__echo"]);
    let r = s.result(
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "held__echo", "arguments": {"text": "found"}}}),
    );
    assert_eq!(text(&r), "found", "{r}");
}

/// An HTTP server (rmcp's streamable HTTP, whose SSE answers begin with an
/// empty priming event) is in the aggregate like a bridged one, in both
/// eras, and its tools are callable through it.
#[test]
fn an_http_server_is_in_the_aggregate_in_both_eras() {
    let port = free_port();
    let web = format!(
        "command \"{}\"\nargs \"--port\" \"{port}\" \"--tools\" \"echo\"\nport {port}\n",
        testbin("xy-test-mcp").display()
    );
    let (_d, gw) = start("", &[("web", web), ("alpha", server(""))]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&url, era);
        // xy lists the HTTP server a moment after it runs.
        wait_for("web's tool in the aggregate", DEADLINE, || {
            names(&c.result("tools/list", json!({}))).contains(&"web__echo".to_owned())
        });
        let r = c.result(
            "tools/call",
            json!({"name": "web__echo", "arguments": {"text": "through"}}),
        );
        assert_eq!(text(&r), "through", "{r}");
    }
}

/// SHA-256 of `bytes`, lowercase hex (the system's `sha256sum`).
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut p = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    p.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = p.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}

/// SPEC §26's naming rule as docs/aggregate.md states it: `<server>__<tool>`
/// when that is at most 64 characters of `[A-Za-z0-9_-]`, else the
/// sanitised form cut to 55, `_` and 8 hex digits of SHA-256 of
/// `server NUL tool`; each name calls its own tool. And mode `search`'s
/// two tools with the schemas SPEC §26 gives them: `find_tools {query,
/// limit?, server?}`, `call_tool {name, arguments}`.
#[test]
fn aggregate_names_fit_the_model_apis_and_search_tools_have_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tools.json");
    let long = format!("fetch_{}", "x".repeat(70));
    let own = ["ok-name", "read file.v2", long.as_str(), "üben"];
    let tools: Vec<Value> = own
        .iter()
        .map(|n| json!({"name": n, "description": "A tool.", "inputSchema": {"type": "object"}}))
        .collect();
    std::fs::write(&file, json!({ "tools": tools }).to_string()).unwrap();
    let args = vec!["--file".to_owned(), file.display().to_string()];
    let cfg = crate::stdio::stdio_config(&testbin("xy-test-tools"), &args, free_port(), "");
    let (_d, gw) = start(
        "profile \"s\" {\n    mode \"search\"\n}\n",
        &[("alpha", cfg)],
    );
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), Era::V2025);
    let listed = wait_some("alpha's four tools", DEADLINE, || {
        let l = c.result("tools/list", json!({}));
        (l["tools"].as_array().map(Vec::len) == Some(4)).then_some(l)
    });
    let mut got = names(&listed);
    let mut want: Vec<String> = own
        .iter()
        .map(|t| {
            let plain = format!("alpha__{t}");
            let ok = plain.len() <= 64
                && plain
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
            if ok {
                return plain;
            }
            let clean: String = plain
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                        ch
                    } else {
                        '_'
                    }
                })
                .take(55)
                .collect();
            let hash = sha256_hex(format!("alpha\0{t}").as_bytes());
            format!("{clean}_{}", &hash[..8])
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{listed}");
    for name in &got {
        assert!(name.len() <= 64, "{name}");
        assert!(
            name.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-'),
            "{name}"
        );
        let r = c.result("tools/call", json!({"name": name, "arguments": {}}));
        let said = text(&r);
        assert!(
            said.starts_with("called ") && own.contains(&&said["called ".len()..]),
            "{name}: {r}"
        );
    }
    // Mode search: two tools, their schemas as SPEC §26 writes them.
    let mut s = Mcp::connected(&format!("http://127.0.0.1:{gw}/p/s/mcp"), Era::V2025);
    let list = s.result("tools/list", json!({}));
    let tools = list["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{list}");
    let schema = |n: &str| {
        let t = tools.iter().find(|t| t["name"] == n).unwrap();
        let s = &t["inputSchema"];
        let mut props: Vec<&str> = s["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        props.sort_unstable();
        let mut req: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        req.sort_unstable();
        assert_eq!(s["type"], "object", "{t}");
        (
            props.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(),
            req.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        schema("find_tools"),
        (
            vec!["limit".to_owned(), "query".to_owned(), "server".to_owned()],
            vec!["query".to_owned()]
        )
    );
    assert_eq!(
        schema("call_tool"),
        (
            vec!["arguments".to_owned(), "name".to_owned()],
            vec!["arguments".to_owned(), "name".to_owned()]
        )
    );
    let find = tools.iter().find(|t| t["name"] == "find_tools").unwrap();
    assert_eq!(find["inputSchema"]["properties"]["query"]["type"], "string");
    assert_eq!(
        find["inputSchema"]["properties"]["limit"]["type"],
        "integer"
    );
    assert_eq!(
        find["inputSchema"]["properties"]["server"]["type"],
        "string"
    );
    // A hashed name found and called through `call_tool`.
    let found = s.result(
        "tools/call",
        json!({"name": "find_tools", "arguments": {"query": "fetch", "limit": 1}}),
    );
    let hit = found["structuredContent"]["tools"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(got.contains(&hit), "{found}");
    let r = s.result(
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": hit, "arguments": {}}}),
    );
    assert_eq!(text(&r), format!("called {long}"), "{r}");
}

/// SPEC §19/§24 through the aggregate: a 2026 client that declared no
/// `roots` calls a tool whose child asks for roots while serving it: the
/// request fails with `-32021` and HTTP `400` naming what it needs (the
/// child is not told the client has it), through `tools/call` and
/// `call_tool` alike; a 2026 client that declared `roots` is asked for
/// them (an `InputRequiredResult`) and its retry gets the child's result;
/// a 2025 client gets the child's own error; the server serves on.
#[test]
fn a_capability_the_client_did_not_declare_is_32021_through_the_aggregate() {
    let args: Vec<String> = ["--stdio", "--era", "2025", "--tools", "echo,roots"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let cfg = crate::stdio::stdio_config(&testbin("xy-test-mcp"), &args, free_port(), "");
    let (_d, gw) = start("profile \"s\" {\n    mode \"search\"\n}\n", &[("ask", cfg)]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let mut bare = Mcp::declaring(&url, Era::V2026, json!({}));
    let r = bare.request("tools/call", json!({"name": "ask__roots", "arguments": {}}));
    let e = &r.response()["error"];
    assert_eq!((r.status, &e["code"]), (400, &json!(-32021)), "{r:?}");
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"roots": {}}),
        "{e}"
    );
    let mut search = Mcp::declaring(
        &format!("http://127.0.0.1:{gw}/p/s/mcp"),
        Era::V2026,
        json!({}),
    );
    let r = search.request(
        "tools/call",
        json!({"name": "call_tool", "arguments": {"name": "ask__roots", "arguments": {}}}),
    );
    let e = &r.response()["error"];
    assert_eq!((r.status, &e["code"]), (400, &json!(-32021)), "{r:?}");
    // Declared: asked, then answered.
    let mut rooted = Mcp::declaring(&url, Era::V2026, json!({"roots": {}}));
    let asked = rooted.result("tools/call", json!({"name": "ask__roots", "arguments": {}}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let reqs = asked["inputRequests"].as_object().expect("inputRequests");
    let (key, q) = reqs.iter().next().unwrap();
    assert_eq!(q["method"], "roots/list", "{asked}");
    let done = rooted.result(
        "tools/call",
        json!({"name": "ask__roots", "arguments": {},
            "inputResponses": {key: {"roots": [{"uri": "file:///w", "name": "w"}]}},
            "requestState": asked["requestState"]}),
    );
    assert_eq!(done["resultType"], "complete", "{done}");
    assert!(text(&done).contains("file:///w"), "{done}");
    // A 2025 client: the child's own error, as on the server's endpoint.
    let mut old = Mcp::connected(&url, Era::V2025);
    let r = old.request("tools/call", json!({"name": "ask__roots", "arguments": {}}));
    assert_eq!(r.status, 200, "{r:?}");
    let m = r.response();
    assert!(
        m.get("error").is_some() || m["result"]["isError"] == true,
        "{m}"
    );
    let r = bare.result(
        "tools/call",
        json!({"name": "ask__echo", "arguments": {"text": "on"}}),
    );
    assert_eq!(text(&r), "on", "{r}");
}

/// SPEC §26/§27 without the npm SDK: an MCP Apps server's app-only
/// helper (`_meta.ui.visibility: ["app"]`) is on the server's own endpoint
/// but never in the aggregate's `tools/list` (both eras) nor found by
/// `find_tools`; a tool visible to the model and the app is.
#[test]
fn app_only_tools_never_reach_the_aggregate_or_find_tools() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    std::fs::write(apps.join("clock.html"), "<html><body>clock</body></html>").unwrap();
    std::fs::write(apps.join("board.html"), "<html><body>board</body></html>").unwrap();
    std::fs::write(apps.join("board.visibility"), r#"["app", "model"]"#).unwrap();
    let args = vec!["--dir".to_owned(), dir.path().display().to_string()];
    let port = free_port();
    let cfg = crate::stdio::stdio_config(&testbin("xy-test-skills"), &args, port, "");
    let (_d, gw) = start("profile \"s\" {\n    mode \"search\"\n}\n", &[("k", cfg)]);
    let mut own = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    let listed = wait_some("k's tools approved and listed", DEADLINE, || {
        let l = own.result("tools/list", json!({}));
        let n = names(&l);
        n.contains(&"clock_poll".to_owned()).then_some(n)
    });
    assert!(listed.contains(&"board_poll".to_owned()), "{listed:?}");
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), era);
        let n = names(&c.result("tools/list", json!({})));
        assert!(!n.contains(&"k__clock_poll".to_owned()), "{era:?}: {n:?}");
        assert!(n.contains(&"k__show_clock".to_owned()), "{era:?}: {n:?}");
        assert!(n.contains(&"k__board_poll".to_owned()), "{era:?}: {n:?}");
        let mut s = Mcp::connected(&format!("http://127.0.0.1:{gw}/p/s/mcp"), era);
        let found = s.result(
            "tools/call",
            json!({"name": "find_tools", "arguments": {"query": "clock poll", "limit": 50}}),
        );
        let hits: Vec<&str> = found["structuredContent"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(!hits.contains(&"k__clock_poll"), "{era:?}: {found}");
        assert!(hits.contains(&"k__show_clock"), "{era:?}: {found}");
    }
}

/// SPEC §26: a server that fails (`restart { policy "never" }`, a dirty
/// exit) leaves the aggregate with `list_changed` on open 2025 streams,
/// as a stopped one does.
#[test]
fn a_failed_server_leaves_with_list_changed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tools.json");
    std::fs::write(
        &file,
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}).to_string(),
    )
    .unwrap();
    let args = vec!["--file".to_owned(), file.display().to_string()];
    let frail = crate::stdio::stdio_config(&testbin("xy-test-tools"), &args, free_port(), "")
        .replace(
            "restart {\n    backoff-initial \"100ms\"\n}\n",
            "restart {\n    policy \"never\"\n}\n",
        );
    assert!(frail.contains("policy \"never\""), "{frail}");
    let (d, gw) = start("", &[("alpha", server("")), ("frail", frail)]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let mut c = Mcp::connected(&url, Era::V2025);
    wait_for("frail__t listed", DEADLINE, || {
        names(&c.result("tools/list", json!({}))).contains(&"frail__t".to_owned())
    });
    let stream = c.listen();
    let stream26 = Mcp::connected(&url, Era::V2026).listen();
    let pid = d.running_pid("frail");
    crate::helper::signal(pid, libc::SIGKILL);
    wait_for("frail failed", DEADLINE, || {
        d.entry("frail")["state"] == "failed"
    });
    stream.expect("notifications/tools/list_changed");
    stream26.expect("notifications/tools/list_changed");
    let after = names(&c.result("tools/list", json!({})));
    assert_eq!(after, ["alpha__echo", "alpha__progress", "alpha__touch"]);
}

/// SPEC §19 on the aggregate (docs/aggregate.md "Both eras"): a 2026
/// request is validated as every xy endpoint validates it — `_meta`
/// missing `400`/`-32602`, headers that disagree `400`/`-32020`, another
/// version `400`/`-32022` with the supported ones, a removed method
/// `404`/`-32601` — and a 2025 request needs its session (none `400`, an
/// unknown one `404`); an unknown profile is `404` in both eras.
#[test]
fn the_aggregate_validates_both_eras_as_every_endpoint_does() {
    let (_d, gw) = start("", &[("alpha", server(""))]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    let c = Mcp::new(&url, Era::V2026);
    let v = "2026-07-28";
    let env = json!({"io.modelcontextprotocol/protocolVersion": v,
        "io.modelcontextprotocol/clientCapabilities": {}});
    let heads = |method: &str, version: &str| {
        vec![
            ("MCP-Protocol-Version", version.to_owned()),
            ("Mcp-Method", method.to_owned()),
        ]
    };
    let cases = [
        (
            "no _meta",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            heads("tools/list", v),
            400,
            -32602,
        ),
        (
            "Mcp-Method disagrees",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": env}}),
            heads("prompts/list", v),
            400,
            -32020,
        ),
        (
            "another version",
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta":
                {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                 "io.modelcontextprotocol/clientCapabilities": {}}}}),
            heads("tools/list", "2099-01-01"),
            400,
            -32022,
        ),
        (
            "removed: ping",
            json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": env}}),
            heads("ping", v),
            404,
            -32601,
        ),
        (
            "unknown method",
            json!({"jsonrpc": "2.0", "id": 7, "method": "foo/bar", "params": {"_meta": env}}),
            heads("foo/bar", v),
            404,
            -32601,
        ),
        (
            "removed: initialize",
            json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"_meta": env,
                "protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}),
            heads("initialize", v),
            404,
            -32601,
        ),
    ];
    for (what, body, h, status, code) in cases {
        let r = c.post(&body, &h);
        assert_eq!(
            (r.status, &r.response()["error"]["code"]),
            (status, &json!(code)),
            "{what}: {r:?}"
        );
        if code == -32022 {
            assert_eq!(
                r.response()["error"]["data"]["supported"],
                json!([v]),
                "{r:?}"
            );
        }
    }
    // 2025: a session is needed, an unknown one is gone.
    let list = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}});
    let r = c.post(&list, &[("MCP-Protocol-Version", "2025-11-25".to_owned())]);
    assert_eq!(r.status, 400, "{r:?}");
    let r = c.post(
        &list,
        &[
            ("MCP-Protocol-Version", "2025-11-25".to_owned()),
            ("Mcp-Session-Id", "not-a-session".to_owned()),
        ],
    );
    assert_eq!(r.status, 404, "{r:?}");
    // An unknown profile, 2026 era.
    let mut none = Mcp::new(&format!("http://127.0.0.1:{gw}/p/nope/mcp"), Era::V2026);
    let r = none.request("tools/list", json!({}));
    assert_eq!(r.status, 404, "{r:?}");
    let msg = r.response()["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("nope"), "{msg}");
}

/// docs/aggregate.md's collision rule, black-box: servers `a` (tool
/// `b__c`) and `a__b` (tool `c`) both make `a__b__c`, so both take 16 hex
/// digits of SHA-256 of `server NUL tool`; a server named `my.server`
/// gets the sanitised form with 8. Each name calls its own server's tool.
#[test]
fn colliding_aggregate_names_both_take_the_longer_hash() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |tool: &str| {
        let file = dir.path().join(format!("{tool}.json"));
        std::fs::write(
            &file,
            json!({"tools": [{"name": tool, "inputSchema": {"type": "object"}}]}).to_string(),
        )
        .unwrap();
        let args = vec!["--file".to_owned(), file.display().to_string()];
        crate::stdio::stdio_config(&testbin("xy-test-tools"), &args, free_port(), "")
    };
    let (_d, gw) = start(
        "",
        &[
            ("a", cfg("b__c")),
            ("a__b", cfg("c")),
            ("my.server", cfg("read")),
        ],
    );
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), Era::V2025);
    let got = wait_some("three tools", DEADLINE, || {
        let n = names(&c.result("tools/list", json!({})));
        (n.len() == 3).then_some(n)
    });
    let h = |s: &str, t: &str| sha256_hex(format!("{s}\0{t}").as_bytes());
    let mut want = vec![
        format!("a__b__c_{}", &h("a", "b__c")[..16]),
        format!("a__b__c_{}", &h("a__b", "c")[..16]),
        format!("my_server__read_{}", &h("my.server", "read")[..8]),
    ];
    want.sort();
    assert_eq!(got, want);
    for (name, own) in [(&want[0], None), (&want[1], None), (&want[2], Some("read"))] {
        let r = c.result("tools/call", json!({"name": name, "arguments": {}}));
        let said = text(&r);
        match own {
            Some(t) => assert_eq!(said, format!("called {t}"), "{r}"),
            None => assert!(said == "called b__c" || said == "called c", "{r}"),
        }
    }
    let a = text(&c.result(
        "tools/call",
        json!({"name": format!("a__b__c_{}", &h("a", "b__c")[..16]), "arguments": {}}),
    ));
    assert_eq!(a, "called b__c");
}

/// SPEC §26: the aggregate's prompts are every server's, named
/// `<server>__<prompt>`, and `prompts/get` reaches the owning server under
/// the prompt's own name; resources keep their URIs and `resources/read`
/// reaches the server listing them — both eras.
#[test]
fn prompts_and_resources_of_every_server_through_the_aggregate() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lists.json");
    std::fs::write(
        &file,
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
               "prompts": [{"name": "hello", "description": "Says hello."}]})
        .to_string(),
    )
    .unwrap();
    let args = vec!["--file".to_owned(), file.display().to_string()];
    let p = crate::stdio::stdio_config(&testbin("xy-test-tools"), &args, free_port(), "");
    let skills = dir.path().join("k");
    let md = skills.join("skills/greet/SKILL.md");
    std::fs::create_dir_all(md.parent().unwrap()).unwrap();
    std::fs::write(
        &md,
        "---\nname: greet\ndescription: Greets.\n---\n# Greet\n",
    )
    .unwrap();
    let kargs = vec!["--dir".to_owned(), skills.display().to_string()];
    let k = crate::stdio::stdio_config(&testbin("xy-test-skills"), &kargs, free_port(), "");
    let (_d, gw) = start("", &[("pr", p), ("k", k)]);
    let url = format!("http://127.0.0.1:{gw}/mcp");
    for era in [Era::V2025, Era::V2026] {
        let mut c = Mcp::connected(&url, era);
        let prompts = wait_some("pr's prompt", DEADLINE, || {
            let r = c.result("prompts/list", json!({}));
            (!r["prompts"].as_array()?.is_empty()).then_some(r)
        });
        let names: Vec<&str> = prompts["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(names, ["pr__hello"], "{era:?}: {prompts}");
        let got = c.result("prompts/get", json!({"name": "pr__hello"}));
        assert_eq!(
            got["messages"][0]["content"]["text"], "got hello",
            "{era:?}: {got}"
        );
        let res = wait_some("k's resources", DEADLINE, || {
            let r = c.result("resources/list", json!({}));
            let uris: Vec<String> = r["resources"]
                .as_array()?
                .iter()
                .filter_map(|r| r["uri"].as_str().map(str::to_owned))
                .collect();
            uris.contains(&"skill://greet/SKILL.md".to_owned())
                .then_some(uris)
        });
        assert!(res.iter().all(|u| u.starts_with("skill://")), "{res:?}");
        let read = c.result("resources/read", json!({"uri": "skill://greet/SKILL.md"}));
        assert!(
            read["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("# Greet")),
            "{era:?}: {read}"
        );
    }
}
