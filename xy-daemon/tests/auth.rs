//! SPEC §23's OAuth, end to end through a real `xyd` and its proxy, against
//! the Python authorization server + protected MCP resource fixture, with
//! server files as a user writes them (`url` + `port` + `auth { oauth }`):
//! `xyctl auth login <name> --no-browser` completes when the test follows
//! the printed URL, as a browser would (dynamic registration when the AS
//! has no metadata documents), and the remote turns healthy at once; a
//! 2025 HTTP client and `xyctl connect` share the one grant; three clients
//! on 3-second tokens see no error while the refreshes stay one at a time;
//! a refused refresh makes the server `unhealthy` with the login hint (the
//! `on-unhealthy` hook fires), calls fail at once, and a new login recovers
//! it (`on-recovered`); a wrong `iss` fails the login naming it; the tokens
//! appear nowhere but the store.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xy_testbins::oauth::{Fixture, FixtureOptions};

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, scaled, sleep_config, wait_for};
use crate::stdio::client::{Era, Mcp};

/// The fixture is a Python script: without `python3` these tests say so
/// and pass.
fn python_missing(test: &str) -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        xy_testbins::out::err(&format!("skipping {test}: python3 is not on PATH"));
    }
    !found
}

/// Probes every 300 ms: they drive the refreshes.
const FAST: &str = "300ms";
/// No probe but the first (within a second) and those xy asks for: what
/// happens then is the broker's events' doing.
const SLOW: &str = "1h";

/// `far`'s server file: the fixture's endpoint, its own `port`, OAuth,
/// probes every `interval`, and `extra`. The firewall is off: the calls
/// here test the grant, not the ledger.
fn oauth_config(fx: &Fixture, port: u16, interval: &str, extra: &str) -> String {
    format!(
        "url {:?}\nport {port}\nauth {{\n    oauth\n}}\nhealth {{\n    mcp\n    interval {interval:?}\n    \
         timeout \"2s\"\n    failures 1\n    start-period \"0s\"\n}}\nfirewall {{\n    mode \"off\"\n}}\n{extra}",
        fx.mcp_url()
    )
}

/// A daemon with `far` (OAuth, at `port`) and `plain` (a process server),
/// grants in files, everything at debug in `daemon.log`.
fn daemon_for(fx: &Fixture, port: u16, interval: &str, extra: &str) -> TestDaemon {
    let env = Env::new();
    env.write_config("far", &oauth_config(fx, port, interval, extra));
    env.write_config("plain", &sleep_config(free_port(), 500));
    TestDaemon::start_in_with(
        env,
        &[
            ("XY_AUTH_STORE", "file".into()),
            // rmcp's, reqwest's and hyper's debug lines too: the token
            // search reads them.
            ("XY_LOG", "debug".into()),
        ],
    )
}

/// [`daemon_for`] with the gateway on `gw` as well.
fn daemon_with_gateway(fx: &Fixture, port: u16, interval: &str, gw: u16) -> TestDaemon {
    let env = Env::new();
    env.write_settings(&format!("gateway {{\n    port {gw}\n}}\n"));
    env.write_config("far", &oauth_config(fx, port, interval, ""));
    TestDaemon::start_in_with(
        env,
        &[("XY_AUTH_STORE", "file".into()), ("XY_LOG", "debug".into())],
    )
}

/// `echo` through a 2025 client, expecting the tool error xy answers in
/// the server's place: its text.
#[track_caller]
fn refused_echo(c: &mut Mcp) -> String {
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let result = &r.response()["result"];
    assert_eq!(result["isError"], true, "{r:?}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {r:?}"))
        .to_owned()
}

/// Waits for `n` probes after this call (each probe stamps
/// `health.checked_at`); returns the health then.
fn after_probes(d: &TestDaemon, n: usize) -> Value {
    let mut seen = vec![health_of(d)["checked_at"].clone()];
    wait_for(&format!("{n} more probes"), DEADLINE, || {
        let at = health_of(d)["checked_at"].clone();
        if !seen.contains(&at) {
            seen.push(at);
        }
        seen.len() > n
    });
    health_of(d)
}

fn xyctl(d: &TestDaemon) -> Command {
    let mut c = Command::new(xy_testbins::locate::bin_of("xy-cli", "xyctl"));
    c.arg("--no-spawn")
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1");
    c
}

/// `xyctl auth login far --no-browser`, following the printed URL as a
/// browser would. Returns xyctl's exit status, stdout and stderr, and the
/// callback page's status.
fn login_following_the_url(d: &TestDaemon) -> (std::process::ExitStatus, String, String, u16) {
    let mut child = xyctl(d)
        .args(["auth", "login", "far", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    out.read_line(&mut url).unwrap();
    let url = url.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "no URL printed: {url:?}"
    );
    let page = match ureq::get(&url).call() {
        Ok(r) => r.status().as_u16(),
        Err(ureq::Error::StatusCode(s)) => s,
        Err(e) => panic!("following {url}: {e}"),
    };
    let deadline = xy_testbins::wait::deadline(DEADLINE);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "xyctl auth login did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, format!("{url}\n{rest}"), err, page)
}

/// A login that must succeed.
#[track_caller]
fn login(d: &TestDaemon) -> String {
    let (status, out, err, page) = login_following_the_url(d);
    assert_eq!(page, 200, "callback page");
    assert!(status.success(), "xyctl auth login failed: {out}{err}");
    out
}

fn health_of(d: &TestDaemon) -> Value {
    d.entry("far")["health"].clone()
}

#[track_caller]
fn wait_health(d: &TestDaemon, state: &str, why: Option<&str>) {
    wait_for(&format!("far {state} ({why:?})"), DEADLINE, || {
        let h = health_of(d);
        h["state"] == state
            && why.is_none_or(|w| h["error"].as_str().is_some_and(|e| e.contains(w)))
    });
}

/// `echo` through a 2025 client: its answer's text, or the error.
fn echo(c: &mut Mcp, text: &str) -> Result<String, String> {
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": text}}),
    );
    if r.status != 200 {
        return Err(format!("HTTP {}: {r:?}", r.status));
    }
    let resp = r.response();
    let result = &resp["result"];
    match result["content"][0]["text"].as_str() {
        Some(t) if result["isError"] != true => Ok(t.to_owned()),
        _ => Err(resp.to_string()),
    }
}

/// `xyctl connect far` as a stdio client speaks to it: JSON lines in, JSON
/// lines out.
struct Connect {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::sync::mpsc::Receiver<Value>,
}

impl Connect {
    fn start(d: &TestDaemon) -> Connect {
        let mut child = xyctl(d)
            .args(["connect", "far"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, stdout) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Connect {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The response to request `id` (what comes before it is skipped).
    #[track_caller]
    fn response(&self, id: u64) -> Value {
        let deadline = xy_testbins::wait::deadline(DEADLINE);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .stdout
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {id} from xyctl connect"));
            if v["id"] == id {
                return v;
            }
        }
    }
}

impl Drop for Connect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_login_makes_the_remote_healthy_and_the_tokens_stay_in_the_store() {
    if python_missing("a_login_makes_the_remote_healthy_and_the_tokens_stay_in_the_store") {
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let port = free_port();
    let d = daemon_for(&fx, port, SLOW, "");
    let mut events = d.client();
    events.result("events", Some(json!({"names": ["far"]})));
    // No grant yet: unhealthy, saying what to do, and the first probe
    // (the only one for an hour) has found so.
    wait_health(&d, "unhealthy", Some("login needed: xyctl auth login far"));
    wait_for("the first probe", DEADLINE, || {
        !health_of(&d)["latency_ms"].is_null()
    });
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "not_logged_in", "{st}");

    let out = login(&d);
    assert!(out.contains("logged in to far"), "{out}");
    assert!(out.contains(&fx.issuer()), "{out}");
    assert_eq!(fx.log_of("code_exchange").len(), 1);
    // The fixture advertises no Client ID Metadata Documents: xy registered.
    let registered = fx.log_of("register");
    assert_eq!(registered.len(), 1, "{registered:?}");
    assert_eq!(registered[0]["client_name"], "xy");
    // The login re-probes at once: healthy without a client's call.
    let logged_in = Instant::now();
    wait_health(&d, "healthy", None);
    xy_testbins::out::err(&format!(
        "login: healthy {} ms after xyctl auth login returned (probe interval 1 h)",
        logged_in.elapsed().as_millis()
    ));
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    assert_eq!(echo(&mut c, "after login").as_deref(), Ok("after login"));

    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "logged_in", "{st}");
    assert_eq!(st["servers"][0]["grant"]["issuer"], fx.issuer());
    let all = d.result("auth_status", None);
    assert_eq!(
        all["servers"].as_array().unwrap().len(),
        1,
        "only OAuth servers: {all}"
    );
    let human = xyctl(&d).args(["auth", "status"]).output().unwrap();
    let human_out = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(human_out.contains("logged in"), "{human_out}");

    // The health events of the login, up to healthy.
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &Value| e["params"]["kind"] == "health" && e["params"]["to"] == "healthy")
    {
        seen.push(events.recv());
    }

    // The tokens, from the store itself.
    let store = d.env.state_dir().join("auth/far.json");
    let record: Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    let tr = &record["credentials"]["token_response"];
    let tokens: Vec<String> = ["access_token", "refresh_token"]
        .iter()
        .map(|k| tr[k].as_str().unwrap().to_owned())
        .collect();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Nowhere else under the state dir (daemon.log, at debug, is one) …
    assert!(d.env.daemon_log().contains("OAuth login completed"));
    for f in files_under(&d.env.state_dir()) {
        if f == store || f.extension().is_some_and(|e| e == "sock") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
        for t in &tokens {
            assert!(!text.contains(t.as_str()), "a token is in {}", f.display());
        }
    }
    // … and in no RPC, event or xyctl output.
    let mut outputs = vec![
        out,
        human_out,
        st.to_string(),
        all.to_string(),
        serde_json::to_string(&seen).unwrap(),
    ];
    for (m, p) in [
        ("status", Some(json!({"name": "far"}))),
        ("list", None),
        ("daemon_status", None),
        ("tools", Some(json!({"name": "far"}))),
        ("calls", Some(json!({"name": "far"}))),
    ] {
        outputs.push(d.client().call(m, p).to_string());
    }
    outputs.push(d.stderr());
    for o in &outputs {
        for t in &tokens {
            assert!(!o.contains(t.as_str()), "a token is in an output: {o}");
        }
    }

    let bye = xyctl(&d).args(["auth", "logout", "far"]).output().unwrap();
    assert!(bye.status.success());
    assert!(String::from_utf8_lossy(&bye.stdout).contains("logged out"));
    assert!(!store.exists());
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "not_logged_in");
    // Logged out: unhealthy again, at once.
    wait_health(&d, "unhealthy", Some("login needed: xyctl auth login far"));
}

#[test]
fn a_2025_http_client_and_xyctl_connect_share_one_grant() {
    if python_missing("a_2025_http_client_and_xyctl_connect_share_one_grant") {
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let port = free_port();
    let d = daemon_for(&fx, port, FAST, "");
    login(&d);
    wait_health(&d, "healthy", None);

    let mut http = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    assert_eq!(echo(&mut http, "over http").as_deref(), Ok("over http"));

    let mut stdio = Connect::start(&d);
    stdio.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "stdio-client", "version": "1"}}}),
    );
    let init = stdio.response(1);
    assert_eq!(
        init["result"]["serverInfo"]["name"], "oauth-fixture",
        "{init}"
    );
    stdio.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    stdio.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "over stdio"}}}),
    );
    let call = stdio.response(2);
    assert_eq!(call["result"]["content"][0]["text"], "over stdio", "{call}");
    assert_eq!(echo(&mut http, "again").as_deref(), Ok("again"));

    assert_eq!(fx.log_of("code_exchange").len(), 1, "{:?}", fx.log());
    assert_eq!(fx.log_of("authorize").len(), 1, "{:?}", fx.log());
}

#[test]
fn three_clients_for_20s_on_3s_tokens_see_no_error_and_refreshes_never_overlap() {
    if python_missing("three_clients_for_20s_on_3s_tokens_see_no_error_and_refreshes_never_overlap")
    {
        return;
    }
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        ..FixtureOptions::default()
    });
    let port = free_port();
    let d = daemon_for(&fx, port, FAST, "");
    login(&d);
    wait_health(&d, "healthy", None);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let until = Instant::now() + Duration::from_secs(20);
    let callers: Vec<_> = (0..3)
        .map(|n| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = Mcp::connected(&url, Era::V2025);
                let (mut calls, mut errors) = (0u32, Vec::new());
                while Instant::now() < until {
                    let text = format!("caller {n} call {calls}");
                    match echo(&mut c, &text) {
                        Ok(t) if t == text => {}
                        Ok(t) => errors.push(format!("{text}: answered {t:?}")),
                        Err(e) => errors.push(format!("{text}: {e}")),
                    }
                    calls += 1;
                }
                (calls, errors)
            })
        })
        .collect();
    let mut total = 0;
    for c in callers {
        let (calls, errors) = c.join().unwrap();
        assert!(errors.is_empty(), "{} errors: {errors:?}", errors.len());
        total += calls;
    }
    // 20 s of 3 s tokens refreshed ahead of expiry: several refreshes.
    let refreshes = fx.assert_refreshes_clean();
    assert!(refreshes >= 5, "only {refreshes} refreshes in 20 s");
    assert!(fx.log_of("refresh").iter().all(|r| r["ok"] == true));
    assert_eq!(health_of(&d)["state"], "healthy");
    // Every refresh token xy sent (rotated at each refresh) is in no file
    // under the state dir but the store, `daemon.log` at debug included.
    let sent: Vec<String> = fx
        .log_of("refresh")
        .iter()
        .map(|r| r["refresh_token"].as_str().unwrap().to_owned())
        .collect();
    let store = d.env.state_dir().join("auth/far.json");
    for f in files_under(&d.env.state_dir()) {
        if f == store || f.extension().is_some_and(|e| e == "sock") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
        for t in &sent {
            assert!(
                !text.contains(t.as_str()),
                "a refresh token is in {}",
                f.display()
            );
        }
    }
    xy_testbins::out::err(&format!(
        "three callers, 20 s, 3 s tokens: {total} calls, 0 errors, {refreshes} refreshes"
    ));
}

#[test]
fn a_refused_refresh_makes_it_unhealthy_with_the_hint_then_a_login_recovers() {
    if python_missing("a_refused_refresh_makes_it_unhealthy_with_the_hint_then_a_login_recovers") {
        return;
    }
    let fx = Fixture::start(&FixtureOptions {
        token_lifetime: 3,
        ..FixtureOptions::default()
    });
    let port = free_port();
    let hooks = tempfile::tempdir().unwrap();
    let record = |event: &str| {
        let file = hooks.path().join(event);
        (
            file.clone(),
            format!(
                "    on-{event} \"/bin/sh\" \"-c\" {:?}\n",
                format!("echo \"$XY_REASON\" >> '{}'", file.display())
            ),
        )
    };
    let (unhealthy, on_unhealthy) = record("unhealthy");
    let (recovered, on_recovered) = record("recovered");
    // Not started at boot: its first turn to `unhealthy` (a hook fires at
    // most once a minute) is the refused refresh's, not the missing grant's.
    let d = daemon_for(
        &fx,
        port,
        FAST,
        &format!("autostart #false\nhooks {{\n{on_unhealthy}{on_recovered}    notify #true\n}}\n"),
    );
    login(&d);
    d.result("start", Some(json!({"name": "far"})));
    wait_health(&d, "healthy", None);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut c = Mcp::connected(&url, Era::V2025);
    assert_eq!(echo(&mut c, "fine").as_deref(), Ok("fine"));
    // Refreshes work, then the authorization server stops granting them.
    wait_for("a refresh", DEADLINE, || !fx.log_of("refresh").is_empty());
    fx.control(json!({"refuse_refresh": true}));
    let refused_from = Instant::now();

    // The next refresh ahead of expiry is refused: unhealthy with the
    // hint, before any client calls.
    wait_health(&d, "unhealthy", Some("login needed: xyctl auth login far"));
    let unhealthy_ms = refused_from.elapsed().as_millis();
    assert!(
        refused_from.elapsed() < scaled(Duration::from_secs(10)),
        "{:?}",
        refused_from.elapsed()
    );
    assert!(
        fx.log_of("refresh").iter().any(|r| r["ok"] == false),
        "{:?}",
        fx.log()
    );
    let status = d.result("status", Some(json!({"name": "far"})));
    assert!(
        status
            .to_string()
            .contains("login needed: xyctl auth login far"),
        "{status}"
    );
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "login_needed", "{st}");
    wait_for("the on-unhealthy hook ran", DEADLINE, || {
        std::fs::read_to_string(&unhealthy)
            .is_ok_and(|s| s.contains("login needed: xyctl auth login far"))
    });
    assert!(!recovered.exists(), "recovered before a login");

    // A client's call fails at once, saying what to do: a tool error …
    let asked = Instant::now();
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    let call_ms = asked.elapsed().as_millis();
    assert!(
        asked.elapsed() < scaled(Duration::from_secs(5)),
        "{:?}",
        asked.elapsed()
    );
    let result = &r.response()["result"];
    assert_eq!(result["isError"], true, "{r:?}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("login needed: xyctl auth login far")),
        "{r:?}"
    );
    // … and a new client's `initialize` a JSON-RPC error (D123).
    let asked = Instant::now();
    let init = Mcp::new(&url, Era::V2025).initialize();
    assert!(
        asked.elapsed() < scaled(Duration::from_secs(5)),
        "{:?}",
        asked.elapsed()
    );
    let err = &init.response()["error"];
    assert_eq!(err["code"], -32603, "{init:?}");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("login needed: xyctl auth login far")),
        "{init:?}"
    );

    // A new login recovers it, without a client's call.
    fx.control(json!({"refuse_refresh": false}));
    login(&d);
    let logged_in = Instant::now();
    wait_health(&d, "healthy", None);
    let healthy_ms = logged_in.elapsed().as_millis();
    wait_for("the on-recovered hook ran", DEADLINE, || recovered.exists());
    xy_testbins::out::err(&format!(
        "refused refresh: unhealthy {unhealthy_ms} ms after the AS began refusing (3 s tokens), \
         a call answered in {call_ms} ms; healthy {healthy_ms} ms after the new login"
    ));
    assert_eq!(echo(&mut c, "back").as_deref(), Ok("back"));
    assert_eq!(fx.log_of("code_exchange").len(), 2);
}

#[test]
fn a_wrong_iss_fails_the_xyctl_login_naming_it() {
    if python_missing("a_wrong_iss_fails_the_xyctl_login_naming_it") {
        return;
    }
    let fx = Fixture::start(&FixtureOptions {
        iss: "wrong",
        ..FixtureOptions::default()
    });
    let d = daemon_for(&fx, free_port(), FAST, "");
    let (status, out, err, page) = login_following_the_url(&d);
    assert_eq!(page, 400);
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(err.contains("http://evil.example/as"), "{err}");
    assert!(err.contains(&fx.issuer()), "{err}");
    assert!(fx.log_of("code_exchange").is_empty());
    assert_eq!(
        d.result("auth_status", Some(json!({"name": "far"})))["servers"][0]["state"],
        "not_logged_in"
    );
}

#[test]
fn auth_methods_refuse_unknown_and_non_oauth_servers() {
    if python_missing("auth_methods_refuse_unknown_and_non_oauth_servers") {
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let d = daemon_for(&fx, free_port(), FAST, "");
    let mut c = d.client();
    let e = c.error("auth_login", Some(json!({"name": "nope"})), -32001);
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    let e = c.error("auth_login", Some(json!({"name": "plain"})), -32602);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("does not use OAuth"),
        "{e}"
    );
    let e = c.error("auth_login_wait", Some(json!({"login_id": "x-1"})), -32602);
    assert_eq!(e["data"]["field"], "login_id");
    let out = xyctl(&d)
        .args(["auth", "login", "plain", "--no-browser"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// SPEC §23/§24: a step-up asked by a `403 insufficient_scope` on a
/// `tools/call` (not on `initialize` or `tools/list`, which the grant
/// covers), through the remote's port and the gateway: the client is told
/// which server needs which scopes and what to run; `status` says so and
/// keeps saying so while the probes (which the grant covers) succeed; the
/// next login asks for the union; then the call goes through.
#[test]
fn a_403_insufficient_scope_on_a_tool_call_asks_for_more_scopes_until_a_login() {
    if python_missing("a_403_insufficient_scope_on_a_tool_call_asks_for_more_scopes_until_a_login")
    {
        return;
    }
    let fx = Fixture::start(&FixtureOptions {
        call_scope: Some("mcp:admin".to_owned()),
        ..FixtureOptions::default()
    });
    let (port, gw) = (free_port(), free_port());
    let d = daemon_with_gateway(&fx, port, FAST, gw);
    login(&d);
    wait_health(&d, "healthy", None);
    let first_scope = fx.log_of("authorize")[0]["scope"].clone();
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    let gateway = format!("http://127.0.0.1:{gw}/far/mcp");
    wait_for("the gateway serves far", DEADLINE, || {
        Mcp::new(&gateway, Era::V2025).initialize().status == 200
    });
    let mut g = Mcp::connected(&gateway, Era::V2025);
    // `initialize` and `tools/list` pass with the grant as it is.
    assert_eq!(c.tool_names(), vec!["echo".to_owned()]);

    for (via, client) in [("port", &mut c), ("gateway", &mut g)] {
        let asked = Instant::now();
        let text = refused_echo(client);
        assert!(asked.elapsed() < scaled(Duration::from_secs(5)), "{via}");
        for want in ["far", "mcp:admin", "xyctl auth login far"] {
            assert!(text.contains(want), "{via}: {want:?} not in {text:?}");
        }
    }
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "login_needed", "{st}");
    assert_eq!(
        st["servers"][0]["missing_scopes"],
        json!(["mcp:admin"]),
        "{st}"
    );
    // The probes succeed (the grant covers `ping`), and `status` still
    // says what is missing and what to run.
    let h = after_probes(&d, 3);
    assert_eq!(h["state"], "unhealthy", "{h}");
    let why = h["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("login needed: xyctl auth login far") && why.contains("mcp:admin"),
        "{h}"
    );

    login(&d);
    let logged_in = Instant::now();
    wait_health(&d, "healthy", None);
    let healthy_ms = logged_in.elapsed().as_millis();
    let authorize = fx.log_of("authorize");
    let asked: Vec<&str> = authorize[1]["scope"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(asked.contains(&"mcp:admin"), "{authorize:?}");
    // The union: whatever the first login had is asked for again.
    for s in first_scope.as_str().unwrap_or_default().split_whitespace() {
        assert!(asked.contains(&s), "{s} dropped: {authorize:?}");
    }
    assert_eq!(echo(&mut c, "by port").as_deref(), Ok("by port"));
    assert_eq!(echo(&mut g, "by gateway").as_deref(), Ok("by gateway"));
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "logged_in", "{st}");
    assert_eq!(st["servers"][0]["missing_scopes"], json!([]), "{st}");
    xy_testbins::out::err(&format!(
        "step-up on tools/call: healthy {healthy_ms} ms after the login with {asked:?}"
    ));
}

/// SPEC §23/§24: the token revoked at the server (a `401` on a later
/// call) and the refresh refused: one refresh, then the client is told
/// the server and the reason at once; `status` says `login needed`; a
/// new login brings it back well within one probe interval — `health`,
/// `status` and `auth_status` say so, and calls through the remote's
/// port (the same client session) and the gateway work again.
#[test]
fn a_revoked_token_and_a_refused_refresh_then_a_login_recovers_within_a_probe_interval() {
    if python_missing(
        "a_revoked_token_and_a_refused_refresh_then_a_login_recovers_within_a_probe_interval",
    ) {
        return;
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let (port, gw) = (free_port(), free_port());
    // The default interval: the login, not the next probe, must recover it.
    let d = daemon_with_gateway(&fx, port, "10s", gw);
    login(&d);
    wait_health(&d, "healthy", None);
    let mut c = Mcp::connected(&format!("http://127.0.0.1:{port}/mcp"), Era::V2025);
    let gateway = format!("http://127.0.0.1:{gw}/far/mcp");
    wait_for("the gateway serves far", DEADLINE, || {
        Mcp::new(&gateway, Era::V2025).initialize().status == 200
    });
    let mut g = Mcp::connected(&gateway, Era::V2025);
    assert_eq!(echo(&mut c, "fine").as_deref(), Ok("fine"));

    // Revoked, however young: the `401` is answered by one refresh and the
    // call goes through.
    fx.control(json!({"revoke_access": true}));
    assert_eq!(echo(&mut c, "refreshed").as_deref(), Ok("refreshed"));
    let refreshes = fx.log_of("refresh");
    assert_eq!(refreshes.len(), 1, "one refresh: {refreshes:?}");
    assert_eq!(refreshes[0]["ok"], true);

    fx.control(json!({"revoke_access": true, "refuse_refresh": true}));
    let text = refused_echo(&mut c);
    for want in ["far", "refused the refresh", "xyctl auth login far"] {
        assert!(text.contains(want), "{want:?} not in {text:?}");
    }
    let refreshes = fx.log_of("refresh");
    assert_eq!(refreshes.len(), 2, "one more refresh: {refreshes:?}");
    assert_eq!(refreshes[1]["ok"], false);
    wait_health(&d, "unhealthy", Some("login needed: xyctl auth login far"));
    let text = refused_echo(&mut g);
    assert!(text.contains("xyctl auth login far"), "{text}");
    assert_eq!(fx.log_of("refresh").len(), 2, "no refresh of a dead grant");

    fx.control(json!({"refuse_refresh": false}));
    login(&d);
    let logged_in = Instant::now();
    let deadline = xy_testbins::wait::deadline(DEADLINE);
    loop {
        let mut s = d.result("status", Some(json!({"name": "far"})));
        // What is now, not what was.
        for past in ["health_history", "transitions"] {
            s.as_object_mut().unwrap().remove(past);
        }
        if s["health"]["state"] == "healthy" && !s.to_string().contains("login needed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "status still says `login needed` {:?} after the login: {s:#}",
            logged_in.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let recovered = logged_in.elapsed();
    assert!(
        recovered < scaled(Duration::from_secs(5)),
        "{recovered:?} after the login (probe interval 10 s)"
    );
    let st = d.result("auth_status", Some(json!({"name": "far"})));
    assert_eq!(st["servers"][0]["state"], "logged_in", "{st}");
    assert_eq!(echo(&mut c, "back").as_deref(), Ok("back"));
    assert_eq!(echo(&mut g, "back too").as_deref(), Ok("back too"));
    xy_testbins::out::err(&format!(
        "revoked token: status clean {} ms after the new login (interval 10 s)",
        recovered.as_millis()
    ));
}
