//! `xy-relay-floor`: the least a stdio-to-HTTP relay can do, as a yardstick
//! for `bench/stdio_bridges.py`. One client connection at a time, blocking
//! I/O on one thread, each POST body written to the child as a line and the
//! child's next line sent back as the answer: no sessions, no id rewriting,
//! no JSON parsing, no second client. What it adds over the child's pipes
//! is what the extra process and its loopback TCP cost on this machine
//! (the wake-ups and the kernel's work), which any bridge pays.
//!
//! ```text
//! xy-relay-floor PORT -- CMD [ARGS...]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use xy_testbins::out::err;
use xy_testbins::sys::{StdioChild, spawn_stdio_child};

const USAGE: &str = "xy-relay-floor PORT -- CMD [ARGS...]";

fn fail(msg: &str) -> ! {
    err(&format!("xy-relay-floor: {msg}"));
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, cmd) = match args.as_slice() {
        [port, dash, cmd @ ..] if dash == "--" && !cmd.is_empty() => (
            port.parse::<u16>()
                .unwrap_or_else(|_| fail(&format!("not a port: {port}\n{USAGE}"))),
            cmd,
        ),
        _ => fail(USAGE),
    };
    let listener = TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| fail(&format!("bind 127.0.0.1:{port}: {e}")));
    let StdioChild {
        mut child,
        stdin: mut to_child,
        stdout: mut from_child,
    } = spawn_stdio_child(cmd).unwrap_or_else(|e| fail(&format!("spawn {}: {e}", cmd[0])));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let _ = conn.set_nodelay(true);
        let Ok(mut out) = conn.try_clone() else {
            continue;
        };
        let mut input = BufReader::new(conn);
        while let Some(body) = read_request(&mut input) {
            let mut line = body;
            line.push(b'\n');
            to_child
                .write_all(&line)
                .unwrap_or_else(|e| fail(&format!("write to child: {e}")));
            // A notification has no answer (good enough for the bench's
            // two kinds of message: requests carry "id", it does not).
            let answer = if line.windows(4).any(|w| w == b"\"id\"") {
                let mut a = Vec::new();
                from_child
                    .read_until(b'\n', &mut a)
                    .unwrap_or_else(|e| fail(&format!("read from child: {e}")));
                a.truncate(a.trim_ascii_end().len());
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: floor\r\ncontent-length: {}\r\n\r\n",
                    a.len()
                )
                .into_bytes();
                r.extend_from_slice(&a);
                r
            } else {
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec()
            };
            if out.write_all(&answer).is_err() {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The next request's body; `None` when the client is gone.
fn read_request(input: &mut BufReader<std::net::TcpStream>) -> Option<Vec<u8>> {
    let mut len = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body).ok()?;
    Some(body)
}
