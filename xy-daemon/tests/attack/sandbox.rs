//! Issue 38 and 39 against the sandbox itself (SPEC §24, §25), on Linux:
//! under `network "none"` a `listen()` without a `bind()` and Unix
//! datagrams sent (or connected) to a path through a `socketpair` are
//! refused; a confined child's environment is built, not inherited
//! (`env-pass` adds a name); under `network "any"` Unix sockets work
//! (a server/client pair of the child's own) while abstract ones outside
//! the sandbox and xyd's control socket stay out of reach; a server keeps
//! a dot-dir in its private HOME across restarts; a server run by a
//! virtualenv's `python` (the official Python SDK) works under the starter
//! block; `sandbox test` on a starter block lets no exfiltration probe
//! through.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use xy_testbins::interop::{self, Interop};

use crate::helper::*;
use crate::stdio::client::{Era, Mcp};
use crate::stdio::stdio_config;

/// `xy-test-exfil --tricks DIR --env NAMES` as a stdio server: a stdio
/// server has no configured port of its own to listen on.
fn tricks_config(dir: &Path, names: &str, block: &str) -> String {
    let args = vec![
        "--tricks".to_owned(),
        dir.display().to_string(),
        "--env".to_owned(),
        names.to_owned(),
    ];
    format!(
        "{}working-dir {:?}\n{block}",
        stdio_config(&testbin("xy-test-exfil"), &args, free_port(), ""),
        dir.display().to_string()
    )
}

/// The JSON lines `name` wrote to stderr, once its `done` line is there.
fn report(d: &TestDaemon, name: &str) -> Vec<Value> {
    wait_some(&format!("{name}'s report"), DEADLINE, || {
        let lines: Vec<Value> = log_lines(d, name, json!({"tail": 200}))
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        lines.iter().any(|v| v["done"] == true).then_some(lines)
    })
}

fn trick<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|v| v["trick"] == name)
        .unwrap_or_else(|| panic!("no trick {name} in {lines:?}"))
}

fn env_seen(lines: &[Value]) -> &Value {
    lines
        .iter()
        .find(|v| v["env"].is_object())
        .unwrap_or_else(|| panic!("no env line in {lines:?}"))
}

/// A directory for a child's sockets, with a datagram socket listening in
/// it (`dgram.sock`), and an abstract socket named like the directory.
struct Sockets {
    dir: PathBuf,
    dgram: std::os::unix::net::UnixDatagram,
    _abstract: std::os::unix::net::UnixListener,
}

impl Sockets {
    fn new(env: &Env, name: &str) -> Sockets {
        use std::os::linux::net::SocketAddrExt;
        let unique = format!("xy-attack-{name}-{}", std::process::id());
        let dir = env.root.path().join(&unique);
        std::fs::create_dir_all(&dir).unwrap();
        let dgram = std::os::unix::net::UnixDatagram::bind(dir.join("dgram.sock")).unwrap();
        dgram.set_nonblocking(true).unwrap();
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(unique.as_bytes()).unwrap();
        let abstract_ = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        Sockets {
            dir,
            dgram,
            _abstract: abstract_,
        }
    }

    /// The datagrams that reached `dgram.sock`.
    fn received(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut b = [0u8; 64];
        while let Ok(n) = self.dgram.recv(&mut b) {
            out.push(String::from_utf8_lossy(&b[..n]).into_owned());
        }
        out
    }
}

#[test]
fn network_none_refuses_an_implicit_listen_and_unix_datagrams_to_a_path() {
    let env = Env::new();
    let s = Sockets::new(&env, "none");
    let h = Sockets::new(&env, "http");
    let none = "sandbox {\n    network \"none\"\n}\n";
    env.write_config("boxed", &tricks_config(&s.dir, "PATH", none));
    // An HTTP server may listen on its own port only: an unbound socket's
    // listen() is refused by xyd's listen guard.
    env.write_config(
        "web",
        &format!(
            "command {:?}\nargs \"--tricks\" {:?}\nport {}\nworking-dir {:?}\n{none}",
            testbin("xy-test-exfil").display().to_string(),
            h.dir.display().to_string(),
            free_port(),
            h.dir.display().to_string()
        ),
    );
    let d = TestDaemon::start_in(env);
    for name in ["boxed", "web"] {
        let lines = report(&d, name);
        let through: Vec<&Value> = ["listen_unbound", "dgram_sendto_path", "dgram_connect_path"]
            .into_iter()
            .map(|t| trick(&lines, t))
            .filter(|v| v["outcome"] != "blocked")
            .collect();
        assert!(through.is_empty(), "{name}: got through: {through:?}");
    }
    assert_eq!(s.received(), Vec::<String>::new(), "a datagram got out");
    assert_eq!(h.received(), Vec::<String>::new(), "a datagram got out");
}

const NAMES: &str = "XY_ATTACK_TOKEN,PATH,LANG,XDG_RUNTIME_DIR";

/// xyd with a token exported in its environment, as from the user's shell.
fn with_token(env: Env) -> TestDaemon {
    TestDaemon::start_in_with(
        env,
        &[
            ("XY_ATTACK_TOKEN", "exported-in-the-shell".into()),
            ("LANG", "C.UTF-8".into()),
        ],
    )
}

#[test]
fn env_pass_lets_one_name_through() {
    let env = Env::new();
    let passed = Sockets::new(&env, "passed");
    env.write_config(
        "passed",
        &tricks_config(
            &passed.dir,
            NAMES,
            "sandbox {\n    env-pass \"XY_ATTACK_TOKEN\"\n    network \"any\"\n}\n",
        ),
    );
    let d = with_token(env);
    let seen = env_seen(&report(&d, "passed")).clone();
    assert_eq!(seen["env"]["XY_ATTACK_TOKEN"], true, "{seen}");
    assert_eq!(seen["env"]["XDG_RUNTIME_DIR"], false, "{seen}");
}

#[test]
fn a_confined_childs_environment_is_built_not_inherited() {
    let env = Env::new();
    let plain = Sockets::new(&env, "plain");
    let names = NAMES;
    env.write_config(
        "plain",
        &tricks_config(&plain.dir, names, "sandbox {\n    network \"any\"\n}\n"),
    );
    env.write_config(
        "open",
        &tricks_config(&env.root.path().join("open"), names, ""),
    );
    std::fs::create_dir_all(env.root.path().join("open")).unwrap();
    let d = with_token(env);
    let plain = report(&d, "plain");
    let seen = env_seen(&plain);
    assert_eq!(seen["env"]["XY_ATTACK_TOKEN"], false, "{seen}");
    assert_eq!(seen["env"]["XDG_RUNTIME_DIR"], false, "{seen}");
    assert_eq!(seen["env"]["PATH"], true, "{seen}");
    assert_eq!(seen["env"]["LANG"], true, "{seen}");
    // HOME is the server's private data dir.
    let home = seen["home"].as_str().unwrap();
    assert!(home.ends_with("/xy/data/plain"), "{seen}");
    // Unconfined servers inherit as before.
    let seen = env_seen(&report(&d, "open")).clone();
    assert_eq!(seen["env"]["XY_ATTACK_TOKEN"], true, "{seen}");
}

#[test]
fn network_any_allows_own_unix_sockets_but_not_abstract_ones_outside_or_xyds() {
    let env = Env::new();
    let s = Sockets::new(&env, "any");
    env.write_config(
        "browser",
        &tricks_config(&s.dir, "PATH", "sandbox {\n    network \"any\"\n}\n"),
    );
    let d = TestDaemon::start_in(env);
    let lines = report(&d, "browser");
    assert_eq!(
        trick(&lines, "unix_pair")["outcome"],
        "allowed",
        "{}",
        trick(&lines, "unix_pair")
    );
    let abi = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    if abi.contains("landlock") {
        assert_eq!(
            trick(&lines, "abstract_outside")["outcome"],
            "blocked",
            "{}",
            trick(&lines, "abstract_outside")
        );
    }
    // xyd's own socket: accepted by the kernel, closed unanswered by xyd.
    let probes = d.result("sandbox_test", Some(json!({"name": "browser"})));
    let xyd = probes["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["probe"]
                .as_str()
                .is_some_and(|t| t.contains("xyd's socket"))
        })
        .collect::<Vec<_>>();
    assert_eq!(xyd.len(), 2, "child and grandchild: {probes}");
    for p in xyd {
        assert_eq!(p["outcome"], "blocked", "{p}");
    }
}

/// `sh -c` writing into `$HOME/.app`, then reading it back and sleeping.
fn dotdir_config(wd: &Path) -> String {
    let script = "mkdir -p \"$HOME/.app\" && echo run >> \"$HOME/.app/state\" && \
                  echo \"runs=$(wc -l < \"$HOME/.app/state\") home=$HOME\"; exec sleep 600";
    format!(
        "command \"/bin/sh\"\nargs \"-c\" {script:?}\nport {}\nworking-dir {:?}\n\
         sandbox {{\n    network \"any\"\n}}\n",
        free_port(),
        wd.display().to_string()
    )
}

#[test]
fn a_server_keeps_its_dot_dir_in_a_private_home_across_restarts() {
    let env = Env::new();
    let wd = env.root.path().join("wd");
    std::fs::create_dir_all(&wd).unwrap();
    env.write_config("keeper", &dotdir_config(&wd));
    env.write_config("other", &dotdir_config(&wd));
    let d = TestDaemon::start_in(env);
    let runs = |want: &str| {
        wait_some(&format!("keeper says {want}"), DEADLINE, || {
            log_lines(&d, "keeper", json!({"tail": 50}))
                .into_iter()
                .find(|l| l.starts_with(want))
        })
    };
    let first = runs("runs=1 ");
    assert!(first.ends_with("/xy/data/keeper"), "{first}");
    let home = PathBuf::from(first.split("home=").nth(1).unwrap());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&home).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", home.display());
    d.result("restart", Some(json!({"name": "keeper"})));
    runs("runs=2 ");
    // Another server's home is out of its reach.
    let probes = d.result("sandbox_test", Some(json!({"name": "other"})));
    let data = probes["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["probe"]
                .as_str()
                .is_some_and(|t| t.contains("another server's data dir"))
        })
        .unwrap_or_else(|| panic!("no data dir probe: {probes}"))
        .clone();
    assert_eq!(data["outcome"], "blocked", "{data}");
}

#[test]
fn a_venv_python_server_runs_under_the_starter_block_and_answers_a_call() {
    let sdk = match interop::python_sdk() {
        Interop::Ready(sdk) => sdk,
        Interop::Skip(skip) => {
            return skip
                .announce("a_venv_python_server_runs_under_the_starter_block_and_answers_a_call");
        }
    };
    // The project: a server script beside nothing (the venv is elsewhere,
    // reachable only because its `python` is the command).
    let env = Env::new();
    let project = env.root.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(&sdk.fastmcp_script, project.join("server.py")).unwrap();
    let port = free_port();
    let args = vec!["server.py".to_owned(), "--stdio".to_owned()];
    let config = format!(
        "{}working-dir {:?}\nsandbox {{\n    network \"any\"\n}}\n",
        stdio_config(&sdk.python, &args, port, ""),
        project.display().to_string()
    );
    env.write_config("py", &config);
    let d = TestDaemon::start_in(env);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut c = wait_some("the venv server lists tools", DEADLINE * 3, || {
        let mut c = Mcp::connected(&url, Era::V2026);
        let r = c.request("tools/list", json!({}));
        r.response()
            .get("result")
            .is_some_and(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .then_some(c)
    });
    let r = c.result(
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    assert_ne!(r["isError"], true, "{r}");
    assert!(r.to_string().contains('5'), "{r}");
    let status = d.result("status", Some(json!({"name": "py"})));
    let venv = sdk.python.parent().unwrap().parent().unwrap();
    let venv = std::fs::canonicalize(venv).unwrap();
    assert!(
        status.to_string().contains(&venv.display().to_string()),
        "the venv is a program rule: {status}"
    );
}

#[test]
fn sandbox_test_on_a_starter_block_lets_no_exfiltration_probe_through() {
    let env = Env::new();
    let home = env.root.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "-----BEGIN FAKE KEY-----\n").unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "[default]\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    let wd = env.root.path().join("wd");
    std::fs::create_dir_all(&wd).unwrap();
    // What `xyctl add` writes for an npx server (the npm cache granted).
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    let starter = format!(
        "command \"/bin/sh\"\nargs \"-c\" \"exec sleep 600\"\nport {}\nworking-dir {:?}\n\
         sandbox {{\n    write \"~/.npm\"\n    network \"any\"\n}}\n",
        free_port(),
        wd.display().to_string()
    );
    env.write_config("starter", &starter);
    env.write_config("neighbour", &dotdir_config(&wd));
    let d = TestDaemon::start_in_with(env, &[("HOME", home.clone().into_os_string())]);
    d.running_pid("neighbour");
    let r = d.result("sandbox_test", Some(json!({"name": "starter"})));
    let probes = r["probes"].as_array().unwrap();
    let mut through = Vec::new();
    for p in probes {
        let text = p["probe"].as_str().unwrap();
        // Loopback TCP and UDP are what `network "any"` allows.
        if text.contains("tcp connect") || text.contains("udp send") {
            continue;
        }
        if p["outcome"] == "allowed" {
            through.push(p.clone());
        }
    }
    assert!(through.is_empty(), "got through: {through:?} in {r}");
    for must in [".ssh", ".aws", "xy's state dir", "xyd's socket", ".bashrc"] {
        assert!(
            probes
                .iter()
                .any(|p| p["probe"].as_str().is_some_and(|t| t.contains(must))
                    && p["outcome"] == "blocked"),
            "{must} not probed and blocked: {r}"
        );
    }
}

/// A stdio server on Python's standard library that first tries to append
/// to each path in its arguments and says on stderr which it could
/// (`{"wrote": path, "ok": bool}`), then idles.
const APPENDER: &str = r#"
import json, sys, time
for p in sys.argv[1:]:
    try:
        with open(p, "a") as f: f.write("x")
        ok = True
    except OSError:
        ok = False
    sys.stderr.write(json.dumps({"wrote": p, "ok": ok}) + "\n"); sys.stderr.flush()
sys.stderr.write(json.dumps({"done": True}) + "\n"); sys.stderr.flush()
time.sleep(600)
"#;

/// SPEC §25: nothing named in a server's arguments becomes writable
/// because it is an existing file: its entry point (`server.py`) and a
/// data file beside it stay read-only under the starter block (issue 39:
/// the block granted write on existing files named in the arguments).
#[test]
fn an_existing_file_named_in_the_arguments_is_not_writable() {
    let env = Env::new();
    let code = env.root.path().join("code");
    let wd = env.root.path().join("wd");
    std::fs::create_dir_all(&code).unwrap();
    std::fs::create_dir_all(&wd).unwrap();
    let script = code.join("server.py");
    let data = code.join("data.json");
    std::fs::write(&script, APPENDER).unwrap();
    std::fs::write(&data, "{}").unwrap();
    let args = vec![
        script.display().to_string(),
        script.display().to_string(),
        data.display().to_string(),
        wd.join("ok.txt").display().to_string(),
    ];
    env.write_config(
        "app",
        &format!(
            "{}working-dir {:?}\nsandbox {{\n    network \"any\"\n}}\n",
            stdio_config(Path::new("/usr/bin/python3"), &args, free_port(), ""),
            wd.display().to_string()
        ),
    );
    let d = TestDaemon::start_in(env);
    let lines = report(&d, "app");
    let wrote = |p: &Path| {
        lines
            .iter()
            .find(|v| v["wrote"] == p.display().to_string())
            .unwrap_or_else(|| panic!("no line for {}: {lines:?}", p.display()))["ok"]
            .clone()
    };
    assert_eq!(wrote(&script), false, "the entry point: {lines:?}");
    assert_eq!(
        wrote(&data),
        false,
        "a data file named in the args: {lines:?}"
    );
    // The working dir is writable: the probe itself works.
    assert_eq!(wrote(&wd.join("ok.txt")), true, "{lines:?}");
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "{}");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), APPENDER);
}

/// SPEC §24: a confined child's environment is exactly the list — `PATH`,
/// `USER`, `LOGNAME`, `LANG`/`LC_*`, `TERM`, `TZ` from xyd's, its own
/// `HOME` and `TMPDIR`, the file's `env` block — and nothing else of
/// xyd's (an agent socket, a cloud key exported in the shell).
#[test]
fn a_confined_childs_environment_is_exactly_the_list() {
    let env = Env::new();
    let s = Sockets::new(&env, "exact");
    let names = "PATH,USER,LOGNAME,LANG,LC_ALL,TERM,TZ,HOME,TMPDIR,FROM_FILE,\
                 SSH_AUTH_SOCK,AWS_SECRET_ACCESS_KEY,XY_ATTACK_TOKEN,XDG_RUNTIME_DIR";
    env.write_config(
        "exact",
        &tricks_config(
            &s.dir,
            names,
            "env {\n    FROM_FILE \"yes\"\n}\nsandbox {\n    network \"any\"\n}\n",
        ),
    );
    let d = TestDaemon::start_in_with(
        env,
        &[
            ("USER", "someone".into()),
            ("LOGNAME", "someone".into()),
            ("LANG", "C.UTF-8".into()),
            ("LC_ALL", "C.UTF-8".into()),
            ("TERM", "xterm-256color".into()),
            ("TZ", "Europe/Stockholm".into()),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock".into()),
            ("AWS_SECRET_ACCESS_KEY", "exported-in-the-shell".into()),
            ("XY_ATTACK_TOKEN", "exported-in-the-shell".into()),
        ],
    );
    let seen = env_seen(&report(&d, "exact")).clone();
    for name in [
        "PATH",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "TERM",
        "TZ",
        "HOME",
        "TMPDIR",
        "FROM_FILE",
    ] {
        assert_eq!(seen["env"][name], true, "{name} missing: {seen}");
    }
    for name in [
        "SSH_AUTH_SOCK",
        "AWS_SECRET_ACCESS_KEY",
        "XY_ATTACK_TOKEN",
        "XDG_RUNTIME_DIR",
    ] {
        assert_eq!(seen["env"][name], false, "{name} leaked: {seen}");
    }
}
