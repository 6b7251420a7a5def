//! What the console's page may ask of the daemon (SPEC §28): an allow-list
//! of the control socket's methods, called in process (`inproc.rs`), an
//! approval that names the digests the page showed, and the live streams.
//! Nothing here re-implements a method: `tools_approve` is reached only
//! through [`approve`], and `shutdown`, `reload`, `console_code`, OAuth
//! logins and `sandbox_test` not at all.

use bytes::Bytes;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use xy_actors::ConsoleBody;
use xy_core::protocol::mcp::ExpectedDigest;
use xy_core::protocol::{ErrorCode, method};

use super::Console;
use super::reply::{json_answer, json_bytes, ndjson_stream};

/// Methods that only read.
const READ: &[&str] = &[
    method::LIST,
    method::STATUS,
    method::TOOLS,
    method::CALLS,
    method::LOGS,
    method::DAEMON_STATUS,
    method::AUTH_STATUS,
    method::CLIENTS,
];
/// Methods that change something; reached by `POST` with the session token
/// like every API call.
const CHANGE: &[&str] = &[
    method::START,
    method::STOP,
    method::RESTART,
    method::TOOLS_DENY,
];
/// Log lines a page reads at once (a `logs` call without `follow`).
const MAX_LOG_LINES: u64 = 2000;

/// `POST /api/rpc {method, params}` → the daemon's JSON-RPC answer
/// (`{result}` or `{error}`).
pub(crate) async fn rpc(console: &Console, body: Value) -> Response<ConsoleBody> {
    let name = body.get("method").and_then(Value::as_str).unwrap_or("");
    let mut params = body.get("params").cloned().unwrap_or_else(|| json!({}));
    if !READ.contains(&name) && !CHANGE.contains(&name) {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("the console does not call {name:?}"),
        );
    }
    // Streams are `/api/stream`'s; here a read is one answer.
    if let Some(p) = params.as_object_mut() {
        if p.get("follow").is_some_and(|f| f != &json!(false)) {
            return refused(StatusCode::BAD_REQUEST, "follow a stream with /api/stream");
        }
        if name == method::LOGS {
            let tail = p.get("tail").and_then(Value::as_u64).unwrap_or(200);
            p.insert("tail".into(), json!(tail.min(MAX_LOG_LINES)));
        }
    }
    if name == method::LOGS {
        // The lines arrive as notifications before `log_end`.
        let mut line = console.daemon.open().await;
        let mut lines = Vec::new();
        let answer = line.call(name, params, |n| lines.push(n)).await;
        if let Err(e) = answer {
            return json_answer(StatusCode::OK, &json!({"error": e.0}));
        }
        while let Some(n) = line.next_message().await {
            match n.get("method").and_then(Value::as_str) {
                Some(method::LOG) => lines.push(n),
                _ => break,
            }
        }
        let lines: Vec<Value> = lines
            .into_iter()
            .filter_map(|n| n.get("params").cloned())
            .collect();
        return json_answer(StatusCode::OK, &json!({"result": {"lines": lines}}));
    }
    match console.daemon.call_raw(name, params).await {
        Ok(line) => json_bytes(line),
        Err(e) => json_answer(StatusCode::OK, &json!({"error": e.0})),
    }
}

/// `POST /api/approve {name, items: [{name, digest}]}`: `tools_approve
/// {name, expect: items}`, whose server actor approves exactly these items
/// if it still lists each with the digest the page showed, in the same
/// step as it checks; otherwise nothing is approved and the answer is `409`
/// with the daemon's `-32008` error (`data.changed`: each item's digest
/// shown and its digests now).
pub(crate) async fn approve(console: &Console, body: Value) -> Response<ConsoleBody> {
    let server = body.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(items) = body.get("items").and_then(Value::as_array) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "items: [{name, digest}] is missing",
        );
    };
    let mut expect = Vec::new();
    for it in items {
        match (
            it.get("name").and_then(Value::as_str),
            it.get("digest").and_then(Value::as_str),
        ) {
            (Some(n), Some(d)) if !d.is_empty() => expect.push(ExpectedDigest {
                name: n.to_owned(),
                digest: d.to_owned(),
            }),
            _ => {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "every item names the tool and the digest shown",
                );
            }
        }
    }
    if expect.is_empty() {
        return refused(StatusCode::BAD_REQUEST, "no items to approve");
    }
    let params = json!({"name": server, "expect": expect});
    match console.daemon.call(method::TOOLS_APPROVE, params).await {
        Ok(result) => json_answer(StatusCode::OK, &json!({"result": result})),
        Err(e) if e.0.get("code") == Some(&json!(ErrorCode::DigestChanged.code())) => {
            json_answer(StatusCode::CONFLICT, &json!({"error": e.0}))
        }
        Err(e) => json_answer(StatusCode::OK, &json!({"error": e.0})),
    }
}

/// `POST /api/stream {kind, params}`: `events`, `calls` or `logs` followed,
/// one notification's params per line, until the page goes away (the
/// in-memory connection closes with it, which ends the stream in the
/// daemon) or the stream ends.
pub(crate) async fn stream(console: &Console, body: Value) -> Response<ConsoleBody> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut params = body.get("params").cloned().unwrap_or_else(|| json!({}));
    let m = match kind {
        "events" => method::EVENTS,
        "calls" | "logs" => {
            if let Some(p) = params.as_object_mut() {
                p.insert("follow".into(), json!(true));
                if kind == "logs" {
                    let tail = p.get("tail").and_then(Value::as_u64).unwrap_or(0);
                    p.insert("tail".into(), json!(tail.min(MAX_LOG_LINES)));
                } else {
                    p.insert("limit".into(), json!(0));
                }
            }
            if kind == "calls" {
                method::CALLS
            } else {
                method::LOGS
            }
        }
        _ => return refused(StatusCode::BAD_REQUEST, "kind is events, calls or logs"),
    };
    let mut line = console.daemon.open().await;
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let mut early = Vec::new();
    if let Err(e) = line.call(m, params, |n| early.push(n)).await {
        return json_answer(StatusCode::OK, &json!({"error": e.0}));
    }
    tokio::spawn(async move {
        let forward = |n: Value| {
            let mut b = serde_json::to_vec(&n).expect("a Value serialises");
            b.push(b'\n');
            Bytes::from(b)
        };
        for n in early {
            if tx.send(forward(n)).await.is_err() {
                return;
            }
        }
        loop {
            tokio::select! {
                n = line.next_message() => match n {
                    Some(n) => if tx.send(forward(n)).await.is_err() { return },
                    None => return,
                },
                () = tx.closed() => return,
            }
        }
    });
    ndjson_stream(rx)
}

fn refused(status: StatusCode, msg: &str) -> Response<ConsoleBody> {
    json_answer(status, &json!({"error": {"message": msg}}))
}
