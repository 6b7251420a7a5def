//! `events` / `events_cancel` end to end (SPEC §15): one stream sees, for two
//! servers and in order, starts, a crash and its restart, a health change and
//! a reload's config changes, each with the name and the timestamp `status`
//! records; cancel ends it with `event_end`; a subscriber that never reads
//! is dropped (`lagged`) while the daemon and other subscribers carry on.
// The figures are reported on stderr (`--no-capture`).
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::helper::*;

/// `xy-test-mcp` with a fast `mcp` health probe (health changes quickly).
fn probed_config(port: u16) -> String {
    format!(
        "command \"{}\"\nargs \"--port\" \"{port}\"\nport {port}\nrestart {{\n    backoff-initial \"100ms\"\n}}\nstop {{\n    grace \"2s\"\n}}\nhealth {{\n    mcp \"/mcp\"\n    interval \"200ms\"\n    start-period \"5s\"\n}}\n",
        testbin("xy-test-mcp").display()
    )
}

/// `xy-test-sleep` restarted 100 ms after a crash.
fn crashy_config(port: u16, interval_ms: u64) -> String {
    format!(
        "command \"{}\"\nargs \"--interval-ms\" \"{interval_ms}\"\nport {port}\nrestart {{\n    policy \"always\"\n    backoff-initial \"100ms\"\n}}\nstop {{\n    grace \"2s\"\n}}\n",
        testbin("xy-test-sleep").display()
    )
}

/// Reads `event` notifications of subscription `sub` until `done` holds for
/// the list so far; skips replies.
#[track_caller]
fn read_events(
    c: &mut Client,
    sub: u64,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    let mut got: Vec<Value> = Vec::new();
    while !done(&got) {
        assert!(
            start.elapsed() < scaled(DEADLINE * 2),
            "timed out waiting for {what}; got {got:#?}"
        );
        let v = c.recv();
        if v["method"] == "event" {
            assert_eq!(v["params"]["subscription_id"], sub, "{v}");
            got.push(v["params"].clone());
        } else {
            assert!(v.get("id").is_some(), "unexpected notification {v}");
        }
    }
    got
}

fn state_path(events: &[Value], name: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["name"] == name && e["kind"] == "state")
        .map(|e| {
            format!(
                "{}>{}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect()
}

fn ends_with(events: &[Value], name: &str, tail: &[&str]) -> bool {
    let path = state_path(events, name);
    path.len() >= tail.len() && path[path.len() - tail.len()..] == *tail
}

fn parse_ts(ts: &Value) -> SystemTime {
    humantime::parse_rfc3339(ts.as_str().expect("ts is a string"))
        .unwrap_or_else(|e| panic!("ts {ts} is not RFC 3339: {e}"))
}

/// Every event has every key, a known kind and an RFC 3339 `ts`; per server,
/// timestamps never go backwards; state events match `status`'s transitions
/// (same from, to, ts and reason).
fn check_against_status(d: &TestDaemon, events: &[Value], names: &[&str]) {
    for e in events {
        for k in [
            "subscription_id",
            "name",
            "kind",
            "ts",
            "from",
            "to",
            "reason",
        ] {
            assert!(e.get(k).is_some(), "{k} missing in {e}");
        }
        assert!(
            ["state", "health", "tools", "config"].contains(&e["kind"].as_str().unwrap()),
            "{e}"
        );
    }
    for name in names {
        let mine: Vec<&Value> = events.iter().filter(|e| e["name"] == *name).collect();
        for w in mine.windows(2) {
            assert!(
                parse_ts(&w[0]["ts"]) <= parse_ts(&w[1]["ts"]),
                "{name}: ts order {w:?}"
            );
        }
        let st = d.result("status", Some(json!({"name": name})));
        let transitions = st["transitions"].as_array().unwrap();
        for e in mine.iter().filter(|e| e["kind"] == "state") {
            assert!(
                transitions.iter().any(|t| t["ts"] == e["ts"]
                    && t["from"] == e["from"]
                    && t["to"] == e["to"]
                    && t["reason"] == e["reason"]),
                "{name}: event {e} is not in status transitions {transitions:#?}"
            );
        }
        let health = st["health_history"].as_array().unwrap();
        for e in mine.iter().filter(|e| e["kind"] == "health") {
            assert!(
                health
                    .iter()
                    .any(|t| t["ts"] == e["ts"] && t["to"] == e["to"]),
                "{name}: event {e} is not in status health_history {health:#?}"
            );
        }
    }
}

#[test]
fn one_stream_shows_starts_a_crash_health_and_reload_in_order() {
    let p = free_port();
    let d = TestDaemon::start(&[
        ("web", probed_config(p)),
        ("tick", crashy_config(port(1), 200)),
    ]);
    let mut c = d.client();
    let sub = c.result("events", None)["subscription_id"]
        .as_u64()
        .expect("subscription_id");
    let mut all: Vec<Value> = Vec::new();

    // Stop both, then start both: starting → running for each.
    let mut ctl = d.client();
    assert_eq!(
        ctl.result("stop", Some(json!({"all": true})))["stopped"],
        json!(["tick", "web"])
    );
    ctl.result("start", Some(json!({"all": true})));
    all.extend(read_events(&mut c, sub, "both started", |ev| {
        ["tick", "web"]
            .iter()
            .all(|n| ends_with(ev, n, &["stopped>starting", "starting>running"]))
    }));
    for n in ["tick", "web"] {
        let path = state_path(&all, n);
        assert_eq!(
            path,
            [
                "running>stopping",
                "stopping>stopped",
                "stopped>starting",
                "starting>running"
            ],
            "{n}"
        );
    }

    // The probe finds `web` healthy: a health event.
    all.extend(read_events(&mut c, sub, "web healthy", |ev| {
        ev.iter()
            .any(|e| e["name"] == "web" && e["kind"] == "health" && e["to"] == "healthy")
    }));

    // A crash: running → restarting → starting → running, with the signal.
    let pid = d.running_pid("tick");
    signal(pid, libc::SIGKILL);
    let before = all.len();
    all.extend(read_events(&mut c, sub, "tick restarted", |ev| {
        ends_with(
            ev,
            "tick",
            &[
                "running>restarting",
                "restarting>starting",
                "starting>running",
            ],
        )
    }));
    let crash = all[before..]
        .iter()
        .find(|e| e["name"] == "tick" && e["to"] == "restarting")
        .unwrap();
    assert!(
        crash["reason"].as_str().unwrap().contains("SIGKILL"),
        "{crash}"
    );

    // A reload that changes `tick`, removes `web` and adds `extra`: config
    // events first, then the state changes they cause.
    d.env.write_config("tick", &crashy_config(port(1), 150));
    d.env.remove_config("web");
    d.env.write_config("extra", &sleep_config(port(2), 200));
    let r = ctl.result("reload", None);
    assert_eq!(
        (&r["added"], &r["removed"], &r["changed"]),
        (&json!(["extra"]), &json!(["web"]), &json!(["tick"]))
    );
    let before = all.len();
    all.extend(read_events(&mut c, sub, "reload settled", |ev| {
        ends_with(ev, "tick", &["stopped>starting", "starting>running"])
            && ends_with(ev, "extra", &["stopped>starting", "starting>running"])
            && ends_with(ev, "web", &["stopping>stopped"])
    }));
    let reload = &all[before..];
    let config: Vec<(&str, &str)> = reload
        .iter()
        .filter(|e| e["kind"] == "config")
        .map(|e| (e["name"].as_str().unwrap(), e["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        config,
        [("extra", "added"), ("web", "removed"), ("tick", "changed")]
    );
    for (name, first_state) in [("tick", "running>stopping"), ("web", "running>stopping")] {
        let cfg = reload
            .iter()
            .position(|e| e["name"] == name && e["kind"] == "config")
            .unwrap();
        let st = reload
            .iter()
            .position(|e| e["name"] == name && e["kind"] == "state")
            .unwrap();
        assert!(cfg < st, "{name}: config event before its state changes");
        assert_eq!(
            state_path(reload, name)[0],
            first_state,
            "{name}: {reload:#?}"
        );
    }
    for e in reload.iter().filter(|e| e["kind"] == "config") {
        assert!(e["from"].is_null(), "{e}");
        assert!(e["reason"].as_str().unwrap().starts_with("reload"), "{e}");
    }
    check_against_status(&d, &all, &["tick", "extra"]);

    // Cancel: `{cancelled: true}` and the stream ends with `event_end`.
    let id = c.request("events_cancel", Some(json!({"subscription_id": sub})));
    let mut replied = false;
    let end = loop {
        let v = c.recv();
        if v["id"] == id {
            assert_eq!(v["result"], json!({"cancelled": true}), "{v}");
            replied = true;
        } else if v["method"] == "event_end" {
            break v;
        }
    };
    assert_eq!(
        end["params"],
        json!({"subscription_id": sub, "reason": "cancelled"})
    );
    if !replied {
        let v = c.recv();
        assert_eq!(v["id"], id);
        assert_eq!(v["result"], json!({"cancelled": true}));
    }
    // Cancelling again: nothing to cancel.
    assert_eq!(
        c.result("events_cancel", Some(json!({"subscription_id": sub}))),
        json!({"cancelled": false})
    );
    eprintln!("[events] {} events in the stream", all.len());
}

#[test]
fn names_filter_and_bad_params() {
    let d = TestDaemon::start(&[
        ("a", sleep_config(port(1), 200)),
        ("b", sleep_config(port(2), 200)),
    ]);
    let mut c = d.client();
    let sub = c.result("events", Some(json!({"names": ["b"]})))["subscription_id"]
        .as_u64()
        .unwrap();
    let mut ctl = d.client();
    ctl.result("restart", Some(json!({"names": ["a", "b"]})));
    let got = read_events(&mut c, sub, "b restarted", |ev| {
        ends_with(ev, "b", &["starting>running"])
    });
    assert!(got.iter().all(|e| e["name"] == "b"), "{got:#?}");

    let e = c.error("events", Some(json!({"names": ["nope"]})), -32001);
    assert_eq!(e["data"]["names"], json!(["nope"]));
    let e = c.error("events", Some(json!({"name": "a"})), -32602);
    assert_eq!(e["data"]["field"], "name");
    c.error("events", Some(json!({"names": "a"})), -32602);
    c.error("events_cancel", Some(json!({})), -32602);
}

#[test]
fn a_subscriber_that_never_reads_is_dropped_without_slowing_anyone() {
    // Two crash loops make events fast: each `xy-test-exit` run is
    // starting → running → restarting, again and again.
    let exit = |port: u16| {
        format!(
            "command \"{}\"\nargs \"--code\" \"1\"\nport {port}\nrestart {{\n    policy \"always\"\n    backoff-initial \"1ms\"\n    backoff-max \"1ms\"\n    max-retries-per-minute 1000000\n}}\n",
            testbin("xy-test-exit").display()
        )
    };
    let d = TestDaemon::start(&[
        ("loop1", exit(port(1))),
        ("loop2", exit(port(2))),
        ("calm", sleep_config(port(3), 200)),
    ]);
    let calm_pid = d.running_pid("calm");

    // Subscribes and never reads a byte: a raw socket, since the shared
    // client always reads its replies.
    let mut stuck = UnixStream::connect(&d.env.socket).unwrap();
    stuck
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"events\"}\n")
        .unwrap();
    // A subscriber that reads normally.
    let mut reader = d.client();
    let sub = reader.result("events", None)["subscription_id"]
        .as_u64()
        .unwrap();

    // Enough events to fill the socket, the connection's queue and the
    // stream's own queue several times over.
    const WANT: usize = 6_000;
    let mut ctl = d.client();
    let start = Instant::now();
    let mut seen = 0usize;
    let mut slowest = Duration::ZERO;
    let mut calls = 0;
    while seen < WANT {
        assert!(
            start.elapsed() < scaled(DEADLINE * 6),
            "only {seen} events in {:?}",
            start.elapsed()
        );
        let v = reader.recv();
        if v["method"] == "event" {
            assert_eq!(v["params"]["subscription_id"], sub);
            seen += 1;
        } else if v["method"] == "event_end" {
            panic!("the reading subscriber was dropped: {v}");
        }
        if seen.is_multiple_of(500) {
            let t = Instant::now();
            assert!(ctl.result("list", None).is_array());
            slowest = slowest.max(t.elapsed());
            calls += 1;
        }
    }
    let took = start.elapsed();
    ctl.result("stop", Some(json!({"names": ["loop1", "loop2"]})));
    assert_eq!(d.running_pid("calm"), calm_pid, "calm was not disturbed");

    // The stuck subscriber, once it reads: its reply, some events, then
    // `event_end {reason: lagged}`.
    stuck.set_read_timeout(Some(scaled(DEADLINE))).unwrap();
    let mut r = BufReader::new(stuck);
    let mut line = String::new();
    let mut n = 0usize;
    let end = loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "EOF before event_end");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "event" {
            n += 1;
        } else if v["method"] == "event_end" {
            break v;
        }
    };
    assert_eq!(end["params"]["reason"], "lagged", "{end}");
    assert!(n < WANT, "a stuck subscriber cannot get everything ({n})");
    eprintln!(
        "[events lag] reader saw {seen} events in {took:?}; {calls} list calls meanwhile, slowest {slowest:?}; the stuck subscriber got {n} events, then event_end lagged"
    );
}
