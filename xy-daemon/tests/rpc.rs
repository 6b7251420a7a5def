//! Every method and every error code over a raw socket.

use serde_json::{Value, json};

use crate::helper::*;

fn two_servers() -> TestDaemon {
    TestDaemon::start(&[
        ("a", sleep_config(port(1), 200)),
        ("b", sleep_config(port(2), 200)),
    ])
}

#[test]
fn list_status_start_stop_restart_with_real_pids() {
    let d = two_servers();
    let a = d.running_pid("a");
    let b = d.running_pid("b");
    assert!(pid_alive(a) && pid_alive(b));

    let list = d.result("list", None);
    assert_eq!(list.as_array().unwrap().len(), 2);
    let e = &list[0];
    for key in [
        "name",
        "state",
        "pid",
        "port",
        "uptime_secs",
        "restart_count",
        "last_exit",
    ] {
        assert!(e.get(key).is_some(), "list entry lacks {key}: {e}");
    }
    assert_eq!(e["name"], "a");
    assert_eq!(e["port"], port(1));

    let st = d.result("status", Some(json!({"name": "a"})));
    assert_eq!(st["pid"], a);
    assert_eq!(st["args"], json!(["--interval-ms", "200"]));
    assert_eq!(st["stop"]["grace_ms"], 3000);
    assert!(
        st["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["to"] == "running"),
        "{st}"
    );

    let r = d.result("stop", Some(json!({"name": "a"})));
    assert_eq!(r, json!({"stopped": ["a"], "not_running": []}));
    assert!(!pid_alive(a), "stop returns once the process is gone");
    assert_eq!(d.entry("a")["state"], "stopped");
    let r = d.result("stop", Some(json!({"name": "a"})));
    assert_eq!(r, json!({"stopped": [], "not_running": ["a"]}));

    let r = d.result("start", Some(json!({"names": ["a", "b"]})));
    assert_eq!(r, json!({"started": ["a"], "already_running": ["b"]}));
    let a2 = d.running_pid("a");
    assert_ne!(a, a2);

    let r = d.result("restart", Some(json!({"name": "b"})));
    assert_eq!(r, json!({"restarted": ["b"]}));
    let b2 = d.running_pid("b");
    assert_ne!(b, b2);
    assert!(!pid_alive(b));

    let r = d.result("restart", Some(json!({"all": true})));
    assert_eq!(r["restarted"], json!(["a", "b"]));
    wait_for("old pids gone", DEADLINE, || {
        !pid_alive(a2) && !pid_alive(b2)
    });

    let r = d.result("stop", Some(json!({"all": true})));
    assert_eq!(r["stopped"], json!(["a", "b"]));
    let r = d.result("start", Some(json!({"all": true})));
    assert_eq!(r["started"], json!(["a", "b"]));

    let ds = d.result("daemon_status", None);
    assert_eq!(ds["pid"], d.pid());
    assert_eq!(ds["servers"], 2);
    assert_eq!(ds["protocol"], 1);
    assert_eq!(ds["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(ds["socket"], d.env.socket.display().to_string());
    assert_eq!(ds["config_dir"], d.env.config_dir().display().to_string());
    assert_eq!(
        ds["log_dir"],
        d.env.state_dir().join("logs").display().to_string()
    );
    assert!(ds["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(ds["uptime_secs"].is_u64());
}

#[test]
fn error_codes_and_bad_input_keep_the_connection_usable() {
    let d = TestDaemon::start(&[
        ("a", sleep_config(port(1), 500)),
        (
            "ghost",
            format!(
                "command \"/nonexistent/xy-no-such-binary\"\nport {}\n",
                port(2)
            ),
        ),
    ]);
    let mut c = d.client();
    let ok = |c: &mut Client| assert!(c.result("list", None).is_array());

    // -32001: unknown server, for every method that takes names.
    let e = c.error("status", Some(json!({"name": "nope"})), -32001);
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    c.error("start", Some(json!({"names": ["a", "nope"]})), -32001);
    c.error("stop", Some(json!({"name": "nope"})), -32001);
    c.error("restart", Some(json!({"name": "nope"})), -32001);
    c.error("logs", Some(json!({"name": "nope"})), -32001);

    // -32006: a command that does not exist.
    let e = c.error("start", Some(json!({"name": "ghost"})), -32006);
    assert!(e["message"].as_str().unwrap().contains("ghost"), "{e}");
    assert!(
        e["data"]
            .to_string()
            .contains("/nonexistent/xy-no-such-binary"),
        "{e}"
    );
    assert_eq!(d.entry("ghost")["state"], "failed");

    // -32602 naming the field.
    let e = c.error("start", Some(json!({})), -32602);
    assert!(e["message"].as_str().unwrap().contains("name"), "{e}");
    let e = c.error("status", Some(json!({"name": 5})), -32602);
    assert_eq!(e["data"]["field"], "name", "{e}");
    let e = c.error("status", Some(json!({"nmae": "a"})), -32602);
    assert!(e["message"].as_str().unwrap().contains("nmae"), "{e}");
    let e = c.error("logs", Some(json!({"name": "a", "tail": "x"})), -32602);
    assert_eq!(e["data"]["field"], "tail", "{e}");
    c.error("list", Some(json!({"x": 1})), -32602);

    // -32601.
    let e = c.error("frobnicate", None, -32601);
    assert!(e["message"].as_str().unwrap().contains("frobnicate"), "{e}");

    // -32700: invalid JSON, then invalid UTF-8; the connection stays usable.
    c.send("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"list\"");
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);
    ok(&mut c);
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"li\xc3\x28st\"}\n");
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    ok(&mut c);

    // -32600: a line over 1 MiB is rejected and discarded.
    let mut long =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"list\",\"params\":{\"pad\":\"".to_vec();
    long.resize(1024 * 1024 + 100, b'x');
    long.extend_from_slice(b"\"}}\n");
    c.send_raw(&long);
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("1048576"),
        "{r}"
    );
    ok(&mut c);

    // -32600: not a request object.
    c.send(r#"{"jsonrpc":"2.0","id":3,"params":{}}"#);
    assert_eq!(c.recv()["error"]["code"], -32600);
    ok(&mut c);
    // The daemon is fine afterwards, for other clients too.
    assert_eq!(d.result("daemon_status", None)["servers"], 2);
}

#[test]
fn every_json_rpc_id_comes_back_and_bad_members_keep_a_readable_id() {
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 500))]);
    let mut c = d.client();
    // JSON-RPC 2.0 ids are any string or number: negative and fractional
    // numbers too, echoed as sent, on results and on errors.
    for id in ["-5", "1.5", "-18446744073709551616"] {
        c.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"status","params":{{"name":"a"}}}}"#
        ));
        let r = c.recv();
        assert_eq!(r["id"], serde_json::from_str::<Value>(id).unwrap(), "{r}");
        assert_eq!(r["result"]["name"], "a", "{r}");
        c.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"nope"}}"#));
        let r = c.recv();
        assert_eq!(r["id"], serde_json::from_str::<Value>(id).unwrap(), "{r}");
        assert_eq!(r["error"]["code"], -32601, "{r}");
    }
    // In a batch as well.
    c.send(r#"[{"jsonrpc":"2.0","id":-1,"method":"daemon_status"},{"jsonrpc":"2.0","id":-2,"method":"nope"}]"#);
    let r = c.recv();
    assert_eq!(r[0]["id"], -1, "{r}");
    assert_eq!(r[0]["result"]["servers"], 1, "{r}");
    assert_eq!(r[1]["id"], -2, "{r}");
    assert_eq!(r[1]["error"]["code"], -32601, "{r}");
    // `list` writes its reply itself (transport/direct.rs): same id rule.
    c.send(r#"{"jsonrpc":"2.0","id":-3,"method":"list"}"#);
    let r = c.recv();
    assert_eq!(r["id"], -3, "{r}");
    assert_eq!(r["result"][0]["name"], "a", "{r}");

    // A member of the wrong type is -32600, still answered to its id.
    c.send(r#"{"jsonrpc":"2.0","id":7,"method":5}"#);
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(7), json!(-32600)),
        "{r}"
    );
    c.send(r#"{"jsonrpc":2,"id":8,"method":"list"}"#);
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(8), json!(-32600)),
        "{r}"
    );
    // An id that is no string, number or null cannot be echoed: null.
    c.send(r#"{"jsonrpc":"2.0","id":true,"method":"list"}"#);
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (Value::Null, json!(-32600)),
        "{r}"
    );

    // `all` beside names is ambiguous, not "all wins": -32602, nothing done.
    let a = d.running_pid("a");
    for p in [
        json!({"name": "a", "all": true}),
        json!({"names": ["a"], "all": true}),
    ] {
        let e = c.error("stop", Some(p), -32602);
        assert_eq!(e["data"]["field"], "all", "{e}");
    }
    assert_eq!(d.running_pid("a"), a);

    // An empty `names` is not "every server" (that is leaving it out).
    for m in ["logs", "events"] {
        let e = c.error(m, Some(json!({"names": []})), -32602);
        assert_eq!(e["data"]["field"], "names", "{m}: {e}");
    }

    // Params that are no object: -32602 naming no field (not the value).
    let e = c.error("status", Some(json!(5)), -32602);
    assert_eq!(e["data"]["field"], Value::Null, "{e}");

    // A reload rejected for one error says "1 error".
    d.env.write_config("bad", "port 1\nbogus 1\n");
    let e = c.error("reload", None, -32003);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("config invalid: 2 errors"),
        "{e}"
    );
    d.env.write_config(
        "bad",
        &format!("command \"/bin/true\"\nport {}\nbogus 1\n", port(2)),
    );
    let e = c.error("reload", None, -32003);
    assert_eq!(e["message"], "config invalid: 1 error", "{e}");
    assert_eq!(d.result("daemon_status", None)["servers"], 1);
}

#[test]
fn each_cancel_method_ends_only_streams_of_its_own_kind() {
    let d = TestDaemon::start(&[("a", sleep_config(port(1), 100))]);
    let mut c = d.client();
    let logs = c.result(
        "logs",
        Some(json!({"name": "a", "tail": 0, "follow": true})),
    )["subscription_id"]
        .clone();
    let events = c.result("events", None)["subscription_id"].clone();
    // Subscription ids come from one counter: the kind must still match.
    assert_eq!(
        c.result("events_cancel", Some(json!({"subscription_id": logs}))),
        json!({"cancelled": false})
    );
    assert_eq!(
        c.result("logs_cancel", Some(json!({"subscription_id": events}))),
        json!({"cancelled": false})
    );
    // Both streams are still live; each ends through its own method.
    for (cancel, sub, end) in [
        ("logs_cancel", &logs, "log_end"),
        ("events_cancel", &events, "event_end"),
    ] {
        let id = c.request(cancel, Some(json!({"subscription_id": sub})));
        let (mut reply, mut ended) = (None, None);
        wait_for(end, DEADLINE, || {
            let v = c.recv();
            if v["id"] == id {
                reply = Some(v["result"].clone());
            } else if v["method"] == end {
                ended = Some(v["params"].clone());
            }
            reply.is_some() && ended.is_some()
        });
        assert_eq!(reply.unwrap(), json!({"cancelled": true}), "{cancel}");
        assert_eq!(
            ended.unwrap(),
            json!({"subscription_id": sub, "reason": "cancelled"})
        );
    }
}

#[test]
fn batches_and_notifications() {
    let d = two_servers();
    let a = d.running_pid("a");
    let mut c = d.client();
    c.send(
        &json!([
            {"jsonrpc": "2.0", "id": 10, "method": "status", "params": {"name": "a"}},
            {"jsonrpc": "2.0", "method": "list"},
            {"jsonrpc": "2.0", "id": 11, "method": "status", "params": {"name": "nope"}},
            {"jsonrpc": "2.0", "id": 12, "method": "daemon_status"}
        ])
        .to_string(),
    );
    let r = c.recv();
    let arr = r
        .as_array()
        .unwrap_or_else(|| panic!("batch reply must be an array: {r}"));
    assert_eq!(arr.len(), 3, "the notification has no entry: {r}");
    let by_id = |id: i64| {
        arr.iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {r}"))
    };
    assert_eq!(by_id(10)["result"]["pid"], a);
    assert_eq!(by_id(11)["error"]["code"], -32001);
    assert_eq!(by_id(12)["result"]["servers"], 2);

    c.send("[]");
    assert_eq!(c.recv()["error"]["code"], -32600);

    // A notification is executed but never answered: the next line we get
    // is the reply to the request after it.
    c.send(r#"{"jsonrpc":"2.0","method":"stop","params":{"name":"a"}}"#);
    c.send(r#"{"jsonrpc":"2.0","method":"no_such_method"}"#);
    let id = c.request("daemon_status", None);
    assert_eq!(c.recv()["id"], id);
    wait_for("a stopped by the notification", DEADLINE, || {
        d.entry("a")["state"] == "stopped"
    });
    assert!(!pid_alive(a));
}

#[test]
fn socat_style_half_close_gets_replies_then_eof() {
    let d = two_servers();
    let mut c = d.client();
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"list"}"#);
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"restart","params":{"name":"a"}}"#);
    c.finish_sending();
    let all = c.recv_to_eof();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().any(|v| v["id"] == 1 && v["result"].is_array()));
    assert!(
        all.iter()
            .any(|v| v["id"] == 2 && v["result"]["restarted"] == json!(["a"]))
    );
}

#[test]
fn shutdown_method_replies_then_exits_zero_leaving_nothing() {
    let mut d = two_servers();
    let pids = [d.running_pid("a"), d.running_pid("b")];
    let mut c = d.client();
    assert_eq!(c.result("shutdown", None), json!({}));
    let status = d.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    for p in pids {
        assert!(!pid_alive(p), "child {p} survived shutdown");
    }
    assert!(!d.env.socket.exists(), "socket removed");
    assert!(
        !d.env.state_dir().join("xy.pid").exists(),
        "pidfile removed"
    );
    assert!(c.recv_to_eof().is_empty());
}

/// `_debug_panic` exists in debug builds only.
#[cfg(debug_assertions)]
#[test]
fn debug_panic_restarts_only_that_server_actor() {
    let d = two_servers();
    let b = d.running_pid("b");
    let r = d.result("_debug_panic", Some(json!({"name": "a"})));
    assert_eq!(r, json!({}));
    // The root restarts the actor and brings `a` back to running. While the
    // actor is being replaced a `list` may fail with -32603 (engine side).
    wait_for("a running again after the panic", DEADLINE, || {
        let v = d.client().call("list", None);
        v["result"].as_array().is_some_and(|l| {
            l.iter()
                .any(|e| e["name"] == "a" && e["state"] == "running")
        })
    });
    assert_eq!(d.running_pid("b"), b, "other servers are not disturbed");
    // daemon.log is written by a background writer: poll, don't race it.
    wait_for("the panic in daemon.log", DEADLINE, || {
        d.env.daemon_log().contains("panic")
    });
}
