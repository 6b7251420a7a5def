//! Issue 27's era matrix against the real `xyd`: the official Python SDK's
//! client in each of its four ways to pick an era (legacy pinned to
//! `2025-06-18`, legacy at `2025-11-25`, `2026-07-28` only, auto) × four
//! stdio children (the rmcp test server 2025-only, dual, 2026-only, and
//! 2026-only exiting on `initialize`), all on one daemon. Each cell lists
//! the tools, calls one, completes an elicitation, a sampling and a roots
//! round trip, receives one list_changed and one log message, subscribes to
//! a resource, and (with a raw HTTP client of the cell's era, since the
//! SDK's client cannot be given the header) sends trace context. The grid
//! is printed. docs/stdio.md's matrix ("What each era gets") is read and
//! every cell it claims is compared with what the run saw: the test fails
//! naming every cell that differs, so the doc and the run cannot drift.

use std::collections::BTreeMap;

use serde_json::Value;
use xy_testbins::interop::{self, Interop};
use xy_testbins::out::err;

use crate::helper::{TestDaemon, free_port, testbin};
use crate::stdio::client::{Era, Mcp};
use crate::stdio::stdio_config;

const DOC: &str = include_str!("../../docs/stdio.md");
/// The line above the matrix in docs/stdio.md.
const DOC_MARK: &str = "<!-- era-matrix: checked by xy-daemon/tests/era_matrix.rs -->";

/// The SDK client's modes (`sdk_matrix.py`), the version each must end up
/// speaking, and the row label in the doc's matrix.
const CLIENTS: [(&str, &str, &str); 4] = [
    ("legacy-2025-06-18", "2025-06-18", "2025, `2025-06-18`"),
    ("legacy", "2025-11-25", "2025, `2025-11-25`"),
    ("2026-07-28", "2026-07-28", "2026-only"),
    ("auto", "2026-07-28", "auto"),
];

/// The children: server name, its `xy-test-mcp` era flags, and the doc's label.
const CHILDREN: [(&str, &[&str], &str); 4] = [
    ("c2025", &["--era", "2025"], "2025-only"),
    ("dual", &["--era", "both"], "dual"),
    (
        "c2026",
        &["--era", "2026", "--refuse-initialize"],
        "2026-only",
    ),
    (
        "c2026-exits",
        &["--era", "2026"],
        "2026-only, exits on `initialize`",
    ),
];

const TOOLS: [&str; 8] = [
    "echo", "elicit", "sample", "roots", "touch", "log", "meta", "watch",
];

/// The features each cell exercises, in the grid's (and the doc's) order.
const FEATURES: [&str; 9] = [
    "tools",
    "calls",
    "elicitation",
    "sampling",
    "roots",
    "list-changed",
    "logging",
    "resources subscribe",
    "trace context",
];

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

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
    out.insert("logging", expect("logging", seen["logged"] == true));
    out.insert(
        "resources subscribe",
        expect("subscribe", seen["subscribed"] == true),
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

/// Trace context through xy for a client of `era`: the `traceparent`
/// header reaches the child's `_meta` (its `meta` tool returns it) and
/// comes back as a response header.
fn trace_context(url: &str, era: Era) -> Result<(), String> {
    let mut c = Mcp::connected(url, era);
    let (heads, reply) = c.request_with(
        "tools/call",
        serde_json::json!({"name": "meta", "arguments": {}}),
        &[("traceparent", TRACEPARENT.to_owned())],
    );
    let back = heads
        .iter()
        .find(|(k, _)| k == "traceparent")
        .map(|(_, v)| v.as_str());
    let text = reply.response()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let meta: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match (
        back == Some(TRACEPARENT),
        meta["traceparent"] == TRACEPARENT,
    ) {
        (true, true) => Ok(()),
        (b, m) => Err(format!(
            "header back: {b}, in the child's _meta: {m} ({:?})",
            reply.response()
        )),
    }
}

/// The doc's matrix: `(client label, child label) → feature → claim`
/// (`✓` works, `✗` does not, `—` not in the client's era).
fn doc_matrix() -> BTreeMap<(String, String), BTreeMap<String, String>> {
    let mut lines = DOC.lines().skip_while(|l| l.trim() != DOC_MARK).skip(1);
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_owned())
            .collect()
    };
    let head = cells(
        lines
            .next()
            .expect("the matrix's header row under its mark"),
    );
    let want: Vec<String> = ["client", "child"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain(FEATURES.iter().map(|s| (*s).to_owned()))
        .collect();
    assert_eq!(head, want, "docs/stdio.md's matrix columns");
    lines.next().expect("the separator row");
    let mut out = BTreeMap::new();
    for l in lines.take_while(|l| l.trim_start().starts_with('|')) {
        let row = cells(l);
        let claims = FEATURES
            .iter()
            .zip(&row[2..])
            .map(|(f, c)| ((*f).to_owned(), c.clone()))
            .collect();
        out.insert((row[0].clone(), row[1].clone()), claims);
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
        .map(|((name, era, _), port)| {
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
    for (name, _, _) in CHILDREN {
        d.running_pid(name);
    }
    let servers: Vec<(&str, String)> = CHILDREN
        .iter()
        .zip(&ports)
        .map(|((name, _, _), port)| (*name, format!("http://127.0.0.1:{port}/mcp")))
        .collect();
    let modes: Vec<&str> = CLIENTS.iter().map(|(m, _, _)| *m).collect();
    let (python, args) = sdk.matrix_command(&modes, &servers);
    // The raw trace-context checks run while the SDK's clients do.
    let (out, traced) = std::thread::scope(|s| {
        let traced = s.spawn(|| {
            let mut t = BTreeMap::new();
            for (name, url) in &servers {
                for era in [Era::V2025, Era::V2026] {
                    t.insert((*name, era == Era::V2026), trace_context(url, era));
                }
            }
            t
        });
        let out = std::process::Command::new(&python)
            .args(&args)
            .output()
            .expect("python runs");
        (out, traced.join().expect("the trace-context checks"))
    });
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

    let doc = doc_matrix();
    let mut failures = Vec::new();
    err("=== era matrix: client mode (version) × child; ok, or the features that did not work ===");
    err(&format!(
        "{:<32} {}",
        "client \\ child",
        CHILDREN
            .iter()
            .map(|(c, _, _)| format!("{c:<24} "))
            .collect::<String>()
    ));
    for (mode, version, client_label) in CLIENTS {
        let mut row = format!("{:<32} ", format!("{mode} ({version})"));
        for (child, _, child_label) in CHILDREN {
            let Some(v) = seen.get(&(mode.to_owned(), child.to_owned())) else {
                failures.push(format!("{mode} × {child}: no result"));
                row.push_str(&format!("{:<24} ", "no result"));
                continue;
            };
            let mut judged = judge(mode, version, v);
            judged.insert(
                "trace context",
                traced[&(child, version.starts_with("2026"))].clone(),
            );
            let bad: Vec<&str> = FEATURES
                .iter()
                .copied()
                .filter(|f| judged[f].is_err())
                .collect();
            let cell = if bad.is_empty() {
                "ok".to_owned()
            } else {
                bad.join(",")
            };
            row.push_str(&format!("{cell:<24} "));
            // What the doc claims for this cell, against the run.
            let key = (client_label.to_owned(), child_label.to_owned());
            let Some(claims) = doc.get(&key) else {
                failures.push(format!(
                    "{mode} × {child}: docs/stdio.md's matrix has no row {key:?}"
                ));
                continue;
            };
            for f in FEATURES {
                let claim = claims.get(f).map_or("(none)", String::as_str);
                let ok = judged[f].is_ok();
                let agrees = match claim {
                    "✓" => ok,
                    "✗" => !ok,
                    "—" => !ok && version.starts_with("2026"),
                    _ => false,
                };
                if !agrees {
                    let saw = match &judged[f] {
                        Ok(()) => "it works".to_owned(),
                        Err(e) => format!("it failed: {e}"),
                    };
                    failures.push(format!(
                        "{mode} × {child}: {f}: the doc says {claim}, {saw}"
                    ));
                }
            }
        }
        err(&row);
    }
    if doc.len() != CLIENTS.len() * CHILDREN.len() {
        failures.push(format!(
            "docs/stdio.md's matrix has {} rows, the run 16",
            doc.len()
        ));
    }
    // xy never sends `initialize` to a 2026-only child: the one that
    // would exit on it never restarted.
    let restarts = d.entry("c2026-exits")["restart_count"].clone();
    if restarts != 0 {
        failures.push(format!("c2026-exits restarted {restarts} times"));
    }
    assert!(
        failures.is_empty(),
        "{} cells differ from docs/stdio.md's matrix:\n{}",
        failures
            .iter()
            .filter_map(|f| f.split(':').next())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        failures.join("\n")
    );
}
