//! A small blocking MCP client over streamable HTTP (on `ureq`) for the
//! stdio-bridge tests: a 2025-era client with an `Mcp-Session-Id`, or a
//! 2026-era one that sends the `_meta` envelope and `MCP-Protocol-Version`
//! on every request. Answers are read whole (JSON or SSE); streams (a GET
//! stream, `subscriptions/listen`, a long call) are read on a thread.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::{DEADLINE, scaled};

pub(crate) const V2026: &str = "2026-07-28";
pub(crate) const V2025: &str = "2025-11-25";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    V2025,
    V2026,
}

/// One HTTP answer: status, headers of interest, every JSON-RPC message.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) session: Option<String>,
    pub(crate) messages: Vec<Value>,
}

impl Reply {
    /// The JSON-RPC response (the message with no `method`).
    #[track_caller]
    pub(crate) fn response(&self) -> &Value {
        self.messages
            .iter()
            .find(|m| m.get("method").is_none())
            .unwrap_or_else(|| panic!("no response in {self:?}"))
    }

    /// The notifications that came before the response.
    pub(crate) fn notifications(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m["method"] == method)
            .collect()
    }
}

pub(crate) struct Mcp {
    agent: ureq::Agent,
    pub(crate) url: String,
    pub(crate) era: Era,
    pub(crate) session: Option<String>,
    /// The capabilities it declares (`initialize`, or every 2026 request's
    /// `_meta`): none unless a test says.
    pub(crate) caps: Value,
    next_id: u64,
}

impl Mcp {
    pub(crate) fn new(url: &str, era: Era) -> Mcp {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(xy_testbins::wait::scaled(Duration::from_secs(10))))
            .build()
            .into();
        Mcp {
            agent,
            url: url.to_owned(),
            era,
            session: None,
            caps: json!({}),
            next_id: 0,
        }
    }

    /// A connected client declaring `caps`.
    pub(crate) fn declaring(url: &str, era: Era, caps: Value) -> Mcp {
        let mut c = Mcp::new(url, era);
        c.caps = caps;
        if era == Era::V2025 {
            let r = c.initialize();
            assert!(r.response().get("result").is_some(), "initialize: {r:?}");
        }
        c
    }

    /// A client that has done the 2025 handshake (a 2026 client needs none).
    pub(crate) fn connected(url: &str, era: Era) -> Mcp {
        let mut c = Mcp::new(url, era);
        if era == Era::V2025 {
            let r = c.initialize();
            assert!(r.response().get("result").is_some(), "initialize: {r:?}");
        }
        c
    }

    pub(crate) fn initialize(&mut self) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": V2025,
            "capabilities": self.caps,
            "clientInfo": {"name": "xy-stdio-test", "version": "1"},
        }});
        let reply = self.post(&body, &[]);
        if let Some(s) = &reply.session {
            self.session = Some(s.clone());
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let r = self.post(&note, &self.session_headers());
            assert_eq!(r.status, 202, "notifications/initialized: {r:?}");
        }
        reply
    }

    /// The 2025 headers: the version, and the session once there is one.
    pub(crate) fn session_headers(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![("MCP-Protocol-Version", V2025.to_owned())];
        if let Some(s) = &self.session {
            h.push(("Mcp-Session-Id", s.clone()));
        }
        h
    }

    /// The request body and headers this client's era needs.
    fn envelope(&mut self, method: &str, params: Value) -> (Value, Vec<(&'static str, String)>) {
        self.next_id += 1;
        let mut params = if params.is_null() { json!({}) } else { params };
        let headers = match self.era {
            Era::V2025 => self.session_headers(),
            Era::V2026 => {
                let meta = params
                    .as_object_mut()
                    .expect("params is an object")
                    .entry("_meta")
                    .or_insert_with(|| json!({}));
                meta["io.modelcontextprotocol/protocolVersion"] = json!(V2026);
                meta["io.modelcontextprotocol/clientCapabilities"] = self.caps.clone();
                let mut h = vec![
                    ("MCP-Protocol-Version", V2026.to_owned()),
                    ("Mcp-Method", method.to_owned()),
                ];
                let name = match method {
                    "tools/call" | "prompts/get" => params.get("name"),
                    "resources/read" => params.get("uri"),
                    _ => None,
                };
                if let Some(n) = name.and_then(Value::as_str) {
                    h.push(("Mcp-Name", n.to_owned()));
                }
                h
            }
        };
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        (body, headers)
    }

    /// One request; the whole answer.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Reply {
        let (body, headers) = self.envelope(method, params);
        self.post(&body, &headers)
    }

    /// One request with `extra` headers; the response's headers (names
    /// lowercase) and the whole answer.
    pub(crate) fn request_with(
        &mut self,
        method: &str,
        params: Value,
        extra: &[(&'static str, String)],
    ) -> (Vec<(String, String)>, Reply) {
        let (body, mut headers) = self.envelope(method, params);
        headers.extend(extra.iter().cloned());
        let resp = self.send(&body, &headers);
        let heads = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        (heads, read_reply(resp))
    }

    /// One request; the JSON-RPC response's text exactly as it came
    /// (the body, or the SSE event's data), for byte-for-byte comparisons.
    pub(crate) fn raw(&mut self, method: &str, params: Value) -> String {
        let (body, headers) = self.envelope(method, params);
        let resp = self.send(&body, &headers);
        let mut text = String::new();
        resp.into_body()
            .into_reader()
            .read_to_string(&mut text)
            .expect("read body");
        if !text.trim_start().starts_with('{') {
            // SSE: the event whose data is the response (no `method`).
            let mut data = String::new();
            for line in text.lines() {
                if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                } else if line.is_empty() && !data.is_empty() {
                    let v: Value = serde_json::from_str(&data).unwrap_or_default();
                    if v.get("method").is_none() && v.get("id").is_some() {
                        return data;
                    }
                    data.clear();
                }
            }
            return data;
        }
        text.trim_end().to_owned()
    }

    /// A request that must succeed; returns its `result`.
    #[track_caller]
    pub(crate) fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params);
        let resp = r.response();
        assert!(
            resp.get("result").is_some(),
            "{method} via {:?} failed: {r:?}",
            self.era
        );
        resp["result"].clone()
    }

    /// The tool names `tools/list` returns.
    pub(crate) fn tool_names(&mut self) -> Vec<String> {
        let r = self.result("tools/list", json!({}));
        r["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// A request whose answer is read on a thread as it streams.
    pub(crate) fn start(&mut self, method: &str, params: Value) -> Stream {
        let (body, headers) = self.envelope(method, params);
        let resp = self.send(&body, &headers);
        Stream::read(resp)
    }

    /// A message of this client's own making (id and all), read as it streams.
    pub(crate) fn start_body(&self, body: &Value) -> Stream {
        let resp = self.send(body, &self.session_headers());
        Stream::read(resp)
    }

    /// A stream of broadcast notifications: the session's GET stream
    /// (2025) or `subscriptions/listen` for tools (2026). Returns once
    /// the bridge has registered it.
    pub(crate) fn listen(&mut self) -> Stream {
        match self.era {
            Era::V2025 => {
                let mut req = self
                    .agent
                    .get(&self.url)
                    .header("Accept", "text/event-stream");
                for (k, v) in self.session_headers() {
                    req = req.header(k, v);
                }
                let resp = req.call().expect("GET stream");
                assert_eq!(resp.status().as_u16(), 200, "GET stream refused");
                Stream::read(resp)
            }
            Era::V2026 => {
                let s = self.start(
                    "subscriptions/listen",
                    json!({"notifications": {"toolsListChanged": true}}),
                );
                assert_eq!(s.status, 200, "subscriptions/listen refused");
                s.expect("notifications/subscriptions/acknowledged");
                s
            }
        }
    }

    /// One POST; the HTTP response as it comes (headers and all).
    pub(crate) fn send(
        &self,
        body: &Value,
        headers: &[(&'static str, String)],
    ) -> ureq::http::Response<ureq::Body> {
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        req.send(body.to_string())
            .unwrap_or_else(|e| panic!("POST {}: {e}", self.url))
    }

    /// A POST read to its end.
    pub(crate) fn post(&self, body: &Value, headers: &[(&'static str, String)]) -> Reply {
        let resp = self.send(body, headers);
        read_reply(resp)
    }

    /// `DELETE` of this client's session; the HTTP status.
    pub(crate) fn delete(&self) -> u16 {
        let mut req = self.agent.delete(&self.url);
        for (k, v) in self.session_headers() {
            req = req.header(k, v);
        }
        req.call().expect("DELETE").status().as_u16()
    }
}

fn read_reply(resp: ureq::http::Response<ureq::Body>) -> Reply {
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut reader = resp.into_body().into_reader();
    let mut messages = Vec::new();
    if sse {
        sse_events(reader, |m| messages.push(m));
    } else {
        let mut text = String::new();
        reader.read_to_string(&mut text).expect("read body");
        if !text.trim().is_empty() {
            messages.push(
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad body {text:?}: {e}")),
            );
        }
    }
    Reply {
        status,
        session,
        messages,
    }
}

/// Calls `each` with every `data:` event's JSON until the stream ends.
fn sse_events(reader: impl Read, mut each: impl FnMut(Value)) {
    let mut data = String::new();
    for line in BufReader::new(reader).lines() {
        let Ok(line) = line else { break };
        if let Some(d) = line.strip_prefix("data:") {
            data.push_str(d.trim_start());
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(v) = serde_json::from_str(&data) {
                each(v);
            }
            data.clear();
        }
    }
}

/// Messages of a streamed answer, as they come; `None` marks its end.
pub(crate) struct Stream {
    rx: mpsc::Receiver<Option<Value>>,
    pub(crate) status: u16,
}

impl Stream {
    fn read(resp: ureq::http::Response<ureq::Body>) -> Stream {
        let status = resp.status().as_u16();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let json = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|t| t.starts_with("application/json"));
            let reader = resp.into_body().into_reader();
            if json {
                if let Ok(v) = serde_json::from_reader::<_, Value>(reader) {
                    let _ = tx.send(Some(v));
                }
            } else {
                sse_events(reader, |m| {
                    let _ = tx.send(Some(m));
                });
            }
            let _ = tx.send(None);
        });
        Stream { rx, status }
    }

    /// Waits for a message with this method (others are skipped).
    #[track_caller]
    pub(crate) fn expect(&self, method: &str) -> Value {
        let start = Instant::now();
        loop {
            let left = scaled(DEADLINE).saturating_sub(start.elapsed());
            match self.rx.recv_timeout(left) {
                Ok(Some(m)) if m["method"] == method => return m,
                Ok(Some(_)) => {}
                Ok(None) => panic!("stream ended before {method}"),
                Err(_) => panic!("no {method} within {DEADLINE:?}"),
            }
        }
    }

    /// Waits for the response (no `method`), skipping notifications.
    #[track_caller]
    pub(crate) fn response(&self) -> Value {
        let start = Instant::now();
        loop {
            let left = scaled(DEADLINE).saturating_sub(start.elapsed());
            match self.rx.recv_timeout(left) {
                Ok(Some(m)) if m.get("method").is_none() => return m,
                Ok(Some(_)) => {}
                Ok(None) => panic!("stream ended without a response"),
                Err(_) => panic!("no response within {DEADLINE:?}"),
            }
        }
    }

    /// The first message, whatever it is.
    #[track_caller]
    pub(crate) fn response_or_note(&self) -> Value {
        match self.rx.recv_timeout(scaled(DEADLINE)) {
            Ok(Some(m)) => m,
            other => panic!("no message: {other:?}"),
        }
    }

    /// Waits for the end of the stream; returns what came before it.
    #[track_caller]
    pub(crate) fn until_end(&self) -> Vec<Value> {
        let start = Instant::now();
        let mut seen = Vec::new();
        loop {
            let left = scaled(DEADLINE).saturating_sub(start.elapsed());
            match self.rx.recv_timeout(left) {
                Ok(Some(m)) => seen.push(m),
                Ok(None) => return seen,
                Err(_) => panic!("stream still open after {DEADLINE:?}: {seen:?}"),
            }
        }
    }

    /// Whatever arrived so far, without waiting.
    pub(crate) fn drain(&self) -> Vec<Value> {
        self.rx.try_iter().flatten().collect()
    }
}
