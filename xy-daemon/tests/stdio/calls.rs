//! SPEC §20's call records against the real `xyd`: every `tools/call`
//! through the stdio bridge is recorded with its client (a 2025 session's
//! `clientInfo`, a 2026 request's `_meta`, else the `User-Agent`), tool,
//! duration and outcome (ok, tool error, JSON-RPC error, child gone), and
//! never its argument values; `calls` reads them back, also after a
//! restart; `calls {follow}` streams new ones; `tools` carries per-tool
//! figures. The child is `xy-test-stdio-raw` (a 2025 child: a 2025 client's
//! calls take the bridge's raw fast path, a 2026 client's the translating
//! `Value` path).

use std::time::Instant;

use serde_json::{Value, json};

use super::client::{Era, Mcp};
use super::{call, stdio_config, url};
use crate::helper::{Client, DEADLINE, TestDaemon, free_port, scaled, testbin, wait_some};

/// An argument value no record may hold.
const SECRET: &str = "sk-live-4242-do-not-record";

/// With an `mcp` probe: until xy lists every server's tools itself after
/// each spawn (SPEC §20), the probe is what fills `tools`.
fn raw_config(port: u16) -> String {
    stdio_config(
        &testbin("xy-test-stdio-raw"),
        &[],
        port,
        "health {\n    mcp \"/mcp\"\n    interval \"200ms\"\n    start-period \"0s\"\n}\n",
    )
}

/// The `calls` result's records for `params`.
fn calls(d: &TestDaemon, params: Value) -> Vec<Value> {
    d.result("calls", Some(params))["calls"]
        .as_array()
        .expect("calls is an array")
        .clone()
}

/// Waits until `name` has `n` records; returns them.
#[track_caller]
fn wait_calls(d: &TestDaemon, name: &str, n: usize) -> Vec<Value> {
    wait_some(&format!("{n} calls of {name}"), DEADLINE, || {
        let got = calls(d, json!({"name": name}));
        (got.len() >= n).then_some(got)
    })
}

fn summary(r: &Value) -> (String, String, String) {
    (
        r["tool"].as_str().unwrap_or_default().to_owned(),
        r["client"].as_str().unwrap_or("<none>").to_owned(),
        r["outcome"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn every_outcome_is_recorded_with_its_client_in_both_eras_and_never_an_argument() {
    let port = free_port();
    let d = TestDaemon::start(&[("rc", raw_config(port))]);
    d.running_pid("rc");
    let u = url(port);
    let mut old = Mcp::connected(&u, Era::V2025);
    let r = old.result("tools/call", call("echo", json!({"text": SECRET}), None));
    assert_eq!(r["content"][0]["text"], SECRET);
    let r = old.result("tools/call", call("fail", json!({"token": SECRET}), None));
    assert_eq!(r["isError"], true);
    let r = old.request("tools/call", call("reject", json!({"token": SECRET}), None));
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    // A 2026 client naming itself in `_meta`, and one that does not (its
    // User-Agent names it then).
    let mut new = Mcp::new(&u, Era::V2026);
    let mut p = call("echo", json!({"text": SECRET}), None);
    p["_meta"] =
        json!({"io.modelcontextprotocol/clientInfo": {"name": "agent-2026", "version": "7.1"}});
    new.result("tools/call", p);
    new.result("tools/call", call("fail", json!({"text": SECRET}), None));
    // Not a call: not recorded.
    new.result("tools/list", json!({}));
    // The child exits without answering: the call fails and says so.
    let r = old.request("tools/call", call("die", json!({"why": SECRET}), None));
    assert_eq!(r.response()["error"]["code"], -32603, "{r:?}");

    let got = wait_calls(&d, "rc", 6);
    let ua = got[4]["client"].as_str().unwrap_or_default().to_owned();
    assert!(
        ua.starts_with("ureq"),
        "the User-Agent names a client that does not: {got:#?}"
    );
    let want = [
        ("echo", "xy-stdio-test 1", "ok"),
        ("fail", "xy-stdio-test 1", "tool_error"),
        ("reject", "xy-stdio-test 1", "rpc_error"),
        ("echo", "agent-2026 7.1", "ok"),
        ("fail", ua.as_str(), "tool_error"),
        ("die", "xy-stdio-test 1", "child_gone"),
    ];
    let seen: Vec<_> = got.iter().map(summary).collect();
    let want: Vec<_> = want
        .iter()
        .map(|(t, c, o)| ((*t).to_owned(), (*c).to_owned(), (*o).to_owned()))
        .collect();
    // 2026's two calls went out one after the other, so did the rest.
    let (mut s, mut w) = (seen.clone(), want.clone());
    s.sort();
    w.sort();
    assert_eq!(s, w, "{got:#?}");
    for r in &got {
        assert_eq!(r["server"], "rc");
        assert!(r["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
        assert!(r["duration_us"].as_u64().is_some(), "{r}");
    }
    let text = serde_json::to_string(&got).unwrap();
    assert!(!text.contains(SECRET), "an argument in the RPC: {text}");
    // Nor on disk, wherever the records went.
    let dir = d.env.state_dir().join("calls");
    let mut files = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "an argument on disk"
        );
        files += 1;
    }
    assert!(files >= 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);

    // Per-tool figures in `tools` (once the new child has been listed).
    let tools = wait_some("echo in tools", DEADLINE, || {
        let t = d.result("tools", Some(json!({"name": "rc"})));
        t["current"]["tools"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == "echo").cloned())
    });
    assert_eq!(tools["calls"]["calls"], 2, "{tools}");
    assert_eq!(tools["calls"]["errors"], 0, "{tools}");
    assert!(
        tools["calls"]["p99_us"].as_u64().unwrap() >= tools["calls"]["p50_us"].as_u64().unwrap()
    );
    let t = d.result("tools", Some(json!({"name": "rc"})));
    let fail = t["current"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fail")
        .cloned()
        .unwrap();
    assert_eq!(
        (
            fail["calls"]["calls"].clone(),
            fail["calls"]["errors"].clone()
        ),
        (json!(2), json!(2))
    );

    // `limit`, and an unknown server.
    let last = calls(&d, json!({"name": "rc", "limit": 1}));
    assert_eq!(last.len(), 1);
    assert_eq!(last[0], got[5]);
    assert_eq!(calls(&d, json!({})).len(), 6, "every server");
    let e = d
        .client()
        .error("calls", Some(json!({"name": "nope"})), -32001);
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
}

#[test]
fn records_survive_a_restart_and_follow_streams_new_ones() {
    let port = free_port();
    let mut d = TestDaemon::start(&[("rf", raw_config(port))]);
    d.running_pid("rf");
    let mut c = Mcp::connected(&url(port), Era::V2025);
    c.result("tools/call", call("echo", json!({"text": "one"}), None));
    wait_calls(&d, "rf", 1);

    // A follower: the backlog in the answer, then each new record once.
    let mut f = Client::connect(&d.env.socket);
    let r = f.result("calls", Some(json!({"name": "rf", "follow": true})));
    let sub = r["subscription_id"].as_u64().expect("a subscription");
    assert_eq!(r["calls"].as_array().unwrap().len(), 1);
    c.result("tools/call", call("echo", json!({"text": "two"}), None));
    c.result("tools/call", call("fail", json!({}), None));
    let start = Instant::now();
    let mut live: Vec<Value> = Vec::new();
    while live.len() < 2 {
        assert!(start.elapsed() < scaled(DEADLINE), "live records: {live:?}");
        let v = f.recv();
        if v["method"] == "call" {
            assert_eq!(v["params"]["subscription_id"], sub);
            live.push(v["params"]["call"].clone());
        }
    }
    assert_eq!(
        live.iter().map(summary).map(|s| s.2).collect::<Vec<_>>(),
        ["ok", "tool_error"]
    );
    let r = f.result("calls_cancel", Some(json!({"subscription_id": sub})));
    assert_eq!(r["cancelled"], true);
    let end = loop {
        let v = f.recv();
        if v["method"] == "call_end" {
            break v;
        }
    };
    assert_eq!(end["params"]["reason"], "cancelled");

    let before = wait_calls(&d, "rf", 3);
    assert!(d.terminate().success());
    let d = TestDaemon::start_in(d.take_env());
    let after = calls(&d, json!({"name": "rf"}));
    assert_eq!(after, before, "the records survive the restart");
}

/// The ring on disk stays within 2 MiB per server however many calls come,
/// and keeps at least the last 10,000: 12,050 real calls through the
/// bridge (the load generator's warm-up included).
#[test]
fn the_files_stay_bounded_under_twelve_thousand_calls() {
    let port = free_port();
    let d = TestDaemon::start(&[("rb", raw_config(port))]);
    d.running_pid("rb");
    let out = std::process::Command::new(testbin("xy-mcp-load"))
        .args(["http", &port.to_string(), "/mcp", "latency", "12000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "xy-mcp-load: {out:?}");
    let got = wait_some("the last 10,000 calls", DEADLINE, || {
        let r = d.result("calls", Some(json!({"name": "rb", "limit": 20_000})));
        let n = r["calls"].as_array().map_or(0, Vec::len);
        (r["totals"]["rb"] == 12_050 && n >= 10_000).then_some(r)
    });
    let calls = got["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 10_000, "the limit is capped at 10,000");
    assert!(
        calls
            .iter()
            .all(|c| c["tool"] == "echo" && c["outcome"] == "ok")
    );
    let dir = d.env.state_dir().join("calls");
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(bytes <= 2 * 1024 * 1024, "{bytes} bytes on disk");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"rb.jsonl.1".to_owned()),
        "rotated: {names:?}"
    );
    let t = d.result("tools", Some(json!({"name": "rb"})));
    let echo = t["current"]["tools"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == "echo").cloned())
        .expect("echo listed");
    assert_eq!(echo["calls"]["calls"], 12_050, "{echo}");
}

/// A `calls -f` follower that never reads is dropped (`call_end {reason:
/// "lagged"}` waits at the end of what it did not read), while the daemon
/// and a follower that reads carry on with every record.
#[test]
fn a_follower_that_never_reads_is_dropped_and_the_others_get_every_record() {
    use std::io::{BufRead, BufReader, Write};
    let port = free_port();
    let d = TestDaemon::start(&[("rl", raw_config(port))]);
    d.running_pid("rl");
    let follow = json!({"jsonrpc": "2.0", "id": 1, "method": "calls",
        "params": {"name": "rl", "limit": 0, "follow": true}});
    let mut stuck = std::os::unix::net::UnixStream::connect(&d.env.socket).unwrap();
    stuck.write_all(format!("{follow}\n").as_bytes()).unwrap();
    let mut reader = Client::connect(&d.env.socket);
    let sub = reader.result("calls", Some(follow["params"].clone()))["subscription_id"].clone();
    // The reading follower reads while the calls are made.
    let reading = std::thread::spawn(move || {
        let mut seen = 0;
        while seen < 5050 {
            let v = reader.recv();
            assert_ne!(
                v["method"], "call_end",
                "the reading follower was dropped: {v}"
            );
            if v["method"] == "call" {
                assert_eq!(v["params"]["subscription_id"], sub);
                seen += 1;
            }
        }
        seen
    });
    let out = std::process::Command::new(testbin("xy-mcp-load"))
        .args(["http", &port.to_string(), "/mcp", "latency", "5000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "xy-mcp-load: {out:?}");
    assert_eq!(reading.join().unwrap(), 5050);
    // The daemon answers at once meanwhile.
    assert_eq!(
        d.result("calls", Some(json!({"limit": 0})))["totals"]["rl"],
        5050
    );
    // What the stuck follower finds once it reads: records, then its end.
    stuck.set_read_timeout(Some(scaled(DEADLINE))).unwrap();
    let mut lines = BufReader::new(stuck).lines();
    let start = Instant::now();
    let mut records = 0;
    let end = loop {
        assert!(start.elapsed() < scaled(DEADLINE * 2), "no call_end");
        let line = lines.next().expect("a line").expect("read");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "call_end" {
            break v;
        }
        if v["method"] == "call" {
            records += 1;
        }
    };
    assert_eq!(end["params"]["reason"], "lagged", "{end}");
    assert!(records < 5050, "dropped before the end: {records} records");
}
