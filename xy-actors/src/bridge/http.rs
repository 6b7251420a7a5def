//! The bridge's HTTP side (SPEC §13), on hyper 1: the admission edge
//! (`crate::http::edge`) accepts on `127.0.0.1:<port>` and runs one task per
//! connection, which serves streamable HTTP with [`handle`].
//! Checks (Host/Origin against DNS rebinding, path, 4 MiB cap, the bytes of
//! bodies read ahead of the actor) happen here;
//! every MCP decision is the BridgeActor's, reached by message.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use ractor::ActorRef;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::raw::RawRequest;
use super::route::Out;
use super::route::outbox::{self, Flow, Inbox};
use super::validate::{self, Mirrored, TRACE_KEYS};
use super::{Ack, BridgeMsg, Post};
use crate::http::body::{MAX_BODY, MCP_METHOD, MCP_NAME, PROTOCOL, SESSION};
use crate::mcp::strict;

// Header names are built once: a lookup by `&str` parses the name on every
// request.
static TRACE_HEADERS: [(&str, HeaderName); 2] = [
    (TRACE_KEYS[0], HeaderName::from_static(TRACE_KEYS[0])),
    (TRACE_KEYS[1], HeaderName::from_static(TRACE_KEYS[1])),
];

/// The response body: one JSON document, or an SSE stream fed by the actor
/// (its first message, when one was read ahead, then the exchange's
/// outbox). The body holds the outbox itself: when hyper drops it (the
/// client went away), the actor sees the outbox closed.
pub(crate) enum OutBody {
    Full(Option<Bytes>),
    Sse(Option<Out>, Inbox),
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            OutBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Sse(first, rx) => match first
                .take()
                .map_or_else(|| rx.poll_recv(cx), |m| Poll::Ready(Some(m)))
            {
                Poll::Ready(Some(m)) => {
                    let json = m.into_bytes();
                    let mut s = Vec::with_capacity(json.len() + 24);
                    s.extend_from_slice(b"event: message\ndata: ");
                    s.extend_from_slice(&json);
                    s.extend_from_slice(b"\n\n");
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from(s)))))
                }
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    // A JSON answer's length is known: hyper then sends `Content-Length`
    // instead of chunked framing (fewer bytes, and what clients expect).
    fn is_end_stream(&self) -> bool {
        matches!(self, OutBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            OutBody::Sse(..) => SizeHint::default(),
        }
    }
}

/// What the HTTP side needs to know about its server.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) path: String,
    pub(crate) actor: ActorRef<BridgeMsg>,
    /// Bytes of POST bodies being read or handed to the actor, one permit
    /// a byte ([`BODIES`]).
    pub(crate) bodies: std::sync::Arc<tokio::sync::Semaphore>,
    /// The bridge's queue totals: every exchange's queue counts in them.
    pub(crate) flow: std::sync::Arc<Flow>,
}

/// Bytes of POST bodies one endpoint holds at once before the BridgeActor
/// has taken them (and counts them in its own budget): without it, many
/// concurrent big POSTs to a stopped child are all read into memory before
/// the first is refused.
pub(crate) const BODIES: usize = 8 * 1024 * 1024;
/// How long a POST waits for room to read its body before `503`.
const BODY_WAIT: Duration = Duration::from_secs(10);

/// Starts serving `listener` (already bound by the ServerActor) behind the
/// admission edge (`crate::http::edge`: who, how many, how long).
pub(crate) fn serve(
    listener: std::net::TcpListener,
    server: &str,
    ep: Endpoint,
) -> std::io::Result<crate::http::edge::Listening> {
    let service = move || {
        let ep = ep.clone();
        hyper::service::service_fn(move |req| {
            let ep = ep.clone();
            async move { Ok::<_, Infallible>(handle(req, ep).await) }
        })
    };
    crate::http::edge::listen(
        listener,
        crate::http::edge::Behind::Server(server.into()),
        service,
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response<OutBody> {
    // `to_vec`, not `to_string`: straight into the buffer (D49).
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    json_bytes(status, Bytes::from(bytes))
}

fn json_bytes(status: StatusCode, bytes: Bytes) -> Response<OutBody> {
    let mut r = Response::new(OutBody::Full(Some(bytes)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn rpc_error(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
) -> Response<OutBody> {
    json_response(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

fn empty(status: StatusCode) -> Response<OutBody> {
    let mut r = Response::new(OutBody::Full(None));
    *r.status_mut() = status;
    r
}

fn sse(first: Option<Out>, rx: Inbox, session: Option<&str>) -> Response<OutBody> {
    let mut r = Response::new(OutBody::Sse(first, rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        h.insert(&SESSION, s);
    }
    r
}

/// A host name that names this machine's loopback (DNS rebinding guard).
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    matches!(name, "127.0.0.1" | "localhost" | "::1")
}

/// `Host` must name loopback; an `Origin`, when sent, too.
pub(crate) fn rebinding_check<B>(req: &Request<B>) -> Result<(), &'static str> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !loopback_host(host) {
        return Err("Host must be 127.0.0.1, localhost or [::1]");
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let rest = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if !rest.is_some_and(loopback_host) {
            return Err("Origin must be a loopback origin");
        }
    }
    Ok(())
}

fn header_str<'a, B>(req: &'a Request<B>, name: &HeaderName) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A request on the server's own port: rebinding and path checks, then
/// [`dispatch`].
async fn handle(req: Request<Incoming>, ep: Endpoint) -> Response<OutBody> {
    if let Err(why) = rebinding_check(&req) {
        return rpc_error(StatusCode::FORBIDDEN, Value::Null, -32600, why);
    }
    if req.uri().path() != ep.path {
        return rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            -32600,
            &format!("not found: the MCP endpoint is {}", ep.path),
        );
    }
    dispatch(req, ep).await
}

/// Serves one streamable-HTTP request (POST, GET, DELETE) with the bridge
/// `ep` names, whichever listener it arrived on: the server's own port
/// ([`handle`]) or the gateway, which has checked Host/Origin and routed
/// the path itself.
pub(crate) async fn dispatch(req: Request<Incoming>, ep: Endpoint) -> Response<OutBody> {
    let session = header_str(&req, &SESSION).map(str::to_owned);
    match *req.method() {
        Method::POST => post(req, ep, session).await,
        Method::GET => get(ep, session).await,
        Method::DELETE => delete(ep, session).await,
        _ => {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// Reads and drops the body of a request refused before its body was
/// read, in the background: at most [`MAX_BODY`] bytes (a longer body was
/// refused by its declared length already) for at most [`BODY_WAIT`]. A
/// client still writing its body then reads the refusal; were the
/// connection closed with the body unread, the kernel would reset it and
/// the client would see only "connection reset".
fn drain(body: Incoming) {
    tokio::spawn(async move {
        let mut body = Limited::new(body, MAX_BODY);
        let _ = tokio::time::timeout(BODY_WAIT, async {
            while let Some(Ok(_)) = body.frame().await {}
        })
        .await;
    });
}

async fn post(req: Request<Incoming>, ep: Endpoint, session: Option<String>) -> Response<OutBody> {
    // A call's duration runs from here (SPEC §20: arrival at xy).
    let (at, arrived) = (std::time::SystemTime::now(), tokio::time::Instant::now());
    let user_agent = req.headers().get(header::USER_AGENT).cloned();
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            Value::Null,
            -32600,
            "request body over 4 MiB",
        )
    };
    if req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY as u64)
    {
        return too_large();
    }
    let want = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(MAX_BODY as u32, |n| n.max(1));
    // Held until the actor has the message (its ack).
    let bodies = std::sync::Arc::clone(&ep.bodies);
    let Ok(Ok(room)) = tokio::time::timeout(BODY_WAIT, bodies.acquire_many_owned(want)).await
    else {
        drain(req.into_body());
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            -32000,
            "xy: the server is busy: too many request bodies in flight; try again later",
        );
    };
    let header_version = header_str(&req, &PROTOCOL).map(|v| v.trim().to_owned());
    let mcp_method = header_str(&req, &MCP_METHOD).map(str::to_owned);
    let mcp_name = header_str(&req, &MCP_NAME).map(str::to_owned);
    let trace = trace_context(&req);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Err(_) => return empty(StatusCode::BAD_REQUEST),
    };
    // Only what xy reads exactly goes on (SPEC §24, D160): the actor
    // refuses the rest, and records it when it may have been a call.
    if let Err(e) = strict::check(&body) {
        let msg = strict::refused_call(&body).map_or(
            Value::Null,
            |tool| json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": tool}}),
        );
        let (tx, _rx) = outbox::channel(&ep.flow);
        let (ack_tx, ack_rx) = oneshot::channel();
        let post = Post {
            size: body.len(),
            msg,
            raw: None,
            session,
            version: header_version,
            era2026: false,
            outbox: tx,
            ack: ack_tx,
            at,
            arrived,
            user_agent,
        };
        let refused = BridgeMsg::Unreadable {
            post: Box::new(post),
            why: e.to_string(),
        };
        let ack = match ep.actor.cast(refused) {
            Ok(()) => ack_rx.await.ok(),
            Err(_) => None,
        };
        drop(room);
        return match ack {
            Some(Ack::Refused(status, body)) => json_response(status, &body),
            _ => rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                &format!("xy: parse error: the request cannot be read exactly: {e}; not forwarded"),
            ),
        };
    }
    // An ordinary request goes to the actor unparsed (D49): a 2025-form one
    // without trace context to carry into its `_meta`.
    let era2026_header = validate::is_2026_form(header_version.as_deref(), &Value::Null);
    let raw = if era2026_header || !trace.is_empty() {
        None
    } else {
        RawRequest::parse(&body)
    };
    let msg: Value = match raw {
        Some(_) => Value::Null,
        None => match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    Value::Null,
                    -32700,
                    &format!("parse error: {e}"),
                );
            }
        },
    };
    if raw.is_none() && (!msg.is_object() || msg.get("jsonrpc") != Some(&json!("2.0"))) {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "one JSON-RPC 2.0 message per POST (batches are not supported)",
        );
    }
    // A raw request has no `_meta`: it is in 2025 form.
    let era2026 = raw.is_none() && validate::is_2026_form(header_version.as_deref(), &msg);
    if era2026 {
        let mirrored = Mirrored {
            version: header_version.as_deref(),
            method: mcp_method.as_deref(),
            name: mcp_name.as_deref(),
        };
        if let Err(r) = validate::check_2026(mirrored, &msg) {
            return with_trace(json_response(r.status, &r.body), &trace);
        }
    }
    let mut msg = msg;
    carry_trace(&mut msg, &trace);
    let (tx, rx) = outbox::channel(&ep.flow);
    let (ack_tx, ack_rx) = oneshot::channel();
    let post = Post {
        size: body.len(),
        msg,
        raw,
        session,
        version: header_version,
        era2026,
        outbox: tx,
        ack: ack_tx,
        at,
        arrived,
        user_agent,
    };
    if ep.actor.cast(BridgeMsg::Post(Box::new(post))).is_err() {
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            -32603,
            "the server's bridge is restarting",
        );
    }
    let ack = ack_rx.await;
    drop(room);
    let r = match ack {
        Ok(Ack::Accepted) => empty(StatusCode::ACCEPTED),
        Ok(Ack::Refused(status, body)) => json_response(status, &body),
        Ok(Ack::Exchange { session }) => answer(rx, session, era2026).await,
        Err(_) => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            -32603,
            "the server's bridge is restarting",
        ),
    };
    with_trace(r, &trace)
}

/// The request's W3C trace context headers (`traceparent`, `tracestate`)
/// that carry a value.
fn trace_context<B>(req: &Request<B>) -> Vec<(&'static str, HeaderValue)> {
    TRACE_HEADERS
        .iter()
        .filter_map(|(k, name)| req.headers().get(name).map(|v| (*k, v.clone())))
        .filter(|(_, v)| v.to_str().is_ok_and(|s| !s.trim().is_empty()))
        .collect()
}

/// Trace context from the HTTP headers into a request's `_meta` (the keys
/// 2026-07-28 reserves for it, in either era), unless `_meta` names its
/// own: the body is what the child acts on.
fn carry_trace(msg: &mut Value, trace: &[(&'static str, HeaderValue)]) {
    if trace.is_empty() || msg.get("method").is_none() || msg.get("id").is_none() {
        return;
    }
    let Some(meta) = super::era::request_meta_mut(msg) else {
        return;
    };
    for (k, v) in trace {
        if let Ok(v) = v.to_str() {
            meta.entry(*k).or_insert_with(|| json!(v.trim()));
        }
    }
}

/// The response carries the request's trace context back unchanged.
fn with_trace(
    mut r: Response<OutBody>,
    trace: &[(&'static str, HeaderValue)],
) -> Response<OutBody> {
    for (k, v) in trace {
        r.headers_mut().insert(*k, v.clone());
    }
    r
}

/// The HTTP status of a 2026-form request's answer: `404` for an unknown
/// method, `400` for the protocol's refusals ([`validate::status_of_error`]).
fn status_2026(first: &Out) -> StatusCode {
    let code = match first {
        Out::Msg(v) => v.pointer("/error/code").and_then(Value::as_i64),
        // Only an error answer is parsed again.
        Out::Answer(b) if memchr::memmem::find(b, b"\"error\"").is_some() => {
            serde_json::from_slice::<Value>(b)
                .ok()
                .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64))
        }
        Out::Answer(_) | Out::Note { .. } => None,
    };
    code.map_or(StatusCode::OK, validate::status_of_error)
}

/// A plain JSON answer when the first message is the response itself,
/// else an SSE stream that carries what comes before it, then it.
async fn answer(mut rx: Inbox, session: Option<String>, era2026: bool) -> Response<OutBody> {
    let Some(first) = rx.recv().await else {
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Value::Null,
            -32603,
            "the server's bridge closed the request",
        );
    };
    if first.is_response() {
        let status = if era2026 {
            status_2026(&first)
        } else {
            StatusCode::OK
        };
        let mut r = json_bytes(status, first.into_bytes());
        if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
            r.headers_mut().insert(&SESSION, s);
        }
        return r;
    }
    sse(Some(first), rx, session.as_deref())
}

async fn get(ep: Endpoint, session: Option<String>) -> Response<OutBody> {
    let Some(session) = session else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "GET needs an Mcp-Session-Id (2025 era); 2026 clients use subscriptions/listen",
        );
    };
    let (tx, rx) = outbox::channel(&ep.flow);
    let (ack_tx, ack_rx) = oneshot::channel();
    if ep
        .actor
        .cast(BridgeMsg::Listen {
            session: session.clone(),
            outbox: tx,
            ack: ack_tx,
        })
        .is_err()
    {
        return empty(StatusCode::SERVICE_UNAVAILABLE);
    }
    match ack_rx.await {
        Ok(Ack::Exchange { .. }) => sse(None, rx, Some(&session)),
        Ok(Ack::Refused(status, body)) => json_response(status, &body),
        _ => empty(StatusCode::SERVICE_UNAVAILABLE),
    }
}

async fn delete(ep: Endpoint, session: Option<String>) -> Response<OutBody> {
    let Some(session) = session else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "DELETE needs an Mcp-Session-Id",
        );
    };
    let (ack_tx, ack_rx) = oneshot::channel();
    if ep
        .actor
        .cast(BridgeMsg::EndSession {
            session,
            ack: ack_tx,
        })
        .is_err()
    {
        return empty(StatusCode::SERVICE_UNAVAILABLE);
    }
    match ack_rx.await {
        Ok(true) => empty(StatusCode::OK),
        Ok(false) => rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            -32600,
            "unknown session",
        ),
        Err(_) => empty(StatusCode::SERVICE_UNAVAILABLE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8430",
            "localhost:1",
            "localhost",
            "[::1]:8430",
            "[::1]",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:8430",
            "127.0.0.1.evil.com",
            "",
            "[::2]:1",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn trace_context_goes_into_meta_unless_the_body_has_its_own() {
        let req = Request::builder()
            .header("traceparent", " 00-aa-bb-01 ")
            .header("tracestate", "k=v")
            .body(())
            .unwrap();
        let trace = trace_context(&req);
        assert_eq!(trace.len(), 2);
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        carry_trace(&mut m, &trace);
        assert_eq!(
            m["params"]["_meta"],
            json!({"traceparent": "00-aa-bb-01", "tracestate": "k=v"})
        );
        let mut own = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"_meta": {"traceparent": "mine"}}});
        carry_trace(&mut own, &trace);
        assert_eq!(own["params"]["_meta"]["traceparent"], "mine");
        // Notifications and answers carry nothing.
        let mut note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled"});
        carry_trace(&mut note, &trace);
        assert!(note.get("params").is_none());
        let r = with_trace(empty(StatusCode::OK), &trace);
        assert_eq!(
            r.headers()["traceparent"],
            " 00-aa-bb-01 ",
            "back unchanged"
        );
    }

    #[test]
    fn a_2026_answers_error_sets_its_status() {
        let err = |code: i64| Out::Msg(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code}}));
        assert_eq!(status_2026(&err(-32601)), StatusCode::NOT_FOUND);
        assert_eq!(status_2026(&err(-32021)), StatusCode::BAD_REQUEST);
        assert_eq!(status_2026(&err(-32603)), StatusCode::OK);
        let bytes = |t: &'static str| Out::Answer(Bytes::from_static(t.as_bytes()));
        assert_eq!(
            status_2026(&bytes(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}"#
            )),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status_2026(&bytes(
                r#"{"jsonrpc":"2.0","id":1,"result":{"text":"\"error\""}}"#
            )),
            StatusCode::OK
        );
    }

    #[test]
    fn rebinding() {
        let req = |host: &str, origin: Option<&str>| {
            let mut b = Request::builder().header(header::HOST, host);
            if let Some(o) = origin {
                b = b.header(header::ORIGIN, o);
            }
            b.body(()).unwrap()
        };
        assert!(rebinding_check(&req("127.0.0.1:8430", None)).is_ok());
        assert!(rebinding_check(&req("localhost:8430", Some("http://localhost:3000"))).is_ok());
        assert!(rebinding_check(&req("evil.com:8430", None)).is_err());
        assert!(rebinding_check(&req("127.0.0.1:8430", Some("https://evil.com"))).is_err());
        assert!(rebinding_check(&req("127.0.0.1:8430", Some("null"))).is_err());
    }
}
