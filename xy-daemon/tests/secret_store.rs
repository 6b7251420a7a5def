//! SPEC §23's Secret Service token store against a real one: a private
//! session bus (`dbus-daemon`) with GNOME Keyring's secrets component
//! unlocked by a password on stdin, and a real `xyd` that finds it on its
//! own (no `XY_AUTH_STORE`). A grant made by a login is an item with
//! attributes `service xy-oauth`, `account <server>`; it is read back after
//! a daemon restart, deleted by `auth_logout`, and never written to the
//! file store (nor any token to any file under the state dir).
//! `XY_AUTH_STORE=file` still picks the file store with the bus present.
//! Skipped with the reason when `dbus-daemon`, `gnome-keyring-daemon` or
//! `secret-tool` is missing (`.ci/run` installs them where it can).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use xy_testbins::interop::which;
use xy_testbins::oauth::{Fixture, FixtureOptions};
use xy_testbins::out::err;

use crate::helper::{DEADLINE, Env, TestDaemon, free_port, wait_for, wait_some};

/// A session bus and an unlocked keyring on it, both killed on drop.
struct SecretService {
    bus: Child,
    keyring: Child,
    address: String,
    home: PathBuf,
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for c in [&mut self.keyring, &mut self.bus] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl SecretService {
    fn start(home: &Path) -> SecretService {
        let data = home.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let isolate = |c: &mut Command| {
            // Keyrings go under `home`, never the user's own.
            c.env("HOME", home)
                .env("XDG_DATA_HOME", &data)
                .env("XDG_CONFIG_HOME", home.join("config"))
                .env_remove("XDG_RUNTIME_DIR");
        };
        // No service directories: nothing is D-Bus-activated, so a
        // `secret-tool` that comes early cannot start a second keyring
        // (one without the password) in place of the one below.
        let config = home.join("bus.conf");
        std::fs::write(
            &config,
            "<busconfig><type>session</type><listen>unix:tmpdir=/tmp</listen>\
             <policy context=\"default\"><allow send_destination=\"*\"/><allow receive_sender=\"*\"/>\
             <allow own=\"*\"/>\
             </policy></busconfig>",
        )
        .unwrap();
        let mut cmd = Command::new("dbus-daemon");
        cmd.arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        isolate(&mut cmd);
        let mut bus = cmd.spawn().expect("starting dbus-daemon");
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_owned();
        assert!(address.starts_with("unix:"), "bus address {address:?}");
        let mut cmd = Command::new("gnome-keyring-daemon");
        cmd.args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        isolate(&mut cmd);
        let mut keyring = cmd.spawn().expect("starting gnome-keyring-daemon");
        // The login keyring's password; EOF ends it.
        keyring
            .stdin
            .take()
            .unwrap()
            .write_all(b"xy-test-password")
            .unwrap();
        let s = SecretService {
            bus,
            keyring,
            address,
            home: home.to_path_buf(),
        };
        // The name is on the bus before the login collection is unlocked:
        // ready once an item can be written (and it is removed again).
        wait_for("the Secret Service takes an item", DEADLINE, || {
            let mut c = s.secret_tool_cmd(&[
                "store",
                "--label=ready",
                "service",
                "xy-test",
                "account",
                "ready",
            ]);
            let Ok(mut child) = c
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            else {
                return false;
            };
            let _ = child.stdin.take().unwrap().write_all(b"x");
            child.wait().is_ok_and(|st| st.success())
        });
        let (code, _, stderr) = s.secret_tool(&["clear", "service", "xy-test", "account", "ready"]);
        assert_eq!(code, Some(0), "{stderr}");
        s
    }

    /// `secret-tool args` on this bus, not yet spawned.
    fn secret_tool_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("secret-tool");
        c.args(args)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("HOME", &self.home);
        c
    }

    /// `secret-tool args` on this bus: exit code, stdout, stderr.
    fn secret_tool(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = self
            .secret_tool_cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("running secret-tool");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        )
    }

    /// The grant item of `server`, if there is one.
    fn item(&self, server: &str) -> Option<Value> {
        let (code, out, stderr) =
            self.secret_tool(&["lookup", "service", "xy-oauth", "account", server]);
        match code {
            Some(0) => Some(serde_json::from_str(&out).expect("the item is a JSON record")),
            Some(1) if stderr.is_empty() => None,
            _ => panic!("secret-tool lookup: {code:?} {stderr}"),
        }
    }
}

fn daemon(env: Env, ss: &SecretService, force: Option<&str>) -> TestDaemon {
    let address = ss.address.clone();
    let force = force.map(str::to_owned);
    TestDaemon::start_in_adjusted(env, move |cmd| {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", address)
            .env_remove("XY_AUTH_STORE");
        if let Some(f) = force {
            cmd.env("XY_AUTH_STORE", f);
        }
    })
}

fn status_of(d: &TestDaemon) -> Value {
    d.result("auth_status", Some(json!({"name": "remote"})))["servers"][0].clone()
}

/// Every file under `dir`, recursively, with its content.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out
}

#[test]
fn grants_live_in_the_secret_service_when_one_answers_on_the_session_bus() {
    const TEST: &str = "grants_live_in_the_secret_service_when_one_answers_on_the_session_bus";
    for tool in ["dbus-daemon", "gnome-keyring-daemon", "secret-tool"] {
        if which(tool).is_none() {
            err(&format!(
                "SKIP {TEST}: no {tool} (apt-get install dbus gnome-keyring libsecret-tools)"
            ));
            return;
        }
    }
    let fx = Fixture::start(&FixtureOptions::default());
    let env = Env::new();
    let ss = SecretService::start(&env.root.path().join("home"));
    env.write_config(
        "remote",
        &format!(
            "url {:?}\nport {}\nauth {{\n    oauth\n}}\n",
            fx.mcp_url(),
            free_port()
        ),
    );
    let d = daemon(env, &ss, None);
    let st = status_of(&d);
    assert_eq!(st["state"], "not_logged_in", "{st}");
    assert!(
        st["store"].as_str().unwrap().starts_with("Secret Service"),
        "{st}"
    );

    // A login, its URL followed as a browser would.
    let started = d.result("auth_login", Some(json!({"name": "remote"})));
    let url = started["url"].as_str().unwrap();
    match ureq::get(url).call() {
        Ok(_) | Err(ureq::Error::StatusCode(_)) => {}
        Err(e) => panic!("following {url}: {e}"),
    }
    let done = wait_some("the login completes", DEADLINE, || {
        let r = d.result(
            "auth_login_wait",
            Some(json!({"login_id": started["login_id"], "timeout_ms": 1000})),
        );
        (r["done"] == true).then_some(r)
    });
    assert_eq!(done["grant"]["issuer"], fx.issuer(), "{done}");

    let item = ss.item("remote").unwrap_or_else(|| {
        panic!(
            "the grant is not in the Secret Service: {}",
            d.env.daemon_log()
        )
    });
    assert_eq!(item["url"], fx.mcp_url(), "the item is the grant record");
    let token = item["credentials"]["token_response"]["access_token"]
        .as_str()
        .expect("the record holds the access token")
        .to_owned();
    let state_dir = d.env.state_dir();
    assert!(
        !state_dir.join("auth").exists()
            || std::fs::read_dir(state_dir.join("auth")).unwrap().count() == 0,
        "the file store was written"
    );
    let leaks: Vec<_> = files_under(&d.env.root.path().join("s"))
        .into_iter()
        .filter(|(_, b)| b.windows(token.len()).any(|w| w == token.as_bytes()))
        .map(|(p, _)| p)
        .collect();
    assert!(leaks.is_empty(), "the access token is in {leaks:?}");

    // A new daemon reads the grant back from the Secret Service.
    let mut d = d;
    d.terminate();
    let d = daemon(d.take_env(), &ss, None);
    let st = status_of(&d);
    assert_eq!(st["state"], "logged_in", "{st}");
    assert_eq!(st["grant"]["issuer"], fx.issuer(), "{st}");

    // Logout deletes the item.
    let out = d.result("auth_logout", Some(json!({"name": "remote"})));
    assert_eq!(out["logged_out"], true, "{out}");
    assert_eq!(ss.item("remote"), None, "the item outlived the logout");
    assert_eq!(status_of(&d)["state"], "not_logged_in");
    assert!(!d.env.state_dir().join("auth").join("remote.json").exists());

    // Forced, the file store is used with the Secret Service present.
    let mut d = d;
    d.terminate();
    let d = daemon(d.take_env(), &ss, Some("file"));
    let st = status_of(&d);
    assert!(
        st["store"].as_str().unwrap().starts_with("file store"),
        "{st}"
    );
}
