//! SPEC §19: the official MCP conformance suite (`@modelcontextprotocol/
//! conformance`, server scenarios) against one server's code served two
//! ways: over HTTP by its own SDK (the reference) and as a stdio child
//! behind xy. For `--spec-version 2025-11-25` and `--requirements
//! 2026-07-28`, every check that passes against the reference must pass
//! through xy, except the known gaps listed in [`KNOWN_GAPS`] (work of
//! another part of issue 27, which the lead shrinks as it lands). The
//! per-check table is printed. Needs the interop cache (Node 22, the suite,
//! the TypeScript SDK): skipped loudly without a registry.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use xy_testbins::interop::{self, Conformance, Interop};
use xy_testbins::out::err;

use crate::helper::{DEADLINE, TestDaemon, free_port, port_answers, wait_for};

/// Checks allowed to pass against the reference and fail through xy, as
/// `scenario/check-id` prefixes: MRTR (`input-required-result-*`),
/// capability-faithful sharing (`-32021`) and the tasks extension are
/// another helper's part of issue 27. Printed when used, so none hides.
const KNOWN_GAPS: &[&str] = &[
    "input-required-result-",
    "tasks-",
    "server-stateless/sep-2575-server-rejects-undeclared-capability",
    "server-stateless/sep-2575-missing-capability-http-400",
];

/// One check's outcome, keyed `scenario/id/name#n` (a scenario may emit
/// one id several times).
type Results = BTreeMap<String, String>;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the suite's `selection` against `url` in one invocation and reads
/// every scenario's `checks.json`.
fn run_suite(c: &Conformance, url: &str, selection: &[&str], out: &Path) -> Results {
    let (node, args) = c.suite_command(url, selection, out);
    // Its exit status says whether everything passed, which nothing here
    // expects: the checks are compared one by one.
    let status = Command::new(node)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running the conformance suite");
    assert!(status.code().is_some(), "the suite was killed: {status}");
    let mut results = Results::new();
    for entry in std::fs::read_dir(out).expect("the suite's output dir") {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // `server-<scenario>-<YYYY-MM-DDTHH-MM-SS-mmmZ>`
        let scenario = name
            .strip_prefix("server-")
            .and_then(|s| s.get(..s.len().saturating_sub(25)))
            .unwrap_or(&name)
            .to_owned();
        let Ok(text) = std::fs::read_to_string(dir.join("checks.json")) else {
            results.insert(format!("{scenario}/(no checks.json)"), "FAILURE".to_owned());
            continue;
        };
        let checks: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for check in checks {
            let id = format!(
                "{scenario}/{}/{}",
                check["id"].as_str().unwrap_or("?"),
                check["name"].as_str().unwrap_or("?")
            );
            let n = seen.entry(id.clone()).or_default();
            *n += 1;
            let status = check["status"].as_str().unwrap_or("?").to_owned();
            results.insert(format!("{id}#{n}"), status);
        }
    }
    assert!(
        !results.is_empty(),
        "the suite wrote no results to {}",
        out.display()
    );
    results
}

/// A check that did not fail: `SUCCESS`, or `INFO` (the suite's note that
/// the server took a legitimate alternative, e.g. a JSON answer where SSE
/// is optional).
fn passed(status: &str) -> bool {
    matches!(status, "SUCCESS" | "INFO")
}

fn known_gap(key: &str) -> bool {
    KNOWN_GAPS.iter().any(|g| key.starts_with(g))
}

#[test]
fn every_check_the_reference_passes_passes_through_xy() {
    let c = match interop::conformance() {
        Interop::Ready(c) => c,
        Interop::Skip(skip) => {
            return skip.announce("every_check_the_reference_passes_passes_through_xy");
        }
    };
    let ref_port = free_port();
    let (node, args) = c.server_http_command(ref_port);
    let _reference = Killed(
        Command::new(node)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the reference server"),
    );
    wait_for("the reference server to listen", DEADLINE, || {
        port_answers(ref_port)
    });
    let port = free_port();
    let (node, args) = c.server_stdio_command();
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    let config = format!(
        "command {:?}\nargs {args}\ntransport \"stdio\"\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
        node.display().to_string()
    );
    let d = TestDaemon::start(&[("conformance", config)]);
    d.running_pid("conformance");
    let urls = [
        ("reference", format!("http://127.0.0.1:{ref_port}/mcp")),
        ("xy", format!("http://127.0.0.1:{port}/mcp")),
    ];
    let mut regressions = Vec::new();
    let mut gaps = Vec::new();
    for selection in [
        ["--spec-version", "2025-11-25"],
        ["--requirements", "2026-07-28"],
    ] {
        let [reference, via_xy] = urls.each_ref().map(|(who, url)| {
            let out = tempfile::tempdir().unwrap();
            let r = run_suite(&c, url, &selection, out.path());
            (who, r)
        });
        let (ref_results, xy_results) = (&reference.1, &via_xy.1);
        err(&format!(
            "=== conformance {} ({} checks) ===",
            selection.join(" "),
            ref_results.len()
        ));
        err(&format!("{:<10} {:<10} check", "reference", "via xy"));
        let (mut both, mut ref_only, mut xy_only) = (0, 0, 0);
        for (key, r) in ref_results {
            let x = xy_results.get(key).map_or("(absent)", String::as_str);
            err(&format!("{r:<10} {x:<10} {key}"));
            match (passed(r), passed(x)) {
                (true, true) => both += 1,
                (true, false) => {
                    ref_only += 1;
                    let row = format!("{} {key}: reference {r}, via xy {x}", selection.join(" "));
                    if known_gap(key) {
                        gaps.push(row);
                    } else {
                        regressions.push(row);
                    }
                }
                (false, true) => xy_only += 1,
                (false, false) => {}
            }
        }
        for key in xy_results.keys().filter(|k| !ref_results.contains_key(*k)) {
            err(&format!("{:<10} {:<10} {key}", "(absent)", xy_results[key]));
        }
        err(&format!(
            "passing both ways {both}, only against the reference {ref_only}, only through xy {xy_only}"
        ));
    }
    for g in &gaps {
        err(&format!(
            "KNOWN GAP (allow-listed, issue 27 MRTR/capabilities/tasks): {g}"
        ));
    }
    assert!(
        regressions.is_empty(),
        "checks that pass against the reference and fail through xy:\n{}",
        regressions.join("\n")
    );
}
