//! `xy-mcp-load`: the load generator of `bench/stdio_bridges.py`. It times
//! `tools/call echo` round trips through a streamable-HTTP bridge (one
//! keep-alive connection and one 2025 session per client, hyper's HTTP/1.1
//! client on a current-thread runtime per client thread) or over a stdio
//! child's own pipes, and prints one JSON line of figures. Written in Rust
//! so that the client is not the bottleneck: it also reports its own CPU
//! time per request.
//!
//! ```text
//! xy-mcp-load http PORT PATH latency N
//! xy-mcp-load http PORT PATH throughput SECONDS CLIENTS
//! xy-mcp-load direct N -- CMD [ARGS...]
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use xy_testbins::out::{err, out};

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

/// One keep-alive connection with one 2025 session.
struct HttpClient {
    send: SendRequest<Full<Bytes>>,
    port: u16,
    path: String,
    session: Option<String>,
}

impl HttpClient {
    async fn connect(port: u16, path: &str) -> HttpClient {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| fail(&format!("connect to 127.0.0.1:{port}: {e}")));
        let _ = stream.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap_or_else(|e| fail(&format!("handshake: {e}")));
        tokio::spawn(conn);
        let mut c = HttpClient {
            send,
            port,
            path: path.to_owned(),
            session: None,
        };
        let init = serde_json::to_vec(&init()).unwrap_or_default();
        c.post(init, true).await;
        c.post(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
            false,
        )
        .await;
        c
    }

    /// POSTs one message; with `answer`, checks that a result came back
    /// (as JSON or as the last SSE `data:` line).
    async fn post(&mut self, body: Vec<u8>, answer: bool) {
        let mut req = hyper::Request::post(self.path.as_str())
            .header("host", format!("127.0.0.1:{}", self.port))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s.as_str());
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|e| fail(&format!("request: {e}")));
        let resp = self
            .send
            .send_request(req)
            .await
            .unwrap_or_else(|e| fail(&format!("POST: {e}")));
        if let Some(s) = resp.headers().get("mcp-session-id")
            && let Ok(s) = s.to_str()
        {
            self.session = Some(s.to_owned());
        }
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| fail(&format!("reading the answer: {e}")))
            .to_bytes();
        if !status.is_success() {
            fail(&format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        if answer && !has_result(&body) {
            fail(&format!("no result in {}", String::from_utf8_lossy(&body)));
        }
    }
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("tokio: {e}")))
}

fn http_latency(port: u16, path: &str, n: usize) -> (f64, f64, usize) {
    runtime().block_on(async {
        let mut c = HttpClient::connect(port, path).await;
        for i in 0..WARMUP {
            c.post(call(i), true).await;
        }
        let mut times = Vec::with_capacity(n);
        for i in 0..n {
            let body = call(i);
            let t = Instant::now();
            c.post(body, true).await;
            times.push(t.elapsed());
        }
        percentiles(times)
    })
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
                runtime().block_on(async {
                    let mut c = HttpClient::connect(port, &path).await;
                    let mut n = 0;
                    while Instant::now() < end {
                        c.post(call(n), true).await;
                        n += 1;
                    }
                    n
                })
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
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("spawn {}: {e}", cmd[0])));
    let mut stdin = child.stdin.take().unwrap_or_else(|| fail("no stdin"));
    let mut stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| fail("no stdout")));
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
