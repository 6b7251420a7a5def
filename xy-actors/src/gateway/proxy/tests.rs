//! The proxy between a hyper front (standing in for the gateway's
//! listener) and a hyper upstream (standing in for an HTTP server's own
//! port): the seam sees and changes exactly the JSON-RPC it asks for, in
//! JSON and SSE answers; everything else passes byte for byte; hop-by-hop
//! headers stop at the proxy.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use xy_core::firewall::{FirewallMode, Policy, ToolState, digest};
use xy_core::protocol::mcp::CallOutcome;

use super::*;
use crate::mcp::verdicts::Verdicts;
use crate::mcp::verdicts::{Verdict as FwVerdict, without_meta};

/// `web`'s verdicts: `shown` approved, `hidden` pending (held back), in
/// `mode`; a name xy did not list (`held`) is refused.
fn verdicts(mode: FirewallMode) -> Option<Arc<Verdicts>> {
    let mut v = Verdicts {
        server: "web".into(),
        policy: Policy {
            mode,
            seen: true,
            ..Policy::default()
        },
        ..Verdicts::default()
    };
    for (name, state) in [
        ("shown", ToolState::Approved),
        ("hidden", ToolState::Pending),
    ] {
        let item = json!({"name": name});
        if state.visible() {
            v.policy.tools.approved.insert(name.into(), digest(&item));
        }
        v.tools.insert(
            name.into(),
            FwVerdict {
                object: without_meta(&item),
                state,
                reason: "new tool".into(),
            },
        );
    }
    Some(Arc::new(v))
}

type Feed = tokio::sync::broadcast::Receiver<Arc<crate::calls::LiveCall>>;

/// The outcomes recorded so far, with their tools.
fn recorded(feed: &mut Feed) -> Vec<(String, CallOutcome)> {
    let mut out = Vec::new();
    while let Ok(c) = feed.try_recv() {
        out.push((c.record.tool.clone(), c.record.outcome));
    }
    out
}

/// The upstream: `tools/list` answered as JSON, or as SSE (a progress
/// notification, then the response) when the request says `x-sse`; every
/// answer carries the request's headers it was given in `x-seen`, and a
/// hop-by-hop header of its own.
async fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let seen: Vec<String> = req
                        .headers()
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.to_str().unwrap_or("")))
                        .collect();
                    let sse = req.headers().contains_key("x-sse");
                    let path = req.uri().to_string();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "tools": [{"name": "shown"}, {"name": "hidden"}],
                        "path": path,
                        "echo": msg,
                    }});
                    let (kind, text) = if sse {
                        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": 1, "progress": 1, "tools": [{"name": "hidden"}]}});
                        (
                            "text/event-stream",
                            format!("event: message\ndata: {note}\n\nid: 7\ndata: {answer}\n\n"),
                        )
                    } else {
                        ("application/json", answer.to_string())
                    };
                    let r = Response::builder()
                        .header("content-type", kind)
                        .header("x-seen", seen.join(";"))
                        .header("keep-alive", "timeout=5")
                        .body(Full::new(Bytes::from(text)))
                        .unwrap();
                    Ok::<_, Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// The front: every request goes to server `name` at `upstream`'s `/mcp`,
/// decided by `verdicts`, recorded in `calls`.
async fn front(
    verdicts: Option<Arc<Verdicts>>,
    calls: &Calls,
    name: &'static str,
    upstream: SocketAddr,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::new(Some(calls.clone()));
    let url = format!("http://{upstream}/mcp");
    tokio::spawn(async move {
        loop {
            let (s, _) = listener.accept().await.unwrap();
            let proxy = proxy.clone();
            let url = url.clone();
            let verdicts = verdicts.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let proxy = proxy.clone();
                    let url = url.clone();
                    let verdicts = verdicts.clone();
                    async move {
                        Ok::<_, Infallible>(
                            proxy
                                .forward(
                                    name,
                                    &url,
                                    ServerState::Running,
                                    Firewall {
                                        verdicts,
                                        relist: None,
                                        log: None,
                                    },
                                    None,
                                    req,
                                )
                                .await,
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

async fn post(addr: SocketAddr, body: &str, headers: &[(&str, &str)]) -> Answer {
    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::post("/web/mcp?x=1")
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = tx
        .send_request(req.body(Full::new(Bytes::from(body.to_owned()))).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn sse_messages(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|e| {
            let data: String = e.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            serde_json::from_str(&data).ok()
        })
        .collect()
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#;

#[tokio::test]
async fn the_firewall_filters_a_json_tools_list() {
    let calls = Calls::new(None);
    let addr = front(verdicts(FirewallMode::Pin), &calls, "web", upstream().await).await;
    let a = post(addr, LIST, &[]).await;
    assert_eq!(a.status, 200);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["result"]["tools"], json!([{"name": "shown"}]), "{v}");
    assert_eq!(v["result"]["path"], "/mcp?x=1");
}

#[tokio::test]
async fn the_firewall_filters_the_sse_event_of_the_response_only() {
    let calls = Calls::new(None);
    let addr = front(verdicts(FirewallMode::Pin), &calls, "web", upstream().await).await;
    let a = post(addr, LIST, &[("x-sse", "1")]).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.headers["content-type"], "text/event-stream");
    let msgs = sse_messages(&a.body);
    assert_eq!(msgs.len(), 2, "{}", a.body);
    // The notification passed as it was; the response was filtered and
    // kept its `id:` line.
    assert_eq!(msgs[0]["params"]["tools"], json!([{"name": "hidden"}]));
    assert_eq!(msgs[1]["result"]["tools"], json!([{"name": "shown"}]));
    assert!(a.body.contains("id: 7\ndata: "), "{}", a.body);
}

#[tokio::test]
async fn the_firewall_answers_a_refused_call_without_the_child_and_records_calls() {
    let calls = Calls::new(None);
    let mut feed = calls.subscribe();
    let addr = front(verdicts(FirewallMode::Pin), &calls, "web", upstream().await).await;
    let call = r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"held"}}"#;
    let a = post(addr, call, &[("mcp-session-id", "s1")]).await;
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["id"], "c1");
    assert_eq!(v["result"]["isError"], true);
    assert_eq!(a.headers["mcp-session-id"], "s1");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("xyctl tools approve web held")
    );
    let ok = r#"{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"shown"}}"#;
    let a = post(addr, ok, &[("x-sse", "1")]).await;
    assert_eq!(sse_messages(&a.body)[1]["id"], "c2");
    assert_eq!(
        recorded(&mut feed),
        [
            ("held".to_owned(), CallOutcome::HeldBack),
            ("shown".to_owned(), CallOutcome::Ok)
        ]
    );
    // A batch cannot carry a watched method past the seam.
    let batch = format!("[{LIST}]");
    assert_eq!(post(addr, &batch, &[]).await.status, 400);
}

#[tokio::test]
async fn other_traffic_takes_the_fast_path_unchanged() {
    let calls = Calls::new(None);
    let up = upstream().await;
    let addr = front(verdicts(FirewallMode::Pin), &calls, "web", up).await;
    // A method the seam does not want, by header (2026) and by body (2025).
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for headers in [&[("mcp-method", "ping")][..], &[]] {
        let a = post(addr, ping, headers).await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 2);
    }
    // A server in mode `off`: tools/list is not parsed, a call passes.
    let mut feed = calls.subscribe();
    let addr = front(verdicts(FirewallMode::Off), &calls, "web", up).await;
    let a = post(addr, LIST, &[]).await;
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 2);
    let call = r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"held"}}"#;
    let a = post(addr, call, &[]).await;
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert!(v["result"].get("isError").is_none(), "{v}");
    assert_eq!(recorded(&mut feed), [("held".to_owned(), CallOutcome::Ok)]);
    // Even in `off`, a batch cannot carry a call past the recording.
    assert_eq!(post(addr, &format!("[{call}]"), &[]).await.status, 400);
    assert!(recorded(&mut feed).is_empty());
}

#[tokio::test]
async fn hop_by_hop_headers_stop_at_the_proxy_and_mcp_headers_pass() {
    let calls = Calls::new(None);
    let addr = front(None, &calls, "web", upstream().await).await;
    let a = post(
        addr,
        LIST,
        &[
            ("mcp-session-id", "abc"),
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "x"),
            ("last-event-id", "5"),
            ("accept", "application/json, text/event-stream"),
            ("connection", "x-private"),
            ("x-private", "secret"),
            ("te", "trailers"),
        ],
    )
    .await;
    let seen = a.headers["x-seen"].to_str().unwrap().to_owned();
    for want in [
        "mcp-session-id=abc",
        "mcp-protocol-version=2025-11-25",
        "mcp-method=tools/list",
        "mcp-name=x",
        "last-event-id=5",
        "accept=application/json, text/event-stream",
        "content-type=application/json",
    ] {
        assert!(seen.contains(want), "{want} not passed: {seen}");
    }
    for gone in ["x-private", "te=", "connection="] {
        assert!(!seen.contains(gone), "{gone} passed: {seen}");
    }
    assert!(!a.headers.contains_key("keep-alive"), "{:?}", a.headers);
    // The child was asked as itself, not as the gateway.
    assert!(seen.contains("host=127.0.0.1:"), "{seen}");
    assert!(!seen.contains(&format!("host={addr}")), "{seen}");
}

#[tokio::test]
async fn a_call_to_an_unreachable_child_is_502_and_recorded_as_child_gone() {
    let calls = Calls::new(None);
    let mut feed = calls.subscribe();
    // A port nothing listens on: bound, then freed.
    let gone = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let addr = front(verdicts(FirewallMode::Pin), &calls, "web", gone).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shown"}}"#;
    let a = post(addr, call, &[]).await;
    assert_eq!(a.status, 502, "{}", a.body);
    assert_eq!(
        recorded(&mut feed),
        [("shown".to_owned(), CallOutcome::ChildGone)]
    );
}

#[test]
fn events_end_at_a_blank_line() {
    assert_eq!(event_end(b"data: 1\n\nrest"), Some(9));
    assert_eq!(event_end(b"data: 1\r\n\r\n"), Some(11));
    assert_eq!(event_end(b"data: 1\ndata: 2\n"), None);
    assert_eq!(event_end(b""), None);
    assert_eq!(event_end(b"\n\n"), Some(2));
}

#[tokio::test(start_paused = true)]
async fn inspected_bodies_are_held_within_the_gateways_room() {
    let body = || Full::new(Bytes::from_static(b"0123456789"));
    let room = Arc::new(Semaphore::new(20));
    let (bytes, held) = read_bounded(body(), 100, &room).await.ok().unwrap();
    assert_eq!(&bytes[..], b"0123456789");
    assert_eq!(room.available_permits(), 10, "the bytes are held");
    drop(held);
    assert_eq!(room.available_permits(), 20);
    // No room: refused after the wait, nothing kept.
    let small = Arc::new(Semaphore::new(5));
    assert!(matches!(
        read_bounded(body(), 100, &small).await,
        Err(ReadError::Busy)
    ));
    assert_eq!(small.available_permits(), 5);
    assert!(matches!(
        read_bounded(body(), 4, &room).await,
        Err(ReadError::TooLarge)
    ));
}
