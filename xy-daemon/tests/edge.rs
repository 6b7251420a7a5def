//! SPEC §18's edge against the real `xyd`: who may connect to a stdio
//! server's HTTP endpoint (the daemon's own uid only), how many connections
//! it serves at once (`503` past the cap, never a silent close), how long a
//! connection may take to send its request head, accept-error backoff with
//! a lowered `RLIMIT_NOFILE`, and the Unix control socket after floods.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::{DEADLINE, TestDaemon, free_port, testbin, wait_for};

/// A stdio server (the rmcp test server) bridged on `port`.
fn stdio_config(port: u16) -> String {
    format!(
        "command {:?}\nargs \"--stdio\" \"--era\" \"2025\" \"--tools\" \"echo\"\ntransport \"stdio\"\nport {port}\n\
         stop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-mcp").display().to_string()
    )
}

/// The MCP request every client here sends: a 2025 `initialize`.
fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "edge-test", "version": "1"}}
    })
    .to_string()
}

fn post_request(port: u16, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one HTTP response (head and a `Content-Length` body) from `s`.
fn read_response(s: &mut TcpStream) -> std::io::Result<(u16, String)> {
    s.set_read_timeout(Some(DEADLINE))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk)?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..]).to_string();
            return Ok((status, body));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("closed after {:?}", String::from_utf8_lossy(&buf)),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One POST of `body` on a fresh connection.
fn post(port: u16, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.write_all(post_request(port, body).as_bytes())?;
    read_response(&mut s)
}

/// Waits until the bridge answers `initialize` with a result.
fn wait_served(port: u16) {
    wait_for("the endpoint answers initialize", DEADLINE, || {
        post(port, &initialize_body())
            .is_ok_and(|(status, body)| status == 200 && body.contains("\"result\""))
    });
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // f[0] is field 3; utime and stime are fields 14 and 15.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn ticks_per_second() -> u64 {
    // Every Linux this runs on; what `sysconf(_SC_CLK_TCK)` returns.
    100
}

/// Runs the real `xyctl list` against `d`; returns how long it took.
fn xyctl_list(d: &TestDaemon) -> Duration {
    let xyctl = xy_testbins::locate::bin_of("xy-cli", "xyctl");
    let started = Instant::now();
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "list"])
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "xyctl list failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// One control-socket call on a fresh connection, as a raw line.
fn socket_call(d: &TestDaemon, method: &str) -> std::io::Result<Value> {
    let mut s = UnixStream::connect(&d.env.socket)?;
    s.set_read_timeout(Some(DEADLINE))?;
    s.write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"{method}\"}}\n").as_bytes())?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match s.read(&mut byte)? {
            0 => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed without an answer",
                ));
            }
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
    }
    Ok(serde_json::from_slice(&line).unwrap())
}

#[test]
fn after_1500_connect_close_cycles_the_next_client_is_served() {
    let d = TestDaemon::start(&[]);
    for _ in 0..1500 {
        drop(UnixStream::connect(&d.env.socket).unwrap());
    }
    // The very next client, at once: no wait for the daemon to catch up.
    let v = socket_call(&d, "list").expect("the client after the flood is answered");
    assert!(v["result"].is_array(), "{v}");
    // And a flood of connections that are held open, then all closed at once.
    let held: Vec<UnixStream> = (0..400)
        .map(|_| UnixStream::connect(&d.env.socket).unwrap())
        .collect();
    drop(held);
    let v = socket_call(&d, "list").expect("the client right after a flood closed is answered");
    assert!(v["result"].is_array(), "{v}");
}

/// The cause of the 1,500-connection bug: past the socket's cap a new
/// connection was accepted and closed at once, and connections a client has
/// just closed keep their slots until the daemon reads their EOF, so a
/// client arriving right after a flood found every slot still taken. Now it
/// waits in the backlog for a slot and is served.
#[test]
fn a_client_arriving_while_the_socket_is_full_waits_and_is_served() {
    let d = TestDaemon::start(&[]);
    let held: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(&d.env.socket).unwrap())
        .collect();
    let mut c = UnixStream::connect(&d.env.socket).unwrap();
    c.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"list\"}\n")
        .unwrap();
    // Every slot is taken: no answer yet, and not closed either.
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    match c.read(&mut byte) {
        Ok(0) => panic!("the client was closed without an answer while the socket was full"),
        Ok(_) => panic!("answered past the cap"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        ),
    }
    drop(held);
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut line = Vec::new();
    loop {
        let n = c.read(&mut byte).unwrap();
        assert!(n == 1, "closed without an answer after the flood closed");
        if byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
    }
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert!(v["result"].is_array(), "{v}");
}
