//! `xy-test-mcp` (rmcp inside, a hyper front) over real TCP and stdio, with a
//! tiny std-only HTTP/1.1 client: both eras, dual-era, sessions and their
//! count, tool sets and pages, and every fault mode.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::helper::{Proc, temp_path};

const MCP: &str = env!("CARGO_BIN_EXE_xy-test-mcp");
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");

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

    /// The JSON-RPC answer: the body, or the last non-empty SSE `data:`.
    fn json(&self) -> Value {
        let sse = self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let text = if sse {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| !d.is_empty())
                .unwrap_or_else(|| panic!("no SSE data in {:?}", self.body))
        } else {
            self.body.as_str()
        };
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

/// One request per connection (`Connection: close`), so a chunked or SSE
/// answer ends at EOF.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(xy_testbins::wait::scaled(Duration::from_secs(10))))
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut raw = Vec::new();
    reader.read_to_end(&mut raw).unwrap();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked { dechunk(&raw) } else { raw };
    HttpResponse {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap().trim(), 16).unwrap();
        raw = &raw[end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    })
}

/// A 2026-style POST: version and method headers, `_meta` in params.
fn post26(addr: &str, id: u64, method: &str, mut params: Value) -> HttpResponse {
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ACCEPT,
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ],
        &body.to_string(),
    )
}

/// A 2025-style POST, with the session header when given.
fn post25(addr: &str, session: Option<&str>, body: Value) -> HttpResponse {
    let mut headers = vec![("Content-Type", "application/json"), ACCEPT];
    if let Some(id) = session {
        headers.push(("Mcp-Session-Id", id));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
    }
    request(addr, "POST", "/mcp", &headers, &body.to_string())
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
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
fn mcp_2025_session_lifecycle_is_counted() {
    let sessions = temp_path("sessions.txt");
    let (mut p, addr) = start(&[
        "--era",
        "2025",
        "--sessions-file",
        sessions.to_str().unwrap(),
    ]);
    assert_eq!(request(&addr, "GET", "/health", &[], "").body, "ok");

    let init = post25(&addr, None, initialize());
    assert_eq!(init.status, 200);
    let session = init
        .header("mcp-session-id")
        .expect("session header")
        .to_owned();
    let result = &init.json()["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["serverInfo"]["name"], "xy-test-mcp");
    p.stdout_line(|l| l == "POST /mcp initialize 200");

    let note = post25(
        &addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(note.status, 202);
    let ping = post25(
        &addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    );
    assert_eq!(
        ping.json(),
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    let list = post25(
        &addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(list.json()["result"]["tools"][0]["name"], "echo");
    let call = post25(
        &addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}}}),
    );
    assert_eq!(
        call.json()["result"]["content"],
        json!([{"type": "text", "text": "hello"}])
    );

    let deleted = request(&addr, "DELETE", "/mcp", &[("Mcp-Session-Id", &session)], "");
    assert!((200..300).contains(&deleted.status), "{}", deleted.status);
    p.stdout_line(|l| l.starts_with("session close ") && l.ends_with("(open sessions: 0)"));
    let gone = post25(
        &addr,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    );
    assert_eq!(gone.status, 404);
    assert_eq!(
        std::fs::read_to_string(&sessions).unwrap(),
        format!("open {session}\nclose {session}\n")
    );

    p.signal(Signal::SIGTERM);
    p.stdout_line(|l| l == "got SIGTERM, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn mcp_2026_discover_pages_and_no_handshake() {
    let (mut p, addr) = start(&[
        "--era",
        "2026",
        "--tools",
        "a,b,c",
        "--page-size",
        "2",
        "--name",
        "n26",
        "--version",
        "9",
    ]);
    let discover = post26(&addr, 1, "server/discover", json!({}));
    assert_eq!(discover.status, 200);
    assert_eq!(discover.header("content-type"), Some("application/json"));
    let result = &discover.json()["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "n26", "version": "9"})
    );
    assert!(discover.header("mcp-session-id").is_none());

    let page1 = post26(&addr, 2, "tools/list", json!({})).json();
    let names = |v: &Value| -> Vec<String> {
        v["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&page1), ["a", "b"]);
    let cursor = page1["result"]["nextCursor"].as_str().unwrap().to_owned();
    let page2 = post26(&addr, 3, "tools/list", json!({"cursor": cursor})).json();
    assert_eq!(names(&page2), ["c"]);
    assert!(page2["result"].get("nextCursor").is_none());

    assert_eq!(
        post26(&addr, 4, "ping", json!({})).json()["error"]["code"],
        -32601
    );
    let init = post25(&addr, None, initialize()).json();
    assert_eq!(init["error"]["code"], -32022, "{init}");
    p.signal(Signal::SIGTERM);
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn mcp_2025_only_refuses_discover_with_older_versions_and_dual_era_answers_both() {
    let (_p, addr) = start(&["--era", "2025"]);
    let refused = post26(&addr, 1, "server/discover", json!({})).json();
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    let supported = refused["error"]["data"]["supported"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        supported.iter().all(|v| v.as_str().unwrap() < "2026"),
        "{supported:?}"
    );

    let (_p, addr) = start(&["--sse"]);
    let discover = post26(&addr, 1, "server/discover", json!({}));
    assert_eq!(discover.header("content-type"), Some("text/event-stream"));
    assert_eq!(
        discover.json()["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        "2026-07-28"
    );
    let init = post25(&addr, None, initialize());
    assert!(init.header("mcp-session-id").is_some());
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn mcp_tools_file_and_descriptions() {
    let file = temp_path("tools.txt");
    std::fs::write(&file, "# tools\nalpha\nbeta = Beta tool\n").unwrap();
    let (_p, addr) = start(&[
        "--tools-file",
        file.to_str().unwrap(),
        "--describe",
        "alpha=First",
    ]);
    let tools = post26(&addr, 1, "tools/list", json!({})).json()["result"]["tools"].clone();
    assert_eq!(tools[0]["name"], "alpha");
    assert_eq!(tools[0]["description"], "First");
    assert_eq!(tools[1]["description"], "Beta tool");
}

#[test]
fn mcp_faults_garbage_500_and_after() {
    let (_p, addr) = start(&["--fault", "http500"]);
    assert_eq!(post26(&addr, 1, "server/discover", json!({})).status, 500);

    let (p, addr) = start(&[
        "--era",
        "2025",
        "--fault",
        "garbage",
        "--fault-on",
        "ping",
        "--fault-after",
        "1",
    ]);
    let init = post25(&addr, None, initialize());
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(
        post25(&addr, Some(&session), ping.clone()).json()["result"],
        json!({})
    );
    let bad = post25(&addr, Some(&session), ping);
    assert_eq!(bad.status, 200);
    assert!(
        serde_json::from_str::<Value>(&bad.body).is_err(),
        "{}",
        bad.body
    );
    p.stdout_line(|l| l == "POST /mcp ping 200");
}

#[test]
fn mcp_hang_accepts_but_never_answers() {
    let (_p, addr) = start(&["--hang"]);
    let stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    (&stream)
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
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
fn mcp_stdio_form_answers_initialize_and_tools() {
    let mut p = Proc::spawn(
        MCP,
        &["--stdio", "--era", "2025", "--tools", "x,y"],
        |cmd| {
            cmd.stdin(Stdio::piped());
        },
    );
    let mut stdin = p.child.stdin.take().unwrap();
    let send = |stdin: &mut std::process::ChildStdin, v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(&mut stdin, initialize());
    let line = p.stdout_line(|l| l.contains("\"id\":1"));
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["result"]["serverInfo"]["name"],
        "xy-test-mcp"
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let line = p.stdout_line(|l| l.contains("\"id\":2"));
    let tools = serde_json::from_str::<Value>(&line).unwrap()["result"]["tools"].clone();
    assert_eq!(
        (tools[0]["name"].clone(), tools[1]["name"].clone()),
        (json!("x"), json!("y"))
    );
    drop(stdin);
    p.stderr_line(|l| l == "stdin closed, exiting");
    assert_eq!(p.wait_exit().code(), Some(0));
}

#[test]
fn mcp_taken_port_exits_1() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut p = Proc::spawn(MCP, &["--port", &port, "--fail-bind-exit"], |_| {});
    p.stderr_line(|l| l.starts_with("xy-test-mcp: cannot bind 127.0.0.1:"));
    assert_eq!(p.wait_exit().code(), Some(1));
}
