//! SPEC §22, pinned installs, against the real registries (npm, PyPI):
//! skipped LOUDLY when a registry cannot be reached. A private HOME,
//! XDG dirs and `XDG_DATA_HOME` per test; the real `xyctl`, and the real
//! `xyd` it starts where the server must answer through xy.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{Home, Run, wait_for, wait_some};

const MEMORY: &str = "@modelcontextprotocol/server-memory";
/// Old enough for the default `min-age`.
const MEMORY_VERSION: &str = "2026.8.31";
/// Older versions, for `upgrade --to` and the pruning of a third one.
const MEMORY_OLDER: &str = "2026.7.4";
const MEMORY_OLDEST: &str = "2026.1.26";

/// A port nothing listens on now, never handed out before in this process
/// (a fixed range inside the kernel's ephemeral ports met a connection's
/// local port under load).
fn port() -> String {
    xy_testbins::locate::free_port().to_string()
}

/// Prints the skip so nobody can miss it, and says whether to skip.
fn registry_unreachable(test: &str, probe: &mut Command) -> bool {
    let ok = probe
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let bar = "!".repeat(78);
        xy_testbins::out::err(&bar);
        xy_testbins::out::err(&format!(
            "!!!!!! SKIP {test}: the registry cannot be reached (or the tool is missing)"
        ));
        xy_testbins::out::err(
            "!!!!!! This test checked NOTHING. Run it where the registry is reachable.",
        );
        xy_testbins::out::err(&bar);
    }
    !ok
}

fn npm_unreachable(test: &str) -> bool {
    registry_unreachable(
        test,
        Command::new("npm").args(["view", &format!("{MEMORY}@{MEMORY_VERSION}"), "version"]),
    )
}

/// A world with its own data dir, for every command and the daemon.
struct World {
    h: Home,
    data: PathBuf,
}

impl World {
    fn new(tag: &str) -> World {
        let h = Home::with_xdg(tag);
        let data = h.home().join("data");
        World { h, data }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.h.cmd(args);
        c.env("XDG_DATA_HOME", &self.data);
        // The private HOME drops the machine's package-manager settings;
        // its certificates and proxies are what reaches the registry here.
        for (k, v) in std::env::vars_os() {
            let key = k.to_string_lossy();
            let lower = key.to_ascii_lowercase();
            if lower.ends_with("_proxy")
                || lower.starts_with("npm_config_")
                || key.starts_with("PIP_")
                || matches!(
                    key.as_ref(),
                    "NODE_EXTRA_CA_CERTS"
                        | "SSL_CERT_FILE"
                        | "SSL_CERT_DIR"
                        | "REQUESTS_CA_BUNDLE"
                        | "CURL_CA_BUNDLE"
                )
            {
                c.env(k, v);
            }
        }
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run(self.cmd(args).output().unwrap())
    }

    fn packages(&self, name: &str) -> PathBuf {
        self.data.join("xy/packages").join(name)
    }

    fn config(&self, name: &str) -> String {
        std::fs::read_to_string(self.h.config_dir().join(format!("{name}.kdl"))).unwrap()
    }

    fn status(&self, name: &str) -> Value {
        let out = self.run(&["status", name, "--json"]).ok();
        serde_json::from_str(out.trim()).unwrap()
    }

    fn running_pid(&self, name: &str, not: Option<u64>) -> u64 {
        wait_some(&format!("{name} running"), Duration::from_secs(180), || {
            let s = self.status(name);
            (s["state"] == "running")
                .then(|| s["pid"].as_u64())
                .flatten()
                .filter(|p| Some(*p) != not)
        })
    }
}

/// The tool names `tools/list` answers through `xyctl connect <name>`.
fn tools_through_xy(w: &World, name: &str) -> Vec<String> {
    let answers = session_through_xy(w, name, &[serde_json::json!({"method": "tools/list"})]);
    let v = &answers[0];
    v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {v}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn lockfile(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("package-lock.json")).unwrap()).unwrap()
}

/// Install, offline start, lockfile, reinstall, and the two refusals.
#[test]
fn npm_install_is_pinned_confirmed_and_starts_offline() {
    if npm_unreachable("npm_install_is_pinned_confirmed_and_starts_offline") {
        return;
    }
    let w = World::new("xypk");
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");

    // Without --yes and without a terminal: nothing installed, nothing written.
    let err = w
        .run(&["--no-spawn", "add", "mem", "--npm", &spec])
        .fails(1);
    assert!(err.contains("--yes"), "{err}");
    assert!(!w.packages("mem").exists());
    assert!(!w.h.config_dir().join("mem.kdl").exists());

    // Too fresh for the asked min-age: refused with its publish time.
    let err = w
        .run(&[
            "--no-spawn",
            "add",
            "mem",
            "--npm",
            &spec,
            "--yes",
            "--min-age",
            "100000d",
        ])
        .fails(1);
    assert!(err.contains("published 2026-09-01T"), "{err}");
    assert!(err.contains("--allow-fresh"), "{err}");
    assert!(!w.packages("mem").exists());

    let p = port();
    let out = w
        .run(&[
            "--no-spawn",
            "add",
            "mem",
            "--npm",
            &spec,
            "--yes",
            "--port",
            &p,
        ])
        .ok();
    // The plan names the package, the install dir and the command.
    let dir = w.packages("mem").join(MEMORY_VERSION);
    assert!(out.contains(&format!("npm:{spec}")), "{out}");
    assert!(out.contains(&dir.display().to_string()), "{out}");
    let lock = lockfile(&dir);
    let pkgs = lock["packages"].as_object().unwrap();
    let deps: Vec<_> = pkgs.iter().filter(|(k, _)| !k.is_empty()).collect();
    assert!(deps.len() > 10, "{} packages", deps.len());
    for (k, p) in &deps {
        assert!(
            p["integrity"]
                .as_str()
                .is_some_and(|i| i.starts_with("sha512-")),
            "{k} has no integrity: {p}"
        );
    }
    let text = w.config("mem");
    assert!(!text.contains("npx"), "{text}");
    assert!(text.contains(&format!("package \"npm:{spec}\"")), "{text}");
    assert!(text.contains("transport \"stdio\""), "{text}");
    let config = xy_core::config::parse_server("mem", Path::new("mem.kdl"), &text).unwrap();
    assert!(Path::new(&config.command).is_absolute(), "{text}");
    assert!(config.command.ends_with("/node"), "{text}");
    let entry = PathBuf::from(&config.args[0]);
    assert!(entry.starts_with(&dir) && entry.is_file(), "{text}");

    // A reinstall (`npm ci` from the lock) restores the tree, same lockfile.
    let lock_before = std::fs::read(dir.join("package-lock.json")).unwrap();
    std::fs::remove_file(&entry).unwrap();
    w.run(&[
        "--no-spawn",
        "add",
        "mem",
        "--npm",
        &spec,
        "--yes",
        "--force",
        "--port",
        &p,
    ])
    .ok();
    assert!(entry.is_file(), "the reinstall restored the entry point");
    assert_eq!(
        std::fs::read(dir.join("package-lock.json")).unwrap(),
        lock_before
    );
    assert_eq!(w.config("mem"), text);

    // The daemon (and so the server) cannot reach the registry: it starts
    // and answers anyway.
    let mut start = w.cmd(&["list"]);
    start.env("npm_config_registry", "http://127.0.0.1:9");
    Run(start.output().unwrap()).ok();
    w.running_pid("mem", None);
    let tools = tools_through_xy(&w, "mem");
    assert!(tools.iter().any(|t| t == "read_graph"), "{tools:?}");

    let st = w.status("mem");
    assert_eq!(st["package"]["ecosystem"], "npm", "{st}");
    assert_eq!(st["package"]["name"], MEMORY, "{st}");
    assert_eq!(st["package"]["version"], MEMORY_VERSION, "{st}");
    assert!(st["package"]["installed_at"].is_string(), "{st}");
    let human = w.run(&["status", "mem"]).ok();
    assert!(
        human.contains(&format!("npm:{spec} (installed 20")),
        "{human}"
    );
}

/// `upgrade --to` installs beside and restarts; `rollback` goes back; a
/// third version prunes the oldest.
#[test]
fn upgrade_and_rollback_switch_versions_and_keep_two() {
    if npm_unreachable("upgrade_and_rollback_switch_versions_and_keep_two") {
        return;
    }
    let w = World::new("xypu");
    w.run(&[
        "add",
        "mem",
        "--npm",
        &format!("{MEMORY}@{MEMORY_VERSION}"),
        "--yes",
        "--port",
        &port(),
    ])
    .ok();
    let pid1 = w.running_pid("mem", None);

    let out = w
        .run(&["upgrade", "mem", "--to", MEMORY_OLDER, "--yes"])
        .ok();
    assert!(out.contains(&format!("@{MEMORY_OLDER}")), "{out}");
    let pid2 = w.running_pid("mem", Some(pid1));
    assert_eq!(w.status("mem")["package"]["version"], MEMORY_OLDER);
    assert!(
        w.config("mem")
            .contains(&format!("/{MEMORY_OLDER}/node_modules/"))
    );
    assert!(w.packages("mem").join(MEMORY_VERSION).is_dir());
    assert!(w.packages("mem").join(MEMORY_OLDER).is_dir());
    assert!(
        tools_through_xy(&w, "mem")
            .iter()
            .any(|t| t == "read_graph")
    );

    w.run(&["rollback", "mem"]).ok();
    let pid3 = w.running_pid("mem", Some(pid2));
    assert_ne!(pid3, pid1);
    assert_eq!(w.status("mem")["package"]["version"], MEMORY_VERSION);
    assert!(
        w.packages("mem").join(MEMORY_OLDER).is_dir(),
        "rollback keeps both"
    );

    w.run(&["upgrade", "mem", "--to", MEMORY_OLDEST, "--yes"])
        .ok();
    w.running_pid("mem", Some(pid3));
    assert_eq!(w.status("mem")["package"]["version"], MEMORY_OLDEST);
    let mut kept: Vec<String> = std::fs::read_dir(w.packages("mem"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    kept.sort();
    assert_eq!(kept, [MEMORY_OLDEST, MEMORY_VERSION]);

    // Not a pinned server: a clear refusal.
    w.h.write_config(
        "plain",
        "command \"/bin/sleep\"\nargs \"1000\"\nport 8499\nautostart #false\n",
    );
    let err = w.run(&["upgrade", "plain", "--yes"]).fails(1);
    assert!(err.contains("not a pinned install"), "{err}");
}

/// `xyctl list` hints at servers started with `npx`/`uvx`.
#[test]
fn list_hints_at_unpinned_npx_servers() {
    let w = World::new("xyph");
    w.h.write_config(
        "loose",
        "command \"npx\"\nargs \"-y\" \"@modelcontextprotocol/server-memory\"\ntransport \"stdio\"\nport 8498\nautostart #false\n",
    );
    w.h.write_config(
        "fine",
        "command \"/bin/sleep\"\nargs \"1000\"\nport 8497\nautostart #false\n",
    );
    let r = w.run(&["list"]);
    r.ok();
    let err = r.stderr();
    assert!(
        err.contains(
            "hint: loose runs npx, which fetches whatever is newest at every start; \
             pin it: xyctl add loose --npm @modelcontextprotocol/server-memory --force"
        ),
        "{err}"
    );
    assert!(!err.contains("fine"), "{err}");
    let r = w.run(&["list", "--json"]);
    r.ok();
    assert!(!r.stderr().contains("hint"), "--json stays quiet");
}

/// The same for PyPI: a venv, wheels pinned by sha256, the console script.
#[test]
fn pypi_install_is_hash_pinned_and_answers() {
    if registry_unreachable(
        "pypi_install_is_hash_pinned_and_answers",
        Command::new("python3").args([
            "-c",
            "import urllib.request; urllib.request.urlopen('https://pypi.org/pypi/mcp-server-time/json', timeout=20)",
        ]),
    ) {
        return;
    }
    let w = World::new("xypy");
    w.run(&[
        "add",
        "tm",
        "--pypi",
        "mcp-server-time==2026.10.19",
        "--yes",
        "--port",
        &port(),
        "--",
        "--local-timezone",
        "UTC",
    ])
    .ok();
    let dir = w.packages("tm").join("2026.10.19");
    let lock = std::fs::read_to_string(dir.join("requirements.lock")).unwrap();
    let lines: Vec<&str> = lock.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(lines.len() > 5, "{lock}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("==") && l.contains(" --hash=sha256:")),
        "{lock}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("mcp_server_time==2026.10.19 ")),
        "{lock}"
    );
    let text = w.config("tm");
    assert!(!text.contains("uvx"), "{text}");
    assert!(
        text.contains("package \"pypi:mcp-server-time==2026.10.19\""),
        "{text}"
    );
    assert!(
        text.contains(&format!("command \"{}/venv/bin/python\"", dir.display())),
        "{text}"
    );
    wait_for("tm running", Duration::from_secs(180), || {
        let s = w.status("tm");
        assert_ne!(
            s["state"],
            "failed",
            "{s}\n{}",
            w.run(&["logs", "tm"]).stdout()
        );
        s["state"] == "running"
    });
    let tools = tools_through_xy(&w, "tm");
    assert!(tools.iter().any(|t| t == "get_current_time"), "{tools:?}");
    assert_eq!(w.status("tm")["package"]["ecosystem"], "pypi");
    wait_for("status says installed", Duration::from_secs(5), || {
        w.status("tm")["package"]["installed_at"].is_string()
    });
}

/// `min-age` covers the dependencies too (SPEC §24): with a cutoff just
/// after `mcp-server-time==2026.10.19` was uploaded, every wheel in the lock
/// was uploaded before it, though newer releases of its dependencies exist.
#[test]
fn pypi_dependencies_are_older_than_min_age() {
    if registry_unreachable(
        "pypi_dependencies_are_older_than_min_age",
        Command::new("python3").args([
            "-c",
            "import urllib.request; urllib.request.urlopen('https://pypi.org/pypi/mcp-server-time/json', timeout=20)",
        ]),
    ) {
        return;
    }
    // The top was uploaded 2026-10-19T06:48Z; the cutoff lands on 2026-10-20.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 1_792_454_400;
    let days = since / 86_400;
    let cutoff = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - days * 86_400;
    let w = World::new("xypa");
    w.run(&[
        "--no-spawn",
        "add",
        "tm",
        "--pypi",
        "mcp-server-time==2026.10.19",
        "--yes",
        "--min-age",
        &format!("{days}d"),
        "--port",
        &port(),
    ])
    .ok();
    let lock = w
        .packages("tm")
        .join("2026.10.19")
        .join("requirements.lock");
    let check = r##"
import json, sys, urllib.request, datetime
cutoff = datetime.datetime.fromtimestamp(int(sys.argv[2]), datetime.timezone.utc)
late = []
for line in open(sys.argv[1]):
    if line.startswith("#") or "==" not in line:
        continue
    name, version = line.split()[0].split("==")
    try:
        doc = json.load(urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=30))
        files = doc["releases"][version]
    except Exception as e:
        late.append(f"{name}=={version}: {e}")
        continue
    up = min(datetime.datetime.fromisoformat(f["upload_time_iso_8601"].replace("Z", "+00:00")) for f in files)
    if up > cutoff and not name.startswith("mcp_server_time"):
        late.append(f"{name}=={version} {up.isoformat()}")
print("\n".join(late))
"##;
    let out = Command::new("python3")
        .args(["-c", check])
        .arg(&lock)
        .arg(cutoff.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let late = String::from_utf8_lossy(&out.stdout);
    assert!(
        late.trim().is_empty(),
        "newer than min-age in the lock:\n{late}"
    );
}

/// `--registry server.json`: the npm package it names, its arguments and
/// plain variables, and a `secrets` placeholder for the secret one.
#[test]
fn a_server_json_installs_with_a_secrets_placeholder() {
    if npm_unreachable("a_server_json_installs_with_a_secrets_placeholder") {
        return;
    }
    let w = World::new("xypr");
    let json = w.h.home().join("server.json");
    std::fs::write(
        &json,
        format!(
            r#"{{"$schema":"https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
               "name":"io.github.modelcontextprotocol/server-memory","version":"{MEMORY_VERSION}",
               "packages":[{{"registryType":"npm","identifier":"{MEMORY}","version":"{MEMORY_VERSION}",
                 "transport":{{"type":"stdio"}},
                 "environmentVariables":[
                   {{"name":"MEMORY_API_TOKEN","isSecret":true,"isRequired":true}},
                   {{"name":"MEMORY_FILE_PATH","default":"/tmp/xy-memory.json"}}]}}]}}"#
        ),
    )
    .unwrap();
    let r = w.run(&[
        "--no-spawn",
        "add",
        "mem",
        "--registry",
        json.to_str().unwrap(),
        "--yes",
        "--port",
        &port(),
    ]);
    r.ok();
    assert!(
        r.stderr().contains("fill in the secret MEMORY_API_TOKEN"),
        "{}",
        r.stderr()
    );
    let text = w.config("mem");
    assert!(
        text.contains(&format!("package \"npm:{MEMORY}@{MEMORY_VERSION}\"")),
        "{text}"
    );
    let config = xy_core::config::parse_server("mem", Path::new("mem.kdl"), &text).unwrap();
    assert_eq!(config.env["MEMORY_FILE_PATH"], "/tmp/xy-memory.json");
    assert_eq!(config.secrets.len(), 1, "{text}");
    assert_eq!(config.secrets[0].name, "MEMORY_API_TOKEN");
    assert!(
        text.contains("MEMORY_API_TOKEN file=\"") && !text.contains("isSecret"),
        "{text}"
    );
}

/// A package without a program is refused before anything is downloaded.
#[test]
fn a_package_without_a_bin_is_refused_before_installing() {
    if npm_unreachable("a_package_without_a_bin_is_refused_before_installing") {
        return;
    }
    let w = World::new("xypb");
    let err = w
        .run(&[
            "--no-spawn",
            "add",
            "lp",
            "--npm",
            "left-pad@1.3.0",
            "--yes",
        ])
        .fails(1);
    assert!(err.contains("has no `bin`"), "{err}");
    assert!(!w.packages("lp").exists());
    assert!(!w.h.config_dir().join("lp.kdl").exists());
}

/// A local MCP Registry (`tests/data/registry/serve.py`, API v0.1) serving
/// `entries`; killed on drop.
struct Registry {
    child: std::process::Child,
    url: String,
    log: PathBuf,
}

impl Registry {
    fn start(dir: &Path, entries: &Value) -> Registry {
        let file = dir.join("entries.json");
        std::fs::write(&file, entries.to_string()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/registry/serve.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the test registry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        Registry {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log: dir.join("entries.json.log"),
        }
    }

    /// The request paths it served.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry entry as the official registry answers it.
fn entry(name: &str, version: &str, server: Value) -> Value {
    let mut s = serde_json::json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": format!("{name} for tests"),
        "version": version,
    });
    s.as_object_mut()
        .unwrap()
        .extend(server.as_object().unwrap().clone());
    serde_json::json!({
        "server": s,
        "_meta": {"io.modelcontextprotocol.registry/official": {
            "status": "active", "publishedAt": "2026-09-02T10:00:00Z",
            "updatedAt": "2026-09-02T10:00:00Z", "isLatest": true}}
    })
}

fn npm_package(version: &str) -> Value {
    serde_json::json!({"packages": [{
        "registryType": "npm", "registryBaseUrl": "https://registry.npmjs.org",
        "identifier": MEMORY, "version": version, "transport": {"type": "stdio"},
        "environmentVariables": [
            {"name": "MEMORY_API_TOKEN", "isSecret": true, "isRequired": true},
            {"name": "MEMORY_FILE_PATH", "default": "/tmp/xy-memory.json"}]}]})
}

fn registry_entries() -> Value {
    Value::Array(vec![
        entry(
            "io.github.modelcontextprotocol/server-memory",
            MEMORY_VERSION,
            npm_package(MEMORY_VERSION),
        ),
        entry(
            "io.github.example/memory-bank",
            MEMORY_OLDER,
            npm_package(MEMORY_OLDER),
        ),
        entry(
            "io.github.example/weather",
            "1.0.0",
            serde_json::json!({"remotes": [
                {"type": "streamable-http", "url": "https://weather.example.com/mcp"}]}),
        ),
    ])
}

/// `--registry <name>` answers without installing anything: not found
/// (with close names), a version that does not exist, an ambiguous
/// search, a remote-only entry, plain http to a non-loopback registry.
#[test]
fn registry_lookups_that_cannot_install_say_why() {
    let w = World::new("xyrl");
    let reg = Registry::start(w.h.home(), &registry_entries());
    let add = |server: &str, arg: &str| {
        w.run(&[
            "--no-spawn",
            "add",
            server,
            "--registry",
            arg,
            "--registry-url",
            &reg.url,
            "--yes",
        ])
    };
    let err = add("m", "io.github.nobody/memory").fails(1);
    assert!(
        err.contains("io.github.nobody/memory is not in http://127.0.0.1:")
            && err.contains("similar names: io.github.example/memory-bank"),
        "{err}"
    );
    let err = add("m", "io.github.modelcontextprotocol/server-memory@9.9.9").fails(1);
    assert!(err.contains("has no version 9.9.9"), "{err}");
    let err = add("m", "memory").fails(1);
    assert!(
        err.contains("2 servers in http://127.0.0.1:")
            && err.contains("io.github.example/memory-bank")
            && err.contains("io.github.modelcontextprotocol/server-memory")
            && err.contains("pass the full name"),
        "{err}"
    );
    let err = add("m", "nothing-like-it").fails(1);
    assert!(err.contains("no server in"), "{err}");
    let err = add("m", "io.github.example/weather").fails(1);
    assert!(
        err.contains("--url https://weather.example.com/mcp"),
        "{err}"
    );
    let err = w
        .run(&[
            "--no-spawn",
            "add",
            "m",
            "--registry",
            "memory",
            "--registry-url",
            "http://registry.example.com",
            "--yes",
        ])
        .fails(1);
    assert!(err.contains("only for a loopback host"), "{err}");
    // The name is one path segment (`%2F`), as the API asks.
    assert!(
        reg.requests()
            .contains(&"/v0.1/servers/io.github.example%2Fweather/versions/latest".to_owned()),
        "{:?}",
        reg.requests()
    );
    assert!(!w.h.config_dir().join("m.kdl").exists());
    assert!(!w.packages("m").exists());
}

/// `--registry <name>` installs what the registry's entry names, as
/// `--registry <file>` does; a word matching one name finds it, and the
/// plan names the entry.
#[test]
fn a_registry_name_installs_its_package() {
    if npm_unreachable("a_registry_name_installs_its_package") {
        return;
    }
    let w = World::new("xyrn");
    let reg = Registry::start(w.h.home(), &registry_entries());
    // A word that matches one server, without a terminal: the plan shows
    // the entry it found, and nothing is installed.
    let r = w.run(&[
        "--no-spawn",
        "add",
        "bank",
        "--registry",
        "bank",
        "--registry-url",
        &reg.url,
    ]);
    let err = r.fails(1);
    assert!(err.contains("confirming needs a terminal"), "{err}");
    assert!(
        r.stdout().contains(&format!(
            "registry  io.github.example/memory-bank {MEMORY_OLDER} from {}",
            reg.url
        )) && r.stdout().contains(&format!("npm:{MEMORY}@{MEMORY_OLDER}")),
        "{}",
        r.stdout()
    );
    assert!(!w.packages("bank").exists());
    let r = w.run(&[
        "--no-spawn",
        "add",
        "mem",
        "--registry",
        "io.github.modelcontextprotocol/server-memory",
        "--registry-url",
        &reg.url,
        "--yes",
        "--port",
        &port(),
    ]);
    r.ok();
    assert!(
        r.stderr().contains("fill in the secret MEMORY_API_TOKEN"),
        "{}",
        r.stderr()
    );
    let text = w.config("mem");
    assert!(
        text.contains(&format!("package \"npm:{MEMORY}@{MEMORY_VERSION}\"")),
        "{text}"
    );
    assert!(!text.contains("npx"), "{text}");
    let config = xy_core::config::parse_server("mem", Path::new("mem.kdl"), &text).unwrap();
    assert_eq!(config.env["MEMORY_FILE_PATH"], "/tmp/xy-memory.json");
    assert_eq!(config.secrets[0].name, "MEMORY_API_TOKEN");
    let lock = lockfile(&w.packages("mem").join(MEMORY_VERSION));
    assert!(lock["packages"].as_object().unwrap().len() > 5);
}

/// `import --pin`: the `npx -y <pkg>@<ver>` entry becomes a pinned install
/// after one confirmation; an `npx` line xy cannot read and a plain
/// command are imported as they are (the first with a reason); without
/// `--yes` and without a terminal nothing is installed or written.
#[test]
fn import_pin_turns_npx_entries_into_pinned_installs() {
    if npm_unreachable("import_pin_turns_npx_entries_into_pinned_installs") {
        return;
    }
    let w = World::new("xypi");
    let file = w.h.home().join("claude_desktop_config.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"mcpServers": {{
                "memory": {{"command": "npx", "args": ["-y", "{MEMORY}@{MEMORY_VERSION}"],
                            "env": {{"MEMORY_FILE_PATH": "/tmp/xy-pin-memory.json"}}}},
                "odd": {{"command": "npx", "args": ["--package=left-pad", "left-pad"]}},
                "plain": {{"command": "/bin/cat", "args": []}}
            }}}}"#
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let import = |extra: &[&str]| {
        let mut args = vec![
            "--no-spawn",
            "import",
            "claude-desktop",
            "--file",
            f,
            "--pin",
        ];
        args.extend_from_slice(extra);
        w.run(&args)
    };
    // No terminal, no --yes: the plan is shown, nothing happens.
    let r = import(&[]);
    let err = r.fails(1);
    assert!(err.contains("confirming needs a terminal"), "{err}");
    assert!(
        r.stdout()
            .contains(&format!("npm:{MEMORY}@{MEMORY_VERSION}")),
        "{}",
        r.stdout()
    );
    assert!(!w.packages("memory").exists());
    assert!(!w.h.config_dir().join("memory.kdl").exists());
    assert!(!w.h.config_dir().join("plain.kdl").exists());
    // A dry run says what would be pinned and installs nothing.
    let out = import(&["--dry-run"]).ok();
    assert!(
        out.contains(&format!(
            "would be created, pinned npm:{MEMORY}@{MEMORY_VERSION}"
        )),
        "{out}"
    );
    assert!(!w.packages("memory").exists());

    let out = import(&["--yes"]).ok();
    assert!(
        out.contains(&format!("created, pinned npm:{MEMORY}@{MEMORY_VERSION}")),
        "{out}"
    );
    assert!(
        out.contains("created (not pinned: its `npx` arguments"),
        "{out}"
    );
    let memory = w.config("memory");
    assert!(!memory.contains("npx"), "{memory}");
    assert!(
        memory.contains(&format!("package \"npm:{MEMORY}@{MEMORY_VERSION}\"")),
        "{memory}"
    );
    let config = xy_core::config::parse_server("memory", Path::new("memory.kdl"), &memory).unwrap();
    assert_eq!(config.env["MEMORY_FILE_PATH"], "/tmp/xy-pin-memory.json");
    let dir = w.packages("memory").join(MEMORY_VERSION);
    assert!(
        config.args[0].starts_with(&dir.display().to_string()),
        "{memory}"
    );
    assert!(lockfile(&dir)["packages"].as_object().unwrap().len() > 5);
    assert!(w.config("odd").contains("\"npx\""));
    assert!(!w.config("plain").contains("package "));
}

/// `requests` (id 2 on) in one session through `xyctl connect <name>`,
/// after the handshake; their answers in order.
fn session_through_xy(w: &World, name: &str, requests: &[Value]) -> Vec<Value> {
    let mut child = w
        .cmd(&["connect", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let mut answers = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let id = i + 2;
        let mut req = r.clone();
        req["jsonrpc"] = "2.0".into();
        req["id"] = id.into();
        writeln!(stdin, "{req}").unwrap();
        let v: Value = loop {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "connect closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                break v;
            }
        };
        answers.push(v);
    }
    drop(stdin);
    let _ = child.wait();
    answers
}

/// Every file under `dir` with its size and modification time.
fn tree(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), m.len(), m.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// D220: server-memory keeps `memory.jsonl` beside its own `dist/` unless
/// `MEMORY_FILE_PATH` says otherwise; the install finds the variable in the
/// package's code and points it into the server's data dir, so with the
/// defaults (the starter sandbox on, the package dir read-only) its writes
/// work, the file lands in the data dir and the package is untouched.
#[test]
fn memory_keeps_its_data_in_its_data_dir_not_its_package() {
    if npm_unreachable("memory_keeps_its_data_in_its_data_dir_not_its_package") {
        return;
    }
    let w = World::new("xypkdata");
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let p = port();
    let r = w.run(&[
        "--no-spawn",
        "add",
        "mem",
        "--npm",
        &spec,
        "--yes",
        "--port",
        &p,
    ]);
    let out = r.ok();
    let data = w.data.join("xy/data/mem");
    // The plan says where its data goes, before the install.
    assert!(
        out.contains(&format!("data      {}/", data.display())),
        "{out}"
    );
    let err = r.stderr();
    let file = data.join("memory.jsonl");
    assert!(
        err.contains(&format!("env MEMORY_FILE_PATH={}", file.display())),
        "{err}"
    );
    let text = w.config("mem");
    let config = xy_core::config::parse_server("mem", Path::new("mem.kdl"), &text).unwrap();
    assert_eq!(
        config.env.get("MEMORY_FILE_PATH").map(String::as_str),
        Some(file.to_str().unwrap()),
        "{text}"
    );
    assert!(
        text.contains("sandbox {"),
        "the defaults confine it: {text}"
    );
    let pkg = w.packages("mem").join(MEMORY_VERSION);
    let before = tree(&pkg);

    Run(w.cmd(&["list"]).output().unwrap()).ok();
    w.running_pid("mem", None);
    let call = |name: &str, args: Value| serde_json::json!({"method": "tools/call", "params": {"name": name, "arguments": args}});
    let answers = session_through_xy(
        &w,
        "mem",
        &[
            call(
                "create_entities",
                serde_json::json!({"entities": [{"name": "xy-data", "entityType": "test", "observations": ["one"]}]}),
            ),
            call("read_graph", serde_json::json!({})),
        ],
    );
    for a in &answers {
        assert_ne!(
            a["result"]["isError"],
            true,
            "a call failed through xy: {a}\n{}",
            w.status("mem")
        );
    }
    assert!(answers[1].to_string().contains("xy-data"), "{}", answers[1]);
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("xy-data"), "{written}");
    assert_eq!(tree(&pkg), before, "the package dir changed");
}

/// D221: a native add-on that needs its install script is named in the
/// plan, with the flag to pass, before anything is installed (it was only
/// said after the install, when `--ignore-scripts` had already skipped it).
#[test]
fn a_native_add_on_is_named_in_the_plan_with_allow_scripts() {
    if npm_unreachable("a_native_add_on_is_named_in_the_plan_with_allow_scripts") {
        return;
    }
    let w = World::new("xypkscripts");
    let r = w.run(&[
        "--no-spawn",
        "add",
        "db",
        "--npm",
        "@executeautomation/database-server@1.1.0",
    ]);
    let err = r.fails(1);
    assert!(err.contains("--yes"), "{err}");
    let plan = r.stdout();
    assert!(
        plan.contains("scripts   not run (--ignore-scripts):")
            && plan.contains("sqlite3@5.1.7 (native add-on)"),
        "{plan}"
    );
    assert!(
        plan.contains("add --allow-scripts to this command"),
        "{plan}"
    );
    assert!(!w.packages("db").exists(), "nothing installed");
    assert!(!w.h.config_dir().join("db.kdl").exists());
}

/// D290: a wheel that installs its own npm dependencies into its package
/// directory at its first call (`readabilipy` under `mcp-server-fetch`)
/// failed through xy, whose starter sandbox keeps the venv read-only. The
/// pinned install now installs them (the plan says so; `--ignore-scripts`,
/// `min-age`, a lockfile with integrity), so with the defaults the call
/// works and the package tree is not written at run time. Offline: a
/// local wheelhouse, a local PyPI JSON document, an npm dependency from a
/// tarball shipped in the wheel (`tests/data/jsneeds/make.py`).
#[test]
fn a_wheels_npm_dependencies_are_installed_with_it() {
    let test = "a_wheels_npm_dependencies_are_installed_with_it";
    if registry_unreachable(test, Command::new("npm").arg("--version"))
        || registry_unreachable(test, Command::new("python3").args(["-m", "venv", "--help"]))
    {
        return;
    }
    let w = World::new("xypkjs");
    let made = w.h.home().join("made");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jsneeds/make.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(&made)
        .output()
        .unwrap();
    assert!(o.status.success(), "make.py: {o:?}");
    let pypi_port = xy_testbins::locate::free_port();
    let mut api = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1"])
        .arg(pypi_port.to_string())
        .arg("--directory")
        .arg(made.join("pypi"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _api = Kill(&mut api);
    wait_for("the PyPI document server", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", pypi_port)).is_ok()
    });
    // `add js --pypi jsneeds==1.0` offline: the wheel from `made`, npm
    // from its cache.
    let add = |extra: &[&str]| {
        let p = port();
        let mut args = vec!["--no-spawn", "add", "js", "--pypi", "jsneeds==1.0", "--yes"];
        args.extend_from_slice(extra);
        args.extend(["--port", p.as_str()]);
        Run(w
            .cmd(&args)
            .env("XY_PYPI_URL", format!("http://127.0.0.1:{pypi_port}"))
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", made.join("wheels"))
            .env("npm_config_offline", "true")
            .output()
            .unwrap())
    };
    let r = add(&[]);
    let plan = r.ok();
    assert!(
        plan.contains("a package.json a wheel ships, where its code runs npm")
            && plan.contains("--ignore-scripts --before min-age"),
        "the plan says it: {plan}"
    );
    let err = r.stderr();
    assert!(
        err.contains(
            "jsneeds/js: its npm dependencies installed with the package (tiny@1.0.0; 1 package,"
        ),
        "{err}"
    );
    let venv = w.packages("js").join("1.0/venv");
    let js = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages/jsneeds/js"))
        .find(|p| p.is_dir())
        .expect("the JavaScript part is installed");
    let lock = lockfile(&js);
    assert!(
        lock["packages"]["node_modules/tiny"]["integrity"]
            .as_str()
            .is_some_and(|i| i.starts_with("sha512-")),
        "{lock}"
    );
    assert!(js.join("node_modules/tiny/index.js").is_file());
    let text = w.config("js");
    assert!(
        text.contains("sandbox {"),
        "the defaults confine it: {text}"
    );
    let before = tree(&w.packages("js"));

    Run(w.cmd(&["list"]).output().unwrap()).ok();
    w.running_pid("js", None);
    let answers = session_through_xy(
        &w,
        "js",
        &[serde_json::json!({"method": "tools/call", "params": {"name": "js", "arguments": {}}})],
    );
    assert_eq!(
        answers[0]["result"]["content"][0]["text"],
        "tiny works",
        "the call through xy with the defaults: {}\n{}",
        answers[0],
        w.status("js")
    );
    assert_eq!(tree(&w.packages("js")), before, "the package dir changed");

    // A reinstall of the same version installs the same tree from the
    // lockfile (`npm ci`).
    add(&["--force"]).ok();
    assert_eq!(lockfile(&js), lock, "the reinstall keeps the lockfile");
}
