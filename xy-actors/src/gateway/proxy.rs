//! The gateway's reverse proxy to an HTTP server's own port (SPEC §20) or
//! to a remote server's URL (SPEC §23, through its [`Upstream`], which adds
//! the credentials), and where the firewall sees that traffic
//! ([`super::firewall::Exchange`]).
//!
//! Both eras pass as they are: POST, GET and DELETE, every end-to-end header
//! (`Mcp-Session-Id`, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`,
//! `Last-Event-ID`, `Accept`, `Content-Type`, …) with hop-by-hop ones
//! dropped, and bodies streamed both ways: an SSE response or a GET stream
//! reaches the client event by event, as the child writes it.
//!
//! **The firewall.** A POST's JSON-RPC request is read (bounded by the
//! edge's body limit) unless its `Mcp-Method` header names a method the
//! firewall does not want; when its method is one the firewall wants, the
//! request's [`Exchange`] decides it (and may answer it in the child's
//! place); the child's response to it, a JSON body or the SSE `data:`
//! event that carries it, goes through [`Exchange::response`]. Everything
//! else takes the fast path: streamed untouched, never parsed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use xy_core::firewall::FirewallMode;
use xy_core::protocol::ServerState;
use xy_core::protocol::mcp::CallOutcome;

use super::firewall::{Exchange, Firewall, Verdict, wanted};
use super::{down, error};
use crate::calls::Calls;
use crate::http::body::{BoxError, HttpBody, MAX_BODY, MCP_METHOD, SESSION};
use crate::mcp::strict;
use crate::remote::{Upstream, UpstreamError};

/// Largest response body read whole for inspection (a JSON `tools/list`
/// of many large schemas fits); past it, the proxy answers `502`.
const MAX_INSPECTED_RESPONSE: usize = 16 * 1024 * 1024;
/// Largest single SSE event read whole for inspection.
const MAX_EVENT: usize = MAX_INSPECTED_RESPONSE;
/// How long connecting to a child's port may take (loopback: a live child
/// accepts at once, a dead one refuses at once).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle pooled connections to one child are closed after this.
const POOL_IDLE: Duration = Duration::from_secs(30);
/// Idle pooled connections kept per child.
const POOL_MAX_IDLE: usize = 32;
/// Bytes of inspected bodies (requests and responses) the gateway holds at
/// once, one permit a byte: without it, many connections each reading a
/// 16 MiB `tools/list` answer would all be held in memory.
const INSPECT_BYTES: usize = 64 * 1024 * 1024;
/// How long reading an inspected body waits for room before `503`.
const INSPECT_WAIT: Duration = Duration::from_secs(10);

type ReqBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// The HTTP client to the children's ports (connections pooled per port)
/// and where calls are recorded.
#[derive(Clone)]
pub(crate) struct Proxy {
    client: Client<HttpConnector, ReqBody>,
    calls: Option<Calls>,
    /// Room for inspected bodies ([`INSPECT_BYTES`]).
    room: Arc<Semaphore>,
}

/// Why a body to inspect could not be read whole.
enum ReadError {
    TooLarge,
    Busy,
    Body(BoxError),
}

/// Reads `body` whole, at most `limit` bytes, each frame's bytes taken from
/// `room` first (held by the returned permit until the caller drops it).
async fn read_bounded<B>(
    body: B,
    limit: usize,
    room: &Arc<Semaphore>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), ReadError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut held: Option<OwnedSemaphorePermit> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Body(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if buf.len() + data.len() > limit {
            return Err(ReadError::TooLarge);
        }
        let n = u32::try_from(data.len()).map_err(|_| ReadError::TooLarge)?;
        if n > 0 {
            let permit = tokio::time::timeout(INSPECT_WAIT, Arc::clone(room).acquire_many_owned(n))
                .await
                .map_err(|_| ReadError::Busy)?
                .map_err(|_| ReadError::Busy)?;
            match &mut held {
                Some(h) => h.merge(permit),
                None => held = Some(permit),
            }
        }
        buf.extend_from_slice(&data);
    }
    Ok((buf.freeze(), held))
}

fn busy() -> Response<HttpBody> {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        "xy: the gateway is busy: too many large messages in flight; try again later".to_owned(),
        None,
    )
}

/// A request the firewall took: its id and method, to find and inspect
/// the child's response.
struct Taken {
    id: Value,
    method: String,
}

impl Proxy {
    pub(crate) fn new(calls: Option<Calls>) -> Proxy {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE)
            .build(connector);
        Proxy {
            client,
            calls,
            room: Arc::new(Semaphore::new(INSPECT_BYTES)),
        }
    }

    /// Forwards `req` for server `name` to its endpoint `url`
    /// (`http://127.0.0.1:<port><path>`), or through `remote` to a remote
    /// server's URL, decided by the server's firewall; `state` is named if
    /// it cannot be reached.
    pub(crate) async fn forward(
        &self,
        name: &str,
        url: &str,
        state: ServerState,
        fw: Firewall,
        remote: Option<Arc<Upstream>>,
        req: Request<Incoming>,
    ) -> Response<HttpBody> {
        let (mut parts, body) = req.into_parts();
        if content_length(&parts.headers).is_some_and(|n| n > MAX_BODY as u64) {
            return too_large();
        }
        let target = match parts.uri.query() {
            Some(q) => format!("{url}?{q}"),
            None => url.to_owned(),
        };
        let Ok(uri) = target.parse::<Uri>() else {
            return error(
                StatusCode::BAD_GATEWAY,
                -32603,
                format!("xy: server {name} has no usable URL ({target})"),
                Some(json!({"server": name, "state": state})),
            );
        };
        strip_hop_by_hop(&mut parts.headers);
        // The client's Host names the gateway; the child is asked as itself.
        parts.headers.remove(header::HOST);

        // Decided before anything is built. Under a firewall every POST is
        // read whole and strictly (SPEC §24, D160): what xy cannot read
        // exactly never reaches the child, and the body's own method (not
        // its `Mcp-Method` header) says whether the firewall takes it. In
        // `off`, a 2026 request the firewall does not want costs one
        // comparison.
        let mode = fw
            .verdicts
            .as_ref()
            .map_or_else(FirewallMode::default, |v| v.policy.mode);
        let strict = mode != FirewallMode::Off;
        let recording = self.calls.is_some();
        let post = parts.method == Method::POST;
        let mut ex = None;
        // The request's id, for an answer xy cannot read (strict only).
        let mut asked: Option<Value> = None;
        // Held until the child's answer begins: the request's bytes are
        // in hyper's hands until then.
        let mut held = None;
        let (body, taken) = if post
            && (strict
                || header_str(&parts.headers, &MCP_METHOD)
                    .is_none_or(|m| wanted(mode, recording, m)))
        {
            let (at, arrived) = (SystemTime::now(), Instant::now());
            let bytes = match read_bounded(body, MAX_BODY, &self.room).await {
                Ok((b, permit)) => {
                    held = permit;
                    b
                }
                Err(ReadError::TooLarge) => return too_large(),
                Err(ReadError::Busy) => return busy(),
                Err(ReadError::Body(_)) => return plain(StatusCode::BAD_REQUEST),
            };
            let wants = if strict {
                match strict::check(&bytes) {
                    Ok(fields) => {
                        asked = fields.id_value(&bytes);
                        bytes.trim_ascii_start().first() == Some(&b'[')
                            || fields
                                .method(&bytes)
                                .is_none_or(|m| wanted(mode, recording, m))
                    }
                    Err(e) => {
                        self.refused(name, &bytes, &parts.headers, at, arrived);
                        return unreadable_request(name, &e);
                    }
                }
            } else {
                true
            };
            if wants {
                let exchange = ex.insert(Exchange::begin(
                    name,
                    fw,
                    self.calls.as_ref(),
                    &parts.headers,
                ));
                match take(exchange, &bytes) {
                    Took::Pass => (full(bytes), None),
                    Took::Taken(taken, bytes) => {
                        // Read whole to be inspected: asked uncompressed.
                        parts.headers.remove(header::ACCEPT_ENCODING);
                        (full(bytes), Some(taken))
                    }
                    Took::Answer(msg) => return answer(&msg, &parts.headers),
                    Took::Refuse(why) => {
                        return error(StatusCode::BAD_REQUEST, -32600, why.to_owned(), None);
                    }
                }
            } else {
                (full(bytes), None)
            }
        } else {
            (
                Limited::new(body, MAX_BODY)
                    .map_err(BoxError::from)
                    .boxed_unsync(),
                None,
            )
        };
        let get = parts.method == Method::GET;
        if strict && (post || get) {
            // Every answer is read (whole, or event by event): asked
            // uncompressed.
            parts.headers.remove(header::ACCEPT_ENCODING);
        }
        if taken.is_some() {
            // The body was replaced; hyper frames it from its exact size.
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        let sent = match remote {
            None => {
                parts.uri = uri;
                let upstream = Request::from_parts(parts, body);
                self.client
                    .request(upstream)
                    .await
                    .map(|r| r.map(|b| b.map_err(BoxError::from).boxed_unsync()))
                    .map_err(|e| format!("cannot be reached on {url}: {}", error_chain(&e)))
            }
            Some(up) => match self.to_remote(&up, parts, body).await {
                Ok(r) => Ok(r),
                Err(RemoteFailure::Unreachable(why)) => Err(why),
                Err(RemoteFailure::Answer(r)) => {
                    if let Some(ex) = &mut ex {
                        ex.unreachable();
                    }
                    return r;
                }
            },
        };
        let resp = match sent {
            Ok(r) => r,
            Err(why) => {
                if let Some(ex) = &mut ex {
                    ex.unreachable();
                }
                tracing::debug!(server = %name, "gateway: {why}");
                let mut r = down(name, state, Some(&why));
                *r.status_mut() = StatusCode::BAD_GATEWAY;
                return r;
            }
        };
        drop(held);
        let (mut parts, body) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        // What is read of the answer: the response to a taken request
        // (the firewall's), and under a firewall every answer to a POST
        // and every event of a GET stream (SPEC §24).
        let inspect = taken.is_some() || (strict && (post || get));
        if !inspect {
            return Response::from_parts(parts, body.map_err(BoxError::from).boxed_unsync());
        }
        let answering = taken.as_ref().map(|t| t.id.clone()).or(asked);
        let kind = header_str(&parts.headers, &header::CONTENT_TYPE).map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        match kind.as_deref() {
            Some("text/event-stream") => {
                // The inspected event may change length.
                parts.headers.remove(header::CONTENT_LENGTH);
                let body = SseInspect {
                    inner: body,
                    buf: BytesMut::new(),
                    taken,
                    ex,
                    strict,
                    answering,
                    server: name.into(),
                    ended: false,
                    room: Arc::clone(&self.room),
                    held: None,
                };
                Response::from_parts(parts, body.boxed_unsync())
            }
            Some("application/json") if post => {
                let (bytes, _held) = match read_bounded(body, MAX_INSPECTED_RESPONSE, &self.room)
                    .await
                {
                    Ok(b) => b,
                    Err(ReadError::Busy) => return busy(),
                    Err(e) => {
                        let why = match e {
                            ReadError::Body(e) => e.to_string(),
                            _ => "over 16 MiB".to_owned(),
                        };
                        let message =
                            format!("xy: server {name}'s response could not be read: {why}");
                        if let Some(id) = answering {
                            return answer(&unreadable_answer(id, message, name), &parts.headers);
                        }
                        return error(
                            StatusCode::BAD_GATEWAY,
                            -32603,
                            message,
                            Some(json!({"server": name, "state": state})),
                        );
                    }
                };
                parts.headers.remove(header::CONTENT_LENGTH);
                let bytes = match (taken, ex) {
                    (Some(taken), Some(mut ex)) => inspect_response(&mut ex, &taken, bytes, strict),
                    // An empty body (a `202` to a notification) is no message.
                    _ if bytes.is_empty() => Ok(bytes),
                    _ => strict::check(&bytes).map(|_| bytes),
                };
                match bytes {
                    Ok(bytes) => Response::from_parts(parts, full(bytes)),
                    Err(e) => {
                        tracing::warn!(server = %name, "xy: an answer not forwarded: {e}");
                        let message = unreadable_message(name, &e);
                        let msg = match answering {
                            Some(id) => unreadable_answer(id, message, name),
                            None => json!({"jsonrpc": "2.0", "id": null, "error": {
                                "code": -32603, "message": message, "data": {"server": name}}}),
                        };
                        let mut r = answer(&msg, &parts.headers);
                        if msg["id"].is_null() {
                            *r.status_mut() = StatusCode::BAD_GATEWAY;
                        }
                        r
                    }
                }
            }
            // `202`, or a body the seam does not understand: as it is.
            _ => Response::from_parts(parts, body),
        }
    }

    /// A request refused unread: a call record when it may have been a
    /// `tools/call` (what can be made out of it names the tool).
    fn refused(
        &self,
        name: &str,
        bytes: &[u8],
        headers: &HeaderMap,
        at: SystemTime,
        arrived: Instant,
    ) {
        let Some(calls) = &self.calls else {
            return;
        };
        if let Some(call) = strict::refused_call(bytes) {
            let agent = header_str(headers, &header::USER_AGENT);
            calls.record_call(
                name,
                at,
                agent,
                &call,
                arrived.elapsed(),
                CallOutcome::RpcError,
            );
        }
    }

    /// Sends a request to a remote upstream. Its body is read whole first
    /// (bounded by the edge's limit): a `401` is retried once with fresh
    /// credentials. A credentials failure is answered here, at once: a
    /// `tools/call` gets a tool error, any other request a JSON-RPC error,
    /// each with the supplier's message (SPEC §23: never a hang).
    async fn to_remote(
        &self,
        up: &Upstream,
        parts: hyper::http::request::Parts,
        body: ReqBody,
    ) -> Result<Response<HttpBody>, RemoteFailure> {
        let bytes = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return Err(RemoteFailure::Answer(too_large())),
        };
        match up
            .send(
                parts.method,
                parts.uri.query(),
                &parts.headers,
                bytes.clone(),
            )
            .await
        {
            Ok(r) => Ok(r),
            Err(UpstreamError::Unreachable(why)) => Err(RemoteFailure::Unreachable(format!(
                "cannot be reached at {}: {why}",
                up.url()
            ))),
            Err(UpstreamError::Credentials(e)) => Err(RemoteFailure::Answer(credentials_answer(
                &e.to_string(),
                &bytes,
                &parts.headers,
            ))),
        }
    }
}

/// How sending to a remote failed.
enum RemoteFailure {
    /// No connection: answered like an unreachable child.
    Unreachable(String),
    /// Answered in the upstream's place.
    Answer(Response<HttpBody>),
}

/// The answer to a request no credentials could be had for: a tool error
/// for a `tools/call` (the model reads it), a `-32603` for any other
/// request, `503` for a request that is not one (a GET stream).
pub(crate) fn credentials_answer(
    why: &str,
    body: &Bytes,
    headers: &HeaderMap,
) -> Response<HttpBody> {
    let msg = serde_json::from_slice::<Value>(body).ok();
    let id = msg.as_ref().and_then(|m| m.get("id")).cloned();
    let method = msg
        .as_ref()
        .and_then(|m| m.get("method"))
        .and_then(Value::as_str);
    let text = format!("xy: {why}");
    match (id, method) {
        (Some(id), Some("tools/call")) => answer(
            &json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": text}],
                "isError": true,
            }}),
            headers,
        ),
        (Some(id), Some(_)) => answer(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text}}),
            headers,
        ),
        _ => error(StatusCode::SERVICE_UNAVAILABLE, -32603, text, None),
    }
}

/// What the firewall makes of a request body.
fn take(ex: &mut Exchange, bytes: &Bytes) -> Took {
    let Ok(msg) = serde_json::from_slice::<Value>(bytes) else {
        // Not JSON: the child says what it thinks of it.
        return Took::Pass;
    };
    if let Value::Array(batch) = &msg {
        // A batch (2025-03-26) would carry a watched method past the
        // firewall: refused rather than passed unseen.
        let watched = batch.iter().any(|m| {
            m.get("method")
                .and_then(Value::as_str)
                .is_some_and(|meth| ex.wants(meth))
        });
        return if watched {
            Took::Refuse(
                "xy: JSON-RPC batches cannot carry this method through the gateway; send one message per POST",
            )
        } else {
            Took::Pass
        };
    }
    let (Some(method), Some(id)) = (
        msg.get("method").and_then(Value::as_str).map(str::to_owned),
        msg.get("id").cloned(),
    ) else {
        return Took::Pass;
    };
    if !ex.wants(&method) {
        return Took::Pass;
    }
    let mut msg = msg;
    match ex.request(&mut msg) {
        // The child gets the client's bytes: the firewall changes no request.
        Verdict::Forward => Took::Taken(Taken { id, method }, bytes.clone()),
        Verdict::Answer(v) => Took::Answer(v),
    }
}

/// A JSON response body after the firewall (unchanged when it is not the
/// response to `taken`); under a firewall, refused when xy cannot read it
/// exactly (in `off`, unread bytes pass as they are).
fn inspect_response(
    ex: &mut Exchange,
    taken: &Taken,
    bytes: Bytes,
    strict: bool,
) -> Result<Bytes, strict::Unreadable> {
    let msg = if strict {
        strict::read(&bytes).map(|(v, _)| v)?
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => v,
            Err(_) => return Ok(bytes),
        }
    };
    let mut msg = msg;
    if msg.get("id") == Some(&taken.id) && ex.response(&taken.method, &mut msg) {
        return Ok(Bytes::from(serde_json::to_vec(&msg).unwrap_or_default()));
    }
    Ok(bytes)
}

/// The text of an answer xy did not forward.
fn unreadable_message(name: &str, e: &strict::Unreadable) -> String {
    format!("xy: server {name} answered with a message xy cannot read exactly ({e}); not forwarded")
}

/// The JSON-RPC error that answers request `id` in place of its unreadable
/// or over-large answer (SPEC §24: at once, never a hang).
fn unreadable_answer(id: Value, message: String, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32603, "message": message, "data": {"server": name}}})
}

/// `400`/`-32700` for a request xy cannot read exactly (SPEC §24).
fn unreadable_request(name: &str, e: &strict::Unreadable) -> Response<HttpBody> {
    error(
        StatusCode::BAD_REQUEST,
        -32700,
        format!(
            "xy: parse error: the request for server {name} cannot be read exactly: {e}; not forwarded"
        ),
        Some(json!({"server": name})),
    )
}

enum Took {
    /// Not the inspector's: forward the bytes as they are.
    Pass,
    /// Inspected: forward these bytes, inspect the response.
    Taken(Taken, Bytes),
    /// Answered in the child's place.
    Answer(Value),
    /// Refused before the child sees it.
    Refuse(&'static str),
}

/// An SSE response the gateway reads: to a taken request, the event whose
/// `data:` is its response goes through the firewall first; under a
/// firewall, every event is read strictly and one xy cannot read is not
/// forwarded (the request it answers gets an error event in its place, at
/// once). In `off`, after the taken response the rest streams unparsed.
struct SseInspect {
    inner: HttpBody,
    /// Bytes of the event being read.
    buf: BytesMut,
    /// The request whose response is awaited; `None` once it was seen.
    taken: Option<Taken>,
    /// The request's firewall exchange (a pending call is recorded when
    /// its response passes, or when the stream ends without it).
    ex: Option<Exchange>,
    /// Every event is read strictly (the server's firewall is not `off`).
    strict: bool,
    /// The id of the request still unanswered on this stream.
    answering: Option<Value>,
    server: Arc<str>,
    ended: bool,
    /// The gateway's room for inspected bytes, and what `buf` holds of it.
    room: Arc<Semaphore>,
    held: Option<OwnedSemaphorePermit>,
}

impl SseInspect {
    /// Whether events are still read one by one.
    fn reading(&self) -> bool {
        self.strict || self.taken.is_some()
    }

    /// The bytes to send for one complete event (blank line included).
    fn event(&mut self, raw: Bytes) -> Bytes {
        if !self.reading() {
            return raw;
        }
        let ev = sse::Event::parse(&raw);
        // No data, or empty data (a priming event): clients dispatch
        // nothing for it.
        let Some(data) = ev.data.as_ref().filter(|d| !d.is_empty()) else {
            return raw;
        };
        let msg = if self.strict {
            match strict::read(data) {
                Ok((v, _)) => v,
                Err(e) => return self.unreadable(&e),
            }
        } else {
            match serde_json::from_slice::<Value>(data) {
                Ok(v) => v,
                Err(_) => return raw,
            }
        };
        let response = msg.get("method").is_none() && msg.get("id").is_some();
        if response && msg.get("id") == self.answering.as_ref() {
            self.answering = None;
        }
        let Some(taken) = &self.taken else {
            return raw;
        };
        if !response || msg.get("id") != Some(&taken.id) {
            return raw;
        }
        let mut msg = msg;
        let rewritten = match &mut self.ex {
            Some(ex) => ex.response(&taken.method, &mut msg),
            None => false,
        };
        self.taken = None;
        if !rewritten {
            return raw;
        }
        let json = serde_json::to_vec(&msg).unwrap_or_default();
        ev.with_data(&json)
    }

    /// An event xy cannot read: not forwarded. The request still waiting
    /// for its answer gets an error in its place.
    fn unreadable(&mut self, e: &strict::Unreadable) -> Bytes {
        tracing::warn!(server = %self.server, "xy: an SSE event not forwarded: {e}");
        let Some(id) = self.answering.take() else {
            return Bytes::new();
        };
        // The exchange's pending call ends as a JSON-RPC error.
        self.taken = None;
        self.ex = None;
        let msg = unreadable_answer(id, unreadable_message(&self.server, e), &self.server);
        let json = serde_json::to_vec(&msg).unwrap_or_default();
        sse::Event::default().with_data(&json)
    }
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

impl Body for SseInspect {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if !this.reading() && !this.buf.is_empty() {
                // Past the inspected event: whatever is buffered goes as is.
                return Poll::Ready(Some(Ok(Frame::data(this.buf.split().freeze()))));
            }
            if let Some(end) = event_end(&this.buf) {
                let raw = this.buf.split_to(end).freeze();
                let out = this.event(raw);
                if this.buf.is_empty() {
                    this.held = None;
                }
                if out.is_empty() {
                    continue;
                }
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
            if this.ended {
                if this.buf.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = this.buf.split().freeze();
                if this.reading() {
                    // An event cut short is no event: clients drop it too.
                    continue;
                }
                return Poll::Ready(Some(Ok(Frame::data(rest))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if !this.reading() && this.buf.is_empty() => {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    Ok(data) => {
                        if this.buf.len() + data.len() > MAX_EVENT {
                            // The request it answers gets an error at
                            // once, and the stream ends (SPEC §24).
                            this.buf.clear();
                            this.held = None;
                            this.ended = true;
                            let e = "an SSE event over 16 MiB";
                            tracing::warn!(server = %this.server, "xy: {e}, not forwarded");
                            let Some(id) = this.answering.take() else {
                                return Poll::Ready(Some(Err(e.into())));
                            };
                            this.taken = None;
                            this.ex = None;
                            let message = format!(
                                "xy: server {} answered with {e}; not forwarded",
                                this.server
                            );
                            let msg = unreadable_answer(id, message, &this.server);
                            let json = serde_json::to_vec(&msg).unwrap_or_default();
                            return Poll::Ready(Some(Ok(Frame::data(
                                sse::Event::default().with_data(&json),
                            ))));
                        }
                        // Not waited for inside a poll: a gateway this
                        // full ends the stream rather than hold more.
                        let n = u32::try_from(data.len()).unwrap_or(u32::MAX);
                        match Arc::clone(&this.room).try_acquire_many_owned(n) {
                            Ok(p) => match &mut this.held {
                                Some(h) => h.merge(p),
                                None => this.held = Some(p),
                            },
                            Err(_) => {
                                return Poll::Ready(Some(Err(
                                    "xy: the gateway is busy: too many large messages in flight"
                                        .into(),
                                )));
                            }
                        }
                        this.buf.extend_from_slice(&data);
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

fn full(bytes: Bytes) -> HttpBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A JSON body with its status.
pub(crate) fn json_response(status: StatusCode, bytes: Bytes) -> Response<HttpBody> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn plain(status: StatusCode) -> Response<HttpBody> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

fn too_large() -> Response<HttpBody> {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        -32600,
        "request body over 4 MiB".to_owned(),
        None,
    )
}

/// The inspector's answer, as the child would have sent it.
fn answer(msg: &Value, request: &HeaderMap) -> Response<HttpBody> {
    let mut r = json_response(
        StatusCode::OK,
        Bytes::from(serde_json::to_vec(msg).unwrap_or_default()),
    );
    if let Some(s) = request.get(&SESSION) {
        r.headers_mut().insert(SESSION.clone(), s.clone());
    }
    r
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

fn header_str<'a>(h: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's, not the
/// message's: neither side's reach the other.
fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        h.remove(n);
    }
    h.remove("keep-alive");
    h.remove("proxy-connection");
}

/// `e` and its sources, one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

mod sse;
#[cfg(test)]
mod tests;
