//! `xy-test-mcp` over real TCP with a tiny std-only HTTP/1.1 client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::helper::Proc;

const MCP: &str = env!("CARGO_BIN_EXE_xy-test-mcp");

struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

/// One keep-alive connection.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> HttpResponse {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.writer.write_all(req.as_bytes()).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> HttpResponse {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap();
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).unwrap();
        HttpResponse {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    }

    fn rpc(&mut self, session: Option<&str>, body: Value) -> HttpResponse {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(id) = session {
            headers.push(("Mcp-Session-Id", id));
        }
        self.request("POST", "/mcp", &headers, &body.to_string())
    }
}

/// Starts the server on a free port (`--port 0`) and returns it with its address.
fn start(extra: &[&str]) -> (Proc, String) {
    let mut args = vec!["--port", "0"];
    args.extend_from_slice(extra);
    let p = Proc::spawn(MCP, &args, |_| {});
    let line = p.stderr_line(|l| l.starts_with("xy-test-mcp listening on "));
    let addr = line.rsplit(' ').next().unwrap().to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    (p, addr)
}

#[test]
fn mcp_session_lifecycle() {
    let (mut p, addr) = start(&[]);
    let mut c = Client::connect(&addr);

    let health = c.request("GET", "/health", &[], "");
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));

    let init = c.rpc(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert_eq!(init.status, 200);
    let session = init
        .header("mcp-session-id")
        .expect("session header")
        .to_owned();
    assert_eq!(session.len(), 32);
    let result = &init.json()["result"];
    assert_eq!(init.json()["id"], 1);
    assert_eq!(result["protocolVersion"], "2025-03-26");
    assert_eq!(result["capabilities"], json!({"tools": {}}));
    assert_eq!(result["serverInfo"]["name"], "xy-test-mcp");
    p.stdout_line(|l| l == "POST /mcp initialize 200");

    let note = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!((note.status, note.body.as_str()), (202, ""));

    let list = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let tools = &list.json()["result"]["tools"];
    assert_eq!(tools[0]["name"], "echo");
    assert_eq!(tools[0]["inputSchema"]["type"], "object");

    let call = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello"}}}),
    );
    assert_eq!(
        call.json()["result"]["content"],
        json!([{"type": "text", "text": "hello"}])
    );

    let ping = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    );
    assert_eq!(
        ping.json(),
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );

    let unknown = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 4, "method": "nope"}),
    );
    assert_eq!(unknown.json()["error"]["code"], -32601);

    let batch = c.rpc(
        Some(&session),
        json!([
            {"jsonrpc": "2.0", "id": 5, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
        ]),
    );
    let replies = batch.json();
    assert_eq!(replies.as_array().unwrap().len(), 2);
    assert_eq!(replies[0]["id"], 5);
    assert_eq!(replies[1]["id"], 6);

    // A second connection shares the session table.
    let mut c2 = Client::connect(&addr);
    let deleted = c2.request("DELETE", "/mcp", &[("Mcp-Session-Id", &session)], "");
    assert_eq!(deleted.status, 200);
    let gone = c.rpc(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    );
    assert_eq!(gone.status, 404);
    assert_eq!(gone.json()["error"]["code"], -32001);

    p.signal(Signal::SIGTERM);
    p.stdout_line(|l| l == "got SIGTERM, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn mcp_rejects_missing_or_unknown_sessions_and_bad_json() {
    let (_p, addr) = start(&[]);
    let mut c = Client::connect(&addr);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(c.rpc(None, ping.clone()).status, 400);
    assert_eq!(c.rpc(Some("feedface"), ping).status, 404);
    let bad = c.request("POST", "/mcp", &[], "{not json");
    assert_eq!(
        (bad.status, bad.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    assert_eq!(
        c.request("DELETE", "/mcp", &[("Mcp-Session-Id", "x")], "")
            .status,
        404
    );
    assert_eq!(c.request("GET", "/mcp", &[], "").status, 405);
    assert_eq!(c.request("GET", "/elsewhere", &[], "").status, 404);
}

#[test]
fn mcp_sse_answers_custom_path_and_stateless() {
    let (_p, addr) = start(&["--path", "/x/mcp", "--stateless"]);
    let mut c = Client::connect(&addr);
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let sse = c.request("POST", "/x/mcp", &[("Accept", "text/event-stream")], &body);
    assert_eq!(sse.status, 200);
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    let data = sse
        .body
        .strip_prefix("event: message\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not SSE: {:?}", sse.body));
    assert_eq!(serde_json::from_str::<Value>(data).unwrap()["id"], 9);
    assert!(sse.header("mcp-session-id").is_none());
    assert_eq!(c.request("POST", "/mcp", &[], &body).status, 404);
}

#[test]
fn mcp_chunked_request_body() {
    let (_p, addr) = start(&["--stateless"]);
    let mut c = Client::connect(&addr);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (a, b) = body.split_at(10);
    let raw = format!(
        "POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    c.writer.write_all(raw.as_bytes()).unwrap();
    let resp = c.read_response();
    assert_eq!(resp.json()["result"]["tools"][0]["name"], "echo");
}

#[test]
fn mcp_hang_accepts_but_never_answers() {
    let (_p, addr) = start(&["--hang"]);
    let stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    (&stream)
        .write_all(b"GET /health HTTP/1.1\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 16];
    let err = (&stream).read(&mut buf).expect_err("no answer expected");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err}"
    );
}

#[test]
fn mcp_taken_port_exits_1() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut p = Proc::spawn(MCP, &["--port", &port, "--fail-bind-exit"], |_| {});
    p.stderr_line(|l| l.starts_with("xy-test-mcp: cannot bind 127.0.0.1:"));
    assert_eq!(p.wait_exit().code(), Some(1));
}
