//! The stdio ↔ streamable-HTTP relay behind `xyctl connect` (SPEC §14):
//! each JSON-RPC line read on stdin is POSTed to the server's xy endpoint
//! with the headers its era needs, and every message in the answer (a JSON
//! body or an SSE stream) is written to stdout as one line. Blocking I/O
//! (`ureq`) on plain threads: no async runtime, so `xyctl`'s other commands
//! start no faster or slower for it.
//!
//! Eras (SPEC §12): a 2026 request carries its version in
//! `_meta["io.modelcontextprotocol/protocolVersion"]`; it is sent with
//! `MCP-Protocol-Version`, `Mcp-Method` and (for named methods) `Mcp-Name`,
//! and no session. A 2025 client opens a session with `initialize`: the
//! bridge keeps the `Mcp-Session-Id` the server mints and sends it, with the
//! negotiated version, on every later message; it ends the session with
//! `DELETE` when stdin closes.
//!
//! Sessions outlive restarts of the server's child, but not a stop (SPEC
//! §18). When the server answers `404` (session gone), the relay opens a
//! new session by itself: it replays the client's own `initialize` and
//! `notifications/initialized` (it saw both), keeps the answer to itself,
//! and sends the failed message again in the new session, so the stdio
//! client never notices.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{Value, json};

/// The `_meta` key of a 2026 request's protocol version.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// What the bridge keeps between messages.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    /// `Mcp-Session-Id` minted by the server (2025).
    pub(crate) id: Option<String>,
    /// The version `initialize` negotiated (2025).
    pub(crate) version: Option<String>,
}

/// One message read from stdin, classified.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outgoing {
    /// The line, forwarded verbatim.
    pub(crate) body: String,
    /// The request id (`None` for notifications and responses).
    pub(crate) id: Option<Value>,
    /// The method (`None` for responses to server requests).
    pub(crate) method: Option<String>,
    /// HTTP headers this message needs, given the session.
    pub(crate) headers: Vec<(&'static str, String)>,
}

/// Classifies `line` and picks its headers. `Err` carries the JSON-RPC
/// parse error to answer with when the line is not JSON.
pub(crate) fn outgoing(line: &str, session: &Session) -> Result<Outgoing, Value> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("parse error: {e}")}})
    })?;
    let method = v.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = v
        .get("id")
        .filter(|i| !i.is_null() && method.is_some())
        .cloned();
    let mut headers = Vec::new();
    let modern = v
        .pointer("/params/_meta")
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    match (modern, &method) {
        (Some(version), Some(m)) => {
            headers.push(("MCP-Protocol-Version", version.to_owned()));
            headers.push(("Mcp-Method", m.clone()));
            let name = match m.as_str() {
                "tools/call" | "prompts/get" => v.pointer("/params/name"),
                "resources/read" => v.pointer("/params/uri"),
                _ => None,
            };
            if let Some(n) = name.and_then(Value::as_str) {
                headers.push(("Mcp-Name", n.to_owned()));
            }
        }
        _ => {
            if let Some(s) = &session.id {
                headers.push(("Mcp-Session-Id", s.clone()));
            }
            if let Some(ver) = &session.version
                && method.as_deref() != Some("initialize")
            {
                headers.push(("MCP-Protocol-Version", ver.clone()));
            }
        }
    }
    Ok(Outgoing {
        body: line.to_owned(),
        id,
        method,
        headers,
    })
}

/// Reads an SSE stream and calls `each` with every event's data (the
/// `data:` lines of one event joined by `\n`), until the stream ends.
pub(crate) fn sse_events(r: impl Read, mut each: impl FnMut(String)) -> std::io::Result<()> {
    let mut data: Option<String> = None;
    for line in BufReader::new(r).lines() {
        let line = line?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            if let Some(d) = data.take() {
                each(d);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(rest);
                }
                None => data = Some(rest.to_owned()),
            }
        }
        // `event:`, `id:`, `retry:` and comments carry nothing for stdio.
    }
    if let Some(d) = data {
        each(d);
    }
    Ok(())
}

/// A JSON-RPC error answer for request `id`.
pub(crate) fn error_reply(id: &Value, code: i64, message: String, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// The relay's shared parts.
struct Shared {
    url: String,
    agent: ureq::Agent,
    session: Mutex<Session>,
    out: Mutex<std::io::Stdout>,
    /// The client's `initialize` line, replayed to open a new session.
    initialize: Mutex<Option<String>>,
    /// Held while a new session is opened: one re-initialisation at a time.
    reinit: Mutex<()>,
}

impl Shared {
    /// Writes one message as one line; a closed stdout ends the process
    /// (the client is gone).
    fn emit(&self, msg: &str) {
        // One message per line: a multi-line body is re-serialised compact;
        // a one-line body goes through byte for byte.
        let msg = msg.trim();
        let compact = if msg.contains('\n') {
            serde_json::from_str::<Value>(msg)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| msg.replace('\n', " "))
        } else {
            msg.to_owned()
        };
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ok = out
            .write_all(compact.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if ok.is_err() {
            std::process::exit(0);
        }
    }

    fn session(&self) -> Session {
        self.session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Runs the bridge until stdin ends; then waits for the answers still
/// coming, ends a 2025 session, and returns.
pub(crate) fn run(url: &str) {
    let agent = crate::http::agent();
    let shared = Arc::new(Shared {
        url: url.to_owned(),
        agent,
        session: Mutex::new(Session::default()),
        out: Mutex::new(std::io::stdout()),
        initialize: Mutex::new(None),
        reinit: Mutex::new(()),
    });
    let mut inflight: Vec<JoinHandle<()>> = Vec::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let msg = match outgoing(&line, &shared.session()) {
            Ok(m) => m,
            Err(reply) => {
                shared.emit(&reply.to_string());
                continue;
            }
        };
        inflight.retain(|h| !h.is_finished());
        // `initialize` is answered before the client sends anything else,
        // and the session it opens must be known to what follows: run it
        // inline. A notification (and an answer to a server's request) is
        // delivered before the next line is read, so it reaches the
        // server before any request the client wrote after it — a strict
        // server refuses a request that overtakes `notifications/initialized`
        // (SPEC §25); the server accepts those at once (`202`). Requests run
        // beside each other, so a long tool call does not hold up a `ping`.
        if msg.method.as_deref() == Some("initialize") {
            *lock(&shared.initialize) = Some(msg.body.clone());
            post(&shared, &msg);
            let s = Arc::clone(&shared);
            // Detached: it ends with the server's stream or the process.
            std::thread::spawn(move || listen(&s));
        } else if msg.id.is_none() {
            post(&shared, &msg);
        } else {
            let s = Arc::clone(&shared);
            inflight.push(std::thread::spawn(move || post(&s, &msg)));
        }
    }
    for h in inflight {
        let _ = h.join();
    }
    if let Some(id) = shared.session().id {
        let _ = shared
            .agent
            .delete(&shared.url)
            .header("Mcp-Session-Id", &id)
            .call();
    }
}

/// The 2025 GET stream: server-initiated messages (list-changed
/// notifications, requests) of the session, forwarded as they come. A
/// server without one (405) or without a session is left alone.
fn listen(shared: &Arc<Shared>) {
    let session = shared.session();
    let (Some(id), Some(version)) = (session.id, session.version) else {
        return;
    };
    let Ok(resp) = shared
        .agent
        .get(&shared.url)
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &id)
        .header("MCP-Protocol-Version", &version)
        .call()
    else {
        return;
    };
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if resp.status().is_success() && sse {
        let _ = sse_events(resp.into_body().into_reader(), |m| {
            if !m.trim().is_empty() {
                shared.emit(&m);
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a message sent in a 2025 session is worth a new session when
/// the server says that session is gone: requests and notifications (an
/// answer to a server request belonged to the old session).
fn retry_in_new_session(msg: &Outgoing) -> bool {
    msg.method.is_some()
        && msg.method.as_deref() != Some("initialize")
        && msg.headers.iter().any(|(k, _)| *k == "Mcp-Session-Id")
}

/// Opens a new session in place of `gone` by replaying the client's
/// `initialize` and `notifications/initialized`; the answer stays here (the
/// client has its own already). Another thread may have done it first:
/// then its session is used. Returns whether a session other than `gone`
/// is in place.
fn reinitialize(shared: &Arc<Shared>, gone: &str) -> bool {
    let _one = lock(&shared.reinit);
    let current = shared.session();
    if current.id.as_deref().is_some_and(|id| id != gone) {
        return true;
    }
    let Some(init) = lock(&shared.initialize).clone() else {
        return false;
    };
    let Ok(resp) = shared
        .agent
        .post(&shared.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(init.as_str())
    else {
        return false;
    };
    let Some(id) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        return false;
    };
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut version = current.version.clone();
    let mut learn = |text: String| {
        if let Ok(v) = serde_json::from_str::<Value>(&text)
            && let Some(ver) = v.pointer("/result/protocolVersion").and_then(Value::as_str)
        {
            version = Some(ver.to_owned());
        }
    };
    let body = resp.into_body().into_reader();
    if sse {
        let _ = sse_events(body, &mut learn);
    } else {
        let mut text = String::new();
        let _ = body.take(64 * 1024 * 1024).read_to_string(&mut text);
        learn(text);
    }
    *lock(&shared.session) = Session {
        id: Some(id.clone()),
        version: version.clone(),
    };
    let mut note = shared
        .agent
        .post(&shared.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &id);
    if let Some(v) = &version {
        note = note.header("MCP-Protocol-Version", v);
    }
    let _ = note.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    // The old session's GET stream ended with it.
    let s = Arc::clone(shared);
    std::thread::spawn(move || listen(&s));
    true
}

fn post(shared: &Arc<Shared>, msg: &Outgoing) {
    post_in_session(shared, msg, true);
}

/// POSTs `msg` and relays the answer; `reopen`: on `404`, open a new
/// session and try once more.
fn post_in_session(shared: &Arc<Shared>, msg: &Outgoing, reopen: bool) {
    let mut req = shared
        .agent
        .post(&shared.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in &msg.headers {
        req = req.header(*k, v);
    }
    let resp = match req.send(msg.body.as_str()) {
        Ok(r) => r,
        Err(e) => {
            if let Some(id) = &msg.id {
                let reply = error_reply(
                    id,
                    -32603,
                    format!("xy: cannot reach {}: {e}", shared.url),
                    json!({"url": shared.url}),
                );
                shared.emit(&reply.to_string());
            }
            return;
        }
    };
    let status = resp.status().as_u16();
    // The session is gone (the server was stopped and started): open a new
    // one and send the message again in it, once.
    if status == 404
        && reopen
        && retry_in_new_session(msg)
        && let Some((_, gone)) = msg.headers.iter().find(|(k, _)| *k == "Mcp-Session-Id")
        && reinitialize(shared, gone)
        && let Ok(again) = outgoing(&msg.body, &shared.session())
        && again
            .headers
            .iter()
            .any(|(k, v)| *k == "Mcp-Session-Id" && v != gone)
    {
        post_in_session(shared, &again, false);
        return;
    }
    let header = |k: &str| {
        resp.headers()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type").unwrap_or_default();
    if msg.method.as_deref() == Some("initialize")
        && let Some(sid) = header("mcp-session-id")
    {
        shared
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .id = Some(sid);
    }
    let initialize = msg.method.as_deref() == Some("initialize");
    let mut answered = false;
    let mut forward = |text: String| {
        if text.trim().is_empty() {
            return;
        }
        if initialize
            && let Ok(v) = serde_json::from_str::<Value>(&text)
            && let Some(ver) = v.pointer("/result/protocolVersion").and_then(Value::as_str)
        {
            shared
                .session
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .version = Some(ver.to_owned());
        }
        answered = true;
        shared.emit(&text);
    };
    let body = resp.into_body().into_reader();
    if content_type.starts_with("text/event-stream") {
        let _ = sse_events(body, &mut forward);
    } else {
        let mut text = String::new();
        let _ = body.take(64 * 1024 * 1024).read_to_string(&mut text);
        // A JSON-RPC answer, even on a 4xx, goes through as it is, except
        // that an error the server could not tie to a request (`id: null`,
        // e.g. "session required") is tied to ours: a client waits for
        // its id, and the Python SDK falls back to `initialize` on it.
        if let Ok(mut v) = serde_json::from_str::<Value>(&text)
            && (v.is_object() || v.is_array())
        {
            if let Some(id) = &msg.id
                && v.get("error").is_some()
                && v.get("id").is_none_or(Value::is_null)
            {
                v["id"] = id.clone();
                forward(v.to_string());
            } else {
                forward(text);
            }
        } else if !(200..300).contains(&status)
            && let Some(id) = &msg.id
        {
            forward(http_error(id, status, &text, &shared.url, msg).to_string());
        }
    }
    if !answered
        && (200..300).contains(&status)
        && status != 202
        && let Some(id) = &msg.id
    {
        let reply = error_reply(
            id,
            -32603,
            "xy: the server's answer ended without a reply".to_owned(),
            json!({"http_status": status}),
        );
        shared.emit(&reply.to_string());
    }
}

/// The JSON-RPC error for an HTTP failure without a JSON-RPC body. A 2026
/// request refused with a 4xx reads as "method not found", which is what
/// a client falling back to the 2025 handshake looks for.
fn http_error(id: &Value, status: u16, body: &str, url: &str, msg: &Outgoing) -> Value {
    let modern = msg.headers.iter().any(|(k, _)| *k == "Mcp-Method");
    let code = if modern && (400..500).contains(&status) {
        -32601
    } else {
        -32603
    };
    let snippet: String = body.chars().take(200).collect();
    error_reply(
        id,
        code,
        format!("xy: HTTP {status} from {url}"),
        json!({"http_status": status, "body": snippet}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_requests_get_method_and_name_headers() {
        let line = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let o = outgoing(
            line,
            &Session {
                id: Some("s".into()),
                version: Some("2025-11-25".into()),
            },
        )
        .unwrap();
        assert_eq!(o.id, Some(json!(3)));
        assert_eq!(
            o.headers,
            [
                ("MCP-Protocol-Version", "2026-07-28".to_owned()),
                ("Mcp-Method", "tools/call".to_owned()),
                ("Mcp-Name", "echo".to_owned()),
            ]
        );
        assert_eq!(o.body, line);
    }

    #[test]
    fn legacy_messages_carry_the_session() {
        let none = Session::default();
        let o = outgoing(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            &none,
        )
        .unwrap();
        assert!(o.headers.is_empty());
        let s = Session {
            id: Some("abc".into()),
            version: Some("2025-06-18".into()),
        };
        let o = outgoing(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            &s,
        )
        .unwrap();
        assert_eq!(o.id, None);
        assert_eq!(
            o.headers,
            [
                ("Mcp-Session-Id", "abc".to_owned()),
                ("MCP-Protocol-Version", "2025-06-18".to_owned()),
            ]
        );
        // A response to a server request: no method, no id to answer.
        let o = outgoing(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &s).unwrap();
        assert_eq!((o.id, o.method), (None, None));
    }

    /// Issue 26: on a 404, requests and notifications of a 2025 session
    /// are sent again in a new session; `initialize`, 2026 requests (no
    /// session) and answers to server requests are not.
    #[test]
    fn what_a_new_session_retries() {
        let s = Session {
            id: Some("gone".into()),
            version: Some("2025-06-18".into()),
        };
        let retried = |line: &str| retry_in_new_session(&outgoing(line, &s).unwrap());
        assert!(retried(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#
        ));
        assert!(retried(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#
        ));
        assert!(!retried(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#
        ));
        assert!(!retried(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#));
        assert!(!retried(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#
        ));
        let none = Session::default();
        let o = outgoing(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#, &none).unwrap();
        assert!(!retry_in_new_session(&o), "no session, nothing to reopen");
    }

    #[test]
    fn bad_json_is_answered_with_a_parse_error() {
        let e = outgoing("{nope", &Session::default()).unwrap_err();
        assert_eq!(e["error"]["code"], -32700);
    }

    #[test]
    fn sse_events_are_split_and_joined() {
        let stream = "event: message\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\n: keepalive\n\ndata: {\"b\":\ndata: 2}\n\ndata: tail";
        let mut got = Vec::new();
        sse_events(stream.as_bytes(), |d| got.push(d)).unwrap();
        assert_eq!(got, ["{\"a\":1}", "{\"b\":\n2}", "tail"]);
    }

    #[test]
    fn http_errors_of_modern_requests_read_as_method_not_found() {
        let modern = outgoing(
            r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            &Session::default(),
        )
        .unwrap();
        let v = http_error(&json!(1), 400, "bad", "http://x", &modern);
        assert_eq!(v["error"]["code"], -32601);
        assert_eq!(v["error"]["data"]["http_status"], 400);
        let v = http_error(&json!(1), 500, "", "http://x", &modern);
        assert_eq!(v["error"]["code"], -32603);
    }
}
