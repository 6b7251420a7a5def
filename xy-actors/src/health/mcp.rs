//! The `mcp` probe's client side of streamable HTTP, in both protocol eras
//! (SPEC §12): `server/discover` first (2026, stateless); on method-not-found,
//! an HTTP 4xx or an UnsupportedProtocolVersion offering only older versions,
//! the 2025 fallback (`initialize` once per session, then `ping`; renewed
//! once on 404; ended with `DELETE`). The era found is kept for the spawn.
//! Also xy's own listing of an HTTP or remote server (SPEC §20) in the same
//! session: [`McpClient::ready`] then [`McpClient::list_items`].

use serde_json::{Value, json};
use xy_core::protocol::mcp::{McpEra, wire};

use crate::mcp::report::McpInfo;

use super::http;
use crate::http::body::Response;

const ACCEPT: &str = "application/json, text/event-stream";

/// One server's MCP conversation as the probe sees it (one per spawn).
#[derive(Debug)]
pub(crate) struct McpClient {
    port: u16,
    /// A remote server's upstream (SPEC §23): every exchange goes there,
    /// with its credentials, instead of to `127.0.0.1:<port>`.
    remote: Option<std::sync::Arc<crate::remote::Upstream>>,
    path: String,
    /// The era found by the first successful probe of this spawn.
    era: Option<McpEra>,
    /// `Mcp-Session-Id` from `initialize` (2025); `None` when stateless.
    session: Option<String>,
    /// The 2025 session is initialised.
    initialized: bool,
    /// The era found (or the session opened) has been named in a probe's
    /// note: the listing may find it first, and the health history should
    /// still say what the probe's session began with.
    announced: bool,
    info: Option<McpInfo>,
    next_id: u64,
}

/// How one exchange failed.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// HTTP 404 on a request carrying a session: the session is gone.
    SessionGone,
    Other(String),
}

/// What `server/discover` told us about the era.
#[derive(Debug, PartialEq)]
enum Discovered {
    /// A result: the server speaks 2026.
    Yes(McpInfo),
    /// The server is 2025-only (the reason, for the history).
    Older(String),
}

impl McpClient {
    pub(crate) fn new(port: u16, path: String) -> McpClient {
        McpClient {
            port,
            remote: None,
            path,
            era: None,
            session: None,
            initialized: false,
            announced: false,
            info: None,
            next_id: 1,
        }
    }

    /// A client of a remote server's upstream (`port` only names it in logs).
    pub(crate) fn remote(port: u16, up: std::sync::Arc<crate::remote::Upstream>) -> McpClient {
        McpClient {
            remote: Some(up),
            ..McpClient::new(port, String::new())
        }
    }

    /// One HTTP exchange with the server, wherever it is.
    async fn http(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        done: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<Response, String> {
        match &self.remote {
            Some(up) => up.exchange(method, headers, body, done).await,
            None => http::request(self.port, method, &self.path, headers, body, done).await,
        }
    }

    /// The server's self-description from the last successful probe.
    pub(crate) fn info(&self) -> Option<&McpInfo> {
        self.info.as_ref()
    }

    /// One probe. `Ok` carries a short note for the health history.
    pub(crate) async fn probe(&mut self) -> Result<String, String> {
        match self.era {
            Some(McpEra::V2026) => {
                match self.discover().await.map_err(text)? {
                    Discovered::Yes(info) => self.info = Some(info),
                    Discovered::Older(why) => {
                        // Remembered per spawn: a 2026 server that stops
                        // answering the 2026 way is failing, not older.
                        return Err(format!("server/discover no longer answered: {why}"));
                    }
                }
                Ok(if std::mem::replace(&mut self.announced, true) {
                    "server/discover answered".to_owned()
                } else {
                    format!("server/discover answered ({})", wire::VERSION_2026)
                })
            }
            Some(McpEra::V2025) => self.probe_2025().await,
            None => match self.discover().await.map_err(text)? {
                Discovered::Yes(info) => {
                    self.era = Some(McpEra::V2026);
                    self.info = Some(info);
                    self.announced = true;
                    Ok(format!("server/discover answered ({})", wire::VERSION_2026))
                }
                Discovered::Older(why) => {
                    let note = self
                        .probe_2025()
                        .await
                        .map_err(|e| format!("{e} (after {why})"))?;
                    self.era = Some(McpEra::V2025);
                    Ok(note)
                }
            },
        }
    }

    /// Ready for a request in the server's era, without a probe's `ping`:
    /// the era found and, in 2025, a session open. What xy's listing does
    /// first, so that it shares the probe's session (or opens the one the
    /// probe then reuses).
    pub(crate) async fn ready(&mut self) -> Result<(), String> {
        match self.era {
            Some(McpEra::V2026) => Ok(()),
            Some(McpEra::V2025) if self.initialized => Ok(()),
            Some(McpEra::V2025) => self.initialize().await.map_err(text),
            None => match self.discover().await.map_err(text)? {
                Discovered::Yes(info) => {
                    self.era = Some(McpEra::V2026);
                    self.info = Some(info);
                    Ok(())
                }
                Discovered::Older(why) => {
                    self.initialize()
                        .await
                        .map_err(|e| format!("{} (after {why})", text(e)))?;
                    self.era = Some(McpEra::V2025);
                    Ok(())
                }
            },
        }
    }

    async fn probe_2025(&mut self) -> Result<String, String> {
        let fresh = !self.initialized;
        if fresh {
            self.initialize().await.map_err(text)?;
        }
        match self.ping().await {
            Ok(()) => Ok(if std::mem::replace(&mut self.announced, true) {
                "ping answered".to_owned()
            } else {
                let v = self
                    .info
                    .as_ref()
                    .map_or("", |i| i.protocol_version.as_str());
                format!("initialize and ping answered ({v})")
            }),
            Err(Failure::SessionGone) if !fresh => {
                // The server forgot the session (restart, expiry): once more.
                self.initialized = false;
                self.session = None;
                self.initialize().await.map_err(text)?;
                self.ping().await.map_err(text)?;
                self.announced = true;
                Ok("session renewed; ping answered".to_owned())
            }
            Err(e) => Err(text(e)),
        }
    }

    /// Ends the 2025 session on the server (`DELETE`), if there is one.
    /// A 405 (the server does not let clients end sessions) is fine.
    pub(crate) async fn close(&mut self) -> Result<(), String> {
        self.initialized = false;
        let Some(id) = self.session.take() else {
            return Ok(());
        };
        let mut headers = vec![("Mcp-Session-Id", id.as_str())];
        let version = self.info.as_ref().map(|i| i.protocol_version.clone());
        if let Some(v) = &version {
            headers.push(("MCP-Protocol-Version", v));
        }
        let r = self.http("DELETE", &headers, None, &|_| false).await?;
        match r.status {
            200..=299 | 404 | 405 => Ok(()),
            s => Err(format!("DELETE answered HTTP {s}")),
        }
    }

    /// xy's own listing (SPEC §20), in the era found by [`McpClient::ready`]
    /// or a probe: every
    /// tool (following `nextCursor`) and, when the server offers them,
    /// every prompt, resource, resource template and skill (SEP-2640),
    /// each item kept whole (its digest needs all of it).
    /// Bounded like the stdio bridge's listing: a server that pages
    /// forever or repeats a cursor ends it with what it has.
    pub(crate) async fn list_items(&mut self) -> Result<crate::mcp::listing::Listing, String> {
        use crate::mcp::listing::{MAX_ITEMS, MAX_PAGES as MAX_LIST_PAGES, offers};
        let info = self
            .info
            .clone()
            .ok_or("the server has not answered a probe")?;
        let mut listing = crate::mcp::listing::Listing {
            protocol_version: info.protocol_version.clone(),
            server_name: info.server_name.clone(),
            server_version: info.server_version.clone(),
            ..Default::default()
        };
        let caps = info.capabilities.as_ref();
        let resources = offers(caps, "resources");
        let wanted = [
            ("tools/list", "tools", offers(caps, "tools")),
            ("prompts/list", "prompts", offers(caps, "prompts")),
            ("resources/list", "resources", resources),
            ("resources/templates/list", "resourceTemplates", resources),
            (
                "skills/list",
                "skills",
                crate::mcp::listing::offers_skills(caps),
            ),
        ];
        for (method, key, offered) in wanted {
            if !offered {
                continue;
            }
            let mut items: Vec<Value> = Vec::new();
            let mut cursors: Vec<String> = Vec::new();
            let mut cursor: Option<String> = None;
            let mut failed = None;
            for _ in 0..MAX_LIST_PAGES {
                let mut params = json!({});
                if let Some(c) = &cursor {
                    params["cursor"] = json!(c);
                }
                let answer = match self.request_renewing(method, params).await {
                    Ok(a) => a,
                    Err(e) => {
                        failed = Some(text(e));
                        break;
                    }
                };
                let result = match answer_result(&answer, method) {
                    Ok(r) => r,
                    Err(e) => {
                        failed = Some(text(e));
                        break;
                    }
                };
                let room = MAX_ITEMS.saturating_sub(items.len());
                if let Some(page) = result.get(key).and_then(Value::as_array) {
                    items.extend(page.iter().take(room).cloned());
                }
                cursor = result
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match &cursor {
                    Some(c) if items.len() < MAX_ITEMS && !cursors.contains(c) => {
                        cursors.push(c.clone());
                    }
                    Some(_) => {
                        tracing::warn!(
                            "{method}: stopped following nextCursor after {} items",
                            items.len()
                        );
                        break;
                    }
                    None => break,
                }
            }
            match (key, failed) {
                ("tools", Some(e)) => return Err(e),
                ("tools", None) => listing.tools = items,
                (_, Some(e)) => tracing::debug!("{method} failed: {e}"),
                ("prompts", None) => listing.prompts = Some(items),
                ("resources", None) => listing.resources = Some(items),
                ("resourceTemplates", None) => listing.resource_templates = Some(items),
                (_, None) => listing.skills = Some(items),
            }
        }
        // The skill files and apps the firewall pins, read now (SPEC §27).
        for uri in crate::mcp::pinned::uris(&listing) {
            let kept = match self
                .request_renewing("resources/read", json!({"uri": uri}))
                .await
            {
                Ok(mut a) => {
                    if let Some(m) = a.as_object_mut() {
                        m.retain(|k, _| k == "result" || k == "error");
                    }
                    a
                }
                Err(e) => json!({"error": {"message": text(e)}}),
            };
            listing.reads.push((uri, kept));
        }
        Ok(listing)
    }

    async fn discover(&mut self) -> Result<Discovered, Failure> {
        let id = self.id();
        let msg = message_2026(id, "server/discover", json!({}));
        let r = self.post(&msg, Some(id), Some("server/discover")).await?;
        if (400..500).contains(&r.status) {
            return Ok(Discovered::Older(format!(
                "server/discover answered HTTP {}",
                r.status
            )));
        }
        if r.status != 200 {
            return Err(Failure::Other(format!(
                "server/discover answered HTTP {}",
                r.status
            )));
        }
        let answer = find_answer(&r.body, id).ok_or_else(|| no_answer("server/discover", &r))?;
        if let Some(result) = answer.get("result") {
            let server = result.pointer(&format!(
                "/_meta/{}",
                wire::META_SERVER_INFO.replace('/', "~1")
            ));
            return Ok(Discovered::Yes(McpInfo {
                era: McpEra::V2026,
                protocol_version: wire::VERSION_2026.to_owned(),
                server_name: text_at(server, "name"),
                server_version: text_at(server, "version"),
                capabilities: result.get("capabilities").cloned(),
            }));
        }
        let err = &answer["error"];
        let code = err.get("code").and_then(Value::as_i64);
        match code {
            Some(wire::METHOD_NOT_FOUND) => Ok(Discovered::Older(
                "server/discover is not a method there".to_owned(),
            )),
            Some(c @ (wire::UNSUPPORTED_VERSION | wire::UNSUPPORTED_VERSION_DRAFT)) => {
                let offered = offered_versions(&err["data"]);
                if offered.iter().any(|v| v.as_str() >= wire::VERSION_2026) {
                    Err(Failure::Other(format!(
                        "server/discover refused {} (code {c}) yet offers {}",
                        wire::VERSION_2026,
                        offered.join(", ")
                    )))
                } else {
                    Ok(Discovered::Older(format!(
                        "the server offers only {}",
                        if offered.is_empty() {
                            "older versions".to_owned()
                        } else {
                            offered.join(", ")
                        }
                    )))
                }
            }
            _ => Err(Failure::Other(rpc_error_text(err, "server/discover"))),
        }
    }

    async fn initialize(&mut self) -> Result<(), Failure> {
        self.session = None;
        self.announced = false;
        let id = self.id();
        let msg = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": wire::VERSION_2025,
                "capabilities": {},
                "clientInfo": {"name": "xy", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let r = self.post(&msg, Some(id), None).await?;
        if r.status != 200 {
            return Err(Failure::Other(format!(
                "initialize answered HTTP {}",
                r.status
            )));
        }
        let answer = find_answer(&r.body, id).ok_or_else(|| no_answer("initialize", &r))?;
        if let Some(sid) = r.header("mcp-session-id") {
            self.session = Some(sid.to_owned());
        }
        let result = answer_result(&answer, "initialize")?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure::Other("initialize result has no protocolVersion".to_owned()))?;
        if !is_2025_era(version) {
            return Err(Failure::Other(format!(
                "initialize answered protocol version {version:?}, not a 2025-era one"
            )));
        }
        let server = result.get("serverInfo");
        self.info = Some(McpInfo {
            era: McpEra::V2025,
            protocol_version: version.to_owned(),
            server_name: text_at(server, "name"),
            server_version: text_at(server, "version"),
            capabilities: result.get("capabilities").cloned(),
        });
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = self.post(&note, None, None).await?;
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
        let r = self.post(&msg, Some(id), None).await?;
        let answer = self.answer(r, "ping", id)?;
        answer_result(&answer, "ping").map(|_| ())
    }

    /// A request in the era found: 2026 with `_meta` and headers, 2025 in the session.
    async fn request(&mut self, method: &str, params: Value, id: u64) -> Result<Value, Failure> {
        let r = if self.era == Some(McpEra::V2026) {
            let msg = message_2026(id, method, params);
            self.post(&msg, Some(id), Some(method)).await?
        } else {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            self.post(&msg, Some(id), None).await?
        };
        self.answer(r, method, id)
    }

    /// [`McpClient::request`]; in a session the server forgot (HTTP 404),
    /// once more in a new one.
    async fn request_renewing(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let id = self.id();
        match self.request(method, params.clone(), id).await {
            Err(Failure::SessionGone) => {
                self.initialized = false;
                self.initialize().await?;
                let id = self.id();
                self.request(method, params, id).await
            }
            r => r,
        }
    }

    /// The answer with `id`, or why there is none.
    fn answer(&self, r: Response, method: &str, id: u64) -> Result<Value, Failure> {
        if r.status == 404 && self.session.is_some() {
            return Err(Failure::SessionGone);
        }
        if r.status != 200 {
            return Err(Failure::Other(format!(
                "{method} answered HTTP {}",
                r.status
            )));
        }
        find_answer(&r.body, id).ok_or_else(|| no_answer(method, &r))
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// POSTs one message. `mcp_method` set: the 2026 headers; else the 2025
    /// session's headers.
    async fn post(
        &self,
        msg: &Value,
        id: Option<u64>,
        mcp_method: Option<&str>,
    ) -> Result<Response, Failure> {
        let body = serde_json::to_vec(msg).unwrap_or_default();
        let mut headers: Vec<(&str, &str)> =
            vec![("Content-Type", "application/json"), ("Accept", ACCEPT)];
        // 2026 names the target of a call or read in a header too; a server
        // that checks it answers 400 without it (the listing's reads of skill
        // files and apps would all be pinned as unreadable).
        let name = match mcp_method {
            Some("tools/call" | "prompts/get") => msg.pointer("/params/name"),
            Some("resources/read") => msg.pointer("/params/uri"),
            _ => None,
        }
        .and_then(Value::as_str);
        match mcp_method {
            Some(m) => {
                headers.push(("MCP-Protocol-Version", wire::VERSION_2026));
                headers.push(("Mcp-Method", m));
                if let Some(n) = name {
                    headers.push(("Mcp-Name", n));
                }
            }
            None => {
                if let Some(s) = &self.session {
                    headers.push(("Mcp-Session-Id", s));
                }
                if self.initialized
                    && let Some(info) = &self.info
                {
                    headers.push(("MCP-Protocol-Version", &info.protocol_version));
                }
            }
        }
        let done = move |b: &[u8]| id.is_some_and(|id| find_answer(b, id).is_some());
        self.http("POST", &headers, Some(body.as_slice()), &done)
            .await
            .map_err(Failure::Other)
    }
}

/// A 2026 request: `_meta` with version, capabilities and client info.
fn message_2026(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        wire::META_PROTOCOL_VERSION: wire::VERSION_2026,
        wire::META_CLIENT_CAPABILITIES: {},
        wire::META_CLIENT_INFO: {"name": "xy", "version": env!("CARGO_PKG_VERSION")},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `2024-11-05` ≤ v < `2026-07-28`, date-shaped (ISO dates compare as text).
fn is_2025_era(v: &str) -> bool {
    let dated = v.len() == 10
        && v.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    dated && (wire::OLDEST_2025..wire::VERSION_2026).contains(&v)
}

/// The versions an UnsupportedProtocolVersion error offers (`data.supported`,
/// or `data.supportedVersions` as some servers spell it).
fn offered_versions(data: &Value) -> Vec<String> {
    ["supported", "supportedVersions"]
        .iter()
        .filter_map(|k| data.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn text_at(v: Option<&Value>, key: &str) -> Option<String> {
    v?.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn no_answer(method: &str, r: &Response) -> Failure {
    let kind = r.header("content-type").unwrap_or("no content type");
    Failure::Other(format!(
        "no JSON-RPC answer to {method} in the response ({kind})"
    ))
}

fn text(f: Failure) -> String {
    match f {
        Failure::SessionGone => "session not found (HTTP 404)".to_owned(),
        Failure::Other(s) => s,
    }
}

fn rpc_error_text(err: &Value, method: &str) -> String {
    format!(
        "{method} failed: {} (code {})",
        err["message"].as_str().unwrap_or("no message"),
        err["code"]
    )
}

/// The `result` of an answer, or its `error` as a failure.
fn answer_result<'a>(answer: &'a Value, method: &str) -> Result<&'a Value, Failure> {
    match answer.get("result") {
        Some(result) => Ok(result),
        None => Err(Failure::Other(rpc_error_text(&answer["error"], method))),
    }
}

/// The JSON-RPC answer with `id` in a body that is JSON (an object or a
/// batch) or SSE (`data:` lines of complete events; empty priming events
/// are skipped).
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
        let sse = b"data: \nid: 0\nretry: 3000\n\nevent: message\r\nid: 7\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";
        assert!(find_answer(sse, 5).is_some());
        // An event still being written is not an answer yet.
        let partial = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n";
        assert!(find_answer(partial, 5).is_none());
        assert!(find_answer(b": keep-alive\n\n", 5).is_none());
        assert!(find_answer(b"", 5).is_none());
        assert!(find_answer(b"<html>this is not JSON-RPC{{{", 5).is_none());
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

    #[test]
    fn era_versions_and_offers() {
        for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
            assert!(is_2025_era(v), "{v}");
        }
        for v in ["2026-07-28", "2024-10-07", "latest", "2025-6-18", ""] {
            assert!(!is_2025_era(v), "{v}");
        }
        assert_eq!(
            offered_versions(&json!({"requested": "2026-07-28", "supported": ["2025-06-18"]})),
            ["2025-06-18"]
        );
        assert_eq!(
            offered_versions(&json!({"supportedVersions": ["2025-11-25"]})),
            ["2025-11-25"]
        );
        assert!(offered_versions(&Value::Null).is_empty());
    }

    #[test]
    fn the_2026_request_shape() {
        let m = message_2026(7, "server/discover", json!({}));
        assert_eq!(m["method"], "server/discover");
        let meta = &m["params"]["_meta"];
        assert_eq!(meta[wire::META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(meta[wire::META_CLIENT_CAPABILITIES], json!({}));
        assert_eq!(meta[wire::META_CLIENT_INFO]["name"], "xy");
    }
}
