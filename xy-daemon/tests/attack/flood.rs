//! A chatty child inflates `xyd` (issue 38, SPEC §24 "Bounded children"): a
//! stdio child floods a million notifications (progress, log messages,
//! `list_changed`) while its clients do not read. `xyd` stays within its
//! RSS ceiling, `list` stays quick, what was dropped is counted in
//! `status`, and the client of the flooding call still gets its answer
//! when it reads: never silence. The child is `xy-test-stdio-raw`'s
//! `flood` tool. Figures go to stderr (`--nocapture`).
#![allow(clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::{TestDaemon, free_port, rss_kib, scaled, testbin, wait_for};
use crate::stdio::client::{Era, Mcp};
use crate::stdio::stdio_config;

/// SPEC §24: xyd's RSS stays within this of idle under any child.
const CEILING_KIB: u64 = 64 * 1024;
/// SPEC §24: `list` answers within this during the flood.
const LIST_WITHIN: Duration = Duration::from_millis(50);

fn raw_config(port: u16) -> String {
    stdio_config(&testbin("xy-test-stdio-raw"), &[], port, "")
}

/// Sends one HTTP request on a fresh connection and reads nothing back.
fn unread(port: u16, method: &str, session: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Mcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s
}

/// A `tools/call` of `flood` with `n` notifications (log messages padded
/// with `pad` bytes) and a progress token.
fn flood_call(id: u64, n: u64, pad: u64) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "flood", "arguments": {"n": n, "pad": pad}, "_meta": {"progressToken": "p"}}})
    .to_string()
    .into_bytes()
}

/// Reads the late reader's stream until the JSON-RPC answer to `id` (or an
/// error naming it) arrives, or the stream ends: the answer, if any, and
/// how many notifications came before it.
fn read_answer(mut s: TcpStream, id: u64) -> (Option<Value>, usize) {
    s.set_read_timeout(Some(scaled(Duration::from_secs(30))))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut notes = 0;
    let mut scanned = 0;
    loop {
        // Whole SSE events (`data: …\n\n`) or a plain JSON body.
        while let Some(end) = memfind(&buf[scanned..], b"\n\n") {
            let event = &buf[scanned..scanned + end];
            scanned += end + 2;
            let Some(at) = memfind(event, b"data: ") else {
                continue;
            };
            let Ok(v) = serde_json::from_slice::<Value>(&event[at + 6..]) else {
                continue;
            };
            if v.get("method").is_some() {
                notes += 1;
            } else if v["id"] == json!(id) {
                return (Some(v), notes);
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        // A plain JSON answer (no SSE): its body after the head.
        if let Some(head) = memfind(&buf, b"\r\n\r\n")
            && !buf[..head].windows(17).any(|w| w == b"text/event-stream")
            && let Ok(v) = serde_json::from_slice::<Value>(&buf[head + 4..])
        {
            return (Some(v), notes);
        }
    }
    (None, notes)
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Whether the child has written its whole flood (its stderr line).
fn flooded(d: &TestDaemon, n: u64) -> bool {
    let log = d.env.state_dir().join("logs").join("fl.log");
    std::fs::read_to_string(log).is_ok_and(|t| t.contains(&format!("flooded {n}")))
}

/// CPU time `pid` has used so far (user + system, `/proc/<pid>/stat`).
fn cpu_used(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ticks: u64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_ascii_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|t| t.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code)]
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .unwrap_or(100)
        .max(1);
    Duration::from_millis(ticks * 1000 / hz)
}

fn dropped(d: &TestDaemon) -> u64 {
    let s = d.result("status", Some(json!({"name": "fl"})));
    // Absent (as on a build without the counter): nothing counted.
    s["dropped_notifications"].as_u64().unwrap_or(0)
}

#[test]
fn a_million_notifications_keep_xyd_small_and_list_quick() {
    const N: u64 = 1_000_000;
    let port = free_port();
    let d = TestDaemon::start(&[("fl", raw_config(port))]);
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    assert!(c.tool_names().contains(&"flood".to_owned()));
    let session = c.session.clone().unwrap();
    let idle = rss_kib(d.pid());
    let mut rpc = d.client();
    // `list` before the flood, on this machine now: the reference.
    let mut quiet: Vec<Duration> = (0..50)
        .map(|_| {
            let t = Instant::now();
            assert!(rpc.result("list", None).is_array());
            t.elapsed()
        })
        .collect();
    quiet.sort();
    // A GET stream that never reads (list_changed goes there) and the
    // flooding call, whose client does not read either.
    let _get = unread(port, "GET", &session, b"");
    let call = unread(port, "POST", &session, &flood_call(7, N, 0));
    let (mut peak, mut slowest, mut polls) = (idle, Duration::ZERO, Vec::new());
    let started = Instant::now();
    let cpu_before = cpu_used(d.pid());
    while !flooded(&d, N) {
        assert!(
            started.elapsed() < scaled(Duration::from_secs(180)),
            "the flood never finished"
        );
        let t = Instant::now();
        assert!(rpc.result("list", None).is_array());
        let took = t.elapsed();
        slowest = slowest.max(took);
        polls.push(took);
        peak = peak.max(rss_kib(d.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
    // xyd's one async thread: how much of the flood's wall time it was
    // busy (what a `list` waits behind).
    let busy = (cpu_used(d.pid()) - cpu_before).as_secs_f64() / started.elapsed().as_secs_f64();
    polls.sort();
    let p50 = polls.get(polls.len() / 2).copied().unwrap_or_default();
    let p90 = polls.get(polls.len() * 9 / 10).copied().unwrap_or_default();
    let p99 = polls
        .get(polls.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    let count = dropped(&d);
    eprintln!(
        "flood of {N}: {:.1} s, xyd idle {idle} KiB, peak {peak} KiB (+{} KiB); list p50 {p50:?} \
         p90 {p90:?} p99 {p99:?} max {slowest:?} over {} polls (before it: p50 {:?}, p90 {:?}); \
         {count} notifications dropped; xyd busy {:.0}% of the time",
        started.elapsed().as_secs_f64(),
        peak.saturating_sub(idle),
        polls.len(),
        quiet[25],
        quiet[45],
        busy * 100.0
    );
    assert!(
        peak <= idle + CEILING_KIB,
        "xyd grew from {idle} KiB to {peak} KiB under the flood (ceiling +{CEILING_KIB} KiB)"
    );
    // The bound is the p90, not the max: xyd is busy a small part of the
    // flood (its share is printed), so what delays the slowest polls is
    // the wait for a CPU on a loaded 2-core machine, not a task of xyd's
    // holding `list` (see docs/performance.md, "list during a flood").
    assert!(
        p90 < LIST_WITHIN,
        "list p90 {p90:?} (max {slowest:?}) during the flood; want < {LIST_WITHIN:?}"
    );
    assert!(
        count > 0,
        "the flood dropped nothing, or status does not say"
    );
    // The flooding call's client reads at last: its answer is there.
    let (answer, notes) = read_answer(call, 7);
    let answer = answer.unwrap_or_else(|| {
        panic!("the call's answer was dropped silently ({notes} notifications came)")
    });
    assert!(
        answer["result"]["content"][0]["text"] == "flooded 1000000"
            || answer["error"]["message"].is_string(),
        "{answer}"
    );
    // And the server still serves.
    assert_eq!(
        c.result(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}})
        )["content"][0]["text"],
        "hi"
    );
}

#[test]
fn a_client_that_does_not_read_still_gets_its_answer() {
    // More than the kernel's socket buffers take: the queue fills.
    const N: u64 = 20_000;
    let port = free_port();
    let d = TestDaemon::start(&[("fl", raw_config(port))]);
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    let session = c.session.clone().unwrap();
    let call = unread(port, "POST", &session, &flood_call(8, N, 2000));
    wait_for("the flood to end", scaled(Duration::from_secs(60)), || {
        flooded(&d, N)
    });
    // The child answers in order: once a later call is answered, xyd has
    // routed the flood's answer too, into the full queue of a client that
    // has read nothing yet.
    assert_eq!(
        c.result(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}})
        )["content"][0]["text"],
        "hi"
    );
    let (answer, notes) = read_answer(call, 8);
    let answer = answer.unwrap_or_else(|| {
        panic!("the call's answer was dropped silently ({notes} notifications came)")
    });
    assert!(
        answer["result"]["content"][0]["text"] == format!("flooded {N}")
            || answer["error"]["message"].is_string(),
        "{answer}"
    );
    // The queue was full when the answer came: this tested something.
    assert!(dropped(&d) > 0, "the queue never filled: no test");
}

/// A 2026 child's question relayed to a 2025 client whose request stream
/// has no room for it (SPEC §24, D213): the client's request fails at once
/// with the reason. Before, the question was dropped silently and the
/// request waited out the relay's ten minutes.
#[test]
fn a_question_relayed_into_a_full_queue_fails_its_request_with_the_reason() {
    const N: u64 = 1_500;
    let port = free_port();
    let config = stdio_config(
        &testbin("xy-test-stdio-raw"),
        &["--era2026".to_owned()],
        port,
        "",
    );
    let d = TestDaemon::start(&[("fl", config)]);
    let u = format!("http://127.0.0.1:{port}/mcp");
    let c = Mcp::declaring(&u, Era::V2025, json!({"elicitation": {}}));
    let session = c.session.clone().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "flood", "arguments": {"n": N, "pad": 40_000, "ask": true}}});
    let call = unread(port, "POST", &session, body.to_string().as_bytes());
    wait_for("the flood to end", scaled(Duration::from_secs(60)), || {
        flooded(&d, N)
    });
    // The child answers in order: once a later call is answered, xyd has
    // routed the flood's `InputRequiredResult` too.
    let mut other = Mcp::declaring(&u, Era::V2025, json!({"elicitation": {}}));
    assert_eq!(
        other.result(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}})
        )["content"][0]["text"],
        "hi"
    );
    assert!(dropped(&d) > 0, "the queue never filled: no test");
    let t = Instant::now();
    let (answer, notes) = read_answer(call, 9);
    let answer = answer.unwrap_or_else(|| {
        panic!(
            "no answer within {:?}: the relayed question was dropped silently, or it had \
             room and was asked ({notes} messages came)",
            t.elapsed()
        )
    });
    let m = answer["error"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("not reading") && m.contains("elicitation/create"),
        "{answer}"
    );
}
