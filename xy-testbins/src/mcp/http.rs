//! The HTTP front of `xy-test-mcp`: a small hyper server that logs every
//! request, counts 2025 sessions, injects the faults rmcp cannot express
//! (hang, garbage, HTTP 500), and hands everything else to rmcp's
//! streamable-HTTP service.

use std::convert::Infallible;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tower_service::Service;

use super::{Era, Fault, Options, TestServer};
use crate::out::{err, out};

type Body = BoxBody<Bytes, Infallible>;
type Mcp = StreamableHttpService<TestServer, LocalSessionManager>;

/// The server: options, rmcp's service, the open 2025 sessions.
pub struct Front {
    opts: Arc<Options>,
    mcp: Mcp,
    open: Mutex<Vec<String>>,
    /// Requests the fault matched so far (for `--fault-after`).
    matched: AtomicU64,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front").field("opts", &self.opts).finish()
    }
}

impl Front {
    /// A front for these options.
    pub fn new(opts: Arc<Options>) -> Arc<Front> {
        let legacy_sessions = opts.era != Era::V2026 && !opts.stateless;
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(legacy_sessions)
            .with_json_response(!opts.sse)
            .with_sse_keep_alive(None)
            .disable_allowed_hosts();
        let handler_opts = Arc::clone(&opts);
        let mcp = StreamableHttpService::new(
            move || Ok(TestServer::new(Arc::clone(&handler_opts))),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Arc::new(Front {
            opts,
            mcp,
            open: Mutex::new(Vec::new()),
            matched: AtomicU64::new(0),
        })
    }

    /// Accepts connections until the process exits, one task each.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    err(&format!("accept failed: {e}"));
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let front = Arc::clone(&self);
            tokio::spawn(async move {
                let service = service_fn(move |req| Arc::clone(&front).handle(req));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
        let (parts, body) = req.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let methods = rpc_methods(&bytes);
        let label = (parts.method == hyper::Method::POST).then(|| methods.join(","));
        let response = self.route(parts, bytes, &methods).await;
        match &label {
            Some(label) => out(&format!(
                "{} {} {} {}",
                response.0,
                response.1,
                if label.is_empty() { "-" } else { label },
                response.2.status().as_u16()
            )),
            None => out(&format!(
                "{} {} {}",
                response.0,
                response.1,
                response.2.status().as_u16()
            )),
        }
        Ok(response.2)
    }

    /// The response, with the method and path for the log line.
    async fn route(
        &self,
        parts: hyper::http::request::Parts,
        bytes: Bytes,
        methods: &[String],
    ) -> (hyper::Method, String, Response<Body>) {
        let method = parts.method.clone();
        let path = parts.uri.path().to_owned();
        if let Some(fault) = self.fault_for(&path, methods) {
            return (
                method,
                path,
                fault_response(fault, &bytes, &self.opts).await,
            );
        }
        if path == "/health" {
            return (method, path, plain(StatusCode::OK, "ok"));
        }
        if let Some(file) = &self.opts.headers_file {
            let h = |n: &str| {
                parts
                    .headers
                    .get(n)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let seen = serde_json::json!({
                "method": method.as_str(),
                "host": h("host"),
                "authorization": h("authorization"),
                "cookie": h("cookie"),
                "rpc": methods,
            });
            append_line(file, &seen.to_string());
        }
        if let Some(want) = &self.opts.require_auth
            && parts
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                != Some(want)
        {
            let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized");
            r.headers_mut().insert(
                "www-authenticate",
                hyper::header::HeaderValue::from_static("Bearer realm=\"xy-test-mcp\""),
            );
            return (method, path, r);
        }
        if path != self.opts.path {
            return (method, path, plain(StatusCode::NOT_FOUND, "not found"));
        }
        let deleting = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .filter(|_| method == hyper::Method::DELETE)
            .map(str::to_owned);
        let modern = parts
            .headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("2026-"));
        let request = Request::from_parts(parts, Full::new(bytes));
        let mut mcp = self.mcp.clone();
        let mut response = match mcp.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if modern {
            response = with_result_type(response).await;
        }
        if methods.iter().any(|m| m == "initialize")
            && let Some(id) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            self.session_event("open", id);
        }
        if let Some(id) = deleting
            && response.status().is_success()
        {
            self.session_event("close", &id);
        }
        (method, path, response)
    }

    /// The fault to inject for this request, counting `--fault-after`.
    fn fault_for(&self, path: &str, methods: &[String]) -> Option<Fault> {
        let fault = self.opts.fault?;
        let applies = match &self.opts.fault_on {
            None => true,
            Some(on) => path == self.opts.path && methods.iter().any(|m| on.contains(m)),
        };
        if !applies {
            return None;
        }
        let seen = self.matched.fetch_add(1, Ordering::SeqCst);
        (seen >= self.opts.fault_after).then_some(fault)
    }

    fn session_event(&self, what: &str, id: &str) {
        let open = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            match what {
                "open" => open.push(id.to_owned()),
                _ => open.retain(|s| s != id),
            }
            open.len()
        };
        out(&format!("session {what} {id} (open sessions: {open})"));
        if let Some(path) = &self.opts.sessions_file {
            append_line(path, &format!("{what} {id}"));
        }
    }
}

fn append_line(path: &PathBuf, line: &str) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    match file {
        Ok(mut f) => {
            let _ = writeln!(f, "{line}");
        }
        Err(e) => err(&format!("cannot append to {}: {e}", path.display())),
    }
}

async fn fault_response(fault: Fault, request: &[u8], opts: &Options) -> Response<Body> {
    match fault {
        Fault::Hang => std::future::pending().await,
        Fault::Garbage => {
            let mut r = plain(StatusCode::OK, "<html>this is not JSON-RPC{{{");
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
        Fault::Http500 => plain(StatusCode::INTERNAL_SERVER_ERROR, "internal server error"),
        Fault::RpcError => {
            let id = serde_json::from_slice::<Value>(request)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(Value::Null);
            let echoed = opts
                .echo_env
                .as_deref()
                .and_then(|k| std::env::var(k).ok())
                .unwrap_or_default();
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32000, "message": format!("upstream refused the token {echoed}")},
            });
            let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
    }
}

/// 2026-07-28 requires `resultType` on every result and the Python SDK's
/// client rejects results without it; rmcp 3.11 leaves it out. Adds
/// `"complete"` where it is missing, in JSON answers (SSE answers pass as
/// they are: the tests that check SDK clients use JSON answers).
async fn with_result_type(response: Response<Body>) -> Response<Body> {
    let json = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut v) => {
            add_result_type(&mut v);
            parts.headers.remove(hyper::header::CONTENT_LENGTH);
            Bytes::from(serde_json::to_vec(&v).expect("a JSON value serialises"))
        }
        Err(_) => bytes,
    };
    Response::from_parts(parts, Full::new(bytes).boxed())
}

/// `resultType: "complete"` on each result object that has none.
fn add_result_type(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(add_result_type),
        Value::Object(m) => {
            if let Some(Value::Object(result)) = m.get_mut("result") {
                result
                    .entry("resultType")
                    .or_insert_with(|| Value::from("complete"));
            }
        }
        _ => {}
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// The JSON-RPC method names in a POST body (one message or a batch).
fn rpc_methods(body: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let one = |m: &Value| {
        m.get("method")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned()
    };
    match &value {
        Value::Array(items) => items.iter().map(one).collect(),
        Value::Object(_) => vec![one(&value)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::add_result_type;

    #[test]
    fn result_type_is_added_where_missing_and_kept_where_present() {
        let mut v = json!([
            {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
            {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required"}},
            {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no"}}
        ]);
        add_result_type(&mut v);
        assert_eq!(v[0]["result"]["resultType"], "complete");
        assert_eq!(v[1]["result"]["resultType"], "input_required");
        assert!(v[2].get("result").is_none());
    }
}
