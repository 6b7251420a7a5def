//! SPEC §19: the official MCP conformance suite (`@modelcontextprotocol/
//! conformance`, server scenarios) against one server's code served two
//! ways: over HTTP by its own SDK (the reference) and as a stdio child
//! behind xy. For `--spec-version 2025-11-25` and `--requirements
//! 2026-07-28`, every check that passes against the reference must pass
//! through xy, except the known gaps listed in [`KNOWN_GAPS`] (what is
//! left of issue 27). The
//! per-check table is printed. Needs the interop cache (Node 22, the suite,
//! the TypeScript SDK): skipped loudly without a registry.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use xy_testbins::interop::{self, Conformance, Interop};
use xy_testbins::out::err;

use crate::helper::{DEADLINE, TestDaemon, free_port, port_answers, wait_for};

/// Checks allowed to pass against the reference and fail through xy, as
/// `(server under test, "scenario/check-id" prefix)` (`""`: any server).
/// None are left of issue 27: a 2026 child's elicitation and sampling
/// reach 2025 clients (D113, D126; the Python server asks through its
/// SDK's era-agnostic `Resolve` markers, D128), and a malformed MRTR retry
/// is refused by xy before the firewall or the child (D129). An entry
/// added here is printed whenever it is used, so none hides.
const KNOWN_GAPS: &[(&str, &str)] = &[];

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

fn known_gap(sut: &str, key: &str) -> bool {
    KNOWN_GAPS
        .iter()
        .any(|(who, prefix)| (who.is_empty() || *who == sut) && key.starts_with(prefix))
}

/// A server under test: the commands serving it over HTTP on a port (the
/// reference) and on stdio (behind xy).
struct Sut {
    name: &'static str,
    http: (std::path::PathBuf, Vec<String>),
    stdio: (std::path::PathBuf, Vec<String>),
    ref_port: u16,
}

/// Runs both selections against `sut` both ways; returns the regressions
/// (not allow-listed) and the allow-listed gaps, printing the table.
fn compare(c: &Conformance, sut: &Sut) -> (Vec<String>, Vec<String>) {
    let (program, args) = &sut.http;
    let _reference = Killed(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the reference server"),
    );
    let ref_port = sut.ref_port;
    wait_for("the reference server to listen", DEADLINE, || {
        port_answers(ref_port)
    });
    let port = free_port();
    let (node, args) = &sut.stdio;
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
        format!("http://127.0.0.1:{ref_port}/mcp"),
        format!("http://127.0.0.1:{port}/mcp"),
    ];
    let mut regressions = Vec::new();
    let mut gaps = Vec::new();
    for selection in [
        ["--spec-version", "2025-11-25"],
        ["--requirements", "2026-07-28"],
    ] {
        let [ref_results, xy_results] = urls.each_ref().map(|url| {
            let out = tempfile::tempdir().unwrap();
            run_suite(c, url, &selection, out.path())
        });
        let what = format!("{} {}", sut.name, selection.join(" "));
        err(&format!(
            "=== conformance, {what} ({} checks) ===",
            ref_results.len()
        ));
        err(&format!("{:<10} {:<10} check", "reference", "via xy"));
        let (mut both, mut ref_only, mut xy_only) = (0, 0, 0);
        for (key, r) in &ref_results {
            let x = xy_results.get(key).map_or("(absent)", String::as_str);
            err(&format!("{r:<10} {x:<10} {key}"));
            match (passed(r), passed(x)) {
                (true, true) => both += 1,
                (true, false) => {
                    ref_only += 1;
                    let row = format!("{what} {key}: reference {r}, via xy {x}");
                    if known_gap(sut.name, key) {
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
            "{what}: passing both ways {both}, only against the reference {ref_only}, only through xy {xy_only}"
        ));
    }
    (regressions, gaps)
}

#[test]
fn every_check_the_reference_passes_passes_through_xy() {
    let test = "every_check_the_reference_passes_passes_through_xy";
    let c = match interop::conformance() {
        Interop::Ready(c) => c,
        Interop::Skip(skip) => return skip.announce(test),
    };
    let py = match interop::python_sdk() {
        Interop::Ready(py) => py,
        Interop::Skip(skip) => return skip.announce(test),
    };
    let (ts_port, py_port) = (free_port(), free_port());
    let suts = [
        Sut {
            name: "typescript-sdk",
            http: c.server_http_command(ts_port),
            stdio: c.server_stdio_command(),
            ref_port: ts_port,
        },
        Sut {
            name: "python-sdk",
            http: py.conformance_http_command(py_port),
            stdio: py.conformance_stdio_command(),
            ref_port: py_port,
        },
    ];
    let mut regressions = Vec::new();
    let mut gaps = Vec::new();
    for sut in &suts {
        let (r, g) = compare(&c, sut);
        regressions.extend(r);
        gaps.extend(g);
    }
    for g in &gaps {
        err(&format!(
            "KNOWN GAP (allow-listed, what is left of issue 27): {g}"
        ));
    }
    assert!(
        regressions.is_empty(),
        "checks that pass against the reference and fail through xy:\n{}",
        regressions.join("\n")
    );
}
