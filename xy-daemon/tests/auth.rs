//! `xyctl auth login|status|logout` against a real `xyd` and the Python
//! authorization server fixture (SPEC §23): the `--no-browser` login
//! completes when the test follows the printed URL, as a browser would; a
//! wrong `iss` fails it naming the issuer; the tokens appear in no file
//! under the state dir but the store's own, and in no RPC or xyctl output.
//!
//! Until remote servers land the OAuth target is named through xyd's
//! test-only `XY_TEST_OAUTH_TARGETS` (`rpc/auth.rs`).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xy_testbins::oauth::{Fixture, FixtureOptions};

use crate::helper::{Env, TestDaemon, free_port, sleep_config};

fn daemon_for(fx: &Fixture) -> TestDaemon {
    let env = Env::new();
    env.write_config("remote", &sleep_config(free_port(), 500));
    env.write_config("plain", &sleep_config(free_port(), 500));
    let targets = json!({ "remote": { "url": fx.mcp_url() } }).to_string();
    TestDaemon::start_in_with(
        env,
        &[
            ("XY_TEST_OAUTH_TARGETS", targets.into()),
            ("XY_AUTH_STORE", "file".into()),
            // Everything, rmcp's and reqwest's debug lines included, goes to
            // daemon.log, which the token search reads.
            ("XY_LOG", "debug".into()),
        ],
    )
}

fn xyctl(d: &TestDaemon) -> Command {
    let mut c = Command::new(xy_testbins::locate::bin_of("xy-cli", "xyctl"));
    c.arg("--no-spawn")
        .env("XY_SOCKET", &d.env.socket)
        .env("NO_COLOR", "1");
    c
}

/// `xyctl auth login remote --no-browser`, following the printed URL as a
/// browser would. Returns xyctl's exit status, stdout and stderr, and the
/// callback page's status.
fn login_following_the_url(d: &TestDaemon) -> (std::process::ExitStatus, String, String, u16) {
    let mut child = xyctl(d)
        .args(["auth", "login", "remote", "--no-browser"])
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
    let deadline = Instant::now() + Duration::from_secs(20);
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

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
fn auth_login_no_browser_completes_when_the_url_is_followed_and_tokens_stay_in_the_store() {
    let fx = Fixture::start(&FixtureOptions::default());
    let d = daemon_for(&fx);

    let (status, out, err, page) = login_following_the_url(&d);
    assert_eq!(page, 200, "callback page");
    assert!(status.success(), "xyctl auth login failed: {out}{err}");
    assert!(out.contains("logged in to remote"), "{out}");
    assert!(out.contains(&fx.issuer()), "{out}");
    assert_eq!(fx.log_of("code_exchange").len(), 1);

    let st = d.result("auth_status", Some(json!({"name": "remote"})));
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

    // The tokens, from the store itself.
    let store = d.env.state_dir().join("auth/remote.json");
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
    // … and in no RPC or xyctl output.
    let mut outputs = vec![out, err, human_out, st.to_string(), all.to_string()];
    for (m, p) in [
        ("status", Some(json!({"name": "remote"}))),
        ("list", None),
        ("daemon_status", None),
    ] {
        outputs.push(d.result(m, p).to_string());
    }
    outputs.push(d.stderr());
    for o in &outputs {
        for t in &tokens {
            assert!(!o.contains(t.as_str()), "a token is in an output: {o}");
        }
    }

    let bye = xyctl(&d)
        .args(["auth", "logout", "remote"])
        .output()
        .unwrap();
    assert!(bye.status.success());
    assert!(String::from_utf8_lossy(&bye.stdout).contains("logged out"));
    assert!(!store.exists());
    let st = d.result("auth_status", Some(json!({"name": "remote"})));
    assert_eq!(st["servers"][0]["state"], "not_logged_in");
}

#[test]
fn a_wrong_iss_fails_the_xyctl_login_naming_it() {
    let fx = Fixture::start(&FixtureOptions {
        iss: "wrong",
        ..FixtureOptions::default()
    });
    let d = daemon_for(&fx);
    let (status, out, err, page) = login_following_the_url(&d);
    assert_eq!(page, 400);
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(err.contains("http://evil.example/as"), "{err}");
    assert!(err.contains(&fx.issuer()), "{err}");
    assert!(fx.log_of("code_exchange").is_empty());
}

#[test]
fn auth_methods_refuse_unknown_and_non_oauth_servers() {
    let fx = Fixture::start(&FixtureOptions::default());
    let d = daemon_for(&fx);
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
