//! SPEC §19 against the real `xyd`, over raw HTTP: a 2026-form request is
//! validated as a 2026 server must (whatever era the child speaks), the
//! 2025 forms keep working on the same endpoint, and W3C trace context
//! reaches the child's `_meta` and comes back in the response headers.

use serde_json::{Value, json};

use super::client::{Era, Mcp, V2025, V2026};
use super::{rmcp_config, stdio_config, url};
use crate::helper::{TestDaemon, free_port, testbin};

const PROTOCOL: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";

fn meta() -> Value {
    json!({PROTOCOL: V2026, CAPS: {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

/// The conformant 2026 headers for `method` (and `name`), with `over`
/// replacing or (`None`) removing some of them.
fn heads(
    method: &str,
    name: Option<&str>,
    over: &[(&'static str, Option<&str>)],
) -> Vec<(&'static str, String)> {
    let mut h: Vec<(&'static str, String)> = vec![
        ("MCP-Protocol-Version", V2026.to_owned()),
        ("Mcp-Method", method.to_owned()),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n.to_owned()));
    }
    for (k, v) in over {
        h.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
        if let Some(v) = v {
            h.push((k, (*v).to_owned()));
        }
    }
    h
}

fn body(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// POSTs and checks the refusal: HTTP status, JSON-RPC code, the id echoed.
#[track_caller]
fn refused(
    c: &Mcp,
    body: &Value,
    headers: &[(&'static str, String)],
    status: u16,
    code: i64,
) -> Value {
    let r = c.post(body, headers);
    assert_eq!(r.status, status, "{body} {headers:?}: {r:?}");
    let resp = r.response();
    assert_eq!(resp["error"]["code"], code, "{body} {headers:?}: {r:?}");
    assert_eq!(resp["id"], body["id"], "{r:?}");
    resp.clone()
}

fn validated(era: &str) {
    let port = free_port();
    let d = TestDaemon::start(&[("v", rmcp_config(port, era, ""))]);
    d.running_pid("v");
    let c = Mcp::new(&url(port), Era::V2026);
    let discover = c.post(
        &body(1, "server/discover", json!({"_meta": meta()})),
        &heads("server/discover", None, &[]),
    );
    assert_eq!(discover.status, 200, "{discover:?}");
    let supported = discover.response()["result"]["supportedVersions"].clone();
    assert!(
        supported
            .as_array()
            .is_some_and(|a| a.contains(&json!(V2026))),
        "{discover:?}"
    );

    // _meta: missing, without the version, without the capabilities.
    let list = heads("tools/list", None, &[]);
    refused(&c, &body(2, "tools/list", json!({})), &list, 400, -32602);
    refused(
        &c,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        &list,
        400,
        -32602,
    );
    refused(
        &c,
        &body(4, "tools/list", json!({"_meta": {CAPS: {}}})),
        &list,
        400,
        -32602,
    );
    refused(
        &c,
        &body(5, "tools/list", json!({"_meta": {PROTOCOL: V2026}})),
        &list,
        400,
        -32602,
    );
    // Headers against the body.
    let ok_list = body(6, "tools/list", json!({"_meta": meta()}));
    refused(
        &c,
        &ok_list,
        &heads("tools/list", None, &[("Mcp-Method", Some("prompts/list"))]),
        400,
        -32020,
    );
    refused(
        &c,
        &ok_list,
        &heads("tools/list", None, &[("Mcp-Method", None)]),
        400,
        -32020,
    );
    refused(
        &c,
        &ok_list,
        &heads("tools/list", None, &[("Mcp-Method", Some("TOOLS/LIST"))]),
        400,
        -32020,
    );
    let r = c.post(
        &ok_list,
        &heads("tools/list", None, &[("mcp-method", Some(" tools/list "))]),
    );
    assert_eq!(
        r.status, 200,
        "a lowercase name, spaces around the value: {r:?}"
    );
    let echo = body(
        7,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": meta()}),
    );
    refused(&c, &echo, &heads("tools/call", None, &[]), 400, -32020);
    refused(
        &c,
        &echo,
        &heads("tools/call", Some("touch"), &[]),
        400,
        -32020,
    );
    let r = c.post(
        &echo,
        &heads("tools/call", Some("=?base64?ZWNobw==?="), &[]),
    );
    assert_eq!(r.response()["result"]["content"][0]["text"], "hi", "{r:?}");
    // The version: the header against _meta's, then one nobody speaks.
    let mut odd = meta();
    odd[PROTOCOL] = json!("v999.0.0");
    let discover_odd = body(8, "server/discover", json!({"_meta": odd}));
    refused(
        &c,
        &discover_odd,
        &heads("server/discover", None, &[]),
        400,
        -32020,
    );
    let e = refused(
        &c,
        &discover_odd,
        &heads(
            "server/discover",
            None,
            &[("MCP-Protocol-Version", Some("v999.0.0"))],
        ),
        400,
        -32022,
    );
    assert_eq!(e["error"]["data"]["requested"], "v999.0.0", "{e}");
    assert_eq!(
        e["error"]["data"]["supported"], supported,
        "what discover lists: {e}"
    );
    // Methods the 2026 era removed, and one nobody has (the child says so).
    for (i, m) in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ]
    .into_iter()
    .enumerate()
    {
        refused(
            &c,
            &body(20 + i as u64, m, json!({"_meta": meta()})),
            &heads(m, None, &[]),
            404,
            -32601,
        );
    }
    refused(
        &c,
        &body(30, "unknown/method", json!({"_meta": meta()})),
        &heads("unknown/method", None, &[]),
        404,
        -32601,
    );
    // The 2025 forms on the same endpoint.
    let mut old = Mcp::connected(&url(port), Era::V2025);
    assert!(old.tool_names().contains(&"echo".to_owned()));
    assert_eq!(old.result("ping", json!({})), json!({}));
}

#[test]
fn a_2026_request_to_a_2025_child_is_validated_as_a_2026_server_must() {
    validated("2025");
}

#[test]
fn a_2026_request_to_a_2026_child_is_validated_as_a_2026_server_must() {
    validated("2026");
}

/// `traceparent` and `tracestate` from the HTTP headers reach the child in
/// `_meta` (requests of both eras; a `_meta` value of the request's own
/// wins), and the response carries them back unchanged.
#[test]
fn trace_context_reaches_the_childs_meta_and_comes_back() {
    let port = free_port();
    let d = TestDaemon::start(&[(
        "tr",
        stdio_config(&testbin("xy-test-stdio-raw"), &[], port, ""),
    )]);
    d.running_pid("tr");
    let parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
    let state = "vendor=opaque,other=1";
    let trace = [
        ("traceparent", parent.to_owned()),
        ("tracestate", state.to_owned()),
    ];
    let seen = |c: &Mcp, params: Value, mut headers: Vec<(&'static str, String)>| {
        headers.extend(trace.iter().cloned());
        let resp = c.send(&body(1, "tools/call", params), &headers);
        assert_eq!(resp.status().as_u16(), 200);
        for (k, v) in &trace {
            assert_eq!(
                resp.headers().get(*k).and_then(|h| h.to_str().ok()),
                Some(v.as_str()),
                "{k} comes back"
            );
        }
        let text: String = resp.into_body().read_to_string().unwrap();
        let msg: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let meta = msg["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        serde_json::from_str::<Value>(&meta).unwrap()
    };
    let old = Mcp::connected(&url(port), Era::V2025);
    let m = seen(&old, json!({"name": "meta"}), old.session_headers());
    assert_eq!(
        (m["traceparent"].as_str(), m["tracestate"].as_str()),
        (Some(parent), Some(state)),
        "{m}"
    );
    let new = Mcp::new(&url(port), Era::V2026);
    let m = seen(
        &new,
        json!({"name": "meta", "_meta": meta()}),
        heads("tools/call", Some("meta"), &[]),
    );
    assert_eq!(m["traceparent"], parent, "{m}");
    assert!(
        m.get(PROTOCOL).is_none(),
        "the 2026 envelope is stripped for a 2025 child: {m}"
    );
    let mut own = meta();
    own["traceparent"] = json!("00-11111111111111111111111111111111-2222222222222222-01");
    let m = seen(
        &new,
        json!({"name": "meta", "_meta": own.clone()}),
        heads("tools/call", Some("meta"), &[]),
    );
    assert_eq!(m["traceparent"], own["traceparent"], "the body's own: {m}");
    let _ = V2025;
}
