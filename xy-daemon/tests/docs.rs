//! `docs/protocol.md` stays true: every `→` request line in its ```json
//! blocks is sent, in order (`shutdown` last), to a real daemon with the
//! documented servers, and each documented `←` line is checked against what
//! comes back: the same error code, or a result of the same shape (the same
//! keys, recursively).

use serde_json::Value;

use crate::helper::*;

const DOC: &str = include_str!("../../docs/protocol.md");

struct Exchange {
    request: String,
    replies: Vec<Value>,
}

fn exchanges() -> Vec<Exchange> {
    let mut out: Vec<Exchange> = Vec::new();
    let mut in_json = false;
    for line in DOC.lines() {
        if line.starts_with("```") {
            in_json = line == "```json";
            continue;
        }
        if !in_json {
            continue;
        }
        if let Some(req) = line.strip_prefix("→ ") {
            out.push(Exchange {
                request: req.to_owned(),
                replies: Vec::new(),
            });
        } else if let Some(rep) = line.strip_prefix("← ") {
            let v: Value = serde_json::from_str(rep)
                .unwrap_or_else(|e| panic!("doc reply is not JSON: {rep}: {e}"));
            out.last_mut()
                .expect("a reply follows a request")
                .replies
                .push(v);
        }
    }
    // Shutdown ends the daemon: run it last.
    let (last, mut rest): (Vec<_>, Vec<_>) = out
        .into_iter()
        .partition(|e| e.request.contains("\"shutdown\""));
    rest.extend(last);
    rest
}

/// Same JSON type and, for objects, the same keys (recursively); `null`
/// stands for any value (a stopped server's pid), and arrays compare their
/// first elements when both have one.
fn same_shape(doc: &Value, got: &Value, path: &str) -> Result<(), String> {
    match (doc, got) {
        (Value::Null, _) | (_, Value::Null) => Ok(()),
        (Value::Object(d), Value::Object(g)) => {
            let dk: Vec<&String> = d.keys().collect();
            let gk: Vec<&String> = g.keys().collect();
            if dk != gk {
                return Err(format!("{path}: documented keys {dk:?}, got {gk:?}"));
            }
            for (k, dv) in d {
                same_shape(dv, &g[k], &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(d), Value::Array(g)) => match (d.first(), g.first()) {
            (Some(dv), Some(gv)) => same_shape(dv, gv, &format!("{path}[0]")),
            _ => Ok(()),
        },
        (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => Ok(()),
        _ => Err(format!("{path}: documented {doc}, got {got}")),
    }
}

fn check_response(doc: &Value, got: &Value, request: &str) {
    if let Some(err) = doc.get("error") {
        assert_eq!(got["error"]["code"], err["code"], "{request}\n  got {got}");
        return;
    }
    assert!(
        got.get("error").is_none(),
        "{request}\n  documented success, got {got}"
    );
    if let Err(e) = same_shape(doc, got, "") {
        panic!("{request}\n  {e}\n  got {got}");
    }
}

#[test]
fn every_request_in_protocol_md_works_as_documented() {
    let ex = exchanges();
    assert!(ex.len() >= 15, "found only {} examples", ex.len());
    let methods: Vec<&str> = ex
        .iter()
        .filter_map(|e| e.request.split("\"method\":\"").nth(1)?.split('"').next())
        .collect();
    for m in xy_core::protocol::method::ALL {
        assert!(
            methods.contains(&m),
            "docs/protocol.md has no example for {m}"
        );
    }

    let mut d = TestDaemon::start(&[
        ("insikt", sleep_config(8421, 50)),
        ("notes", sleep_config(8422, 50)),
    ]);
    d.running_pid("insikt");
    d.running_pid("notes");
    // The tail example needs two buffered lines. Watched on disk: a `logs`
    // call here would shift the documented subscription ids.
    let log = d.env.state_dir().join("logs/insikt.log");
    wait_for("insikt has logged", DEADLINE, || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.matches("tick").count() >= 2)
    });

    let mut c = d.client();
    // Notifications that arrived while a reply was awaited: an `event` may
    // overtake the reply of the call that caused it.
    let mut early: std::collections::VecDeque<Value> = std::collections::VecDeque::new();
    for e in &ex {
        c.send(&e.request);
        for doc in &e.replies {
            if doc.is_array() || doc.get("id").is_some() {
                let want_id = if doc.is_array() {
                    None
                } else {
                    Some(doc["id"].clone())
                };
                let got = loop {
                    let v = c.recv();
                    let is_reply = v.is_array() || v.get("id").is_some();
                    if is_reply && (want_id.is_none() || v["id"] == *want_id.as_ref().unwrap()) {
                        break v;
                    }
                    assert!(!is_reply, "{}\n  unexpected reply {v}", e.request);
                    early.push_back(v);
                };
                match (doc, &got) {
                    (Value::Array(d), Value::Array(g)) => {
                        assert_eq!(d.len(), g.len(), "{}\n  got {got}", e.request);
                        for (dv, gv) in d.iter().zip(g) {
                            check_response(dv, gv, &e.request);
                        }
                    }
                    _ => check_response(doc, &got, &e.request),
                }
            } else {
                let method = doc["method"]
                    .as_str()
                    .expect("a documented notification has a method");
                let got = loop {
                    let v = early.pop_front().unwrap_or_else(|| c.recv());
                    if v["method"] == method {
                        break v;
                    }
                    assert!(
                        v["method"] == "log" || v["method"] == "event",
                        "{}\n  unexpected line {v}",
                        e.request
                    );
                };
                if let Err(err) = same_shape(doc, &got, method) {
                    panic!("{}\n  {err}", e.request);
                }
                if method == "event" {
                    for k in ["name", "kind", "from", "to"] {
                        assert_eq!(got["params"][k], doc["params"][k], "{}", e.request);
                    }
                }
                if method == "log_end" || method == "event_end" || method == "call_end" {
                    assert_eq!(
                        got["params"]["reason"], doc["params"]["reason"],
                        "{}",
                        e.request
                    );
                    assert_eq!(
                        got["params"]["subscription_id"],
                        doc["params"]["subscription_id"]
                    );
                }
            }
        }
    }
    assert_eq!(
        d.wait_exit().code(),
        Some(0),
        "the shutdown example ends the daemon"
    );
}
