//! Issue 31: the official conformance suite's client authorization
//! scenarios (`conformance client --suite auth` plus the ones the
//! 2026-07-28 revision adds) with xy as the client, end to end: one real
//! `xyd` for the whole run, and per scenario the suite runs
//! `conformance_auth_client.py <server url>`, which writes a server file
//! (`url` + `auth { oauth }`, its own port) and `xyctl reload`s, logs in
//! with `xyctl auth login --no-browser` (following the printed URL as a
//! browser would), makes the MCP calls through xy's port, logs in again on
//! `login needed` (three logins at most), and removes the server again.
//! The suite runs several scenarios at once, so their reloads overlap.
//! `xy.kdl` sets the Client ID Metadata Document URL the suite's CIMD
//! scenario expects. Every failure outside [`KNOWN_GAPS`] fails the test.
//! Needs the interop cache (Node 22 and the suite): skipped loudly without.

use std::path::Path;

use xy_testbins::interop::{self, Interop};
use xy_testbins::out::err;

use crate::helper::{Env, TestDaemon};

/// The document URL the suite's CIMD scenario expects a client to use.
const SUITE_CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Scenarios xy is known to fail, with why; printed when hit. The same as
/// the broker alone (`xy-actors/src/oauth/conformance.rs`): none of them
/// is in the 2025-11-25 or 2026-07-28 sets xy supports.
const KNOWN_GAPS: &[(&str, &str)] = &[
    // The 2025-03-26 fallbacks xy refuses on purpose (D119).
    (
        "auth/2025-03-26-oauth-endpoint-fallback",
        "no guessed endpoints (D119)",
    ),
];

#[test]
fn conformance_client_auth_scenarios_through_xyd() {
    let suite = match interop::conformance() {
        Interop::Ready(c) => c,
        Interop::Skip(skip) => {
            return skip.announce("conformance_client_auth_scenarios_through_xyd");
        }
    };
    if interop::which("python3").is_none() {
        err(
            "SKIP conformance_client_auth_scenarios_through_xyd: no python3 for the client wrapper",
        );
        return;
    }
    let env = Env::new();
    env.write_settings(&format!(
        "gateway {{\n    port 0\n}}\noauth-client-metadata-url {SUITE_CIMD_URL:?}\n"
    ));
    let config_dir = env.config_dir();
    let socket = env.socket.clone();
    let d = TestDaemon::start_in_with(env, &[("XY_AUTH_STORE", "file".into())]);
    let log = d.env.root.path().join("wrapper.log");
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance_auth_client.py");
    let xyctl = xy_testbins::locate::bin_of("xy-cli", "xyctl");
    let out = d.env.root.path().join("out");
    let started = std::time::Instant::now();
    let results = suite.run_client_auth(
        &format!("python3 {}", wrapper.display()),
        &[
            ("XY_XYCTL", xyctl.display().to_string()),
            ("XY_SOCKET", socket.display().to_string()),
            ("XY_CONFIG_DIR", config_dir.display().to_string()),
            ("XY_WRAPPER_LOG", log.display().to_string()),
        ],
        &out,
    );
    err(&format!(
        "the suite took {:.0}s through xyd",
        started.elapsed().as_secs_f64()
    ));
    assert!(
        results.len() >= 14 + interop::CLIENT_AUTH_SCENARIOS_2026.len(),
        "only {} scenarios ran",
        results.len()
    );
    let unexpected = interop::report_client_results("through xyd", &results, KNOWN_GAPS);
    let wrapper_log = std::fs::read_to_string(&log).unwrap_or_default();
    err(&format!(
        "reloads refused and tried again: {}",
        wrapper_log.matches("xyctl reload (attempt").count()
    ));
    if !unexpected.is_empty() {
        err("the wrapper's log:");
        err(&wrapper_log);
    }
    assert!(unexpected.is_empty(), "unexpected failures: {unexpected:?}");
    // Step-up went through a second login, prompted by xy's answer.
    assert!(
        wrapper_log.contains("[auth/scope-step-up via xyd] login 2: xy: login needed"),
        "{wrapper_log}"
    );
    // A missing CIMD URL is only a warning to the suite: the setting from
    // `xy.kdl` must have reached the broker.
    let cimd_check = std::fs::read_dir(out.join("auth"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("basic-cimd-"))
        .and_then(|e| std::fs::read(e.path().join("checks.json")).ok())
        .and_then(|b| serde_json::from_slice::<Vec<serde_json::Value>>(&b).ok())
        .and_then(|checks| {
            checks
                .into_iter()
                .find(|c| c["id"] == "cimd-client-id-used")
        });
    assert_eq!(
        cimd_check.as_ref().map(|c| c["status"].clone()),
        Some("SUCCESS".into()),
        "{cimd_check:?}"
    );
    // Every scenario removed its server again.
    let list = d.result("list", None);
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
}
