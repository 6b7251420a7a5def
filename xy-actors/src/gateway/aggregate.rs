//! The aggregate (SPEC §26): the gateway's `/mcp`, and `/p/<profile>/mcp`
//! for each `profile` of `xy.kdl`, one MCP server in both eras whose tools,
//! prompts and resources are every visible server's (a profile's servers
//! only), tools and prompts named `<server>__<name>`
//! ([`xy_core::protocol::aggregate::prefixed_names`], D241). In mode
//! `search` its `tools/list` holds only `find_tools` and `call_tool`.
//!
//! Each request to a server goes through the path a client's request to
//! `/<name>/mcp` takes ([`upstream`]): the firewall decides it, the call
//! is recorded there (its client named `<client> via <endpoint>`), and an
//! on-demand server starts as it would for that client.
//!
//! The edge is the gateway's (owner uid, Host/Origin), and stricter: a
//! process of any sandboxed server is refused the aggregate whatever its
//! `reach` lines (the aggregate reaches every server, D243). Bodies are
//! read with [`strict::check`] (SPEC §24): what xy cannot read exactly is
//! `400`, `-32700`.
//!
//! 2025 clients get a session (`initialize`, `Mcp-Session-Id`, a `GET`
//! stream carrying `notifications/{tools,prompts,resources}/list_changed`
//! whenever what the aggregate offers changes); 2026 requests are served
//! stateless, validated as the bridge validates them, the same
//! notifications on `subscriptions/listen` (D319).

pub(crate) mod catalog;
mod methods;
pub(crate) mod upstream;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use xy_core::config::{AggregateMode, DaemonSettings};
use xy_core::protocol::mcp::wire::{self, VERSION_2025, VERSION_2026};

use crate::bridge::sessions::Sessions;
use crate::bridge::validate::{self, Mirrored};
use crate::calls::Calls;
use crate::gateway::Routes;
use crate::gateway::proxy::Proxy;
use crate::http::body::{BoxError, HttpBody, MAX_BODY, MCP_METHOD, MCP_NAME, PROTOCOL, SESSION};
use crate::mcp::strict;

use catalog::{Catalog, List};

/// The 2025-era versions the aggregate speaks (a client's own is kept).
const VERSIONS_2025: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", VERSION_2025];

/// The aggregate of one daemon: the catalog of every server's lists, the
/// 2025 sessions of its clients, the daemon's settings (modes, profiles).
pub(crate) struct Aggregate {
    pub(crate) catalog: Arc<Catalog>,
    settings: watch::Receiver<DaemonSettings>,
    sessions: Mutex<Sessions>,
    calls: Option<Calls>,
    /// Per view and list: what it offers, built from the catalog's lists
    /// (rebuilt when one of them is a new list).
    offered: Mutex<HashMap<(methods::ViewKey, List), Arc<methods::Offered>>>,
    /// Per view: the search index and what it was built from.
    index: Mutex<HashMap<methods::ViewKey, KeptIndex>>,
}

/// A view's search index and what it was built from.
type KeptIndex = (methods::IndexKey, Arc<xy_core::search::Index>);

/// What one endpoint offers: which servers, in which mode.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// `/mcp` or `/p/<profile>/mcp`, named in call records.
    pub(crate) path: String,
    pub(crate) servers: Option<Vec<String>>,
    pub(crate) mode: AggregateMode,
}

impl Aggregate {
    pub(crate) fn new(
        routes: watch::Receiver<Routes>,
        settings: watch::Receiver<DaemonSettings>,
        proxy: Proxy,
        calls: Option<Calls>,
    ) -> Arc<Aggregate> {
        Arc::new(Aggregate {
            catalog: Catalog::new(routes, upstream::Upstream::new(proxy)),
            settings,
            sessions: Mutex::new(Sessions::default()),
            calls,
            offered: Mutex::new(HashMap::new()),
            index: Mutex::new(HashMap::new()),
        })
    }

    /// The view a path names: `/mcp`, or `/p/<profile>/mcp` of a profile
    /// `xy.kdl` has; `None` for anything else.
    pub(crate) fn view(&self, path: &str) -> Result<View, String> {
        let settings = self.settings.borrow();
        let agg = &settings.aggregate;
        if path == "/mcp" {
            return Ok(View {
                path: path.to_owned(),
                servers: None,
                mode: agg.mode,
            });
        }
        let name = path
            .strip_prefix("/p/")
            .and_then(|p| p.strip_suffix("/mcp"))
            .unwrap_or("");
        match agg.profiles.get(name) {
            Some(p) => Ok(View {
                path: path.to_owned(),
                servers: p.servers.clone(),
                mode: p.mode.unwrap_or(agg.mode),
            }),
            None => {
                let known: Vec<&str> = agg.profiles.keys().map(String::as_str).collect();
                Err(if known.is_empty() {
                    format!("xy: no profile named {name:?}; xy.kdl defines none")
                } else {
                    format!(
                        "xy: no profile named {name:?}; xy.kdl defines {}",
                        known.join(", ")
                    )
                })
            }
        }
    }

    /// `tools_search` (`xyctl tools search`): what `find_tools` answers.
    pub(crate) async fn search(
        self: &Arc<Self>,
        p: &xy_core::protocol::aggregate::ToolsSearchParams,
    ) -> Result<xy_core::protocol::aggregate::ToolsSearchResult, String> {
        let path = p
            .profile
            .as_ref()
            .map_or_else(|| "/mcp".to_owned(), |n| format!("/p/{n}/mcp"));
        let view = self.view(&path)?;
        Ok(methods::search(self, &view, &p.query, p.server.as_deref(), p.limit()).await)
    }

    /// The index built from what `key` names, built by `build` when the
    /// one kept is of something else.
    fn index(
        &self,
        view: &View,
        key: methods::IndexKey,
        build: impl FnOnce(&methods::IndexKey) -> xy_core::search::Index,
    ) -> Arc<xy_core::search::Index> {
        let mut kept = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((k, i)) = kept.get(&view.servers)
            && k.same(&key)
        {
            return Arc::clone(i);
        }
        let i = Arc::new(build(&key));
        kept.insert(view.servers.clone(), (key, Arc::clone(&i)));
        i
    }

    /// What `view` offers of `list`, given the servers' `lists`: the one
    /// built before while they are the same lists, else `build`'s.
    fn offered(
        &self,
        view: &View,
        list: List,
        lists: &[(String, catalog::Listed)],
        build: impl FnOnce() -> methods::Offered,
    ) -> Arc<methods::Offered> {
        let key = (view.servers.clone(), list);
        if let Some(o) = self
            .offered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .filter(|o| o.built_from(lists))
        {
            return Arc::clone(o);
        }
        // Built outside the lock: requests of other views go on meanwhile.
        let o = Arc::new(build());
        self.offered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, Arc::clone(&o));
        o
    }

    /// `xy.kdl`'s `search { model "…" }`, if set.
    fn search_model(&self) -> Option<std::path::PathBuf> {
        self.settings.borrow().search_model.clone()
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether the gateway serves `path` with the aggregate.
pub(crate) fn is_aggregate_path(path: &str) -> bool {
    path == "/mcp" || (path.starts_with("/p/") && path.ends_with("/mcp"))
}

/// Serves one request to `/mcp` or `/p/<profile>/mcp` (Host/Origin
/// checked by the gateway).
pub(crate) async fn serve(agg: &Arc<Aggregate>, req: Request<Incoming>) -> Response<HttpBody> {
    // A sandboxed server's process reaches no server through here (D243);
    // an unidentified one neither (fail closed).
    let reach = req.extensions().get::<Arc<crate::http::edge::Reach>>();
    if !reach.is_some_and(|r| **r == crate::http::edge::Reach::All) {
        let who = reach.map_or_else(|| "an unidentified process".to_owned(), |r| r.who());
        tracing::info!(%who, "aggregate request from a sandboxed process refused");
        return error(
            StatusCode::FORBIDDEN,
            Value::Null,
            -32600,
            format!("xy: {who} may not use the aggregate endpoint (it reaches every server)"),
        );
    }
    let view = match agg.view(req.uri().path()) {
        Ok(v) => v,
        Err(why) => return error(StatusCode::NOT_FOUND, Value::Null, -32600, why),
    };
    let session = req
        .headers()
        .get(&SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match *req.method() {
        Method::POST => post(agg, &view, req, session).await,
        Method::GET => stream(agg, session),
        Method::DELETE => {
            let gone = session
                .is_some_and(|s| agg.lock_sessions().remove(&s, tokio::time::Instant::now()));
            let status = if gone {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            empty(status)
        }
        _ => {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

async fn post(
    agg: &Arc<Aggregate>,
    view: &View,
    req: Request<Incoming>,
    session: Option<String>,
) -> Response<HttpBody> {
    let version = req
        .headers()
        .get(&PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned());
    let text = |n: &hyper::header::HeaderName| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (mcp_method, mcp_name) = (text(&MCP_METHOD), text(&MCP_NAME));
    let agent = text(&header::USER_AGENT);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                "request body over 4 MiB or cut short".to_owned(),
            );
        }
    };
    if let Err(e) = strict::check(&body) {
        // Every attempt is a call record, refused ones included (SPEC §24,
        // D315): a `tools/call` whose name can be made out is recorded
        // by the server that offers it — after the answer, which finding
        // that server (the view's lists) must not delay.
        if let Some(tool) = strict::refused_call(&body) {
            let client = session
                .as_deref()
                .and_then(|s| agg.lock_sessions().client(s).map(|c| c.to_string()))
                .or(agent);
            let who = methods::Who {
                client: format!(
                    "{} via {}",
                    client.as_deref().unwrap_or("unknown"),
                    view.path
                ),
                caps2026: None,
            };
            let (agg, view, why) = (Arc::clone(agg), view.clone(), e.to_string());
            tokio::spawn(async move {
                methods::record_refused(&agg, &view, &who, &tool, &why).await;
            });
        }
        return error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32700,
            format!("xy: parse error: the request cannot be read exactly: {e}; not served"),
        );
    }
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                format!("parse error: {e}"),
            );
        }
    };
    if !msg.is_object() || msg.get("jsonrpc") != Some(&json!("2.0")) {
        return error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "one JSON-RPC 2.0 message per POST (batches are not supported)".to_owned(),
        );
    }
    let id = msg.get("id").cloned();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let era2026 = validate::is_2026_form(version.as_deref(), &msg);
    let client;
    if era2026 {
        let mirrored = Mirrored {
            version: version.as_deref(),
            method: mcp_method.as_deref(),
            name: mcp_name.as_deref(),
        };
        if let Err(r) = validate::check_2026(mirrored, &msg) {
            return json_response(r.status, &r.body, None);
        }
        let asked = msg
            .pointer("/params/_meta")
            .and_then(|m| m.get(wire::META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        if id.is_some() && asked != Some(VERSION_2026) {
            let body = json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": wire::UNSUPPORTED_VERSION, "message": "Unsupported protocol version",
                "data": {"requested": asked, "supported": [VERSION_2026]}}});
            return json_response(StatusCode::BAD_REQUEST, &body, None);
        }
        client = crate::mcp::record::meta_client(&msg).map(|c| c.to_string());
    } else if method == "initialize" {
        return initialize(agg, view, &msg);
    } else {
        let now = tokio::time::Instant::now();
        match &session {
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    id.unwrap_or(Value::Null),
                    -32600,
                    "Bad Request: no Mcp-Session-Id; send initialize first".to_owned(),
                );
            }
            Some(s) => {
                let mut sessions = agg.lock_sessions();
                if !sessions.touch(s, now) {
                    drop(sessions);
                    return error(
                        StatusCode::NOT_FOUND,
                        id.unwrap_or(Value::Null),
                        -32001,
                        "Session not found".to_owned(),
                    );
                }
                client = sessions.client(s).map(|c| c.to_string());
            }
        }
    }
    let Some(id) = id else {
        // A notification, or an answer to a request the aggregate never
        // sends: nothing to do.
        return empty(StatusCode::ACCEPTED);
    };
    if era2026 && method == "subscriptions/listen" {
        return listen(agg, id, &msg);
    }
    let client = client.or(agent);
    let who = methods::Who {
        client: format!(
            "{} via {}",
            client.as_deref().unwrap_or("unknown"),
            view.path
        ),
        caps2026: era2026.then(|| {
            msg.pointer("/params/_meta")
                .and_then(|m| m.get(wire::META_CLIENT_CAPABILITIES))
                .cloned()
                .unwrap_or_else(|| json!({}))
        }),
    };
    let mut answer = methods::answer(agg, view, &who, method, &msg).await;
    // A 2026 error has the status the bridge gives it (SPEC §19): an
    // unknown method `404`, a capability the client did not declare `400`.
    let status = match answer.pointer("/error/code").and_then(Value::as_i64) {
        Some(code) if era2026 => validate::status_of_error(code),
        _ => StatusCode::OK,
    };
    if era2026
        && let Some(o) = answer
            .as_object_mut()
            .and_then(|a| a.get_mut("result"))
            .and_then(Value::as_object_mut)
    {
        o.entry("resultType").or_insert(json!("complete"));
        // What a 2026 client may cache, and for how long: nothing, as
        // the bridge answers for a 2025 child (the lists change).
        if matches!(
            method,
            "server/discover"
                | "tools/list"
                | "prompts/list"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
        ) {
            o.entry("ttlMs").or_insert(json!(0));
            o.entry("cacheScope").or_insert(json!("private"));
        }
    }
    let mut full = json!({"jsonrpc": "2.0", "id": id});
    if let (Some(f), Some(a)) = (full.as_object_mut(), answer.as_object()) {
        for (k, v) in a {
            f.insert(k.clone(), v.clone());
        }
    }
    json_response(status, &full, None)
}

/// A 2025 `initialize`: a new session.
fn initialize(agg: &Arc<Aggregate>, view: &View, msg: &Value) -> Response<HttpBody> {
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let asked = msg
        .pointer("/params/protocolVersion")
        .and_then(Value::as_str);
    let version = asked
        .filter(|v| VERSIONS_2025.contains(v))
        .unwrap_or(VERSION_2025);
    let session = crate::mcp::meta::unguessable();
    {
        let mut s = agg.lock_sessions();
        s.insert(session.clone(), tokio::time::Instant::now());
        if let Some(c) = crate::mcp::record::client_name(msg.pointer("/params/clientInfo")) {
            s.set_client(&session, c);
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "result": {
        "protocolVersion": version,
        "capabilities": methods::capabilities(),
        "serverInfo": {"name": "xy", "title": "xy aggregate", "version": env!("CARGO_PKG_VERSION")},
        "instructions": methods::instructions(view),
    }});
    json_response(StatusCode::OK, &body, Some(&session))
}

/// One notification as an SSE event.
fn event(note: &Value) -> Bytes {
    let mut ev = b"event: message\ndata: ".to_vec();
    ev.extend_from_slice(&serde_json::to_vec(note).unwrap_or_default());
    ev.extend_from_slice(b"\n\n");
    Bytes::from(ev)
}

/// The kinds of list the aggregate announces changes of, with the key a
/// 2026 `subscriptions/listen` filter names each by.
const LISTS: [(&str, &str); 3] = [
    ("tools", "toolsListChanged"),
    ("prompts", "promptsListChanged"),
    ("resources", "resourcesListChanged"),
];

/// A 2026 `subscriptions/listen` (SPEC §26: a server's items leave "with
/// `list_changed`", for clients of both eras): acknowledged at once, then
/// the `list_changed` notifications its `notifications` filter asks for
/// (every kind without one), each naming the subscription in `_meta`, as
/// the bridge serves it; the stream lasts while the client keeps it open.
fn listen(agg: &Arc<Aggregate>, id: Value, msg: &Value) -> Response<HttpBody> {
    use crate::mcp::meta::META_SUBSCRIPTION;
    let filter = msg
        .pointer("/params/notifications")
        .and_then(Value::as_object)
        .cloned();
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": filter.clone().unwrap_or_default(),
            "_meta": {META_SUBSCRIPTION: id}}});
    list_changed_stream(agg, Some(ack), move |kind, key| {
        let wanted = filter
            .as_ref()
            .is_none_or(|f| f.get(key).and_then(Value::as_bool) == Some(true));
        wanted.then(|| {
            json!({"jsonrpc": "2.0",
                "method": format!("notifications/{kind}/list_changed"),
                "params": {"_meta": {META_SUBSCRIPTION: id.clone()}}})
        })
    })
}

/// An SSE response that sends `first` (if any), then, each time the
/// catalog's lists change, `note(kind, filter key)` for every kind of
/// [`LISTS`] it gives one for; it lasts while the client keeps it open.
fn list_changed_stream(
    agg: &Arc<Aggregate>,
    first: Option<Value>,
    note: impl Fn(&str, &str) -> Option<Value> + Send + 'static,
) -> Response<HttpBody> {
    let mut changed = agg.catalog.changed.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        if let Some(first) = first
            && tx.send(event(&first)).await.is_err()
        {
            return;
        }
        loop {
            match changed.recv().await {
                Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            }
            for (kind, key) in LISTS {
                let Some(n) = note(kind, key) else { continue };
                if tx.send(event(&n)).await.is_err() {
                    return;
                }
            }
        }
    });
    let mut r = Response::new(Stream(rx).boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// A 2025 session's `GET`: its stream of `list_changed` notifications.
fn stream(agg: &Arc<Aggregate>, session: Option<String>) -> Response<HttpBody> {
    let live = session
        .as_deref()
        .is_some_and(|s| agg.lock_sessions().touch(s, tokio::time::Instant::now()));
    if session.is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "Bad Request: no Mcp-Session-Id".to_owned(),
        );
    }
    if !live {
        return error(
            StatusCode::NOT_FOUND,
            Value::Null,
            -32001,
            "Session not found".to_owned(),
        );
    }
    let mut r = list_changed_stream(agg, None, |kind, _| {
        Some(json!({"jsonrpc": "2.0",
            "method": format!("notifications/{kind}/list_changed")}))
    });
    let h = r.headers_mut();
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        h.insert(&SESSION, s);
    }
    r
}

/// An SSE body fed by a channel; the client going away drops it, and the
/// feeding task ends at its next send.
struct Stream(mpsc::Receiver<Bytes>);

impl Body for Stream {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

fn json_response(status: StatusCode, body: &Value, session: Option<&str>) -> Response<HttpBody> {
    let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    let mut r = Response::new(Full::new(bytes).map_err(|e| match e {}).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert(&SESSION, s);
    }
    r
}

fn error(status: StatusCode, id: Value, code: i64, message: String) -> Response<HttpBody> {
    json_response(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        None,
    )
}

fn empty(status: StatusCode) -> Response<HttpBody> {
    let mut r = Response::new(
        Full::new(Bytes::new())
            .map_err(|e| match e {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r
}
