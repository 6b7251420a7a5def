//! The minimal MCP server behind `xy-test-mcp`: streamable HTTP transport with
//! JSON (or SSE-framed) answers, sessions via `Mcp-Session-Id`, one `echo`
//! tool. A thread per connection; HTTP framing lives in `http`.

pub mod http;

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::out::{err, out};
use http::{ReadError, Request, Response};

/// Protocol version answered when the client does not name one.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The MCP endpoint path (default `/mcp`).
    pub path: String,
    /// Accept connections but never answer (unhealthy-probe tests).
    pub hang: bool,
    /// Issue no session ids and require none.
    pub stateless: bool,
}

/// Shared server state: the open sessions.
#[derive(Debug)]
pub struct Server {
    opts: Options,
    sessions: Mutex<HashSet<String>>,
}

impl Server {
    /// A server with no sessions.
    pub fn new(opts: Options) -> Arc<Self> {
        Arc::new(Self {
            opts,
            sessions: Mutex::new(HashSet::new()),
        })
    }

    /// Accepts connections forever, one thread each.
    pub fn serve(self: Arc<Self>, listener: TcpListener) {
        // With --hang the accepted sockets are kept open and never read.
        let mut hung: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(stream) => stream,
                Err(e) => {
                    err(&format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if self.opts.hang {
                hung.push(stream);
                continue;
            }
            let server = Arc::clone(&self);
            std::thread::spawn(move || server.connection(stream));
        }
    }

    fn connection(&self, stream: TcpStream) {
        // Idle keep-alive connections must not pin a thread forever.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
        let _ = stream.set_nodelay(true);
        let Ok(write_half) = stream.try_clone() else {
            return;
        };
        let mut writer = write_half;
        let mut reader = BufReader::new(stream);
        loop {
            let mut req = match http::read_head(&mut reader) {
                Ok(req) => req,
                Err(e) => return self.bad_request(&mut writer, e),
            };
            let expects_continue = req
                .header("expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
            if expects_continue && writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                return;
            }
            if let Err(e) = http::read_body(&mut reader, &mut req) {
                return self.bad_request(&mut writer, e);
            }
            let (response, label) = self.route(&req);
            match label {
                Some(label) => out(&format!(
                    "{} {} {label} {}",
                    req.method, req.path, response.status
                )),
                None => out(&format!("{} {} {}", req.method, req.path, response.status)),
            }
            let keep_alive = req.keep_alive();
            if response.write_to(&mut writer, keep_alive).is_err() || !keep_alive {
                return;
            }
        }
    }

    fn bad_request(&self, writer: &mut TcpStream, e: ReadError) {
        if let ReadError::Bad(why) = e {
            out(&format!("bad request: {why} 400"));
            let _ = Response::new(400, "text/plain", why).write_to(writer, false);
        }
    }

    /// The response and, for MCP posts, the JSON-RPC method names for the log.
    pub fn route(&self, req: &Request) -> (Response, Option<String>) {
        if req.path == "/health" {
            return match req.method.as_str() {
                "GET" | "HEAD" => (Response::new(200, "text/plain", "ok"), None),
                _ => (Response::empty(405).with_header("Allow", "GET"), None),
            };
        }
        if req.path != self.opts.path {
            return (Response::new(404, "text/plain", "not found"), None);
        }
        match req.method.as_str() {
            "POST" => {
                let (response, label) = self.post(req);
                (response, Some(label))
            }
            "DELETE" if !self.opts.stateless => (self.delete(req), None),
            // No server-initiated SSE stream is offered (allowed by the spec).
            _ => (
                Response::empty(405).with_header("Allow", "POST, DELETE"),
                None,
            ),
        }
    }

    fn delete(&self, req: &Request) -> Response {
        let Some(id) = req.header("mcp-session-id") else {
            return rpc_http_error(
                400,
                -32000,
                "Bad Request: Mcp-Session-Id header is required",
            );
        };
        if self.sessions.lock().expect("sessions lock").remove(id) {
            Response::empty(200)
        } else {
            rpc_http_error(404, -32001, "Session not found")
        }
    }

    fn post(&self, req: &Request) -> (Response, String) {
        let parsed: Value = match serde_json::from_slice(&req.body) {
            Ok(value) => value,
            Err(e) => {
                let msg = format!("Parse error: {e}");
                return (rpc_http_error(400, -32700, &msg), "-".to_owned());
            }
        };
        let (messages, batch) = match parsed {
            Value::Array(items) if !items.is_empty() => (items, true),
            Value::Object(_) => (vec![parsed], false),
            _ => {
                return (
                    rpc_http_error(400, -32600, "Invalid Request"),
                    "-".to_owned(),
                );
            }
        };
        let label = messages
            .iter()
            .map(|m| m.get("method").and_then(Value::as_str).unwrap_or("-"))
            .collect::<Vec<_>>()
            .join(",");

        let initializing = messages
            .iter()
            .any(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
        let mut new_session = None;
        if !self.opts.stateless {
            if initializing {
                let id = session_id();
                self.sessions
                    .lock()
                    .expect("sessions lock")
                    .insert(id.clone());
                new_session = Some(id);
            } else {
                match req.header("mcp-session-id") {
                    None => {
                        let msg = "Bad Request: Mcp-Session-Id header is required";
                        return (rpc_http_error(400, -32000, msg), label);
                    }
                    Some(id) if !self.sessions.lock().expect("sessions lock").contains(id) => {
                        return (rpc_http_error(404, -32001, "Session not found"), label);
                    }
                    Some(_) => {}
                }
            }
        }

        let replies: Vec<Value> = messages.iter().filter_map(handle_message).collect();
        let mut response = if replies.is_empty() {
            Response::empty(202)
        } else if wants_sse(req) {
            let mut body = String::new();
            for reply in &replies {
                body.push_str(&format!("event: message\ndata: {reply}\n\n"));
            }
            Response::new(200, "text/event-stream", body).with_header("Cache-Control", "no-cache")
        } else {
            let body = if batch {
                Value::Array(replies)
            } else {
                replies.into_iter().next().unwrap_or(Value::Null)
            };
            Response::new(200, "application/json", body.to_string())
        };
        if let Some(id) = new_session {
            response = response.with_header("Mcp-Session-Id", &id);
        }
        (response, label)
    }
}

/// The reply to one JSON-RPC message, `None` for notifications and responses.
pub fn handle_message(msg: &Value) -> Option<Value> {
    let id = msg.get("id").cloned();
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        // A client's response to a server request (we send none) needs no reply.
        if msg.get("result").is_some() || msg.get("error").is_some() {
            return None;
        }
        return Some(rpc_error(Value::Null, -32600, "Invalid Request"));
    };
    let id = id?;
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    Some(match dispatch(method, &params) {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => rpc_error(id, code, &message),
    })
}

fn dispatch(method: &str, params: &Value) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_PROTOCOL_VERSION);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "xy-test-mcp", "version": env!("CARGO_PKG_VERSION")},
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": [{
            "name": "echo",
            "description": "Returns the given text unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "Text to echo back"}},
                "required": ["text"],
            },
        }]})),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if name != "echo" {
                return Err((-32602, format!("Unknown tool: {name:?}")));
            }
            let text = params
                .get("arguments")
                .and_then(|a| a.get("text"))
                .and_then(Value::as_str)
                .ok_or((-32602, "echo needs arguments.text (string)".to_owned()))?;
            Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
        }
        _ => Err((-32601, format!("Method not found: {method}"))),
    }
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc_http_error(status: u16, code: i64, message: &str) -> Response {
    Response::new(
        status,
        "application/json",
        rpc_error(Value::Null, code, message).to_string(),
    )
}

/// SSE only when the client accepts event streams but not JSON.
fn wants_sse(req: &Request) -> bool {
    let accept = req.header("accept").unwrap_or("").to_ascii_lowercase();
    accept.contains("text/event-stream")
        && !accept.contains("application/json")
        && !accept.contains("*/*")
}

/// 128 random bits as hex, from std's randomly keyed hasher (no rand crate).
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let a = std::collections::hash_map::RandomState::new().hash_one(nanos);
    let b = std::collections::hash_map::RandomState::new().hash_one(a);
    format!("{a:016x}{b:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_gets_no_reply_and_unknown_method_is_32601() {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(handle_message(&note), None);
        let unknown = json!({"jsonrpc": "2.0", "id": 3, "method": "nope"});
        let reply = handle_message(&unknown).unwrap();
        assert_eq!(reply["error"]["code"], -32601);
        assert_eq!(reply["id"], 3);
    }

    #[test]
    fn echo_tool_and_bad_arguments() {
        let call = json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}}});
        let reply = handle_message(&call).unwrap();
        assert_eq!(reply["result"]["content"][0]["text"], "hi");
        let bad = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {}}});
        assert_eq!(handle_message(&bad).unwrap()["error"]["code"], -32602);
    }

    #[test]
    fn session_ids_differ() {
        assert_ne!(session_id(), session_id());
        assert_eq!(session_id().len(), 32);
    }
}
