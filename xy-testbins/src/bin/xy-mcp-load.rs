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
//! xy-mcp-load direct N -- CMD [ARGS...]
//! ```

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xy_testbins::out::{err, out};
use xy_testbins::sys::{StdioChild, spawn_stdio_child};

const USAGE: &str = "xy-mcp-load http PORT PATH latency N | http PORT PATH throughput SECONDS CLIENTS | direct N -- CMD [ARGS...]";
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
/// `docs/performance.md`, "After D49").
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
        let stream = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| fail(&format!("connect to 127.0.0.1:{port}: {e}")));
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-11-25\r\n"
        );
        let mut c = HttpClient {
            stream,
            head,
            session: None,
            buf: Vec::with_capacity(16 * 1024),
            req: Vec::with_capacity(1024),
        };
        let init = serde_json::to_vec(&init()).unwrap_or_default();
        c.post(&init, true);
        c.post(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            false,
        );
        c
    }

    /// POSTs one message; with `answer`, checks that a result came back
    /// (as JSON or as the last SSE `data:` line).
    fn post(&mut self, body: &[u8], answer: bool) {
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
            .unwrap_or_else(|e| fail(&format!("POST: {e}")));
        let (status, framing) = self.read_head();
        let body = match framing {
            Framing::Length(n) => self.take(n),
            Framing::Chunked => self.read_chunked(),
        };
        if !(200..300).contains(&status) {
            fail(&format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        if answer && !has_result(&body) {
            fail(&format!("no result in {}", String::from_utf8_lossy(&body)));
        }
    }

    /// Reads more bytes into `buf`; an early close is fatal.
    fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        let n = self
            .stream
            .read(&mut chunk)
            .unwrap_or_else(|e| fail(&format!("reading the answer: {e}")));
        if n == 0 {
            fail("the bridge closed the connection mid-answer");
        }
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Parses the status line and headers; keeps the session id.
    fn read_head(&mut self) -> (u16, Framing) {
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
                                n.unwrap_or_else(|| fail("a bad content-length")),
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
                    return (status, framing.unwrap_or(Framing::Length(0)));
                }
                Ok(httparse::Status::Partial) => self.fill(),
                Err(e) => fail(&format!("a bad answer head: {e}")),
            }
        }
    }

    /// The next `n` bytes of the stream.
    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }

    /// The next line (without its CRLF).
    fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..at].to_vec();
                self.buf.drain(..at + 2);
                return line;
            }
            self.fill();
        }
    }

    /// A chunked body, whole (an SSE answer to one POST ends with its stream).
    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let size_line = self.line();
            let size = std::str::from_utf8(&size_line)
                .ok()
                .and_then(|l| {
                    usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16).ok()
                })
                .unwrap_or_else(|| fail("a bad chunk size"));
            if size == 0 {
                while !self.line().is_empty() {}
                return body;
            }
            body.extend(self.take(size));
            self.line();
        }
    }
}

enum Framing {
    Length(usize),
    Chunked,
}

/// Whether a JSON body or the last SSE `data:` line carries a `result`.
fn has_result(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or(&text);
    serde_json::from_str::<Value>(json.trim()).is_ok_and(|v| v.get("result").is_some())
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
