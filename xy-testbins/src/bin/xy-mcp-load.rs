//! `xy-mcp-load`: the load generator of `bench/stdio_bridges.py`. It times
//! `tools/call echo` round trips through a streamable-HTTP bridge (one
//! keep-alive connection and one 2025 session per client, a blocking socket
//! per client thread with `httparse` for the answer's head) or over a stdio
//! child's own pipes, and prints one JSON line of figures. Written in Rust
//! so that the client is not the bottleneck: it also reports its own CPU
//! time per request.
//!
//! ```text
//! xy-mcp-load http PORT PATH latency N
//! xy-mcp-load http PORT PATH throughput SECONDS CLIENTS
//! xy-mcp-load http PORT PATH soak SECONDS CLIENTS TIMES_FILE
//! xy-mcp-load direct N -- CMD [ARGS...]
//! ```
//!
//! `soak` (`bench/remote_refresh.py`) keeps going on errors: a non-2xx
//! answer, a JSON-RPC error or a tool result with `isError` is counted,
//! the connection is opened again after a transport error, and every call's
//! start (µs since the Unix epoch), latency (µs) and outcome go to
//! TIMES_FILE, one `start latency ok` line each, so a bench can set them
//! against events it timed itself (an authorization server's refreshes).
//!
//! `XY_MCP_LOAD_HEADER='Name: value'` adds one header to every HTTP request
//! (`bench/remote_overhead.py` reaches a bearer-protected server directly).

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xy_testbins::out::{err, out};
use xy_testbins::sys::{StdioChild, spawn_stdio_child};

const USAGE: &str = "xy-mcp-load http PORT PATH latency N | http PORT PATH throughput SECONDS CLIENTS | http PORT PATH soak SECONDS CLIENTS TIMES_FILE | direct N -- CMD [ARGS...]";
const WARMUP: usize = 50;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let cpu = cpu_time();
    let (report, requests) = match a.as_slice() {
        ["http", port, path, "latency", n] => {
            let (p50, p99, n) = http_latency(parse(port), path, parse(n));
            (json!({"p50_us": p50, "p99_us": p99}), n)
        }
        ["http", port, path, "throughput", secs, clients] => {
            let (rps, n) = http_throughput(parse(port), path, parse(secs), parse(clients));
            (json!({"rps": rps}), n)
        }
        ["http", port, path, "soak", secs, clients, times] => {
            let r = http_soak(parse(port), path, parse(secs), parse(clients), times);
            let n = r["calls"].as_u64().unwrap_or(0) as usize;
            (r, n)
        }
        ["direct", n, "--", cmd @ ..] if !cmd.is_empty() => {
            let (p50, p99, n) = direct_latency(cmd, parse(n));
            (json!({"p50_us": p50, "p99_us": p99}), n)
        }
        _ => fail(USAGE),
    };
    let mut report = report;
    let used = cpu_time() - cpu;
    report["client_cpu_us_per_request"] = json!(used.as_secs_f64() * 1e6 / requests.max(1) as f64);
    out(&report.to_string());
}

fn fail(msg: &str) -> ! {
    err(&format!("xy-mcp-load: {msg}"));
    std::process::exit(2)
}

fn parse<T: std::str::FromStr>(s: &str) -> T {
    s.parse()
        .unwrap_or_else(|_| fail(&format!("not a number: {s}\n{USAGE}")))
}

/// User + system CPU time of this process so far.
fn cpu_time() -> Duration {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .unwrap_or_else(|e| fail(&format!("getrusage: {e}")));
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

fn init() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "xy-mcp-load", "version": "1"}}})
}

fn call(i: usize) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello"}}}),
    )
    .unwrap_or_default()
}

/// p50 and p99 in µs, and how many were timed.
fn percentiles(mut times: Vec<Duration>) -> (f64, f64, usize) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(at(0.5)), us(at(0.99)), times.len())
}

/// One keep-alive connection with one 2025 session, on a blocking socket
/// like the direct row's pipes: the request goes out in one `write`, the
/// answer is read with `read` and its head parsed by `httparse`, so the
/// client adds as little as it can to what is timed (hyper's client on a
/// tokio runtime cost more CPU per request than the bridge under test:
/// `docs/performance-history.md`, "After D49").
struct HttpClient {
    stream: TcpStream,
    /// The request line and the headers every POST carries.
    head: String,
    session: Option<String>,
    /// Bytes read and not yet used (an answer's tail, a chunk's start).
    buf: Vec<u8>,
    req: Vec<u8>,
}

impl HttpClient {
    fn connect(port: u16, path: &str) -> HttpClient {
        HttpClient::try_connect(port, path).unwrap_or_else(|e| fail(&e))
    }

    /// A new connection and session, or what went wrong.
    fn try_connect(port: u16, path: &str) -> Result<HttpClient, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-11-25\r\n"
        );
        if let Ok(h) = std::env::var("XY_MCP_LOAD_HEADER") {
            head.push_str(h.trim());
            head.push_str("\r\n");
        }
        let mut c = HttpClient {
            stream,
            head,
            session: None,
            buf: Vec::with_capacity(16 * 1024),
            req: Vec::with_capacity(1024),
        };
        let init = serde_json::to_vec(&init()).unwrap_or_default();
        c.try_post(&init, true)?;
        c.try_post(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            false,
        )?;
        Ok(c)
    }

    /// POSTs one message; with `answer`, checks that a result came back
    /// (as JSON or as the last SSE `data:` line). Any failure ends the run.
    fn post(&mut self, body: &[u8], answer: bool) {
        if let Err(e) = self.try_post(body, answer) {
            fail(&e);
        }
    }

    /// [`HttpClient::post`] that returns what went wrong instead; a tool
    /// result with `isError` counts as wrong only with `strict`.
    fn try_post(&mut self, body: &[u8], answer: bool) -> Result<(), String> {
        self.exchange(body, answer, false)
    }

    fn exchange(&mut self, body: &[u8], answer: bool, strict: bool) -> Result<(), String> {
        self.req.clear();
        self.req.extend_from_slice(self.head.as_bytes());
        if let Some(s) = &self.session {
            self.req.extend_from_slice(b"mcp-session-id: ");
            self.req.extend_from_slice(s.as_bytes());
            self.req.extend_from_slice(b"\r\n");
        }
        self.req
            .extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        self.req.extend_from_slice(body);
        self.stream
            .write_all(&self.req)
            .map_err(|e| format!("POST: {e}"))?;
        let (status, framing) = self.read_head()?;
        let body = match framing {
            Framing::Length(n) => self.take(n)?,
            Framing::Chunked => self.read_chunked()?,
        };
        if !(200..300).contains(&status) {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        if answer && !has_result(&body) {
            return Err(format!("no result in {}", String::from_utf8_lossy(&body)));
        }
        if answer && strict && is_tool_error(&body) {
            return Err(format!("a tool error: {}", String::from_utf8_lossy(&body)));
        }
        Ok(())
    }

    /// Reads more bytes into `buf`; an early close is an error.
    fn fill(&mut self) -> Result<(), String> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self
            .stream
            .read(&mut chunk)
            .map_err(|e| format!("reading the answer: {e}"))?;
        if n == 0 {
            return Err("the bridge closed the connection mid-answer".to_owned());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Parses the status line and headers; keeps the session id.
    fn read_head(&mut self) -> Result<(u16, Framing), String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(used)) => {
                    let status = resp.code.unwrap_or(0);
                    let mut framing = None;
                    for h in resp.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let n = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse().ok());
                            framing = Some(Framing::Length(
                                n.ok_or_else(|| "a bad content-length".to_owned())?,
                            ));
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
                            && h.value.eq_ignore_ascii_case(b"chunked")
                        {
                            framing = Some(Framing::Chunked);
                        } else if h.name.eq_ignore_ascii_case("mcp-session-id") {
                            self.session = Some(String::from_utf8_lossy(h.value).into_owned());
                        }
                    }
                    self.buf.drain(..used);
                    // A 202 or 204 with neither header has no body.
                    return Ok((status, framing.unwrap_or(Framing::Length(0))));
                }
                Ok(httparse::Status::Partial) => self.fill()?,
                Err(e) => return Err(format!("a bad answer head: {e}")),
            }
        }
    }

    /// The next `n` bytes of the stream.
    fn take(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            self.fill()?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// The next line (without its CRLF).
    fn line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..at].to_vec();
                self.buf.drain(..at + 2);
                return Ok(line);
            }
            self.fill()?;
        }
    }

    /// A chunked body, whole (an SSE answer to one POST ends with its stream).
    fn read_chunked(&mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let size_line = self.line()?;
            let size = std::str::from_utf8(&size_line)
                .ok()
                .and_then(|l| {
                    usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16).ok()
                })
                .ok_or_else(|| "a bad chunk size".to_owned())?;
            if size == 0 {
                while !self.line()?.is_empty() {}
                return Ok(body);
            }
            body.extend(self.take(size)?);
            self.line()?;
        }
    }
}

enum Framing {
    Length(usize),
    Chunked,
}

/// Whether a JSON body or the last SSE `data:` line carries a `result`.
fn has_result(body: &[u8]) -> bool {
    answer_of(body).is_some_and(|v| v.get("result").is_some())
}

/// Whether the answer is a tool result with `isError: true` (how xy tells
/// a client that a remote server needs a login).
fn is_tool_error(body: &[u8]) -> bool {
    answer_of(body).is_some_and(|v| v["result"]["isError"] == Value::Bool(true))
}

/// The JSON answer of a body: the body itself, or its last SSE `data:` line.
fn answer_of(body: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(body);
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(&text);
    serde_json::from_str::<Value>(json.trim()).ok()
}

fn http_latency(port: u16, path: &str, n: usize) -> (f64, f64, usize) {
    let mut c = HttpClient::connect(port, path);
    for i in 0..WARMUP {
        c.post(&call(i), true);
    }
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let body = call(i);
        let t = Instant::now();
        c.post(&body, true);
        times.push(t.elapsed());
    }
    percentiles(times)
}

/// Requests per second over `secs` with `clients` threads, each with its
/// own connection and session; and how many requests that was.
fn http_throughput(port: u16, path: &str, secs: f64, clients: usize) -> (f64, usize) {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let path = path.to_owned();
            std::thread::spawn(move || {
                let mut c = HttpClient::connect(port, &path);
                let mut n = 0;
                while Instant::now() < end {
                    c.post(&call(n), true);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: usize = threads
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap_or_else(|_| fail("a client thread panicked"))
        })
        .sum();
    (total as f64 / start.elapsed().as_secs_f64(), total)
}

/// `soak`: `clients` threads calling for `secs`, counting failures instead
/// of stopping at the first; every call's start, latency and outcome go to
/// `times`.
fn http_soak(port: u16, path: &str, secs: f64, clients: usize, times: &str) -> Value {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let path = path.to_owned();
            std::thread::spawn(move || {
                let mut calls: Vec<(u128, Duration, bool)> = Vec::new();
                let mut errors: Vec<String> = Vec::new();
                let mut conn: Option<HttpClient> = None;
                let mut n = 0;
                while Instant::now() < end {
                    let started = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_micros());
                    let t = Instant::now();
                    let outcome = match conn.as_mut() {
                        Some(c) => c.exchange(&call(n), true, true),
                        None => HttpClient::try_connect(port, &path).and_then(|mut c| {
                            let r = c.exchange(&call(n), true, true);
                            conn = Some(c);
                            r
                        }),
                    };
                    calls.push((started, t.elapsed(), outcome.is_ok()));
                    if let Err(e) = outcome {
                        // A transport error leaves the connection unusable.
                        if !e.starts_with("HTTP ") && !e.starts_with("a tool error") {
                            conn = None;
                        }
                        errors.push(e);
                    }
                    n += 1;
                }
                (calls, errors)
            })
        })
        .collect();
    let mut calls = Vec::new();
    let mut errors = Vec::new();
    for t in threads {
        let (c, e) = t
            .join()
            .unwrap_or_else(|_| fail("a client thread panicked"));
        calls.extend(c);
        errors.extend(e);
    }
    let mut text = String::with_capacity(calls.len() * 24);
    for (start, took, ok) in &calls {
        text.push_str(&format!("{start} {} {}\n", took.as_micros(), u8::from(*ok)));
    }
    std::fs::write(times, text).unwrap_or_else(|e| fail(&format!("writing {times}: {e}")));
    if calls.is_empty() {
        fail("no call was made");
    }
    let (p50, p99, _) = percentiles(calls.iter().map(|c| c.1).collect());
    errors.truncate(5);
    json!({"calls": calls.len(), "errors": calls.iter().filter(|c| !c.2).count(),
           "p50_us": p50, "p99_us": p99, "first_errors": errors})
}

fn direct_latency(cmd: &[&str], n: usize) -> (f64, f64, usize) {
    let StdioChild {
        mut child,
        mut stdin,
        mut stdout,
    } = spawn_stdio_child(cmd).unwrap_or_else(|e| fail(&format!("spawn {}: {e}", cmd[0])));
    let mut line = String::new();
    let mut rpc = |body: &[u8], answer: bool| {
        let mut msg = body.to_vec();
        msg.push(b'\n');
        stdin
            .write_all(&msg)
            .unwrap_or_else(|e| fail(&format!("write to child: {e}")));
        if answer {
            line.clear();
            stdout
                .read_line(&mut line)
                .unwrap_or_else(|e| fail(&format!("read from child: {e}")));
            if !has_result(line.as_bytes()) {
                fail(&format!("no result in {line}"));
            }
        }
    };
    rpc(&serde_json::to_vec(&init()).unwrap_or_default(), true);
    rpc(
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        false,
    );
    for i in 0..WARMUP {
        rpc(&call(i), true);
    }
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let body = call(i);
        let t = Instant::now();
        rpc(&body, true);
        times.push(t.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    percentiles(times)
}
