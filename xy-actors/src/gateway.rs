//! The gateway (SPEC §20): one listener, `127.0.0.1:<port>` from `xy.kdl`,
//! serving every server at `/<name>/mcp` behind the same admission edge as
//! the bridges' own ports (`crate::http::edge`: owner uid, connection cap,
//! timeouts). It owns the listener, its bind (retried with backoff when the
//! port is taken, and at each reload) and the routing of each request:
//!
//! - a stdio server's request goes to its BridgeActor through the bridge's
//!   own HTTP handling (`bridge::http::dispatch`), exactly as if it had
//!   arrived on the server's port, while that port is open;
//! - an HTTP server's request is reverse-proxied to its own port (`proxy`),
//!   where the firewall (`firewall`) decides the JSON-RPC it wants with the
//!   verdicts the server's snapshot carries;
//! - `/mcp` and `/p/<profile>/mcp` are the aggregate (`aggregate`, SPEC
//!   §26), one MCP server offering every server's tools;
//! - anything else is answered here: an unknown name `404`, a server that is
//!   down `503`, each a JSON-RPC error naming the server and its state.
//!
//! Which servers exist, and how each is reached, comes from the snapshots
//! the ServerActors publish ([`Routes`], kept current by the root
//! supervisor); a request reads them without a message to any actor.

pub(crate) mod aggregate;
pub(crate) mod firewall;
pub(crate) mod proxy;
pub(crate) mod route;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};
use tokio::sync::watch;
use xy_core::protocol::{GatewayStatus, ServerState};

use crate::bridge::http as bridge_http;
use crate::http::body::HttpBody;
use crate::snapshot::ServerSnapshot;

/// Every configured server's published snapshot, by name: the root
/// supervisor replaces the map whenever a server is added, removed or its
/// actor respawned.
pub(crate) type Routes = Arc<BTreeMap<String, watch::Receiver<ServerSnapshot>>>;

/// First wait before binding a taken port again; doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between binds: a freed port is taken within this.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// What every request needs: where servers are, how proxied traffic is
/// inspected, the HTTP client to HTTP servers.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) routes: watch::Receiver<Routes>,
    pub(crate) proxy: proxy::Proxy,
    /// `/mcp` and `/p/<profile>/mcp` (SPEC §26).
    pub(crate) aggregate: Arc<aggregate::Aggregate>,
}

/// Messages of the GatewayActor.
pub(crate) enum GatewayMsg {
    /// `xy.kdl`'s port (boot and reload); `None` turns the gateway off. The
    /// same port while its bind failed tries again at once.
    Configure(Option<u16>),
    /// The backoff after failed bind number `attempt` ended.
    Retry { attempt: u64 },
    /// What `daemon_status.gateway` shows; `None` when off.
    Status(RpcReplyPort<Option<GatewayStatus>>),
}

/// See the module docs.
pub(crate) struct GatewayActor;

/// The GatewayActor's state.
pub(crate) struct GatewayState {
    shared: Shared,
    port: Option<u16>,
    listening: Option<crate::http::edge::Listening>,
    /// Why the last bind failed, while the port is not bound.
    error: Option<String>,
    /// Counts binds; a `Retry` of an older one (before a reconfigure) is stale.
    attempt: u64,
    /// The next backoff wait.
    wait: Duration,
}

impl Actor for GatewayActor {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = Shared;

    async fn pre_start(
        &self,
        _myself: ActorRef<GatewayMsg>,
        shared: Shared,
    ) -> Result<GatewayState, ActorProcessingErr> {
        Ok(GatewayState {
            shared,
            port: None,
            listening: None,
            error: None,
            attempt: 0,
            wait: RETRY_FIRST,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        st: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Configure(port) => {
                if port == st.port && (st.listening.is_some() || port.is_none()) {
                    return Ok(());
                }
                if port != st.port {
                    st.listening = None;
                    st.wait = RETRY_FIRST;
                    if port.is_none() {
                        tracing::info!("gateway off (xy.kdl: gateway {{ port 0 }})");
                    }
                }
                st.port = port;
                st.error = None;
                st.bind(&myself);
            }
            GatewayMsg::Retry { attempt } => {
                if attempt == st.attempt && st.listening.is_none() && st.port.is_some() {
                    st.bind(&myself);
                }
            }
            GatewayMsg::Status(reply) => {
                let status = st.port.map(|port| GatewayStatus {
                    url: format!("http://127.0.0.1:{port}/"),
                    error: st.error.clone(),
                });
                if !reply.is_closed() {
                    let _ = reply.send(status);
                }
            }
        }
        Ok(())
    }
}

impl GatewayState {
    /// Binds the configured port; on failure, says why and tries again later.
    fn bind(&mut self, myself: &ActorRef<GatewayMsg>) {
        let Some(port) = self.port else { return };
        self.attempt += 1;
        let bound = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
            .and_then(|l| listen(l, self.shared.clone()));
        match bound {
            Ok(l) => {
                tracing::info!(url = %format!("http://127.0.0.1:{port}/<name>/mcp"), "gateway listening");
                self.listening = Some(l);
                self.error = None;
                self.wait = RETRY_FIRST;
            }
            Err(e) => {
                let error = format!("cannot listen on 127.0.0.1:{port}: {e}");
                // Logged when it starts failing, not at every retry.
                if self.error.as_deref() != Some(error.as_str()) {
                    tracing::warn!(
                        "gateway: {error}; every server is still served on its own port; \
                         retrying (free the port, or set another in xy.kdl: gateway {{ port N }})"
                    );
                }
                self.error = Some(error);
                let attempt = self.attempt;
                myself.send_after(self.wait, move || GatewayMsg::Retry { attempt });
                self.wait = (self.wait * 2).min(RETRY_MAX);
            }
        }
    }
}

/// Serves `listener` behind the admission edge until the result is dropped.
fn listen(
    listener: std::net::TcpListener,
    shared: Shared,
) -> std::io::Result<crate::http::edge::Listening> {
    let service = move || {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(handle(req, &shared).await) }
        })
    };
    crate::http::edge::listen(listener, crate::http::edge::Behind::Gateway, service)
}

/// `/<name>/mcp` → `name`.
fn server_name(path: &str) -> Option<&str> {
    let name = path.strip_prefix('/')?.strip_suffix("/mcp")?;
    xy_core::config::is_valid_name(name).then_some(name)
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<HttpBody> {
    if let Err(why) = bridge_http::rebinding_check(&req) {
        return error(StatusCode::FORBIDDEN, -32600, why.to_owned(), None);
    }
    if aggregate::is_aggregate_path(req.uri().path()) {
        return aggregate::serve(&shared.aggregate, req).await;
    }
    let Some(name) = server_name(req.uri().path()) else {
        return error(
            StatusCode::NOT_FOUND,
            -32600,
            format!(
                "not found: {}; xy's gateway serves each server at /<name>/mcp, all of \
                 them at /mcp",
                req.uri().path()
            ),
            None,
        );
    };
    let name = name.to_owned();
    let name = name.as_str();
    // The edge put the connection's reach here (SPEC §24): a sandboxed
    // server's process is served only the servers its `reach` lines name.
    // None at all is refused too (fail closed).
    let reach = req.extensions().get::<Arc<crate::http::edge::Reach>>();
    if !reach.is_some_and(|r| r.allows(name)) {
        let who = reach.map_or_else(|| "an unidentified process".to_owned(), |r| r.who());
        tracing::info!(server = %name, %who, "gateway request from a sandboxed server refused");
        return error(
            StatusCode::FORBIDDEN,
            -32600,
            format!(
                "xy: {who} may not reach server {name} (its sandbox block has no \
                 reach \"{name}\")"
            ),
            Some(json!({"server": name})),
        );
    }
    // The borrow ends before any await (`watch` holds a read lock).
    let found = {
        let routes = shared.routes.borrow();
        routes.get(name).map(|s| route::route(&s.borrow()))
    };
    match found {
        None => error(
            StatusCode::NOT_FOUND,
            -32600,
            format!("xy: no server named {name} (see `xyctl list`)"),
            Some(json!({"server": name})),
        ),
        Some(found) => route::serve(name, found, &shared.proxy, req).await,
    }
}

/// `503`: the server is not running (its state named).
pub(crate) fn down(name: &str, state: ServerState, why: Option<&str>) -> Response<HttpBody> {
    let mut message = format!("xy: server {name} is {state}");
    if let Some(why) = why {
        message.push_str(": ");
        message.push_str(why);
    }
    if matches!(state, ServerState::Stopped | ServerState::Failed) {
        message.push_str(&format!("; start it with `xyctl start {name}`"));
    }
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        message,
        Some(json!({"server": name, "state": state})),
    )
}

/// A JSON-RPC error answer the gateway gives itself.
pub(crate) fn error(
    status: StatusCode,
    code: i64,
    message: String,
    data: Option<Value>,
) -> Response<HttpBody> {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    let body = json!({"jsonrpc": "2.0", "id": null, "error": e});
    proxy::json_response(
        status,
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_path() {
        assert_eq!(server_name("/fs/mcp"), Some("fs"));
        assert_eq!(server_name("/my.server-1/mcp"), Some("my.server-1"));
        for bad in [
            "/mcp", "//mcp", "/fs/mcp/", "/fs", "/a/b/mcp", "/../mcp", "fs/mcp", "/fs/mcpx",
        ] {
            assert_eq!(server_name(bad), None, "{bad}");
        }
    }
}
