//! The MCP probe's client side of streamable HTTP: `initialize` (once per
//! session) and `notifications/initialized`, then `ping` on every probe;
//! answers as JSON or SSE `data:` events; the session is reused, renewed
//! on 404, and ended with `DELETE` when the probe stops.

use serde_json::{Value, json};

use super::http::{self, Response};

/// The protocol revision the probe asks for.
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";
const ACCEPT: &str = "application/json, text/event-stream";

/// One server's MCP session as the probe sees it.
#[derive(Debug)]
pub(crate) struct McpClient {
    port: u16,
    path: String,
    /// `Mcp-Session-Id` from `initialize`; `None` for a stateless server.
    session: Option<String>,
    /// The version the server agreed to (sent as `MCP-Protocol-Version`).
    version: Option<String>,
    initialized: bool,
    next_id: u64,
}

/// How one exchange failed.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// HTTP 404 on a request carrying a session: the session is gone.
    SessionGone,
    Other(String),
}

impl McpClient {
    pub(crate) fn new(port: u16, path: String) -> McpClient {
        McpClient {
            port,
            path,
            session: None,
            version: None,
            initialized: false,
            next_id: 1,
        }
    }

    /// One probe: initialize if needed, then ping. `Ok` carries a short
    /// note for the health history.
    pub(crate) async fn probe(&mut self) -> Result<String, String> {
        let fresh = !self.initialized;
        if fresh {
            self.initialize().await.map_err(text)?;
        }
        match self.ping().await {
            Ok(()) => Ok(if fresh {
                "initialize and ping answered".to_owned()
            } else {
                "ping answered".to_owned()
            }),
            Err(Failure::SessionGone) if !fresh => {
                // The server forgot the session (restart, expiry): start over.
                self.initialized = false;
                self.session = None;
                self.initialize().await.map_err(text)?;
                self.ping().await.map_err(text)?;
                Ok("session renewed; ping answered".to_owned())
            }
            Err(e) => Err(text(e)),
        }
    }

    /// Ends the session on the server (`DELETE`), if there is one. A 405
    /// (the server does not let clients end sessions) is fine.
    pub(crate) async fn close(&mut self) -> Result<(), String> {
        let Some(id) = self.session.take() else {
            return Ok(());
        };
        self.initialized = false;
        let headers = [("Mcp-Session-Id", id.as_str())];
        let r = http::request(self.port, "DELETE", &self.path, &headers, None, &|_| false).await?;
        match r.status {
            200..=299 | 404 | 405 => Ok(()),
            s => Err(format!("DELETE answered HTTP {s}")),
        }
    }

    async fn initialize(&mut self) -> Result<(), Failure> {
        self.session = None;
        self.version = None;
        let id = self.id();
        let msg = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "xy", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let (resp, answer) = self.call(&msg, id).await?;
        if let Some(sid) = resp.header("mcp-session-id") {
            self.session = Some(sid.to_owned());
        }
        let result = answer_result(&answer, "initialize")?;
        self.version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self.post(&note, None).await?;
        if !(200..300).contains(&r.status) {
            return Err(Failure::Other(format!(
                "notifications/initialized answered HTTP {}",
                r.status
            )));
        }
        self.initialized = true;
        Ok(())
    }

    async fn ping(&mut self) -> Result<(), Failure> {
        let id = self.id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        let (_, answer) = self.call(&msg, id).await?;
        answer_result(&answer, "ping").map(|_| ())
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Posts a request and finds the answer with `id` in the body.
    async fn call(&mut self, msg: &Value, id: u64) -> Result<(Response, Value), Failure> {
        let r = self.post(msg, Some(id)).await?;
        if r.status == 404 && self.session.is_some() {
            return Err(Failure::SessionGone);
        }
        if r.status != 200 {
            let method = msg["method"].as_str().unwrap_or("request");
            return Err(Failure::Other(format!(
                "{method} answered HTTP {}",
                r.status
            )));
        }
        let answer = find_answer(&r.body, id).ok_or_else(|| {
            Failure::Other(format!(
                "no JSON-RPC answer to {} in the response",
                msg["method"].as_str().unwrap_or("request")
            ))
        })?;
        Ok((r, answer))
    }

    async fn post(&self, msg: &Value, id: Option<u64>) -> Result<Response, Failure> {
        let body = msg.to_string();
        let mut headers: Vec<(&str, &str)> =
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT)];
        if let Some(s) = &self.session {
            headers.push(("Mcp-Session-Id", s));
        }
        if let Some(v) = &self.version {
            headers.push(("MCP-Protocol-Version", v));
        }
        let done = move |b: &[u8]| id.is_some_and(|id| find_answer(b, id).is_some());
        http::request(
            self.port,
            "POST",
            &self.path,
            &headers,
            Some(body.as_bytes()),
            &done,
        )
        .await
        .map_err(Failure::Other)
    }
}

fn text(f: Failure) -> String {
    match f {
        Failure::SessionGone => "session not found (HTTP 404)".to_owned(),
        Failure::Other(s) => s,
    }
}

/// The `result` of an answer, or its `error` as a failure.
fn answer_result<'a>(answer: &'a Value, method: &str) -> Result<&'a Value, Failure> {
    if let Some(result) = answer.get("result") {
        return Ok(result);
    }
    let err = &answer["error"];
    Err(Failure::Other(format!(
        "{method} failed: {} (code {})",
        err["message"].as_str().unwrap_or("no message"),
        err["code"]
    )))
}

/// The JSON-RPC answer with `id` in a body that is JSON (an object or a
/// batch) or SSE (`data:` lines of complete events).
pub(crate) fn find_answer(body: &[u8], id: u64) -> Option<Value> {
    let text = String::from_utf8_lossy(body);
    let matches = |v: &Value| {
        v.get("id").and_then(Value::as_u64) == Some(id)
            && (v.get("result").is_some() || v.get("error").is_some())
    };
    let pick = |v: Value| -> Option<Value> {
        match v {
            Value::Array(items) => items.into_iter().find(|m| matches(m)),
            v if matches(&v) => Some(v),
            _ => None,
        }
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return serde_json::from_str::<Value>(trimmed).ok().and_then(pick);
    }
    // SSE: events end at a blank line; an event's data lines join with \n.
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut events: Vec<&str> = normalized.split("\n\n").collect();
    // The last piece is unterminated (or empty): not a complete event yet.
    events.pop();
    events.into_iter().find_map(|event| {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return None;
        }
        serde_json::from_str::<Value>(&data.join("\n"))
            .ok()
            .and_then(pick)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_json_batches_and_sse() {
        let json = br#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        assert!(find_answer(json, 3).is_some());
        assert!(find_answer(json, 4).is_none());
        let batch = br#"[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}]"#;
        assert_eq!(find_answer(batch, 2).unwrap()["error"]["code"], -1);
        let sse = b"event: message\r\nid: 7\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";
        assert!(find_answer(sse, 5).is_some());
        // An event still being written is not an answer yet.
        let partial = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n";
        assert!(find_answer(partial, 5).is_none());
        assert!(find_answer(b": keep-alive\n\n", 5).is_none());
        assert!(find_answer(b"", 5).is_none());
    }

    #[test]
    fn errors_become_failures() {
        let a = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}});
        assert_eq!(
            answer_result(&a, "ping"),
            Err(Failure::Other(
                "ping failed: Method not found (code -32601)".into()
            ))
        );
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert!(answer_result(&ok, "ping").is_ok());
    }
}
