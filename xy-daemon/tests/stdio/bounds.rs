//! SPEC §18's bounds and scoping at the stdio bridge, against the real
//! `xyd`: a stopped child under a flood of 4 MiB POSTs (503 past the stdin
//! budget), a child writing 300 MiB without a newline, a log follower that
//! never reads, and clients that try to cancel or answer for each other.
//! The child is `xy-test-stdio-raw`, which misbehaves on request. The RSS
//! figures go to stderr (`--nocapture`).
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Era, Mcp};
use super::{stdio_config, url};
use crate::helper::{DEADLINE, TestDaemon, free_port, rss_kib, scaled, signal, testbin, wait_for};

/// xyd may grow by this much under each load (SPEC §18's figure).
const GROWTH_KIB: u64 = 64 * 1024;

fn raw_config(port: u16) -> String {
    stdio_config(&testbin("xy-test-stdio-raw"), &[], port, "")
}

/// One POST over a plain socket (the body shared, not copied per thread):
/// the status and the body of the answer.
fn post_bytes(port: u16, session: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Mcp-Session-Id: {session}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    if s.write_all(body).is_err() {
        return (0, String::new());
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A stopped child and 100 concurrent 4 MiB POSTs: what fits the stdin
/// budget waits, the rest gets 503 with a busy JSON-RPC error, xyd stays
/// small; after SIGCONT the waiting ones are answered and new ones work.
#[test]
fn a_stopped_child_under_100_big_posts_gets_503_past_the_budget() {
    let port = free_port();
    let d = TestDaemon::start(&[("st", raw_config(port))]);
    let pid = d.running_pid("st");
    let mut c = Mcp::connected(&url(port), Era::V2025);
    assert_eq!(
        c.tool_names(),
        [
            "echo", "slow", "ask", "blob", "fail", "reject", "die", "meta", "task", "lone", "huge",
            "flood"
        ]
    );
    let session = c.session.clone().unwrap();
    let before = rss_kib(d.pid());
    signal(pid, libc::SIGSTOP);
    let text = "y".repeat(4 * 1024 * 1024 - 1024);
    let body = Arc::new(
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}})
        .to_string()
        .into_bytes(),
    );
    drop(text);
    let (tx, rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let (body, session, tx) = (body.clone(), session.clone(), tx.clone());
            std::thread::spawn(move || {
                let r = post_bytes(port, &session, &body);
                let _ = tx.send(r);
            })
        })
        .collect();
    // Everything past the budget is refused while the child is stopped.
    let mut busy = 0;
    let mut peak = before;
    let start = Instant::now();
    while busy < 90 {
        peak = peak.max(rss_kib(d.pid()));
        assert!(
            start.elapsed() < scaled(DEADLINE),
            "only {busy} POSTs refused"
        );
        if let Ok((status, text)) = rx.recv_timeout(Duration::from_millis(50)) {
            assert_eq!(status, 503, "{}", &text[..text.len().min(300)]);
            assert!(text.contains("is busy"), "{text}");
            busy += 1;
        }
    }
    let refused_by = start.elapsed();
    while let Ok((status, text)) = rx.recv_timeout(Duration::from_millis(500)) {
        assert_eq!(status, 503, "{}", &text[..text.len().min(300)]);
        busy += 1;
    }
    let after = rss_kib(d.pid());
    peak = peak.max(after);
    eprintln!(
        "stopped child: {busy} of 100 POSTs refused in {refused_by:?}; xyd RSS {before} KiB before, \
         peak {peak} KiB, {after} KiB after"
    );
    assert!(busy < 100, "some POSTs fit the budget");
    assert!(after < before + GROWTH_KIB, "RSS {before} → {after} KiB");
    signal(pid, libc::SIGCONT);
    let mut answered = 0;
    while answered < 100 - busy {
        let (status, text) = rx
            .recv_timeout(scaled(DEADLINE))
            .expect("the waiting POSTs answered");
        assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
        answered += 1;
    }
    for t in threads {
        t.join().unwrap();
    }
    let r = c.result(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "again"}}),
    );
    assert_eq!(r["content"][0]["text"], "again");
}

/// 300 MiB without a newline: skipped in bounded memory, a warning in the
/// server's log, and the child's next line (its answer) still served.
/// A POST refused because the endpoint's body budget is taken is refused
/// readably: xy reads and drops its body, so a client still writing it gets
/// the 503 rather than a connection reset.
#[test]
fn a_post_refused_before_its_body_is_read_still_gets_its_503() {
    let port = free_port();
    let d = TestDaemon::start(&[("st", raw_config(port))]);
    d.running_pid("st");
    let c = Mcp::connected(&url(port), Era::V2025);
    let session = c.session.clone().unwrap();
    // Two clients declare the largest body each and send none of it: the
    // endpoint's room for bodies is taken.
    let hogs: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut hog = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(
                hog,
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
                 Content-Length: {}\r\n\r\n",
                4 * 1024 * 1024
            )
            .unwrap();
            hog
        })
        .collect();
    // A 4 MiB POST waits for room, is refused, and reads why.
    let text = "y".repeat(4 * 1024 * 1024 - 1024);
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}}})
    .to_string();
    let (status, answer) = post_bytes(port, &session, body.as_bytes());
    assert_eq!(status, 503, "{}", &answer[..answer.len().min(300)]);
    assert!(
        answer.contains("too many request bodies in flight"),
        "{answer}"
    );
    drop(hogs);
}

#[test]
fn a_300_mib_line_is_skipped_with_a_warning_and_the_next_line_served() {
    let port = free_port();
    let d = TestDaemon::start(&[("bl", raw_config(port))]);
    d.running_pid("bl");
    let mut c = Mcp::connected(&url(port), Era::V2025);
    let before = rss_kib(d.pid());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let xyd = d.pid();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while done_rx.try_recv().is_err() {
            peak = rss_kib(xyd).max(peak);
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    });
    // The answer is plain JSON: the POST returns with it.
    let s = c.start_body(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "blob", "arguments": {"mib": 300}}}));
    let answer = s.response();
    let _ = done_tx.send(());
    let peak = sampler.join().unwrap();
    eprintln!("300 MiB line: xyd RSS {before} KiB before, peak {peak} KiB");
    assert_eq!(answer["id"], 77);
    assert_eq!(answer["result"]["content"][0]["text"], "after the blob");
    assert!(peak < before + GROWTH_KIB, "RSS {before} → peak {peak} KiB");
    let log = d.env.state_dir().join("logs/bl.log");
    wait_for("the warning in the server's log", DEADLINE, || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("over the 4 MiB limit; skipped"))
    });
    let r = c.result(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "still here"}}),
    );
    assert_eq!(r["content"][0]["text"], "still here");
}

/// A `logs` follower that never reads while a child floods 60 KiB lines:
/// xyd stays small, and the follower's stream ends `lagged`.
#[test]
fn a_follower_that_never_reads_is_dropped_as_lagged() {
    let flood = format!(
        "port {}\ncommand {:?}\nargs \"--lines\" \"3000\" \"--bytes\" \"61440\" \"--rate\" \"300\" \"--then-sleep\"\n",
        free_port(),
        testbin("xy-test-flood").display().to_string()
    );
    let d = TestDaemon::start(&[("fl", flood)]);
    let before = rss_kib(d.pid());
    let mut sock = std::os::unix::net::UnixStream::connect(&d.env.socket).unwrap();
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "logs",
        "params": {"names": ["fl"], "follow": true, "tail": 0}});
    sock.write_all(format!("{sub}\n").as_bytes()).unwrap();
    let log = d.env.state_dir().join("logs/fl.log");
    let mut peak = before;
    // 3,000 lines of 60 KiB, 300 a second; the child says when it is done.
    wait_for("the flood to end", Duration::from_secs(60), || {
        peak = peak.max(rss_kib(d.pid()));
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("wrote 3000 lines"))
    });
    peak = peak.max(rss_kib(d.pid()));
    eprintln!("never-reading follower: xyd RSS {before} KiB before, peak {peak} KiB");
    // The follower's own bound is 4 MiB of lines, and the connection's
    // outbound queue in front of it holds at most 4 MiB more.
    assert!(peak < before + GROWTH_KIB, "RSS {before} → peak {peak} KiB");
    // Reading now: what was queued, then the end.
    sock.set_read_timeout(Some(scaled(DEADLINE))).unwrap();
    let mut r = BufReader::new(sock);
    let mut line = String::new();
    loop {
        line.clear();
        let n = r
            .read_line(&mut line)
            .expect("the stream goes on until log_end");
        assert!(n > 0, "EOF before log_end");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "log_end" {
            assert_eq!(v["params"]["reason"], "lagged", "{v}");
            break;
        }
    }
}

/// Client B can neither cancel client A's request nor answer the request
/// the child sent to A; A can do both.
#[test]
fn one_client_cannot_cancel_or_answer_for_another() {
    let port = free_port();
    let d = TestDaemon::start(&[("sc", raw_config(port))]);
    d.running_pid("sc");
    // A declares roots: the child may ask it (SPEC §19).
    let a = Mcp::declaring(&url(port), Era::V2025, json!({"roots": {}}));
    let b = Mcp::connected(&url(port), Era::V2025);
    let c = Mcp::new(&url(port), Era::V2026);
    let slow = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"ms": 1500, "text": "done"},
                "_meta": {"progressToken": format!("p{id}")}}})
    };
    let cancel = |id: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "not yours"}})
    };
    let v2026 = [("MCP-Protocol-Version", super::client::V2026.to_owned())];
    // The progress notification says the child has the call.
    let s = a.start_body(&slow(42));
    let first = s.response_or_note();
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(b.post(&cancel(42), &b.session_headers()).status, 202);
    assert_eq!(c.post(&cancel(42), &v2026).status, 202);
    let r = s.response();
    assert_eq!(r["id"], 42);
    assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");
    // A's own cancel reaches the child (it answers a cancelled call -32800).
    let s = a.start_body(&slow(43));
    s.expect("notifications/progress");
    assert_eq!(a.post(&cancel(43), &a.session_headers()).status, 202);
    let r = s.response();
    assert_eq!(r["error"]["code"], -32800, "{r}");

    // The child asks A for its roots; B's answer is refused, A's taken.
    let s = a.start_body(&json!({"jsonrpc": "2.0", "id": 44, "method": "tools/call",
        "params": {"name": "ask", "arguments": {}}}));
    let ask = s.expect("roots/list");
    let id = ask["id"].clone();
    assert!(
        id.as_str().is_some_and(|i| i.len() > 30),
        "an unguessable id: {id}"
    );
    let answer = |who: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"roots": [{"uri": format!("file:///{who}")}]}});
    let rb = b.post(&answer("b"), &b.session_headers());
    assert_eq!(rb.status, 400, "{rb:?}");
    let rc = c.post(&answer("c"), &v2026);
    assert_eq!(rc.status, 400, "{rc:?}");
    assert_eq!(a.post(&answer("a"), &a.session_headers()).status, 202);
    let r = s.response();
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("file:///a"), "{r}");
}

/// An endpoint keeps 1,000 sessions: the 1,001st evicts the least recently
/// used, which then gets 404 like an unknown one.
#[test]
fn the_least_recently_used_of_1000_sessions_goes_first() {
    let port = free_port();
    let d = TestDaemon::start(&[("ss", raw_config(port))]);
    d.running_pid("ss");
    let first = Mcp::connected(&url(port), Era::V2025);
    let mut second = Mcp::connected(&url(port), Era::V2025);
    for _ in 0..998 {
        Mcp::connected(&url(port), Era::V2025);
    }
    // `first` is used again, so `second` is now the least recently used.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(first.post(&ping, &first.session_headers()).status, 200);
    let mut newest = Mcp::connected(&url(port), Era::V2025);
    assert_eq!(second.post(&ping, &second.session_headers()).status, 404);
    assert_eq!(first.post(&ping, &first.session_headers()).status, 200);
    assert_eq!(newest.tool_names().len(), 12);
    // The evicted client initialises again and carries on.
    second.initialize();
    assert_eq!(second.tool_names().len(), 12);
}

/// A 2026 client cancels by closing its request's response stream (D64):
/// xy tells the child `notifications/cancelled`, for that request only.
#[test]
fn a_2026_client_closing_its_stream_cancels_its_request_at_the_child() {
    let port = free_port();
    let d = TestDaemon::start(&[("cc", raw_config(port))]);
    d.running_pid("cc");
    let body = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"ms": 20000, "text": "late"},
        "_meta": {"progressToken": "p41",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: slow\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    // The progress notification the child sends as it starts: the call is
    // in flight at the child.
    s.set_read_timeout(Some(scaled(DEADLINE))).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("notifications/progress") {
        let n = s.read(&mut buf).expect("the stream's first event");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    drop(s);
    let log = d.env.state_dir().join("logs/cc.log");
    let told = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = xy_testbins::wait::deadline(Duration::from_secs(10));
    while !told().contains("xy-test-stdio-raw: cancelled") {
        assert!(
            Instant::now() < deadline,
            "the child was not told of the cancellation; its log:\n{}\ndaemon.log:\n{}",
            told(),
            d.env.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
