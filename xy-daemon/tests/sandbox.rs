//! SPEC §21 end to end on Linux: the exfiltration child (`xy-test-exfil`)
//! and its grandchild, under `sandbox { network "none" }`, with `read` and
//! `write` lines, and without a block; a rule the kernel cannot enforce
//! (a pretended Landlock ABI) fails the spawn with `sandbox_unavailable`.
#![cfg(target_os = "linux")]

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::helper::*;

/// The port of slot `n`: a free port, the same for every use of `n` in
/// this test binary. These children really listen on their ports (the
/// `listen` probe), so the fixed `helper::port` numbers, distinct only
/// within one daemon, would collide with other tests running at once.
fn port(n: u16) -> u16 {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static PORTS: OnceLock<Mutex<HashMap<u16, u16>>> = OnceLock::new();
    let mut ports = PORTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *ports.entry(n).or_insert_with(free_port)
}

/// A temp HOME with secrets in it, a working dir per server, listeners.
struct Scene {
    env: Env,
    home: PathBuf,
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
}

impl Scene {
    fn new() -> Scene {
        let env = Env::new();
        let home = env.root.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "-----BEGIN FAKE KEY-----\n").unwrap();
        std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
        for d in ["notes", "inbox"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
            std::fs::write(home.join(d).join("a.md"), "note\n").unwrap();
        }
        Scene {
            env,
            home,
            tcp: std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            udp: std::net::UdpSocket::bind("127.0.0.1:0").unwrap(),
        }
    }

    /// A server's working dir, with a file in it.
    fn working_dir(&self, name: &str) -> PathBuf {
        let wd = self.env.root.path().join(format!("wd-{name}"));
        std::fs::create_dir_all(&wd).unwrap();
        std::fs::write(wd.join("own.txt"), "mine\n").unwrap();
        wd
    }

    /// The probes every exfiltration server runs; `other` is another
    /// server's name (its working dir and config file are read).
    fn probes(&self, me: &str, other: &str, port: u16) -> Value {
        let h = &self.home;
        json!([
            {"op": "read", "path": h.join(".ssh/id_rsa"), "label": "~/.ssh/id_rsa"},
            {"op": "read", "path": self.env.root.path().join(format!("wd-{other}/own.txt")), "label": "other wd"},
            {"op": "read", "path": self.env.config_dir().join(format!("{other}.kdl")), "label": "other config"},
            {"op": "read", "path": self.env.state_dir(), "label": "state dir"},
            {"op": "write", "path": h.join(".bashrc"), "label": "~/.bashrc"},
            {"op": "connect", "addr": self.tcp.local_addr().unwrap()},
            {"op": "udp", "addr": self.udp.local_addr().unwrap()},
            {"op": "unix", "path": self.env.socket, "label": "xyd socket"},
            // The control: its own working dir is always readable.
            {"op": "read", "path": self.env.root.path().join(format!("wd-{me}/own.txt")), "label": "own wd"},
            {"op": "read", "path": h.join("notes/a.md"), "label": "~/notes/a.md"},
            {"op": "write", "path": h.join("notes/a.md"), "label": "write ~/notes/a.md"},
            {"op": "write", "path": h.join("inbox/a.md"), "label": "write ~/inbox/a.md"},
            // Its own configured port may be listened on, no other.
            {"op": "listen", "addr": format!("127.0.0.1:{port}")},
            {"op": "listen", "addr": format!("127.0.0.1:{}", free_port())},
        ])
    }

    fn config(&self, me: &str, other: &str, port: u16, sandbox: &str) -> String {
        let probes = self.probes(me, other, port).to_string();
        format!(
            "command \"{}\"\nargs \"--probes\" {probes:?}\nport {port}\nworking-dir \"{}\"\n\
             env {{\n    HOME \"{}\"\n}}\n{sandbox}",
            testbin("xy-test-exfil").display(),
            self.working_dir(me).display(),
            self.home.display(),
        )
    }
}

/// The JSON lines `name` printed, once its `done` line is there.
fn results(d: &TestDaemon, name: &str) -> Vec<Value> {
    wait_some(&format!("{name}'s probes"), DEADLINE, || {
        let lines: Vec<Value> = log_lines(d, name, json!({"tail": 200}))
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        lines.iter().any(|v| v["done"] == true).then_some(lines)
    })
}

/// `probe` → outcome, for `who` (`child` or `grandchild`).
fn outcomes(lines: &[Value], who: &str) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|v| v["who"] == who && v["probe"].is_string())
        .map(|v| {
            (
                v["probe"].as_str().unwrap().to_owned(),
                format!("{} ({})", v["outcome"].as_str().unwrap(), v["detail"]),
            )
        })
        .collect()
}

fn outcome_of<'a>(got: &'a [(String, String)], probe: &str) -> &'a str {
    got.iter()
        .find(|(p, _)| p == probe)
        .map(|(_, o)| o.as_str())
        .unwrap_or_else(|| panic!("no probe {probe:?} in {got:?}"))
}

const EXFIL: [&str; 8] = [
    "read ~/.ssh/id_rsa",
    "read other wd",
    "read other config",
    "read state dir",
    "write ~/.bashrc",
    "tcp connect",
    "udp send",
    "unix connect xyd socket",
];

/// The two `listen` probes: (own configured port, another port).
fn listens(got: &[(String, String)], own: u16) -> (&str, &str) {
    let own_probe = format!("listen 127.0.0.1:{own}");
    let mine = outcome_of(got, &own_probe);
    let other = got
        .iter()
        .find(|(p, _)| p.starts_with("listen ") && *p != own_probe)
        .map(|(_, o)| o.as_str())
        .unwrap_or_else(|| panic!("no second listen probe in {got:?}"));
    (mine, other)
}

fn exfil_outcome<'a>(got: &'a [(String, String)], short: &str) -> &'a str {
    got.iter()
        .find(|(p, _)| p.starts_with(short))
        .map(|(_, o)| o.as_str())
        .unwrap_or_else(|| panic!("no probe {short:?} in {got:?}"))
}

#[test]
fn network_none_stops_every_probe_and_no_block_stops_none() {
    let scene = Scene::new();
    let none = "sandbox {\n    network \"none\"\n}\n";
    let named = "sandbox {\n    read \"~/notes\"\n    write \"~/inbox\"\n    network \"none\"\n}\n";
    scene
        .env
        .write_config("boxed", &scene.config("boxed", "open", port(1), none));
    scene
        .env
        .write_config("named", &scene.config("named", "open", port(2), named));
    scene
        .env
        .write_config("open", &scene.config("open", "boxed", port(3), ""));
    let d = TestDaemon::start_in(scene.env);

    for (name, own) in [("boxed", port(1)), ("named", port(2))] {
        let lines = results(&d, name);
        for who in ["child", "grandchild"] {
            let got = outcomes(&lines, who);
            let (mine, other) = listens(&got, own);
            assert!(mine.starts_with("allowed"), "{name} {who}: own port {mine}");
            assert!(
                other.starts_with("blocked"),
                "{name} {who}: other port {other}"
            );
            for probe in EXFIL {
                let o = exfil_outcome(&got, probe);
                assert!(o.starts_with("blocked"), "{name} {who}: {probe} → {o}");
            }
            assert!(
                outcome_of(&got, "read own wd").starts_with("allowed"),
                "{name} {who}: {got:?}"
            );
        }
        let gc = lines
            .iter()
            .find(|v| v["who"] == "grandchild" && v["no_new_privs"].is_string())
            .unwrap_or_else(|| panic!("{name}: no grandchild status in {lines:?}"));
        assert_eq!(gc["no_new_privs"], "1", "{gc}");
        assert_eq!(gc["seccomp"], "2", "filter mode: {gc}");
    }
    // `read`/`write` open exactly what they name.
    let named = outcomes(&results(&d, "named"), "child");
    assert!(
        outcome_of(&named, "read ~/notes/a.md").starts_with("allowed"),
        "{named:?}"
    );
    assert!(
        outcome_of(&named, "write write ~/notes/a.md").starts_with("blocked"),
        "{named:?}"
    );
    assert!(
        outcome_of(&named, "write write ~/inbox/a.md").starts_with("allowed"),
        "{named:?}"
    );
    let boxed = outcomes(&results(&d, "boxed"), "child");
    assert!(
        outcome_of(&boxed, "read ~/notes/a.md").starts_with("blocked"),
        "{boxed:?}"
    );
    assert!(
        outcome_of(&boxed, "write write ~/inbox/a.md").starts_with("blocked"),
        "{boxed:?}"
    );

    // Without a block, everything gets through (the child works).
    let lines = results(&d, "open");
    for who in ["child", "grandchild"] {
        let got = outcomes(&lines, who);
        for probe in EXFIL {
            let o = exfil_outcome(&got, probe);
            assert!(o.starts_with("allowed"), "open {who}: {probe} → {o}");
        }
        let (mine, other) = listens(&got, port(3));
        assert!(
            mine.starts_with("allowed") && other.starts_with("allowed"),
            "open {who}: {got:?}"
        );
    }
}

#[test]
fn a_private_temp_dir_is_given_and_emptied_at_each_spawn() {
    let env = Env::new();
    let home = env.root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let script = "echo \"tmp=$TMPDIR\"; ls -A \"$TMPDIR\"; touch \"$TMPDIR/left\" && echo wrote; exec sleep 60";
    env.write_config(
        "t",
        &format!(
            "command \"/bin/sh\"\nargs \"-c\" {script:?}\nport {}\nworking-dir \"{}\"\n\
             env {{\n    HOME \"{}\"\n}}\nsandbox {{\n    network \"none\"\n}}\n",
            port(4),
            env.root.path().display(),
            home.display()
        ),
    );
    let d = TestDaemon::start_in(env);
    let tmp = d.env.state_dir().join("sandbox/t/tmp");
    let want = format!("tmp={}", tmp.display());
    let lines = wait_some("the first spawn's lines", DEADLINE, || {
        let l = log_lines(&d, "t", json!({"tail": 50}));
        l.iter().any(|x| x == "wrote").then_some(l)
    });
    assert!(lines.contains(&want), "{lines:?}");
    assert!(tmp.join("left").exists());
    d.client().result("restart", Some(json!({"name": "t"})));
    wait_for("the second spawn", DEADLINE, || {
        log_lines(&d, "t", json!({"tail": 50}))
            .iter()
            .filter(|x| *x == "wrote")
            .count()
            == 2
    });
    let lines = log_lines(&d, "t", json!({"tail": 50}));
    assert!(
        !lines.iter().any(|x| x == "left"),
        "the temp dir was not emptied: {lines:?}"
    );
}

fn start_failure(vars: &[(&str, &str)], sandbox: &str) -> Value {
    let env = Env::new();
    env.write_config(
        "s",
        &format!(
            "command \"{}\"\nport {}\nsandbox {{\n{sandbox}\n}}\n",
            testbin("xy-test-sleep").display(),
            port(5)
        ),
    );
    let vars: Vec<(&str, std::ffi::OsString)> =
        vars.iter().map(|(k, v)| (*k, (*v).into())).collect();
    let d = TestDaemon::start_in_with(env, &vars);
    wait_for("s failed", DEADLINE, || d.entry("s")["state"] == "failed");
    d.client()
        .error("start", Some(json!({"name": "s"})), -32006)
}

#[test]
fn a_rule_the_kernel_cannot_enforce_fails_the_spawn() {
    let err = start_failure(&[("XY_SANDBOX_FAKE_ABI", "0")], "    read \"~/notes\"");
    let f = &err["data"]["failures"][0];
    assert_eq!(f["kind"], "sandbox_unavailable", "{err}");
    assert!(
        f["error"].as_str().unwrap().contains("needs Landlock"),
        "{err}"
    );
    let err = start_failure(&[("XY_SANDBOX_FAKE_ABI", "3")], "    network \"none\"");
    let f = &err["data"]["failures"][0];
    assert_eq!(f["kind"], "sandbox_unavailable", "{err}");
    assert!(
        f["error"]
            .as_str()
            .unwrap()
            .contains("sandbox.network \"none\" needs Landlock ABI 4"),
        "{err}"
    );
}

/// A confined child that dies on a denied read or `mkdir` is explained in
/// terms of the block, in `explain` and in `sandbox.denials`.
#[test]
fn a_denial_of_each_kind_is_explained_in_status() {
    let env = Env::new();
    let home = env.root.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "key\n").unwrap();
    // Not the temp root: that holds the home.
    let wd = env.root.path().join("wd");
    std::fs::create_dir_all(&wd).unwrap();
    let server = |flag: &str, path: &str, p: u16| {
        format!(
            "command \"{}\"\nargs \"{flag}\" \"{path}\"\nport {p}\nworking-dir \"{}\"\n\
             env {{\n    HOME \"{}\"\n}}\nsandbox {{\n}}\n",
            testbin("xy-test-exfil").display(),
            wd.display(),
            home.display()
        )
    };
    let key = home.join(".ssh/id_rsa").display().to_string();
    let dir = home.join("newdir").display().to_string();
    env.write_config("reader", &server("--read-or-die", &key, port(6)));
    env.write_config("maker", &server("--mkdir-or-die", &dir, port(7)));
    let d = TestDaemon::start_in(env);
    for (name, want) in [
        (
            "reader",
            "sandbox: read of ~/.ssh/id_rsa denied (not under sandbox.read)",
        ),
        (
            "maker",
            "sandbox: write to ~/newdir denied (not under sandbox.write)",
        ),
    ] {
        let start = std::time::Instant::now();
        let status = loop {
            let s = d.result("status", Some(json!({"name": name})));
            if s["explain"].is_string() {
                break s;
            }
            assert!(
                start.elapsed() < scaled(DEADLINE),
                "{name} never explained: {s}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let explain = status["explain"].as_str().unwrap();
        assert!(explain.starts_with(want), "{name}: {explain}");
        let sb = &status["sandbox"];
        // SPEC §25: the denial ends with the line that fixes it.
        let last = sb["denials"].as_array().unwrap().last().unwrap();
        assert!(
            last.as_str()
                .is_some_and(|d| d.starts_with(want) && d.contains("; fix: add `")),
            "{sb}"
        );
        let enforcement = sb["enforcement"].to_string();
        assert!(enforcement.contains("landlock abi"), "{enforcement}");
        // Under "any": Unix sockets with scoped abstract ones (ABI 6+), else none (D178).
        assert!(
            enforcement.contains("unix sockets allowed") || enforcement.contains("no unix sockets"),
            "{enforcement}"
        );
        assert!(
            sb["rules"]["read"].to_string().contains("\"/usr\""),
            "the defaults are shown: {sb}"
        );
        assert!(!std::path::Path::new(&dir).exists());
    }
}

/// A loopback HTTP server answering `200 ok` to every request, on its own
/// thread for the test's life.
fn http_ok_listener() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = Vec::new();
                let mut b = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    port
}

/// `allow-host` opens exactly its host:port, through xy's egress proxy
/// (plain and CONNECT); another port is refused and shows as a denial; a
/// client that ignores the proxy gets no network.
#[test]
fn allow_host_goes_through_the_egress_proxy_only() {
    let curl = "/usr/bin/curl";
    assert!(
        std::path::Path::new(curl).exists(),
        "this test drives curl through the proxy"
    );
    let allowed = http_ok_listener();
    let other = http_ok_listener();
    let env = Env::new();
    let home = env.root.path().join("home");
    let wd = env.root.path().join("wd");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&wd).unwrap();
    let script = format!(
        "c() {{ {curl} -s -o /dev/null --max-time 5 \"$@\"; }}; \
         echo \"plain $(c -w '%{{http_code}}' http://localhost:{allowed}/)\"; \
         echo \"other $(c -w '%{{http_code}}' http://localhost:{other}/)\"; \
         echo \"tunnel $(c -p -w '%{{http_code}}' http://localhost:{allowed}/)\"; \
         echo \"direct $(c --noproxy '*' -w '%{{http_code}}' http://127.0.0.1:{allowed}/)\"; \
         echo finished; exec sleep 60"
    );
    env.write_config(
        "net",
        &format!(
            "command \"/bin/sh\"\nargs \"-c\" {script:?}\nport {}\nworking-dir \"{}\"\n\
             env {{\n    HOME \"{}\"\n}}\nsandbox {{\n    network \"allow\"\n    \
             allow-host \"localhost:{allowed}\"\n}}\n",
            port(8),
            wd.display(),
            home.display()
        ),
    );
    let d = TestDaemon::start_in(env);
    let lines = wait_some("curl's results", DEADLINE, || {
        let l = log_lines(&d, "net", json!({"tail": 50}));
        l.iter().any(|x| x == "finished").then_some(l)
    });
    for want in ["plain 200", "other 403", "tunnel 200", "direct 000"] {
        assert!(lines.iter().any(|l| l == want), "{want}: {lines:?}");
    }
    let status = d.result("status", Some(json!({"name": "net"})));
    let sb = &status["sandbox"];
    let denial = format!(
        "sandbox: connection to localhost:{other} denied (network \"allow\": not an allow-host line (localhost:{allowed})); \
         fix: add `allow-host \"localhost:{other}\"` to the sandbox block"
    );
    assert!(
        sb["denials"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == &json!(denial)),
        "{sb}"
    );
    assert!(
        sb["enforcement"]
            .to_string()
            .contains("egress proxy 127.0.0.1:"),
        "{sb}"
    );
}

/// `sandbox_test` over a raw socket line: under `network "none"` every
/// probe (and the grandchild's) is blocked; without a block all get
/// through; an unknown server is the usual error.
#[test]
fn sandbox_test_runs_the_probes_as_the_server_would_be_confined() {
    let scene = Scene::new();
    std::fs::write(scene.home.join(".bashrc"), "# rc\n").unwrap();
    let none = "sandbox {\n    network \"none\"\n}\n";
    scene
        .env
        .write_config("boxed", &scene.config("boxed", "open", port(9), none));
    scene
        .env
        .write_config("open", &scene.config("open", "boxed", port(10), ""));
    let d = TestDaemon::start_in(scene.env);
    let mut c = d.client();
    c.send(r#"{"jsonrpc":"2.0","id":7,"method":"sandbox_test","params":{"name":"boxed"}}"#);
    let reply = c.recv();
    assert_eq!(reply["id"], 7, "{reply}");
    let r = &reply["result"];
    assert_eq!(r["name"], "boxed");
    assert!(
        r["sandbox"]["enforcement"].to_string().contains("landlock"),
        "{r}"
    );
    let probes = r["probes"].as_array().unwrap();
    assert!(probes.len() >= 18, "child and grandchild: {r}");
    for p in probes {
        // A missing file is missing either way (Landlock hides no names).
        let want = if p["probe"].as_str().unwrap().contains(".aws") {
            "skipped"
        } else {
            "blocked"
        };
        assert_eq!(p["outcome"], want, "{p}");
    }
    assert!(
        probes.iter().any(|p| p["probe"] == "read ~/.ssh/id_rsa"),
        "{r}"
    );
    assert!(
        probes.iter().any(|p| p["probe"]
            .as_str()
            .unwrap()
            .starts_with("grandchild: unix connect")),
        "{r}"
    );

    let r = d.result("sandbox_test", Some(json!({"name": "open"})));
    assert!(r["sandbox"].is_null(), "{r}");
    for p in r["probes"].as_array().unwrap() {
        // ~/.aws/credentials does not exist in the temp home.
        if p["probe"].as_str().unwrap().contains(".aws") {
            assert_eq!(p["outcome"], "skipped", "{p}");
        } else {
            assert_eq!(p["outcome"], "allowed", "{p}");
        }
    }
    d.client()
        .error("sandbox_test", Some(json!({"name": "ghost"})), -32001);
}
