//! Issue 27's era matrix against the real `xyd`: the official Python SDK's
//! client in each of its four ways to pick an era (legacy pinned to
//! `2025-06-18`, legacy at `2025-11-25`, `2026-07-28` only, auto) × four
//! stdio children (the rmcp test server 2025-only, dual, 2026-only, and
//! 2026-only exiting on `initialize`), all on one daemon. Each cell lists
//! the tools, calls one, completes an elicitation, a sampling and a roots
//! round trip and receives one list_changed. The grid is printed; the test
//! fails naming every failing cell and what failed in it.

use std::collections::BTreeMap;

use serde_json::Value;
use xy_testbins::interop::{self, Interop};
use xy_testbins::out::err;

use crate::helper::{TestDaemon, free_port, testbin};
use crate::stdio::stdio_config;

/// The SDK client's modes (`sdk_matrix.py`) and the version each must
/// end up speaking.
const CLIENTS: [(&str, &str); 4] = [
    ("legacy-2025-06-18", "2025-06-18"),
    ("legacy", "2025-11-25"),
    ("2026-07-28", "2026-07-28"),
    ("auto", "2026-07-28"),
];

/// The children: server name and its `xy-test-mcp` era flags.
const CHILDREN: [(&str, &[&str]); 4] = [
    ("c2025", &["--era", "2025"]),
    ("dual", &["--era", "both"]),
    ("c2026", &["--era", "2026", "--refuse-initialize"]),
    ("c2026-exits", &["--era", "2026"]),
];

const TOOLS: [&str; 5] = ["echo", "elicit", "sample", "roots", "touch"];

/// The features each cell exercises, in the grid's order.
const FEATURES: [&str; 6] = [
    "tools",
    "calls",
    "elicitation",
    "sampling",
    "roots",
    "list-changed",
];

/// What one cell saw, judged feature by feature: `Ok(())` or what was
/// wrong.
fn judge(mode: &str, version: &str, seen: &Value) -> BTreeMap<&'static str, Result<(), String>> {
    let errors = &seen["errors"];
    let why = |step: &str, what: String| match errors.get(step) {
        Some(e) => Err(format!("{what}: {e}")),
        None => Err(what),
    };
    let text = |step: &str| -> String {
        seen[step]
            .as_array()
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut out = BTreeMap::new();
    let connected = if let Some(e) = errors.get("connect") {
        Err(format!("connect: {e}"))
    } else if seen["protocol_version"] != version {
        Err(format!("speaks {} not {version}", seen["protocol_version"]))
    } else {
        Ok(())
    };
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.insert(
        "tools",
        connected.clone().and_then(|()| {
            if TOOLS.iter().all(|t| tools.contains(t)) {
                Ok(())
            } else {
                why("tools", format!("listed {tools:?}"))
            }
        }),
    );
    let expect = |step: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            why(step, format!("got {}", seen[step]))
        }
    };
    out.insert(
        "calls",
        expect("echo", text("echo") == format!("hi {mode}")),
    );
    out.insert(
        "elicitation",
        expect(
            "elicit",
            text("elicit") == format!("answers: py-{mode}")
                && seen["asked"] == serde_json::json!(["Round 1: your answer?"]),
        ),
    );
    out.insert(
        "sampling",
        expect("sample", text("sample") == "sampled: hello"),
    );
    out.insert(
        "roots",
        expect("roots", text("roots").contains("file:///matrix")),
    );
    out.insert(
        "list-changed",
        expect("list_changed", seen["list_changed"] == true),
    );
    if connected.is_err() {
        for v in out.values_mut() {
            if v.is_ok() {
                *v = connected.clone();
            }
        }
    }
    out
}

#[test]
fn every_client_era_reaches_every_child_era() {
    let test = "every_client_era_reaches_every_child_era";
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => return skip.announce(test),
    };
    let ports: Vec<u16> = CHILDREN.iter().map(|_| free_port()).collect();
    let configs: Vec<(&str, String)> = CHILDREN
        .iter()
        .zip(&ports)
        .map(|((name, era), port)| {
            let mut args: Vec<String> = vec!["--stdio".into(), "--tools".into(), TOOLS.join(",")];
            args.extend(era.iter().map(|s| (*s).to_owned()));
            // The children share tool names: the firewall would hold all
            // but the first server's back as shadowing.
            let extra = "firewall {\n    mode \"off\"\n}\n";
            (
                *name,
                stdio_config(&testbin("xy-test-mcp"), &args, *port, extra),
            )
        })
        .collect();
    let d = TestDaemon::start(&configs);
    for (name, _) in CHILDREN {
        d.running_pid(name);
    }
    let servers: Vec<(&str, String)> = CHILDREN
        .iter()
        .zip(&ports)
        .map(|((name, _), port)| (*name, format!("http://127.0.0.1:{port}/mcp")))
        .collect();
    let modes: Vec<&str> = CLIENTS.iter().map(|(m, _)| *m).collect();
    let (python, args) = sdk.matrix_command(&modes, &servers);
    let out = std::process::Command::new(&python)
        .args(&args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "sdk_matrix.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen: BTreeMap<(String, String), Value> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let key = (
            v["mode"].as_str().unwrap_or("?").to_owned(),
            v["server"].as_str().unwrap_or("?").to_owned(),
        );
        seen.insert(key, v);
    }

    let mut failures = Vec::new();
    err("=== era matrix: client mode (version) × child; ok, or the features that failed ===");
    err(&format!(
        "{:<32} {}",
        "client \\ child",
        CHILDREN
            .iter()
            .map(|(c, _)| format!("{c:<24}"))
            .collect::<String>()
    ));
    for (mode, version) in CLIENTS {
        let mut row = format!("{:<32} ", format!("{mode} ({version})"));
        for (child, _) in CHILDREN {
            let cell = match seen.get(&(mode.to_owned(), child.to_owned())) {
                None => {
                    failures.push(format!("{mode} × {child}: no result"));
                    "no result".to_owned()
                }
                Some(v) => {
                    let judged = judge(mode, version, v);
                    let bad: Vec<&str> = FEATURES
                        .iter()
                        .copied()
                        .filter(|f| judged[f].is_err())
                        .collect();
                    for f in &bad {
                        failures.push(format!(
                            "{mode} × {child}: {f}: {}",
                            judged[f].clone().unwrap_err()
                        ));
                    }
                    if bad.is_empty() {
                        "ok".to_owned()
                    } else {
                        bad.join(",")
                    }
                }
            };
            row.push_str(&format!("{cell:<24} "));
        }
        err(&row);
    }
    // xy never sends `initialize` to a 2026-only child: the one that
    // would exit on it never restarted.
    let restarts = d.entry("c2026-exits")["restart_count"].clone();
    if restarts != 0 {
        failures.push(format!("c2026-exits restarted {restarts} times"));
    }
    assert!(
        failures.is_empty(),
        "{} of 16 cells failed:\n{}",
        failures
            .iter()
            .filter_map(|f| f.split(':').next())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        failures.join("\n")
    );
}
