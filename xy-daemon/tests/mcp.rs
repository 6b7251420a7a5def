//! SPEC §12 against the real `xyd` and rmcp test servers: the `mcp` probe in
//! both eras (and dual-era servers probed the 2026 way), faults in both eras,
//! no restart loop for a healthy 2026 server, no leaked 2025 session, the
//! tool ledger across spawns and daemon restarts, `tools` and `xyctl tools`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, testbin, wait_some};

/// A config running `xy-test-mcp` with a fast `mcp` probe.
fn config(port: u16, args: &[&str], health_extra: &str) -> String {
    let mut all = vec!["--port".to_owned(), port.to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let args = all
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "command \"{}\"\nargs {args}\nport {port}\nstop {{\n    grace \"2s\"\n}}\n\
         health {{\n    mcp \"/mcp\"\n    interval \"100ms\"\n    timeout \"1s\"\n    failures 2\n    start-period \"0s\"\n{health_extra}}}\n",
        testbin("xy-test-mcp").display()
    )
}

fn status(d: &TestDaemon, name: &str) -> Value {
    d.result("status", Some(json!({"name": name})))
}

/// Waits until `name`'s health is `want`; returns its status.
fn wait_health(d: &TestDaemon, name: &str, want: &str) -> Value {
    wait_some(&format!("{name} {want}"), DEADLINE, || {
        let s = status(d, name);
        (s["health"]["state"] == want).then_some(s)
    })
}

/// Waits until `name`'s tools were listed after its current spawn.
fn wait_listed(d: &TestDaemon, name: &str, not: &Value) -> Value {
    wait_some(&format!("{name} tools listed"), DEADLINE, || {
        let s = status(d, name);
        let listed = &s["mcp"]["listed_at"];
        (!listed.is_null() && listed != not).then_some(s)
    })
}

fn log(d: &TestDaemon, name: &str) -> String {
    std::fs::read_to_string(d.env.state_dir().join(format!("logs/{name}.log"))).unwrap_or_default()
}

#[test]
fn both_eras_and_dual_era_are_healthy_with_the_right_era() {
    let (p26, p25, pboth) = (free_port(), free_port(), free_port());
    let d = TestDaemon::start(&[
        (
            "only26",
            config(
                p26,
                &["--era", "2026", "--name", "n26", "--version", "2.6"],
                "",
            ),
        ),
        (
            "only25",
            config(p25, &["--era", "2025", "--tools", "a,b"], ""),
        ),
        ("both", config(pboth, &["--era", "both", "--sse"], "")),
    ]);
    let s = wait_listed(&d, "only26", &Value::Null);
    assert_eq!(s["health"]["state"], "healthy", "{s}");
    let m = &s["mcp"];
    assert_eq!(
        (
            m["era"].clone(),
            m["protocol_version"].clone(),
            m["server_name"].clone(),
            m["server_version"].clone()
        ),
        (
            json!("2026"),
            json!("2026-07-28"),
            json!("n26"),
            json!("2.6")
        ),
        "{m}"
    );
    assert_eq!(m["tool_count"], 1);
    assert_eq!(
        (m["tools_added"].clone(), m["tools_removed"].clone()),
        (json!([]), json!([]))
    );
    assert_eq!(d.entry("only26")["tool_count"], 1);

    let s = wait_listed(&d, "only25", &Value::Null);
    assert_eq!(s["health"]["state"], "healthy", "{s}");
    assert_eq!(
        (
            s["mcp"]["era"].clone(),
            s["mcp"]["protocol_version"].clone()
        ),
        (json!("2025"), json!("2025-11-25"))
    );
    assert_eq!(s["mcp"]["server_name"], "xy-test-mcp");
    assert_eq!(d.entry("only25")["tool_count"], 2);

    let s = wait_listed(&d, "both", &Value::Null);
    assert_eq!(
        s["mcp"]["era"], "2026",
        "a dual-era server is probed the 2026 way: {s}"
    );
    // A few more probes: each one `server/discover`, never a handshake.
    wait_some("three discovers", DEADLINE, || {
        (log(&d, "both")
            .matches("POST /mcp server/discover 200")
            .count()
            >= 3)
            .then_some(())
    });
    let text = log(&d, "both");
    assert!(
        !text.contains("initialize") && !text.contains("ping"),
        "{text}"
    );
    // The 2025-only server: one refused discover, one handshake, then
    // pings; xy's own listing of the spawn (SPEC §20) shares the probe's
    // session (D155), so there is no second one.
    let count = |text: &str| {
        (
            text.matches("POST /mcp server/discover 400").count(),
            text.matches("POST /mcp initialize 200").count(),
        )
    };
    wait_some("three pings after the handshake", DEADLINE, || {
        (log(&d, "only25").matches("POST /mcp ping 200").count() >= 3).then_some(())
    });
    let text = log(&d, "only25");
    assert_eq!(count(&text), (1, 1), "{text}");
    assert_eq!(
        text.matches("POST /mcp tools/list 200").count(),
        1,
        "{text}"
    );
}

#[test]
fn garbage_hanging_and_http_500_are_unhealthy_in_both_eras() {
    let cases: [(&str, &[&str]); 6] = [
        ("garbage26", &["--era", "2026", "--fault", "garbage"]),
        ("hang26", &["--era", "2026", "--fault", "hang"]),
        ("e500_26", &["--era", "2026", "--fault", "http500"]),
        // 2025: discovery is refused properly, then the session goes wrong.
        (
            "garbage25",
            &[
                "--era",
                "2025",
                "--fault",
                "garbage",
                "--fault-on",
                "initialize,ping",
            ],
        ),
        (
            "hang25",
            &["--era", "2025", "--fault", "hang", "--fault-on", "ping"],
        ),
        (
            "e500_25",
            &[
                "--era",
                "2025",
                "--fault",
                "http500",
                "--fault-on",
                "ping",
                "--fault-after",
                "2",
            ],
        ),
    ];
    let configs: Vec<(&str, String)> = cases
        .iter()
        .map(|(name, args)| (*name, config(free_port(), args, "")))
        .collect();
    let d = TestDaemon::start(&configs);
    for (name, _) in &cases {
        let s = wait_health(&d, name, "unhealthy");
        assert!(s["health"]["error"].is_string(), "{name}: {s}");
    }
    // The 2025 fallback really ran for the 2025 servers.
    assert!(log(&d, "hang25").contains("POST /mcp initialize 200"));
    let e500 = wait_some("e500_25 failing pings", DEADLINE, || {
        let l = log(&d, "e500_25");
        l.contains("POST /mcp ping 500").then_some(l)
    });
    assert!(e500.contains("POST /mcp ping 200"), "healthy first: {e500}");
    let s = status(&d, "garbage26");
    assert!(
        s["health_history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["to"] == "unhealthy"),
        "{s}"
    );
}

#[test]
fn restart_on_failure_never_fires_for_a_healthy_2026_server() {
    let port = free_port();
    let d = TestDaemon::start(&[(
        "calm",
        config(port, &["--era", "2026"], "    restart-on-failure #true\n"),
    )]);
    let pid = d.running_pid("calm");
    // 30 probe intervals (100 ms each) and more.
    wait_some("31 probes", Duration::from_secs(60), || {
        (log(&d, "calm")
            .matches("POST /mcp server/discover 200")
            .count()
            >= 31)
            .then_some(())
    });
    let s = status(&d, "calm");
    assert_eq!(s["health"]["state"], "healthy", "{s}");
    assert_eq!(s["restart_count"], 0, "{s}");
    assert_eq!(s["pid"], pid, "{s}");
    assert!(
        s["health_history"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["to"] != "unhealthy"),
        "{s}"
    );
    assert!(!log(&d, "calm").contains("got SIGTERM"));
}

fn session_lines(path: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    (
        text.lines().filter(|l| l.starts_with("open ")).count(),
        text.lines().filter(|l| l.starts_with("close ")).count(),
    )
}

#[test]
fn no_2025_session_is_leaked_across_20_restarts() {
    let env = Env::new();
    let sessions = env.root.path().join("sessions.txt");
    let port = free_port();
    env.write_config(
        "s25",
        &config(
            port,
            &[
                "--era",
                "2025",
                "--sessions-file",
                sessions.to_str().unwrap(),
            ],
            "",
        ),
    );
    let d = TestDaemon::start_in(env);
    for i in 1..=20 {
        wait_some(&format!("session {i} opened"), DEADLINE, || {
            (session_lines(&sessions).0 >= i).then_some(())
        });
        d.result("restart", Some(json!({"name": "s25"})));
    }
    wait_some("session 21 opened", DEADLINE, || {
        (session_lines(&sessions).0 >= 21).then_some(())
    });
    d.result("stop", Some(json!({"name": "s25"})));
    let (open, close) = session_lines(&sessions);
    assert_eq!(
        open,
        close,
        "every session the probe opened was ended with DELETE:\n{}\nthe server's log:\n{}",
        std::fs::read_to_string(&sessions).unwrap_or_default(),
        std::fs::read_to_string(d.env.state_dir().join("logs/s25.log")).unwrap_or_default()
    );
    assert!(open >= 21, "{open}");
}

#[test]
fn tool_changes_between_spawns_show_in_status_tools_and_xyctl_and_survive_a_daemon_restart() {
    let env = Env::new();
    let tools = env.root.path().join("tools.txt");
    std::fs::write(&tools, "keep\ngone\nedit = Old words\n").unwrap();
    let port = free_port();
    env.write_config(
        "ledger",
        &config(
            port,
            &["--era", "2026", "--tools-file", tools.to_str().unwrap()],
            "",
        ),
    );
    let mut d = TestDaemon::start_in(env);
    let first = wait_listed(&d, "ledger", &Value::Null);
    assert_eq!(first["mcp"]["tool_count"], 3);

    // SPEC §15: the change is also an `events` item of kind `tools`.
    let mut events = d.client();
    events.request("events", Some(json!({"names": ["ledger"]})));
    assert!(events.recv()["result"]["subscription_id"].is_u64());

    std::fs::write(&tools, "keep\nedit = New words\nnew\n").unwrap();
    d.result("restart", Some(json!({"name": "ledger"})));
    let s = wait_listed(&d, "ledger", &first["mcp"]["listed_at"]);
    let tools_event = loop {
        let v = events.recv();
        if v["method"] == "event" && v["params"]["kind"] == "tools" {
            break v["params"].clone();
        }
    };
    assert_eq!(
        (
            tools_event["name"].clone(),
            tools_event["from"].clone(),
            tools_event["to"].clone(),
            tools_event["reason"].clone()
        ),
        (
            json!("ledger"),
            json!("3"),
            json!("3"),
            json!("added new; removed gone; changed edit")
        ),
        "{tools_event}"
    );
    drop(events);
    let m = &s["mcp"];
    assert_eq!(m["tools_added"], json!(["new"]), "{m}");
    assert_eq!(m["tools_removed"], json!(["gone"]), "{m}");
    assert_eq!(m["tools_changed"], json!(["edit"]), "{m}");

    let t = d.result("tools", Some(json!({"name": "ledger"})));
    assert_eq!(t["name"], "ledger");
    assert_eq!(
        (
            t["added"].clone(),
            t["removed"].clone(),
            t["changed"].clone()
        ),
        (json!(["new"]), json!(["gone"]), json!(["edit"])),
        "{t}"
    );
    let names = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&t["current"]), ["keep", "edit", "new"]);
    assert_eq!(names(&t["previous"]), ["keep", "gone", "edit"]);
    assert_eq!(t["current"]["tools"][1]["description"], "New words");
    assert_eq!(t["current"]["protocol_version"], "2026-07-28");
    let file = d.env.state_dir().join("tools/ledger.json");
    let ledger: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        ledger["snapshots"].as_array().unwrap().len(),
        2,
        "one snapshot per spawn"
    );

    // xyctl shows the same.
    let xyctl = xy_testbins::locate::bin_of("xy-cli", "xyctl");
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "tools", "ledger"])
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("added: new; removed: gone; changed: edit"),
        "{text}"
    );
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "tools", "ledger", "--json"])
        .env("XY_SOCKET", &d.env.socket)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json, t);
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "status", "ledger"])
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2026-07-28 (era 2026), xy-test-mcp"),
        "{text}"
    );
    assert!(
        text.contains("since the previous start: added: new; removed: gone; changed: edit"),
        "{text}"
    );
    let out = std::process::Command::new(&xyctl)
        .args(["--no-spawn", "list"])
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().next().unwrap().contains("TOOLS"), "{text}");

    // A daemon restart keeps the ledger: `tools` answers from it at once.
    d.terminate();
    let env = d.take_env();
    let d = TestDaemon::start_in(env);
    let again = d.result("tools", Some(json!({"name": "ledger"})));
    assert!(
        again["current"].is_object() && again["previous"].is_object(),
        "{again}"
    );
    // The new spawn adds a third snapshot, unchanged against the second.
    let s = wait_listed(&d, "ledger", &Value::Null);
    assert_eq!(
        (
            s["mcp"]["tools_added"].clone(),
            s["mcp"]["tools_changed"].clone()
        ),
        (json!([]), json!([]))
    );
    // The ledger is written off the actor's thread: poll for it.
    wait_some("the third snapshot on disk", DEADLINE, || {
        let ledger: Value = serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()?;
        (ledger["snapshots"].as_array()?.len() == 3).then_some(())
    });
    assert!(
        d.client()
            .error("tools", Some(json!({"name": "nope"})), -32001)
            .is_object()
    );
}

/// A KDL string literal (quotes and backslashes escaped).
fn kdl_str(s: &str) -> String {
    format!("{s:?}")
}

/// A config running an SDK server (`program args…` with `env`) under an `mcp`
/// probe. Python and node start slower than our own binaries: a start period.
fn sdk_config(program: &Path, args: &[String], env: &[(String, String)], port: u16) -> String {
    let args = args
        .iter()
        .map(|a| kdl_str(a))
        .collect::<Vec<_>>()
        .join(" ");
    let env = env
        .iter()
        .map(|(k, v)| format!("    {k} {}\n", kdl_str(v)))
        .collect::<String>();
    format!(
        "command {}\nargs {args}\nport {port}\nenv {{\n{env}}}\nstop {{\n    grace \"2s\"\n}}\n\
         health {{\n    mcp \"/mcp\"\n    interval \"200ms\"\n    timeout \"2s\"\n    failures 3\n    start-period \"30s\"\n}}\n",
        kdl_str(&program.display().to_string())
    )
}

/// SPEC §12 against servers nobody here wrote, supervised by `xyd`: the Python
/// SDK's dual-era FastMCP server is probed the 2026 way, the TypeScript SDK's
/// `server-everything` (2025 only) the 2025 way; both are healthy and their
/// tools are in the ledger.
#[test]
fn python_and_typescript_sdk_servers_are_healthy_with_the_right_era() {
    use xy_testbins::interop::{self, Interop};
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return skip.announce("python_and_typescript_sdk_servers"),
    };
    let se = match interop::server_everything() {
        Interop::Ready(se) => se,
        Interop::Skip(skip) => return skip.announce("python_and_typescript_sdk_servers"),
    };
    let (ppy, pts) = (free_port(), free_port());
    let (python, py_args) = sdk.fastmcp_command(ppy);
    let (node, ts_args, ts_env) = se.streamable_http_command(pts);
    let d = TestDaemon::start(&[
        ("python", sdk_config(&python, &py_args, &[], ppy)),
        ("everything", sdk_config(&node, &ts_args, &ts_env, pts)),
    ]);
    let slow = Duration::from_secs(120);
    let listed = |name: &str| {
        wait_some(&format!("{name} tools listed"), slow, || {
            let s = status(&d, name);
            (!s["mcp"]["listed_at"].is_null()).then_some(s)
        })
    };
    let s = listed("python");
    assert_eq!(s["health"]["state"], "healthy", "{s}");
    assert_eq!(s["mcp"]["era"], "2026", "{s}");
    assert_eq!(s["mcp"]["protocol_version"], "2026-07-28", "{s}");
    assert_eq!(s["mcp"]["server_name"], "xy-interop-python", "{s}");
    assert_eq!(s["mcp"]["tool_count"], 2, "{s}");
    let tools = d.result("tools", Some(json!({"name": "python"})));
    let names: Vec<&str> = tools["current"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["add", "shout"], "{tools}");

    let s = listed("everything");
    assert_eq!(s["health"]["state"], "healthy", "{s}");
    assert_eq!(s["mcp"]["era"], "2025", "{s}");
    assert!(
        s["mcp"]["protocol_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("2025-")),
        "{s}"
    );
    assert!(s["mcp"]["tool_count"].as_u64().unwrap_or(0) >= 5, "{s}");
    assert_eq!(d.entry("everything")["tool_count"], s["mcp"]["tool_count"]);
}
