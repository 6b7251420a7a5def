//! SPEC §17 end to end: `xyctl mcp` driven by the official Python SDK's
//! stdio client in both eras, against a real `xyd` (detect-or-spawn) on a
//! temporary HOME: the tool list, the status and logs of a crash-looping
//! server, a refused restart, and a restart that changes the pid.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use xy_testbins::locate::free_port;

use serde_json::{Value, json};

mod support;

use support::{Home, XYCTL, wait_for};

#[test]
fn an_agent_reads_a_crash_loop_and_restarts_only_what_it_may_in_both_eras() {
    use xy_testbins::interop::{self, Interop};
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return skip.announce("xyctl_mcp_both_eras"),
    };
    let h = Home::new("xym");
    // Crash-loops on a missing secret until the restart budget is spent.
    h.write_config(
        "crashy",
        &format!(
            "command \"/bin/sh\"\nargs \"-c\" \"echo starting; echo 'Error: missing API_TOKEN' >&2; exit 1\"\n\
             port {}\nrestart {{\n    backoff-initial \"100ms\"\n    max-retries-per-minute 2\n}}\n",
            free_port()
        ),
    );
    let sleeper = xy_testbins::locate::testbin("xy-test-sleep");
    h.write_config(
        "web",
        &format!(
            "command \"{}\"\nargs \"--interval-ms\" \"1000\"\nport {}\nstop {{\n    grace \"2s\"\n}}\n\
             agent {{\n    allow-restart #true\n}}\n",
            sleeper.display(),
            free_port()
        ),
    );
    // Detect-or-spawn through `xyctl mcp` itself would work too; starting
    // the daemon first lets the crash loop reach `failed` before we look.
    assert!(
        h.cmd(&["daemon", "start"])
            .output()
            .unwrap()
            .status
            .success()
    );
    wait_for("crashy failed", Duration::from_secs(60), || {
        h.state_of("crashy").as_deref() == Some("failed")
    });
    wait_for("web running", Duration::from_secs(30), || {
        h.state_of("web").as_deref() == Some("running")
    });

    let calls = json!([
        ["list_servers", {}],
        ["server_status", {"name": "crashy"}],
        ["server_logs", {"name": "crashy", "tail": 2, "grep": "api_token"}],
        ["restart_server", {"name": "crashy"}],
        ["server_status", {"name": "web"}],
        ["restart_server", {"name": "web"}],
        ["server_logs", {"name": "nope"}],
        ["server_logs", {"name": "web", "tail": 0}],
    ]);
    for (mode, want_version) in [("legacy", "2025-"), ("auto", "2026-07-28")] {
        let (python, args) = sdk.calls_command(mode, &calls, &[XYCTL.to_owned(), "mcp".into()]);
        let mut c = Command::new(python);
        c.args(&args);
        c.env_clear().envs(h.env()).stdin(Stdio::null());
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stdout}\n{stderr}");
        let seen: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{mode}: {e}: {stdout}\n{stderr}"));
        let ctx = format!("{mode}: {seen:#}");
        assert!(
            seen["protocol_version"]
                .as_str()
                .is_some_and(|v| v.starts_with(want_version)),
            "{ctx}"
        );

        // The control tools are offered, naming only the server that allows them.
        let tools = tool_names(&seen["tools"]);
        assert_eq!(
            tools,
            [
                "list_servers",
                "server_status",
                "server_logs",
                "server_tools",
                "restart_server",
                "start_server"
            ],
            "{ctx}"
        );
        let restart_doc = seen["tools"][4]["description"].as_str().unwrap();
        assert!(
            restart_doc.contains("Allowed only for: web.") && !restart_doc.contains("crashy"),
            "{ctx}"
        );

        let r = &seen["results"];
        // list_servers: every server, with the RPC's fields.
        assert_eq!(r[0]["is_error"], false, "{ctx}");
        let servers = r[0]["structured"]["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 2, "{ctx}");
        assert_eq!(servers[0]["name"], "crashy", "{ctx}");
        assert_eq!(servers[0]["state"], "failed", "{ctx}");
        assert_eq!(servers[1]["agent_allow_restart"], true, "{ctx}");
        // Issue 26: and why the crash-looping one is down.
        let down = &r[0]["structured"]["down"];
        assert_eq!(down[0]["name"], "crashy", "{ctx}");
        assert!(
            down[0]["why"]
                .as_str()
                .is_some_and(|w| w.contains("Error: missing API_TOKEN")),
            "{ctx}"
        );
        assert!(
            r[0]["text"]
                .as_str()
                .unwrap()
                .contains("crashy: exited immediately with code 1"),
            "{ctx}"
        );

        // server_status: the explanation carries the last stderr line.
        assert_eq!(r[1]["is_error"], false, "{ctx}");
        let explain = r[1]["structured"]["explain"].as_str().unwrap_or_default();
        assert!(explain.contains("Error: missing API_TOKEN"), "{ctx}");
        assert!(
            r[1]["text"]
                .as_str()
                .unwrap()
                .contains("Error: missing API_TOKEN"),
            "{ctx}"
        );
        assert_eq!(r[1]["structured"]["state"], "failed", "{ctx}");
        assert_eq!(r[1]["structured"]["agent_allow_restart"], false, "{ctx}");

        // server_logs: filtered (any case), then the last `tail` of those.
        assert_eq!(r[2]["is_error"], false, "{ctx}");
        let lines = r[2]["structured"]["lines"].as_array().unwrap();
        assert_eq!(lines.len(), 2, "{ctx}");
        for l in lines {
            assert_eq!(l["line"], "Error: missing API_TOKEN", "{ctx}");
            assert_eq!(l["stream"], "stderr", "{ctx}");
        }
        assert!(
            r[2]["text"]
                .as_str()
                .unwrap()
                .contains("[err] Error: missing API_TOKEN"),
            "{ctx}"
        );

        // restart_server on a server without allow-restart: refused, saying how.
        assert_eq!(r[3]["is_error"], true, "{ctx}");
        let why = r[3]["text"].as_str().unwrap();
        assert!(
            why.contains("agent { allow-restart #true }") && why.contains("crashy.kdl"),
            "{ctx}"
        );

        // restart_server on one that allows it: a new pid.
        assert_eq!(r[4]["is_error"], false, "{ctx}");
        let before = r[4]["structured"]["pid"].as_u64().expect("web has a pid");
        assert_eq!(r[5]["is_error"], false, "{ctx}");
        assert_eq!(r[5]["structured"]["restarted"], json!(["web"]), "{ctx}");
        let after = r[5]["structured"]["server"]["pid"]
            .as_u64()
            .expect("web has a pid after the restart");
        assert_ne!(before, after, "{ctx}");
        assert!(
            r[5]["text"].as_str().unwrap().contains(&after.to_string()),
            "{ctx}"
        );

        // An unknown name lists the known ones; a bad tail says the bounds.
        assert_eq!(r[6]["is_error"], true, "{ctx}");
        assert!(
            r[6]["text"]
                .as_str()
                .unwrap()
                .contains("Known servers: crashy, web."),
            "{ctx}"
        );
        assert_eq!(r[7]["is_error"], true, "{ctx}");
        assert!(
            r[7]["text"].as_str().unwrap().contains("at least 1"),
            "{ctx}"
        );
    }
    // The crash-looping server was never touched.
    assert_eq!(h.state_of("crashy").as_deref(), Some("failed"));
}

#[test]
fn without_allow_restart_no_control_tools_are_listed() {
    let h = Home::new("xym");
    let sleeper = xy_testbins::locate::testbin("xy-test-sleep");
    h.write_config(
        "quiet",
        &format!(
            "command \"{}\"\nport {}\nstop {{\n    grace \"2s\"\n}}\n",
            sleeper.display(),
            free_port()
        ),
    );
    // Raw newline-delimited MCP (2025 handshake), xyd started on demand.
    let mut c = Command::new(XYCTL);
    c.arg("mcp");
    c.env_clear().envs(h.env()).stdin(Stdio::null());
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""name":"xy""#), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let names = tool_names(&v["result"]["tools"]);
    assert_eq!(
        names,
        [
            "list_servers",
            "server_status",
            "server_logs",
            "server_tools"
        ]
    );
    // A control tool called anyway is refused for this server, with the fix.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"start_server","arguments":{{"name":"quiet"}}}}}}"#
    )
    .unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["result"]["isError"], true, "{line}");
    assert!(line.contains("allow-restart #true"), "{line}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "xyctl mcp exits 0 when stdin closes");
}

/// The sample client files (`tests/data/clients/`).
fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/clients")
        .join(name)
}

#[test]
fn clients_apply_with_xy_adds_xyctl_mcp_and_undo_restores() {
    let h = Home::new("xym");
    let xyctl = std::fs::canonicalize(XYCTL).unwrap();
    let xyctl = xyctl.display().to_string();
    let work = tempfile::tempdir().unwrap();
    for (client, file, want) in [
        (
            "claude-desktop",
            "claude_desktop_config.json",
            format!(
                "\"xy\": {{\n      \"command\": \"{xyctl}\",\n      \"args\": [\"mcp\"]\n    }}"
            ),
        ),
        (
            "vscode",
            "vscode-mcp.json",
            format!(
                "\"xy\": {{\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"{xyctl}\",\n\t\t\t\"args\": [\"mcp\"],\n\t\t}}"
            ),
        ),
        (
            "codex",
            "codex-config.toml",
            format!("[mcp_servers.xy]\ncommand = \"{xyctl}\"\nargs = [\"mcp\"]\n"),
        ),
    ] {
        let path = work.path().join(file);
        std::fs::copy(sample(file), &path).unwrap();
        let original = std::fs::read_to_string(&path).unwrap();
        let p = path.to_str().unwrap();
        let run = |args: &[&str]| {
            let out = h.cmd(args).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{client} {args:?}: {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            text
        };

        let diff = run(&[
            "clients",
            "apply",
            client,
            "--file",
            p,
            "--with-xy",
            "--dry-run",
        ]);
        assert!(diff.contains(&format!("\"{xyctl}\"")), "{client}: {diff}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original,
            "{client}: dry run wrote"
        );

        let out = run(&["clients", "apply", client, "--file", p, "--with-xy"]);
        assert!(out.contains("added"), "{client}: {out}");
        let applied = std::fs::read_to_string(&path).unwrap();
        assert!(applied.contains(&want), "{client}:\n{applied}");
        // Everything that was there is still there (only lines were added).
        for line in original.lines() {
            assert!(applied.contains(line), "{client}: lost {line:?}\n{applied}");
        }
        // The client's own reader sees the entry; applying again is a no-op.
        let again = run(&["clients", "apply", client, "--file", p, "--with-xy"]);
        assert!(again.starts_with("nothing to change"), "{client}: {again}");

        run(&["clients", "undo", client, "--file", p]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original,
            "{client}: undo"
        );
    }
    // A file with no servers object at all gets one.
    let empty = work.path().join("empty.json");
    std::fs::write(&empty, "{}\n").unwrap();
    let out = h
        .cmd(&[
            "clients",
            "apply",
            "cursor",
            "--file",
            empty.to_str().unwrap(),
            "--with-xy",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&empty).unwrap()).unwrap();
    assert_eq!(v["mcpServers"]["xy"]["command"], xyctl.as_str());
    assert_eq!(v["mcpServers"]["xy"]["args"], json!(["mcp"]));
}

/// The names of a `tools/list` result's tools, in order.
fn tool_names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .expect("tools is an array")
        .iter()
        .map(|t| t["name"].as_str().expect("a tool has a name"))
        .collect()
}
