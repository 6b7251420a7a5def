//! The aggregate's client side (SPEC §26): one JSON-RPC request to one
//! server, sent through the very path a client's request to the gateway's
//! `/<name>/mcp` takes ([`route::serve`]: the server's bridge, or the proxy
//! to an HTTP or remote server, each with its firewall and call records),
//! over an in-memory HTTP/1.1 connection instead of TCP. Whatever a
//! server's own endpoint answers without a child (the ledger), the
//! aggregate gets without one too.
//!
//! The aggregate holds one 2025-era session per server (every server's
//! endpoint takes that era; xy translates for a 2026-only child), minted at
//! the first request and minted again when the endpoint says it is gone
//! (`404`: the server was stopped, or its session expired). A 2026
//! client's call of a bridged server's tool goes stateless in 2026 form
//! instead, with that client's capabilities (D317).
//!
//! What the aggregate reads of an answer is read as strictly as every
//! answer xy forwards (SPEC §24): a message that [`strict::check`] refuses
//! fails the request with the server and the reason named.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::{Mutex, watch};
use xy_core::protocol::mcp::wire::{VERSION_2025, VERSION_2026};

use crate::gateway::proxy::Proxy;
use crate::gateway::route;
use crate::http::body::{MCP_METHOD, MCP_NAME, PROTOCOL, SESSION};
use crate::mcp::strict;
use crate::snapshot::ServerSnapshot;

/// Largest answer the aggregate reads (a big `tools/list` page fits).
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// Bytes the in-memory connection buffers each way.
const PIPE: usize = 256 * 1024;

/// The session the aggregate holds with one server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    /// `Mcp-Session-Id` (`None`: the server keeps no sessions).
    id: Option<String>,
    /// The version the server answered `initialize` with.
    version: String,
    /// The server's `instructions`, for the ranking.
    pub(crate) instructions: Option<String>,
}

/// Why a request to a server got no answer xy can pass on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failed(pub(crate) String);

/// Every server's session, and the path to each.
pub(crate) struct Upstream {
    proxy: Proxy,
    sessions: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<Session>>>>>,
}

impl Upstream {
    pub(crate) fn new(proxy: Proxy) -> Upstream {
        Upstream {
            proxy,
            sessions: std::sync::Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, server: &str) -> Arc<Mutex<Option<Session>>> {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(map.entry(server.to_owned()).or_default())
    }

    /// Forgets `server`'s session (it was removed from the configuration).
    pub(crate) fn forget(&self, server: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(server);
    }

    /// `server`'s instructions, when a session with it holds them.
    pub(crate) fn instructions(&self, server: &str) -> Option<String> {
        let slot = self.slot(server);
        let held = slot.try_lock().ok()?;
        held.as_ref().and_then(|s| s.instructions.clone())
    }

    /// The session with `server`, minted when there is none.
    pub(crate) async fn session(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        wait: Duration,
    ) -> Result<Session, Failed> {
        let slot = self.slot(server);
        let mut held = slot.lock().await;
        if let Some(s) = held.as_ref() {
            return Ok(s.clone());
        }
        let s = self.initialize(server, snap, wait).await?;
        *held = Some(s.clone());
        Ok(s)
    }

    async fn initialize(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        wait: Duration,
    ) -> Result<Session, Failed> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION_2025,
            "capabilities": {},
            "clientInfo": {"name": "xy-aggregate", "version": env!("CARGO_PKG_VERSION")},
        }});
        let (status, id, answer) = self
            .post(server, snap, &init, None, VERSION_2025, wait)
            .await?;
        let answer = answer.ok_or_else(|| {
            Failed(format!(
                "server {server} answered initialize with HTTP {status} and no message"
            ))
        })?;
        if let Some(e) = answer.get("error") {
            return Err(Failed(format!(
                "server {server} refused initialize: {}",
                e.get("message").and_then(Value::as_str).unwrap_or("error")
            )));
        }
        let result = answer.get("result").cloned().unwrap_or_default();
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(VERSION_2025)
            .to_owned();
        let session = Session {
            id,
            version,
            instructions: result
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(
            server,
            snap,
            &note,
            session.id.as_deref(),
            &session.version,
            wait,
        )
        .await?;
        Ok(session)
    }

    /// Sends `method` with `params` to `server` and returns its answer (a
    /// JSON-RPC response: `result` or `error`), within `wait`.
    pub(crate) async fn request(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Result<Value, Failed> {
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        for attempt in 0..2 {
            let session = self.session(server, snap, wait).await?;
            let (status, _, answer) = self
                .post(
                    server,
                    snap,
                    &msg,
                    session.id.as_deref(),
                    &session.version,
                    wait,
                )
                .await?;
            // The session ended (stop, expiry, a daemon restart): mint
            // another, once.
            if status == StatusCode::NOT_FOUND && session.id.is_some() && attempt == 0 {
                *self.slot(server).lock().await = None;
                continue;
            }
            return answer.ok_or_else(|| {
                Failed(format!(
                    "server {server} answered {method} with HTTP {status} and no message"
                ))
            });
        }
        Err(Failed(format!("server {server}: its session keeps ending")))
    }

    /// Whether `server` is a stdio server served by its bridge, which
    /// takes a 2026-era request whatever era its child speaks.
    pub(crate) fn bridged(snap: &watch::Receiver<ServerSnapshot>) -> bool {
        matches!(route::route(&snap.borrow()), route::Route::Bridge(_))
    }

    /// A 2026-era request (`params` carrying its `_meta` envelope) to a
    /// bridged server, stateless, with the headers that mirror it: the
    /// HTTP status and the answer. Used for a 2026 client's call, so that
    /// what the child asks of the client is refused as that client's
    /// (`-32021`, SPEC §19, §24, D317) or asked of it.
    pub(crate) async fn request_2026(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Result<(StatusCode, Value), Failed> {
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name").and_then(Value::as_str),
            "resources/read" => params.get("uri").and_then(Value::as_str),
            _ => None,
        }
        .map(mirrored);
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut extra = vec![(&MCP_METHOD, method.to_owned())];
        if let Some(n) = name {
            extra.push((&MCP_NAME, n));
        }
        let (status, _, answer) = self
            .post_with(server, snap, &msg, None, VERSION_2026, &extra, wait)
            .await?;
        let answer = answer.ok_or_else(|| {
            Failed(format!(
                "server {server} answered {method} with HTTP {status} and no message"
            ))
        })?;
        Ok((status, answer))
    }

    /// One POST through the server's route: its status, the session id it
    /// names, and the answer to `msg` (`None` for a notification, or when
    /// the body held none).
    async fn post(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        msg: &Value,
        session: Option<&str>,
        version: &str,
        wait: Duration,
    ) -> Result<(StatusCode, Option<String>, Option<Value>), Failed> {
        self.post_with(server, snap, msg, session, version, &[], wait)
            .await
    }

    /// [`Self::post`] with `extra` headers.
    #[allow(clippy::too_many_arguments)]
    async fn post_with(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        msg: &Value,
        session: Option<&str>,
        version: &str,
        extra: &[(&HeaderName, String)],
        wait: Duration,
    ) -> Result<(StatusCode, Option<String>, Option<Value>), Failed> {
        let body = Bytes::from(serde_json::to_vec(msg).unwrap_or_default());
        let mut req = Request::builder()
            .method(Method::POST)
            .uri("/mcp")
            .header(header::HOST, "127.0.0.1")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::USER_AGENT, "xy-aggregate")
            .body(Full::new(body))
            .map_err(|e| Failed(format!("server {server}: {e}")))?;
        if let Ok(v) = HeaderValue::from_str(version) {
            req.headers_mut().insert(&PROTOCOL, v);
        }
        if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
            req.headers_mut().insert(&SESSION, s);
        }
        for (k, v) in extra {
            if let Ok(v) = HeaderValue::from_str(v) {
                req.headers_mut().insert(*k, v);
            }
        }
        let id = msg.get("id").cloned();
        let exchange = async {
            let resp = self.send(server, snap, req).await?;
            let status = resp.status();
            let minted = resp
                .headers()
                .get(&SESSION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .or_else(|| session.map(str::to_owned));
            let answer = match id {
                Some(id) => read_answer(server, resp, &id).await?,
                None => None,
            };
            Ok((status, minted, answer))
        };
        tokio::time::timeout(wait, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(Failed(format!(
                    "server {server} did not answer within {}",
                    humantime::format_duration(wait)
                )))
            })
    }

    /// `req` served by the gateway's route to `server`, in memory.
    async fn send(
        &self,
        server: &str,
        snap: &watch::Receiver<ServerSnapshot>,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, Failed> {
        let (near, far) = tokio::io::duplex(PIPE);
        let proxy = self.proxy.clone();
        let name: Arc<str> = server.into();
        let snap = snap.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let found = route::route(&snap.borrow());
            let (proxy, name) = (proxy.clone(), Arc::clone(&name));
            async move { Ok::<_, Infallible>(route::serve(&name, found, &proxy, req).await) }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(far), service)
                .await;
        });
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(near))
            .await
            .map_err(|e| Failed(format!("server {server}: {e}")))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender
            .send_request(req)
            .await
            .map_err(|e| Failed(format!("server {server}: {e}")))
    }
}

/// `v` as an `Mcp-Name` header carries it: as it is when it is visible
/// ASCII without spaces at its ends, else `=?base64?…?=`.
fn mirrored(v: &str) -> String {
    let plain = !v.is_empty()
        && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && !v.starts_with("=?");
    if plain {
        v.to_owned()
    } else {
        use base64::Engine as _;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v)
        )
    }
}

/// The message answering `id` in `resp`: the JSON body, or the SSE event
/// that carries it (events before it, progress and the like, are read and
/// left).
async fn read_answer(
    server: &str,
    resp: Response<Incoming>,
    id: &Value,
) -> Result<Option<Value>, Failed> {
    let sse = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut body = resp.into_body();
    if !sse {
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Failed(format!("server {server}: {e}")))?;
            if let Ok(d) = frame.into_data() {
                if buf.len() + d.len() > MAX_ANSWER {
                    return Err(Failed(format!("server {server}: an answer over 16 MiB")));
                }
                buf.extend_from_slice(&d);
            }
        }
        if buf.is_empty() {
            return Ok(None);
        }
        return parse(server, &buf).map(Some);
    }
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failed(format!("server {server}: {e}")))?;
        let Ok(d) = frame.into_data() else { continue };
        buf.extend_from_slice(&d);
        while let Some(end) = event_end(&buf) {
            let event = buf.split_to(end);
            // No data, or empty data (a priming event, rmcp's `data: `
            // before its answer): nothing to read.
            let Some(data) = event_data(&event).filter(|d| !d.is_empty()) else {
                continue;
            };
            let msg = parse(server, &data)?;
            if msg.get("id") == Some(id) && msg.get("method").is_none() {
                return Ok(Some(msg));
            }
        }
        if buf.len() > MAX_ANSWER {
            return Err(Failed(format!("server {server}: an event over 16 MiB")));
        }
    }
    Ok(None)
}

/// One message, read exactly or refused (SPEC §24).
fn parse(server: &str, bytes: &[u8]) -> Result<Value, Failed> {
    strict::check(bytes).map_err(|e| {
        Failed(format!(
            "server {server}'s answer cannot be read exactly: {e}; not forwarded"
        ))
    })?;
    serde_json::from_slice(bytes).map_err(|e| {
        Failed(format!(
            "server {server}'s answer cannot be read exactly: {e}; not forwarded"
        ))
    })
}

/// Where the first event in `buf` ends (after its blank line), if it has.
fn event_end(buf: &[u8]) -> Option<usize> {
    let mut i = memchr::memchr(b'\n', buf)?;
    loop {
        match buf.get(i + 1..) {
            Some([b'\n', ..]) => return Some(i + 2),
            Some([b'\r', b'\n', ..]) => return Some(i + 3),
            _ => {}
        }
        i += 1 + memchr::memchr(b'\n', buf.get(i + 1..)?)?;
    }
}

/// The `data` of one event (its `data:` lines joined with LF), if any.
fn event_data(event: &[u8]) -> Option<Vec<u8>> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(v) = line.strip_prefix(b"data:") else {
            continue;
        };
        let v = v.strip_prefix(b" ").unwrap_or(v);
        let d = data.get_or_insert_with(Vec::new);
        if !d.is_empty() {
            d.push(b'\n');
        }
        d.extend_from_slice(v);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_end_at_a_blank_line_and_join_their_data() {
        let buf = b"event: message\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata: x\n\nrest";
        let end = event_end(buf).unwrap();
        assert_eq!(event_data(&buf[..end]).unwrap(), b"{\"a\":\n1}");
        let rest = &buf[end..];
        let end2 = event_end(rest).unwrap();
        assert_eq!(event_data(&rest[..end2]).unwrap(), b"x");
        assert_eq!(event_end(&rest[end2..]), None);
        assert_eq!(event_data(b": comment\n\n"), None);
    }

    #[test]
    fn what_cannot_be_read_exactly_is_refused() {
        assert!(parse("s", br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_ok());
        let e = parse("s", br#"{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}"#).unwrap_err();
        assert!(
            e.0.contains("server s") && e.0.contains("not forwarded"),
            "{e:?}"
        );
        assert!(parse("s", br#"{"id":1,"id":2}"#).is_err());
    }
}
