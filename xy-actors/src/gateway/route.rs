//! Where one gateway request goes, decided from the server's published
//! snapshot without a message to any actor: a stdio server's bridge, an
//! HTTP server's own port or a remote's upstream through the proxy, or a
//! `503` naming the state. The gateway's `/<name>/mcp` and a remote
//! server's own port both serve through [`serve`].

use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::sync::watch;
use xy_core::protocol::{ServerState, Transport};

use super::firewall::Firewall;
use super::proxy::Proxy;
use super::{down, error};
use crate::bridge::http as bridge_http;
use crate::http::body::HttpBody;
use crate::snapshot::ServerSnapshot;

/// How one request is served, decided from the server's snapshot.
pub(crate) enum Route {
    Bridge(bridge_http::Endpoint),
    Proxy {
        url: String,
        state: ServerState,
        fw: Firewall,
        /// A remote server's upstream; `None`: an HTTP server's own port.
        remote: Option<Arc<crate::remote::Upstream>>,
    },
    Down(ServerState),
}

pub(crate) fn route(snap: &ServerSnapshot) -> Route {
    let firewall = || Firewall {
        verdicts: snap.firewall.as_ref().map(|f| f.current()),
        relist: snap.firewall.as_ref().map(|f| Arc::clone(&f.relist)),
        log: snap.firewall.as_ref().and_then(|f| f.log.clone()),
    };
    match snap.transport {
        Transport::Stdio => match &snap.bridge {
            Some(b) if b.listening => Route::Bridge(b.endpoint.clone()),
            _ => Route::Down(snap.state),
        },
        Transport::Http => match snap.state {
            ServerState::Running | ServerState::Starting | ServerState::Restarting => {
                Route::Proxy {
                    url: snap.url.clone(),
                    state: snap.state,
                    fw: firewall(),
                    remote: None,
                }
            }
            other => Route::Down(other),
        },
        // Served while xy holds an upstream for it: from the connect on
        // (`starting`), through a reconnect.
        Transport::Remote => match (&snap.remote, snap.state) {
            (Some(up), ServerState::Running | ServerState::Starting | ServerState::Restarting) => {
                Route::Proxy {
                    url: up.url().to_owned(),
                    state: snap.state,
                    fw: firewall(),
                    remote: Some(Arc::clone(up)),
                }
            }
            (_, other) => Route::Down(other),
        },
    }
}

/// Serves one request the way `found` says: the one seam between a
/// request and the server behind it, for the gateway's `/<name>/mcp` and a
/// remote server's own port alike.
pub(crate) async fn serve(
    name: &str,
    found: Route,
    proxy: &Proxy,
    req: Request<Incoming>,
) -> Response<HttpBody> {
    match found {
        Route::Bridge(ep) => bridge_http::dispatch(req, ep)
            .await
            .map(|b| b.map_err(|never| match never {}).boxed_unsync()),
        Route::Proxy {
            url,
            state,
            fw,
            remote,
        } => proxy.forward(name, &url, state, fw, remote, req).await,
        Route::Down(state) => down(name, state, None),
    }
}

/// A remote server's own port (SPEC §23): its endpoint `path`, served
/// exactly as the gateway serves `/<name>/mcp`, from its own snapshot.
pub(crate) async fn serve_remote_port(
    name: &str,
    path: &str,
    snap: &watch::Receiver<ServerSnapshot>,
    proxy: &Proxy,
    req: Request<Incoming>,
) -> Response<HttpBody> {
    if let Err(why) = bridge_http::rebinding_check(&req) {
        return error(StatusCode::FORBIDDEN, -32600, why.to_owned(), None);
    }
    if req.uri().path() != path {
        return error(
            StatusCode::NOT_FOUND,
            -32600,
            format!(
                "not found: {}; this server is served at {path}",
                req.uri().path()
            ),
            None,
        );
    }
    let found = route(&snap.borrow());
    match found {
        // A remote is never a bridge: its own port serves it as the
        // gateway would, or says it is down.
        Route::Bridge(_) => down(name, snap.borrow().state, None),
        found => serve(name, found, proxy, req).await,
    }
}
