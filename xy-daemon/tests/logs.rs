//! `logs` (tail, follow, several names) and `logs_cancel` over raw lines.

use serde_json::{Value, json};

use crate::helper::*;

fn ticking() -> TestDaemon {
    TestDaemon::start(&[
        ("a", sleep_config(port(1), 30)),
        ("b", sleep_config(port(2), 30)),
    ])
}

/// Waits until `name` has logged at least `n` ticks.
fn wait_ticks(d: &TestDaemon, name: &str, n: usize) {
    wait_for(&format!("{n} ticks from {name}"), DEADLINE, || {
        let mut c = d.client();
        let id = c.request("logs", Some(json!({"name": name})));
        collect_stream(&mut c, id).0.len() >= n
    });
}

/// Reads the reply to `id` (must come before any `log` of its stream), then
/// every notification up to its `log_end`. Returns (lines, end reason).
fn collect_stream(c: &mut Client, id: u64) -> (Vec<Value>, Value) {
    let reply = c.recv();
    assert_eq!(reply["id"], id, "the reply precedes the stream: {reply}");
    let sub = reply["result"]["subscription_id"].clone();
    assert!(sub.is_u64(), "{reply}");
    let mut lines = Vec::new();
    loop {
        let v = c.recv();
        assert_eq!(v["params"]["subscription_id"], sub, "{v}");
        match v["method"].as_str() {
            Some("log") => lines.push(v["params"].clone()),
            Some("log_end") => return (lines, v["params"]["reason"].clone()),
            _ => panic!("unexpected line {v}"),
        }
    }
}

#[test]
fn tail_returns_the_last_lines_then_log_end_complete() {
    let d = ticking();
    wait_ticks(&d, "a", 5);
    let mut c = d.client();
    let id = c.request("logs", Some(json!({"name": "a", "tail": 3})));
    let (lines, reason) = collect_stream(&mut c, id);
    assert_eq!(reason, "complete");
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        assert_eq!(l["name"], "a");
        assert!(l["stream"] == "stdout" || l["stream"] == "stderr", "{l}");
        assert!(l["ts"].as_str().unwrap().ends_with('Z'));
    }
    // Oldest first: ticks ascend.
    let ticks: Vec<u64> = lines
        .iter()
        .filter_map(|l| l["line"].as_str()?.strip_prefix("tick ")?.parse().ok())
        .collect();
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");

    // Several names at once; tail applies per server.
    let id = c.request("logs", Some(json!({"names": ["a", "b"], "tail": 2})));
    let (lines, reason) = collect_stream(&mut c, id);
    assert_eq!(reason, "complete");
    assert_eq!(
        lines.iter().filter(|l| l["name"] == "a").count(),
        2,
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l["name"] == "b").count(),
        2,
        "{lines:?}"
    );

    // No name: every server.
    let id = c.request("logs", Some(json!({"tail": 1})));
    let (lines, _) = collect_stream(&mut c, id);
    let mut names: Vec<&str> = lines.iter().map(|l| l["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn follow_streams_live_lines_until_cancelled() {
    let d = ticking();
    let mut c = d.client();
    let id = c.request(
        "logs",
        Some(json!({"names": ["a", "b"], "tail": 0, "follow": true})),
    );
    let reply = c.recv();
    assert_eq!(reply["id"], id, "reply first: {reply}");
    let sub = reply["result"]["subscription_id"].as_u64().unwrap();
    let mut seen_a = false;
    let mut seen_b = false;
    wait_for("live lines from a and b", DEADLINE, || {
        let v = c.recv();
        assert_eq!(v["method"], "log", "{v}");
        assert_eq!(v["params"]["subscription_id"], sub);
        seen_a |= v["params"]["name"] == "a";
        seen_b |= v["params"]["name"] == "b";
        seen_a && seen_b
    });

    // Another connection cannot cancel it.
    let mut other = d.client();
    assert_eq!(
        other.result("logs_cancel", Some(json!({"subscription_id": sub}))),
        json!({"cancelled": false})
    );

    let cancel_id = c.request("logs_cancel", Some(json!({"subscription_id": sub})));
    let mut got_reply = false;
    let mut got_end = false;
    while !(got_reply && got_end) {
        let v = c.recv();
        if v["id"] == cancel_id {
            assert_eq!(v["result"], json!({"cancelled": true}));
            got_reply = true;
        } else if v["method"] == "log_end" {
            assert_eq!(
                v["params"],
                json!({"subscription_id": sub, "reason": "cancelled"})
            );
            got_end = true;
        } else {
            assert!(!got_end, "nothing after log_end: {v}");
            assert_eq!(v["method"], "log");
        }
    }
    assert_eq!(
        c.result("logs_cancel", Some(json!({"subscription_id": sub}))),
        json!({"cancelled": false})
    );
    assert_eq!(
        c.result("logs_cancel", Some(json!({"subscription_id": 999_999}))),
        json!({"cancelled": false})
    );
}

#[test]
fn follow_survives_half_closed_input() {
    // `echo '{"method":"logs","params":{"follow":true}}' | socat - UNIX-CONNECT:…`
    // half-closes its input at once and must keep receiving lines.
    let d = ticking();
    let mut c = d.client();
    c.request(
        "logs",
        Some(json!({"name": "a", "tail": 0, "follow": true})),
    );
    c.finish_sending();
    assert!(c.recv()["result"]["subscription_id"].is_u64());
    for _ in 0..3 {
        let v = c.recv();
        assert_eq!(v["method"], "log", "{v}");
        assert_eq!(v["params"]["name"], "a");
    }
}

#[test]
fn following_a_server_removed_by_reload_ends_with_removed() {
    let d = ticking();
    let mut c = d.client();
    let id = c.request(
        "logs",
        Some(json!({"name": "b", "tail": 0, "follow": true})),
    );
    assert_eq!(c.recv()["id"], id);
    d.env.remove_config("b");
    let r = d.result("reload", None);
    assert_eq!(r["removed"], json!(["b"]));
    loop {
        let v = c.recv();
        if v["method"] == "log_end" {
            assert_eq!(v["params"]["reason"], "removed", "{v}");
            break;
        }
        assert_eq!(v["method"], "log", "{v}");
    }
}
