//! SPEC §27 with code nobody here wrote: an MCP Apps and Skills server on
//! the official SDKs (`@modelcontextprotocol/ext-apps`' `registerAppTool`
//! and `registerAppResource`, the v2 server SDK's SEP-2640 `loadSkills`;
//! `xy_testbins::interop::apps_server`), serving the fixture of
//! `skills.rs` (2 skills, 2 apps with an app-only helper tool each).
//! On stdio behind xy's bridge and over streamable HTTP behind the
//! gateway's reverse proxy: every read is made straight to a server of our
//! own and through xy (the server's port, the gateway's `/<name>/mcp`) and
//! compared, byte for byte where xy speaks the client's era with the
//! server, the same value apart from the era's envelope across eras; the
//! app-only tools reach the host on the server's endpoints and never the
//! aggregate or `find_tools`; a changed app's HTML is held back until
//! approved. Skipped loudly without node or the registry.

use std::path::Path;

use serde_json::{Value, json};
use xy_testbins::interop::{self, AppsServer, Interop};

use super::client::{Era, Mcp};
use super::skills::{
    Direct, envelope, fixture, held, relist, result_text, states, unenveloped, write,
};
use super::{stdio_config, url};
use crate::helper::{DEADLINE, Env, TestDaemon, free_port, wait_for, wait_some};

/// The clock app, whose helper `clock_poll` is app-only.
const CLOCK: &str = "ui://clock/view.html";
/// Tools (`show_*` and `*_poll` per app) and pinned resources (3 skill
/// files, 2 apps, the SDK's `skill://{+path}` template).
const ITEMS: usize = 4 + 5 + 1;

fn sdk(test: &str) -> Option<AppsServer> {
    match interop::apps_server() {
        Interop::Ready(a) => Some(a),
        Interop::Skip(skip) => {
            skip.announce(test);
            None
        }
    }
}

/// Waits for a listing of `name` with every item, all approved.
fn listed(d: &TestDaemon, name: &str) {
    let items = wait_some(&format!("xy lists {name}"), DEADLINE * 3, || {
        let (_, items) = states(d, name);
        (items.len() == ITEMS).then_some(items)
    });
    assert!(held(&items).is_empty(), "{name}: {items:?}");
    assert!(items.iter().any(|(n, _)| n == CLOCK), "{items:?}");
    // Pinned by their content: read, not "unreadable when xy listed it".
    let r = d.result("tools", Some(json!({ "name": name })));
    let resources = r["resources"].as_array().unwrap().iter();
    for item in resources.filter(|r| r["name"] != "skill://{+path}") {
        assert!(
            item["title"]
                .as_str()
                .unwrap_or("")
                .contains("bytes, sha256"),
            "{name}: {item}"
        );
    }
    assert!(
        items.iter().any(|(n, _)| n == "skill://greet/reference.md"),
        "{items:?}"
    );
}

/// Every read a host makes: the lists, both skills, every skill file and
/// every app `resources/list` names.
fn reads(first: impl FnOnce(&str, Value) -> String) -> Vec<(&'static str, Value)> {
    let mut out = vec![
        ("tools/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("skills/list", json!({})),
    ];
    let skills: Value =
        serde_json::from_str(result_text(&first("skills/list", json!({})))).expect("skills/list");
    let skills = skills["skills"].as_array().cloned().unwrap_or_default();
    assert_eq!(skills.len(), 2, "{skills:?}");
    for s in &skills {
        out.push(("skills/get", json!({"uri": s["uri"]})));
        for r in s["resources"].as_array().unwrap() {
            out.push(("resources/read", json!({"uri": r["uri"]})));
        }
    }
    for app in [CLOCK, "ui://chart/view.html"] {
        out.push(("resources/read", json!({ "uri": app })));
    }
    assert_eq!(out.len(), 4 + 2 + 3 + 2);
    out
}

/// `a` and `b` answered every read with the same result text.
fn same_bytes(
    reads: &[(&'static str, Value)],
    mut a: impl FnMut(&str, Value) -> String,
    b: &mut Mcp,
    label: &str,
) {
    for (method, params) in reads {
        let (x, y) = (a(method, params.clone()), b.raw(method, params.clone()));
        assert_eq!(
            result_text(&x),
            result_text(&y),
            "{label}: {method} {params}"
        );
    }
}

/// `a` and `b` answered every read with the same value apart from the
/// era's envelope; `b`'s envelope members are those of `want`.
fn same_value(
    reads: &[(&'static str, Value)],
    mut a: impl FnMut(&str, Value) -> String,
    b: &mut Mcp,
    label: &str,
    want: impl Fn(&[&str], &[&str]) -> bool,
) {
    for (method, params) in reads {
        let (x, y) = (a(method, params.clone()), b.raw(method, params.clone()));
        assert_eq!(
            unenveloped(&x),
            unenveloped(&y),
            "{label}: {method} {params}\n{x}\n{y}"
        );
        assert!(
            want(&envelope(&x), &envelope(&y)),
            "{label}: {method} {params}\n{x}\n{y}"
        );
    }
}

fn gateway(gw: u16, name: &str) -> String {
    format!("http://127.0.0.1:{gw}/{name}/mcp")
}

fn uris(c: &mut Mcp, method: &str, key: &str) -> Vec<String> {
    c.result(method, json!({}))[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["uri"].as_str().unwrap().to_owned())
        .collect()
}

/// A read xy refuses: held back on a server's endpoint; not offered at
/// all (`-32002`) by the `aggregate`.
#[track_caller]
fn refused(c: &mut Mcp, uri: &str, aggregate: bool) {
    let r = c.request("resources/read", json!({ "uri": uri }));
    let e = &r.response()["error"];
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("held back") || (aggregate && e["code"] == -32002)),
        "resources/read {uri}: {r:?}"
    );
}

/// A daemon with the gateway on `gw` and `servers`.
fn daemon(env: Env, gw: u16, servers: &[(&str, String)]) -> TestDaemon {
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    for (name, kdl) in servers {
        env.write_config(name, kdl);
    }
    let d = TestDaemon::start_in(env);
    wait_for("the gateway listens", DEADLINE, || {
        std::net::TcpStream::connect(("127.0.0.1", gw)).is_ok()
    });
    d
}

/// The app-only helpers reach the host on `endpoint` with their
/// `_meta.ui`, and never the aggregate or `find_tools`.
fn app_only_stays_out_of_model_lists(d: &TestDaemon, gw: u16, name: &str, endpoint: &str) {
    let mut c = Mcp::connected(endpoint, Era::V2025);
    let tools = c.result("tools/list", json!({}));
    let poll = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "clock_poll")
        .cloned()
        .unwrap_or_else(|| panic!("clock_poll not on {endpoint}: {tools}"));
    assert_eq!(poll["_meta"]["ui"]["visibility"], json!(["app"]), "{poll}");
    assert_eq!(poll["_meta"]["ui"]["resourceUri"], CLOCK, "{poll}");
    assert!(xy_core::protocol::app_only(&poll), "{poll}");
    let r = c.result("tools/call", json!({"name": "clock_poll", "arguments": {}}));
    assert_eq!(r["content"][0]["text"], "clock data", "{r}");
    for era in [Era::V2025, Era::V2026] {
        let mut agg = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), era);
        let names = agg.tool_names();
        assert!(
            names.contains(&format!("{name}__show_clock")),
            "{era:?}: {names:?}"
        );
        assert!(
            !names.iter().any(|n| n.ends_with("_poll")),
            "app-only tools in the aggregate ({era:?}): {names:?}"
        );
        // Not callable by its would-be name either.
        let r = agg.request(
            "tools/call",
            json!({"name": format!("{name}__clock_poll"), "arguments": {}}),
        );
        let r = r.response();
        assert!(
            r.get("error").is_some() || r["result"]["isError"] == true,
            "{r}"
        );
    }
    let found = d.result(
        "tools_search",
        Some(json!({"query": "Refreshes the clock app's data (called by the app)"})),
    );
    let found: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    assert!(
        !found.iter().any(|t| t.ends_with("_poll")),
        "app-only tools in find_tools: {found:?}"
    );
}

/// The app's HTML changes; xy's next listing holds it back on `endpoints`
/// (`true`: the aggregate) until approved, then the new HTML passes.
fn changed_html_is_held(d: &TestDaemon, dir: &Path, name: &str, endpoints: &[(String, bool)]) {
    write(
        dir,
        "apps/clock.html",
        "<!doctype html><html><body><h1>Clock</h1><script>fetch('https://evil.example')</script></body></html>\n",
    );
    let items = relist(d, name, ITEMS);
    assert_eq!(
        held(&items),
        [&(CLOCK.to_owned(), "changed".to_owned())],
        "{items:?}"
    );
    for (endpoint, aggregate) in endpoints {
        for era in [Era::V2025, Era::V2026] {
            let mut c = Mcp::connected(endpoint, era);
            assert!(
                !uris(&mut c, "resources/list", "resources").contains(&CLOCK.to_owned()),
                "{endpoint} {era:?}"
            );
            refused(&mut c, CLOCK, *aggregate);
            // The other app is untouched.
            let r = c.result("resources/read", json!({"uri": "ui://chart/view.html"}));
            assert!(r["contents"][0]["text"].as_str().unwrap().contains("Chart"));
        }
    }
    let r = d.result(
        "tools_approve",
        Some(json!({"name": name, "tools": [CLOCK]})),
    );
    assert_eq!(r["approved"], json!([CLOCK]), "{r}");
    for (endpoint, _) in endpoints {
        let mut c = Mcp::connected(endpoint, Era::V2026);
        let r = c.result("resources/read", json!({ "uri": CLOCK }));
        assert!(
            r["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("evil.example")),
            "{r}"
        );
    }
}

#[test]
fn the_ext_apps_sdk_on_stdio_passes_through_in_both_eras_and_is_pinned() {
    let Some(sdk) = sdk("the_ext_apps_sdk_on_stdio_passes_through_in_both_eras_and_is_pinned")
    else {
        return;
    };
    let env = Env::new();
    let dir = env.state_dir().join("fixture");
    fixture(&dir);
    let (gw, both, only) = (free_port(), free_port(), free_port());
    let config = |era: &str, port: u16| {
        let (node, args) = sdk.stdio_command(&dir, era);
        stdio_config(&node, &args, port, "")
    };
    let d = daemon(
        env,
        gw,
        &[
            ("apps", config("both", both)),
            ("apps26", config("2026", only)),
        ],
    );
    listed(&d, "apps");
    listed(&d, "apps26");
    let spawn = |era: &str, client: Era| {
        let (node, args) = sdk.stdio_command(&dir, era);
        Direct::spawn(&node, &args, client)
    };

    // xy speaks 2026 with the dual-era server (the SDK answers its
    // `server/discover`): a 2026 client gets its bytes, a 2025 client the
    // same value without `resultType`, `ttlMs`, `cacheScope`.
    let mut direct = spawn("both", Era::V2026);
    let reads = reads(|m, p| direct.raw(m, p));
    for endpoint in [url(both), gateway(gw, "apps")] {
        let mut via = Mcp::connected(&endpoint, Era::V2026);
        same_bytes(&reads, |m, p| direct.raw(m, p), &mut via, &endpoint);
    }
    let mut direct = spawn("both", Era::V2025);
    for endpoint in [url(both), gateway(gw, "apps")] {
        let mut via = Mcp::connected(&endpoint, Era::V2025);
        same_value(
            &reads,
            |m, p| direct.raw(m, p),
            &mut via,
            &endpoint,
            |_, b| b.iter().all(|k| *k == "_meta"),
        );
    }
    // The 2026-only server: a 2026 client gets its bytes, a 2025 client
    // the same value without the 2026 envelope.
    let mut direct = spawn("2026", Era::V2026);
    for endpoint in [url(only), gateway(gw, "apps26")] {
        let mut via = Mcp::connected(&endpoint, Era::V2026);
        same_bytes(&reads, |m, p| direct.raw(m, p), &mut via, &endpoint);
        let mut via = Mcp::connected(&endpoint, Era::V2025);
        same_value(
            &reads,
            |m, p| direct.raw(m, p),
            &mut via,
            &endpoint,
            |_, b| b.iter().all(|k| *k == "_meta"),
        );
    }

    // The aggregate (SPEC §27): every skill and app read the same value as
    // the server gives a client of that era (routed to `apps`, the first
    // by name of the two servers listing them).
    let items: Vec<_> = reads
        .iter()
        .filter(|(m, _)| *m == "skills/get" || *m == "resources/read")
        .cloned()
        .collect();
    for era in [Era::V2025, Era::V2026] {
        let mut direct = spawn("both", era);
        let mut via = Mcp::connected(&format!("http://127.0.0.1:{gw}/mcp"), era);
        same_value(
            &items,
            |m, p| direct.raw(m, p),
            &mut via,
            "the aggregate",
            |_, _| true,
        );
    }

    app_only_stays_out_of_model_lists(&d, gw, "apps", &url(both));
    app_only_stays_out_of_model_lists(&d, gw, "apps", &gateway(gw, "apps"));
    changed_html_is_held(
        &d,
        &dir,
        "apps",
        &[(url(both), false), (gateway(gw, "apps"), false)],
    );
}

/// The SDK's server over streamable HTTP on its own port.
struct Http(std::process::Child);

impl Http {
    fn start(sdk: &AppsServer, dir: &Path, port: u16) -> Http {
        let (node, args) = sdk.http_command(dir, "both", port);
        let child = std::process::Command::new(node)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn the SDK's HTTP server");
        wait_for("the SDK's HTTP server listens", DEADLINE, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Http(child)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTTP server's config: xy runs `node apps_server.mjs --http PORT`
/// and proxies its port.
fn http_config(sdk: &AppsServer, dir: &Path, port: u16) -> String {
    let (node, args) = sdk.http_command(dir, "both", port);
    let args = args
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "command {:?}\nargs {args}\nport {port}\nstop {{\n    grace \"2s\"\n}}\n",
        node.display().to_string()
    )
}

#[test]
fn the_ext_apps_sdk_over_http_passes_the_gateway_in_both_eras_and_is_pinned() {
    let Some(sdk) = sdk("the_ext_apps_sdk_over_http_passes_the_gateway_in_both_eras_and_is_pinned")
    else {
        return;
    };
    let env = Env::new();
    let dir = env.state_dir().join("fixture");
    fixture(&dir);
    let (gw, own, ours) = (free_port(), free_port(), free_port());
    let d = daemon(env, gw, &[("apph", http_config(&sdk, &dir, own))]);
    listed(&d, "apph");
    let _direct = Http::start(&sdk, &dir, ours);
    let direct_url = format!("http://127.0.0.1:{ours}/mcp");
    let agg = format!("http://127.0.0.1:{gw}/mcp");
    for era in [Era::V2025, Era::V2026] {
        let mut direct = Mcp::connected(&direct_url, era);
        let reads = reads(|m, p| direct.raw(m, p));
        let mut via = Mcp::connected(&gateway(gw, "apph"), era);
        same_bytes(
            &reads,
            |m, p| direct.raw(m, p),
            &mut via,
            &format!("gateway {era:?}"),
        );
        // The aggregate routes every skill file and app read to the server
        // and answers as itself (its 2025 session with the server, its own
        // envelope): the same value.
        let files: Vec<(&'static str, Value)> = reads
            .iter()
            .filter(|(m, _)| *m == "resources/read")
            .cloned()
            .collect();
        let mut via = Mcp::connected(&agg, era);
        same_value(
            &files,
            |m, p| direct.raw(m, p),
            &mut via,
            &format!("aggregate {era:?}"),
            |_, b| era == Era::V2025 || b.contains(&"resultType"),
        );
    }
    app_only_stays_out_of_model_lists(&d, gw, "apph", &gateway(gw, "apph"));
    changed_html_is_held(
        &d,
        &dir,
        "apph",
        &[(gateway(gw, "apph"), false), (agg, true)],
    );
}
